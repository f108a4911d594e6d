#!/usr/bin/env bash
# A real single-node Kubernetes for the Kubernetes backend's tests and benchmarks, built here from the
# Go module proxy and Debian packages (no image registry, no dl.k8s.io): kube-apiserver,
# controller-manager, scheduler, kubelet and kubectl (k8s.io/kubernetes through a wrapper module) and
# etcd are built ONCE and the binaries cached under ~/.cache/agent-workspaces/k8s-<version>/; the
# node images (a pause image and the workspace image with python3 and nodejs) are made offline and
# imported with `ctr`. Everything listens on 127.0.0.1 with its own data dirs; nothing of the host's
# (docker, a system containerd) is touched.
#
# Usage: scripts/k8s-cluster.sh build | up | down | env | status | wait [SECONDS]
#   build   apt packages + binaries + images into the cache (12-15 min cold on 2 cores, seconds warm)
#   up      build if needed, then start (idempotent: a running cluster is reused); writes the ready file
#   down    stop everything `up` started (pid files only) and wipe the cluster state
#   env     print `export KUBECONFIG=... AGENTWS_K8S_IMAGE=...` for eval
#   status  exit 0 when the cluster answers
#   wait    wait for a concurrent `up` (the ready file) for at most SECONDS (default 1500)
#   restart COMPONENT   SIGKILL one component and start it again (fault tests)
#   kubectl-path        print the cached kubectl's path
#   cached  exit 0 when the binaries and images are cached (an `up` then takes seconds)
# Pinned: k8s 1.34.x because this machine has cgroup v1 and Debian's containerd 1.6.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="${AGENTWS_K8S_VERSION:-1.34.4}"
ETCD_VERSION="${AGENTWS_ETCD_VERSION:-v3.6.4}"   # what k8s.io/kubernetes v1.34.4 pins
RECIPE=1                                          # bump when the build recipe changes
CACHE_ROOT="${AGENTWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-workspaces}"
CACHE="$CACHE_ROOT/k8s-v$K8S_VERSION-etcd$ETCD_VERSION-r$RECIPE"
BIN="$CACHE/bin"
# Cluster state: short paths (unix sockets are limited to 108 bytes), wiped by `down`.
K="${AGENTWS_K8S_STATE:-/var/tmp/agentws-k8s}"
KUBECONFIG_FILE="$K/admin.kubeconfig"
READY="$K/ready"; FAILED="$K/failed"; STARTING="$K/starting"
# The workspace image reuses base-image.sh's package list, so both backends run the same userland.
PACKAGES="nodejs,python3,ripgrep,ca-certificates"
PKG_HASH="$(echo "$PACKAGES" | sha256sum | cut -c1-12)"
ROOTFS_TAR="$CACHE_ROOT/images/bookworm-minbase-$PKG_HASH.tar"
WORKSPACE_IMAGE="agentws.local/workspace:bookworm-$PKG_HASH"   # never `latest`: the kubelet would pull
PAUSE_IMAGE="agentws.local/pause:1"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Pod network: an isolated bridge with no host address and no route; must not overlap docker0 (172.17/16).
POD_CIDR="${AGENTWS_K8S_POD_CIDR:-10.88.0.0/16}"
BRIDGE="agentwsk8s0"
log() { echo "[k8s-cluster $(date +%T)] $*" >&2; [ ! -d "$K" ] || : > "$K/progress"; }
die() { log "$*"; exit 1; }

# ---------------------------------------------------------------- build (cached)
apt_packages() {
  local need=()
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v openssl >/dev/null || need+=(openssl)
  command -v curl >/dev/null || need+=(curl)
  command -v python3 >/dev/null || need+=(python3)
  [ ${#need[@]} -eq 0 ] && return 0
  log "apt-get install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get update >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
}

# A single-layer OCI archive from a layer tarball, for `ctr images import` (no registry, no docker).
oci_archive() { # LAYER_TAR NAME:TAG OUT [ENTRYPOINT]
  python3 - "$@" <<'PY'
import hashlib, io, json, sys, tarfile
layer_path, ref, out = sys.argv[1], sys.argv[2], sys.argv[3]
entry = sys.argv[4:] or None
h = hashlib.sha256(); size = 0
with open(layer_path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk); size += len(chunk)
ldig = "sha256:" + h.hexdigest()
cfg = {"architecture": "amd64", "os": "linux",
       "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]},
       "rootfs": {"type": "layers", "diff_ids": [ldig]}}
if entry: cfg["config"]["Entrypoint"] = entry
else: cfg["config"]["Cmd"] = ["/bin/sh"]
def blob(b): return "sha256:" + hashlib.sha256(b).hexdigest(), len(b)
cfgb = json.dumps(cfg).encode(); cdig, csize = blob(cfgb)
man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": csize},
       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ldig, "size": size}]}
