//! Resource use of processes on this host while a run goes on: the generator itself and the
//! target's processes (by pid or name) — CPU, resident memory, threads, open files — sampled
//! once a second from `/proc`, so the report can say which side ran out first.
//!
//! The target's processes also have their TCP payload bytes sampled ([`tcp`]), for the
//! bandwidth and bytes per message of sizing.
//!
//! Reading `/proc/PID/stat` and `/proc/PID/status` by hand: two fields each, where a crate
//! such as `procfs` would add a dependency tree for what is a line of parsing.

pub mod tcp;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Clock ticks per second of `/proc/PID/stat` CPU times (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;
/// The shortest span a CPU percentage is computed over: at 100 ticks a second, one tick
/// is 2% of it.
const MIN_CPU_SPAN: Duration = Duration::from_millis(500);

/// What was seen of one process over a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProcUsage {
    /// Process name (`/proc/PID/comm`), or `msgstorm (generator)`.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Which generator shard sampled it.
    pub shard: u32,
    /// True for the generator's own process.
    pub generator: bool,
    /// Per-second samples: (second of the run, CPU % of one core, RSS bytes).
    pub series: Vec<(u32, f32, u64)>,
    /// Mean CPU over the samples, % of one core.
    pub cpu_avg_pct: f64,
    /// Highest one-second CPU, % of one core.
    pub cpu_peak_pct: f64,
    /// Highest resident memory, bytes.
    pub rss_peak_bytes: u64,
    /// Highest thread count.
    pub threads_peak: u64,
    /// Highest number of open file descriptors.
    pub fds_peak: u64,
    /// True when the process went away during the run.
    pub exited: bool,
    /// Per-second samples of a target process's open TCP sockets, the first at second 0
    /// before any login: (second of the run, payload bytes received, payload bytes sent and
    /// acknowledged), each summed over the sockets open then ([`tcp`]). Empty for the generator, and where `sock_diag` is
    /// unavailable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp: Vec<(u32, u64, u64)>,
}

/// The watched target processes of a result, each once: every shard of a run on one host
/// samples the same server, so of each pid only the samples of the lowest shard are kept.
pub fn targets(procs: &[ProcUsage]) -> Vec<&ProcUsage> {
    let mut out: Vec<&ProcUsage> = Vec::new();
    for p in procs.iter().filter(|p| !p.generator) {
        match out.iter_mut().find(|q| q.pid == p.pid && q.name == p.name) {
            Some(q) if p.shard < q.shard => *q = p,
            Some(_) => {}
            None => out.push(p),
        }
    }
    out
}

/// The CPU (% of one core) and resident memory (bytes) of `procs` summed per sample
/// second; a process sampled twice in one second (the last sample of a run) counts once,
/// with its later sample.
pub fn usage_by_second<'a>(
    procs: impl IntoIterator<Item = &'a ProcUsage>,
) -> std::collections::BTreeMap<u32, (f64, u64)> {
    let mut sums: std::collections::BTreeMap<u32, (f64, u64)> = Default::default();
    for p in procs {
        let own: std::collections::BTreeMap<u32, (f32, u64)> = p
            .series
            .iter()
            .map(|&(sec, cpu, rss)| (sec, (cpu, rss)))
            .collect();
        for (sec, (cpu, rss)) in own {
            let e = sums.entry(sec).or_default();
            e.0 += f64::from(cpu);
            e.1 += rss;
        }
    }
    sums
}

/// The TCP byte counts of `procs` summed per sample second: (received, sent), for the
/// seconds at which every one of them was sampled.
pub fn tcp_by_second<'a>(
    procs: impl IntoIterator<Item = &'a ProcUsage>,
) -> std::collections::BTreeMap<u32, (u64, u64)> {
    let mut sums: std::collections::BTreeMap<u32, (u64, u64, usize)> = Default::default();
    let mut n = 0;
    for p in procs {
        n += 1;
        // Of two samples in one second (the last of a run, after the sockets closed) the
        // first counts.
        let mut own: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
        for &(sec, received, sent) in &p.tcp {
            own.entry(sec).or_insert((received, sent));
        }
        for (sec, (received, sent)) in own {
            let e = sums.entry(sec).or_default();
            e.0 += received;
            e.1 += sent;
            e.2 += 1;
        }
    }
    sums.into_iter()
        .filter(|(_, e)| e.2 == n)
        .map(|(sec, e)| (sec, (e.0, e.1)))
        .collect()
}

/// Bytes received and sent in metrics second `sec` from [`tcp_by_second`]: a sample taken
/// at second `t` closes metrics second `t - 1`, so the samples `sec` and `sec + 1` bound
/// it. `None` when either is missing or a sum shrank (sockets closed in between).
pub fn tcp_in_second(
    sums: &std::collections::BTreeMap<u32, (u64, u64)>,
    sec: u32,
) -> Option<(u64, u64)> {
    let (lo, hi) = (sums.get(&sec)?, sums.get(&(sec + 1))?);
    Some((hi.0.checked_sub(lo.0)?, hi.1.checked_sub(lo.1)?))
}

/// One reading of a process.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    cpu_ticks: u64,
    rss: u64,
    threads: u64,
    fds: u64,
}

fn read(pid: u32) -> Option<Reading> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name, which may itself hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    let cpu_ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| crate::sys::status_value(&status, name);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    Some(Reading {
        at: Instant::now(),
        cpu_ticks,
        rss: field("VmRSS:") * 1024,
        threads: field("Threads:"),
        fds,
    })
}

/// Process ids whose `/proc/PID/comm` is `name`.
pub fn pids_named(name: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .collect();
    pids.sort_unstable();
    pids
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_or_else(|_| format!("pid {pid}"), |c| c.trim_end().to_owned())
}

