//! The terminal report: a summary line first, then tables with a unit on every number.
//! It formats a [`Report`] and computes nothing.

use std::fmt::Write;

use comfy_table::{presets, CellAlignment, Table};

use super::checks::{CheckOutcome, Measure, NotMeasured, Origin, RunMetric, Unit};
use super::clocks::Clocks;
use super::findings::{Finding, LittleGap, LITTLE_TOLERANCE};
use super::model::{Accounts, Report, Verdict};
use super::sweep::{Knee, Sweep};
use crate::artifact::CheckMetric;
use crate::metrics::{Counter, ErrorKind, Hist};

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN);
    t.set_header(header.to_vec());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// The connections row of reconnects that could not resume their session.
pub const RESUMES_WITHOUT_OFFSET: &str = "reconnects without an offset (missed not fetchable)";

/// Account outcomes in one line, e.g. `12 created, 3 existed, 0 refused`.
pub fn accounts(a: &Accounts) -> String {
    format!(
        "{} created, {} existed, {} refused",
        thousands(a.created),
        thousands(a.existing),
        thousands(a.refused)
    )
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// µs → `12.34 ms`.
pub fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

/// `num ÷ den` as a percentage with two decimals, `–` when `den` is 0.
pub(super) fn pct(num: u64, den: u64) -> String {
    if den == 0 {
        "–".to_owned()
    } else {
        format!("{:.2}%", num as f64 * 100.0 / den as f64)
    }
}

/// Renders the whole report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    summary(&mut out, r);
    connections(&mut out, r);
    messages(&mut out, r);
    latencies(&mut out, r);
    if let Some(c) = &r.clocks {
        clocks(&mut out, c);
    }
    delivery(&mut out, r);
    errors(&mut out, r);
    for s in &r.sweeps {
        sweep(&mut out, s);
    }
    resources(&mut out, r);
    target_phases(&mut out, r);
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for f in &r.findings {
        let _ = writeln!(out, "note: {}", finding(f));
    }
    if !r.checks.is_empty() {
        let mut t = table(&["check", "from", "bound", "measured", "result"]);
        for c in &r.checks {
            let (bound, measured) = check(r, c);
            t.add_row(vec![
                c.key.clone(),
                origin(c),
                bound,
                measured,
                if c.passed { "pass" } else { "FAIL" }.to_owned(),
            ]);
        }
        let _ = writeln!(out, "\n{t}");
    }
    out
}

/// Where a check comes from: `scenario`, `built-in`, `relaxed (built-in <= 1.000%)`, `run`.
pub(super) fn origin(c: &CheckOutcome) -> String {
    match c.origin {
        Origin::Scenario => "scenario".to_owned(),
        Origin::BuiltIn => "built-in".to_owned(),
        Origin::Relaxed => match c.default_bound {
            Some(d) => format!("relaxed (built-in {} {})", c.op.symbol(), show(c.unit, d)),
            None => "relaxed".to_owned(),
        },
        Origin::Run => "run".to_owned(),
    }
}

fn summary(out: &mut String, r: &Report) {
    let verdict = verdict(r);
    let e2e_p99 = r
        .latency_us
        .get(&Hist::EndToEnd)
        .map_or_else(|| "–".to_owned(), |l| ms(l.p99 as f64));
    let _ = writeln!(
        out,
        "{verdict} — {}: {} logins, {} msgs sent, {} delivered, {} lost, e2e p99 {e2e_p99}, {:.1} s, {} ({})",
        r.scenario,
        thousands(r.count(Counter::LoginOk)),
        thousands(r.count(Counter::Sent)),
        thousands(r.delivery.delivered),
        thousands(r.delivery.lost),
        r.duration_s,
        r.target,
        r.driver,
    );
    let _ = writeln!(
        out,
        "run {} started {}{}",
        r.run_id,
        r.started_at,
        if r.generators.len() > 1 {
            format!(", {} generator processes", r.generators.len())
        } else {
            String::new()
        }
    );
}

