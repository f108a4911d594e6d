#!/usr/bin/env bash
# A private PostgreSQL server for the service tests: Debian's `postgresql` package (apt-installed
# when missing), its own data folder and socket folder, a private port on loopback only, trust
# auth for loopback (a test server holding no data worth a password). The data folder is kept
# between runs; tests create and drop their own databases.
# Usage: scripts/postgres.sh start | stop | env | status
# `start` and `env` print `export AGENTWS_TEST_POSTGRES_URL=postgres://...` on stdout.
set -euo pipefail
PORT="${AGENTWS_PG_PORT:-55432}"
# The postgres user must reach the folder: root's ~/.cache is not reachable, so root keeps it in /tmp.
if [ "$(id -u)" = 0 ]; then STATE="${AGENTWS_PG_DIR:-/tmp/agentws-postgres}"; else STATE="${AGENTWS_PG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces/postgres}"; fi
DATA="$STATE/data"
URL="postgres://postgres@127.0.0.1:$PORT/postgres"
log() { echo "[postgres] $*" >&2; }
bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
# PostgreSQL refuses to run as root: as root, its tools run as the package's `postgres` user.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
ready() { [ -n "$(bindir)" ] && "$(bindir)/pg_isready" -q -h 127.0.0.1 -p "$PORT" >/dev/null 2>&1; }

case "${1:-}" in
  start)
    mkdir -p "$STATE"; exec 9>"$STATE/.start.lock"; flock 9
    if ready; then log "already running on port $PORT"; echo "export AGENTWS_TEST_POSTGRES_URL=$URL"; exit 0; fi
    if [ -z "$(bindir)" ]; then
      [ "$(id -u)" = 0 ] || { log "postgresql is not installed and installing it needs root: apt-get install postgresql"; exit 1; }
      log "installing Debian's postgresql package"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }
    fi
    BIN="$(bindir)"
    [ "$(id -u)" = 0 ] && chown postgres "$STATE"
    chmod 0700 "$STATE"
    if [ ! -f "$DATA/PG_VERSION" ]; then
      log "initdb into $DATA"
      as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --no-instructions >/dev/null
    fi
    as_pg "$BIN/pg_ctl" -D "$DATA" -l "$STATE/postgres.log" -w -t 60 \
      -o "-p $PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$STATE -c max_connections=200 -c fsync=off" start >/dev/null 9>&- \
      || { log "postgres did not start; last log lines:"; tail -n 30 "$STATE/postgres.log" >&2; exit 1; }
    log "ready on 127.0.0.1:$PORT"
    echo "export AGENTWS_TEST_POSTGRES_URL=$URL"
    ;;
  stop)
    BIN="$(bindir)"
    if [ -n "$BIN" ] && [ -f "$DATA/postmaster.pid" ]; then as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null && log "stopped"; else log "not running"; fi
    ;;
  env) echo "export AGENTWS_TEST_POSTGRES_URL=$URL" ;;
  status) if ready; then echo running; else echo stopped; exit 1; fi ;;
  *) echo "usage: $0 start|stop|env|status" >&2; exit 2 ;;
esac
