#!/usr/bin/env bash
# Every test tier in one pytest run, so the closing line counts them all; exit 5 (no test ran)
# is a failure here, never a silent pass.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest tests -q -p no:cacheprovider "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "no test ran: failing" >&2
  exit 1
fi
exit "$rc"
