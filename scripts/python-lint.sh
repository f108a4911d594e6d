#!/usr/bin/env bash
# Creates (once) a cached Python virtual environment holding the pinned `pyflakes` (the linter of the
# runner's Python, sdk/kit/runner/python) and prints the path of its python interpreter on stdout
# (everything else goes to stderr). test/unit/runner-python.test.ts runs it, so a fresh machine builds
# the venv on the first test run and reuses it afterwards.
#
#   scripts/python-lint.sh                      -> ~/.cache/agent-workspaces/pyflakes-4.1.0/bin/python
#   scripts/python-lint.sh FILE...              -> runs pyflakes on the files (exit 1 on any finding)
#   PYFLAKES_VERSION=3.2.0 scripts/python-lint.sh
#
# The venv is only marked ready after the install and an import check succeed, so an interrupted run is
# redone next time instead of being trusted.
set -euo pipefail

VERSION="${PYFLAKES_VERSION:-4.1.0}"
CACHE="${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}"
VENV="$CACHE/pyflakes-$VERSION"
READY="$VENV/.ready"

done_or_lint() {
  if [[ $# -gt 0 ]]; then
    exec "$VENV/bin/python" -m pyflakes "$@"
  fi
  echo "$VENV/bin/python"
  exit 0
}

if [[ -f "$READY" && -x "$VENV/bin/python" ]]; then
  done_or_lint "$@"
fi

PY=""
for cand in "${PYFLAKES_PYTHON:-}" python3.13 python3.12 python3.11 python3.10 python3; do
  [[ -z "$cand" ]] && continue
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 9) else 1)' >/dev/null 2>&1; then
    PY="$(command -v "$cand")"
    break
  fi
done
[[ -n "$PY" ]] || { echo "python-lint: no python >= 3.9 with the venv module found (set PYFLAKES_PYTHON)" >&2; exit 3; }

mkdir -p "$CACHE"
# One builder at a time: parallel test workers may call this together.
exec 9>"$VENV.lock"
flock 9
if [[ -f "$READY" && -x "$VENV/bin/python" ]]; then
  done_or_lint "$@"
fi

# Behind a TLS-inspecting proxy pip needs the host's CA bundle.
if [[ -z "${PIP_CERT:-}" && -f /etc/ssl/certs/ca-certificates.crt ]]; then export PIP_CERT=/etc/ssl/certs/ca-certificates.crt; fi
rm -rf "$VENV"
trap 'rm -rf "$VENV"' ERR
echo "python-lint: creating $VENV with $PY (pyflakes==$VERSION)" >&2
"$PY" -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "pyflakes==$VERSION" >&2
"$VENV/bin/python" -c 'import pyflakes.api, importlib.metadata as m; print("python-lint: pyflakes", m.version("pyflakes"), "ok")' >&2
echo "$VERSION" >"$READY"
trap - ERR
exec 9>&-
done_or_lint "$@"
