#!/usr/bin/env bash
# Generator memory per idle MQTT user and msgs per generator CPU-second, against a local
# mosquitto (issue #17): peak RSS of 1,000 and 10,000 idle users with keep-alive running
# (heartbeat 5 s, 20 s online), the slope between them; then 1:1 QoS 1 at a rate the box
# cannot quite carry, delivered messages per generator CPU-second.
#
#   MSGSTORM=target/release/msgstorm bash bench/mqtt/idle.sh
#
# Needs mosquitto and python3; at least 11,000 open files per process.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${MSGSTORM:-${CARGO_TARGET_DIR:-target}/release/msgstorm}
MOSQ=$(command -v mosquitto || echo /usr/sbin/mosquitto)
WORK=$(mktemp -d)
trap 'kill "$MOSQ_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
ulimit -n "$(ulimit -Hn)"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$WORK/mosquitto.conf" <<CONF
listener $PORT 127.0.0.1
allow_anonymous true
persistence false
max_connections -1
max_queued_messages 100000
CONF
"$MOSQ" -c "$WORK/mosquitto.conf" >"$WORK/mosquitto.log" 2>&1 &
MOSQ_PID=$!
sleep 0.5
URL="mqtt://127.0.0.1:$PORT"
echo "== $("$BIN" --version); $("$MOSQ" -h | head -1); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"

run() {
    local name=$1 text=$2
    printf '%s\n' "$text" > "$WORK/$name.toml"
    "$BIN" run "$WORK/$name.toml" --out "$WORK/$name" -q > "$WORK/$name.txt" 2>&1 || true
    python3 - "$WORK/$name/result.json" "$name" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
sh = a["shards"][0]
c = a["metrics"]["counters"]
print(f"{sys.argv[2]}: users {sh['users']}, generator CPU {sh['cpu_s']:.2f} s, "
      f"peak RSS {sh['peak_rss_bytes']/2**20:.1f} MiB, heartbeats {c['heartbeats']:,}, "
      f"disconnects {c['disconnects']}")
open(sys.argv[1] + ".rss", "w").write(str(sh["peak_rss_bytes"]))
PY
    grep -E '^\| (connect|heartbeats|errors|send → ack|end-to-end|sent |delivered intact|lost|duplicated)' "$WORK/$name.txt" || true
}

for n in 1000 10000; do
run "idle-$n" "name = \"idle-$n\"
[target]
driver = \"mqtt\"
url = \"$URL\"
heartbeat = \"5s\"
[population]
users = $n
login_rate = 4000
[[traffic]]
kind = \"idle\"
duration = \"20s\""
done
python3 - "$WORK" <<'PY'
import sys
small, big = (int(open(f"{sys.argv[1]}/idle-{n}/result.json.rss").read()) for n in (1000, 10000))
print(f"== generator memory per idle MQTT user: {(big - small) / 9000:.0f} bytes = {(big - small) / 9000 / 1024:.1f} KiB "
      f"(peak RSS 10,000 minus 1,000 idle users, / 9,000)")
PY

run "direct-max" "name = \"direct-max\"
drain = \"15s\"
[target]
driver = \"mqtt\"
url = \"$URL\"
[population]
users = 1000
login_rate = 5000
[[traffic]]
kind = \"direct\"
senders = 500
receivers = 500
rate = 40000
duration = \"10s\"
size = 100"
python3 - "$WORK/direct-max/result.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
c, cpu = a["metrics"]["counters"], a["shards"][0]["cpu_s"]
print(f"== direct-max: {c['sent']:,} sent, {c['received']:,} received, generator CPU {cpu:.2f} s: "
      f"{c['received'] / cpu:,.0f} received msgs per CPU-second")
PY
echo "== mosquitto peak RSS $(awk '/VmHWM/ {print $2" "$3}' /proc/$MOSQ_PID/status)"
