#!/usr/bin/env bash
# Generator memory per idle online user (issue #17): native (idle pattern against the
# reference server's /ws) and echo (its /echo; one connection sends one frame a second so
# the pattern has a sender), heartbeats every 5 s, 15 s hold, 1,000 and 10,000 users, each
# size against a fresh `msgstorm serve` (core 0; generator on core 1).
#   bench/engine/idle.sh NAME=BIN [NAME=BIN …]   (e.g. before=/tmp/a after=target/release/msgstorm)
# Prints one line per build, driver and size: the generator's peak RSS as the monitor
# sampled it (1 s; what bench/engine/run.sh reports), its maxrss (getrusage: also catches
# the final verification sync and teardown), and the median RSS over the hold; then the
# slope 1k → 10k of each, in bytes per user. Not a test: run by hand.
set -euo pipefail
port=${PORT:-7811}
work=$(mktemp -d)
srv=
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT

scenario() { # driver users
    if [[ $1 == echo ]]; then
        printf '[target]\ndriver = "echo"\nurl = "ws://127.0.0.1:%s/echo"\nheartbeat = "5s"\n' "$port"
        printf 'connect_timeout = "60s"\n[population]\nusers = %s\nlogin_rate = 5000\n' "$2"
        printf '[[traffic]]\nkind = "echo"\nconnections = 1\nrate = 1\nduration = "15s"\nsize = 100\n'
        printf '[ledger]\nverify_sync = false\n'
    else
        printf '[target]\nurl = "ws://127.0.0.1:%s/ws"\nheartbeat = "5s"\n' "$port"
        printf '[target.auth]\nsecret = "bench"\n[population]\nusers = %s\nlogin_rate = 5000\n' "$2"
        printf '[[traffic]]\nkind = "idle"\nduration = "15s"\n'
    fi
}

# Prints "monitor_peak maxrss hold_median" of a run's result.json.
rss() {
    python3 - "$1" <<'PY'
import json, statistics, sys
a = json.load(open(sys.argv[1]))
g = next(p for p in a["processes"] if p["generator"])
series = [r for _, _, r in g["series"]]
hold = statistics.median(series[3:-1]) if len(series) > 5 else 0
print(g["rss_peak_bytes"], a["shards"][0]["peak_rss_bytes"], int(hold))
PY
}

for build in "$@"; do
    name=${build%%=*} bin=${build#*=}
    for driver in native echo; do
        declare -A at=()
        for n in 1000 10000; do
            rm -rf "$work/data" "$work/out"
            taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --secret bench \
                --durability normal --data "$work/data" --max-connections 20000 \
                --idle-timeout 600s 2>"$work/serve.log" &
            srv=$!
            sleep 1
            scenario "$driver" "$n" >"$work/s.toml"
            taskset -c 1 "$bin" run "$work/s.toml" -q --out "$work/out" >/dev/null 2>&1 || true
            kill "$srv"
            wait "$srv" 2>/dev/null || true
            at[$n]=$(rss "$work/out/result.json")
            echo "$name $driver $n users: monitor peak / maxrss / hold median: ${at[$n]} (load $(cut -d' ' -f1 /proc/loadavg))"
        done
        read -r a1 b1 c1 <<<"${at[1000]}"
        read -r a2 b2 c2 <<<"${at[10000]}"
        echo "$name $driver per user (1k → 10k): monitor peak $(((a2 - a1) / 9000)) B, maxrss $(((b2 - b1) / 9000)) B, hold $(((c2 - c1) / 9000)) B"
    done
done
