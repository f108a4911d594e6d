#!/usr/bin/env bash
# Creates (once) a cached Python virtual environment holding the pinned
# AgentScope release that bench/peer compares against, and prints the path of
# its python interpreter on stdout (everything else goes to stderr).
#
#   scripts/peer-venv.sh            -> /root/.cache/agent-workspaces/peer-venv-2.0.11/bin/python
#   AGENTSCOPE_VERSION=2.0.10 scripts/peer-venv.sh
#   PEER_VENV_DIR=/somewhere scripts/peer-venv.sh
#
# The venv is only marked ready after the install and an import smoke check
# succeed, so an interrupted run is redone next time instead of being trusted.
set -euo pipefail

VERSION="${AGENTSCOPE_VERSION:-2.0.11}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces"
VENV="${PEER_VENV_DIR:-$CACHE_ROOT/peer-venv-$VERSION}"
READY="$VENV/.ready"

if [[ -f "$READY" && -x "$VENV/bin/python" ]]; then
  echo "$VENV/bin/python"
  exit 0
fi

pick_python() {
  for cand in "${PEER_PYTHON:-}" python3.11 python3.12 python3.13 python3.10 python3; do
    [[ -z "$cand" ]] && continue
    if command -v "$cand" >/dev/null 2>&1 &&
      "$cand" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1; then
      command -v "$cand"
      return 0
    fi
  done
  return 1
}

PY="$(pick_python)" || {
  echo "peer-venv: no python >= 3.10 with the venv module found (set PEER_PYTHON)" >&2
  exit 3
}

mkdir -p "$(dirname "$VENV")"
# One builder at a time: parallel test workers may call this together.
exec 9>"$VENV.lock"
flock 9
if [[ -f "$READY" && -x "$VENV/bin/python" ]]; then
  echo "$VENV/bin/python"
  exit 0
fi

rm -rf "$VENV"
# A failed build leaves nothing half-made behind.
trap 'rm -rf "$VENV"' ERR
echo "peer-venv: creating $VENV with $PY (agentscope==$VERSION)" >&2
"$PY" -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --upgrade pip >&2
# The workspace module itself needs only the base dependencies; the managers
# live under agentscope.app, whose package __init__ pulls in the "service"
# extra (fastapi, uvicorn, ...).
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet \
  "agentscope[service]==$VERSION" >&2
"$VENV/bin/python" - >&2 <<'PY'
import agentscope, agentscope.workspace
from agentscope.workspace import LocalWorkspace
print("peer-venv: agentscope", agentscope.__version__, "ok")
PY
echo "$VERSION" >"$READY"
trap - ERR
echo "$VENV/bin/python"
