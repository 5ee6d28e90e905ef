"""A writer process for the supervisor tests: it drives one operation against a root the
way an Update driver would, and exits with the engine's exit code (3 = stale/conflict).

  supervisor_writer.py ROOT finish OP_ID [--ready FILE --go FILE]
      finish (admit + publish) an operation whose worktree the test already committed in
  supervisor_writer.py ROOT update --batch B --uids U1,U2 --node ID
      begin an operation for claimed evidence, add a Memory node in its worktree, commit,
      finish; RMTUI_CRASHPOINT makes it die (SIGKILL) at a phase boundary
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from rmtui.engine.errors import EngineError
from rmtui.engine.memory.roots import open_root
from rmtui.engine.writes.supervisor import Supervisor


def _wait_for(go: str | None, ready: str | None) -> None:
    if ready:
        Path(ready).write_text("ready")
    if go:
        deadline = time.monotonic() + 30
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise SystemExit("no go signal")
            time.sleep(0.005)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("action", choices=("finish", "update"))
    p.add_argument("op_id", nargs="?")
    p.add_argument("--ready")
    p.add_argument("--go")
    p.add_argument("--batch")
    p.add_argument("--uids", default="")
    p.add_argument("--node", default="fresh")
    args = p.parse_args()
    root = open_root(args.root)
    try:
        with Supervisor(root) as sup:
            if args.action == "finish":
                op = sup.store.get(args.op_id)
                _wait_for(args.go, args.ready)
                receipt = sup.finish(op, summary="race")
            else:
                uids = [u for u in args.uids.split(",") if u]
                op = sup.begin("update", "update", batch_id=args.batch, candidate_uids=uids,
                               effects=("evidence_consumed",))
                mem = Path(op.worktree) / "MEMORY.md"
                mem.write_text(mem.read_text().rstrip("\n") + f"\n- `{args.node}` Learned from {args.batch}. → []\n")
                subprocess.run(["git", "commit", "-q", "-am", f"update: {args.node}"], cwd=op.worktree, check=True)
                receipt = sup.finish(op, summary=f"added {args.node}")
    except EngineError as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc.message}\n")
        return exc.exit_code
    print(json.dumps(receipt.to_json()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
