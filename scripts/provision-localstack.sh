#!/usr/bin/env bash
# Installs LocalStack (pinned, with the pins it needs on Python 3.11) into a venv outside the clone,
# plus sweeper's LocalStack extension (localstack/) that serves elb, elbv2 and eks. ~1.5 min on first use.
source "$(dirname "$0")/lib.sh"

apt_install python3-venv
ext_hash="$(cat "$REPO_ROOT"/localstack/pyproject.toml "$REPO_ROOT"/localstack/sweeper_localstack/*.py | sha256sum | cut -c1-16)"
if [ -x "$LOCALSTACK_VENV/bin/python" ] && [ "$(cat "$LOCALSTACK_VENV/.sweeper-ext" 2>/dev/null)" = "$ext_hash" ]; then
  log "LocalStack $LOCALSTACK_VERSION cached in $LOCALSTACK_VENV"
  exit 0
fi
if [ ! -x "$LOCALSTACK_VENV/bin/localstack" ]; then
  log "creating the LocalStack $LOCALSTACK_VERSION venv (about 1.5 minutes)"
  rm -rf "$LOCALSTACK_VENV"
  python3 -m venv "$LOCALSTACK_VENV"
  # The pins keep 4.13.1 working on Python 3.11 (docs/CONTRIBUTING.md, "LocalStack"); one resolve, from clean.
  "$LOCALSTACK_VENV/bin/pip" install -q --disable-pip-version-check \
    "localstack-core[runtime]==$LOCALSTACK_VERSION" 'cbor2<5.7' 'pyopenssl<24.3' 'cryptography<44' 'service-identity<25' >&2
fi
log "installing the sweeper LocalStack extension (elb, elbv2, eks)"
# Build from a copy: setuptools writes build/ and *.egg-info next to the sources otherwise.
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
cp -r "$REPO_ROOT/localstack/." "$tmp/"
"$LOCALSTACK_VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$tmp" >&2
echo "$ext_hash" > "$LOCALSTACK_VENV/.sweeper-ext"
