"""What the README and the generated files tell a person matches what the program does."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rmtui.engine.memory.config import CONFIG_FILE

README = Path(__file__).resolve().parent.parent / "README.md"


async def test_the_readme_names_every_mcp_tool(root):
    from rmtui.mcp_server import build_server

    served = {t.name for t in await build_server(root).list_tools()}
    text = README.read_text(encoding="utf-8")
    block = text[text.index("rmtui --headless mcp "):]
    block = block[:block.index("\n\n")]
    assert served and {name for name in served if name not in block} == set()


def test_the_generated_config_says_what_the_allow_list_does_with_it(root):
    ignored = subprocess.run(["git", "-C", str(root.path), "check-ignore", "-q", CONFIG_FILE])
    assert ignored.returncode == 0  # the allow-list leaves rightmemory.toml untracked
    text = (root.path / CONFIG_FILE).read_text(encoding="utf-8")
    assert "would be committed with the root" not in text
    assert "this file is not tracked" in text
