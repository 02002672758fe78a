#!/usr/bin/env bash
# k6 against the echo endpoint.
#   bench/peers/k6.sh install            installs k6 (go install, pinned) if missing
#   bench/peers/k6.sh run MODE OUT.json  MODE: hold | rate | max (see echo.k6.js)
# Settings from the environment: URL CONNS RATE DURATION HOLD SIZE WINDOW.
# OUT.json gets {"sent", "received", "p50_ms", "p99_ms"} as k6 reports them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
K6_VERSION=v1.8.1
PEERS=${PEERS_DIR:-$HOME/.cache/msgstorm-peers}
K6=$PEERS/bin/k6

install() {
    if [[ -x $K6 ]] && "$K6" version 2>/dev/null | grep -q "${K6_VERSION}"; then
        return
    fi
    mkdir -p "$PEERS/bin"
    echo "installing k6 ${K6_VERSION} with go install (a few minutes)" >&2
    GOBIN=$PEERS/bin go install "go.k6.io/k6@${K6_VERSION}"
}

run() {
    local mode=$1 out=$2
    install
    local summary
    summary=$(mktemp --suffix .json)
    MODE=$mode SUMMARY=$summary "$K6" run --quiet --no-usage-report --no-color \
        "$HERE/echo.k6.js" >&2
    python3 - "$summary" "$out" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
def v(name, key):
    return m.get(name, {}).get("values", {}).get(key)
json.dump({
    "sent": v("ws_msgs_sent", "count") or 0,
    "received": v("ws_msgs_received", "count") or 0,
    "p50_ms": v("echo_rtt", "med"),
    "p99_ms": v("echo_rtt", "p(99)"),
}, open(sys.argv[2], "w"))
PY
    rm -f "$summary"
}

case ${1:-} in
install) install ;;
run) run "$2" "$3" ;;
*) echo "usage: $0 install | run MODE OUT.json" >&2; exit 2 ;;
esac
