#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kubectl 1.20 from Debian's `kubernetes` source
# package (no binary package exists) and caches them outside the clone, keyed by version.
# First run: ~6-8 minutes on 2 cores. Later runs: a no-op.
source "$(dirname "$0")/lib.sh"

apt_install etcd-server openssl curl
BINS=(kube-apiserver kube-controller-manager kubectl)
have_all=1
for b in "${BINS[@]}"; do [ -x "$K8S_BIN_DIR/$b" ] || have_all=0; done
if [ "$have_all" = 1 ]; then
  log "kubernetes $K8S_DEB_VERSION binaries cached in $K8S_BIN_DIR"
  exit 0
fi

apt_install golang-go rsync dpkg-dev make golang-github-modern-go-reflect2-dev
src_list=/etc/apt/sources.list.d/sweeper-src.sources
if [ ! -f "$src_list" ]; then
  log "adding a deb-src entry for bookworm"
  cat > "$src_list" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -q >&2
fi

work="$SWEEPER_CACHE/kubernetes/$K8S_BUILD_KEY/src"
rm -rf "$work" && mkdir -p "$work"
cd "$work"
log "fetching source package kubernetes=$K8S_DEB_VERSION"
apt-get source -q "kubernetes=$K8S_DEB_VERSION" >&2
tree="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)"
cd "$tree"
log "replacing vendored modern-go/reflect2 1.0.1 with 1.0.2 (Go >= 1.18 compatibility)"
rm -rf vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
rm -f vendor/github.com/modern-go/reflect2/go.mod
# The GOPATH layout from the package's debian/rules: the tree must appear as k8s.io/kubernetes.
export GOPATH="$tree/.go" CGO_ENABLED=0 GOFLAGS=-mod=vendor GOCACHE="$SWEEPER_CACHE/go-build"
mkdir -p .go/src/k8s.io
[ -L .go/src/k8s.io/kubernetes ] || ln -s ../../.. .go/src/k8s.io/kubernetes
log "building ${BINS[*]} (several minutes on first use)"
env HOME="$work" make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kubectl" >&2
mkdir -p "$K8S_BIN_DIR"
for b in "${BINS[@]}"; do install -m 0755 "_output/bin/$b" "$K8S_BIN_DIR/$b"; done
cd / && rm -rf "$work"
log "cached in $K8S_BIN_DIR"
