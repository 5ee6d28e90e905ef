#!/usr/bin/env bash
# Put the `rmtui` command on the PATH: a link in ~/.local/bin (or $RMTUI_BIN_DIR) to the
# entry point of a virtual environment (default: this checkout's .venv).
#   scripts/link-command.sh            link .venv/bin/rmtui
#   scripts/link-command.sh VENV       link VENV/bin/rmtui
# A file there that is not a link (a pipx or uv install, say) is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(cd "${1:-.venv}" && pwd)"
target="$venv/bin/rmtui"
bin="${RMTUI_BIN_DIR:-$HOME/.local/bin}"
if [ ! -x "$target" ]; then
  echo "      no $target: install first (scripts/install.sh)" >&2
  exit 1
fi
mkdir -p "$bin"
if [ -e "$bin/rmtui" ] && [ ! -L "$bin/rmtui" ]; then
  echo "      $bin/rmtui is there and is not a link (left as it is); this install's command is $target"
  exit 0
fi
ln -sfn "$target" "$bin/rmtui"
echo "      the rmtui command: $bin/rmtui -> $target"
case ":$PATH:" in
  *":$bin:"*) ;;
  *) echo "      $bin is not on your PATH: add it (export PATH=\"$bin:\$PATH\" in your shell's profile)," \
          "or run $target" ;;
esac
