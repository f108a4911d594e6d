#!/usr/bin/env bash
# Creates (once) a cached Python virtual environment holding the pinned `mcp` package (the
# official MCP Python SDK, an MCP client nobody here wrote) and prints the path of its python
# interpreter on stdout (everything else goes to stderr). test/service/mcp-python-client.test.ts
# runs it, so a fresh machine builds the venv on the first test run and reuses it afterwards.
#
#   scripts/mcp-python-client.sh          -> ~/.cache/agent-workspaces/mcp-python-2.3.0/bin/python
#   MCP_PYTHON_VERSION=2.2.0 scripts/mcp-python-client.sh
#
# The venv is only marked ready after the install and an import check succeed, so an
# interrupted run is redone next time instead of being trusted.
set -euo pipefail

VERSION="${MCP_PYTHON_VERSION:-2.3.0}"
CACHE="${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}"
VENV="$CACHE/mcp-python-$VERSION"
READY="$VENV/.ready"

if [[ -f "$READY" && -x "$VENV/bin/python" ]]; then
  echo "$VENV/bin/python"
  exit 0
fi

PY=""
for cand in "${MCP_PYTHON:-}" python3.13 python3.12 python3.11 python3.10 python3; do
  [[ -z "$cand" ]] && continue
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1; then
    PY="$(command -v "$cand")"
    break
  fi
done
[[ -n "$PY" ]] || { echo "mcp-python-client: no python >= 3.10 with the venv module found (set MCP_PYTHON)" >&2; exit 3; }

mkdir -p "$CACHE"
# One builder at a time: parallel test workers may call this together.
exec 9>"$VENV.lock"
flock 9
if [[ -f "$READY" && -x "$VENV/bin/python" ]]; then
  echo "$VENV/bin/python"
  exit 0
fi

# Behind a TLS-inspecting proxy pip needs the host's CA bundle.
if [[ -z "${PIP_CERT:-}" && -f /etc/ssl/certs/ca-certificates.crt ]]; then export PIP_CERT=/etc/ssl/certs/ca-certificates.crt; fi
rm -rf "$VENV"
trap 'rm -rf "$VENV"' ERR
echo "mcp-python-client: creating $VENV with $PY (mcp==$VERSION)" >&2
"$PY" -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "mcp==$VERSION" >&2
"$VENV/bin/python" -c 'import mcp.client.streamable_http, importlib.metadata as m; print("mcp-python-client: mcp", m.version("mcp"), "ok")' >&2
echo "$VERSION" >"$READY"
trap - ERR
echo "$VENV/bin/python"
