# What the XMPP bench scripts share; sourced, not run. Needs WORK and, for the tsung parts,
# USERS, RATE and PORT. The server runs on core 0 (SERVER_CPU), generators on core 1
# (GEN_CPU), when there are two.
log() { printf '== %s\n' "$*"; }
ulimit -n "$(ulimit -Hn)"
if [[ $(nproc) -ge 2 ]]; then SERVER_CPU=(taskset -c 0) GEN_CPU=(taskset -c 1); else SERVER_CPU=() GEN_CPU=(); fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 300); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "server did not listen on $1" >&2
    exit 1
}

start_ejabberd() {
    local dir=$WORK/ejabberd libs
    rm -rf "$dir"; mkdir -p "$dir/spool"
    libs=$(dirname "$(ls -d /usr/lib/*/ejabberd-* | head -1)")
    PORT=$(free_port)
    cat > "$dir/ejabberd.yml" <<YML
hosts: ["localhost"]
loglevel: warning
listen:
  - port: $PORT
    ip: "127.0.0.1"
    module: ejabberd_c2s
    backlog: 65535
    max_stanza_size: 65536
registration_timeout: infinity
access_rules:
  register:
    allow: all
shaper_rules:
  max_user_offline_messages: 100000
  max_user_sessions: 10
modules:
  mod_ping: {}
  mod_roster: {}
  mod_register:
    access: register
    ip_access: all
  mod_offline:
    access_max_user_messages: max_user_offline_messages
  mod_stream_mgmt:
    resend_on_timeout: if_offline
YML
    (cd "$dir" && ERL_LIBS=$libs EJABBERD_CONFIG_PATH=$dir/ejabberd.yml \
        EJABBERD_LOG_PATH=$dir/ejabberd.log ERL_MAX_PORTS=65536 \
        exec "${SERVER_CPU[@]}" erl -noinput -noshell +P 1000000 -mnesia dir "\"$dir/spool\"" \
        -s ejabberd > "$dir/out.log" 2>&1) &
    SERVER_PID=$!
    wait_port "$PORT"
    SERVER_NAME=beam.smp
}


# Everything before the first <session>: one client VM, the server, an arrival phase of
# USERS users at RATE/s, and the ts_jabber accounts u1..uUSERS with passwords pwu1...
tsung_head() {
    cat <<XML
<?xml version="1.0"?>
<!DOCTYPE tsung SYSTEM "/usr/share/tsung/tsung-1.0.dtd">
<tsung loglevel="warning" version="1.0" dumptraffic="false">
  <clients><client host="localhost" use_controller_vm="true" maxusers="$((USERS + 10))"/></clients>
  <servers><server host="127.0.0.1" port="$PORT" type="tcp"/></servers>
  <load>
    <arrivalphase phase="1" duration="$(( (USERS + RATE - 1) / RATE ))" unit="second">
      <users maxnumber="$USERS" arrivalrate="$RATE" unit="second"/>
    </arrivalphase>
  </load>
  <options>
    <option type="ts_jabber" name="global_number" value="$USERS"/>
    <option type="ts_jabber" name="userid_max" value="$USERS"/>
    <option type="ts_jabber" name="domain" value="localhost"/>
    <option type="ts_jabber" name="username" value="u"/>
    <option type="ts_jabber" name="passwd" value="pwu"/>
  </options>
  <sessions>
XML
}

# A session's connect and its "login" transaction (SASL, restart, bind, session).
tsung_login() {
    cat <<XML
      <request><jabber type="connect" ack="local"/></request>
      <transaction name="login">
        <request><jabber type="auth_sasl" ack="local"/></request>
        <request><jabber type="connect" ack="local"/></request>
        <request><jabber type="auth_sasl_bind" ack="local"/></request>
        <request><jabber type="auth_sasl_session" ack="local"/></request>
      </transaction>
XML
}
