#!/usr/bin/env bash
# msgstorm against the echo endpoint, with the same settings as the peers.
#   bench/peers/msgstorm.sh run MODE OUT.json  MODE: hold | rate | max
# Settings from the environment: URL CONNS RATE DURATION HOLD SIZE, MAX_RATE (the offered
# rate of `max`), LOGIN_RATE (connections opened per second, default 1000000: all at once),
# MSGSTORM (the binary; default target/release/msgstorm).
# OUT.json gets {"sent", "received", "lost", "p50_ms", "p99_ms"}: round trips counted from
# each frame's due time (open loop), as msgstorm reports them.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MSGSTORM=${MSGSTORM:-${CARGO_TARGET_DIR:-$REPO/target}/release/msgstorm}

run() {
    local mode=$1 out=$2 dir
    dir=$(mktemp -d)
    local users=${CONNS:-100} senders rate duration
    case $mode in
    # Idle: one connection sends one frame a second so the pattern has a sender; the
    # others only hold their connection. Logins as fast as they go.
    hold) senders=1 rate=1 duration=${HOLD:-10} ;;
    rate) senders=$users rate=${RATE:-20000} duration=${DURATION:-10} ;;
    max) senders=$users rate=${MAX_RATE:-2000000} duration=${DURATION:-10} ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    cat >"$dir/echo.toml" <<TOML
name = "peers-$mode"
drain = "60s"
[target]
driver = "echo"
url = "${URL}"
heartbeat = "0s"
connect_timeout = "60s"
[population]
users = $users
login_rate = ${LOGIN_RATE:-1000000}
[[traffic]]
kind = "echo"
connections = $senders
rate = $rate
duration = "${duration}s"
size = ${SIZE:-100}
[ledger]
verify_sync = false
TOML
    "$MSGSTORM" run "$dir/echo.toml" --out "$dir/out" --quiet >"$dir/report.txt" || true
    cat "$dir/report.txt" >&2
    python3 - "$dir/report.txt" "$out" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
def cells(label):
    for line in text.splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if parts and parts[0] == label:
            return parts[1:]
    return []
def num(s):
    return int(s.replace(",", "")) if s and re.fullmatch(r"[\d,]+", s) else 0
def ms(s):
    m = re.fullmatch(r"([\d.]+) (µs|ms|s)", s or "")
    if not m:
        return None
    return float(m.group(1)) * {"µs": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
e2e = cells("end-to-end (due → received)")
json.dump({
    "sent": num((cells("sent") or [""])[0]),
    "received": num((cells("received") or [""])[0]),
    "lost": num((cells("lost") or [""])[0]),
    "p50_ms": ms(e2e[1]) if len(e2e) > 3 else None,
    "p99_ms": ms(e2e[3]) if len(e2e) > 3 else None,
}, open(sys.argv[2], "w"))
PY
    rm -rf "$dir"
}

case ${1:-} in
run) run "$2" "$3" ;;
*) echo "usage: $0 run MODE OUT.json" >&2; exit 2 ;;
esac