fn connections(out: &mut String, r: &Report) {
    let c = &r.connections;
    let mut t = table(&["connections", "value"]);
    t.add_row(vec!["connect attempts".to_owned(), thousands(c.attempts)]);
    t.add_row(vec!["logins ok".to_owned(), thousands(c.logins_ok)]);
    t.add_row(vec![
        "login success".to_owned(),
        pct(c.logins_ok, c.attempts),
    ]);
    t.add_row(vec![
        "online peak (users)".to_owned(),
        thousands(c.online_peak),
    ]);
    t.add_row(vec!["disconnects".to_owned(), thousands(c.disconnects)]);
    t.add_row(vec![
        "syncs (catch-up + final verification)".to_owned(),
        thousands(c.syncs),
    ]);
    if let Some(a) = &c.accounts {
        t.add_row(vec![
            "accounts (created before login)".to_owned(),
            accounts(a),
        ]);
    }
    if let Some(n) = c.resumes_without_offset {
        t.add_row(vec![RESUMES_WITHOUT_OFFSET.to_owned(), thousands(n)]);
    }
    let _ = writeln!(out, "\n{t}");
}

fn messages(out: &mut String, r: &Report) {
    let c = |k: Counter| r.count(k);
    let rates = &r.rates;
    let mut t = table(&["messages", "count", "rate"]);
    let rate = |per_s: f64| format!("{per_s:.1} msg/s");
    let acc = if r.acceptance {
        thousands(c(Counter::Accepted))
    } else {
        "no acceptance in this protocol".to_owned()
    };
    t.add_row(vec![
        "sent".to_owned(),
        thousands(c(Counter::Sent)),
        rate(rates.sent_per_s),
    ]);
    t.add_row(vec!["accepted".to_owned(), acc, rate(rates.accepted_per_s)]);
    let (failed, tried) = crate::metrics::send_failures(c);
    t.add_row(vec![
        "refused / failed".to_owned(),
        thousands(failed),
        pct(failed, tried),
    ]);
    t.add_row(vec![
        "not sent (user offline when due)".to_owned(),
        thousands(c(Counter::Dropped)),
        String::new(),
    ]);
    t.add_row(vec![
        "received".to_owned(),
        thousands(c(Counter::Received)),
        rate(rates.received_per_s),
    ]);
    t.add_row(vec![
        "requests / replies".to_owned(),
        format!(
            "{} / {}",
            thousands(c(Counter::Requests)),
            thousands(c(Counter::Replies))
        ),
        rate(rates.replies_per_s),
    ]);
    let _ = writeln!(
        out,
        "\n{t}  (rates over {:.0} s of traffic)",
        rates.window_s
    );
}

fn latencies(out: &mut String, r: &Report) {
    let mut t = table(&[
        "latency", "count", "p50", "p95", "p99", "p99.9", "max", "mean",
    ]);
    for (h, label) in [
        (Hist::Connect, "connect (handshake)"),
        (Hist::Login, "login"),
        (Hist::SendAck, "send → ack"),
        (Hist::EndToEnd, "end-to-end (due → received)"),
        (Hist::Fanout, "group fan-out (due → last online member)"),
        (Hist::SendLag, "send lag (due → written)"),
        (Hist::Request, "request round trip"),
    ] {
        if h == Hist::SendAck && !r.acceptance {
            t.add_row(vec![
                label.to_owned(),
                "not measured: no acceptance".to_owned(),
            ]);
            continue;
        }
        let Some(l) = r.latency_us.get(&h) else {
            continue;
        };
        // Across hosts, a latency within the clocks' uncertainty is no measurement.
        let blur = match (h, r.clocks.as_ref().and_then(|c| c.uncertainty_us)) {
            (Hist::EndToEnd | Hist::Fanout, Some(u)) if u > 0 => u,
            _ => 0,
        };
        let q = |us: u64| {
            if us < blur {
                format!("~0 ±{}", ms(blur as f64))
            } else {
                ms(us as f64)
            }
        };
        t.add_row(vec![
            label.to_owned(),
            thousands(l.count),
            q(l.p50),
            q(l.p95),
            q(l.p99),
            q(l.p999),
            q(l.max),
            ms(l.mean),
        ]);
    }
    let _ = writeln!(out, "\n{t}");
}

