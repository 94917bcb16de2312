#!/usr/bin/env bash
# ZooKeeper (tests, demo) and PySpark both run on the JVM: Java 17+ is the one system prerequisite.
set -euo pipefail
if ! command -v java >/dev/null 2>&1; then
  echo "Java 17+ is required (ZooKeeper and PySpark run on it) and 'java' is not on PATH." >&2
  echo "Install it, e.g.: apt-get install -y openjdk-17-jre-headless  (macOS: brew install openjdk@17)" >&2
  exit 1
fi
ver=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${ver%%.*}
[ "$major" = "1" ] && major=$(echo "$ver" | cut -d. -f2)
if [ "${major:-0}" -lt 17 ]; then
  echo "Java 17+ is required; found $ver. Install e.g.: apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
