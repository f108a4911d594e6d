#!/usr/bin/env bash
# Makes a working `pulumi` CLI available and prints the directory holding it.
# Order: an existing `pulumi` on PATH wins; else a cached build; else build it from the
# published Go modules (no download site is needed, only the Go module proxy).
set -euo pipefail

PULUMI_VERSION="${PULUMI_VERSION:-v3.248.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}/pulumi-$PULUMI_VERSION"
log() { echo "[pulumi-toolchain] $*" >&2; }

# The dynamic-provider host is a script shipped inside the @pulumi/pulumi npm package.
provider_host() {
  local src="$ROOT/node_modules/@pulumi/pulumi/pulumi-resource-pulumi-nodejs"
  [ -f "$src" ] || { log "run 'npm ci' first: $src is missing"; exit 1; }
  install -m 0755 "$src" "$1/pulumi-resource-pulumi-nodejs"
}

if [ -z "${AGENTWS_BUILD_PULUMI:-}" ] && existing="$(command -v pulumi 2>/dev/null)" && [ "$(dirname "$existing")" != "$CACHE/bin" ]; then
  log "using pulumi on PATH: $existing"
  dirname "$existing"
  exit 0
fi

if [ -x "$CACHE/bin/pulumi" ] && "$CACHE/bin/pulumi" version >/dev/null 2>&1; then
  provider_host "$CACHE/bin"
  echo "$CACHE/bin"
  exit 0
fi

command -v go >/dev/null || { log "Go is required to build the Pulumi CLI (none on PATH); install Go >= 1.25 or put a pulumi CLI on PATH"; exit 1; }
log "building pulumi $PULUMI_VERSION from Go modules into $CACHE (first run only; several minutes)"
mkdir -p "$CACHE/src" "$CACHE/bin"
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
go mod tidy >&2
go build -tags osusergo -trimpath \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
  -o "$CACHE/bin/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi >&2
mv "$CACHE/bin/pulumi.tmp" "$CACHE/bin/pulumi"
provider_host "$CACHE/bin" 2>/dev/null || true
log "built $("$CACHE/bin/pulumi" version)"
echo "$CACHE/bin"