/// The generators' clock offsets and what they mean for cross-shard latency.
fn clocks(out: &mut String, c: &Clocks) {
    let signed = |us: i64| {
        format!(
            "{}{}",
            if us < 0 { "-" } else { "+" },
            ms(us.unsigned_abs() as f64)
        )
    };
    let _ = writeln!(
        out,
        "\nclocks: every shard's times are on the reference clock ({})",
        c.reference
    );
    for s in c.shards.iter().filter(|s| s.index != 0 || s.offset_us != 0) {
        let drift = s.drift_us.map_or("drift unknown".to_owned(), |d| {
            format!("drift {}", signed(d))
        });
        let _ = writeln!(
            out,
            "  shard {}: offset {} ±{}, {drift}",
            s.index,
            signed(s.offset_us),
            ms(s.uncertainty_us as f64)
        );
    }
    if let Some(u) = c.uncertainty_us {
        let _ = writeln!(
            out,
            "  end-to-end and fan-out latency across shards are known to ±{}; values below \
             it show as ~0",
            ms(u as f64)
        );
    }
    if !c.unknown.is_empty() {
        let list: Vec<String> = c.unknown.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "  shard(s) {} have no clock estimate at the end (drift unknown): their {} \
             cross-shard end-to-end latencies are left out of the latency figures and checks \
             (the per-second charts and fan-out latency still include them)",
            list.join(", "),
            thousands(c.excluded)
        );
    }
}

fn delivery(out: &mut String, r: &Report) {
    let d = &r.delivery;
    let mut t = table(&["delivery", "count", "share of expected"]);
    let row = |t: &mut Table, label: &str, n: u64| {
        t.add_row(vec![label.to_owned(), thousands(n), pct(n, d.expected)]);
    };
    row(
        &mut t,
        "expected (sampled streams × recipients)",
        d.expected,
    );
    row(&mut t, "delivered intact", d.delivered);
    row(&mut t, "  live push", d.via_push);
    row(&mut t, "  sync after login", d.via_sync);
    row(&mut t, "  repaired by final sync", d.repaired);
    row(&mut t, "lost", d.lost);
    if d.unverified > 0 {
        row(
            &mut t,
            "unverified (recipient never logged in)",
            d.unverified,
        );
    }
    row(&mut t, "duplicated", d.duplicated);
    row(&mut t, "reordered", d.reordered);
    row(&mut t, "corrupted", d.corrupted);
    row(&mut t, "late", d.late);
    row(&mut t, "damaged (unattributable)", d.damaged);
    row(&mut t, "unexpected recipient", d.unexpected);
    let _ = writeln!(
        out,
        "\n{t}  ({} streams, {} stream × recipient tracks)",
        thousands(d.streams),
        thousands(d.tracks)
    );
    if !d.examples.is_empty() {
        let _ = writeln!(out, "examples:");
        for e in &d.examples {
            let _ = writeln!(
                out,
                "  {:<10} stream {} → user #{} seq {}: {}",
                e.kind.name(),
                e.stream,
                e.recipient,
                e.seq,
                e.detail
            );
        }
    }
}

fn errors(out: &mut String, r: &Report) {
    if r.errors.is_empty() {
        return;
    }
    let mut t = table(&["error", "count", "meaning", "example"]);
    for (kind, e) in &r.errors {
        t.add_row(vec![
            kind.name().to_owned(),
            thousands(e.count),
            kind.describe().to_owned(),
            e.examples.first().cloned().unwrap_or_default(),
        ]);
    }
    let _ = writeln!(out, "\n{t}");
}

