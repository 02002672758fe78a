#!/usr/bin/env bash
# ws-json against native on the reference server: the same scenarios through both drivers,
# interleaved, with a fresh server (empty store) for every measurement. ws-json runs the
# templates of scenarios/ws-json-native.toml.
#   bench/ws-json/compare.sh MSGSTORM_BIN [ROUNDS]      (a release build; ROUNDS default 2)
# Prints one line per measurement: idle generator peak RSS at 1k and 10k users (the slope
# is the memory of one connection), and group chat (2,000 users, 200 groups of 10, 2
# senders each, 20 s) verified deliveries per generator CPU-second. Server on core 0,
# generator on core 1. Not a test: run by hand.
set -euo pipefail
bin=$1
rounds=${2:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
port=${PORT:-7792}
srv=
fresh() {
    if [[ -n $srv ]]; then kill "$srv"; wait "$srv" 2>/dev/null || true; fi
    rm -rf "$work/data"
    taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --secret bench --durability normal \
        --data "$work/data" --queue 4096 2>"$work/serve.log" &
    srv=$!
    sleep 1
}
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT
# The [target.ws-json…] tables of the shipped scenario.
sed -n '/^\[target.ws-json\]/,/^\[population\]/p' "$here/scenarios/ws-json-native.toml" \
    | sed '$d' >"$work/ws-json.toml"
scenario() { # DRIVER USERS TRAFFIC
    printf '[target]\ndriver = "%s"\nurl = "ws://127.0.0.1:%s/ws"\n[target.auth]\nsecret = "bench"\n' "$1" "$port"
    if [[ $1 == ws-json ]]; then cat "$work/ws-json.toml"; fi
    printf '[population]\nusers = %s\nlogin_rate = 5000\n%s\n' "$2" "$3"
}
for round in $(seq "$rounds"); do
    for driver in native ws-json; do
        for n in 1000 10000; do
            fresh
            scenario "$driver" "$n" $'[[traffic]]\nkind = "idle"\nduration = "10s"' >"$work/idle.toml"
            taskset -c 1 "$bin" run "$work/idle.toml" -q --out "$work/idle-$round-$driver-$n" >/dev/null 2>&1
            python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['shards'][0]; print(f'{sys.argv[2]} idle {sys.argv[3]} users: generator peak RSS {s[\"peak_rss_bytes\"]/1048576:.1f} MiB')" \
                "$work/idle-$round-$driver-$n/result.json" "$driver" "$n"
        done
        fresh
        scenario "$driver" 2000 $'[[traffic]]\nkind = "group"\ngroups = 200\ngroup_size = 10\nsenders_per_group = 2\nrate = 4000\nduration = "20s"\nsize = 100' >"$work/g.toml"
        taskset -c 1 "$bin" run "$work/g.toml" -q --out "$work/g-$round-$driver" >/dev/null 2>&1 || true
        "$bin" report "$work/g-$round-$driver/result.json" --json >"$work/summary.json" || true
        python3 - "$work/g-$round-$driver/result.json" "$work/summary.json" "$driver" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
d = s["delivery"]
cpu = a["shards"][0]["cpu_s"]
e2e = s["latency_us"].get("end_to_end", {"p50": 0, "p99": 0})
print(f"{sys.argv[3]} group 4000 msg/s: {d['delivered']} delivered, {d['lost']} lost, "
      f"{d['duplicated']} duplicated, generator {cpu:.2f} CPU-s = "
      f"{d['delivered'] / max(cpu, 1e-9):,.0f} verified deliveries per CPU-second, "
      f"peak RSS {a['shards'][0]['peak_rss_bytes'] / 1048576:.1f} MiB, "
      f"e2e p50/p99 {e2e['p50'] / 1000:.1f}/{e2e['p99'] / 1000:.1f} ms")
PY
    done
done
