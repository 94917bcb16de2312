#!/usr/bin/env bash
# Puts `loadmgr` on PATH after `make setup`, so the README's commands work as typed in any terminal.
# The shim (scripts/loadmgr-shim.sh) runs the nearest checkout's .venv/bin/loadmgr. It goes into the
# first directory on PATH of: $LOADMGR_SHIM_DIR, ~/.local/bin, /usr/local/bin that is writable; an
# existing `loadmgr` there that is not our shim is left alone. LOADMGR_NO_SHIM=1 skips all of it.
set -euo pipefail
checkout=$(cd "$(dirname "$0")/.." && pwd)
venv_cli="$checkout/.venv/bin/loadmgr"
say() { echo "loadmgr: $*"; }
if [ -n "${LOADMGR_NO_SHIM:-}" ]; then
  say "no shim installed (LOADMGR_NO_SHIM); type $venv_cli, or 'source .venv/bin/activate' first"
  exit 0
fi
on_path() { case ":$PATH:" in *":$1:"*) return 0 ;; *) return 1 ;; esac; }
for dir in ${LOADMGR_SHIM_DIR:-} "$HOME/.local/bin" /usr/local/bin; do
  [ -n "$dir" ] && on_path "$dir" && [ -d "$dir" ] && [ -w "$dir" ] || continue
  target="$dir/loadmgr"
  if [ -e "$target" ] && ! grep -q "loadmgr-shim" "$target" 2>/dev/null; then
    say "$target exists and is not loadmgr's shim: left alone; type $venv_cli instead"
    exit 0
  fi
  tmp=$(mktemp "$dir/.loadmgr.XXXXXX")
  sed "s|@CHECKOUT@|$checkout|" "$checkout/scripts/loadmgr-shim.sh" >"$tmp"
  chmod 755 "$tmp"
  mv -f "$tmp" "$target"
  say "'loadmgr' is on PATH ($target runs the nearest checkout's .venv/bin/loadmgr)"
  exit 0
done
say "no writable directory on PATH for a shim: type $venv_cli, or 'source .venv/bin/activate' first"
