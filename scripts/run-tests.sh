#!/usr/bin/env bash
# Every test tier in one pytest run, so the closing line counts them all; exit 5 (no test ran)
# is a failure here, never a silent pass. Modules are spread over two xdist workers (most
# integration and e2e tests wait on ZooKeeper sessions and intervals rather than the CPU, so two
# overlap well on two cores); tests/scheduling.py hands them out the known-long first and keeps
# modules that share a costly set-up (Spark session, e2e demos, Pulsar clusters) on one worker
# (tests/conftest.py has the serial order). LOADMGR_TEST_WORKERS=0 runs everything in one process.
# Every folder of tests/ that holds test modules is included, so a new tier is never left out.
set -uo pipefail
cd "$(dirname "$0")/.."
tiers=(tests/unit)
for dir in tests/*/; do
  dir=${dir%/}
  if [ "$dir" != tests/unit ] && compgen -G "$dir/test_*.py" > /dev/null; then
    tiers+=("$dir")
  fi
done
workers=${LOADMGR_TEST_WORKERS:-2}
if [ "$workers" -gt 0 ]; then
  parallel=(-n "$workers" --dist loadfile)
else
  parallel=()
fi
.venv/bin/python -m pytest "${tiers[@]}" -q -p no:cacheprovider "${parallel[@]}" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "no test ran: failing" >&2
  exit 1
fi
exit "$rc"