fn sweep(out: &mut String, s: &Sweep) {
    let mut t = table(&[
        "concurrency",
        "TPS (req/s)",
        "RT mean",
        "RT p99",
        "TPS × RT (Little)",
        "Little's law",
        "errors",
    ]);
    for row in &s.rows {
        let c = f64::from(row.concurrency);
        let off = (row.little - c) / c.max(1.0);
        let law = if off.abs() <= LITTLE_TOLERANCE {
            format!("holds ({:+.0}%)", off * 100.0)
        } else {
            format!("off by {:+.0}%", off * 100.0)
        };
        t.add_row(vec![
            thousands(u64::from(row.concurrency)),
            format!("{:.0}", row.tps),
            ms(row.rt_mean_us),
            ms(row.rt_p99_us as f64),
            format!("{:.0}", row.little),
            law,
            thousands(row.errors),
        ]);
    }
    if s.name.is_empty() {
        let _ = writeln!(out, "\n{t}");
    } else {
        let _ = writeln!(out, "\nREQUESTS {} ({})\n{t}", s.name, s.kind);
    }
    let knee = match s.knee {
        Knee::OneStep => "one step only: add a sweep to find the knee".to_owned(),
        Knee::StillGrowing { concurrency, tps } => format!(
            "throughput still grows at concurrency {concurrency} ({tps:.0} req/s): the knee is \
             further out"
        ),
        Knee::At {
            concurrency,
            tps,
            rt_mean_us,
        } => format!(
            "knee at concurrency {concurrency}: {tps:.0} req/s at {:.2} ms mean; more \
             concurrency only adds latency (Little's law: RT ≈ concurrency ÷ TPS). High RT \
             with idle server CPU means too few workers in front of the backend.",
            rt_mean_us / 1000.0
        ),
    };
    if s.name.is_empty() {
        let _ = writeln!(out, "{knee}");
    } else {
        let _ = writeln!(out, "{}: {knee}", s.name);
    }
}

fn resources(out: &mut String, r: &Report) {
    let mut t = table(&[
        "generator",
        "users",
        "CPU",
        "of cores",
        "peak RSS",
        "RSS/user",
        "fd limit",
    ]);
    for g in &r.generators {
        let s = &g.shard;
        t.add_row(vec![
            format!("shard {}/{}", s.index, s.count),
            thousands(u64::from(s.users)),
            format!("{:.1} s", s.cpu_s),
            format!("{:.0}% of {}", g.busy_pct, s.cores),
            format!("{:.1} MiB", s.peak_rss_bytes as f64 / 1048576.0),
            format!("{:.1} KiB", g.rss_per_user_bytes / 1024.0),
            thousands(s.fd_limit),
        ]);
    }
    let _ = writeln!(out, "\n{t}");
    if r.processes.is_empty() {
        return;
    }
    let mut t = table(&[
        "process",
        "pid",
        "CPU avg",
        "CPU peak",
        "RSS peak",
        "threads",
        "open files",
    ]);
    for p in &r.processes {
        t.add_row(vec![
            format!("{}{}", p.name, if p.exited { " (exited)" } else { "" }),
            p.pid.to_string(),
            format!("{:.0}% of a core", p.cpu_avg_pct),
            format!("{:.0}%", p.cpu_peak_pct),
            format!("{:.1} MiB", p.rss_peak_bytes as f64 / 1048576.0),
            thousands(p.threads_peak),
            thousands(p.fds_peak),
        ]);
    }
    let _ = writeln!(out, "\n{t}");
}

