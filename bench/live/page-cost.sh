#!/usr/bin/env bash
# What watching a run live costs the generator, 10,000 users against `msgstorm serve` (its
# own process) at 1,000 msg/s: first a run with no live view at all, then one with
# `--metrics-listen` and `--live` that nobody looks at (what the per-pattern totals, kept
# only for live views, cost), then the same with the `--live` page loaded once a second,
# and a burst of 30 page loads back to back (the CPU one load costs: adding up the
# recorders and rendering report.html of the run so far). Windows of WINDOW seconds; the
# generator's CPU from /proc/PID/stat.
# Usage: bench/live/page-cost.sh [WINDOW]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/../.."
window=${1:-20}
source bench/live/lib.sh
page=http://127.0.0.1:18480/
sleep 1
printf 'window\trequests\tlength\tCPU\n'
"$bin" run "$(scenario $((window + 20)))" --out "$work/plain" -q >"$work/plain.log" 2>&1 &
run=$!
sleep 12
measure "no live view" 0 "$page"
wait "$run"
"$bin" run "$(scenario $((window * 4 + 30)))" --out "$work/live" -q \
    --metrics-listen 127.0.0.1:19478 --live 127.0.0.1:18480 >"$work/live.log" 2>&1 &
run=$!
sleep 12
measure "live, unwatched" 0 "$page"
measure "page 1/s" 1 "$page"
measure "live, unwatched" 0 "$page"
burst 30 "$page"
