# Sourced by the other scripts: create .venv with Python >= 3.11 and install Memento into it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "Memento needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
VENV="${MEMENTO_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating virtual environment in $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
EXTRAS="${1:-}"
STAMP="$VENV/.memento-installed${EXTRAS:+-$EXTRAS}"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
  echo "installing memento${EXTRAS:+[$EXTRAS]} and its pinned dependencies" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT${EXTRAS:+[$EXTRAS]}" >&2
  touch "$STAMP"
fi
