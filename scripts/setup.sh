#!/usr/bin/env bash
# Shared set-up for scripts/start and scripts/test: idempotent and quick when already done.
# Source it: `. scripts/setup.sh [--sandboxes]`. Exports PATH (pulumi) and DOCKER_HOST when asked.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Each step says what it is and how long it takes the first time; the next one says how long it took.
step() {
  [ -z "${_AGENTWS_STEP_T0:-}" ] || printf '    (%s s)\n' "$((SECONDS - _AGENTWS_STEP_T0))" >&2
  _AGENTWS_STEP_T0=$SECONDS
  printf '\033[1m==> %s\033[0m\n' "$*" >&2
}

# 1. Node dependencies, from the lock file; skipped when the lock file has not changed.
stamp="node_modules/.agentws-lock-stamp"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  step "installing npm dependencies from the lock file (npm ci; 1-2 min the first time, skipped while the lock file is unchanged)"
  npm ci --no-audit --no-fund --loglevel=error >&2
  echo "$want" > "$stamp"
fi

# 2. The Pulumi CLI (on PATH already, cached, or built from Go modules once).
step "pulumi toolchain (cached; the first time it is built from Go modules: several minutes)"
PULUMI_BIN="$(./scripts/pulumi-toolchain.sh)"
export PATH="$PULUMI_BIN:$PATH"
export PULUMI_SKIP_UPDATE_CHECK=true

# 3. Compiled JS: the Pulumi dynamic-provider host cannot load TypeScript.
if [ ! -f dist/.build-stamp ] || [ -n "$(find sdk providers stacks -name '*.ts' -newer dist/.build-stamp 2>/dev/null | head -1)" ]; then
  step "compiling TypeScript for the Pulumi provider host (tsc; about 30 s, 2 min on a busy machine; skipped when nothing changed)"
  npm run -s build >&2
  touch dist/.build-stamp
fi

# 4. Sandboxes (bubblewrap, a private dockerd, the offline base image), for the tests.
if [ "${1:-}" = "--sandboxes" ]; then
  step "sandbox toolchain: bubblewrap, a private docker engine, the offline base image (the first time: apt installs and a debootstrap image, several minutes)"
  # Stop the engine afterwards only if this run started it (another run may be using it).
  if ./scripts/dockerd.sh status >/dev/null 2>&1; then AGENTWS_STARTED_DOCKERD=0; else AGENTWS_STARTED_DOCKERD=1; fi
  export AGENTWS_STARTED_DOCKERD
  eval "$(./scripts/setup-sandboxes.sh)"
  # The reference implementation (AgentScope, from PyPI) for the parity tests; cached after the first run.
  step "reference venv: AgentScope from PyPI, for the parity tests (the first time: about a minute)"
  ./scripts/peer-venv.sh >/dev/null
fi
