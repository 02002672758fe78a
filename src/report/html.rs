//! The HTML report (`report.html`): one self-contained page — inline CSS, inline SVG charts,
//! a few lines of inline script for a cross-hair shared by the time charts — that opens
//! from disk or a CI artifact store with no network. It formats a [`Report`] and computes
//! nothing but the charts' downsampling.
//!
//! Order: the verdict and the checks, what bounded the run, the run over time (users,
//! messages, latencies, errors, every monitored process, scraped server metrics — all on one
//! time axis), the latency distribution, delivery, errors, the sweep, resources, and the
//! scenario as run.
//!
//! Text from outside msgstorm is escaped for HTML, and shown through [`crate::untrusted`]
//! first (its control characters and bidirectional overrides as visible escapes), as in
//! every other format — the live page included, which renders through here. The scenario
//! as run is the user's own file, shown as it is.

pub mod chart;
pub mod page;
pub mod shape;
pub mod timeline;

use std::fmt::Write;

use chart::{Chart, Line, XAxis, YUnit};
use page::{section, table};

use super::model::{Report, Verdict};
use super::present::{self, ms, pct, thousands};
use super::renderer::Renderer;
use super::sweep::Knee;
use super::tables::{
    check_rows, delivery_rows, latency_rows, live_delivery_rows, presence_fanout, signal_rows,
    transport_rows, CheckResult, CHECKS_HEADER, LATENCY_HEADER, SIGNALS_HEADER, TRANSPORTS_HEADER,
};
use crate::error::Result;
use crate::metrics::{Counter, Hist};
use crate::untrusted::{line, quote};

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The HTML format.
#[derive(Debug, Clone, Copy)]
pub struct Html;

impl Renderer<Report> for Html {
    fn render(&self, r: &Report) -> Result<String> {
        Ok(render(r))
    }
}

/// Renders the whole page.
pub fn render(r: &Report) -> String {
    let title = match &r.live {
        Some(l) => format!(
            "{} — running: {} {:.0} s",
            quote(&r.scenario),
            l.phase,
            l.elapsed_s
        ),
        None => format!("{} — {}", quote(&r.scenario), present::verdict(r)),
    };
    let mut body = String::new();
    header(&mut body, r);
    checks(&mut body, r);
    findings(&mut body, r);
    timeline::section(&mut body, r);
    shape::section_of(&mut body, r);
    distribution(&mut body, r);
    shape::split_of(&mut body, &r.split);
    delivery(&mut body, r);
    signals(&mut body, r);
    errors(&mut body, r);
    traffic(&mut body, r);
    for (i, s) in r.sweeps.iter().enumerate() {
        sweep(&mut body, s, i);
    }
    resources(&mut body, r);
    scenario(&mut body, r);
    page::document(&title, &body, r.live.as_ref().map(|l| l.phase.as_str()))
}

/// Short lowercase verdict for the banner's CSS class.
fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
        Verdict::Incomplete | Verdict::Interrupted => "warn",
    }
}

