//! One timer for all the users of a process: a user waiting for its next due work (a
//! send, a heartbeat, a reconnect) leaves its waker in a calendar queue keyed by the due
//! time, at O(1) cost, and one task wakes when the earliest entry is due, wakes every user
//! due by then in one pass, and sleeps until the next. A user stays registered while socket
//! events wake it in between, so a delivery costs the timer nothing; a due time is never
//! fired early, and fires on the first timer tick at or after it (tokio's 1 ms), as a
//! per-user timer did.
//!
//! Written by hand (issue #17): tokio's timer serves one `Sleep` per waiter, armed and
//! removed under the time driver's lock on every wait of every user, and no crate offers a
//! wheel of plain wakers that a waiter can leave armed across its wake-ups.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The width of one slot of the calendar.
const SLOT: Duration = Duration::from_millis(1);
/// Slots in the calendar (≈ 4 s of them): a due time up to this far ahead costs O(1); one
/// further ahead is passed over once per lap until its lap comes.
const SLOTS: u64 = 4096;

/// The process's timer for due work; [`TimerWheel::run`] is its task.
#[derive(Debug)]
pub struct TimerWheel {
    /// The calendar.
    wheel: Mutex<Wheel>,
    /// Tells the task that an entry is due before the time it sleeps until.
    earlier: Notify,
}

/// A calendar queue: entry `(due, waker)` lives in slot `slot(due) % SLOTS`.
#[derive(Debug)]
struct Wheel {
    /// The start of slot 0.
    origin: Instant,
    /// Entries by slot.
    slots: Vec<Vec<(Instant, Waker)>>,
    /// The buffers of slots that were emptied, for the next slot to fill: the calendar
    /// holds memory for the slots in use, not for every slot at its busiest.
    spare: Vec<Vec<(Instant, Waker)>>,
    /// Entries in all.
    len: usize,
    /// Every entry of this slot and before has been fired.
    fired: u64,
    /// The earliest due entry, when the task is to wake next.
    next: Option<Instant>,
}

impl Wheel {
    /// The slot of `t`: slot `k` holds the due times in `((k-1)·SLOT, k·SLOT]` past `origin`.
    fn slot(&self, t: Instant) -> u64 {
        let since = t.saturating_duration_since(self.origin).as_nanos();
        since.div_ceil(SLOT.as_nanos()) as u64
    }

    /// Takes every entry due by `now` into `out`, and finds the next one due.
    fn fire(&mut self, now: Instant, out: &mut Vec<Waker>) {
        // Slot `upto` is due in full; the one after it may be due in part.
        let upto = self.slot(now).saturating_sub(1).max(self.fired);
        let from = self.fired + 1;
        let last = (upto + 1).min(from + SLOTS - 1);
        for k in from..=last {
            let bucket = &mut self.slots[(k % SLOTS) as usize];
            let before = bucket.len();
            bucket.retain(|(due, w)| {
                let fire = *due <= now;
                if fire {
                    out.push(w.clone());
                }
                !fire
            });
            self.len -= before - bucket.len();
            if bucket.is_empty() && bucket.capacity() > 0 {
                self.spare.push(std::mem::take(bucket));
            }
        }
        self.fired = upto;
        self.next = self.earliest();
    }

    /// The earliest due time of all entries: the first slot ahead holding an entry of
    /// its own lap, or (none within a lap) the earliest of the later laps.
    fn earliest(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let mut later: Option<Instant> = None;
        for k in self.fired + 1..=self.fired + SLOTS {
            for &(due, _) in &self.slots[(k % SLOTS) as usize] {
                if self.slot(due) <= k {
                    // Of this lap (or left over from a slot already passed): due first.
                    return self.slots[(k % SLOTS) as usize]
                        .iter()
                        .filter(|(d, _)| self.slot(*d) <= k)
                        .map(|(d, _)| *d)
                        .min();
                }
                later = Some(later.map_or(due, |l| l.min(due)));
            }
        }
        later
    }
}

impl Default for TimerWheel {
    fn default() -> Self {
        TimerWheel {
            wheel: Mutex::new(Wheel {
                origin: Instant::now(),
                slots: (0..SLOTS).map(|_| Vec::new()).collect(),
                spare: Vec::new(),
                len: 0,
                fired: 0,
                next: None,
            }),
            earlier: Notify::new(),
        }
    }
}

impl TimerWheel {
    fn wheel(&self) -> MutexGuard<'_, Wheel> {
        // An entry is a plain waker: a panic elsewhere leaves the calendar consistent.
        self.wheel.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes `waker` once `due` has passed (at once if the timer has passed it already).
    pub fn wake_at(&self, due: Instant, waker: Waker) {
        let mut guard = self.wheel();
        let w = &mut *guard;
        let slot = w.slot(due);
        if slot <= w.fired {
            drop(guard);
            waker.wake();
            return;
        }
        let bucket = &mut w.slots[(slot % SLOTS) as usize];
        if bucket.capacity() == 0 {
            *bucket = w.spare.pop().unwrap_or_default();
        }
        bucket.push((due, waker));
        w.len += 1;
        if w.next.is_none_or(|n| due < n) {
            w.next = Some(due);
            drop(guard);
            self.earlier.notify_one();
        }
    }