/// The watched target by phase (W1's "server idle" and "server under load" tables).
fn target_phases(out: &mut String, r: &Report) {
    let phases = super::phases::of(r);
    if phases.is_empty() {
        return;
    }
    let mut t = table(&[
        "target by phase",
        "seconds",
        "online",
        "msg/s sent",
        "in (to target)",
        "out (from target)",
        "target CPU",
        "target RSS",
    ]);
    let mbit =
        |b: Option<f64>| b.map_or("–".to_owned(), |b| format!("{:.2} Mbit/s", b * 8.0 / 1e6));
    for p in &phases {
        t.add_row(vec![
            p.name.to_owned(),
            p.seconds.to_string(),
            thousands(p.online),
            format!("{:.0}", p.sent_per_s),
            mbit(p.in_bytes_per_s),
            mbit(p.out_bytes_per_s),
            p.cpu_pct
                .map_or("–".to_owned(), |c| format!("{c:.1}% of a core")),
            p.rss_bytes.map_or("–".to_owned(), |b| {
                format!("{:.1} MiB", b as f64 / 1048576.0)
            }),
        ]);
    }
    let _ = writeln!(
        out,
        "\n{t}\n(in/out: TCP payload of the target's sockets — framing and TLS included, TCP/IP \
         headers not; CPU and memory summed over the watched target processes)"
    );
}

/// A finding as the sentence of a note.
pub(super) fn finding(f: &Finding) -> String {
    match f {
        Finding::Generator { errors, example } => format!(
            "the generator ran out of its own resources {errors} time{} (local ports or \
             addresses, file descriptors, socket buffers or memory, or a name it could not \
             resolve): not the server's failures, and the users they hit measured nothing of \
             it. Give it more (`ulimit -n`, `[target] source_addresses`, shards) and run \
             again. First: {example}",
            if *errors == 1 { "" } else { "s" }
        ),
        Finding::SendLag { p99_us } => format!(
            "the generator fell behind its schedule: send lag p99 {:.1} ms (latencies still \
             count from the due time)",
            *p99_us as f64 / 1000.0
        ),
        Finding::LittleBelow { steps } => format!(
            "Little's law does not hold at concurrency {}: TPS × mean RT is more than {:.0}% \
             below the concurrency, so fewer requests were in flight than users. Likely causes: \
             time between a reply and the user's next request (the generator's own turnaround \
             is outside the measured RT, which matters when RT is short), a ramp or warm-up \
             inside the step, failed requests, or a generator too busy to keep every request \
             outstanding (see its CPU). These steps' TPS and RT are not those of their \
             concurrency",
            gaps(steps),
            LITTLE_TOLERANCE * 100.0
        ),
        Finding::LittleAbove { steps } => format!(
            "Little's law does not hold at concurrency {}: TPS × mean RT is more than {:.0}% \
             above the concurrency, so more requests were in flight than users. Likely causes: \
             requests overlapping (a user sending again before its reply, e.g. after a \
             timeout), or replies and round trips of another step counted in this one. These \
             steps' TPS and RT are not those of their concurrency",
            gaps(steps),
            LITTLE_TOLERANCE * 100.0
        ),
        Finding::Saturated {
            embedded_server: true,
            pid,
            cores,
            from_sec,
            cpu_pct,
            ..
        } => format!(
            "the generator process (pid {pid}), which also ran the embedded reference server, \
             used all {cores} cores from second {from_sec} ({cpu_pct:.0}% of one core): neither \
             side's capacity can be read from this run; run `msgstorm serve` separately (its \
             own cores or host) and give the scenario a [target]"
        ),
        Finding::Saturated {
            process,
            pid,
            generator,
            cores,
            from_sec,
            cpu_pct,
            ..
        } => format!(
            "{process} (pid {pid}) used all {cores} cores from second {from_sec} ({cpu_pct:.0}% \
             of one core): {} was the bottleneck there",
            if *generator {
                "the generator itself"
            } else {
                "this target process"
            }
        ),
    }
}

