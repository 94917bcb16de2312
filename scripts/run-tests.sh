#!/usr/bin/env bash
# Every test tier in one pytest run, so the closing line counts them all; exit 5 (no test ran)
# is a failure here, never a silent pass. The fast pure tier runs first: it fails fastest, and its
# Hypothesis tests then run before any kazoo client thread exists (kazoo's retry jitter draws from the
# global `random`, which Hypothesis reports as a deprecation in every strategy that runs meanwhile).
# Every other folder of tests/ that holds test modules follows, so a new tier is never left out.
set -uo pipefail
cd "$(dirname "$0")/.."
tiers=(tests/unit)
for dir in tests/*/; do
  dir=${dir%/}
  if [ "$dir" != tests/unit ] && compgen -G "$dir/test_*.py" > /dev/null; then
    tiers+=("$dir")
  fi
done
.venv/bin/python -m pytest "${tiers[@]}" -q -p no:cacheprovider "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "no test ran: failing" >&2
  exit 1
fi
exit "$rc"