manb = json.dumps(man).encode(); mdig, msize = blob(manb)
index = {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": mdig, "size": msize, "annotations": {"io.containerd.image.name": ref,
         "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1]}}]}
with tarfile.open(out, "w") as t:
    def add(name, data):
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = 0o644; t.addfile(ti, io.BytesIO(data))
    add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    add("index.json", json.dumps(index).encode())
    t.add(layer_path, arcname="blobs/sha256/" + ldig.split(":")[1])
    add("blobs/sha256/" + cdig.split(":")[1], cfgb)
    add("blobs/sha256/" + mdig.split(":")[1], manb)
PY
}

build_k8s() {
  local work="$CACHE/build" sv="v0.${K8S_VERSION#1.}" mod ldf
  export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOCACHE="$work/gocache" GOTOOLCHAIN=local
  command -v go >/dev/null || die "go missing (needed once to build the cluster)"
  mkdir -p "$work/wrap" "$work/etcd" "$work/pause" "$BIN.partial"
  log "wrapper module for k8s.io/kubernetes v$K8S_VERSION (every ./staging module at its published $sv)"
  mod="$(cd "$work" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  {
    printf 'module agentws/k8swrap\n\ngo 1.24.0\n\ngodebug default=go1.24\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
    # sample-cli-plugin / sample-controller are replaced upstream but never required (and 403 on the proxy)
    grep '=> ./staging' "$mod" | awk '{print $1}' | grep -v -e sample-cli-plugin -e sample-controller |
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$sv"; done
    printf ')\n'
  } > "$work/wrap/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport (\n' > "$work/wrap/tools.go"
  for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >> "$work/wrap/tools.go"
  done
  printf ')\n' >> "$work/wrap/tools.go"
  (cd "$work/wrap" && go mod tidy)
  ldf="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=${K8S_VERSION%%.*}"
  ldf="$ldf -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
  ldf="$ldf -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"
  log "go build of the control plane, kubelet and kubectl (the long part: ~11 min cold on 2 cores)"
  (cd "$work/wrap" && go build -trimpath -ldflags "$ldf" -o "$BIN.partial/" k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl)
  log "etcd $ETCD_VERSION (go.etcd.io/etcd/server/v3/etcdmain)"
  printf 'module agentws/etcdwrap\n\ngo 1.24.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$work/etcd/go.mod"
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > "$work/etcd/main.go"
  (cd "$work/etcd" && go mod tidy && go build -trimpath -ldflags '-s -w' -o "$BIN.partial/etcd" .)
  log "pause binary (PID 1 of each pod sandbox: sleeps, reaps zombies, exits on TERM/INT)"
  printf 'module agentws/pause\n\ngo 1.24\n' > "$work/pause/go.mod"
  cat > "$work/pause/main.go" <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
GO
  (cd "$work/pause" && go build -trimpath -ldflags '-s -w' -o "$BIN.partial/pause" .)
  rm -rf "$BIN"; mv "$BIN.partial" "$BIN"
  # The binaries are the cache; the 3 GB Go build cache is not worth keeping.
  rm -rf "$work"
}