/// `4 (0.8 in flight), 16 (7.2 in flight)`.
fn gaps(steps: &[LittleGap]) -> String {
    let each: Vec<String> = steps
        .iter()
        .map(|g| {
            format!(
                "{} ({:.1} in flight){}",
                thousands(u64::from(g.concurrency)),
                g.in_flight,
                if g.pattern.is_empty() {
                    String::new()
                } else {
                    format!(" in {}", g.pattern)
                }
            )
        })
        .collect();
    each.join(", ")
}

/// `2 of 3 shards: missing shard 1`.
pub(super) fn shards_present(r: &Report) -> String {
    let count = r.generators.len() + r.missing_shards.len();
    let missing: Vec<String> = r.missing_shards.iter().map(u32::to_string).collect();
    format!(
        "{} of {count} shards: missing shard{} {}",
        r.generators.len(),
        if missing.len() == 1 { "" } else { "s" },
        missing.join(", ")
    )
}

/// The verdict as the report's first words, with why each failed check failed:
/// `PASS (3 checks)`, `FAIL: checks.max_lost: 3 lost (bound <= 0)`, ….
pub(super) fn verdict(r: &Report) -> String {
    let failed = || {
        let names: Vec<String> = r
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| match &c.reason {
                // `INCOMPLETE: 1 of 2 shards…` says it already.
                Some(why) if c.metric != Measure::Run(RunMetric::Shards) => {
                    format!("{}: {why}", c.key)
                }
                _ => c.key.clone(),
            })
            .collect();
        format!("FAIL: {}", names.join("; "))
    };
    match r.verdict {
        Verdict::Interrupted => "INTERRUPTED".to_owned(),
        Verdict::Pass => format!("PASS ({} checks)", r.checks.len()),
        Verdict::Fail => failed(),
        Verdict::Incomplete => format!("INCOMPLETE: {}; {}", shards_present(r), failed()),
    }
}

/// A check's bound and what was measured, with units.
pub(super) fn check(r: &Report, c: &CheckOutcome) -> (String, String) {
    match c.metric {
        Measure::Check(_) => {
            let measured = match (c.value, c.not_measured) {
                (Some(v), _)
                    if c.metric == Measure::Check(CheckMetric::Lost)
                        && r.delivery.unverified > 0 =>
                {
                    format!(
                        "{} + {} unverified (recipients never logged in)",
                        show(c.unit, v),
                        thousands(r.delivery.unverified)
                    )
                }
                (Some(v), _) => show(c.unit, v),
                (None, Some(NotMeasured::NoAcceptance)) => {
                    "not measured: the protocol has no acceptance".to_owned()
                }
                (None, _) => "not measured: no samples".to_owned(),
            };
            (
                format!("{} {}", c.op.symbol(), show(c.unit, c.bound)),
                measured,
            )
        }
        Measure::Run(RunMetric::Logins) => {
            let first = r.errors.iter().next().map_or_else(String::new, |(k, e)| {
                format!(
                    ": {} ({})",
                    k.name(),
                    e.examples.first().map_or("", String::as_str)
                )
            });
            (
                "at least one user logs in".to_owned(),
                format!("none of {} attempts{first}", r.connections.attempts),
            )
        }
        Measure::Run(RunMetric::Shards) => (
            format!("all {:.0} shards of the run", c.bound),
            shards_present(r),
        ),
        Measure::Run(RunMetric::Interrupted) => (
            "the run ends on its own".to_owned(),
            "interrupted by a signal".to_owned(),
        ),
        Measure::Run(RunMetric::EngineErrors) => {
            let example = r
                .errors
                .get(&ErrorKind::Engine)
                .and_then(|e| e.examples.first())
                .map_or_else(String::new, |ex| format!(": {ex}"));
            (
                "no user task of the generator fails".to_owned(),
                format!(
                    "{} failed{example}",
                    thousands(c.value.map_or(0, |n| n as u64))
                ),
            )
        }
    }
}

/// A value with its unit.
pub(super) fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Count => format!("{v:.0}"),
        Unit::Micros => ms(v),
        Unit::Ratio => format!("{:.3}%", v * 100.0),
    }
}
