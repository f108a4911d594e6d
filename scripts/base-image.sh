#!/usr/bin/env bash
# Builds the offline base image for the Docker backend (no image registry is reachable): a Debian
# bookworm rootfs from Debian's package mirror via debootstrap, with Node, Python 3 and ripgrep,
# imported with `docker import`. The rootfs tarball is cached, so later runs only import it, and
# nothing is done when the image is already present.
# Usage: scripts/base-image.sh [IMAGE]   (default agentws-base:bookworm; needs DOCKER_HOST or the private dockerd)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
IMAGE="${1:-${AGENTWS_BASE_IMAGE:-agentws-base:bookworm}}"
CACHE="${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}/images"
PACKAGES="nodejs,python3,ripgrep,ca-certificates"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The tarball name carries its inputs: a change of package list makes a new one.
TARBALL="$CACHE/bookworm-minbase-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"
log() { echo "[base-image] $*" >&2; }

[ -n "${DOCKER_HOST:-}" ] || eval "$("$HERE/dockerd.sh" env)"
export DOCKER_HOST

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE already present"; exit 0
fi
# One builder at a time; a waiter finds the image already there.
mkdir -p "$CACHE"; exec 9>"$CACHE/.build.lock"; flock 9
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE already present"; exit 0
fi

if [ ! -s "$TARBALL" ]; then
  command -v debootstrap >/dev/null || { log "debootstrap missing: run scripts/setup-sandboxes.sh"; exit 1; }
  mkdir -p "$CACHE"
  work="$(mktemp -d /tmp/agentws-rootfs.XXXXXX)"
  trap 'rm -rf "$work"' EXIT
  log "debootstrap bookworm ($PACKAGES) into $work (about a minute)"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$work/root" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2; log "debootstrap failed"; exit 1; }
  rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
  tar -C "$work/root" -cf "$TARBALL.partial" .
  mv "$TARBALL.partial" "$TARBALL"
  log "cached rootfs at $TARBALL ($(du -h "$TARBALL" | cut -f1))"
fi

log "importing $TARBALL as $IMAGE"
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/sh"]' \
  "$TARBALL" "$IMAGE" >/dev/null
log "$IMAGE ready"
