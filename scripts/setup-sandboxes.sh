#!/usr/bin/env bash
# Installs what the sandboxed backends need (bubblewrap, docker.io, debootstrap), then starts the
# private Docker engine and makes sure the offline base image exists. Idempotent: every step is
# skipped when already done. Usage: scripts/setup-sandboxes.sh   (prints `export DOCKER_HOST=...`)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "[setup-sandboxes] $*" >&2; }

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
{ command -v dockerd && command -v docker && command -v docker-init; } >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
# The Grep tool prefers ripgrep; its tests exercise both engines.
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
# debootstrap verifies the mirror with Debian's archive key (only a Recommends of debootstrap).
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { log "need root to install: ${missing[*]}"; exit 1; }
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

eval "$("$HERE/dockerd.sh" start)"
"$HERE/base-image.sh"
echo "export DOCKER_HOST=$DOCKER_HOST"
