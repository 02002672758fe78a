//! Sizing (`msgstorm size`): what one run measured of its target — memory per online user,
//! CPU per 1,000 delivered messages, bytes on the wire per message — and a sizing table for a load the user names, scaled from those figures
//! with their uncertainty.
//!
//! Where each figure comes from:
//! - **Memory per online user**: the slope of a least-squares line through the watched
//!   target processes' resident memory against users online, one point per second of the
//!   login phase (before traffic); its standard error is the uncertainty, its intercept the
//!   base memory. A run whose users come and go over a day has no login phase: there, one
//!   point per second that set a new most users online, against that most.
//! - **CPU per 1,000 delivered messages**: the target's CPU seconds over the seconds of
//!   traffic divided by the messages received in them, per second; the mean and its
//!   standard error. Idle work (heartbeats) is included, so it is an upper bound.
//! - **Bytes on the wire per message**: the payload bytes the target's TCP sockets
//!   received per message sent and sent per message delivered, per second of traffic
//!   (`monitor::tcp`: `sock_diag`'s `tcpi_bytes_received` / `tcpi_bytes_acked` of the
//!   watched processes' sockets); the ratio of the sums, with the standard error of the
//!   per-second ratios. WebSocket framing and
//!   TLS are included, TCP/IP headers are not; heartbeats and acknowledgements ride along,
//!   so it is an upper bound at low rates. Where the sockets could not be read (another
//!   host, an old result), the body bytes the generator sent per message stand in, a
//!   lower bound. (`/proc/PID/io` cannot give wire bytes: it counts `read`/`write` calls,
//!   not the `send`/`recv` sockets use; `/proc/net/dev` counts every process on the host.)

use serde::Serialize;

use crate::artifact::Artifact;
use crate::metrics::Counter;
use crate::report::findings::EMBEDDED_IN_GENERATOR;

/// A measured figure and its uncertainty (one standard error), in the same unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The figure.
    pub value: f64,
    /// ± one standard error.
    pub error: f64,
    /// Points it was computed from.
    pub points: usize,
}

/// What a run measured of its target, per unit of load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Basis {
    /// The target processes measured (name and pid), or the generator when the server
    /// ran embedded in it.
    pub processes: Vec<String>,
    /// True when the server ran inside the generator: memory and CPU include the
    /// generator's own.
    pub embedded: bool,
    /// Most users online in one second.
    pub online_peak: u64,
    /// Messages delivered per second over the traffic seconds.
    pub delivered_per_s: f64,
    /// Resident memory with nobody online, bytes (the line's intercept).
    pub base_memory_bytes: Option<f64>,
    /// Resident memory per online user, bytes.
    pub memory_per_user_bytes: Option<Estimate>,
    /// Target CPU seconds per 1,000 delivered messages.
    pub cpu_s_per_1000: Option<Estimate>,
    /// Mean body size of the messages sent, bytes.
    pub body_bytes: Option<f64>,
    /// TCP payload bytes the target received per message sent.
    pub wire_in_per_msg: Option<Estimate>,
    /// TCP payload bytes the target sent per message delivered.
    pub wire_out_per_delivery: Option<Estimate>,
}

/// The load to size for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Load {
    /// Registered users.
    pub users: u64,
    /// Fraction of them online at once.
    pub online: f64,
    /// Messages sent per second, in all.
    pub rate: f64,
    /// Members per conversation: 2 for one-to-one, G for groups of G (each message is
    /// delivered to G − 1 members).
    pub group_size: u64,
    /// Body size, bytes (`None`: the measured one).
    pub size: Option<f64>,
}

/// One line of the sizing table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// What is sized.
    pub what: String,
    /// The figure, with its unit.
    pub value: String,
    /// How it follows from the basis.
    pub basis: String,
}

