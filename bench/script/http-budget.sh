#!/usr/bin/env bash
# The HTTP adapter's budget (issue 39): generator CPU per delivery of the script driver over
# HTTP (scenarios/http-chat.lua: sends as requests, messages by long polls) side by side
# with `native` at the same load — the same users, groups and sends — each against its own
# server outside the generator's process (`msgstorm serve` and peers/httpchat/server.py,
# pinned to core 0), the generator pinned to core 1. CPU from result.json's
# `shards[0].cpu_s`, deliveries from its `received` counter; the whole process's user and
# system time per delivery (GNU time, logins and the final verification included) beside.
#   bench/script/http-budget.sh [BIN]     (default target/release/msgstorm)
#   HTTP=2 also runs the adapter over HTTP/2 (h2c through nginx in front of server.py).
#   USERS, RATE (direct sends/s), DURATION override the load.
#   SET=KEY=VALUE: an override for both sides' runs (e.g. wake_tick=1ms).
#   ADAPTER: the script side's adapter (default scenarios/http-chat.lua; point it at an older
#   copy to measure an older binary with the adapter it shipped with).
#   MODE: how the script side's users receive: poll (long polls, the default) or sse (a
#   Server-Sent Events stream each, no request a message).
#   POLL_TIMEOUT: how long the server holds a long poll with nothing to say, ms (1000: the
#   adapter's default; Matrix clients ask for 30000).
#   CALLGRIND=1 runs the generator under valgrind's callgrind and also reports the
#   instructions it executed per delivery (user space; slow: use a small load, e.g.
#   USERS=40 RATE=20), a count that other builds on a shared machine do not disturb.
#   STRACE=1 runs the generator under `strace -c -f` instead and also reports its system
#   calls per delivery, all and the most frequent by name (a count that load does not
#   disturb either; the CPU figures of such a run are strace's, not the generator's).
# Not a test: run by hand; results in bench/results/2026-11-28-script-http-budget.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/msgstorm}
adapter=$(realpath "${ADAPTER:-scenarios/http-chat.lua}")
users=${USERS:-200}
rate=${RATE:-200}
duration=${DURATION:-20s}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

wait_port() { # port
    for _ in $(seq 100); do
        (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return
        sleep 0.1
    done
    echo "nothing listens on $1" >&2
    exit 1
}

stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    pids=()
}

load() { # the tables after [target]
    cat <<TOML
[population]
users = $users
login_rate = 500

[[traffic]]
name = "chat"
kind = "direct"
senders = $((users / 4))
receivers = $((users / 2))
rate = $rate
duration = "$duration"

[[traffic]]
name = "rooms"
kind = "group"
groups = $((users / 10))
group_size = 6
rate = $((rate / 5))
duration = "$duration"
TOML
}

# Prints "cpu_s received" of a run's result.json.
facts() {
    python3 - "$1" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
print(a["shards"][0]["cpu_s"], a["metrics"]["counters"].get("received", 0))
PY
}

# The generator, pinned to core 1 (under callgrind with CALLGRIND=1): run SCENARIO OUT.
generate() {
    local cmd=("$bin" run "$1" -q --out "$2")
    [[ -n ${SET:-} ]] && cmd+=(--set "$SET")
    if [[ ${CALLGRIND:-} == 1 ]]; then
        cmd=(valgrind --tool=callgrind --callgrind-out-file="$2.cg" "${cmd[@]}")
    elif [[ ${STRACE:-} == 1 ]]; then
        cmd=(strace -c -f -o "$2.strace" "${cmd[@]}")
    else
        cmd=(/usr/bin/time -o "$2.time" -f "%U %S" "${cmd[@]}")
    fi
    taskset -c 1 "${cmd[@]}" >/dev/null 2>&1 || true
}

