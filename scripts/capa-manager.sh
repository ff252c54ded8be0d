#!/usr/bin/env bash
# CAPA's own AWSCluster controller (scripts/go/capa-manager), started on demand, never by env-up:
#   scripts/capa-manager.sh start NAMESPACE [--gc-gate on|off] [--account ID]
#   scripts/capa-manager.sh stop NAMESPACE
# One manager per namespace (the one whose AWSClusters it reconciles), against the environment of
# $SWEEPER_STATE (its kubeconfig and LocalStack). --gc-gate sets CAPA's ExternalResourceGC gate
# (default: on, CAPA's default). --account runs it with that LocalStack account's keys (for
# AWSClusters on the controller identity; a static identity's Secret names its own account).
# Its log: $SWEEPER_STATE/logs/capa-manager-NAMESPACE.log. The tests spawn the binary themselves
# (tests/support/capa_manager.rs); this is the same start for the demo and by hand.
source "$(dirname "$0")/lib.sh"
cmd="${1:-}"; ns="${2:-}"
[ -n "$cmd" ] && [ -n "$ns" ] || { echo "usage: $0 start|stop NAMESPACE [--gc-gate on|off] [--account ID]" >&2; exit 2; }
shift 2
pidfile="$SWEEPER_STATE/run/capa-manager-$ns.pid"
case "$cmd" in
  start)
    gate=true; account=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --gc-gate) case "$2" in on) gate=true ;; off) gate=false ;; *) echo "--gc-gate on|off" >&2; exit 2 ;; esac; shift 2 ;;
        --account) account="$2"; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
      esac
    done
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      log "capa-manager for $ns already running (pid $(cat "$pidfile"))"; exit 0
    fi
    bin="$("$REPO_ROOT/scripts/provision-capa-manager.sh")"
    # shellcheck disable=SC1091
    source "$SWEEPER_STATE/env"
    [ -z "$account" ] || export AWS_ACCESS_KEY_ID="$account"
    mkdir -p "$SWEEPER_STATE/run" "$SWEEPER_STATE/logs"
    log "starting CAPA's controller for namespace $ns, ExternalResourceGC=$gate (log: $SWEEPER_STATE/logs/capa-manager-$ns.log)"
    # CAPA's clients take LocalStack from AWS_ENDPOINT_URL (the SDK's own variable, in the env file).
    setsid "$bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" \
      --feature-gates "ExternalResourceGC=$gate" --crds "$(dirname "$bin")/awsmachines.yaml" \
      --metrics-bind-address "$CAPA_MANAGER_METRICS_ADDR" --health-addr "$CAPA_MANAGER_HEALTH_ADDR" \
      >"$SWEEPER_STATE/logs/capa-manager-$ns.log" 2>&1 </dev/null &
    echo $! > "$pidfile"
    ;;
  stop)
    [ -f "$pidfile" ] || exit 0
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    rm -f "$pidfile"
    ;;
  *) echo "usage: $0 start|stop NAMESPACE [--gc-gate on|off] [--account ID]" >&2; exit 2 ;;
esac
