#!/usr/bin/env bash
# What the live metrics endpoint costs the generator: 10,000 users against `msgstorm serve`
# (its own process) at 1,000 msg/s with `--metrics-listen`; the generator's CPU time (from
# /proc/PID/stat) over windows of WINDOW seconds with no scrape, one scrape a second, and
# ten a second, then a burst of 300 scrapes back to back; prints each window's CPU (cores)
# and, from the burst, the CPU one scrape costs.
# Usage: bench/live/scrape-cost.sh [WINDOW]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/../.."
window=${1:-20}
source bench/live/lib.sh
metrics=http://127.0.0.1:19477/metrics
sleep 1
"$bin" run "$(scenario $((window * 6 + 30)))" --out "$work/out" -q \
    --metrics-listen 127.0.0.1:19477 >"$work/run.log" 2>&1 &
run=$!
# Logins (5 s at 2,000/s) and the first seconds of traffic.
sleep 12
printf 'window\trequests\tlength\tCPU\n'
measure none 0 "$metrics"
measure "1/s" 1 "$metrics"
measure "10/s" 10 "$metrics"
measure none 0 "$metrics"
burst 300 "$metrics"
