#!/usr/bin/env bash
# Every test tier in one pytest run, so the closing line counts them all; exit 5 (no test ran)
# is a failure here, never a silent pass. The fast pure tier runs first: it fails fastest, and its
# Hypothesis tests then run before any kazoo client thread exists (kazoo's retry jitter draws from the
# global `random`, which Hypothesis reports as a deprecation in every strategy that runs meanwhile).
# pytest drops the repeated paths, so the trailing `tests` only adds tiers not named before it.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest tests/unit tests/integration tests/e2e tests -q -p no:cacheprovider "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "no test ran: failing" >&2
  exit 1
fi
exit "$rc"
