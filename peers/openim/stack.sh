#!/usr/bin/env bash
# OpenIM v3.8.3's whole stack on loopback, without containers:
#   stack.sh start DIR [OWNER_PID]   start everything with its state and logs in DIR
#   stack.sh stop DIR                stop every process it started, by pid, newest first
# etcd (discovery), Redis, PostgreSQL with FerretDB on it (OpenIM's MongoDB), Kafka in
# KRaft mode, then OpenIM's RPC services, API, message gateway, transfer and push. Ports are
# fixed (OpenIM's own defaults; the stores on the ports OpenIM's configuration expects), so
# one stack runs per machine. With OWNER_PID the stack stops itself when that process ends
# and DIR is removed (a test binary that starts it once and has no hook at its exit). Built by scripts/test
# (ensure_openim) into bin/, with Kafka's class path in kafka-cp.txt.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$HERE/bin
SECRET=openIM123
PG_PORT=15432
# The OpenIM services this stack runs: messaging needs no MinIO (openim-rpc-third) and no
# cron task.
SERVICES=(openim-rpc-user openim-rpc-auth openim-rpc-friend openim-rpc-group
    openim-rpc-conversation openim-rpc-msg openim-push openim-msgtransfer
    openim-msggateway openim-api)

die() { printf 'stack.sh: %s\n' "$*" >&2; exit 1; }

# Waits up to $2 seconds for something to listen on 127.0.0.1:$1.
wait_port() {
    local port=$1 deadline=$((SECONDS + $2))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        [ $SECONDS -lt "$deadline" ] || die "nothing listens on 127.0.0.1:$port after $2 s (logs: $DIR/logs)"
        sleep 0.2
    done
}

# Starts "$@" in the background with its output in logs/$NAME.log; records its pid.
spawn() {
    local name=$1
    shift
    "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null &
    echo "$! $name" >>"$DIR/pids"
}

# PostgreSQL refuses to run as root: as root, its programs run as the postgres user.
pg() {
    local tool=$1
    shift
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$PG_BIN/$tool" "$@"
    else
        "$PG_BIN/$tool" "$@"
    fi
}

# OpenIM's shipped configuration with this stack's addresses: 127.0.0.1 (not localhost),
# no credentials on FerretDB, logs to stdout, offline push off (its default provider calls
# the internet and holds pushes in 5 s batches).
write_config() {
    local c=$DIR/config
    cp -r "$BIN/config" "$c"
    sed -i 's/localhost/127.0.0.1/g' "$c"/*.yml
    sed -i "s|^uri: *$|uri: mongodb://127.0.0.1:17017/openim_v3?maxPoolSize=100|; s/:37017/:17017/g; s/^username: openIM$/username: ''/; s/^password: openIM123$/password: ''/" "$c/mongodb.yml"
    sed -i 's/^isStdout: false/isStdout: true/; s/^remainLogLevel: .*/remainLogLevel: 3/; s|^storageLocation: .*|storageLocation: '"$DIR"'/logs/openim/|' "$c/log.yml"
    sed -i 's/^enable: geTui/enable: none/' "$c/openim-push.yml"
}