/// Whether `a` measured something to size from, and what.
pub fn basis(a: &Artifact) -> Result<Basis, String> {
    let embedded = a.notes.iter().any(|n| n == EMBEDDED_IN_GENERATOR);
    let watched: Vec<_> = if embedded {
        a.processes.iter().filter(|p| p.generator).collect()
    } else {
        crate::monitor::targets(&a.processes)
    };
    if watched.is_empty() {
        return Err(
            "the run watched no target process: give the scenario a [monitor] table with the \
             server's pids or names (docs/scenario.md), or run against the embedded server"
                .to_owned(),
        );
    }
    let online: std::collections::BTreeMap<u32, u64> =
        a.metrics.seconds().map(|s| (s.sec, s.online)).collect();
    let online_peak = online.values().copied().max().unwrap_or(0);
    // The summed RSS and CPU of the watched processes, per second of the run.
    let per_sec: std::collections::BTreeMap<u32, (f64, f64)> =
        crate::monitor::usage_by_second(watched.iter().copied())
            .into_iter()
            .map(|(sec, (cpu, rss))| (sec, (cpu / 100.0, rss as f64)))
            .collect();
    // Memory: RSS against users online over the login phase. A monitor sample at second
    // `t` was taken at the end of metrics second `t - 1`.
    let login_end = a.traffic_started_s.unwrap_or(f64::MAX);
    let online_at = |sec: u32| online.get(&sec.checked_sub(1)?).copied();
    let points: Vec<(f64, f64)> = if a.population.as_ref().is_some_and(|o| o.sessions > 0) {
        day_points(&per_sec, online_at)
    } else {
        per_sec
            .iter()
            .filter(|(&sec, _)| f64::from(sec) <= login_end + 1.0)
            .filter_map(|(&sec, &(_, rss))| Some((online_at(sec)? as f64, rss)))
            .collect()
    };
    let line = fit(&points);
    // CPU: per traffic second with deliveries, CPU seconds per 1,000 received.
    let mut ratios = Vec::new();
    let (mut delivered, mut seconds) = (0u64, 0u64);
    for s in a.metrics.seconds() {
        let received = s.count(Counter::Received);
        if received == 0 || s.count(Counter::Sent) == 0 {
            continue;
        }
        delivered += received;
        seconds += 1;
        if let Some(&(cpu, _)) = per_sec.get(&(s.sec + 1)) {
            ratios.push(cpu / received as f64 * 1000.0);
        }
    }
    let (wire_in, wire_out) = wire(a, &watched);
    let m = &a.metrics;
    let sent = m.count(Counter::Sent);
    Ok(Basis {
        processes: watched
            .iter()
            .map(|p| format!("{} (pid {})", p.name, p.pid))
            .collect(),
        embedded,
        online_peak,
        delivered_per_s: delivered as f64 / seconds.max(1) as f64,
        base_memory_bytes: line.map(|l| l.1),
        memory_per_user_bytes: line.map(|l| l.0),
        cpu_s_per_1000: mean(&ratios),
        body_bytes: (sent > 0).then(|| m.count(Counter::BytesOut) as f64 / sent as f64),
        wire_in_per_msg: wire_in,
        wire_out_per_delivery: wire_out,
    })
}

/// The memory points of a run whose users come and go over a day (`[population.sessions]`),
/// which has no login phase before its traffic: RSS against the most users online so far,
/// at every second that set a new most. A server's resident memory keeps what its busiest
/// moment took (an allocator seldom gives it back), so the high-water mark of users, not
/// the users online that second, is what it holds memory for.
fn day_points(
    per_sec: &std::collections::BTreeMap<u32, (f64, f64)>,
    online_at: impl Fn(u32) -> Option<u64>,
) -> Vec<(f64, f64)> {
    let mut most = 0;
    per_sec
        .iter()
        .filter_map(|(&sec, &(_, rss))| {
            let users = online_at(sec)?;
            (users > most).then(|| {
                most = users;
                (users as f64, rss)
            })
        })
        .collect()
}

