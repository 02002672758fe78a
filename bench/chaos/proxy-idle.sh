#!/usr/bin/env bash
# What msgstorm's chaos proxy costs while no step is active: the same load against the
# embedded reference server, without a proxy and with one (a `cut` of 0% of the connections
# at the end makes every connection go through it and changes nothing), RUNS times each,
# alternating; prints end-to-end and send → ack p50/p99 of each run (µs).
# Usage: bench/chaos/proxy-idle.sh [RUNS]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
cargo build --release --quiet
bin=target/release/msgstorm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
base='name = "proxy-idle"
seed = 5
drain = "2s"

[population]
users = 400
login_rate = 1000

[[traffic]]
name = "chat"
kind = "direct"
senders = 200
receivers = 200
rate = 2000
duration = "20s"
'
printf '%s' "$base" > "$work/direct.toml"
printf '%s\n[[chaos]]\naction = "cut"\nat = "19s"\nfraction = 0.0\n' "$base" > "$work/proxied.toml"
printf 'run\tpath\te2e_p50\te2e_p99\tack_p50\tack_p99\n'
for i in $(seq 1 "$runs"); do
    for path in direct proxied; do
        out="$work/$path-$i"
        "$bin" run "$work/$path.toml" --out "$out" -q >/dev/null 2>&1 || true
        python3 - "$out/result.json" "$i" "$path" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
import subprocess
r = json.loads(subprocess.run(["target/release/msgstorm", "report", sys.argv[1], "--format", "json"],
                              capture_output=True, text=True).stdout)
lat = r["latency_us"]
e, k = lat["end_to_end"], lat["send_ack"]
print(f'{sys.argv[2]}\t{sys.argv[3]}\t{e["p50"]}\t{e["p99"]}\t{k["p50"]}\t{k["p99"]}')
PY
    done
done
