#!/usr/bin/env bash
# Makes a working `pulumi` CLI available and prints the directory holding it.
# Order: an existing `pulumi` on PATH wins (a real install brings its own language host and
# dynamic-provider host, and is never modified); else a cached build; else build it from the
# published Go modules (no download site is needed, only the Go module proxy).
# Next to a built CLI it installs:
#   pulumi-resource-pulumi-nodejs  the dynamic-provider host script shipped in the @pulumi/pulumi npm package
#   pulumi-language-nodejs         the real Node language host when the Go proxy serves its module, else
#                                  scripts/pulumi-language-host.mjs (a minimal host: runs compiled JS programs)
# AGENTWS_BUILD_PULUMI=1 forces the build path; PULUMI_VERSION picks the version (default v3.248.0).
set -euo pipefail

PULUMI_VERSION="${PULUMI_VERSION:-v3.248.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}/pulumi-$PULUMI_VERSION"
BIN="$CACHE/bin"
log() { echo "[pulumi-toolchain] $*" >&2; }

# The dynamic-provider host is a script shipped inside the @pulumi/pulumi npm package.
install_provider_host() {
  local src="$ROOT/node_modules/@pulumi/pulumi/pulumi-resource-pulumi-nodejs"
  [ -f "$src" ] || { log "run 'npm ci' first: $src is missing"; exit 1; }
  cmp -s "$src" "$BIN/pulumi-resource-pulumi-nodejs" 2>/dev/null || install -m 0755 "$src" "$BIN/pulumi-resource-pulumi-nodejs"
}

# Our minimal language host, unless a real one was built into the cache.
install_language_host() {
  [ -f "$BIN/.language-host-real" ] && return 0
  cmp -s "$ROOT/scripts/pulumi-language-host.mjs" "$BIN/pulumi-language-host.mjs" 2>/dev/null \
    || install -m 0644 "$ROOT/scripts/pulumi-language-host.mjs" "$BIN/pulumi-language-host.mjs"
  local wrapper
  wrapper="$(printf '#!/bin/sh\n# Minimal Node language host from agent-workspaces (see pulumi-language-host.mjs).\nexec node "$(dirname "$0")/pulumi-language-host.mjs" "$@"\n')"
  if [ "$(cat "$BIN/pulumi-language-nodejs" 2>/dev/null)" != "$wrapper" ]; then
    printf '%s\n' "$wrapper" > "$BIN/pulumi-language-nodejs.tmp"
    chmod 0755 "$BIN/pulumi-language-nodejs.tmp"
    mv "$BIN/pulumi-language-nodejs.tmp" "$BIN/pulumi-language-nodejs"
  fi
}

if [ -z "${AGENTWS_BUILD_PULUMI:-}" ] && existing="$(command -v pulumi 2>/dev/null)" && [ "$(dirname "$existing")" != "$BIN" ]; then
  log "using pulumi on PATH: $existing"
  dirname "$existing"
  exit 0
fi

if [ -z "${AGENTWS_BUILD_PULUMI:-}" ] && [ -x "$BIN/pulumi" ] && "$BIN/pulumi" version >/dev/null 2>&1; then
  install_provider_host
  install_language_host
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { log "Go is required to build the Pulumi CLI (none on PATH); install Go >= 1.25 or put a pulumi CLI on PATH"; exit 1; }
log "building pulumi $PULUMI_VERSION from Go modules into $CACHE (first run only; several minutes)"
mkdir -p "$CACHE/src" "$BIN"
cd "$CACHE/src"
cat > go.mod <<MOD
module agentws/pulumi-toolchain

go 1.25

require (
	github.com/pulumi/pulumi/pkg/v3 $PULUMI_VERSION
	github.com/pulumi/pulumi/sdk/v3 $PULUMI_VERSION
)

// Copied from pkg/go.mod: replace directives of a dependency do not apply to the main module.
replace github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
MOD
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
GO
export GOFLAGS=-mod=mod CGO_ENABLED=0
LDFLAGS="-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"
go mod tidy >&2
go build -tags osusergo -trimpath -ldflags "$LDFLAGS" -o "$BIN/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi >&2
mv "$BIN/pulumi.tmp" "$BIN/pulumi"

# The real Node language host, when the proxy serves its module (it has refused it so far).
LANGMOD="github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3"
rm -f "$BIN/.language-host-real"
if go list -m "$LANGMOD@$PULUMI_VERSION" >/dev/null 2>&1 \
  && go get "$LANGMOD@$PULUMI_VERSION" >&2 \
  && go build -tags osusergo -trimpath -ldflags "$LDFLAGS" -o "$BIN/pulumi-language-nodejs.tmp" "$LANGMOD" >&2; then
  mv "$BIN/pulumi-language-nodejs.tmp" "$BIN/pulumi-language-nodejs"
  touch "$BIN/.language-host-real"
  log "built the Node language host from $LANGMOD"
else
  log "the Go proxy does not serve $LANGMOD@$PULUMI_VERSION; installing the minimal language host (compiled JS programs)"
  rm -f "$BIN/pulumi-language-nodejs" "$BIN/pulumi-language-nodejs.tmp"
fi
install_provider_host
install_language_host
log "built $("$BIN/pulumi" version)"
echo "$BIN"
