#!/usr/bin/env bash
# W1 S1/S2 and W2 T1/T2 against OpenIM v3.8.3 (peers/openim, built by scripts/test):
# starts the stack, registers each scenario's users and groups (examples/openim_setup),
# runs it with OpenIM's processes monitored, stops the stack.
#   bench/openim/run.sh [OUT]      (default /tmp/msgstorm-openim-bench; NAMES="…" for some)
# Results: OUT/NAME/result.json and OUT/NAME.txt; the stack's logs in OUT/stack/logs.
# Written up in bench/results/2026-11-28-openim.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
MSGSTORM=${MSGSTORM:-target/debug/msgstorm}
OUT=$(mkdir -p "${1:-/tmp/msgstorm-openim-bench}" && cd "${1:-/tmp/msgstorm-openim-bench}" && pwd)
DIR=$OUT/stack
rm -rf "$DIR"
trap 'peers/openim/stack.sh stop "$DIR"' EXIT
peers/openim/stack.sh start "$DIR"
# The server's processes, for the report's per-process table (PostgreSQL runs under pg_ctl).
pids=$(grep -v '^pg_ctl' "$DIR/pids" | cut -d' ' -f1 | paste -sd, -)
work=$OUT/scenarios
mkdir -p "$work"
cp -r scenarios/openim.lua scenarios/openim "$work/"
cargo build -q --example openim_setup
for name in ${NAMES:-openim-w1-s1 openim-w1-s2 openim-w2-t1 openim-w2-t2}; do
    cp "scenarios/$name.toml" "$work/"
    target/debug/examples/openim_setup "$work/$name.toml" >>"$work/$name.toml"
    "$MSGSTORM" run "$work/$name.toml" --out "$OUT/$name" --set "monitor.pids=[$pids]" \
        >"$OUT/$name.txt" 2>&1 || true
    head -n 1 "$OUT/$name.txt"
done
