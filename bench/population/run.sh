#!/usr/bin/env bash
# A 10,000-user compressed day with a reconnect storm (bench/population/day-10k.toml)
# against `msgstorm serve` in its own process: the exact ledger, the split where the shape
# matters, and the offered shape against the asked one (logins per 10 s of the day planned
# vs succeeded; the activity exponent fitted back from the planned sends' top shares).
# Prints a Markdown section for bench/results/. Not a test: run by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -n "${SKIP_BUILD:-}" ] || cargo build --release -q --bin msgstorm
bin=target/release/msgstorm
work=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT

$bin serve --listen 127.0.0.1:7837 --secret pop --max-body 65536 2>"$work/serve.log" &
srv=$!
sleep 1
start=$(date +%s)
/usr/bin/time -f "generator: wall %e s, maxrss %M kB" \
    $bin run bench/population/day-10k.toml --out "$work/out" -q >"$work/report.txt" 2>"$work/time.txt" \
    || echo "(msgstorm run exited $?)"
echo "## 10,000 users, a 2-minute day, every connection cut at 60 s"
echo
echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB;"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d), $(( $(date +%s) - start )) s."
echo "Command: \`bench/population/run.sh\` (release build; \`msgstorm serve\` in its own process)."
echo
echo '```text'
head -1 "$work/report.txt"
grep -A8 '^where the shape matters' "$work/report.txt" || true
cat "$work/time.txt"
echo '```'
python3 - "$work/out/result.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
o = a["population"]
start = a["traffic_started_s"]
secs = {s["sec"]: s.get("counters", {}).get("login_ok", 0) for s in a["metrics"]["seconds"]}
day = o["day_ms"] / 1000
b = day / len(o["logins"])
print("\nlogins per 10 s of the day (planned | succeeded; the storm at 60 s):\n")
print("| s | planned | succeeded |\n|---|---|---|")
for k in range(int(day // 10)):
    p = sum(n for i, n in enumerate(o["logins"]) if k * 10 <= i * b < k * 10 + 10)
    g = sum(n for s, n in secs.items() if k * 10 <= s + 0.5 - start < k * 10 + 10)
    print(f"| {k*10}–{k*10+10} | {p} | {g} |")
users = 10000
def share(s, f):
    top = max(1, int(users * f + 0.999))
    w = [k ** -s for k in range(1, users + 1)]
    return sum(w[:top]) / sum(w)
import math
pts = [(f, sh) for f, sh in o["top_shares"] if f <= 0.2]
err = lambda s: sum((math.log(share(s, f)) - math.log(sh)) ** 2 for f, sh in pts)
fit = min((i / 50 for i in range(0, 151)), key=err)
print(f"\nactivity exponent asked 1.0, fitted back from the top shares {pts}: {fit:.2f}")
c = a["chaos"][0]
print(f"storm: {c.get('cut')} connections cut, back after {c.get('back_after_s')} s")
PY