build_images() {
  mkdir -p "$CACHE/images" "$(dirname "$ROOTFS_TAR")"
  if [ ! -s "$ROOTFS_TAR" ]; then
    local work; work="$(mktemp -d /tmp/agentws-k8s-rootfs.XXXXXX)"
    log "debootstrap bookworm ($PACKAGES) for the workspace image (about a minute)"
    debootstrap --variant=minbase --include="$PACKAGES" bookworm "$work/root" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
      tail -n 30 "$work/debootstrap.log" >&2; rm -rf "$work"; die "debootstrap failed"; }
    rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
    tar -C "$work/root" -cf "$ROOTFS_TAR.partial" . && mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR"
    rm -rf "$work"
  fi
  if [ ! -s "$CACHE/images/workspace.tar" ]; then
    log "OCI archive $WORKSPACE_IMAGE"
    oci_archive "$ROOTFS_TAR" "$WORKSPACE_IMAGE" "$CACHE/images/workspace.tar.partial"
    mv "$CACHE/images/workspace.tar.partial" "$CACHE/images/workspace.tar"
  fi
  if [ ! -s "$CACHE/images/pause.tar" ]; then
    local p; p="$(mktemp -d /tmp/agentws-k8s-pause.XXXXXX)"
    cp "$BIN/pause" "$p/pause"
    tar -C "$p" -cf "$p/layer.tar" pause
    oci_archive "$p/layer.tar" "$PAUSE_IMAGE" "$CACHE/images/pause.tar" /pause
    rm -rf "$p"
  fi
}

build() {
  mkdir -p "$CACHE"; exec 8>"$CACHE/.build.lock"; flock 8
  apt_packages
  local n=0; for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd pause; do [ -x "$BIN/$b" ] && n=$((n+1)); done
  if [ "$n" -ne 7 ]; then build_k8s; else log "binaries cached in $BIN"; fi
  build_images
  exec 8>&-
}