/// TCP payload bytes the `watched` processes received per message sent and sent per
/// message delivered: one ratio per second of traffic whose two bounding socket samples
/// exist (a sample at second `t` closes metrics second `t - 1`), each sum growing.
fn wire(
    a: &Artifact,
    watched: &[&crate::monitor::ProcUsage],
) -> (Option<Estimate>, Option<Estimate>) {
    let tcp = crate::monitor::tcp_by_second(watched.iter().copied());
    // (bytes, messages) per second of traffic, into and out of the target.
    let (mut ins, mut outs) = (Vec::new(), Vec::new());
    for s in a.metrics.seconds() {
        let (sent, received) = (s.count(Counter::Sent), s.count(Counter::Received));
        let Some((rx, tx)) = crate::monitor::tcp_in_second(&tcp, s.sec) else {
            continue;
        };
        if sent > 0 {
            ins.push((rx as f64, sent as f64));
            if received > 0 {
                outs.push((tx as f64, received as f64));
            }
        }
    }
    (per_message(&ins), per_message(&outs))
}

/// Bytes per message over `(bytes, messages)` seconds: their sums' ratio (robust to bytes
/// and their messages being counted a second apart when the target lags), with the standard
/// error of the per-second ratios as its uncertainty.
fn per_message(seconds: &[(f64, f64)]) -> Option<Estimate> {
    let ratios: Vec<f64> = seconds.iter().map(|(b, m)| b / m).collect();
    let spread = mean(&ratios)?;
    let (bytes, msgs) = seconds
        .iter()
        .fold((0.0, 0.0), |(b, m), (sb, sm)| (b + sb, m + sm));
    Some(Estimate {
        value: bytes / msgs,
        ..spread
    })
}

/// The sizing table of `load` from `b`.
pub fn size(b: &Basis, load: &Load) -> Vec<Line> {
    let online = (load.users as f64 * load.online).round();
    let fanout = load.group_size.saturating_sub(1).max(1) as f64;
    let delivered = load.rate * fanout;
    let mut out = Vec::new();
    let scale = |to: f64, measured: f64| {
        if measured > 0.0 && to > 2.0 * measured {
            format!("; {:.0}× beyond what was measured", to / measured)
        } else {
            String::new()
        }
    };
    if let (Some(per), Some(base)) = (b.memory_per_user_bytes, b.base_memory_bytes) {
        let mem = base + online * per.value;
        out.push(Line {
            what: format!("memory for {} online users", online as u64),
            value: format!("{} ± {}", mib(mem), mib(online * per.error)),
            basis: format!(
                "{} base + {:.1} KiB ± {:.1} KiB per online user ({} points){}",
                mib(base),
                per.value / 1024.0,
                per.error / 1024.0,
                per.points,
                scale(online, b.online_peak as f64)
            ),
        });
    }
    if let Some(cpu) = b.cpu_s_per_1000 {
        out.push(Line {
            what: format!("cores for {:.0} deliveries/s", delivered),
            value: format!(
                "{:.2} ± {:.2}",
                delivered / 1000.0 * cpu.value,
                delivered / 1000.0 * cpu.error
            ),
            basis: format!(
                "{:.3} ± {:.3} CPU s per 1,000 delivered ({} s of traffic; idle cost included){}",
                cpu.value,
                cpu.error,
                cpu.points,
                scale(delivered, b.delivered_per_s)
            ),
        });
    }
    // A different body size moves the wire bytes by the difference (framing stays).
    let resize = |wire: f64| match (load.size, b.body_bytes) {
        (Some(to), Some(from)) => (wire + to - from).max(to),
        _ => wire,
    };
    match (b.wire_in_per_msg, b.wire_out_per_delivery) {
        (Some(win), Some(wout)) => {
            let (i, o) = (resize(win.value), resize(wout.value));
            out.push(Line {
                what: "bandwidth into the server".to_owned(),
                value: format!("{} ± {}", mbit(load.rate * i), mbit(load.rate * win.error)),
                basis: format!(
                    "{i:.0} ± {:.0} B of TCP payload a message sent ({} s of traffic; \
                     framing, TLS, heartbeats included, TCP/IP headers not){}",
                    win.error,
                    win.points,
                    if load.size.is_some() {
                        ", resized to the body size asked"
                    } else {
                        ""
                    }
                ),
            });
            out.push(Line {
                what: "bandwidth out of the server".to_owned(),
                value: format!("{} ± {}", mbit(delivered * o), mbit(delivered * wout.error)),
                basis: format!(
                    "{o:.0} ± {:.0} B of TCP payload a delivery, to each of {fanout:.0} \
                     recipients a message",
                    wout.error
                ),
            });
        }
        _ => {
            if let Some(body) = load.size.or(b.body_bytes) {
                out.push(Line {
                    what: "message bodies into the server".to_owned(),
                    value: format!("{}/s", mib(load.rate * body)),
                    basis: format!(
                        "{body:.0} B a message: body bytes only, a lower bound of the wire \
                         (the target's sockets were not readable: framing, TLS and TCP/IP \
                         headers come on top)"
                    ),
                });
                out.push(Line {
                    what: "message bodies out of the server".to_owned(),
                    value: format!("{}/s", mib(delivered * body)),
                    basis: format!("{body:.0} B to each of {fanout:.0} recipients a message"),
                });
            }
        }
    }
    out
}

