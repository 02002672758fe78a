#!/usr/bin/env bash
# The script driver's budget (issue 26), side by side with `native` on the same reference
# server (`msgstorm serve` on core 0, the generator on core 1, release build):
#  1. CPU per verified delivery: 2,000 users, 200 direct + 300 group sends/s (~2,900
#     deliveries/s, bench/engine/soak.toml's load) for $DURATION, through `native` and
#     through scenarios/script-native.lua: the generator's CPU seconds ÷ deliveries.
#  2. Memory per idle user: the idle pattern with 1,000 and 10,000 users (heartbeats every
#     5 s, 15 s hold): the slope of the generator's peak RSS from 1k to 10k, bytes a user.
#   bench/script/budget.sh [BIN]     (default target/release/msgstorm)
# Not a test: run by hand; results in bench/results/script-<date>.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/msgstorm}
port=${PORT:-7833}
duration=${DURATION:-60s}
lua=$PWD/scenarios/script-native.lua
work=$(mktemp -d)
srv=
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT

serve() {
    rm -rf "$work/data"
    taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --secret bench \
        --durability normal --data "$work/data" --queue 4096 2>"$work/serve.log" &
    srv=$!
    for _ in $(seq 50); do
        (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && return
        sleep 0.1
    done
    echo "serve did not start" >&2
    exit 1
}

stop() {
    kill "$srv"
    wait "$srv" 2>/dev/null || true
}

driver_tables() { # driver
    if [[ $1 == script ]]; then
        printf 'driver = "script"\n[target.script]\nfile = "%s"\n' "$lua"
    fi
}

# Prints "cpu_s delivered peak_rss" of a run's result.json.
facts() {
    python3 - "$1" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
s = a["shards"][0]
d = a["ledger"]
print(s["cpu_s"], a["metrics"]["counters"].get("received", 0), s["peak_rss_bytes"])
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "binary: $bin ($(git rev-parse --short HEAD))"
for driver in native script; do
    serve
    {
        printf 'name = "budget-%s"\nseed = 24\ndrain = "5s"\n[target]\n' "$driver"
        printf 'url = "ws://127.0.0.1:%s/ws"\nconnect_timeout = "30s"\n' "$port"
        driver_tables "$driver"
        printf '[target.auth]\nsecret = "bench"\n'
        sed -n '/^\[population\]/,$p' bench/engine/soak.toml | sed "s/^duration = .*/duration = \"$duration\"/"
    } >"$work/load.toml"
    taskset -c 1 "$bin" run "$work/load.toml" -q --out "$work/load-$driver" >/dev/null 2>&1 || true
    stop
    read -r cpu received rss < <(facts "$work/load-$driver/result.json")
    python3 -c "print(f'load $driver: generator CPU {$cpu:.2f} s, received {$received:,}, ' \
        f'{$cpu * 1e6 / max($received, 1):.2f} µs CPU per delivery, peak RSS {$rss / 1e6:.1f} MB')"
done
for driver in native script; do
    for users in 1000 10000; do
        serve
        {
            printf '[target]\nurl = "ws://127.0.0.1:%s/ws"\nheartbeat = "5s"\nconnect_timeout = "60s"\n' "$port"
            driver_tables "$driver"
            printf '[target.auth]\nsecret = "bench"\n[population]\nusers = %s\nlogin_rate = 5000\n' "$users"
            printf '[[traffic]]\nkind = "idle"\nduration = "15s"\n'
        } >"$work/idle.toml"
        taskset -c 1 "$bin" run "$work/idle.toml" -q --out "$work/idle-$driver-$users" >/dev/null 2>&1 || true
        stop
        read -r _ _ rss < <(facts "$work/idle-$driver-$users/result.json")
        echo "idle $driver $users: peak RSS $rss"
        eval "rss_${driver}_${users}=$rss"
    done
    eval "lo=\$rss_${driver}_1000 hi=\$rss_${driver}_10000"
    python3 -c "print(f'idle $driver: {($hi - $lo) / 9000:,.0f} B per idle user (1k → 10k)')"
done
