#!/usr/bin/env bash
# msgstorm's socketio driver beside Artillery 2.0's Socket.IO engine on the same app
# (peers/socketio, one node, no Redis: the generator is what is measured), and the app
# with and without perMessageDeflate through `msgstorm compare`.
#   bench/socketio/run.sh MSGSTORM_BIN [OUT_DIR]
# App on core 0, generator on core 1. Not a test: run by hand. Prints a table of
# generator peak RSS per connection (CONNS connections held), CPU per message (USERS users
# in rooms of 10 sending RATE msgs/s for SECS s), and connections opened at CONNS/s.
set -euo pipefail
bin=$(realpath "$1")
out=${2:-$(mktemp -d)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CONNS=${CONNS:-2000}
USERS=${USERS:-1000}
RATE=${RATE:-200}
SECS=${SECS:-20}
port=${PORT:-3011}
bash "$repo/bench/peers/artillery.sh" install
artillery=${PEERS_DIR:-$HOME/.cache/msgstorm-peers}/artillery/node_modules/.bin/artillery
app=
start_app() { # extra args
    stop_app
    taskset -c 0 node "$repo/peers/socketio/server.js" "127.0.0.1:$port" --recovery=0 "$@" \
        >"$out/app.log" 2>&1 &
    app=$!
    sleep 1.5
}
stop_app() {
    if [[ -n $app ]]; then kill "$app"; wait "$app" 2>/dev/null || true; app=; fi
}
trap stop_app EXIT
# GNU time's "peak RSS KiB, CPU s" of a command.
timed() { # NAME CMD...
    local name=$1; shift
    /usr/bin/time -f '%M %U %S' -o "$out/$name.time" taskset -c 1 "$@" >"$out/$name.log" 2>&1 || true
    awk '{printf "%d %.2f\n", $1, $2 + $3}' "$out/$name.time"
}
scenario() { # NAME USERS LOGIN_RATE TRAFFIC
    cat >"$out/$1.toml" <<TOML
name = "$1"
[target]
driver = "socketio"
url = "ws://127.0.0.1:$port"
heartbeat = "0s"
connect_timeout = "10s"
[target.socketio]
recovery = false
group = '{"room":"bench-{to}","body":"{body}"}'
join = '"bench-{group}"'
[population]
users = $2
login_rate = $3
$4
TOML
}
art() { # NAME ARRIVALS COUNT TICK HOLD
    local phases="[{\"duration\": 1, \"arrivalCount\": $2}]"
    [[ $1 == art-chat ]] && phases="[{\"duration\": 5, \"arrivalRate\": $(($2 / 5))}]"
    ROOMS=$((USERS / 10)) COUNT=$3 TICK=$4 HOLD=$5 DO_NOT_TRACK=1 ARTILLERY_DISABLE_TELEMETRY=true \
        timed "$1" "$artillery" run --quiet --output "$out/$1.json" \
        --overrides "{\"config\": {\"target\": \"http://127.0.0.1:$port\", \"phases\": $phases}}" \
        "$here/chat.artillery.yml"
}
tick=$(awk -v u="$USERS" -v r="$RATE" 'BEGIN {printf "%.3f", u / r}')
count=$(awk -v s="$SECS" -v t="$tick" 'BEGIN {printf "%d", s / t}')

start_app
scenario ms-hold "$CONNS" "$CONNS" "[[traffic]]
kind = \"idle\"
duration = \"10s\""
echo "ms-hold $(timed ms-hold "$bin" run "$out/ms-hold.toml" --out "$out/ms-hold" -q)"
start_app
echo "art-hold $(art art-hold "$CONNS" 0 1 10)"
start_app
scenario ms-chat "$USERS" $((USERS / 5)) "[[traffic]]
kind = \"group\"
groups = $((USERS / 10))
group_size = 10
rate = $RATE
size = 40
start = \"6s\"
duration = \"${SECS}s\""
echo "ms-chat $(timed ms-chat "$bin" run "$out/ms-chat.toml" --out "$out/ms-chat" -q)"
start_app
echo "art-chat $(art art-chat "$USERS" "$count" "$tick" 2)"
# Baseline vs optimised: the same chat with the app's perMessageDeflate on.
start_app --deflate=1
echo "ms-chat-deflate $(timed ms-chat-deflate "$bin" run "$out/ms-chat.toml" --out "$out/ms-chat-deflate" -q)"
"$bin" compare "$out/ms-chat/result.json" "$out/ms-chat-deflate/result.json" >"$out/compare.txt" || true
echo "results in $out"
