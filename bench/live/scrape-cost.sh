#!/usr/bin/env bash
# What the live metrics endpoint costs the generator: 10,000 users against `msgstorm serve`
# (its own process) at 1,000 msg/s with `--metrics-listen`; the generator's CPU time (from
# /proc/PID/stat) over windows of WINDOW seconds with no scrape, one scrape a second, and
# ten a second, then a burst of BURST scrapes back to back; prints each window's CPU (cores)
# and, from the burst, the CPU one scrape costs.
# Usage: bench/live/scrape-cost.sh [WINDOW]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/../.."
window=${1:-20}
cargo build --release --quiet
bin=target/release/msgstorm
work=$(mktemp -d)
serve_port=17790
metrics_port=19477
secret=bench-secret
"$bin" serve --listen "127.0.0.1:$serve_port" --secret "$secret" --durability normal \
    >"$work/serve.log" 2>&1 &
serve=$!
trap 'kill $serve $run 2>/dev/null; rm -rf "$work"' EXIT
run=
cat >"$work/s.toml" <<TOML
name = "scrape-cost"
seed = 1
drain = "2s"

[target]
url = "ws://127.0.0.1:$serve_port/ws"

[target.auth]
secret = "$secret"

[population]
users = 10000
login_rate = 2000

[[traffic]]
kind = "direct"
senders = 5000
receivers = 5000
rate = 1000
duration = "$((window * 6 + 30))s"
TOML
sleep 1
"$bin" run "$work/s.toml" --out "$work/out" -q --metrics-listen "127.0.0.1:$metrics_port" \
    >"$work/run.log" 2>&1 &
run=$!
ticks=$(getconf CLK_TCK)
cpu() { awk -v t="$ticks" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$run/stat"; }
# Logins (5 s at 2,000/s) and the first seconds of traffic.
sleep 12
measure() { # NAME SCRAPES_PER_SECOND
    local before after n=0 start
    before=$(cpu)
    start=$(date +%s.%N)
    if [ "$2" = 0 ]; then
        sleep "$window"
    else
        local gap
        gap=$(awk -v r="$2" 'BEGIN { printf "%.3f", 1 / r }')
        while awk -v s="$start" -v w="$window" -v now="$(date +%s.%N)" 'BEGIN { exit !(now - s < w) }'; do
            curl -s -o /dev/null "http://127.0.0.1:$metrics_port/metrics" && n=$((n + 1))
            sleep "$gap"
        done
    fi
    after=$(cpu)
    local took
    took=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { printf "%.2f", now - s }')
    awk -v a="$before" -v b="$after" -v d="$took" -v n="$n" -v name="$1" \
        'BEGIN { printf "%s\t%d scrapes\t%.2f s\tgenerator CPU %.4f cores\n", name, n, d, (b - a) / d }'
}
printf 'window\tscrapes\tlength\tCPU\n'
measure none 0
measure "1/s" 1
measure "10/s" 10
measure none 0
burst=300
before=$(cpu)
start=$(date +%s.%N)
for i in $(seq 1 $burst); do curl -s -o /dev/null "http://127.0.0.1:$metrics_port/metrics"; done
after=$(cpu)
measure none 0 >"$work/baseline"
awk -v a="$before" -v b="$after" -v s="$start" -v e="$(date +%s.%N)" -v n="$burst" \
    -v base="$(awk '{ print $(NF-1) }' "$work/baseline")" -v w="$window" 'BEGIN {
        d = (e - s) - w;   # the burst alone (the baseline window ran after it)
        per = ((b - a) - base * d) / n;
        printf "burst\t%d scrapes in %.2f s\tCPU %.3f s, baseline %.4f cores\n", n, d, b - a, base;
        printf "one scrape: %.2f ms of generator CPU; at one a second %.3f%% of one core\n", per * 1000, per * 100
    }'
cat "$work/baseline"
curl -s "http://127.0.0.1:$metrics_port/metrics" | wc -c | awk '{ print "one scrape: " $1 " bytes" }'
for i in 1 2 3 4 5; do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$metrics_port/metrics"
done | awk '{ s += $1 } END { printf "scrape round trip: %.2f ms mean of 5\n", s / NR * 1000 }'
