#!/usr/bin/env bash
# A private Docker engine for tests and benchmarks: its own socket, data root and exec root, so it
# never touches a system daemon. The data root is kept between runs (the image cache survives).
# Usage: scripts/dockerd.sh start | stop | env | status
# `start` and `env` print `export DOCKER_HOST=unix://...` on stdout: eval "$(scripts/dockerd.sh start)"
set -euo pipefail
STATE="${AGENTWS_DOCKER_DIR:-${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}/docker}"
SOCK="$STATE/docker.sock"
PIDFILE="$STATE/dockerd.pid"
# exec root must be short (unix socket paths are limited to 108 bytes) and on a local fs.
EXEC_ROOT="${AGENTWS_DOCKER_EXEC_ROOT:-/run/agentws-docker}"
log() { echo "[dockerd] $*" >&2; }

running() { [ -f "$PIDFILE" ] && [ "$(cat "/proc/$(cat "$PIDFILE")/comm" 2>/dev/null)" = dockerd ]; }
ready() { DOCKER_HOST="unix://$SOCK" docker version >/dev/null 2>&1; }

# A container the engine does not call paused but whose cgroup is still frozen (an engine stopped or
# killed while containers were paused) cannot die: removing it hangs the engine's lock for it, and every
# later removal of an image it uses. Thaw those; a container the engine paused stays paused.
thaw_strays() {
  local f id paused
  for f in /sys/fs/cgroup/freezer/docker/*/freezer.state /sys/fs/cgroup/docker/*/cgroup.freeze; do
    [ -f "$f" ] || continue
    case "$(cat "$f" 2>/dev/null)" in FROZEN|FREEZING|1) ;; *) continue ;; esac
    id="$(basename "$(dirname "$f")")"
    paused="$(DOCKER_HOST="unix://$SOCK" timeout 10 docker inspect -f '{{.State.Paused}}' "$id" 2>/dev/null || echo unknown)"
    [ "$paused" = true ] && continue
    log "thawing container ${id:0:12} (frozen, engine says paused=$paused)"
    case "$f" in *freezer.state) echo THAWED >"$f" ;; *) echo 0 >"$f" ;; esac 2>/dev/null || true
  done
}

case "${1:-}" in
  start)
    # Concurrent starters (parallel test files) wait for one another instead of racing two engines.
    mkdir -p "$STATE"; exec 9>"$STATE/.start.lock"; flock 9
    if running && ready; then log "already running (pid $(cat "$PIDFILE"))"; echo "export DOCKER_HOST=unix://$SOCK"; exit 0; fi
    command -v dockerd >/dev/null || { log "dockerd missing: run scripts/setup-sandboxes.sh"; exit 1; }
    # A previous engine was killed (sessions end that way): clear its runtime state. A pid file whose
    # pid now belongs to another process would make dockerd refuse to start (or signal a stranger).
    if [ -f "$PIDFILE" ]; then
      old="$(cat "$PIDFILE")"
      if [ "$(cat "/proc/$old/comm" 2>/dev/null)" = dockerd ]; then
        log "engine pid $old does not answer; stopping it"; kill "$old" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$old" 2>/dev/null || break; sleep 0.5; done
        kill -9 "$old" 2>/dev/null || true
      fi
      rm -f "$PIDFILE"
      rm -rf "$EXEC_ROOT"
    fi
    mkdir -p "$STATE/data" "$EXEC_ROOT"
    chmod 0700 "$STATE"
    rm -f "$SOCK"
    # The engine keeps running after this script exits; setsid detaches it from our session.
    setsid dockerd \
      --host "unix://$SOCK" \
      --data-root "$STATE/data" \
      --exec-root "$EXEC_ROOT" \
      --pidfile "$PIDFILE" \
      >"$STATE/dockerd.log" 2>&1 </dev/null 9>&- &
    for _ in $(seq 1 120); do
      if ready; then thaw_strays; log "ready on unix://$SOCK"; echo "export DOCKER_HOST=unix://$SOCK"; exit 0; fi
      sleep 0.5
    done
    log "dockerd did not become ready; last log lines:"; tail -n 30 "$STATE/dockerd.log" >&2; exit 1
    ;;
  stop)
    if running; then
      pid="$(cat "$PIDFILE")"; kill "$pid"
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      log "stopped"
    else log "not running"; fi
    ;;
  env) echo "export DOCKER_HOST=unix://$SOCK" ;;
  status) if running && ready; then echo running; else echo stopped; exit 1; fi ;;
  *) echo "usage: $0 start|stop|env|status" >&2; exit 2 ;;
esac
