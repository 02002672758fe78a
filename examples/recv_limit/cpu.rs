//! CPU time and sleeps from `getrusage`: of the process, or of the calling thread.

use std::time::Duration;

/// User and system CPU time, and how often the thread or process went to sleep.
#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    /// User-space time.
    pub user: Duration,
    /// Kernel time.
    pub sys: Duration,
    /// Voluntary context switches: each a sleep and a wake-up.
    pub sleeps: u64,
}

impl Usage {
    /// The process's CPU time so far.
    pub fn process() -> Self {
        Self::of(libc::RUSAGE_SELF)
    }

    /// The calling thread's CPU time so far.
    pub fn thread() -> Self {
        Self::of(libc::RUSAGE_THREAD)
    }

    /// CPU time spent since `earlier`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
            sleeps: self.sleeps.saturating_sub(earlier.sleeps),
        }
    }

    /// User plus system time, in seconds.
    pub fn total_s(self) -> f64 {
        (self.user + self.sys).as_secs_f64()
    }

    fn of(who: libc::c_int) -> Self {
        // SAFETY: an all-zero `rusage` is a valid value; getrusage only writes into it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable `rusage`; `who` is RUSAGE_SELF or _THREAD,
        // which cannot fail.
        unsafe { libc::getrusage(who, &mut ru) };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Self {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
            sleeps: ru.ru_nvcsw as u64,
        }
    }
}
