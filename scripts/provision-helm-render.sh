#!/usr/bin/env bash
# Builds scripts/helm-render (the subset of `helm template` that deploy/helm/sweeper uses) from
# Debian's Go and Go library packages, no network but Debian's, and caches the binary outside the
# clone, keyed by the source and the library versions. Prints the binary's path on stdout.
# First run: ~30 s (packages + build). Later runs: a no-op.
source "$(dirname "$0")/lib.sh"

# Tests call this in parallel: one provisioner at a time (apt and the build), the others wait.
mkdir -p "$SWEEPER_CACHE/helm-render"
exec 9>"$SWEEPER_CACHE/helm-render/.lock"
flock 9

PKGS=(golang-go golang-github-masterminds-sprig-dev golang-github-ghodss-yaml-dev)
apt_install "${PKGS[@]}"

src="$REPO_ROOT/scripts/helm-render/main.go"
key="$({ sha256sum "$src"; dpkg-query -W "${PKGS[@]}"; } | sha256sum | cut -c1-16)"
bin="$SWEEPER_CACHE/helm-render/$key/helm-render"
if [ ! -x "$bin" ]; then
  log "building helm-render into $bin"
  mkdir -p "$(dirname "$bin")"
  tmp="$bin.tmp.$$"
  # Debian's gocode layout is a GOPATH (no modules): /usr/share/gocode/src/github.com/...
  (cd "$REPO_ROOT/scripts/helm-render" &&
    GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOCACHE="$SWEEPER_CACHE/go-build" \
      go build -o "$tmp" .) >&2
  mv -f "$tmp" "$bin"
fi
echo "$bin"
