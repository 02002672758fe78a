#!/usr/bin/env bash
# MQTT benchmark of msgstorm against a local mosquitto: connections/s, msgs/s, msgs per
# generator CPU-second and generator memory per idle user (keep-alive running). Results go to bench/results/mqtt-<date>.md by hand from the
# printed summary lines (the machine and the exact commands are printed too).
#
#   cargo build --release            # once
#   bash bench/mqtt/run.sh           # ~4 minutes; MSGSTORM=path/to/msgstorm for another build
#
# Needs mosquitto (apt-get install -y mosquitto) and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${MSGSTORM:-${CARGO_TARGET_DIR:-target}/release/msgstorm}
MOSQ=$(command -v mosquitto || echo /usr/sbin/mosquitto)
WORK=$(mktemp -d)
trap 'kill "$MOSQ_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT

log() { printf '== %s\n' "$*"; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$WORK/mosquitto.conf" <<CONF
listener $PORT 127.0.0.1
allow_anonymous true
persistence false
max_connections -1
max_queued_messages 100000
CONF
ulimit -n "$(ulimit -Hn)"
"$MOSQ" -c "$WORK/mosquitto.conf" >"$WORK/mosquitto.log" 2>&1 &
MOSQ_PID=$!
sleep 0.5
URL="mqtt://127.0.0.1:$PORT"

log "machine"
echo "$(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "$(free -g | awk '/Mem:/ {print $2}') GiB RAM; $("$MOSQ" -h | head -1); $("$BIN" --version)"

# One run: name, scenario text. Prints the report's first line and the numbers we need.
run() {
    local name=$1 text=$2
    printf '%s\n' "$text" > "$WORK/$name.toml"
    log "$name: $BIN run $name.toml --out DIR -q"
    sed 's/^/    /' "$WORK/$name.toml"
    "$BIN" run "$WORK/$name.toml" --out "$WORK/$name" -q > "$WORK/$name.txt" 2>&1 || true
    head -1 "$WORK/$name.txt"
    python3 - "$WORK/$name/result.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
sh = a["shards"][0]
ts = a["traffic_started_s"] or 0
c = a["metrics"]["counters"]
print(f"   users {sh['users']}, all logged in after {ts:.2f} s ({sh['users']/max(ts, 1e-3):,.0f} connections/s), "
      f"run {sh['duration_s']:.1f} s, generator CPU {sh['cpu_s']:.2f} s, peak RSS {sh['peak_rss_bytes']/2**20:.1f} MiB")
print(f"   {c['sent']:,} sent, {c['received']:,} received ({c['received'] / max(sh['cpu_s'], 1e-3):,.0f} per generator "
      f"CPU-second), {c['heartbeats']:,} heartbeats, {c['disconnects']} disconnects")
open(sys.argv[1] + ".rss", "w").write(str(sh["peak_rss_bytes"]))
PY
    grep -E '^\| (connect|login|send → ack|end-to-end|group fan-out|sent |received |delivered intact|lost|duplicated)' "$WORK/$name.txt" || true
}

# Connections: N idle users logging in at RATE/s, online for 20 s with a 5 s heartbeat (the
# MQTT keep-alive); peak RSS at two sizes gives the generator's bytes per idle user.
for spec in 1000:4000 10000:4000 10000:50000; do
n=${spec%:*} rate=${spec#*:}
run "connect-$n-$rate" "name = \"connect-$n-$rate\"
[target]
driver = \"mqtt\"
url = \"$URL\"
heartbeat = \"5s\"
[population]
users = $n
login_rate = $rate
[[traffic]]
kind = \"idle\"
duration = \"20s\""
done
python3 - "$WORK" <<'PY'
import sys
small, big = (int(open(f"{sys.argv[1]}/connect-{n}-4000/result.json.rss").read()) for n in (1000, 10000))
print(f"== generator memory per idle MQTT user: {(big - small) / 9000:,.0f} bytes = {(big - small) / 9000 / 1024:.1f} KiB "
      f"(peak RSS 10,000 minus 1,000 idle users, / 9,000)")
PY

# Messages: 1:1 at rising rates, 1,000 users, QoS 1.
for rate in 10000 20000 40000; do
run "direct-$rate" "name = \"direct-$rate\"
drain = \"5s\"
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
rate = $rate
duration = \"10s\"
size = 100"
done

# Fan-out: 10 groups of 100, 400 msg/s in, 39,600 deliveries/s out.
run "fanout" "name = \"fanout\"
drain = \"5s\"
[target]
driver = \"mqtt\"
url = \"$URL\"
[population]
users = 1000
login_rate = 5000
[[traffic]]
kind = \"group\"
groups = 10
group_size = 100
senders_per_group = 4
rate = 400
duration = \"10s\"
size = 100"

log "mosquitto RSS at the end: $(awk '/VmHWM/ {print $2" "$3}' /proc/$MOSQ_PID/status) peak"
