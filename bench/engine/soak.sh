#!/usr/bin/env bash
# Generator memory over a long run (issue 24): bench/engine/soak.toml (2,000 native users,
# ~500 sends/s of 1:1 and group chat, ~2,900 deliveries/s) for 10 minutes against a fresh
# `msgstorm serve` of the build under test, run as its own process (core 0; the generator
# on core 1), so the generator's RSS is its own.
#   bench/engine/soak.sh NAME=BIN [NAME=BIN …]   (e.g. before=/tmp/a after=target/release/msgstorm)
#   DURATION=60s bench/engine/soak.sh …          (a shorter traffic phase, to try the script)
# Prints, per build: what was sent and delivered, the generator's and the server's RSS (the
# monitor's 1 s samples) at minutes 1..10 of the run, and the slope of a least-squares line
# through every sample from minute 1 (after logins and warm-up) to minute 10 (traffic ends
# ~2 s later; the drain and the final verification sync are left out), in MB (10^6 B) a
# minute.
# Not a test: run by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
port=${PORT:-7824}
duration=${DURATION:-600s}
work=$(mktemp -d)
srv=
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT

# Prints the delivery counts, then "minute generator_MB server_MB" lines, then the slopes,
# over the first $2 seconds.
summary() {
    python3 - "$1" "$2" <<'PY'
import json, sys
a = json.load(open(sys.argv[1] + "/result.json"))
until = int(sys.argv[2]) // 60 * 60
r = json.load(open(sys.argv[1] + "/report.json"))
d = r["delivery"]
c = a["metrics"]["counters"]
print(f"sent {c.get('sent', 0):,}, received {c.get('received', 0):,}, "
      f"expected {d['expected']:,}, delivered {d['delivered']:,}, lost {d['lost']:,}")
procs = {("generator" if p["generator"] else "server"): p for p in a["processes"]}
mb = lambda b: b / 1e6
def at(p, sec):
    return max((s for s in p["series"] if s[0] <= sec), key=lambda s: s[0])[2]
last = min(until, max(s[0] for s in procs["generator"]["series"]))
for minute in range(1, last // 60 + 1):
    print(f"minute {minute:2}: generator {mb(at(procs['generator'], 60 * minute)):7.1f} MB, "
          f"server {mb(at(procs['server'], 60 * minute)):7.1f} MB")
def slope(p):
    pts = [(s[0] / 60, mb(s[2])) for s in p["series"] if 60 <= s[0] <= last]
    n = len(pts)
    if n < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
secs = a["metrics"]["seconds"]
packed = sum(len(s.get(k, "")) * 3 // 4 for s in secs for k in ("e2e", "ack", "request"))
print(f"series: {len(secs)} seconds, their latency sketches {packed / len(secs):,.0f} B a "
      f"second packed")
print(f"slope from minute 1: generator {slope(procs['generator']):+.3f} MB/min, "
      f"server {slope(procs['server']):+.3f} MB/min (seconds 60 to {last})")
PY
}

for build in "$@"; do
    name=${build%%=*} bin=${build#*=}
    rm -rf "$work/data" "$work/out"
    taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --secret bench \
        --durability normal --data "$work/data" --queue 4096 2>"$work/serve.log" &
    srv=$!
    sleep 1
    sed -e "s/127.0.0.1:7824/127.0.0.1:$port/" -e "s/^duration = .*/duration = \"$duration\"/" \
        bench/engine/soak.toml >"$work/soak.toml"
    printf '\n[monitor]\npids = [%s]\n' "$srv" >>"$work/soak.toml"
    echo "$name: load before $(cut -d' ' -f1-3 /proc/loadavg)"
    taskset -c 1 "$bin" run "$work/soak.toml" -q --out "$work/out" >/dev/null 2>&1 || true
    "$bin" report "$work/out/result.json" --json >"$work/out/report.json" 2>/dev/null || true
    kill "$srv"
    wait "$srv" 2>/dev/null || true
    echo "$name: load after $(cut -d' ' -f1-3 /proc/loadavg)"
    summary "$work/out" "${duration%s}" | sed "s/^/$name: /"
done
