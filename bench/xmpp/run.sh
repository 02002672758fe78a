#!/usr/bin/env bash
# W5 on this box: msgstorm and tsung side by side on the same ejabberd, then ejabberd vs
# Prosody under the same msgstorm scenario. Prints what bench/results/xmpp-<date>.md
# records (machine, commands, numbers); nothing is started as a system service.
#
#   cargo build --release            # once
#   bash bench/xmpp/run.sh           # ~5 minutes
#
# The W5 shape (scenarios/ejabberd-arrival.toml) scaled to one box: USERS users log in at
# RATE/s, stay online with heartbeats, and a tenth of them chat, each one message every
# THINK s, for DURATION s. Both generators authenticate with SASL PLAIN against accounts created
# beforehand (in-band registration by msgstorm), send 64-byte bodies, and run on core 1
# while the server runs on core 0.
#
# Environment: USERS (4000) RATE (2000) THINK (1) DURATION (30)
# Needs: ejabberd, prosody, tsung (apt-get install -y ejabberd prosody tsung), python3.
#
# Then W5 itself at this box's limit: scenarios/ejabberd-arrival.toml unchanged but for its
# size (W5_USERS users, W5_DURATION s of traffic) against ejabberd, the generator split
# over W5_SHARDS processes (20k fds each), and the per-second series printed (logins,
# online, deliveries, end-to-end p99 over time).
# Environment: W5_USERS (18000; 0 skips it) W5_DURATION (60) W5_SHARDS (2) ONLY_W5 (skip the
# side-by-side runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${MSGSTORM:-${CARGO_TARGET_DIR:-target}/release/msgstorm}
USERS=${USERS:-4000} RATE=${RATE:-2000} THINK=${THINK:-1} DURATION=${DURATION:-30}
W5_USERS=${W5_USERS:-18000} W5_DURATION=${W5_DURATION:-60} W5_SHARDS=${W5_SHARDS:-2}
# tsung's think times are whole seconds: a tenth of the users chat, each every THINK s.
CHAT=$((USERS / 10 / THINK))
WORK=$(mktemp -d)
SERVER_PID=""
stop_server() {
    if [[ -n $SERVER_PID ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
trap 'stop_server; rm -rf "$WORK"' EXIT
. bench/xmpp/common.sh
start_prosody() {
    local dir=$WORK/prosody
    rm -rf "$dir"; mkdir -p "$dir/data"
    PORT=$(free_port)
    cat > "$dir/prosody.cfg.lua" <<LUA
run_as_root = true
pidfile = "$dir/prosody.pid"
data_path = "$dir/data"
log = { warn = "$dir/prosody.log"; }
interfaces = { "127.0.0.1" }
c2s_ports = { $PORT }
s2s_ports = {}
http_ports = {}
https_ports = {}
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
allow_registration = true
min_seconds_between_registrations = 0
authentication = "internal_plain"
storage = "internal"
limits = { c2s = { rate = "100mb/s"; }; }
network_settings = { tcp_backlog = 4096 }
modules_enabled = { "saslauth"; "register"; "ping"; "offline"; "smacks"; "posix" }
VirtualHost "localhost"
LUA
    ("${SERVER_CPU[@]}" prosody -F --config "$dir/prosody.cfg.lua" > "$dir/out.log" 2>&1) &
    SERVER_PID=$!
    wait_port "$PORT"
    SERVER_NAME=lua5.4
}

log "machine"
echo "$(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "$(free -g | awk '/Mem:/ {print $2}') GiB RAM; nofile $(ulimit -n); $("$BIN" --version)"
echo "ejabberd $(dpkg-query -W -f '${Version}' ejabberd), prosody $(dpkg-query -W -f '${Version}' prosody), tsung $(dpkg-query -W -f '${Version}' tsung)"
echo "USERS=$USERS RATE=$RATE THINK=$THINK ($CHAT msgs/s) DURATION=$DURATION"

# Creates u0..u$USERS with passwords pwu0.. (tsung's ids start at 1, with prefixes u/pwu);
# extra arguments go to msgstorm run (e.g. --shards).
register() {
    cat > "$WORK/register.toml" <<TOML
name = "xmpp-register"
drain = "1s"
[target]
driver = "xmpp"
url = "xmpp://127.0.0.1:$PORT"
connect_timeout = "60s"
[target.auth]
username = "{user}"
password = "pw{user}"
[target.xmpp]
domain = "localhost"
register = true
sasl = "plain"
[population]
users = $((USERS + 1))
login_rate = 1000
[[traffic]]
kind = "idle"
duration = "1s"
TOML
    "$BIN" run "$WORK/register.toml" --out "$WORK/register" -q "$@" > "$WORK/register.txt" 2>&1 || true
    head -1 "$WORK/register.txt"
    grep -E '^\| accounts' "$WORK/register.txt" || true
}

# One msgstorm W5 run against the server on $PORT; $1 names it.
msgstorm_w5() {
    local name=$1
    cat > "$WORK/$name.toml" <<TOML
name = "$name"
drain = "5s"
[target]
driver = "xmpp"
url = "xmpp://127.0.0.1:$PORT"
heartbeat = "30s"
connect_timeout = "60s"
[target.auth]
username = "{user}"
password = "pw{user}"
[target.xmpp]
domain = "localhost"
sasl = "plain"
[population]
users = $USERS
login_rate = $RATE
[[traffic]]
name = "online"
kind = "idle"
duration = "${DURATION}s"
[[traffic]]
name = "chat"
kind = "direct"
senders = $((USERS / 10))
receivers = $((USERS / 10))
pick = "every_kth"
rate = $CHAT
duration = "${DURATION}s"
size = 64
[monitor]
names = ["$SERVER_NAME"]
TOML
    log "$name: ${GEN_CPU[*]} $BIN run $name.toml"
    sed 's/^/    /' "$WORK/$name.toml"
    "${GEN_CPU[@]}" "$BIN" run "$WORK/$name.toml" --out "$WORK/$name" -q > "$WORK/$name.txt" 2>&1 || true
    head -1 "$WORK/$name.txt"
    grep -E '^\| (connect |login |send → ack|end-to-end|delivered intact|lost|duplicated)' "$WORK/$name.txt" || true
    python3 - "$WORK/$name/result.json" "$USERS" <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); users = int(sys.argv[2])
sh = a["shards"][0]; ts = a["traffic_started_s"] or 0
online = max(1, min(users, a["metrics"]["counters"].get("login_ok", users)))
print(f"   generator: {users} users logged in after {ts:.2f} s ({users/max(ts,1e-3):,.0f} logins/s), "
      f"CPU {sh['cpu_s']:.1f} s, peak RSS {sh['peak_rss_bytes']/2**20:.1f} MiB "
      f"({sh['peak_rss_bytes']/users/1024:.1f} KiB/user)")
for p in a.get("processes", []):
    if not p.get("generator"):
        rss = p["rss_peak_bytes"]
        print(f"   server {p['name']} (pid {p['pid']}): peak RSS {rss/2**20:.1f} MiB "
              f"({rss/online/1024:.1f} KiB per online user, {online} online), CPU avg {p['cpu_avg_pct']:.0f}% "
              f"peak {p['cpu_peak_pct']:.0f}% of a core")
PY
}

# tsung on the same server: same arrival, same users, the same chat rate from a tenth.
tsung_w5() {
    local dir=$WORK/tsung chatters=$((USERS / 10)) think
    mkdir -p "$dir"
    # Each chatter sends every THINK seconds: CHAT msgs/s in total.
    think=$THINK
    {
    tsung_head
    cat <<XML
    <session probability="90" name="online" type="ts_jabber">
$(tsung_login)
      <request><jabber type="presence:initial" ack="no_ack"/></request>
      <thinktime value="$DURATION"/>
      <request><jabber type="close" ack="no_ack"/></request>
    </session>
    <session probability="10" name="chat" type="ts_jabber">
$(tsung_login)
      <request><jabber type="presence:initial" ack="no_ack"/></request>
      <for from="1" to="$(python3 -c "print(int($DURATION / $think))")" incr="1" var="i">
        <thinktime value="$think" random="false"/>
        <request><jabber type="chat" ack="no_ack" size="64" destination="online"/></request>
      </for>
      <request><jabber type="close" ack="no_ack"/></request>
    </session>
  </sessions>
</tsung>
XML
    } > "$dir/w5.xml"
    log "tsung: ${GEN_CPU[*]} tsung -f w5.xml -l DIR start"
    sed 's/^/    /' "$dir/w5.xml"
    local start end
    start=$(date +%s.%N)
    ( "${GEN_CPU[@]}" tsung -f "$dir/w5.xml" -l "$dir/log" start > "$dir/out.txt" 2>&1 ) &
    local tpid=$! peak=0 cpu=0
    # The generator's memory: the tsung Erlang VM's RSS, sampled every 0.5 s.
    while kill -0 "$tpid" 2>/dev/null; do
        local rss
        rss=$(ps -C beam.smp -o rss=,args= | awk '/tsung/ {s+=$1} END {print s+0}')
        [[ $rss -gt $peak ]] && peak=$rss
        local c
        c=$(ps -C beam.smp -o cputimes=,args= | awk '/tsung/ {s+=$1} END {print s+0}')
        [[ $c -gt $cpu ]] && cpu=$c
        sleep 0.5
    done
    end=$(date +%s.%N)
    tail -3 "$dir/out.txt"
    local stats
    stats=$(find "$dir/log" -name tsung.log | head -1)
    python3 - "$stats" "$USERS" "$peak" "$cpu" "$start" "$end" <<'PY'
import sys, re
path, users, peak_kb, cpu, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
text = open(path).read() if path else ""
def last(name):
    # tsung.log stat lines: "stats: NAME COUNT MEAN STDDEV MAX MIN MEANTOTAL COUNTTOTAL"
    rows = re.findall(rf"^stats: {re.escape(name)} (\S+) (\S+) \S+ (\S+) (\S+) (\S+) (\S+)", text, re.M)
    return rows[-1] if rows else None
def total(name):
    # counter lines: "stats: NAME COUNT TOTAL"
    rows = re.findall(rf"^stats: {re.escape(name)} (\S+) (\S+)$", text, re.M)
    return rows[-1][1] if rows else None
started = total("users_count"); conn = last("connect"); login = last("tr_login")
print(f"   tsung: peak RSS {peak_kb/1024:.1f} MiB ({peak_kb/users:.1f} KiB/user), CPU {cpu} s, wall {end-start:.1f} s")
if started: print(f"   users started: {started} of {users}")
if conn: print(f"   connect: count {conn[-1]}, mean {float(conn[-2]):.2f} ms")
if login: print(f"   login transaction: count {login[-1]}, mean {float(login[-2]):.2f} ms, max {login[2]} ms")
for name in ("error_connect_econnrefused", "error_abort_max_conn_retries", "error_connect_etimedout"):
    r = last(name)
    if r: print(f"   {name}: {r[-1]}")
PY
    grep -E "^stats: (users|connected|finish_users_count|page|request|session|chat|size_sent|size_rcv) " "$stats" | tail -12 | sed 's/^/    /'
    grep -h "Phase duration exceeded" "$dir"/log/*/tsung_controller@*.log | sed 's/^ */   /' || true
}

# W5 at the fd limit: the shipped scenario, resized, on a fresh ejabberd.
w5_full() {
    log "W5: ejabberd, register $((W5_USERS + 1)) accounts"
    start_ejabberd
    local saved=$USERS
    USERS=$W5_USERS register --shards "$W5_SHARDS"
    USERS=$saved
    local args=(--shards "$W5_SHARDS" --out "$WORK/w5" -q
        --set "target.url=xmpp://127.0.0.1:$PORT" --set "population.users=$W5_USERS"
        --set "traffic[0].duration=${W5_DURATION}s" --set "traffic[1].duration=${W5_DURATION}s"
        --set 'monitor.names=["beam.smp"]')
    log "W5: ${GEN_CPU[*]} $BIN run scenarios/ejabberd-arrival.toml ${args[*]}"
    "${GEN_CPU[@]}" "$BIN" run scenarios/ejabberd-arrival.toml "${args[@]}" > "$WORK/w5.txt" 2>&1 || true
    grep -E '^(PASS|FAIL|INCOMPLETE|INTERRUPTED) ' "$WORK/w5.txt" || head -3 "$WORK/w5.txt"
    grep -E '^\| (connect |login |send → ack|end-to-end|delivered intact|lost|duplicated|online peak|logins ok)' "$WORK/w5.txt" || true
    "$BIN" report --json "$WORK/w5/result.json" > "$WORK/w5-report.json"
    python3 - "$WORK/w5-report.json" "$WORK/w5/result.json" "$W5_USERS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); a = json.load(open(sys.argv[2])); users = int(sys.argv[3])
series = r["series"]
logins = [s["logins"] for s in series]
print(f"   logins: {sum(logins)} ok; highest in one second {max(logins)}/s; all in by "
      f"{a['traffic_started_s'] or 0:.1f} s (offered 2,000/s: {users / 2000:.1f} s)")
gen_rss = sum(sh["peak_rss_bytes"] for sh in a["shards"]); gen_cpu = sum(sh["cpu_s"] for sh in a["shards"])
print(f"   generator: {len(a['shards'])} processes, peak RSS {gen_rss/2**20:.1f} MiB in all "
      f"({gen_rss/users/1024:.1f} KiB/user), CPU {gen_cpu:.1f} s")
online = max(1, max(s["online"] for s in series))
servers = {p["pid"]: p for p in a.get("processes", []) if not p.get("generator")}
for p in servers.values():
        rss = p["rss_peak_bytes"]
        print(f"   server {p['name']}: peak RSS {rss/2**20:.1f} MiB ({rss/online/1024:.1f} KiB per online user, "
              f"{online} online), CPU avg {p['cpu_avg_pct']:.0f}% peak {p['cpu_peak_pct']:.0f}% of a core")
print("   per-second series, every second with logins and every 5th (sec: online, logins, received, e2e p99 ms, ack p99 ms):")
for s in (s for s in series if s["logins"] or s["sec"] % 5 == 0):
    e2e = s.get("e2e") or {}; ack = s.get("ack") or {}
    print(f"     {s['sec']:>4}: {s['online']:>6} {s['logins']:>5} {s['received']:>6} "
          f"{(e2e.get('p99') or 0)/1000:>8.1f} {(ack.get('p99') or 0)/1000:>8.1f}")
PY
    stop_server
}

if [[ -n ${ONLY_W5:-} ]]; then
    [[ $W5_USERS -gt 0 ]] && w5_full
    exit 0
fi

log "ejabberd: register $((USERS + 1)) accounts"
start_ejabberd
register
msgstorm_w5 "msgstorm-ejabberd"
stop_server
start_ejabberd
register
tsung_w5
stop_server

log "prosody: register $((USERS + 1)) accounts"
start_prosody
register
msgstorm_w5 "msgstorm-prosody"
stop_server

[[ $W5_USERS -gt 0 ]] && w5_full
exit 0