    /// Ready once `due` has passed, as of `now` (the caller's reading of the clock, just
    /// taken). `armed` is the caller's record of the due time it registered last: while
    /// that one is still ahead and not after `due`, the caller is woken in time without
    /// registering again (an earlier one wakes it to register anew).
    pub fn poll_due(
        &self,
        cx: &mut Context<'_>,
        due: Instant,
        now: Instant,
        armed: &mut Option<Instant>,
    ) -> Poll<()> {
        if now >= due {
            return Poll::Ready(());
        }
        if !armed.is_some_and(|a| a <= due && a > now) {
            self.wake_at(due, cx.waker().clone());
            *armed = Some(due);
        }
        Poll::Pending
    }

    /// The timer's task: wakes whoever is due, sleeps until the next due time. Runs until
    /// it is aborted.
    pub async fn run(self: Arc<Self>) {
        let mut due = Vec::new();
        loop {
            let next = {
                let mut w = self.wheel();
                w.fire(Instant::now(), &mut due);
                w.next
            };
            for waker in due.drain(..) {
                waker.wake();
            }
            match next {
                Some(t) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(t) => {}
                        _ = self.earlier.notified() => {}
                    }
                }
                None => self.earlier.notified().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Wake;

    use super::*;

    /// A waker that records when it was woken.
    #[derive(Default)]
    struct Count(Mutex<Vec<Instant>>);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.lock().unwrap().push(Instant::now());
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count::default());
        (c.clone(), Waker::from(c))
    }

    fn woken(c: &Count) -> usize {
        c.0.lock().unwrap().len()
    }

    #[tokio::test(start_paused = true)]
    async fn fires_each_entry_once_never_before_its_due_time() {
        let timers = Arc::new(TimerWheel::default());
        let task = tokio::spawn(timers.clone().run());
        let t0 = Instant::now();
        // Inside one slot, across slots, and past a whole lap of the calendar.
        let offsets = [300, 700, 3_000, 5_000_000, 9_000_000, 9_000_001];
        let entries: Vec<_> = offsets
            .iter()
            .map(|&us| {
                let due = t0 + Duration::from_micros(us);
                let (c, w) = counter();
                timers.wake_at(due, w);
                (due, c)
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(10)).await;
        for (due, c) in &entries {
            let at = c.0.lock().unwrap().clone();
            assert_eq!(at.len(), 1, "{due:?}: woken {at:?}");
            assert!(at[0] >= *due, "fired {:?} before it was due", *due - at[0]);
            assert!(at[0] <= *due + 2 * SLOT, "fired {:?} late", at[0] - *due);
        }
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_entry_wakes_the_sleeping_timer_and_a_passed_one_fires_at_once() {
        let timers = Arc::new(TimerWheel::default());
        let task = tokio::spawn(timers.clone().run());
        let t0 = Instant::now();
        let (late, w) = counter();
        timers.wake_at(t0 + Duration::from_secs(2), w);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (soon, w) = counter();
        timers.wake_at(t0 + Duration::from_millis(20), w);
        tokio::time::sleep_until(t0 + Duration::from_millis(21)).await;
        tokio::task::yield_now().await;
        assert_eq!((woken(&soon), woken(&late)), (1, 0));
        let (passed, w) = counter();
        timers.wake_at(t0, w);
        assert_eq!(woken(&passed), 1);
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_registers_once_per_due_time() {
        let timers = Arc::new(TimerWheel::default());
        let task = tokio::spawn(timers.clone().run());
        let due = Instant::now() + Duration::from_millis(50);
        let mut armed = None;
        let mut polls = 0;
        std::future::poll_fn(|cx| {
            polls += 1;
            timers.poll_due(cx, due, Instant::now(), &mut armed)
        })
        .await;
        assert!(Instant::now() >= due);
        assert_eq!(polls, 2, "polled once to register and once when due");
        assert_eq!(armed, Some(due));
        // Polled again before a later due time while armed for it: no second entry.
        let later = Instant::now() + Duration::from_millis(50);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(timers
            .poll_due(&mut cx, later, Instant::now(), &mut armed)
            .is_pending());
        assert!(timers
            .poll_due(&mut cx, later, Instant::now(), &mut armed)
            .is_pending());
        assert_eq!(timers.wheel().len, 1);
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_emptied_slot_gives_its_buffer_to_the_next_slot_filled() {
        let timers = Arc::new(TimerWheel::default());
        let task = tokio::spawn(timers.clone().run());
        let t0 = Instant::now();
        for _ in 0..100 {
            timers.wake_at(
                t0 + Duration::from_millis(5),
                futures_util::task::noop_waker(),
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        {
            let w = timers.wheel();
            assert_eq!(w.len, 0);
            assert!(w.slots.iter().all(|b| b.capacity() == 0));
            assert_eq!(w.spare.len(), 1);
        }
        timers.wake_at(
            t0 + Duration::from_secs(1),
            futures_util::task::noop_waker(),
        );
        let w = timers.wheel();
        assert!(w.spare.is_empty());
        assert!(w.slots.iter().any(|b| b.capacity() >= 100));
        drop(w);
        task.abort();
    }
}