# ---------------------------------------------------------------- run
pki() {
  local P="$K/pki"; [ -f "$P/admin.crt" ] && return 0
  mkdir -p "$P"; (
  cd "$P"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=agentws-k8s-ca" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 3650 -extfile server.ext 2>/dev/null
  # One system:masters client certificate for every component: a test cluster, kept simple.
  printf 'extendedKeyUsage=clientAuth\n' > client.ext
  openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin" 2>/dev/null
  openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 3650 -extfile client.ext 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  chmod 0600 ./*.key )
  cat > "$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentws
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$P/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$P/admin.crt", client-key: "$P/admin.key"}
contexts:
- name: agentws
  context: {cluster: agentws, user: admin}
current-context: agentws
EOF
}

configs() {
  mkdir -p "$K/run/cni-net.d" "$K/run/kubelet-root" "$K/run/podlogs"
  cat > "$K/run/containerd.toml" <<EOF
version = 2
root = "$K/containerd-root"
state = "$K/run/containerd-state"
[grpc]
  address = "$K/run/containerd.sock"
[ttrpc]
  address = "$K/run/containerd.sock.ttrpc"
[debug]
  address = "$K/run/containerd-debug.sock"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # root here lacks CAP_SYS_RESOURCE: runc cannot give the pause container oom_score_adj -998
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$K/run/cni-net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
EOF
  cat > "$K/run/cni-net.d/10-agentws.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "agentws-k8s", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": false,
   "ipam": {"type": "host-local", "dataDir": "$K/run/cni-ipam", "ranges": [[{"subnet": "$POD_CIDR"}]]}},
  {"type": "loopback"}]}
EOF
  cat > "$K/run/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$K/pki/ca.crt"}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$K/run/containerd.sock
failSwapOn: false
failCgroupV1: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $K/run/podlogs
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
registerNode: true
maxPods: 60
serializeImagePulls: false
EOF
}

start() { local name=$1; shift; printf '%s\0' "$@" > "$K/pids/$name.cmd"
  setsid "$@" >>"$K/logs/$name.log" 2>&1 </dev/null 8>&- 9>&- & echo $! > "$K/pids/$name.pid"; }
# Fault tests: kill one component (SIGKILL, no clean shutdown) and start it again with the same command line.
restart_component() { local name=$1 f="$K/pids/$1.cmd"; [ -f "$f" ] || die "no component '$name' running"
  local p; p="$(cat "$K/pids/$name.pid")"; kill -9 "$p" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  local -a cmd; mapfile -d '' cmd < "$f"; start "$name" "${cmd[@]}"; log "restarted $name"; }
alive() { local f="$K/pids/$1.pid"; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }
waitfor() { local what=$1 n=$2; shift 2
  for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && { log "$what"; return 0; }; sleep 0.2; done
  die "timeout waiting for: $what (logs in $K/logs)"; }
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
answers() { [ -f "$KUBECONFIG_FILE" ] && alive apiserver && alive kubelet && kc get --raw /readyz >/dev/null 2>&1; }

check_network() {
  # Refuse a pod subnet that overlaps a route the host already has (docker0, the dockerd's bridges).
  local prefix="${POD_CIDR%%.*}.$(echo "$POD_CIDR" | cut -d. -f2)."
  if ip route | grep -v "$BRIDGE" | awk '{print $1}' | grep -q "^$prefix"; then
    die "pod subnet $POD_CIDR overlaps an existing route (set AGENTWS_K8S_POD_CIDR): $(ip route | grep "^$prefix")"
  fi
}

up() {
  mkdir -p "$K"; exec 9>"$K/.lock"; flock 9
  if answers && [ -f "$READY" ]; then log "already running"; return 0; fi
  rm -f "$READY" "$FAILED"; echo $$ > "$STARTING"; : > "$K/progress"
  trap 'rm -f "$STARTING"; [ -f "$READY" ] || : > "$FAILED"' EXIT
  build
  stop_all   # leftovers of a cluster that was killed rather than stopped
  check_network
  mkdir -p "$K/logs" "$K/pids"
  pki; configs
  local t0=$SECONDS P="$K/pki" KC="$KUBECONFIG_FILE"
  start etcd "$BIN/etcd" --name agentws --data-dir "$K/run/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster agentws=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
  waitfor "etcd healthy" 300 curl -sf http://127.0.0.1:2379/health
  start containerd containerd --config "$K/run/containerd.toml"
  local ctr=(ctr -a "$K/run/containerd.sock" -n k8s.io)
  waitfor "containerd up" 300 "${ctr[@]}" version
  for img in "$PAUSE_IMAGE:pause" "$WORKSPACE_IMAGE:workspace"; do
    local ref="${img%:*}" file="${img##*:}"
    "${ctr[@]}" images ls -q | grep -qx "$ref" || { "${ctr[@]}" images import "$CACHE/images/$file.tar" >/dev/null; log "imported $ref"; }
  done
  start apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=127.0.0.1 --secure-port=6443 \
    --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" --client-ca-file="$P/ca.crt" \
    --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC \
    --kubelet-preferred-address-types=Hostname \
    --kubelet-client-certificate="$P/admin.crt" --kubelet-client-key="$P/admin.key" \
    --allow-privileged=true --enable-admission-plugins=NodeRestriction --profiling=false
  waitfor "apiserver ready" 600 kc get --raw /readyz
  start controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KC" --authentication-kubeconfig "$KC" \
    --authorization-kubeconfig "$KC" --bind-address 127.0.0.1 --leader-elect=false \
    --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
    --use-service-account-credentials=false --enable-hostpath-provisioner=true \
    --controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller'
  start scheduler "$BIN/kube-scheduler" --kubeconfig "$KC" --authentication-kubeconfig "$KC" \
    --authorization-kubeconfig "$KC" --bind-address 127.0.0.1 --leader-elect=false
  # --hostname-override localhost + --kubelet-preferred-address-types=Hostname: the apiserver reaches
  # the kubelet on localhost:10250, never on eth0.
  start kubelet "$BIN/kubelet" --config "$K/run/kubelet-config.yaml" --kubeconfig "$KC" \
    --root-dir "$K/run/kubelet-root" --cert-dir "$K/run/kubelet-pki" --hostname-override localhost --v=1
  waitfor "node Ready" 600 sh -c "'$BIN/kubectl' --kubeconfig '$KC' get node localhost -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  waitfor "default ServiceAccount" 300 kc -n default get sa default
  kc apply -f - >/dev/null <<'EOF'
# The controller-manager's built-in host-path provisioner (/tmp/hostpath_pv/<uuid>); Delete reclaims.
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: hostpath
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
  env_lines > "$K/env"
  : > "$READY"; rm -f "$STARTING"
  log "cluster up in $((SECONDS - t0))s after the build; $(env_lines | tr '\n' ' ')"
}

stop_pid() { local f="$K/pids/$1.pid" p; [ -f "$f" ] || return 0; p="$(cat "$f")"
  if kill "$p" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  fi
  rm -f "$f"; }

stop_all() {
  [ -d "$K/pids" ] || return 0
  local ctr=(ctr -a "$K/run/containerd.sock" -n k8s.io)
  # Let the kubelet tear pods down properly (CNI teardown, unmounts) while it still runs.
  if alive kubelet && alive apiserver; then
    timeout 60 "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" delete pods --all -A --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 120); do [ -z "$("${ctr[@]}" tasks ls -q 2>/dev/null)" ] && break; sleep 0.5; done
  fi
  stop_pid kubelet; stop_pid scheduler; stop_pid controller-manager; stop_pid apiserver
  if alive containerd; then
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$t" 2>/dev/null || true; done
    sleep 1
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true; done
    for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do "${ctr[@]}" containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  stop_pid containerd; stop_pid etcd
  for n in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do
    ip netns pids "$n" 2>/dev/null | grep -q . || ip netns delete "$n" 2>/dev/null || true
  done
  ip link delete "$BRIDGE" 2>/dev/null || true
  for d in /sys/fs/cgroup/*/kubepods; do [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done
  # The kubelet bind-mounts its root dir onto itself (rshared); undo that and leftover volume mounts.
  awk -v k="$K/run/" 'index($2, k) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  # The cluster's state (etcd, kubelet, CNI) and its host-path volumes go with it: every `up` is fresh.
  rm -rf "$K/run" /tmp/hostpath_pv "$K/env"
}

down() {
  mkdir -p "$K"; exec 9>"$K/.lock"; flock 9
  rm -f "$READY"
  stop_all
  log "down"
}

env_lines() {
  echo "export KUBECONFIG=$KUBECONFIG_FILE"
  echo "export AGENTWS_K8S_IMAGE=$WORKSPACE_IMAGE"
}

# Waiting for a start in progress follows the start itself, not a fixed deadline (a cold build takes
# 11 min on an idle machine, far more on a busy one): ready → done; failed, or its process gone → fail
# at once; alive → wait while it progresses (a log line, or the Go build cache filling during the long
# silent `go build`), failing only after STALL seconds without either.
progressed_within() {
  [ -n "$(find "$K/progress" "$CACHE/build/gocache" -maxdepth 1 -newermt "-$1 seconds" 2>/dev/null | head -1)" ]; }
wait_ready() { local stall=${1:-900} pid
  while :; do
    [ -f "$READY" ] && { env_lines; return 0; }
    [ -f "$FAILED" ] && die "cluster start failed (see the up log)"
    [ -f "$STARTING" ] || { [ -f "$READY" ] && continue; die "no cluster is starting (run: scripts/k8s-cluster.sh up)"; }
    pid="$(cat "$STARTING" 2>/dev/null || true)"
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      sleep 1; [ -f "$READY" ] && continue
      die "the cluster start (pid $pid) ended without a ready cluster (see the up log)"
    fi
    progressed_within "$stall" || die "the cluster start made no progress for ${stall}s (see the up log)"
    sleep 2
  done; }

case "${1:-}" in
  build) build ;;
  up) up; env_lines ;;
  down) down ;;
  env) env_lines ;;
  status) if answers && [ -f "$READY" ]; then echo running; else echo stopped; exit 1; fi ;;
  wait) wait_ready "${2:-900}" ;;
  kubectl-path) echo "$BIN/kubectl" ;;
  restart) restart_component "${2:?component: etcd, containerd, apiserver, controller-manager, scheduler or kubelet}" ;;
  cached) for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd pause; do [ -x "$BIN/$b" ] || exit 1; done
    [ -s "$CACHE/images/workspace.tar" ] && [ -s "$CACHE/images/pause.tar" ] ;;
  *) echo "usage: $0 build|up|down|env|status|wait [STALL_SECONDS]|cached|restart COMPONENT|kubectl-path" >&2; exit 2 ;;
esac
