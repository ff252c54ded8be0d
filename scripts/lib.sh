# Shared settings for the environment scripts. Sourced, never run.
# Everything expensive lives in SWEEPER_CACHE (outside the clone, reused across clones and CI runs);
# everything about one running environment lives in SWEEPER_STATE (pids, logs, certs, env file).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SWEEPER_CACHE="${SWEEPER_CACHE:-$HOME/.cache/sweeper}"
SWEEPER_STATE="${SWEEPER_STATE:-$REPO_ROOT/.state}"
# Builds too (the AWS SDK crates take ~15 minutes from scratch): each checkout builds in its own
# target directory under the cache, seeded from CI's (scripts/target-dir.sh says why), unless the
# caller picks another (.ci/run picks CI's shared one).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(SWEEPER_CACHE="$SWEEPER_CACHE" "$REPO_ROOT/scripts/target-dir.sh")}"

# Pinned versions: the cache is keyed by them, so bumping one rebuilds only that part.
# The Go programs the tests run against are pinned by the go.mod/go.sum under scripts/go/: the
# cache key of each is the hash of its folder, so a bump there rebuilds it and nothing else.
go_key() { # dir under scripts/go -> a short key of its files (go.mod, go.sum, its own sources)
  (cd "$REPO_ROOT/scripts/go/$1" && sha256sum $(ls | LC_ALL=C sort)) | sha256sum | cut -c1-12
}
go_pin() { # dir module -> the version its go.mod requires
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' \
    "$REPO_ROOT/scripts/go/$1/go.mod"
}
# SWEEPER_KUBE selects the test API server: `current` (default) builds kube-apiserver,
# kube-controller-manager, kubectl and etcd from the k8s.io/kubernetes module that
# scripts/go/kubernetes pins; `1.20` is the old fallback, Debian's 1.20 source package
# (scripts/provision-kubernetes-1.20.sh), which needs the upstream CRDs' CEL rules stripped.
SWEEPER_KUBE="${SWEEPER_KUBE:-current}"
if [ "$SWEEPER_KUBE" = 1.20 ]; then
  K8S_DEB_VERSION="1.20.5+really1.20.2-1.1+deb12u1"
  # "+reflect2-1.0.2": the tree vendors modern-go/reflect2 1.0.1, which crashes (SIGSEGV in map
  # iteration, e.g. on every custom-resource create) when built with Go >= 1.18; the build swaps in
  # Debian's reflect2 1.0.2. The suffix keeps binaries built without the fix out of use.
  K8S_BUILD_KEY="$K8S_DEB_VERSION+reflect2-1.0.2"
  K8S_VERSION="1.20.2"
else
  K8S_VERSION="$(go_pin kubernetes k8s.io/kubernetes)"
  K8S_VERSION="${K8S_VERSION#v}"
  K8S_BUILD_KEY="$K8S_VERSION-$(go_key kubernetes)"
fi
K8S_BIN_DIR="$SWEEPER_CACHE/kubernetes/$K8S_BUILD_KEY/bin"
# CAPA's (and Cluster API's) admission webhooks, served by scripts/go/capa-webhooks.
CAPA_VERSION="$(go_pin capa-webhooks sigs.k8s.io/cluster-api-provider-aws/v2)"
CAPA_WEBHOOKS_DIR="$SWEEPER_CACHE/capa-webhooks/$CAPA_VERSION-$(go_key capa-webhooks)"
# CAPA's own AWSCluster controller, served by scripts/go/capa-manager (same CAPA release as the
# webhooks), started per test by scripts/capa-manager.sh, never by env-up.
CAPA_MANAGER_VERSION="$(go_pin capa-manager sigs.k8s.io/cluster-api-provider-aws/v2)"
CAPA_MANAGER_BIN="$SWEEPER_CACHE/capa-manager/$CAPA_MANAGER_VERSION-$(go_key capa-manager)/capa-manager"
# helm, built from helm.sh/helm/v3 (scripts/go/helm).
HELM_VERSION="$(go_pin helm helm.sh/helm/v3)"
HELM_BIN="$SWEEPER_CACHE/helm/$HELM_VERSION-$(go_key helm)/helm"
# cargo-nextest, the runner `make test` uses, installed from crates.io into the cache.
NEXTEST_VERSION="0.9.151"
NEXTEST_ROOT="$SWEEPER_CACHE/cargo-nextest/$NEXTEST_VERSION"
LOCALSTACK_VERSION="4.13.1"
LOCALSTACK_VENV="$SWEEPER_CACHE/localstack/$LOCALSTACK_VERSION/venv"