# Prints a run's system calls per delivery from its `strace -c` table: LABEL OUT RECEIVED.
syscalls() {
    python3 - "$@" <<'PY'
import re, sys
calls = {}
for line in open(sys.argv[2]):
    m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
    if m and m.group(2) != "total":
        calls[m.group(2)] = int(m.group(1))
n = max(int(sys.argv[3]), 1)
top = sorted(calls.items(), key=lambda c: -c[1])[:5]
print(f"{sys.argv[1]}: system calls per delivery {sum(calls.values()) / n:.2f} (" +
      ", ".join(f"{k} {v / n:.2f}" for k, v in top) + ")")
PY
}

# Prints "lost duplicated" of a run, as its report counts them.
ledger() {
    # (A run that failed a check still has its ledger.)
    { "$bin" report "$1" 2>/dev/null || true; } | awk -F'|' '/^\| (lost|duplicated) / { gsub(/[ ,]/, "", $3); printf "%s ", $3 }'
}

report() { # label out
    read -r cpu received < <(facts "$2/result.json")
    read -r lost duplicated < <(ledger "$2/result.json"; echo)
    local inst=0 user=0 system=0
    if [[ -f $2.cg ]]; then
        inst=$(awk '/^(summary|totals):/ { print $2; exit }' "$2.cg")
    fi
    if [[ -f $2.time ]]; then
        read -r user system < <(tail -n 1 "$2.time")
    fi
    python3 -c "print(f'$1: generator CPU {$cpu:.2f} s, received {$received:,} ' \
        f'(lost ${lost:-?}, duplicated ${duplicated:-?}), ' \
        f'{$cpu * 1e6 / max($received, 1):.1f} µs CPU per delivery' + \
        (f' (process: user {$user * 1e6 / max($received, 1):.1f} µs, ' \
         f'system {$system * 1e6 / max($received, 1):.1f} µs)' if $user + $system else '') + \
        (f', {$inst / 1e3 / max($received, 1):.0f} k instructions per delivery' \
         f' ({$inst:,} in all)' if $inst else ''))"
    if [[ -f $2.strace ]]; then
        syscalls "$1" "$2.strace" "$received"
    fi
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "binary: $bin ($(git rev-parse --short HEAD)), adapter $adapter; $users users, $rate direct + $((rate / 5)) group sends/s for $duration"

port=7841
taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --secret bench --durability normal \
    --data "$work/data" --queue 4096 2>"$work/serve.log" &
pids+=($!)
wait_port $port
{
    printf 'name = "budget-native"\nseed = 7\ndrain = "3s"\n[target]\n'
    printf 'url = "ws://127.0.0.1:%s/ws"\nheartbeat = "0s"\n[target.auth]\nsecret = "bench"\n' $port
    load
} >"$work/native.toml"
generate "$work/native.toml" "$work/native"
stop_all
report native "$work/native"

port=7842
taskset -c 0 python3 peers/httpchat/server.py $port >/dev/null &
pids+=($!)
wait_port $port
script_run() { # label url [extra [target.script] line]
    {
        printf 'name = "budget-%s"\nseed = 7\ndrain = "3s"\n[target]\ndriver = "script"\n' "$1"
        printf 'url = "%s"\nheartbeat = "0s"\n[target.script]\nfile = "%s"\n' "$2" "$adapter"
        printf 'vars = { mode = "%s", timeout = %s }\n%s\n' "${MODE:-poll}" "${POLL_TIMEOUT:-1000}" "${3:-}"
        load
    } >"$work/$1.toml"
    generate "$work/$1.toml" "$work/$1"
    report "$1" "$work/$1"
}
script_run script-http1 "http://127.0.0.1:$port"
if [[ ${HTTP:-} == 2 ]]; then
    front=7843
    mkdir -p "$work/nginx"
    cat >"$work/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:$front http2;
    location / { proxy_pass http://127.0.0.1:$port; proxy_http_version 1.1;
                 proxy_buffering off; proxy_read_timeout 120s; }
  }
}
CONF
    taskset -c 0 nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
    pids+=($!)
    wait_port $front
    script_run script-http2 "http://127.0.0.1:$front" 'http = "2"'
fi
stop_all
