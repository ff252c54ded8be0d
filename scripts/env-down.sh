#!/usr/bin/env bash
# Stops exactly the processes env-up.sh started (by their pid files), newest first.
# `--purge` also deletes the state (etcd data, LocalStack state, certificates).
source "$(dirname "$0")/lib.sh"

for name in localstack capa-webhooks kube-controller-manager kube-apiserver etcd; do
  pidfile="$SWEEPER_STATE/run/$name.pid"
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $name (pid $pid)"
    # Each server was started with setsid: signal its whole process group (LocalStack forks).
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
done
if [ "${1:-}" = "--purge" ]; then
  log "removing $SWEEPER_STATE"
  rm -rf "$SWEEPER_STATE"
fi