/// `bytes_per_s` as `12.34 Mbit/s`.
fn mbit(bytes_per_s: f64) -> String {
    format!("{:.2} Mbit/s", bytes_per_s * 8.0 / 1e6)
}

/// `bytes` as `12.3 MiB`.
fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

/// Least-squares line through `points` (x, y): the slope with its standard error, and the
/// intercept. `None` with fewer than three points or no spread in x.
fn fit(points: &[(f64, f64)]) -> Option<(Estimate, f64)> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let residual: f64 = points
        .iter()
        .map(|p| (p.1 - intercept - slope * p.0).powi(2))
        .sum();
    let error = (residual / (nf - 2.0) / sxx).sqrt();
    Some((
        Estimate {
            value: slope,
            error,
            points: n,
        },
        intercept,
    ))
}

/// The mean of `xs` and its standard error; `None` when empty.
fn mean(xs: &[f64]) -> Option<Estimate> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    let m = xs.iter().sum::<f64>() / nf;
    let error = if n > 1 {
        (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (nf - 1.0) / nf).sqrt()
    } else {
        0.0
    };
    Some(Estimate {
        value: m,
        error,
        points: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_of_users_coming_and_going_sizes_memory_by_its_high_water_marks() {
        // 2 MB a user while users come; leaving gives nothing back.
        let online = [10u64, 20, 15, 30, 25, 40];
        let per_sec: std::collections::BTreeMap<u32, (f64, f64)> = (1..=6u32)
            .map(|sec| {
                let most = online[..sec as usize].iter().max().copied().unwrap_or(0);
                (sec, (0.0, 1e6 + 2e6 * most as f64))
            })
            .collect();
        let points = day_points(&per_sec, |sec| {
            online.get(sec.checked_sub(1)? as usize).copied()
        });
        assert_eq!(
            points.len(),
            4,
            "only the seconds that set a new most: {points:?}"
        );
        let (slope, base) = fit(&points).expect("a line");
        assert!((slope.value - 2e6).abs() < 1.0, "{slope:?}");
        assert!((base - 1e6).abs() < 1.0, "{base}");
    }

    #[test]
    fn a_line_through_exact_points_has_no_error() {
        let pts: Vec<(f64, f64)> = (0..10)
            .map(|u| (f64::from(u) * 100.0, 5e6 + f64::from(u) * 100.0 * 20_000.0))
            .collect();
        let (slope, base) = fit(&pts).expect("a line");
        assert!((slope.value - 20_000.0).abs() < 1e-6, "{slope:?}");
        assert!(slope.error < 1e-6 && (base - 5e6).abs() < 1e-3);
        assert!(fit(&pts[..2]).is_none());
        assert!(fit(&[(5.0, 1.0), (5.0, 2.0), (5.0, 3.0)]).is_none());
    }

    #[test]
    fn sizing_scales_the_basis_and_says_when_it_extrapolates() {
        let b = Basis {
            processes: vec!["srv (pid 1)".to_owned()],
            embedded: false,
            online_peak: 1_000,
            delivered_per_s: 1_000.0,
            base_memory_bytes: Some(10.0 * 1048576.0),
            memory_per_user_bytes: Some(Estimate {
                value: 10_240.0,
                error: 1_024.0,
                points: 5,
            }),
            cpu_s_per_1000: Some(Estimate {
                value: 0.1,
                error: 0.01,
                points: 10,
            }),
            body_bytes: Some(100.0),
            wire_in_per_msg: None,
            wire_out_per_delivery: None,
        };
        let load = Load {
            users: 100_000,
            online: 0.1,
            rate: 500.0,
            group_size: 5,
            size: Some(1100.0),
        };
        let lines = size(&b, &load);
        assert_eq!(lines[0].what, "memory for 10000 online users");
        // 10 MiB + 10,000 × 10 KiB = 107.7 MiB ± 9.8 MiB, 10× the 1,000 measured.
        assert_eq!(lines[0].value, "107.7 MiB ± 9.8 MiB");
        assert!(
            lines[0].basis.ends_with("10× beyond what was measured"),
            "{}",
            lines[0].basis
        );
        // 500 msg/s × 4 deliveries = 2,000/s × 0.1 s per 1,000 = 0.2 cores.
        assert_eq!(
            (lines[1].what.as_str(), lines[1].value.as_str()),
            ("cores for 2000 deliveries/s", "0.20 ± 0.02")
        );
        // 1,100 B × 500/s in; × 2,000 deliveries/s out.
        assert_eq!(
            lines[2].value,
            format!("{:.1} MiB/s", 1100.0 * 500.0 / 1048576.0)
        );
        assert_eq!(
            lines[3].value,
            format!("{:.1} MiB/s", 1100.0 * 2000.0 / 1048576.0)
        );
    }

    #[test]
    fn wire_bytes_replace_body_bytes_and_follow_the_body_size() {
        let per = |v| {
            Some(Estimate {
                value: v,
                error: 2.0,
                points: 9,
            })
        };
        let b = Basis {
            processes: vec!["srv (pid 1)".to_owned()],
            embedded: false,
            online_peak: 1_000,
            delivered_per_s: 1_000.0,
            base_memory_bytes: None,
            memory_per_user_bytes: None,
            cpu_s_per_1000: None,
            body_bytes: Some(100.0),
            wire_in_per_msg: per(180.0),
            wire_out_per_delivery: per(150.0),
        };
        let mut load = Load {
            users: 1_000,
            online: 1.0,
            rate: 1e6 / 180.0,
            group_size: 2,
            size: None,
        };
        let lines = size(&b, &load);
        assert_eq!(lines[0].what, "bandwidth into the server");
        assert!(
            lines[0].value.starts_with("8.00 Mbit/s ±"),
            "{}",
            lines[0].value
        );
        assert!(
            lines[0].basis.starts_with("180 ± 2 B of TCP payload"),
            "{}",
            lines[0].basis
        );
        assert!(
            lines[1].basis.starts_with("150 ± 2 B"),
            "{}",
            lines[1].basis
        );
        // A 1,100 B body: 1,000 B more a message, the framing stays.
        load.size = Some(1100.0);
        let lines = size(&b, &load);
        assert!(
            lines[0].basis.starts_with("1180 ± 2 B"),
            "{}",
            lines[0].basis
        );
    }
}
