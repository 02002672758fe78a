//! The async runtime the binary runs on, and the generator's wake tick.
//!
//! One thread per core (one core: tokio's current-thread scheduler), and, when a run asks
//! for it (`wake_tick` in the scenario), a tick: before a thread waits for its sockets it
//! sleeps to the next boundary of the tick, so that one wake-up takes everything that
//! arrived within it instead of one push at a time. That is the cost the receive path's
//! limit showed (`bench/results/2026-11-28-recv-limit.md`): a wake-up, a `recv` and a task
//! poll per push. The boundaries are those of tokio's own 1 ms timer ticks, so a send's
//! timer fires at the tick it would have fired at anyway; receive times come from the
//! kernel where the socket stamps them ([`crate::driver::kit::connect::Metered`]), so the
//! sleep does not show in latencies.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How the note a run with a wake tick leaves in its result begins; the report tells such a
/// run by it.
pub const WAKE_TICK_NOTE_START: &str = "wake tick ";

/// The tick in nanoseconds; 0 while no run asks for one.
static TICK_NS: AtomicU64 = AtomicU64::new(0);
/// Where the ticks count from: right after the runtime (and its timer) was built.
static ORIGIN: OnceLock<Instant> = OnceLock::new();

thread_local! {
    /// When this thread last woke from waiting.
    static WOKE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Builds the runtime for this process, with as many workers as
/// [`crate::sys::runtime_workers`] says ([`build_for`]).
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    build_for(crate::sys::runtime_workers())
}

/// Builds a runtime of `workers` threads: the current-thread scheduler for one, else the
/// multi-thread one, with the wake tick's hooks on every thread.
pub fn build_for(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    // On one worker the multi-thread scheduler only adds cost (a clock read and an average
    // per batch of tasks, the main future on a thread of its own, wake-ups across the two):
    // confined to one core, everything runs on this thread.
    let mut builder = if workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    let runtime = builder
        .enable_all()
        .on_thread_park(before_wait)
        .on_thread_unpark(|| {
            if TICK_NS.load(Ordering::Relaxed) != 0 {
                WOKE.set(Some(Instant::now()));
            }
        })
        .build()?;
    // After the build, so that the boundaries fall at or just after the timer's own.
    ORIGIN.get_or_init(Instant::now);
    Ok(runtime)
}

/// Sets the tick the threads sleep to before they wait (`Duration::ZERO`: none).
pub fn set_wake_tick(tick: Duration) {
    let ns = u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX);
    TICK_NS.store(ns, Ordering::Relaxed);
}

/// The tick set by [`set_wake_tick`], when one is.
pub fn wake_tick() -> Option<Duration> {
    match TICK_NS.load(Ordering::Relaxed) {
        0 => None,
        ns => Some(Duration::from_nanos(ns)),
    }
}

/// Sleeps to the next tick boundary, unless a boundary passed since the thread woke: then
/// it was busy through one, a timer may be due, and it waits at once.
fn before_wait() {
    let tick = TICK_NS.load(Ordering::Relaxed);
    let Some(&origin) = ORIGIN.get().filter(|_| tick != 0) else {
        return;
    };
    let now = Instant::now();
    let at = tick_of(origin, now, tick);
    if WOKE.get().is_some_and(|w| tick_of(origin, w, tick) != at) {
        return;
    }
    let next = origin + Duration::from_nanos((at + 1).saturating_mul(tick));
    std::thread::sleep(next.saturating_duration_since(now));
}

/// Where the ticks count from, once a runtime was built by [`build_for`]: tick `n` ends at
/// `origin + n·tick`.
pub fn tick_origin() -> Option<Instant> {
    ORIGIN.get().copied()
}

/// The number of whole ticks from `origin` to `t`.
fn tick_of(origin: Instant, t: Instant, tick: u64) -> u64 {
    u64::try_from(t.saturating_duration_since(origin).as_nanos() / u128::from(tick))
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_count_whole_periods_from_the_origin() {
        let o = Instant::now();
        assert_eq!(tick_of(o, o, 1_000_000), 0);
        assert_eq!(tick_of(o, o + Duration::from_micros(999), 1_000_000), 0);
        assert_eq!(tick_of(o, o + Duration::from_micros(1000), 1_000_000), 1);
        assert_eq!(tick_of(o, o + Duration::from_millis(7), 1_000_000), 7);
    }
}
