#!/bin/sh
# loadmgr-shim: installed on PATH as `loadmgr` by `make setup` (scripts/install-shim.sh).
# Runs the loadmgr of the checkout you are in (the nearest .venv/bin/loadmgr above the current
# directory), else the one of the checkout that installed this shim, like `bin/pulsar-admin` of the
# Pulsar distribution you stand in. LOADMGR_HOME=<checkout> picks one explicitly.
INSTALLED_FROM="@CHECKOUT@"
dir=${LOADMGR_HOME:-$PWD}
while [ -n "$dir" ]; do
  if [ -x "$dir/.venv/bin/loadmgr" ] && [ -f "$dir/pyproject.toml" ]; then
    exec "$dir/.venv/bin/loadmgr" "$@"
  fi
  [ "$dir" = / ] && break
  dir=$(dirname "$dir")
done
if [ -x "$INSTALLED_FROM/.venv/bin/loadmgr" ]; then
  exec "$INSTALLED_FROM/.venv/bin/loadmgr" "$@"
fi
echo "loadmgr: no checkout with .venv/bin/loadmgr here or at $INSTALLED_FROM; run 'make setup' in one" >&2
exit 127
