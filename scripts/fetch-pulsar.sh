#!/usr/bin/env bash
# Fetch the pinned Apache Pulsar release's broker jars (and their dependencies) from Maven Central
# into a cache outside git: ${LOADMGR_PULSAR_LIB:-~/.cache/loadmgr/pulsar-<version>/lib}.
# Idempotent: a complete cache (marked by .complete) is left alone.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
pom="$here/deploy/pulsar/pom.xml"
version="$(sed -n 's:.*<pulsar.version>\(.*\)</pulsar.version>.*:\1:p' "$pom")"
lib="${LOADMGR_PULSAR_LIB:-${XDG_CACHE_HOME:-$HOME/.cache}/loadmgr/pulsar-$version/lib}"
if [ -f "$lib/.complete" ]; then
  exit 0
fi
if ! command -v mvn >/dev/null; then
  echo "fetch-pulsar: Maven (mvn) is needed to fetch Apache Pulsar $version's jars: apt-get install maven" >&2
  exit 2
fi
echo "fetch-pulsar: Apache Pulsar $version broker jars -> $lib (Maven Central, once)"
mkdir -p "$lib"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$pom" "$work/pom.xml"
# Pulsar's poms name repositories besides Maven Central; settings.xml sends every request there.
if ! mvn -q -B -s "$here/deploy/pulsar/settings.xml" -f "$work/pom.xml" package \
    -Dpulsar.lib="$lib" -Dproject.build.directory="$work/target" >"$work/mvn.log" 2>&1; then
  tail -30 "$work/mvn.log" >&2
  echo "fetch-pulsar: Maven could not fetch Apache Pulsar $version (log above)" >&2
  exit 2
fi
touch "$lib/.complete"
echo "fetch-pulsar: $(ls "$lib" | wc -l) jars in $lib"
