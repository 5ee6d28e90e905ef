"""`rmtui` and `rmtui demo` with stdout piped or redirected (`rmtui | cat`, `install.sh | tee log`):
the workbench does not open (it would draw over the real terminal, the one stdin and stderr
still are), stderr says why in one line and stdout gets what the headless command prints."""

from __future__ import annotations

import os
import pty
import shlex
import subprocess
import sys
from pathlib import Path

from rmtui.engine.host.demo import create_demo_root
from rmtui.engine.memory.validation import validate_root


def piped(*args: str, cwd: Path) -> tuple[int, str, str]:
    """Run ``python -m rmtui ARGS`` with stdin and stderr on a real pseudo-terminal and stdout a
    pipe, as `rmtui ARGS | cat` typed in a terminal does."""
    leader, follower = pty.openpty()
    err_path = cwd / "stderr.txt"
    try:
        with open(err_path, "wb") as err_copy:
            # stderr: the terminal; a copy of what reaches it is read from the leader side below
            proc = subprocess.Popen([sys.executable, "-m", "rmtui", *args], stdin=follower, stdout=subprocess.PIPE,
                                    stderr=follower, cwd=cwd, env=dict(os.environ))
            os.close(follower)
            follower = -1
            try:
                out, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:  # the workbench opened on the terminal and waits for keys
                proc.kill()
                proc.wait()
                raise AssertionError("the workbench opened although stdout is a pipe") from None
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the terminal's other side is closed: all was read
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            err_copy.write(b"".join(chunks))
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    return proc.returncode, out.decode(), err_path.read_text(errors="replace").replace("\r\n", "\n")


def test_rmtui_piped_prints_the_headless_status_instead_of_opening(tmp_path):
    root = create_demo_root(tmp_path / "root")
    code, out, err = piped("--root", str(root.path), cwd=tmp_path)
    assert code == 0, err
    status = f"rmtui --headless --root {shlex.quote(str(root.path))} status"
    line = [x for x in err.splitlines() if x.strip()]
    assert line == [f"rmtui: stdout is not a terminal, so the workbench does not open; this is `{status}`"]
    # stdout holds exactly what the headless command prints
    headless = subprocess.run([sys.executable, "-m", "rmtui", *shlex.split(status)[1:]], capture_output=True,
                              text=True, cwd=tmp_path, timeout=60)
    assert headless.returncode == 0
    assert out == headless.stdout and out.startswith(f"root: {root.path}\n")
    assert "\x1b[" not in out  # no escape sequence of a drawn screen


def test_rmtui_demo_piped_creates_the_root_and_says_where_it_is(tmp_path):
    target = tmp_path / "demo"
    code, out, err = piped("demo", "--path", str(target), cwd=tmp_path)
    assert code == 0, err
    assert validate_root(target).ok  # the demo root is made all the same
    where = shlex.quote(str(target.resolve()))
    assert out.splitlines() == [f"demo root: {target.resolve()}",
                                f"headless commands on it: rmtui --headless --root {where} status",
                                f"the workbench on it, in a terminal: rmtui --root {where}"]
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines == ["rmtui: stdout is not a terminal, so the workbench does not open; "
                     "this is where the demo root is"]
