# Shared by the live benches: `msgstorm serve` in its own process, a scenario of 10,000 users
# (5,000 direct senders → 5,000 receivers, 1,000 msg/s) against it, and a process's CPU time.
# Source it after `cd` to the repository; it builds the release binary and sets $bin, $work,
# $serve_port and $secret, and kills `serve` and $run on exit.
cargo build --release --quiet
bin=target/release/msgstorm
work=$(mktemp -d)
serve_port=17790
secret=bench-secret
"$bin" serve --listen "127.0.0.1:$serve_port" --secret "$secret" --durability normal \
    >"$work/serve.log" 2>&1 &
serve=$!
run=
trap 'kill $serve $run 2>/dev/null; rm -rf "$work"' EXIT
ticks=$(getconf CLK_TCK)

# scenario SECONDS: the scenario file, traffic lasting SECONDS.
scenario() {
    cat >"$work/s.toml" <<TOML
name = "live-cost"
seed = 1
drain = "2s"

[target]
url = "ws://127.0.0.1:$serve_port/ws"

[target.auth]
secret = "$secret"

[population]
users = 10000
login_rate = 2000

[[traffic]]
kind = "direct"
senders = 5000
receivers = 5000
rate = 1000
duration = "${1}s"
TOML
    echo "$work/s.toml"
}

# cpu PID: CPU seconds the process used so far.
cpu() { awk -v t="$ticks" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }

# measure NAME PER_SECOND URL: the generator's ($run's) CPU over $window seconds while URL
# is fetched PER_SECOND times a second (0: not at all).
measure() {
    local before after n=0 start took
    before=$(cpu "$run")
    start=$(date +%s.%N)
    if [ "$2" = 0 ]; then
        sleep "$window"
    else
        local gap
        gap=$(awk -v r="$2" 'BEGIN { printf "%.3f", 1 / r }')
        while awk -v s="$start" -v w="$window" -v now="$(date +%s.%N)" 'BEGIN { exit !(now - s < w) }'; do
            curl -s -o /dev/null "$3" && n=$((n + 1))
            sleep "$gap"
        done
    fi
    after=$(cpu "$run")
    took=$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { printf "%.2f", now - s }')
    awk -v a="$before" -v b="$after" -v d="$took" -v n="$n" -v name="$1" \
        'BEGIN { printf "%s\t%d requests\t%.2f s\tgenerator CPU %.4f cores\n", name, n, d, (b - a) / d }'
}

# burst N URL: N fetches of URL back to back, then a quiet window for the baseline; prints
# the generator CPU one fetch costs (the burst's CPU minus the baseline over its length).
burst() {
    local before after start
    before=$(cpu "$run")
    start=$(date +%s.%N)
    for _ in $(seq 1 "$1"); do curl -s -o /dev/null "$2"; done
    after=$(cpu "$run")
    measure none 0 >"$work/baseline"
    awk -v a="$before" -v b="$after" -v s="$start" -v e="$(date +%s.%N)" -v n="$1" \
        -v base="$(awk '{ print $(NF-1) }' "$work/baseline")" -v w="$window" 'BEGIN {
            d = (e - s) - w;   # the burst alone (the baseline window ran after it)
            per = ((b - a) - base * d) / n;
            printf "burst\t%d requests in %.2f s\tCPU %.3f s, baseline %.4f cores\n", n, d, b - a, base;
            printf "one request: %.2f ms of generator CPU; at one a second %.3f%% of one core\n", per * 1000, per * 100
        }'
    cat "$work/baseline"
    curl -s "$2" | wc -c | awk '{ print "one answer: " $1 " bytes" }'
    for _ in 1 2 3 4 5; do
        curl -s -o /dev/null -w '%{time_total}\n' "$2"
    done | awk '{ s += $1 } END { printf "round trip: %.2f ms mean of 5\n", s / NR * 1000 }'
}