# Loopback only; ports chosen away from the defaults so a stray local etcd/apiserver doesn't collide,
# and below Linux's ephemeral range (32768-60999), where an outbound connection may hold the port.
ETCD_CLIENT_PORT="${ETCD_CLIENT_PORT:-32379}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-32380}"
APISERVER_PORT="${APISERVER_PORT:-26443}"
CAPA_WEBHOOK_PORT="${CAPA_WEBHOOK_PORT:-29443}"
LOCALSTACK_PORT="${LOCALSTACK_PORT:-4566}"
# CAPA's manager (scripts/capa-manager.sh) serves no webhook (capa-webhooks does) and, by default,
# neither metrics nor health probes: "0" is off, as in CAPA's own flags. A port turns one on.
CAPA_MANAGER_METRICS_ADDR="${CAPA_MANAGER_METRICS_ADDR:-0}"
CAPA_MANAGER_HEALTH_ADDR="${CAPA_MANAGER_HEALTH_ADDR:-0}"

# The machine's Go (the test servers are built from Go modules), where a shell's PATH lacks it.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi

log() { printf '[sweeper-env] %s\n' "$*" >&2; }

apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  if [ ! -f "$SWEEPER_CACHE/.apt-updated" ] || [ -n "$(find "$SWEEPER_CACHE/.apt-updated" -mmin +1440 2>/dev/null)" ]; then
    apt-get update -q >&2
    mkdir -p "$SWEEPER_CACHE" && touch "$SWEEPER_CACHE/.apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

# A benchmark measures the API server's requests and CPU: anything else sending to it (a namespace
# the namespace controller retries for ever, a stray collector) is counted in. Prints the
# requests/s the server answers while nothing of the benchmark runs (every verb but WATCH, over
# 10 s), and refuses to go on while it stays above 3/s (leases and the environment's probes send about 1/s).
# BENCH_ALLOW_BUSY_SERVER=1 goes on anyway (the figures are then not of record).
check_idle_server() {
  # Up to six 10-s windows: a server still settling after the previous target is waited for, one
  # busy for a minute is refused. Seen on 2026-12-03: 8 requests/s in the 10 s after `make
  # bench-capa` ended (what it had left going away), 0/s 15 s later.
  local kubectl=("$SWEEPER_K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG")
  local sum='/^apiserver_request_total/ && $0 !~ /verb="WATCH"/ {s += $NF} END {printf "%d\n", s}'
  local a b rate window
  for window in 1 2 3 4 5 6; do
    a="$("${kubectl[@]}" get --raw /metrics | awk "$sum")"
    sleep 10
    b="$("${kubectl[@]}" get --raw /metrics | awk "$sum")"
    rate=$(( (b - a) / 10 ))
    log "the API server answers $rate requests/s with no benchmark running (window $window of 6)"
    if [ "$rate" -le 3 ]; then
      return 0
    fi
  done
  if [ "${BENCH_ALLOW_BUSY_SERVER:-0}" != 1 ]; then
    log "something else is using the API server (a namespace stuck Terminating? kubectl get ns): its requests and CPU would be counted in the figures; BENCH_ALLOW_BUSY_SERVER=1 to run anyway"
    return 1
  fi
}
