#!/usr/bin/env bash
# W4 on this box: the two-node Socket.IO test app behind @socket.io/redis-adapter (a
# redis-server of its own on a loopback port, no persistence), then
# scenarios/socketio-phases.toml and scenarios/socketio-storm.toml against it.
#   bench/socketio/w4.sh MSGSTORM_BIN [OUT_DIR]
# The app's nodes on core 0, the generator on core 1. Not a test: run by hand.
set -euo pipefail
bin=$(realpath "$1")
out=${2:-$(mktemp -d)}
mkdir -p "$out"
repo=$(cd "$(dirname "$0")/../.." && pwd)
rport=${REDIS_PORT:-6399}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >"$out/redis.log" 2>&1 &
pids+=($!)
sleep 0.5
for port in 3001 3002; do
    taskset -c 0 node "$repo/peers/socketio/server.js" "127.0.0.1:$port" --adapter=redis \
        --redis="redis://127.0.0.1:$rport" --recovery=0 >"$out/app-$port.log" 2>&1 &
    pids+=($!)
done
sleep 2
for s in phases storm; do
    /usr/bin/time -f '%M KiB peak RSS, %U s user, %S s sys' -o "$out/$s.time" taskset -c 1 \
        "$bin" run "$repo/scenarios/socketio-$s.toml" --out "$out/$s" -q >"$out/$s.log" 2>&1 || true
    head -1 "$out/$s.log"
    cat "$out/$s.time"
done
echo "results in $out"
