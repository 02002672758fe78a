#!/usr/bin/env bash
# Before/after of two msgstorm builds on bench/engine/run.sh's workloads, interleaved, against
# one server build, with a fresh server (empty store) for every measurement: a server that
# kept the previous runs' messages makes later runs' final verification sync fetch them too.
#   bench/engine/compare.sh SERVER_BIN NAME=BIN NAME=BIN …   (e.g. before=/tmp/a after=/tmp/b)
# Prints one line per measurement: idle generator peak RSS at 1k and 10k users, and group
# chat (2,000 users, 200 groups of 10, 2 senders each, 20 s) generator / server CPU seconds
# per million deliveries. Server on core 0, generator on core 1. Not a test: run by hand.
set -euo pipefail
server=$1
shift
work=$(mktemp -d)
port=${PORT:-7791}
srv=
fresh() {
    if [[ -n $srv ]]; then kill "$srv"; wait "$srv" 2>/dev/null || true; fi
    rm -rf "$work/data"
    taskset -c 0 "$server" serve --listen "127.0.0.1:$port" --secret bench --durability normal \
        --data "$work/data" --queue 4096 2>"$work/serve.log" &
    srv=$!
    sleep 1
}
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT
scenario() {
    printf '[target]\nurl = "ws://127.0.0.1:%s/ws"\n[target.auth]\nsecret = "bench"\n' "$port"
    printf '[population]\nusers = %s\nlogin_rate = 5000\n%s\n' "$1" "$2"
}
server_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$srv/stat"; }
for build in "$@"; do
    name=${build%%=*} bin=${build#*=}
    for n in 1000 10000; do
        fresh
        scenario "$n" $'[[traffic]]\nkind = "idle"\nduration = "10s"' >"$work/idle.toml"
        taskset -c 1 "$bin" run "$work/idle.toml" -q --out "$work/$name-idle-$n" >/dev/null 2>&1
        python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['shards'][0]; print(f'{sys.argv[2]} idle {sys.argv[3]} users: generator peak RSS {s[\"peak_rss_bytes\"]/1048576:.1f} MiB')" \
            "$work/$name-idle-$n/result.json" "$name" "$n"
    done
    for rate in 4000 8000; do
        fresh
        scenario 2000 "$(printf '[[traffic]]\nkind = "group"\ngroups = 200\ngroup_size = 10\nsenders_per_group = 2\nrate = %s\nduration = "20s"\nsize = 100' "$rate")" >"$work/g.toml"
        before=$(server_cpu)
        taskset -c 1 "$bin" run "$work/g.toml" -q --out "$work/$name-g-$rate" >/dev/null 2>&1 || true
        after=$(server_cpu)
        "$bin" report "$work/$name-g-$rate/result.json" --json >"$work/summary.json" || true
        python3 - "$work/$name-g-$rate/result.json" "$work/summary.json" "$name" "$rate" \
            "$before" "$after" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
delivered = max(s["delivery"]["delivered"], 1)
cpu = a["shards"][0]["cpu_s"]
server = float(sys.argv[6]) - float(sys.argv[5])
e2e = s["latency_us"].get("end_to_end", {"p50": 0, "p99": 0})
print(f"{sys.argv[3]} group {sys.argv[4]} msg/s: {delivered} delivered, {s['delivery']['lost']} lost, "
      f"generator {cpu / delivered * 1e6:.1f} / server {server / delivered * 1e6:.1f} CPU-s per million "
      f"deliveries, e2e p50/p99 {e2e['p50'] / 1000:.1f}/{e2e['p99'] / 1000:.1f} ms")
PY
    done
done