start() {
    [ -x "$BIN/openim-api" ] && [ -x "$BIN/ferretdb" ] && [ -s "$HERE/kafka-cp.txt" ] \
        || die "OpenIM is not built: run scripts/test (ensure_openim)"
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$PG_BIN" ] || die "PostgreSQL is not installed (Debian's postgresql)"
    command -v etcd >/dev/null || die "etcd is not installed (Debian's etcd-server)"
    command -v redis-server >/dev/null || die "redis-server is not installed"
    mkdir -p "$DIR/logs" "$DIR/pg" "$DIR/kafka"
    : >"$DIR/pids"
    if [ -n "$OWNER" ]; then
        # Stops the stack when its owner ends (tail --pid waits for a process's end).
        (tail --pid="$OWNER" -f /dev/null; "$HERE/stack.sh" stop "$DIR" && rm -rf "$DIR") \
            >/dev/null 2>&1 </dev/null &
        disown
    fi

    spawn etcd etcd --name openim --data-dir "$DIR/etcd" \
        --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
        --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
        --initial-cluster openim=http://127.0.0.1:12380
    spawn redis redis-server --bind 127.0.0.1 --port 16379 --requirepass "$SECRET" \
        --save '' --appendonly no --dir "$DIR"

    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$DIR/pg"
        chmod 755 "$DIR"
    fi
    pg initdb -D "$DIR/pg" -U postgres --auth=trust -E UTF8 >/dev/null
    pg pg_ctl -D "$DIR/pg" -l "$DIR/pg/server.log" -w start \
        -o "-p $PG_PORT -k $DIR/pg -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=300" >/dev/null
    echo "pg_ctl postgres" >>"$DIR/pids"
    pg createdb -h "$DIR/pg" -p "$PG_PORT" -U postgres ferretdb
    spawn ferretdb "$BIN/ferretdb" --handler=postgresql \
        --postgresql-url="postgres://postgres@127.0.0.1:$PG_PORT/ferretdb" \
        --listen-addr=127.0.0.1:17017 --debug-addr=- --state-dir="$DIR" --telemetry=disable

    local cp
    cp=$(cat "$HERE/kafka-cp.txt")
    cat >"$DIR/kafka/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:19093
listeners=PLAINTEXT://127.0.0.1:19094,CONTROLLER://127.0.0.1:19093
advertised.listeners=PLAINTEXT://127.0.0.1:19094
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DIR/kafka/data
num.partitions=8
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
    java -cp "$cp" kafka.tools.StorageTool format --ignore-formatted \
        -t "$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null)" \
        -c "$DIR/kafka/server.properties" >"$DIR/logs/kafka-format.log" 2>&1
    printf '%s\n' 'log4j.rootLogger=INFO, out' 'log4j.appender.out=org.apache.log4j.ConsoleAppender' \
        'log4j.appender.out.layout=org.apache.log4j.PatternLayout' \
        'log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n' >"$DIR/kafka/log4j.properties"
    spawn kafka java -Xms256m -Xmx768m -Dlog4j.configuration="file:$DIR/kafka/log4j.properties" \
        -cp "$cp" kafka.Kafka "$DIR/kafka/server.properties"
    wait_port 19094 60
    # OpenIM's consumers start at the newest offset: its topics must exist before they join
    # (a topic made by the first message would lose what came before the consumers).
    local t made=()
    for t in toRedis toMongo toPush toOfflinePush; do
        java -cp "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:19094 --create \
            --if-not-exists --topic "$t" --partitions 8 --replication-factor 1 \
            >>"$DIR/logs/kafka-topics.log" 2>&1 &
        made+=($!)
    done
    wait "${made[@]}"

    write_config
    wait_port 12379 30
    wait_port 16379 30
    wait_port 17017 30
    for s in "${SERVICES[@]}"; do
        spawn "$s" "$BIN/$s" -c "$DIR/config" -i 0
    done
    wait_port 10002 60
    wait_port 10001 60
    # Ready when OpenIM's four consumer groups hold their partitions.
    local deadline=$((SECONDS + 90)) stable=0
    while [ "$stable" -lt 4 ]; do
        [ $SECONDS -lt $deadline ] || die "OpenIM's Kafka consumers did not join within 90 s (logs: $DIR/logs)"
        stable=$(java -cp "$cp" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server 127.0.0.1:19094 \
            --list --state Stable 2>/dev/null | grep -cE '^(redis|mongo|push|offlinePush) ' || true)
    done
}

stop() {
    [ -f "$DIR/pids" ] || return 0
    local pid name
    tac "$DIR/pids" | while read -r pid name; do
        if [ "$pid" = pg_ctl ]; then
            PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
            pg pg_ctl -D "$DIR/pg" -m immediate stop >/dev/null 2>&1 || true
        else
            kill "$pid" 2>/dev/null || true
        fi
    done
    # Whatever ignored its TERM for 10 s is killed.
    local deadline=$((SECONDS + 10))
    while read -r pid name; do
        [ "$pid" = pg_ctl ] && continue
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done <"$DIR/pids"
    rm -f "$DIR/pids"
}

[ $# -ge 2 ] || die "usage: stack.sh start DIR [OWNER_PID] | stack.sh stop DIR"
DIR=$(mkdir -p "$2" && cd "$2" && pwd)
OWNER=${3:-}
case $1 in
start) start ;;
stop) stop ;;
*) die "unknown command $1 (start or stop)" ;;
esac