/// The banner: the verdict, or for a run still going its phase; then the headline counts,
/// each in an element with an id (`n-logins`, `n-sent`, `n-delivered`, `n-lost` or
/// `n-overdue`) for whoever reads the page.
fn header(out: &mut String, r: &Report) {
    let e2e = r
        .latency_us
        .get(&Hist::EndToEnd)
        .map_or_else(|| "–".to_owned(), |l| ms(l.p99 as f64));
    let (class, heading, missing) = match &r.live {
        Some(l) => (
            "live",
            if l.phase == "done" {
                format!("FINISHING — writing the result · {:.1} s", l.elapsed_s)
            } else {
                format!("RUNNING — {} · {:.1} s", l.phase, l.elapsed_s)
            },
            format!(r#"<b id="n-overdue">{}</b> overdue"#, thousands(l.overdue)),
        ),
        None => (
            verdict_class(r.verdict),
            present::verdict(r),
            format!(r#"<b id="n-lost">{}</b> lost"#, thousands(r.delivery.lost)),
        ),
    };
    let _ = write!(
        out,
        r#"<header class="verdict {class}"><h1>{}</h1><p class="scenario">Scenario <b>{}</b> · <b id="n-logins">{}</b> logins · <b id="n-sent">{}</b> messages sent · <b id="n-delivered">{}</b> delivered · {missing} · end-to-end p99 {}</p></header>"#,
        esc(&heading),
        esc(&quote(&r.scenario)),
        thousands(r.count(Counter::LoginOk)),
        thousands(r.count(Counter::Sent)),
        thousands(r.delivery.delivered),
        esc(&e2e)
    );
    let generators = if r.generators.len() > 1 {
        format!("{} generator processes", r.generators.len())
    } else {
        "1 generator process".to_owned()
    };
    let _ = write!(
        out,
        r#"<dl class="meta"><dt>run</dt><dd>{}</dd><dt>started</dt><dd>{}</dd><dt>length</dt><dd>{:.1} s</dd><dt>target</dt><dd>{}</dd><dt>driver</dt><dd>{}</dd><dt>generators</dt><dd>{}</dd></dl>"#,
        esc(&quote(&r.run_id)),
        esc(&quote(&r.started_at)),
        r.live.as_ref().map_or(r.duration_s, |l| l.elapsed_s),
        esc(&quote(&r.target)),
        esc(&quote(&r.driver)),
        generators
    );
}

fn checks(out: &mut String, r: &Report) {
    let so_far = if r.live.is_some() { " so far" } else { "" };
    let rows: Vec<Vec<String>> = check_rows(r)
        .into_iter()
        .map(|c| {
            let result = match c.result {
                CheckResult::Pending => "pending: judged when the run ends".to_owned(),
                CheckResult::Fail(Some(why)) => format!("FAIL{so_far}: {why}"),
                CheckResult::Fail(None) => format!("FAIL{so_far}"),
                CheckResult::Pass => format!("pass{so_far}"),
            };
            vec![
                quote(c.key).into_owned(),
                c.from,
                c.bound,
                c.measured,
                result,
            ]
        })
        .collect();
    let body = if rows.is_empty() {
        "<p>No checks applied: the run did nothing a check could judge, and passes when it \
         completes.</p>"
            .to_owned()
    } else {
        table(&CHECKS_HEADER, &rows)
    };
    section(
        out,
        "checks",
        "Checks",
        "The scenario's service-level checks and the built-in ones every run gets (the run \
         verified its deliveries, understood the server, got its sends accepted and saw only \
         its own traffic); the run passes when every one does.",
        &body,
    );
}

fn findings(out: &mut String, r: &Report) {
    if r.findings.is_empty() && r.notes.is_empty() {
        return;
    }
    let mut body = String::from("<ul class=\"notes\">");
    for f in &r.findings {
        let _ = write!(
            body,
            "<li class=\"finding\">{}</li>",
            esc(&present::finding(f))
        );
    }
    for n in &r.notes {
        let _ = write!(body, "<li>{}</li>", esc(&line(n)));
    }
    body.push_str("</ul>");
    section(
        out,
        "findings",
        "What bounded the run",
        "Findings computed from the measurements, then remarks the run recorded.",
        &body,
    );
}

/// The most nines the percentile plot shows.
const MOST_NINES: f64 = 6.0;

fn distribution(out: &mut String, r: &Report) {
    let mut lines = Vec::new();
    let mut most: f64 = 2.0;
    for (&h, l) in &r.latency_us {
        if h == Hist::SendAck && !r.acceptance {
            continue;
        }
        // The tail ends at the highest value, placed at the count's number of nines.
        let end = (l.count.max(1) as f64)
            .log10()
            .ceil()
            .clamp(2.0, MOST_NINES);
        most = most.max(end);
        let points = l
            .curve
            .iter()
            .map(|&(q, v)| (chart::nines(q, end), v as f64 / 1000.0))
            .collect();
        lines.push(Line::new(h.entry().label, points));
    }
    let mut body = String::new();
    // The live page shows the plot from its first second, empty until samples come.
    if !lines.is_empty() || r.live.is_some() {
        body.push_str(
            &Chart {
                marks: Vec::new(),
                id: "percentiles".to_owned(),
                title: "latency by percentile".to_owned(),
                x: XAxis::Percentile(most),
                y: YUnit::Ms,
                lines,
                gap: None,
            }
            .svg(),
        );
    }
    let rows: Vec<Vec<String>> = latency_rows(r)
        .into_iter()
        .filter(|row| r.latency_us.contains_key(&row.hist))
        .map(|row| {
            let label = row.hist.entry().label.to_owned();
            match row.cells {
                Some(cells) => std::iter::once(label).chain(cells).collect(),
                None => vec![
                    label,
                    "not measured: the protocol has no acceptance".to_owned(),
                ],
            }
        })
        .collect();
    body.push_str(&table(&LATENCY_HEADER, &rows));
    section(
        out,
        "latency",
        "Latency distribution",
        "Each curve gives, for a percentile on the x axis, the latency that share of the \
         measurements stayed under. The x axis stretches the tail (90%, 99%, 99.9% … are \
         equally spaced), where the slow outliers are. Latencies count from when a message \
         was due, so a generator that fell behind adds to them rather than hiding it.",
        &body,
    );
}

fn signals(out: &mut String, r: &Report) {
    if r.signals.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = signal_rows(r).into_iter().map(Vec::from).collect();
    section(
        out,
        "signals",
        "Signals",
        "Read receipts are owed to each message's sender once each, live or fetched; a typing \
         notice or a presence change is owed to each recipient that was online before it and \
         stayed online for the scenario's <code>within</code> after it. Extra: arrived where \
         none was owed (a recipient that came or went around it).",
        &format!(
            "{}<p>{}</p>",
            table(&SIGNALS_HEADER, &rows),
            presence_fanout(r).map(|l| esc(&l)).unwrap_or_default()
        ),
    );
}

fn delivery(out: &mut String, r: &Report) {
    if let Some(l) = &r.live {
        return live_delivery(out, r, l);
    }
    let d = &r.delivery;
    let rows: Vec<Vec<String>> = delivery_rows(d).into_iter().map(Vec::from).collect();
    let mut body = table(&["outcome", "count", "share of expected"], &rows);
    if !d.examples.is_empty() {
        let rows: Vec<Vec<String>> = d
            .examples
            .iter()
            .map(|e| {
                vec![
                    e.kind.name().to_owned(),
                    e.stream.to_string(),
                    format!("#{}", e.recipient),
                    e.seq.to_string(),
                    quote(&e.detail).into_owned(),
                ]
            })
            .collect();
        body.push_str("<h3>Examples of what went wrong</h3>");
        body.push_str(&table(
            &["problem", "stream", "recipient", "seq", "detail"],
            &rows,
        ));
    }
    section(
        out,
        "delivery",
        "Delivery",
        &format!(
            "Every message of a sampled stream is checked at each recipient: did it arrive, \
             once, in order, intact and in time ({} streams, {} stream × recipient tracks).",
            thousands(d.streams),
            thousands(d.tracks)
        ),
        &body,
    );
}

/// Delivery while the run goes on: the tallies already certain, and what is overdue.
fn live_delivery(out: &mut String, r: &Report, l: &super::model::LiveView) {
    let d = &r.delivery;
    let rows: Vec<Vec<String>> = live_delivery_rows(d, l.overdue)
        .into_iter()
        .map(Vec::from)
        .collect();
    section(
        out,
        "delivery",
        "Delivery so far",
        "The ledger's tallies that are already certain. Which overdue messages are lost \
         only the end of the run can tell: late ones may still come, and the final \
         verification sync may find more.",
        &table(&["outcome", "count"], &rows),
    );
}

fn errors(out: &mut String, r: &Report) {
    if r.errors.is_empty() {
        return;
    }
    let most = r.errors.values().map(|e| e.count).max().unwrap_or(1).max(1);
    let mut body = String::from(
        "<table><thead><tr><th>error</th><th class=\"num\">count</th><th></th><th>meaning</th><th>example</th></tr></thead><tbody>",
    );
    for (kind, e) in &r.errors {
        let _ = write!(
            body,
            r#"<tr><td>{}</td><td class="num">{}</td><td class="bar"><span style="width:{:.0}%"></span></td><td>{}</td><td class="ex">{}</td></tr>"#,
            esc(kind.name()),
            thousands(e.count),
            e.count as f64 * 100.0 / most as f64,
            esc(kind.describe()),
            esc(&quote(e.examples.first().map_or("", String::as_str)))
        );
    }
    body.push_str("</tbody></table>");
    section(
        out,
        "errors",
        "Errors by kind",
        "What failed, how often, with the first example of each kind.",
        &body,
    );
}

fn traffic(out: &mut String, r: &Report) {
    let mut body = table(&["connections", "value"], &connection_rows(r));
    let transports: Vec<Vec<String>> = transport_rows(r).into_iter().map(Vec::from).collect();
    if !transports.is_empty() {
        body.push_str(&table(&TRANSPORTS_HEADER, &transports));
    }
    body.push_str(&table(&["messages", "count", "rate"], &message_rows(r)));
    section(
        out,
        "traffic",
        "Connections and messages",
        &format!(
            "Totals of the run; rates are over the {:.0} s of traffic.",
            r.rates.window_s
        ),
        &body,
    );
}

/// The connections table's rows.
fn connection_rows(r: &Report) -> Vec<Vec<String>> {
    let c = &r.connections;
    let mut rows = vec![
        vec!["connect attempts".to_owned(), thousands(c.attempts)],
        vec!["logins ok".to_owned(), thousands(c.logins_ok)],
        vec!["login success".to_owned(), pct(c.logins_ok, c.attempts)],
        vec!["online peak (users)".to_owned(), thousands(c.online_peak)],
        vec!["disconnects".to_owned(), thousands(c.disconnects)],
        vec![
            "syncs (catch-up + final verification)".to_owned(),
            thousands(c.syncs),
        ],
    ];
    if let Some(a) = &c.accounts {
        rows.push(vec![
            "accounts (created before login)".to_owned(),
            present::accounts(a),
        ]);
    }
    if let Some(n) = c.resumes_without_offset {
        rows.push(vec![
            present::RESUMES_WITHOUT_OFFSET.to_owned(),
            thousands(n),
        ]);
    }
    rows
}

/// The messages table's rows: count and rate of each outcome of a send.
fn message_rows(r: &Report) -> Vec<Vec<String>> {
    let n = |k: Counter| r.count(k);
    let rate = |per_s: f64| format!("{per_s:.1}/s");
    let (failed, _) = crate::metrics::send_failures(n);
    vec![
        vec![
            "sent".to_owned(),
            thousands(n(Counter::Sent)),
            rate(r.rates.sent_per_s),
        ],
        vec![
            "accepted".to_owned(),
            if r.acceptance {
                thousands(n(Counter::Accepted))
            } else {
                "no acceptance in this protocol".to_owned()
            },
            rate(r.rates.accepted_per_s),
        ],
        vec![
            "refused / failed".to_owned(),
            thousands(failed),
            pct(failed, n(Counter::Sent)),
        ],
        vec![
            "not sent (user offline when due)".to_owned(),
            thousands(n(Counter::Dropped)),
            String::new(),
        ],
        vec![
            "received".to_owned(),
            thousands(n(Counter::Received)),
            rate(r.rates.received_per_s),
        ],
        vec![
            "requests / replies".to_owned(),
            format!(
                "{} / {}",
                thousands(n(Counter::Requests)),
                thousands(n(Counter::Replies))
            ),
            rate(r.rates.replies_per_s),
        ],
    ]
}

/// The sweep of one request pattern (the `i`-th), as charts and a table.
fn sweep(out: &mut String, s: &super::sweep::Sweep, i: usize) {
    let mut body = sweep_charts(s, i);
    body.push_str(&sweep_table(s));
    let _ = write!(body, "<p>{}</p>", esc(&knee(&s.knee)));
    let (id, title) = match (i, s.name.as_str()) {
        (0, "") => ("sweep".to_owned(), "Request sweep".to_owned()),
        (_, "") => (format!("sweep-{i}"), format!("Request sweep {}", i + 1)),
        (_, name) => (
            if i == 0 {
                "sweep".to_owned()
            } else {
                format!("sweep-{i}")
            },
            format!("Request sweep: {} ({})", quote(name), quote(&s.kind)),
        ),
    };
    section(
        out,
        &id,
        &title,
        "Steps of fixed concurrency (users each keeping one request outstanding). By \
         Little's law, TPS × mean response time ≈ concurrency; where throughput stops \
         growing, the server (or what sits in front of it) is saturated.",
        &body,
    );
}

/// The sweep's throughput and response-time charts by concurrency.
fn sweep_charts(s: &super::sweep::Sweep, i: usize) -> String {
    let steps: Vec<String> = s
        .rows
        .iter()
        .map(|row| thousands(u64::from(row.concurrency)))
        .collect();
    let at = |f: &dyn Fn(&super::sweep::SweepRow) -> f64| -> Vec<(f64, f64)> {
        s.rows
            .iter()
            .enumerate()
            .map(|(i, row)| (i as f64, f(row)))
            .collect()
    };
    let mut body = String::from("<h3>Throughput by concurrency</h3>");
    body.push_str(
        &Chart {
            marks: Vec::new(),
            id: if i == 0 {
                "sweep-tps".to_owned()
            } else {
                format!("sweep-tps-{i}")
            },
            title: "throughput by concurrency".to_owned(),
            x: XAxis::Steps(steps.clone()),
            y: YUnit::Count,
            lines: vec![Line::new("requests/s", at(&|row| row.tps))],
            gap: None,
        }
        .svg(),
    );
    body.push_str("<h3>Response time by concurrency</h3>");
    body.push_str(
        &Chart {
            marks: Vec::new(),
            id: if i == 0 {
                "sweep-rt".to_owned()
            } else {
                format!("sweep-rt-{i}")
            },
            title: "response time by concurrency".to_owned(),
            x: XAxis::Steps(steps),
            y: YUnit::Ms,
            lines: vec![
                Line::new("RT mean", at(&|row| row.rt_mean_us / 1000.0)),
                Line::new("RT p99", at(&|row| row.rt_p99_us as f64 / 1000.0)),
            ],
            gap: None,
        }
        .svg(),
    );
    body
}

/// The sweep's table, a row a step.
fn sweep_table(s: &super::sweep::Sweep) -> String {
    let rows: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|row| {
            vec![
                thousands(u64::from(row.concurrency)),
                format!("{:.0}", row.tps),
                ms(row.rt_mean_us),
                ms(row.rt_p99_us as f64),
                format!("{:.0}", row.little),
                thousands(row.errors),
            ]
        })
        .collect();
    table(
        &[
            "concurrency",
            "TPS (req/s)",
            "RT mean",
            "RT p99",
            "TPS × RT (Little)",
            "errors",
        ],
        &rows,
    )
}

/// What the sweep says of the knee, in a sentence.
fn knee(knee: &Knee) -> String {
    match knee {
        Knee::OneStep => "One step only: a sweep over several concurrencies finds the knee.".to_owned(),
        Knee::StillGrowing { concurrency, tps } => format!(
            "Throughput still grows at concurrency {concurrency} ({tps:.0} req/s): the knee is further out."
        ),
        Knee::At {
            concurrency,
            tps,
            rt_mean_us,
        } => format!(
            "Knee at concurrency {concurrency}: {tps:.0} req/s at {:.2} ms mean; more concurrency only adds latency.",
            rt_mean_us / 1000.0
        ),
    }
}

fn resources(out: &mut String, r: &Report) {
    let rows: Vec<Vec<String>> = r
        .generators
        .iter()
        .map(|g| {
            let s = &g.shard;
            vec![
                format!("shard {}/{}", s.index, s.count),
                thousands(u64::from(s.users)),
                format!("{:.1} s", s.cpu_s),
                format!("{:.0}% of {}", g.busy_pct, s.cores),
                format!("{:.1} MiB", s.peak_rss_bytes as f64 / 1048576.0),
                format!("{:.1} KiB", g.rss_per_user_bytes / 1024.0),
                thousands(s.fd_limit),
            ]
        })
        .collect();
    let mut body = table(
        &[
            "generator",
            "users",
            "CPU",
            "of cores",
            "peak RSS",
            "RSS/user",
            "fd limit",
        ],
        &rows,
    );
    if !r.processes.is_empty() {
        let rows: Vec<Vec<String>> = r
            .processes
            .iter()
            .map(|p| {
                vec![
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
                ]
            })
            .collect();
        body.push_str(&table(
            &[
                "process",
                "pid",
                "CPU avg",
                "CPU peak",
                "RSS peak",
                "threads",
                "open files",
            ],
            &rows,
        ));
    }
    section(
        out,
        "resources",
        "Resources",
        "What the generator processes and the monitored target processes used; CPU is in \
         % of one core (200% = two busy cores).",
        &body,
    );
}

fn scenario(out: &mut String, r: &Report) {
    let Some(src) = &r.scenario_source else {
        return;
    };
    let mut body = format!(
        "<p>File: <code>{}</code></p><pre class=\"scenario-text\">{}</pre>",
        esc(&src.file),
        esc(&src.text)
    );
    if !src.overrides.is_empty() {
        body.push_str("<p>Overridden on the command line:</p><ul>");
        for o in &src.overrides {
            let _ = write!(body, "<li><code>--set {}</code></li>", esc(&quote(o)));
        }
        body.push_str("</ul>");
    }
    section(
        out,
        "scenario",
        "Scenario as run",
        "The scenario file this run was started with, and the command line's overrides.",
        &body,
    );
}

#[cfg(test)]
mod tests;
