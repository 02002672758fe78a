#!/usr/bin/env bash
# scenarios/tsung-xmpp.toml beside tsung on one fresh ejabberd: a login wave with rosters and
# presence, then 1:1 chat with typing notices and read markers. Prints what
# bench/results/2026-11-28-xmpp-signals.md records; nothing is started as a system service.
#
#   cargo build --release          # once
#   bash bench/xmpp/signals.sh     # ~4 minutes
#
# Order: ejabberd starts empty; msgstorm's first run registers u0..u$USERS and sets up the
# contact graph as mutual roster subscriptions (not measured); msgstorm's second run is
# measured; then tsung runs the same shape on the same accounts, whose rosters now hold
# the same contacts, so its logins fan presence out to the same contacts. Generators on
# core 1, the server on core 0.
# Environment: USERS (1000) RATE (500 logins/s) CHAT (100 msgs/s) DURATION (30 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${MSGSTORM:-${CARGO_TARGET_DIR:-target}/release/msgstorm}
USERS=${USERS:-1000} RATE=${RATE:-500} CHAT=${CHAT:-100} DURATION=${DURATION:-30}
WORK=$(mktemp -d)
SERVER_PID=""
trap '[[ -n $SERVER_PID ]] && kill $SERVER_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
. bench/xmpp/common.sh

log "machine"
echo "$(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $("$BIN" --version)"
echo "ejabberd $(dpkg-query -W -f '${Version}' ejabberd), tsung $(dpkg-query -W -f '${Version}' tsung)"
echo "USERS=$USERS RATE=$RATE CHAT=$CHAT msgs/s DURATION=$DURATION s"

start_ejabberd

# msgstorm: the shipped scenario on this server; users u0..u(USERS-1), tsung's u1..uUSERS
# overlap all but one.
args=(--set "target.url=xmpp://127.0.0.1:$PORT" --set "population.users=$USERS"
    --set "population.login_rate=$RATE" --set "traffic[0].rate=$CHAT"
    --set "traffic[0].duration=${DURATION}s" --set 'monitor.names=["beam.smp"]')
log "msgstorm setup run (registration, roster subscriptions)"
"${GEN_CPU[@]}" "$BIN" run scenarios/tsung-xmpp.toml "${args[@]}" --out "$WORK/setup" -q \
    > "$WORK/setup.txt" 2>&1 || true
head -1 "$WORK/setup.txt"
log "msgstorm: ${GEN_CPU[*]} $BIN run scenarios/tsung-xmpp.toml ${args[*]}"
"${GEN_CPU[@]}" "$BIN" run scenarios/tsung-xmpp.toml "${args[@]}" --out "$WORK/ms" \
    > "$WORK/ms.txt" 2>&1 || true
head -1 "$WORK/ms.txt"
grep -E '^\| (connect |login |logins ok|sent  |received |send → ack|end-to-end|read →|typing →|login/logout|receipts|typing  |presence|delivered intact|lost|shard|beam)' "$WORK/ms.txt" || true

# tsung: the same wave; each user reads its roster, sends its initial presence, then every
# THINK s a typing notice, a message to a random online user and a read marker (tsung
# reads no messages: the marker names none), then its final presence.
think=$(( USERS / CHAT )); rounds=$(( DURATION / think ))
tdir=$WORK/tsung; mkdir -p "$tdir"
raw() { # $1: the element inside a message to a random user %%_peer%%
    printf '<request subst="true"><jabber type="raw" ack="no_ack" data="&lt;message type=%s to=%su%%%%_peer%%%%@localhost%s&gt;%s&lt;/message&gt;"/></request>' \
        "'chat'" "'" "'" "$1"
}
{
tsung_head
cat <<XML
    <session probability="100" name="signals" type="ts_jabber">
$(tsung_login)
      <transaction name="roster">
        <request><jabber type="iq:roster:get" ack="local"/></request>
      </transaction>
      <request><jabber type="presence:initial" ack="no_ack"/></request>
      <for from="1" to="$rounds" incr="1" var="i">
        <thinktime value="$think" random="true"/>
        <setdynvars sourcetype="random_number" start="1" end="$USERS"><var name="peer"/></setdynvars>
        $(raw "&lt;composing xmlns='http://jabber.org/protocol/chatstates'/&gt;")
        <request><jabber type="chat" ack="no_ack" size="64" destination="online"/></request>
        $(raw "&lt;displayed xmlns='urn:xmpp:chat-markers:0' id='x'/&gt;")
      </for>
      <request><jabber type="presence:final" ack="no_ack"/></request>
      <request><jabber type="close" ack="no_ack"/></request>
    </session>
  </sessions>
</tsung>
XML
} > "$tdir/signals.xml"
log "tsung: ${GEN_CPU[*]} tsung -f signals.xml -l DIR start"
sed 's/^/    /' "$tdir/signals.xml"
start=$(date +%s.%N)
( "${GEN_CPU[@]}" tsung -f "$tdir/signals.xml" -l "$tdir/log" start > "$tdir/out.txt" 2>&1 ) &
tpid=$! cpu=0
while kill -0 "$tpid" 2>/dev/null; do
    c=$(ps -C beam.smp -o cputimes=,args= | awk '/tsung/ {s+=$1} END {print s+0}')
    [[ $c -gt $cpu ]] && cpu=$c
    sleep 0.5
done
end=$(date +%s.%N)
stats=$(find "$tdir/log" -name tsung.log | head -1)
echo "   tsung CPU ${cpu} s, wall $(python3 -c "print(round($end - $start, 1))") s"
grep -E "^stats: (users_count|connect|tr_login|tr_roster|request|size_sent|size_rcv|error_[a-z_]+) " "$stats" | tail -14 | sed 's/^/    /'
