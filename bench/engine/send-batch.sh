#!/usr/bin/env bash
# Sends per generator CPU-second at paced rates (issue 40, "sends too"): every sender in a
# group of its own (a send and its ack, no pushes), against `msgstorm serve` pinned to core
# 0, the generator pinned to core 1, for several senders × rate-each splits of the same
# offered rate. A user writes the sends due at one wake-up together and flushes once
# (`engine/vu` `wake_up`); BEFORE=BINARY runs a second binary beside it, interleaved per
# row (e.g. one built to flush after every send), so the two columns share the machine's
# state. STRACE=1 adds a short run per row under `strace -f -c` that counts `sendto`
# calls per send (strace slows the run: its CPU is not used).
#   bench/engine/send-batch.sh [BIN]            (default target/release/msgstorm)
#   SPLITS="2000x2 200x20 20x200 4x1000 1x4000" DURATION=20s BEFORE=… STRACE=1
#   AFTER_SET=KEY=VALUE: an override for BIN's runs only (e.g. wake_tick=1ms, which an
#   older BEFORE refuses)
# Not a test: run by hand; results in bench/results/2026-11-28-recv-limit.md ("Sends").
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/msgstorm}
splits=${SPLITS:-"2000x2 200x20 20x200 4x1000 1x4000 4x4000"}
duration=${DURATION:-20s}
work=$(mktemp -d)
server=
trap '[[ -n $server ]] && kill $server 2>/dev/null; rm -rf "$work"' EXIT

serve() { # port
    taskset -c 0 "$bin" serve --listen "127.0.0.1:$1" --secret bench --durability normal \
        --data "$work/data-$1" >"$work/serve.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do
        grep -q listening "$work/serve.log" && return
        sleep 0.1
    done
    echo "the server did not start: $(cat "$work/serve.log")" >&2
    exit 1
}

scenario() { # port senders rate-each duration
    cat <<TOML
name = "send-batch"
drain = "2s"
[target]
url = "ws://127.0.0.1:$1/ws"
heartbeat = "0s"
[target.auth]
secret = "bench"
[population]
users = $2
login_rate = 2000
# A group of one: the send is acked and delivered to nobody, so nothing is verified.
[checks]
min_verified = 0
[[traffic]]
name = "sends"
kind = "group"
groups = $2
group_size = 1
rate = $(($2 * $3))
duration = "$4"
TOML
}

# One row: LABEL BINARY SENDERS RATE_EACH
row() {
    local port=$((7600 + RANDOM % 300))
    serve "$port"
    scenario "$port" "$3" "$4" "$duration" >"$work/s.toml"
    rm -rf "$work/out" "$work/tout"
    local set=()
    [[ $1 == after && -n ${AFTER_SET:-} ]] && set=(--set "$AFTER_SET")
    taskset -c 1 "$2" run "$work/s.toml" -q --out "$work/out" "${set[@]}" >"$work/run.log" 2>&1 || true
    if [[ ! -f $work/out/result.json ]]; then
        echo "$1 $3x$4: no result: $(head -c 300 "$work/run.log")" >&2
        exit 1
    fi
    local calls=""
    if [[ ${STRACE:-} == 1 ]]; then
        scenario "$port" "$3" "$4" 5s >"$work/t.toml"
        taskset -c 1 strace -f -c -e trace=sendto,write,writev -o "$work/strace" \
            "$2" run "$work/t.toml" -q --out "$work/tout" >/dev/null 2>&1 || true
        calls=$("$2" report "$work/tout/result.json" --json | python3 -c "
import json, sys
sent = json.load(sys.stdin)['counters']['sent']
n = sum(int(l.split()[3]) for l in open('$work/strace') if l.split()[-1:] == ['sendto'])
print(f'{n / max(sent, 1):.2f}')")
    fi
    kill "$server"; wait "$server" 2>/dev/null || true; server=
    "$2" report "$work/out/result.json" --json | python3 -c "
import json, sys
r = json.load(sys.stdin)
a = json.load(open('$work/out/result.json'))
cpu = a['shards'][0]['cpu_s']
sent = r['counters']['sent']
lag, ack = r['latency_us']['send_lag'], r['latency_us']['send_ack']
print(f'| $1 | $3 × $4 msgs/s | {sent:,} | {cpu:.2f} | **{sent / cpu:,.0f}** | '
      f'{lag[\"p50\"] / 1e3:.2f} / {lag[\"p99\"] / 1e3:.2f} ms | {ack[\"p50\"] / 1e3:.2f} ms | '
      f'${calls:-–} | {r[\"counters\"][\"accepted\"]:,} |')"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "after: $bin; before: ${BEFORE:-none}; $duration per run"
echo
echo "| binary | senders × rate each | sent | CPU-s | sends per CPU-s | send lag p50 / p99 | send → ack p50 | sendto per send | accepted |"
echo "|---|---|---|---|---|---|---|---|---|"
for split in $splits; do
    senders=${split%x*}
    each=${split#*x}
    if [[ -n ${BEFORE:-} ]]; then
        row before "$BEFORE" "$senders" "$each"
    fi
    row after "$bin" "$senders" "$each"
done
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