/// Samples a set of processes.
#[derive(Debug)]
pub struct Monitor {
    t0: Instant,
    procs: Vec<(ProcUsage, Option<Reading>)>,
}

impl Monitor {
    /// Watches the generator (this process) and `pids`, for a run that started at `t0`.
    pub fn new(t0: Instant, shard: u32, pids: &[u32]) -> Self {
        let me = std::process::id();
        let mut procs = vec![(
            ProcUsage {
                name: "msgstorm (generator)".to_owned(),
                pid: me,
                shard,
                generator: true,
                ..ProcUsage::default()
            },
            read(me),
        )];
        for &pid in pids.iter().filter(|&&p| p != me) {
            procs.push((
                ProcUsage {
                    name: comm(pid),
                    pid,
                    shard,
                    // The baseline at the start of second 0.
                    tcp: tcp::bytes_of(pid)
                        .map(|b| vec![(0, b.received, b.sent)])
                        .unwrap_or_default(),
                    ..ProcUsage::default()
                },
                read(pid),
            ));
        }
        Monitor { t0, procs }
    }

    /// Takes one sample of every process.
    pub fn sample(&mut self) {
        let sec = self.t0.elapsed().as_secs() as u32;
        for (usage, last) in &mut self.procs {
            if usage.exited {
                continue;
            }
            let Some(now) = read(usage.pid) else {
                usage.exited = true;
                continue;
            };
            if !usage.generator {
                if let Ok(b) = tcp::bytes_of(usage.pid) {
                    usage.tcp.push((sec, b.received, b.sent));
                }
            }
            usage.rss_peak_bytes = usage.rss_peak_bytes.max(now.rss);
            usage.threads_peak = usage.threads_peak.max(now.threads);
            usage.fds_peak = usage.fds_peak.max(now.fds);
            match last {
                Some(prev) => {
                    // CPU time moves in whole ticks: over a short span one tick reads as a
                    // busy core. Such a span is folded into the next sample instead.
                    let dt = now.at.duration_since(prev.at);
                    if dt >= MIN_CPU_SPAN {
                        let ticks = now.cpu_ticks.saturating_sub(prev.cpu_ticks) as f64;
                        let pct = ticks / USER_HZ / dt.as_secs_f64() * 100.0;
                        usage.series.push((sec, pct as f32, now.rss));
                        *last = Some(now);
                    }
                }
                None => *last = Some(now),
            }
        }
    }

    /// Samples every `every` until `stop` resolves, then returns the usage of each process.
    pub async fn run(
        mut self,
        every: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) -> Vec<ProcUsage> {
        tokio::pin!(stop);
        // The first sample one period after the baseline readings, not at once.
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.sample(),
                () = &mut stop => break,
            }
        }
        self.sample();
        self.finish()
    }

    /// The usage of each process so far.
    pub fn finish(self) -> Vec<ProcUsage> {
        self.procs
            .into_iter()
            .map(|(mut u, _)| {
                let n = u.series.len().max(1) as f64;
                u.cpu_avg_pct = u.series.iter().map(|s| f64::from(s.1)).sum::<f64>() / n;
                u.cpu_peak_pct = u.series.iter().map(|s| f64::from(s.1)).fold(0.0, f64::max);
                u
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process() {
        let t0 = Instant::now();
        let mut m = Monitor::new(t0, 0, &[]);
        m.sample();
        assert!(
            m.procs[0].0.series.is_empty(),
            "a sample right after the baseline is too short to say anything about CPU"
        );
        let mut x = 0u64;
        let busy = Instant::now();
        while busy.elapsed() < MIN_CPU_SPAN + Duration::from_millis(100) {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        assert_ne!(x, 1);
        m.sample();
        let u = m.finish();
        assert_eq!(u.len(), 1);
        assert!(u[0].generator);
        assert!(u[0].rss_peak_bytes > 0);
        assert!(u[0].threads_peak >= 1);
        assert!(u[0].fds_peak >= 3);
        assert_eq!(u[0].series.len(), 1);
        assert!(u[0].cpu_peak_pct > 0.0, "{:?}", u[0]);
    }

    /// Keeps this thread's core busy for `span`.
    fn busy(span: Duration) {
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < span {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        assert_ne!(x, 1);
    }

    #[test]
    fn a_short_last_sample_adds_no_cpu_point() {
        let mut m = Monitor::new(Instant::now(), 0, &[]);
        busy(Duration::from_secs(1));
        m.sample();
        let first = m.procs[0].0.series.clone();
        assert_eq!(first.len(), 1, "a real one-second sample: {first:?}");
        // The end of a run: one or two more samples within 100 ms of the last, busy.
        let end = Instant::now();
        busy(Duration::from_millis(40));
        m.sample();
        busy(Duration::from_millis(40));
        m.sample();
        assert!(
            end.elapsed() < MIN_CPU_SPAN,
            "the end samples were not short"
        );
        let u = m.finish();
        assert_eq!(u[0].series, first, "the partial interval is no CPU point");
        assert_eq!(u[0].cpu_peak_pct, f64::from(first[0].1));
    }

    #[test]
    fn finds_processes_by_name_and_notices_exit() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until the child has exec'd, its name is still the test binary's.
        let named = (0..200).any(|_| {
            let found = pids_named("sleep").contains(&pid);
            if !found {
                std::thread::sleep(Duration::from_millis(5));
            }
            found
        });
        assert!(named, "sleep (pid {pid}) was never found by name");
        let mut m = Monitor::new(Instant::now(), 0, &[pid]);
        assert_eq!(m.procs[1].0.name, "sleep");
        child.kill().unwrap();
        child.wait().unwrap();
        m.sample();
        let u = m.finish();
        assert!(u[1].exited);
    }
}
