//! The bounded outbound queue of one connection: producers (the writer, the hub, the
//! worker pool, the session itself) never block; an overflow (of frames or of bytes)
//! closes the queue with `slow_consumer` and frees what it held, so memory never grows
//! past the bound.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::Utf8Bytes;
use tokio::sync::Notify;

use super::metrics::Metrics;
use crate::wire::ErrorCode;

/// What happened to a pushed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// It waits in the queue.
    Queued,
    /// The queue was full: it is now closed with `slow_consumer`.
    Overflow,
    /// The queue was already closed; the frame was discarded.
    Closed,
}

#[derive(Debug, Default)]
struct State {
    frames: VecDeque<Utf8Bytes>,
    /// Bytes of `frames`.
    bytes: usize,
    closed: Option<ErrorCode>,
}

/// One connection's outbound queue of serialized frames.
#[derive(Debug)]
pub struct Outbox {
    state: Mutex<State>,
    notify: Notify,
    cap: usize,
    cap_bytes: usize,
    metrics: Arc<Metrics>,
}

impl Outbox {
    /// An empty queue holding at most `cap` frames and `cap_bytes` bytes (one frame
    /// larger than `cap_bytes` still fits in an empty queue).
    pub fn new(cap: usize, cap_bytes: usize, metrics: Arc<Metrics>) -> Self {
        Outbox {
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            cap: cap.max(1),
            cap_bytes,
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the queue inconsistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a frame without blocking.
    pub fn push(&self, frame: Utf8Bytes) -> Pushed {
        let mut s = self.lock();
        if s.closed.is_some() {
            return Pushed::Closed;
        }
        let too_many_bytes = !s.frames.is_empty() && s.bytes + frame.len() > self.cap_bytes;
        if s.frames.len() >= self.cap || too_many_bytes {
            self.discard(&mut s, ErrorCode::SlowConsumer);
            drop(s);
            self.metrics.slow_consumers.inc();
            self.notify.notify_one();
            return Pushed::Overflow;
        }
        s.bytes += frame.len();
        s.frames.push_back(frame);
        let depth = s.frames.len();
        drop(s);
        self.metrics.queue_depth.inc();
        self.metrics.observe_queue_depth(depth);
        self.notify.notify_one();
        Pushed::Queued
    }

    /// Closes the queue with `reason` (the first reason wins) and drops what it holds.
    pub fn close(&self, reason: ErrorCode) {
        let mut s = self.lock();
        if s.closed.is_none() {
            self.discard(&mut s, reason);
        }
        drop(s);
        self.notify.notify_one();
    }

    fn discard(&self, s: &mut State, reason: ErrorCode) {
        s.closed = Some(reason);
        let n = i64::try_from(s.frames.len()).unwrap_or(i64::MAX);
        s.frames = VecDeque::new();
        s.bytes = 0;
        self.metrics.queue_depth.dec_by(n);
    }

    /// Moves up to `max` frames, and no more than `max_bytes` bytes unless a single frame
    /// is larger, into `out`; returns the close reason once closed.
    pub fn drain(
        &self,
        max: usize,
        max_bytes: usize,
        out: &mut Vec<Utf8Bytes>,
    ) -> Option<ErrorCode> {
        let mut s = self.lock();
        if let Some(reason) = s.closed {
            return Some(reason);
        }
        let mut n = 0;
        let mut bytes = 0;
        for f in s.frames.iter().take(max) {
            if n > 0 && bytes + f.len() > max_bytes {
                break;
            }
            bytes += f.len();
            n += 1;
        }
        s.bytes -= bytes;
        out.extend(s.frames.drain(..n));
        if s.frames.is_empty() {
            // An idle connection holds no queue memory at all.
            s.frames = VecDeque::new();
        }
        let more = !s.frames.is_empty();
        drop(s);
        self.metrics
            .queue_depth
            .dec_by(i64::try_from(n).unwrap_or(i64::MAX));
        if more {
            self.notify.notify_one();
        }
        None
    }

    /// The close reason, if closed.
    pub fn closed(&self) -> Option<ErrorCode> {
        self.lock().closed
    }

    /// Resolves after a push, a close, or a drain that left frames behind.
    pub async fn changed(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        let s = self.lock();
        let n = i64::try_from(s.frames.len()).unwrap_or(i64::MAX);
        drop(s);
        self.metrics.queue_depth.dec_by(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_closes_and_frees() {
        let m = Arc::new(Metrics::new());
        let o = Outbox::new(2, 1024, m.clone());
        assert_eq!(o.push("a".into()), Pushed::Queued);
        assert_eq!(o.push("b".into()), Pushed::Queued);
        assert_eq!(m.queue_depth.get(), 2);
        assert_eq!(o.push("c".into()), Pushed::Overflow);
        assert_eq!(o.push("d".into()), Pushed::Closed);
        assert_eq!(m.queue_depth.get(), 0);
        assert_eq!(m.slow_consumers.get(), 1);
        let mut out = Vec::new();
        assert_eq!(o.drain(10, 1024, &mut out), Some(ErrorCode::SlowConsumer));
        assert!(out.is_empty());
    }

    #[test]
    fn bytes_bound_the_queue_too() {
        let m = Arc::new(Metrics::new());
        let o = Outbox::new(100, 4, m.clone());
        assert_eq!(
            o.push("12345".into()),
            Pushed::Queued,
            "one large frame fits"
        );
        let mut out = Vec::new();
        assert_eq!(o.drain(10, 1024, &mut out), None);
        assert_eq!(o.push("12".into()), Pushed::Queued);
        assert_eq!(o.push("34".into()), Pushed::Queued);
        assert_eq!(o.push("5".into()), Pushed::Overflow);
        assert_eq!(m.queue_depth.get(), 0);
    }

    #[test]
    fn drain_is_fifo_and_bounded() {
        let m = Arc::new(Metrics::new());
        let o = Outbox::new(8, 1024, m.clone());
        for s in ["1", "2", "3"] {
            o.push(s.into());
        }
        let mut out = Vec::new();
        assert_eq!(o.drain(2, 1024, &mut out), None);
        assert_eq!(out, vec![Utf8Bytes::from("1"), Utf8Bytes::from("2")]);
        assert_eq!(m.queue_depth.get(), 1);
        o.push("45".into());
        o.push("6".into());
        out.clear();
        assert_eq!(o.drain(10, 2, &mut out), None, "bytes bound the batch");
        assert_eq!(out, vec![Utf8Bytes::from("3")]);
        out.clear();
        assert_eq!(o.drain(10, 1, &mut out), None, "one frame even when larger");
        assert_eq!(out, vec![Utf8Bytes::from("45")]);
        assert_eq!(m.queue_depth.get(), 1);
        drop(o);
        assert_eq!(m.queue_depth.get(), 0);
    }
}
