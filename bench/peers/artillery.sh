#!/usr/bin/env bash
# Artillery against the echo endpoint.
#   bench/peers/artillery.sh install            installs Artillery (npm, pinned, no browsers)
#   bench/peers/artillery.sh run MODE OUT.json  MODE: hold | rate | max
# Settings from the environment: URL CONNS RATE DURATION HOLD SIZE.
# OUT.json gets {"sent", "received", "p50_ms", "p99_ms"} as Artillery reports them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ARTILLERY_VERSION=2.0.34
PEERS=${PEERS_DIR:-$HOME/.cache/msgstorm-peers}
DIR=$PEERS/artillery
ARTILLERY=$DIR/node_modules/.bin/artillery

install() {
    if [[ -x $ARTILLERY ]] && grep -q "\"version\": \"${ARTILLERY_VERSION}\"" \
        "$DIR/node_modules/artillery/package.json" 2>/dev/null; then
        return
    fi
    mkdir -p "$DIR"
    [[ -f $DIR/package.json ]] || echo '{"private": true}' >"$DIR/package.json"
    echo "installing artillery ${ARTILLERY_VERSION} with npm (no browser download)" >&2
    (cd "$DIR" && PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
        npm install --no-audit --no-fund --ignore-scripts "artillery@${ARTILLERY_VERSION}" >&2)
}

run() {
    local mode=$1 out=$2
    install
    local script phases report
    case $mode in
    hold) script=echo-hold.artillery.yml ;;
    rate) script=echo-rate.artillery.yml ;;
    max) script=echo-max.artillery.yml ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    # Every connection arrives within one second (hold: as fast as Artillery can open them).
    phases="[{\"duration\": 1, \"arrivalCount\": ${CONNS:-100}}]"
    report=$(mktemp --suffix .json)
    DO_NOT_TRACK=1 ARTILLERY_DISABLE_TELEMETRY=true "$ARTILLERY" run --quiet \
        --overrides "{\"config\": {\"target\": \"${URL}\", \"phases\": $phases, \"variables\": {\"hold\": ${HOLD:-10}}}}" \
        --output "$report" "$HERE/$script" >&2
    python3 - "$report" "$out" <<'PY'
import json, sys
agg = json.load(open(sys.argv[1]))["aggregate"]
c, s = agg.get("counters", {}), agg.get("summaries", {}).get("echo.rtt", {})
json.dump({
    "sent": c.get("websocket.messages_sent", 0),
    "received": c.get("echo.received", 0),
    "p50_ms": s.get("median"),
    "p99_ms": s.get("p99"),
}, open(sys.argv[2], "w"))
PY
    rm -f "$report"
}

case ${1:-} in
install) install ;;
run) run "$2" "$3" ;;
*) echo "usage: $0 install | run MODE OUT.json" >&2; exit 2 ;;
esac
