//! The terminal report: a summary line first, then tables with a unit on every number.
//! It formats a [`Report`] and computes nothing. Every string the run did not write itself
//! (names, error examples, notes) is shown through [`crate::untrusted`]: the report writes
//! no control character but its own line breaks, and its first line stays one line.

use std::fmt::Write;

use comfy_table::{presets, CellAlignment, Table};

use super::clocks::Clocks;
use super::effect::ChaosRow;
use super::findings::LITTLE_TOLERANCE;
use super::model::Report;
use super::present::{accounts, finding, ms, pct, thousands, verdict, RESUMES_WITHOUT_OFFSET};
use super::renderer::Renderer;
use super::sweep::{Knee, Sweep};
use super::tables::{
    check_rows, delivery_rows, latency_rows, presence_fanout, signal_rows, transport_rows,
    CheckResult, CHECKS_HEADER, DELIVERY_HEADER, LATENCY_HEADER, SIGNALS_HEADER, TRANSPORTS_HEADER,
};
use crate::error::Result;
use crate::metrics::{Counter, Hist};
use crate::untrusted::{line, quote};

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

/// The terminal format.
#[derive(Debug, Clone, Copy)]
pub struct Text;

impl Renderer<Report> for Text {
    fn render(&self, r: &Report) -> Result<String> {
        Ok(render(r))
    }
}

/// Renders the whole report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    summary(&mut out, r);
    connections(&mut out, r);
    if let Some(o) = &r.population {
        let users = r.generators.iter().map(|g| g.shard.users).sum::<u32>();
        let _ = writeln!(out, "\npopulation (as planned)");
        for line in super::population::lines(o, users) {
            let _ = writeln!(out, "  {line}");
        }
    }
    messages(&mut out, r);
    latencies(&mut out, r);
    if !r.split.is_empty() {
        let _ = writeln!(out, "\nwhere the shape matters");
        for line in super::split::lines(&r.split) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(c) = &r.clocks {
        clocks(&mut out, c);
    }
    delivery(&mut out, r);
    signals(&mut out, r);
    errors(&mut out, r);
    chaos(&mut out, r);
    for s in &r.sweeps {
        sweep(&mut out, s);
    }
    resources(&mut out, r);
    target_phases(&mut out, r);
    for n in &r.notes {
        let _ = writeln!(out, "note: {}", line(n));
    }
    for f in &r.findings {
        let _ = writeln!(out, "note: {}", finding(f));
    }
    if !r.checks.is_empty() {
        let mut t = table(&CHECKS_HEADER);
        for c in check_rows(r) {
            let result = match c.result {
                CheckResult::Pass => "pass",
                CheckResult::Fail(_) => "FAIL",
                CheckResult::Pending => "pending",
            };
            t.add_row(vec![
                quote(c.key).into_owned(),
                c.from,
                c.bound,
                c.measured,
                result.to_owned(),
            ]);
        }
        let _ = writeln!(out, "\n{t}");
    }
    out
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
        quote(&r.scenario),
        thousands(r.count(Counter::LoginOk)),
        thousands(r.count(Counter::Sent)),
        thousands(r.delivery.delivered),
        thousands(r.delivery.lost),
        r.duration_s,
        quote(&r.target),
        quote(&r.driver),
    );
    let _ = writeln!(
        out,
        "run {} started {}{}",
        quote(&r.run_id),
        quote(&r.started_at),
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
    let rows = transport_rows(r);
    if !rows.is_empty() {
        let mut t = table(&TRANSPORTS_HEADER);
        for row in rows {
            t.add_row(row.to_vec());
        }
        let _ = writeln!(out, "\n{t}");
    }
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
    let mut t = table(&LATENCY_HEADER);
    for row in latency_rows(r) {
        let label = row.label().to_owned();
        match row.cells {
            Some(cells) => t.add_row(std::iter::once(label).chain(cells).collect::<Vec<_>>()),
            None => t.add_row(vec![label, "not measured: no acceptance".to_owned()]),
        };
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
        quote(&c.reference)
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
    let mut t = table(&DELIVERY_HEADER);
    for row in delivery_rows(d) {
        t.add_row(row.to_vec());
    }
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
                quote(&e.detail)
            );
        }
    }
}

fn signals(out: &mut String, r: &Report) {
    if r.signals.is_empty() {
        return;
    }
    let mut t = table(&SIGNALS_HEADER);
    for row in signal_rows(r) {
        t.add_row(row.to_vec());
    }
    let _ = writeln!(out, "\n{t}");
    if let Some(line) = presence_fanout(r) {
        let _ = writeln!(out, "{line}");
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
            quote(e.examples.first().map_or("", String::as_str)).into_owned(),
        ]);
    }
    let _ = writeln!(out, "\n{t}");
}

