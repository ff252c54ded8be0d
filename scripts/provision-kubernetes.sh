#!/usr/bin/env bash
# Builds the test API server and its companions from Go modules and caches them outside the clone,
# keyed by the pinned module graph (scripts/go/kubernetes/go.mod and go.sum):
# kube-apiserver, kube-controller-manager and kubectl from k8s.io/kubernetes (each staging module
# replaced by the published k8s.io/* module of the same release), and etcd from
# go.etcd.io/etcd/server/v3 at the version that Kubernetes release requires.
# First run: about 10-15 minutes on 2 cores (most of it kube-apiserver). Later runs: a no-op.
# SWEEPER_KUBE=1.20 runs the old Debian path instead (scripts/provision-kubernetes-1.20.sh).
source "$(dirname "$0")/lib.sh"
if [ "$SWEEPER_KUBE" = 1.20 ]; then exec "$REPO_ROOT/scripts/provision-kubernetes-1.20.sh"; fi

apt_install openssl curl
BINS=(kube-apiserver kube-controller-manager kubectl etcd)
have_all=1
for b in "${BINS[@]}"; do [ -x "$K8S_BIN_DIR/$b" ] || have_all=0; done
if [ "$have_all" = 1 ]; then
  log "kubernetes v$K8S_VERSION binaries cached in $K8S_BIN_DIR"
  exit 0
fi
command -v go >/dev/null || { log "go is not installed: the machine's Go toolchain (1.26) builds the test servers"; exit 1; }

cd "$REPO_ROOT/scripts/go/kubernetes"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# Without these the binaries report v0.0.0-master: kubectl version and /version say the release.
minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
  -X k8s.io/component-base/version.gitTreeState=clean"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
log "building kube-apiserver, kube-controller-manager, kubectl v$K8S_VERSION and etcd from Go modules (10-15 minutes on first use)"
go build -trimpath -ldflags "$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl >&2
go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3 >&2
mkdir -p "$K8S_BIN_DIR"
for b in "${BINS[@]}"; do install -m 0755 "$out/$b" "$K8S_BIN_DIR/$b"; done
log "cached in $K8S_BIN_DIR"
