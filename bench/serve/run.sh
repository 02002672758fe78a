#!/usr/bin/env bash
# Benchmarks `msgstorm serve` on this machine and prints a Markdown report:
#   1. idle logged-in WebSocket connections held, and server RSS per connection;
#   2. durable 1:1 messages/s with p50/p99 ack latency, for --durability full and normal.
# The load client (examples/serve_bench.rs) runs in its own process.
# Usage: bench/serve/run.sh [IDLE_CONNS] [MESSAGES] > bench/results/serve-$(date +%F).md
set -euo pipefail
cd "$(dirname "$0")/../.."

IDLE_CONNS=${1:-10000}
MESSAGES=${2:-200000}
SECRET=bench
PORT=7791
TARGET=${CARGO_TARGET_DIR:-target}

cargo build --release --bin msgstorm --example serve_bench >&2
SERVER="$TARGET/release/msgstorm"
CLIENT="$TARGET/release/examples/serve_bench"

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

start_server() { # extra args...
    "$SERVER" serve --listen "127.0.0.1:$PORT" --secret "$SECRET" "$@" 2>/tmp/serve-bench.log &
    SERVER_PID=$!
    for _ in $(seq 100); do
        grep -q "listening on" /tmp/serve-bench.log 2>/dev/null && return 0
        sleep 0.1
    done
    echo "server did not start" >&2; cat /tmp/serve-bench.log >&2; exit 1
}
stop_server() { kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; }

echo "# msgstorm serve benchmark, $(date +%F)"
echo
echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "- kernel: $(uname -r); open files per process: $(ulimit -Hn)"
echo "- build: \`cargo build --release\` ($(rustc --version))"
echo "- the machine is shared with other jobs; numbers are one run each"
echo

# 1. Idle connections.
start_server --max-connections 20000 --idle-timeout 600s
sleep 0.5
BASE=$(rss_kib "$SERVER_PID")
"$CLIENT" --addr "127.0.0.1:$PORT" --secret "$SECRET" idle --conns "$IDLE_CONNS" --hold 8 >/tmp/serve-bench-idle.out &
CLIENT_PID=$!
for _ in $(seq 600); do
    grep -q HOLDING /tmp/serve-bench-idle.out 2>/dev/null && break
    sleep 0.1
done
sleep 3
HELD=$(rss_kib "$SERVER_PID")
ONLINE=$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^serve_online_users / {print $2}')
wait "$CLIENT_PID"
stop_server
PER_CONN=$(( (HELD - BASE) * 1024 / IDLE_CONNS ))
echo "## Idle connections"
echo
echo "Command: \`msgstorm serve --max-connections 20000 --idle-timeout 600s\`; client \`serve_bench idle --conns $IDLE_CONNS\` (separate process)."
echo
echo "| connections held (online gauge) | server RSS before | RSS holding | RSS per connection |"
echo "|---|---|---|---|"
echo "| $ONLINE | $BASE KiB | $HELD KiB | $PER_CONN bytes |"
echo "$(cat /tmp/serve-bench-idle.out)" >&2
echo

# 2. Durable 1:1 messages: a saturating load (2048 in flight) and a light one (64 in flight).
echo "## Durable 1:1 messages"
echo
echo "Client: \`serve_bench msgs --senders S --window W --count $MESSAGES --body 100\` (separate process;"
echo "recipients offline, so this is the store path: parse, group commit, ack)."
echo "The server's CPU time is user+system of the server process for the whole run."
echo
echo "| durability | senders x window | messages | msgs/s | ack p50 | ack p99 | ack max | server CPU s | msgs per server CPU s | commits | mean batch |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for load in "32 64" "16 4"; do
    set -- $load
    for durability in full normal; do
        DATA=$(mktemp -d)
        start_server --data "$DATA" --durability "$durability"
        OUT=$("$CLIENT" --addr "127.0.0.1:$PORT" --secret "$SECRET" msgs --senders "$1" --window "$2" --count "$MESSAGES" --body 100)
        METRICS=$(curl -s "http://127.0.0.1:$PORT/metrics")
        TICKS=$(awk '{print $14+$15}' "/proc/$SERVER_PID/stat")
        stop_server
        rm -rf "$DATA"
        val() { echo "$OUT" | tr ' ' '\n' | awk -F= -v k="$1" '$1==k {print $2}'; }
        COMMITS=$(echo "$METRICS" | awk '/^serve_commit_batch_size_count / {print $2}')
        SUM=$(echo "$METRICS" | awk '/^serve_commit_batch_size_sum / {print $2}')
        MEAN=$(awk -v s="$SUM" -v c="$COMMITS" 'BEGIN {printf "%.0f", s/c}')
        CPU=$(awk -v t="$TICKS" 'BEGIN {printf "%.2f", t/100}')
        PER_CPU=$(awk -v t="$TICKS" -v m="$(val messages)" 'BEGIN {printf "%.0f", m/(t/100)}')
        echo "| $durability | $1 x $2 | $(val messages) | $(val msgs_per_s) | $(val ack_p50_ms) ms | $(val ack_p99_ms) ms | $(val ack_max_ms) ms | $CPU | $PER_CPU | $COMMITS | $MEAN |"
    done
done