/// Each chaos step: what it did, the latency and delivered rate before, during and after
/// it, and how long the service took to recover.
fn chaos(out: &mut String, r: &Report) {
    if r.chaos.is_empty() {
        return;
    }
    let mut t = table(&[
        "chaos step",
        "at",
        "what happened",
        "e2e p50 before → during",
        "e2e p99 during",
        "received/s before → during → after",
        "due during / after: lost, dup",
        "recovered",
    ]);
    for c in &r.chaos {
        t.add_row(chaos_row(c));
    }
    let _ = writeln!(out, "\n{t}");
    for c in &r.chaos {
        reconnect_storm(out, c);
    }
    for c in &r.chaos {
        let _ = writeln!(
            out,
            "{}: due during it {}; due after it {}",
            quote(&c.step.key),
            span_line(&c.during),
            span_line(&c.after)
        );
    }
    for c in r.chaos.iter().filter(|c| c.effect.logins > 0) {
        let _ = writeln!(
            out,
            "{}: {} logins from its start until recovery (users reconnecting)",
            quote(&c.step.key),
            thousands(c.effect.logins)
        );
    }
    for c in r.chaos.iter().filter(|c| !c.effect.errors.is_empty()) {
        let errors: Vec<String> = c
            .effect
            .errors
            .iter()
            .map(|(k, n)| format!("{} {}", quote(k), thousands(*n)))
            .collect();
        let _ = writeln!(
            out,
            "{}: errors from its start until recovery: {}",
            quote(&c.step.key),
            errors.join(", ")
        );
    }
}

/// One chaos step's row: when, what happened, latency and receipts around it, what it cost.
fn chaos_row(c: &ChaosRow) -> Vec<String> {
    let (s, e) = (&c.step, &c.effect);
    let at = match s.began_s {
        Some(b) if s.duration_s > 0.0 => format!("{b:.1} s for {:.1} s", s.duration_s),
        Some(b) => format!("{b:.1} s"),
        None => "—".to_owned(),
    };
    let mark = if s.ok { "" } else { "FAILED: " };
    vec![
        format!("{} {}", quote(&s.key), quote(&s.action)),
        at,
        format!("{mark}{}", quote(&s.outcome)),
        format!(
            "{} → {}",
            ms(e.before.e2e_p50_us as f64),
            ms(e.during.e2e_p50_us as f64)
        ),
        ms(e.during.e2e_p99_us as f64),
        format!(
            "{:.0} → {:.0} → {:.0}",
            e.before.received_per_s, e.during.received_per_s, e.after.received_per_s
        ),
        format!(
            "{}, {} / {}, {}",
            thousands(c.during.lost),
            thousands(c.during.duplicated),
            thousands(c.after.lost),
            thousands(c.after.duplicated)
        ),
        match e.recovery_s {
            Some(s) => format!("after {s:.1} s"),
            None => "not by the end".to_owned(),
        },
    ]
}

/// Whether `c` cut connections or took users offline, and how they came back.
fn reconnect_storm(out: &mut String, c: &ChaosRow) {
    let (before, fewest) = c.effect.online;
    if let (Some((cut, of)), true) = (c.step.cut, fewest >= before) {
        // Back within the second: the per-second count of users online never dipped,
        // but the step's own count of the connections carried did.
        let back = match c.step.back_after_s {
            Some(s) => format!("all {of} connections back after {s:.3} s"),
            None => format!("not all {of} back by the end of the run"),
        };
        if cut > 0 {
            let _ = writeln!(
                out,
                "{}: a reconnect storm of {cut}; {back}",
                quote(&c.step.key)
            );
        }
    } else if fewest < before {
        let back = match c.effect.back_online_s {
            Some(s) => format!("all back online {s:.1} s after its start"),
            None => "not all back by the end of the run".to_owned(),
        };
        let _ = writeln!(
            out,
            "{}: users online {before} → {fewest} (a reconnect storm of {}); {back}",
            quote(&c.step.key),
            before - fewest
        );
    }
}

/// `delivered N, lost N, duplicated N, reordered N, late N` of one span of a chaos step.
fn span_line(d: &crate::ledger::SpanDelivery) -> String {
    format!(
        "delivered {}, lost {}, duplicated {}, reordered {}, late {}",
        thousands(d.delivered),
        thousands(d.lost),
        thousands(d.duplicated),
        thousands(d.reordered),
        thousands(d.late)
    )
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
        let _ = writeln!(
            out,
            "\nREQUESTS {} ({})\n{t}",
            quote(&s.name),
            quote(&s.kind)
        );
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
        let _ = writeln!(out, "{}: {knee}", quote(&s.name));
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
            format!(
                "{}{}",
                quote(&p.name),
                if p.exited { " (exited)" } else { "" }
            ),
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
