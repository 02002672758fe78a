#!/usr/bin/env bash
# The physical limit of receiving (issue 40): deliveries per CPU-second of a minimal
# receiver (examples/recv_limit: epoll or io_uring, N pushes per server write) beside
# msgstorm's own generator and k6 on the same group workload — 2,000 users, 200 groups of
# 10, 2 senders per group, 100-byte bodies, RATE msgs/s for DURATION s. One run per
# configuration, interleaved, a fresh server (empty store) for each: server on core 0,
# generator on core 1. Prints a Markdown table on stdout; raw outputs stay in $KEEP if set.
# Generator CPU is counted over the traffic phase (first send to exit), not the logins:
# recv_limit measures it itself; for msgstorm and k6 the process's CPU is sampled every
# 100 ms and the sample at traffic start (result.json, k6's "START" line) subtracted from
# the exact total (wait4). msgstorm's whole-run `cpu_s` is shown too.
# Not a test: run by hand, takes ~15 minutes.
#   bench/engine/recv-limit.sh [RATE ...]        (default: 4000 8000)
#   PLAN=split bench/engine/recv-limit.sh RATE   only the runs with sends in a 2nd thread
#   PLAN=before BEFORE=OLD_BINARY bench/engine/recv-limit.sh [RATE ...]
#                                                the limit (ticked or not) beside msgstorm
#                                                before (OLD_BINARY, e.g. main's build) and
#                                                after (this tree), interleaved
#   AFTER_SET=KEY=VALUE …                        an override for this tree's runs only, e.g.
#                                                wake_tick=1ms (an older binary refuses the key)
#   SERVER=BINARY …                              the reference server from BINARY (default:
#                                                this tree's), e.g. to keep one across sittings
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-30}
USERS=${USERS:-2000}
NGROUPS=${NGROUPS:-200}
SIZE=${SIZE:-10}
SENDERS=${SENDERS:-2}
PLAN=${PLAN:-all}
RATES=("$@")
[[ $# -gt 0 ]] || RATES=(4000 8000)

cargo build --release -q --example recv_limit --bin msgstorm
bin=$PWD/target/release/msgstorm
server=${SERVER:-$bin}
limit=$PWD/target/release/examples/recv_limit
bench/peers/k6.sh install
k6=${PEERS_DIR:-$HOME/.cache/msgstorm-peers}/bin/k6
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work"
srv=

stop() {
    if [[ -n $srv ]]; then kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; fi
    srv=
}
trap 'stop; [[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT

# A fresh server on a free port (other sessions run benchmarks on fixed ports here).
fresh() {
    stop
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    rm -rf "$work/data"
    taskset -c 0 "$server" serve --listen "127.0.0.1:$port" --secret bench --durability normal \
        --queue 4096 --idle-timeout 300s --data "$work/data" 2>"$work/serve.log" &
    srv=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return
        sleep 0.1
    done
    echo "server did not start on $port" >&2
    exit 1
}
server_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$srv/stat"; }

# measure NAME CMD…: runs CMD on core 1, sampling its CPU; NAME.out, NAME.err, NAME.cpu.json.
measure() {
    local name=$1
    shift
    python3 - "$work/$name" taskset -c 1 "$@" <<'PY'
import json, os, subprocess, sys, time
out = sys.argv[1]
hz = os.sysconf("SC_CLK_TCK")
p = subprocess.Popen(sys.argv[2:], stdout=open(out + ".out", "w"), stderr=open(out + ".err", "w"))
samples = []

def sleeps(pid):  # voluntary context switches of all the process's threads
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        for line in open(f"/proc/{pid}/task/{t}/status"):
            if line.startswith("voluntary_ctxt_switches"):
                n += int(line.split()[1])
    return n

while True:
    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
    if pid:
        break
    try:
        f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
        samples.append((time.time(), int(f[11]) / hz, int(f[12]) / hz, sleeps(p.pid)))
    except (OSError, IndexError, ValueError):
        pass
    time.sleep(0.1)
json.dump({"rc": os.waitstatus_to_exitcode(status), "end": time.time(), "user": ru.ru_utime,
           "sys": ru.ru_stime, "sleeps": ru.ru_nvcsw, "samples": samples}, open(out + ".cpu.json", "w"))
PY
}

scenario() { # RATE
    cat <<TOML
[target]
url = "ws://127.0.0.1:$port/ws"
connect_timeout = "30s"
[target.auth]
secret = "bench"
[population]
users = $USERS
login_rate = 5000
[[traffic]]
kind = "group"
groups = $NGROUPS
group_size = $SIZE
senders_per_group = $SENDERS
rate = $1
duration = "${DURATION}s"
size = 100
TOML
}

# row NAME KIND RATE BURST SERVER_CPU: one table row from a run's files.
row() {
    python3 - "$work/$1" "$2" "$3" "$4" "$5" "$(cut -d' ' -f1 /proc/loadavg)" "$bin" "$((SIZE - 1))" "$DURATION" <<'PY'
import json, subprocess, sys
base, kind, rate, burst, server, load, msgstorm, fanout, duration = sys.argv[1:]
cpu = json.load(open(base + ".cpu.json"))
if cpu["rc"] not in (0, 1):
    err = (open(base + ".err").read().strip().splitlines() or ["?"])[-1]
    print(f"| {kind} | {rate} | {burst} | failed (exit {cpu['rc']}): {err} |")
    sys.exit()

def at(t):  # the process's (user, sys, sleeps) at time t, from the samples
    before = [s for s in cpu["samples"] if s[0] <= t]
    return before[-1][1:] if before else (0.0, 0.0, 0)

def window(t0):  # user, sys and sleeps from t0 to the end
    u0, s0, n0 = at(t0)
    return cpu["user"] - u0, cpu["sys"] - s0, cpu["sleeps"] - n0

whole = ""
if kind.startswith("recv_limit"):
    kv = dict(x.split("=", 1) for x in open(base + ".out").read().split())
    name = f"limit {kv['mode']}" + (", sends in a 2nd thread" if "recv_thread_cpu_s" in kv else "")
    name += f", {int(kv['tick_us']) / 1000:g} ms ticks" if kv["tick_us"] != "0" else ""
    slept = int(kv["sleeps"])
    got, user, sys_ = int(kv["deliveries"]), float(kv["user_s"]), float(kv["sys_s"])
    fpr = kv["frames_per_read"]
    lost = int(kv["missing"])
    extra = ""
    if "recv_thread_cpu_s" in kv:
        extra = (f"receiving thread {int(kv['recv_deliveries_per_cpu_s']):,}/CPU-s "
                 f"({kv['recv_user_s']}/{kv['recv_sys_s']} s); sends {int(kv['sends_per_cpu_s']):,}/CPU-s")
elif kind == "msgstorm":
    a = json.load(open(base + "/result.json"))
    s = json.loads(subprocess.run([msgstorm, "report", base + "/result.json", "--json"],
                                  capture_output=True, text=True).stdout)
    got, lost = s["delivery"]["delivered"], s["delivery"]["lost"]
    t0 = a["started_unix_us"] / 1e6 + (a["traffic_started_s"] or 0)
    user, sys_, slept = window(t0)
    fpr, name = "–", "msgstorm run" + (" (before)" if base.endswith("-before") else "")
    extra = f"whole run `cpu_s` {a['shards'][0]['cpu_s']:.2f} s → {got / a['shards'][0]['cpu_s']:,.0f}/CPU-s"
else:
    m = json.load(open(base + ".summary.json"))["metrics"]
    v = lambda k: m.get(k, {}).get("values", {}).get("count", 0)
    got = int(v("group_pushes"))
    start = [l for l in open(base + ".err") if "START" in l]
    t0 = float(start[0].split("START ")[1].split()[0].strip('"')) / 1000 if start else cpu["end"]
    user, sys_, slept = window(t0)
    fpr, name = "–", "k6"
    lost = int(v("group_acks")) * int(fanout) - got
    extra = f"{int(v('group_acks')):,} acks, {int(v('group_refusals'))} refusals; whole run {cpu['user'] + cpu['sys']:.1f} CPU-s"
c = user + sys_
print(f"| {name} | {rate} | {burst} | {got:,} ({lost:,} missing) | {got / float(duration):,.0f} | {c:.2f} ({user:.2f} / {sys_:.2f}) "
      f"| **{got / c:,.0f}** | {fpr} | {got / max(slept, 1):.2f} | {server} | {load} | {extra} |")
PY
}

limit_run() { # RATE BURST MODE [--send-thread] [--tick-us N]
    local name
    name=$(IFS=-; echo "limit-$*" | tr -d ' ' | sed 's/--*/-/g')
    fresh
    local s0
    s0=$(server_cpu)
    measure "$name" "$limit" --addr "127.0.0.1:$port" --secret bench --mode "$3" --users "$USERS" \
        --groups "$NGROUPS" --group-size "$SIZE" --senders-per-group "$SENDERS" --rate "$1" \
        --duration "$DURATION" --burst "$2" "${@:4}"
    row "$name" recv_limit "$1" "$2" "$(awk -v a="$(server_cpu)" -v b="$s0" 'BEGIN { printf "%.2f", a - b }')"
}

msgstorm_run() { # RATE [BINARY TAG]
    local name="msgstorm-$1${3:+-$3}"
    fresh
    scenario "$1" >"$work/$name.toml"
    local s0
    s0=$(server_cpu)
    local set=()
    # The run of this tree takes AFTER_SET (e.g. wake_tick=1ms), one an older binary may refuse.
    [[ -z ${2:-} && -n ${AFTER_SET:-} ]] && set=(--set "$AFTER_SET")
    measure "$name" "${2:-$bin}" run "$work/$name.toml" -q --out "$work/$name" "${set[@]}"
    row "$name" msgstorm "$1" 1 "$(awk -v a="$(server_cpu)" -v b="$s0" 'BEGIN { printf "%.2f", a - b }')"
}

k6_run() { # RATE
    local name="k6-$1"
    fresh
    local s0
    s0=$(server_cpu)
    URL="ws://127.0.0.1:$port/ws" SECRET=bench USERS=$USERS NGROUPS=$NGROUPS SIZE=$SIZE \
        SENDERS=$SENDERS RATE=$1 DURATION=$DURATION SUMMARY="$work/$name.summary.json" \
        measure "$name" "$k6" run --quiet --no-usage-report --no-color bench/peers/group.k6.js
    row "$name" k6 "$1" 1 "$(awk -v a="$(server_cpu)" -v b="$s0" 'BEGIN { printf "%.2f", a - b }')"
}

echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), kernel $(uname -r)."
echo "Workload: $USERS users, $NGROUPS groups of $SIZE, $SENDERS senders per group, 100-byte bodies, ${DURATION} s."
echo
echo "| generator | msgs/s offered | pushes per write (burst) | deliveries | deliveries/s of sending | CPU-s (user / sys) | deliveries per CPU-s | frames per read | deliveries per sleep | server CPU-s | load avg (1 min) | notes |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
# The sends' share: the receiving thread's CPU alone, senders in a thread of their own.
split() { # RATE
    limit_run "$1" 1 epoll --send-thread
    limit_run "$1" 1 uring --send-thread
    limit_run "$1" 1 epoll --send-thread --tick-us 1000
    limit_run "$1" 1 uring --send-thread --tick-us 1000
}

for rate in "${RATES[@]}"; do
    if [[ $PLAN == split ]]; then
        split "$rate"
        continue
    fi
    if [[ $PLAN == before ]]; then
        limit_run "$rate" 1 epoll
        limit_run "$rate" 1 epoll --tick-us 1000
        limit_run "$rate" 1 uring --tick-us 1000
        msgstorm_run "$rate" "${BEFORE:?BEFORE names the binary to compare with}" before
        msgstorm_run "$rate"
        continue
    fi
    limit_run "$rate" 1 epoll
    limit_run "$rate" 1 uring
    limit_run "$rate" 1 epoll --tick-us 1000
    limit_run "$rate" 1 uring --tick-us 1000
    msgstorm_run "$rate"
    k6_run "$rate"
    limit_run "$rate" 16 epoll
    limit_run "$rate" 16 uring
    if [[ $rate == "${RATES[0]}" ]]; then
        limit_run "$rate" 4 epoll
        limit_run "$rate" 4 uring
        split "$rate"
    fi
done
