//! The few operating-system facts msgstorm needs: the open-file limit, this process's CPU
//! time and memory. The `libc` calls are the only unsafe code in the crate.

use std::time::Duration;

/// The open-file limit after raising the soft limit to the hard limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// Soft limit before the change.
    pub was: u64,
    /// Soft limit now.
    pub now: u64,
}

/// Raises this process's soft open-file limit to its hard limit (real users' boxes usually
/// allow more than the default 1,024; here the hard limit is fixed).
#[allow(unsafe_code)]
pub fn raise_fd_limit() -> std::io::Result<FdLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let was = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit read above with only the soft limit raised.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(FdLimit {
        was,
        now: lim.rlim_cur,
    })
}

/// CPU time (user + system) this process has used so far.
#[allow(unsafe_code)]
pub fn cpu_time() -> Duration {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid and writable for the duration of the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Peak resident memory of this process in bytes (0 when /proc is unavailable).
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status").map_or(0, |s| status_value(&s, "VmHWM:") * 1024)
}

/// Resident memory of this process now, in bytes (0 when /proc is unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status").map_or(0, |s| status_value(&s, "VmRSS:") * 1024)
}

/// The number after `name` (e.g. `"VmRSS:"`, `"Threads:"`) in a `/proc/PID/status` text;
/// 0 when it is missing.
pub fn status_value(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// How many ephemeral ports one source address has towards one destination
/// (`/proc/sys/net/ipv4/ip_local_port_range`; 28,232 by default on Linux).
pub fn ephemeral_ports() -> u64 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|v| v.parse::<u64>().ok());
            Some(it.next()??..=it.next()??)
        })
        .map_or(28_232, |r| r.end().saturating_sub(*r.start()) + 1)
}

/// Number of CPU cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Worker threads the async runtime runs tasks on: `TOKIO_WORKER_THREADS` when it holds a
/// count (tokio's own setting), else one per core this process may use.
pub fn runtime_workers() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_limit_is_at_least_what_it_was() {
        let l = raise_fd_limit().unwrap();
        assert!(l.now >= l.was);
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = cpu_time();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_time() > before);
        assert!(peak_rss_bytes() > 0);
    }

    #[test]
    fn there_are_ephemeral_ports() {
        assert!(ephemeral_ports() > 1000);
    }
}
