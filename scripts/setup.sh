#!/usr/bin/env bash
# Shared set-up for scripts/start and scripts/test: idempotent and quick when already done.
# Source it: `. scripts/setup.sh [--sandboxes]`. Exports PATH (pulumi) and DOCKER_HOST when asked.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# 1. Node dependencies, from the lock file; skipped when the lock file has not changed.
stamp="node_modules/.agentws-lock-stamp"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  step "installing npm dependencies (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error >&2
  echo "$want" > "$stamp"
fi

# 2. The Pulumi CLI (on PATH already, cached, or built from Go modules once).
step "pulumi toolchain"
PULUMI_BIN="$(./scripts/pulumi-toolchain.sh)"
export PATH="$PULUMI_BIN:$PATH"
export PULUMI_SKIP_UPDATE_CHECK=true

# 3. Compiled JS: the Pulumi dynamic-provider host cannot load TypeScript.
if [ ! -f dist/.build-stamp ] || [ -n "$(find sdk providers stacks -name '*.ts' -newer dist/.build-stamp 2>/dev/null | head -1)" ]; then
  step "compiling (tsc)"
  npm run -s build >&2
  touch dist/.build-stamp
fi

# 4. Sandboxes (bubblewrap, a private dockerd, the offline base image), for the tests.
if [ "${1:-}" = "--sandboxes" ]; then
  step "sandbox toolchain (bubblewrap, docker engine, base image)"
  # Stop the engine afterwards only if this run started it (another run may be using it).
  if ./scripts/dockerd.sh status >/dev/null 2>&1; then AGENTWS_STARTED_DOCKERD=0; else AGENTWS_STARTED_DOCKERD=1; fi
  export AGENTWS_STARTED_DOCKERD
  eval "$(./scripts/setup-sandboxes.sh)"
  # The reference implementation (AgentScope, from PyPI) for the parity tests; cached after the first run.
  step "reference venv (AgentScope, for parity tests)"
  ./scripts/peer-venv.sh >/dev/null
fi
