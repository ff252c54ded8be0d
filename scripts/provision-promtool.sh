#!/usr/bin/env bash
# Provides promtool (Prometheus's rule checker and unit-test runner) from Debian's `prometheus`
# package, for tests/alerts.rs. Prints its path on stdout. First run: the package (~30 s).
source "$(dirname "$0")/lib.sh"

mkdir -p "$SWEEPER_CACHE"
exec 9>"$SWEEPER_CACHE/.promtool.lock"
flock 9
apt_install prometheus
command -v promtool
