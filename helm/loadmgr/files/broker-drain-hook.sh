#!/bin/sh
# Broker pod lifecycle hook for rolling restarts through loadmgr (docs/drain.md).
#
#   broker-drain-hook.sh drain      preStop: drain this broker through loadmgr's REST, at most
#                                   DRAIN_DEADLINE_SECONDS, then let Pulsar's own shutdown go on
#   broker-drain-hook.sh uncordon   postStart: uncordon this broker (in the background: it waits
#                                   for loadmgr to answer, at most UNCORDON_DEADLINE_SECONDS)
#
# Environment: LOADMGR_URL (http://<release>-loadmgr:8080), LOADMGR_API_TOKEN_FILE (the admin
# token, mounted from loadmgr's Secret), BROKER_ID (default: `hostname -f`:BROKER_WEB_PORT, as the
# broker registers under /loadbalance/brokers), DRAIN_DEADLINE_SECONDS, UNCORDON_DEADLINE_SECONDS,
# LOADMGR_CA (a CA bundle for an HTTPS loadmgr).
# The hook never fails the pod: past its deadline, or when loadmgr cannot be reached, it exits 0 and
# Pulsar's graceful shutdown unloads whatever is left.
set -u

URL="${LOADMGR_URL:?LOADMGR_URL is not set}"
URL="${URL%/}"
BROKER="${BROKER_ID:-$(hostname -f):${BROKER_WEB_PORT:-8080}}"
DRAIN_DEADLINE="${DRAIN_DEADLINE_SECONDS:-240}"
UNCORDON_DEADLINE="${UNCORDON_DEADLINE_SECONDS:-600}"

log() { echo "loadmgr-hook: $*" >&2; }

call() {
  # call METHOD PATH: prints the body, then the HTTP status on a line of its own
  set -- "$@" ${LOADMGR_CA:+--cacert "$LOADMGR_CA"}
  if [ -n "${LOADMGR_API_TOKEN_FILE:-}" ] && [ -r "$LOADMGR_API_TOKEN_FILE" ]; then
    curl -sS -m 10 -X "$1" -H "Authorization: Bearer $(cat "$LOADMGR_API_TOKEN_FILE")" \
      -H 'Content-Type: application/json' -o - -w '\n%{http_code}' "$URL$2" ${3:+"$3"} ${4:+"$4"}
  else
    curl -sS -m 10 -X "$1" -H 'Content-Type: application/json' -o - -w '\n%{http_code}' "$URL$2" ${3:+"$3"} ${4:+"$4"}
  fi
}

status_of() { printf '%s\n' "$1" | tail -n 1; }
body_of() { printf '%s\n' "$1" | sed '$d'; }
state_of() { body_of "$1" | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p' | head -n 1; }

drain() {
  end=$(( $(date +%s) + DRAIN_DEADLINE ))
  out=$(call POST "/brokers/$BROKER/drain") || { log "loadmgr unreachable: no drain"; return 0; }
  code=$(status_of "$out")
  case "$code" in
    200) log "draining $BROKER (deadline ${DRAIN_DEADLINE}s)" ;;
    409) log "drain of $BROKER refused, Pulsar's shutdown unloads: $(body_of "$out")"; return 0 ;;
    *) log "drain of $BROKER not started (HTTP $code): $(body_of "$out")"; return 0 ;;
  esac
  while [ "$(date +%s)" -lt "$end" ]; do
    out=$(call GET "/brokers/$BROKER/drain") || { sleep 2; continue; }
    state=$(state_of "$out")
    case "$state" in
      done) log "drain of $BROKER done"; return 0 ;;
      failed|stopped) log "drain of $BROKER $state"; return 0 ;;
    esac
    sleep 1
  done
  log "drain of $BROKER not done after ${DRAIN_DEADLINE}s; stopping it, Pulsar's shutdown unloads the rest"
  call POST "/brokers/$BROKER/drain/stop" >/dev/null 2>&1 || true
  return 0
}

uncordon() {
  end=$(( $(date +%s) + UNCORDON_DEADLINE ))
  while [ "$(date +%s)" -lt "$end" ]; do
    if out=$(call POST "/brokers/$BROKER/uncordon" 2>/dev/null); then
      code=$(status_of "$out")
      case "$code" in
        200) log "$BROKER uncordoned"; return 0 ;;
        401|403) log "uncordon of $BROKER refused (HTTP $code): check the token"; return 0 ;;
      esac
    fi
    sleep 5  # loadmgr or this broker not up yet (404: not registered and not cordoned)
  done
  log "could not uncordon $BROKER within ${UNCORDON_DEADLINE}s: run \`loadmgr brokers uncordon $BROKER\`"
  return 0
}

case "${1:-}" in
  drain) drain ;;
  uncordon) uncordon ;;
  *) log "usage: $0 drain|uncordon"; exit 0 ;;
esac
exit 0
