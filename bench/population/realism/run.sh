#!/usr/bin/env bash
# The same users and mean message rate, uniform (uniform.toml) and as a population
# (population.toml), each against its own fresh `msgstorm serve` process watched by the
# run: server CPU and memory, latencies, and the server's own queue depth scraped from its
# /metrics once a second. Prints a Markdown section for bench/results/. Not a test.
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin=${BIN:-target/debug/msgstorm}
[ -n "${SKIP_BUILD:-}" ] || cargo build -q --bin msgstorm
work=$(mktemp -d)
srv=
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT
for s in uniform population; do
    $bin serve --listen 127.0.0.1:7791 --secret realism 2>"$work/serve-$s.log" &
    srv=$!
    sleep 1
    $bin run "bench/population/realism/$s.toml" --set "monitor.pids=[$srv]" \
        --out "$work/$s" -q >"$work/$s.txt" 2>&1 || echo "($s exited $?)"
    kill $srv; wait $srv 2>/dev/null || true
done
echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d); $bin"
for s in uniform population; do echo; head -1 "$work/$s.txt"; done
echo
$bin compare "$work/uniform/result.json" "$work/population/result.json" --allow-different-scenarios || true
python3 - "$work/uniform/result.json" "$work/population/result.json" <<'PY'
import json, sys
print("\n| server's own series (scraped once a second) | uniform | population |\n|---|---|---|")
runs = [json.load(open(p)) for p in sys.argv[1:]]
def peak(a, name):
    vals = [v for s in a.get("server_metrics", []) if s["name"] == name for _, v in s["points"]]
    return max(vals) if vals else None
for name in ["serve_outbound_queue_depth", "serve_outbound_queue_depth_max", "serve_online_users"]:
    print(f"| peak {name} | {peak(runs[0], name)} | {peak(runs[1], name)} |")
PY
