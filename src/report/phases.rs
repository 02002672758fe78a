//! The watched target by phase of the run — logging in, online without messages, carrying
//! messages — as OpenIM's W1 report tables it ("server idle", "server under load"): the
//! seconds, users online, message rate, the target's bandwidth in and out (its TCP
//! payload, `monitor::tcp`), CPU and memory.
//!
//! A monitor sample taken at second `t` closes metrics second `t - 1`, so the target's
//! figures for second `s` come from its samples `s` and `s + 1`.

use std::collections::BTreeMap;

use super::model::Report;

/// What the target did in one phase of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetPhase {
    /// `logging in`, `online, no messages`, `messages`.
    pub name: &'static str,
    /// Seconds of the run in the phase.
    pub seconds: u32,
    /// Most users online in it.
    pub online: u64,
    /// Messages sent per second.
    pub sent_per_s: f64,
    /// Bytes per second the target received (`None`: its sockets were not read).
    pub in_bytes_per_s: Option<f64>,
    /// Bytes per second the target sent.
    pub out_bytes_per_s: Option<f64>,
    /// The target's CPU, % of one core, mean over the phase.
    pub cpu_pct: Option<f64>,
    /// The target's highest resident memory in the phase, bytes.
    pub rss_bytes: Option<u64>,
}

/// The phases of `r`'s run, when it watched target processes (empty otherwise).
pub fn of(r: &Report) -> Vec<TargetPhase> {
    let targets = crate::monitor::targets(&r.processes);
    if targets.is_empty() {
        return Vec::new();
    }
    // Per second: CPU and RSS summed over the targets, and their TCP byte counts.
    let usage = crate::monitor::usage_by_second(targets.iter().copied());
    let tcp = crate::monitor::tcp_by_second(targets.iter().copied());
    let peak = r.series.iter().map(|s| s.online).max().unwrap_or(0);
    let all_in = r
        .series
        .iter()
        .find(|s| s.online == peak)
        .map_or(0, |s| s.sec);
    let mut sending = r.series.iter().filter(|s| s.sent > 0).map(|s| s.sec);
    let first_send = sending.next();
    let last_send = sending.next_back().or(first_send);
    let mut phases: Vec<(&'static str, Vec<u32>)> = vec![
        ("logging in", Vec::new()),
        ("online, no messages", Vec::new()),
        ("messages", Vec::new()),
    ];
    for s in &r.series {
        // From the first to the last second with a send, also the seconds in which a
        // lagging generator sent nothing.
        let phase = match (first_send, last_send) {
            (Some(a), Some(b)) if (a..=b).contains(&s.sec) => 2,
            _ if s.sec < all_in => 0,
            (Some(a), _) if s.online == peak && s.sec < a => 1,
            (None, _) if s.online == peak => 1,
            _ => continue,
        };
        phases[phase].1.push(s.sec);
    }
    let by_sec: BTreeMap<u32, _> = r.series.iter().map(|s| (s.sec, s)).collect();
    phases
        .into_iter()
        .filter(|(_, secs)| !secs.is_empty())
        .map(|(name, secs)| {
            let n = secs.len() as f64;
            let mut bytes = (0u64, 0u64, 0u32);
            let (mut cpu, mut cpu_n, mut rss) = (0.0, 0u32, None::<u64>);
            let (mut sent, mut online) = (0u64, 0u64);
            for &sec in &secs {
                if let Some(s) = by_sec.get(&sec) {
                    sent += s.sent;
                    online = online.max(s.online);
                }
                if let Some((rx, tx)) = crate::monitor::tcp_in_second(&tcp, sec) {
                    bytes.0 += rx;
                    bytes.1 += tx;
                    bytes.2 += 1;
                }
                if let Some(&(c, m)) = usage.get(&(sec + 1)) {
                    cpu += c;
                    cpu_n += 1;
                    rss = Some(rss.unwrap_or(0).max(m));
                }
            }
            let per = |b: u64| (bytes.2 > 0).then(|| b as f64 / f64::from(bytes.2));
            TargetPhase {
                name,
                seconds: secs.len() as u32,
                online,
                sent_per_s: sent as f64 / n,
                in_bytes_per_s: per(bytes.0),
                out_bytes_per_s: per(bytes.1),
                cpu_pct: (cpu_n > 0).then(|| cpu / f64::from(cpu_n)),
                rss_bytes: rss,
            }
        })
        .collect()
}
