#!/usr/bin/env bash
# Matrix Synapse's numbers through scenarios/matrix.lua (issue 39): Synapse from
# peers/synapse/venv (scripts/test installs it) on SQLite, a free loopback port, its rc_*
# rate limits raised, msgstorm as a release build beside it.
#  1. Logins/s: $USERS users logging in at once, first with their registration
#     (shared-secret registration + login + first /sync), then again (login + /sync only):
#     users ÷ the seconds until every one was in, and the login latency.
#  2. Messages/s: 100 users in group rooms of 10 members, every member sending, at each
#     rate of $RATES for $DURATION: accepted/s, deliveries/s, send → ack and end-to-end
#     p99, lost (the same accounts each time, registered by the first; new rooms each
#     time, named by the seed).
# Synapse's CPU (% of a core: the average over the traffic's seconds, the run's peak
# second) and peak memory come from /proc of its pid (the scenario's [monitor]). With BCRYPT_ROUNDS (default 12, Synapse's own) the password
# hash's cost, which is most of a login's.
#   bench/script/matrix.sh [BIN]     (default target/release/msgstorm)
# Not a test: run by hand; results in bench/results/<date>-matrix-synapse.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/msgstorm}
venv=$PWD/peers/synapse/venv/bin
port=${PORT:-18008}
rounds=${BCRYPT_ROUNDS:-12}
users=${USERS:-100}
rates=${RATES:-"10 20 40 80"}
duration=${DURATION:-10s}
lua=$PWD/scenarios/matrix.lua
work=$(mktemp -d)
syn=
trap 'kill $syn 2>/dev/null || true; rm -rf "$work"' EXIT

# Generates Synapse's configuration in $work and starts it; $syn is its pid.
start_synapse() {
    (cd "$work" && "$venv/python" -m synapse.app.homeserver --server-name localhost \
        --config-path hs.yaml --generate-config --report-stats=no >/dev/null)
    local limit="{per_second: 100000, burst_count: 100000}"
    sed -i "s/port: 8008/port: $port/; /- ::1/d" "$work/hs.yaml"
    cat >>"$work/hs.yaml" <<EOF

rc_message: $limit
rc_registration: $limit
rc_room_creation: $limit
rc_login:
  address: $limit
  account: $limit
  failed_attempts: $limit
rc_joins:
  local: $limit
  remote: $limit
rc_invites:
  per_room: $limit
  per_user: $limit
  per_issuer: $limit
bcrypt_rounds: $rounds
trusted_key_servers: []
suppress_key_server_warning: true
EOF
    (cd "$work" && exec "$venv/synapse_homeserver" -c hs.yaml >synapse.out 2>&1) &
    syn=$!
    for _ in $(seq 600); do
        (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && return
        sleep 0.1
    done
    echo "Synapse did not listen on $port" >&2
    exit 1
}

secret() {
    sed -n 's/^registration_shared_secret: "\(.*\)"$/\1/p' "$work/hs.yaml"
}

# Writes a scenario named $1 (seed $2) with population and traffic $3 to $work/$1.toml.
scenario() {
    cat >"$work/$1.toml" <<EOF
name = "$1"
seed = $2
drain = "10s"

[target]
driver = "script"
url = "http://127.0.0.1:$port"
heartbeat = "0s"
connect_timeout = "60s"

[target.auth]
username = "{user}"
password = "pw-{user}"

[target.script]
file = "$lua"
vars = { server_name = "localhost", shared_secret = "$(secret)" }

[monitor]
pids = [$syn]

$3
EOF
}

# Runs scenario $1 and prints its JSON report's facts as one Markdown table row (after
# the label $2; $3 users, whose logins/s is $3 ÷ the seconds until traffic started).
run() {
    "$bin" run "$work/$1.toml" --out "$work/$1" -q >"$work/$1.log" 2>&1 || true
    # A failed check exits 1 and prints the report all the same.
    "$bin" report "$work/$1/result.json" --format json >"$work/$1.json" 2>/dev/null || true
    if [[ ! -s $work/$1.json ]]; then
        echo "| $2 | no result: $(tail -n 1 "$work/$1.log") |"
        return
    fi
    python3 - "$2" "${3:-0}" "$work/$1.json" "$work/$1/result.json" <<'PY'
import json, sys
label, users = sys.argv[1], int(sys.argv[2])
r = json.load(open(sys.argv[3]))
a = json.load(open(sys.argv[4]))
start, end = a["traffic_started_s"], a["traffic_ended_s"]
lat, c, d, rates = r["latency_us"], r["counters"], r["delivery"], r["rates"]
syn = next(p for p in r["processes"] if not p["generator"])
during = [cpu for sec, cpu, _ in syn["series"] if start < sec <= end] or [0]
ms = lambda k, q: lat.get(k, {}).get(q, 0) / 1000
print(f"| {label} | {c.get('login_ok', 0)} | {rates['accepted_per_s']:.1f} | "
      f"{rates['received_per_s']:.1f} | {ms('login', 'p50'):.0f} / {ms('login', 'p99'):.0f} | "
      f"{ms('send_ack', 'p99'):.0f} | {ms('end_to_end', 'p99'):.0f} | {d['lost']} | "
      f"{sum(during) / len(during):.0f}% / {syn['cpu_peak_pct']:.0f}% | "
      f"{syn['rss_peak_bytes'] / 2**20:.0f} MiB | {start:.1f} | {users / start:.1f} |")
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $bin ($(git rev-parse --short HEAD)); Synapse $(cat peers/synapse/VERSION)," \
    "bcrypt_rounds $rounds"
start_synapse
echo
echo "| run | logins | accepted/s | received/s | login p50 / p99 ms | ack p99 ms | e2e p99 ms | lost | Synapse CPU in traffic avg / run peak | Synapse RSS | all in at s | logins/s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
# A second of light group traffic after the logins, so that the run has a traffic start.
light='[[traffic]]
name = "light"
kind = "group"
groups = 1
group_size = 2
rate = 1
duration = "1s"'
seed=1
for pass in register login; do
    scenario "logins-$pass" "$seed" "[population]
users = $users
login_rate = 100000

$light"
    run "logins-$pass" "$users users: $pass" "$users"
    seed=$((seed + 1))
done
for rate in $rates; do
    scenario "rate-$rate" "$seed" "[population]
users = 100
prefix = \"m\"
login_rate = 100000

[[traffic]]
name = \"rooms\"
kind = \"group\"
groups = 10
group_size = 10
senders_per_group = 10
rate = $rate
duration = \"$duration\""
    run "rate-$rate" "group rooms of 10, $rate msg/s" 100
    seed=$((seed + 1))
done
echo
echo "Synapse's log: $(grep -c ERROR "$work/homeserver.log" || true) ERROR lines"
