#!/usr/bin/env bash
# Generator efficiency against the reference server (issue #4's benchmark):
#  (1) generator memory per idle connection (slope between 1,000 and 10,000 idle users);
#  (2) generator and server CPU seconds per million delivered messages, at rising group
#      chat rates, and which side saturated first.
# The server runs as its own process (taskset core 0), the generator on core 1.
# Writes bench/results/engine-<date>.md. Not a test: run by hand on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q
bin=target/release/msgstorm
out=bench/results/engine-$(date -u +%Y-%m-%d).md
work=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT

port=7790
taskset -c 0 $bin serve --listen 127.0.0.1:$port --secret bench --durability normal \
    --data "$work/data" --queue 4096 2>"$work/serve.log" &
srv=$!
sleep 1

scenario() { # users, traffic block
    cat <<TOML
[target]
url = "ws://127.0.0.1:$port/ws"
[target.auth]
secret = "bench"
[population]
users = $1
login_rate = 5000
$2
[monitor]
pids = [$srv]
TOML
}

json() { python3 -c "import json,sys; a=json.load(open('$1/result.json')); print(eval(sys.argv[1]))" "$2"; }

{
echo "# Generator efficiency against the reference server — $(date -u +%Y-%m-%d)"
echo
echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB;"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
echo "Server: \`taskset -c 0 msgstorm serve --durability normal --queue 4096\` (release build);"
echo "generator: \`taskset -c 1 msgstorm run SCENARIO -q\` (release build). Script: \`bench/engine/run.sh\`."
echo
echo "## Idle connections: generator memory per connection"
echo
echo "| idle users | generator peak RSS | server peak RSS |"
echo "|---|---|---|"
} > "$out"

declare -A rss
for n in 1000 10000; do
    scenario $n '[[traffic]]
kind = "idle"
duration = "10s"' > "$work/idle-$n.toml"
    taskset -c 1 $bin run "$work/idle-$n.toml" -q --out "$work/idle-$n" >/dev/null
    g=$(json "$work/idle-$n" "[p for p in a['processes'] if p['generator']][0]['rss_peak_bytes']")
    s=$(json "$work/idle-$n" "[p for p in a['processes'] if not p['generator']][0]['rss_peak_bytes']")
    rss[$n]=$g
    echo "| $n | $((g / 1024)) KiB | $((s / 1024)) KiB |" >> "$out"
done
per=$(( (rss[10000] - rss[1000]) / 9000 ))
echo >> "$out"
echo "Generator memory per idle connection (slope 1k → 10k): **$per bytes**." >> "$out"

{
echo
echo "## Group chat: CPU per million delivered messages"
echo
echo "2,000 users, 200 groups of 10, 2 senders per group, 100-byte bodies, 20 s per rate."
echo
echo "| offered msg/s | deliveries/s | e2e p50 / p99 | lost | generator CPU s per M deliveries | server CPU s per M deliveries | generator CPU peak | server CPU peak |"
echo "|---|---|---|---|---|---|---|---|"
} >> "$out"
for rate in 1000 2000 4000 8000; do
    scenario 2000 "[[traffic]]
kind = \"group\"
groups = 200
group_size = 10
senders_per_group = 2
rate = $rate
duration = \"20s\"
size = 100" > "$work/g-$rate.toml"
    taskset -c 1 $bin run "$work/g-$rate.toml" -q --out "$work/g-$rate" >/dev/null || true
    $bin report "$work/g-$rate/result.json" --json > "$work/g-$rate/summary.json" || true
    python3 - "$work/g-$rate/summary.json" "$rate" >> "$out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
d = s["delivery"]
e2e = s["latency_us"].get("end_to_end", {"p50": 0, "p99": 0})
gen = next(p for p in s["processes"] if p["generator"])
srv = next(p for p in s["processes"] if not p["generator"])
cpu = lambda p: sum(x[1] for x in p["series"]) / 100.0  # CPU-seconds from 1 s samples
per_m = lambda p: cpu(p) / max(d["delivered"], 1) * 1e6
print(f"| {sys.argv[2]} | {d['delivered'] / 20:.0f} | {e2e['p50'] / 1000:.1f} / {e2e['p99'] / 1000:.1f} ms "
      f"| {d['lost']} | {per_m(gen):.1f} | {per_m(srv):.1f} | {gen['cpu_peak_pct']:.0f}% | {srv['cpu_peak_pct']:.0f}% |")
PY
done
{
echo
echo "CPU seconds are summed from the per-second monitor samples of each process (100% = one core)."
echo "A side whose CPU peak reaches ~100% (one pinned core) is the one that saturated first."
} >> "$out"
echo "done: $out"
