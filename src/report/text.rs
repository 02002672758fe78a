//! The terminal report: a summary line first, then tables with a unit on every number.

use std::fmt::Write;

use comfy_table::{presets, CellAlignment, Table};

use super::checks::CheckResult;
use super::sweep::SweepRow;
use crate::artifact::Artifact;
use crate::ledger::Delivery;
use crate::metrics::{Counter, Hist};

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

fn pct(num: u64, den: u64) -> String {
    if den == 0 {
        "–".to_owned()
    } else {
        format!("{:.2}%", num as f64 * 100.0 / den as f64)
    }
}

/// Renders the whole report.
pub fn render(a: &Artifact, d: &Delivery, checks: &[CheckResult], sweep: &[SweepRow]) -> String {
    let m = &a.metrics;
    let c = |k: Counter| m.count(k);
    let failed: Vec<&CheckResult> = checks.iter().filter(|r| !r.passed).collect();
    let verdict = if a.interrupted {
        "INTERRUPTED".to_owned()
    } else if failed.is_empty() {
        format!("PASS ({} checks)", checks.len())
    } else {
        let names: Vec<&str> = failed.iter().map(|r| r.key.as_str()).collect();
        format!("FAIL: {}", names.join(", "))
    };
    let e2e = m.hist(Hist::EndToEnd);
    let e2e_p99 = if !e2e.is_empty() {
        ms(e2e.value_at_quantile(0.99) as f64)
    } else {
        "–".to_owned()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{verdict} — {}: {} logins, {} msgs sent, {} delivered, {} lost, e2e p99 {e2e_p99}, {:.1} s, {} ({})",
        a.scenario,
        thousands(c(Counter::LoginOk)),
        thousands(c(Counter::Sent)),
        thousands(d.delivered),
        thousands(d.lost),
        a.duration_s,
        a.target,
        a.driver,
    );
    let _ = writeln!(
        out,
        "run {} started {}{}",
        a.run_id,
        a.started_at,
        if a.shards.len() > 1 {
            format!(", {} generator processes", a.shards.len())
        } else {
            String::new()
        }
    );

    let window = active_seconds(a);
    let mut t = table(&["connections", "value"]);
    let online_peak = m.seconds().map(|s| s.online).max().unwrap_or(0);
    t.add_row(vec![
        "connect attempts".to_owned(),
        thousands(c(Counter::ConnectAttempts)),
    ]);
    t.add_row(vec!["logins ok".to_owned(), thousands(c(Counter::LoginOk))]);
    t.add_row(vec![
        "login success".to_owned(),
        pct(c(Counter::LoginOk), c(Counter::ConnectAttempts)),
    ]);
    t.add_row(vec![
        "online peak (users)".to_owned(),
        thousands(online_peak),
    ]);
    t.add_row(vec![
        "disconnects".to_owned(),
        thousands(c(Counter::Disconnects)),
    ]);
    t.add_row(vec![
        "syncs (catch-up + final verification)".to_owned(),
        thousands(c(Counter::Syncs)),
    ]);
    let _ = writeln!(out, "\n{t}");

    let mut t = table(&["messages", "count", "rate"]);
    let rate = |n: u64| format!("{:.1} msg/s", n as f64 / window.max(1.0));
    let acc = if a.acceptance {
        thousands(c(Counter::Accepted))
    } else {
        "no acceptance in this protocol".to_owned()
    };
    t.add_row(vec![
        "sent".to_owned(),
        thousands(c(Counter::Sent)),
        rate(c(Counter::Sent)),
    ]);
    t.add_row(vec!["accepted".to_owned(), acc, rate(c(Counter::Accepted))]);
    t.add_row(vec![
        "refused / failed".to_owned(),
        thousands(c(Counter::Refused) + c(Counter::SendErrors)),
        pct(
            c(Counter::Refused) + c(Counter::SendErrors),
            c(Counter::Sent),
        ),
    ]);
    t.add_row(vec![
        "not sent (user offline when due)".to_owned(),
        thousands(c(Counter::Dropped)),
        String::new(),
    ]);
    t.add_row(vec![
        "received".to_owned(),
        thousands(c(Counter::Received)),
        rate(c(Counter::Received)),
    ]);
    t.add_row(vec![
        "requests / replies".to_owned(),
        format!(
            "{} / {}",
            thousands(c(Counter::Requests)),
            thousands(c(Counter::Replies))
        ),
        rate(c(Counter::Replies)),
    ]);
    let _ = writeln!(out, "\n{t}  (rates over {window:.0} s of traffic)");

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
        let hist = m.hist(h);
        if h == Hist::SendAck && !a.acceptance {
            t.add_row(vec![
                label.to_owned(),
                "not measured: no acceptance".to_owned(),
            ]);
            continue;
        }
        if hist.is_empty() {
            continue;
        }
        let q = |p: f64| ms(hist.value_at_quantile(p) as f64);
        t.add_row(vec![
            label.to_owned(),
            thousands(hist.len()),
            q(0.5),
            q(0.95),
            q(0.99),
            q(0.999),
            ms(hist.max() as f64),
            ms(hist.mean()),
        ]);
    }
    let _ = writeln!(out, "\n{t}");

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

    let errors: Vec<_> = m.errors().collect();
    if !errors.is_empty() {
        let mut t = table(&["error", "count", "meaning", "example"]);
        for (kind, n, examples) in errors {
            t.add_row(vec![
                kind.name().to_owned(),
                thousands(n),
                kind.describe().to_owned(),
                examples.first().cloned().unwrap_or_default(),
            ]);
        }
        let _ = writeln!(out, "\n{t}");
    }

    if !sweep.is_empty() {
        let mut t = table(&[
            "concurrency",
            "TPS (req/s)",
            "RT mean",
            "RT p99",
            "TPS × RT (Little)",
            "errors",
        ]);
        for r in sweep {
            t.add_row(vec![
                thousands(u64::from(r.concurrency)),
                format!("{:.0}", r.tps),
                ms(r.rt_mean_us),
                ms(r.rt_p99_us as f64),
                format!("{:.0}", r.little),
                thousands(r.errors),
            ]);
        }
        let _ = writeln!(out, "\n{t}");
        let _ = writeln!(out, "{}", super::sweep::verdict(sweep));
    }

    let mut t = table(&[
        "generator",
        "users",
        "CPU",
        "of cores",
        "peak RSS",
        "RSS/user",
        "fd limit",
    ]);
    for s in &a.shards {
        let busy = if s.duration_s > 0.0 {
            s.cpu_s / s.duration_s / f64::from(s.cores.max(1)) * 100.0
        } else {
            0.0
        };
        t.add_row(vec![
            format!("shard {}/{}", s.index, s.count),
            thousands(u64::from(s.users)),
            format!("{:.1} s", s.cpu_s),
            format!("{busy:.0}% of {}", s.cores),
            format!("{:.1} MiB", s.peak_rss_bytes as f64 / 1048576.0),
            format!(
                "{:.1} KiB",
                s.peak_rss_bytes as f64 / 1024.0 / f64::from(s.users.max(1))
            ),
            thousands(s.fd_limit),
        ]);
    }
    let _ = writeln!(out, "\n{t}");
    if !a.processes.is_empty() {
        let mut t = table(&[
            "process",
            "pid",
            "CPU avg",
            "CPU peak",
            "RSS peak",
            "threads",
            "open files",
        ]);
        for p in &a.processes {
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
    for n in &a.notes {
        let _ = writeln!(out, "note: {n}");
    }

    if !checks.is_empty() {
        let mut t = table(&["check", "bound", "measured", "result"]);
        for r in checks {
            t.add_row(vec![
                r.key.clone(),
                r.bound.clone(),
                r.measured.clone(),
                if r.passed { "pass" } else { "FAIL" }.to_owned(),
            ]);
        }
        let _ = writeln!(out, "\n{t}");
    }
    out
}

/// Seconds during which messages were sent (at least 1).
fn active_seconds(a: &Artifact) -> f64 {
    let active: Vec<u32> = a
        .metrics
        .seconds()
        .filter(|s| s.count(Counter::Sent) > 0 || s.count(Counter::Replies) > 0)
        .map(|s| s.sec)
        .collect();
    match (active.first(), active.last()) {
        (Some(first), Some(last)) => f64::from(last - first + 1),
        _ => 1.0,
    }
}
