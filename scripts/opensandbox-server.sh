#!/usr/bin/env bash
# The real OpenSandbox server (opensandbox-server from PyPI, pinned) for tests and benchmarks, on the
# project's private Docker engine. Idempotent and quick when cached:
#   - a venv under ~/.cache/agent-workspaces/opensandbox-server-<version>/ (installed once);
#   - the execd image: the server injects its in-sandbox daemon from the image its `execd_image`
#     names. The real execd cannot be had here (no registry), so the image carries our own
#     execd-compatible daemon (test/opensandbox/execd/), built offline FROM the base image and
#     tagged by the hash of its files. Production deployments use the real execd;
#   - the server with its own HOME (it writes $HOME/.opensandbox), config, port and log.
# Usage: scripts/opensandbox-server.sh start | stop | env | status
# A second instance: AGENTWS_OPENSANDBOX_STATE=<dir> AGENTWS_OPENSANDBOX_PORT=<port> AGENTWS_OPENSANDBOX_PORTS=<min-max>.
# `start` and `env` print `export OPEN_SANDBOX_DOMAIN=127.0.0.1:<port>` on stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${OPENSANDBOX_SERVER_VERSION:-1.1.1}"
CACHE="${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}"
VENV="$CACHE/opensandbox-server-$VERSION/venv"
STATE="${AGENTWS_OPENSANDBOX_STATE:-$CACHE/opensandbox}"
PORT="${AGENTWS_OPENSANDBOX_PORT:-38080}"
# Host ports for the sandboxes' execd and 8080; a second instance (own STATE and PORT) takes its own range.
PORTS="${AGENTWS_OPENSANDBOX_PORTS:-47000-47999}"
BASE_IMAGE="${AGENTWS_BASE_IMAGE:-agentws-base:bookworm}"
PIDFILE="$STATE/server.pid"
log() { echo "[opensandbox] $*" >&2; }

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }
ready() { curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null; }
env_line() { echo "export OPEN_SANDBOX_DOMAIN=127.0.0.1:$PORT"; }

install_server() {
  [ -f "$VENV/.ready" ] && return 0
  log "installing opensandbox-server==$VERSION into $VENV (once)"
  rm -rf "$VENV"; python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "opensandbox-server==$VERSION" >&2
  "$VENV/bin/opensandbox-server" --help >/dev/null
  touch "$VENV/.ready"
}

build_execd_image() {
  local dir="$ROOT/test/opensandbox/execd" hash
  hash="$(cat "$dir/Dockerfile" "$dir/execd.py" "$dir/bootstrap.sh" <(echo "$BASE_IMAGE") | sha256sum | cut -c1-12)"
  EXECD_IMAGE="agentws/execd-compat:$hash"
  if ! docker image inspect "$EXECD_IMAGE" >/dev/null 2>&1; then
    log "building $EXECD_IMAGE (our execd-compatible daemon, offline FROM $BASE_IMAGE)"
    docker build -q --network none --build-arg "BASE=$BASE_IMAGE" -t "$EXECD_IMAGE" "$dir" >&2
  fi
}

write_config() {
  mkdir -p "$STATE/home"
  cat >"$STATE/sandbox.toml" <<EOF
[server]
host = "127.0.0.1"
port = $PORT
max_sandbox_timeout_seconds = 86400
api_key = "${AGENTWS_OPENSANDBOX_API_KEY:-}"

[log]
level = "INFO"

[runtime]
type = "docker"
execd_image = "$EXECD_IMAGE"

[storage]
allowed_host_paths = ["${AGENTWS_OPENSANDBOX_VOLUMES:-${TMPDIR:-/tmp}}"]

[store]
type = "sqlite"
path = "$STATE/home/opensandbox.db"

[docker]
network_mode = "bridge"
port_range_min = ${PORTS%-*}
port_range_max = ${PORTS#*-}
publish_host = "127.0.0.1"
drop_capabilities = ["AUDIT_WRITE", "MKNOD", "NET_ADMIN", "NET_RAW", "SYS_ADMIN", "SYS_MODULE", "SYS_PTRACE", "SYS_TIME", "SYS_TTY_CONFIG"]
no_new_privileges = true
pids_limit = 4096
sandbox_env = { EXECD_API_GRACE_SHUTDOWN = "50ms" }

[ingress]
mode = "direct"
EOF
}

case "${1:-}" in
  start)
    mkdir -p "$STATE"; exec 9>"$STATE/.start.lock"; flock 9
    if running && ready; then log "already running on port $PORT (pid $(cat "$PIDFILE"))"; env_line; exit 0; fi
    eval "$("$ROOT/scripts/dockerd.sh" start)"
    docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || "$ROOT/scripts/base-image.sh" "$BASE_IMAGE" >&2
    install_server
    build_execd_image
    write_config
    if running; then kill "$(cat "$PIDFILE")" 2>/dev/null || true; sleep 1; fi
    # More than once: at start the server inspects every sandbox container, and a busy engine can time that
    # out; and a port still held (a client socket that took it as its local port) frees itself in a moment.
    for attempt in 1 2 3 4; do
      [ "$attempt" = 1 ] || sleep 2
      log "starting the server on 127.0.0.1:$PORT (execd image $EXECD_IMAGE, attempt $attempt)"
      HOME="$STATE/home" OPENSANDBOX_INSECURE_SERVER=YES DOCKER_HOST="$DOCKER_HOST" \
        setsid "$VENV/bin/opensandbox-server" --config "$STATE/sandbox.toml" >"$STATE/server.log" 2>&1 </dev/null 9>&- &
      echo $! >"$PIDFILE"
      # 3-6 s on an idle machine; much longer on a loaded one (the imports alone).
      for _ in $(seq 1 480); do
        if ready; then log "ready"; env_line; exit 0; fi
        running || break
        sleep 0.5
      done
      running && break
    done
    log "the server did not become ready; last log lines:"; tail -n 30 "$STATE/server.log" >&2; exit 1
    ;;
  stop)
    if running; then
      pid="$(cat "$PIDFILE")"; kill "$pid"
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$PIDFILE"; log "stopped"
    else log "not running"; fi
    ;;
  env) env_line ;;
  status) if running && ready; then echo running; else echo stopped; exit 1; fi ;;
  *) echo "usage: $0 start|stop|env|status" >&2; exit 2 ;;
esac
