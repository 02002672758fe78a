//! Sending: the sends that are due (open loop: late sends go out at once and their latency
//! still counts from the due time) and the closed-loop requests.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::Vu;
use crate::driver::{Dest, Driver, Failure, Session};
use crate::engine::schedule::{NextSend, To};
use crate::envelope::{self, Envelope};
use crate::metrics::{Counter, ErrorKind};
use crate::scenario::StreamId;

/// Sends written per wake-up at most. A user far behind its schedule reads its socket
/// between bursts, so it never blocks writing while the server blocks writing to it.
const SEND_BURST: usize = 256;

/// A send waiting for the server's acceptance.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) stream: StreamId,
    pub(super) seq: u64,
    pub(super) due: Instant,
    /// Deliveries it makes in this process once accepted.
    pub(super) recipients: u32,
}

impl<D: Driver> Vu<D> {
    /// Sends everything that is due by `now`, then the next request if one is due. Stops
    /// at a send that found the connection gone and returns its failure: the connection's
    /// end, for the caller to count once.
    pub(super) async fn send_due(
        &mut self,
        mut session: Option<&mut D::Session>,
        ts: Instant,
        now: Instant,
    ) -> Option<Failure> {
        let mut burst = 0;
        for i in 0..self.spec.plan.programs.len() {
            while let Some(due) = self.spec.plan.programs[i].due() {
                let due = ts + due;
                if due > now || burst == SEND_BURST {
                    break;
                }
                burst += 1;
                let next = self.spec.plan.programs[i].advance();
                self.sent_due(i, due);
                match session.as_deref_mut() {
                    Some(s) => {
                        if let Err(gone) = self.send_one(s, i, next, due, now).await {
                            self.flush_tally();
                            return Some(gone);
                        }
                    }
                    None => {
                        // Offline when due: not sent, so expected nowhere.
                        let t = self.tally(now);
                        t.dropped(next.stream, next.seq);
                        t.count(Counter::Dropped, 1);
                    }
                }
                if self.tally.full() {
                    self.flush_tally();
                }
            }
        }
        // Before the caller waits on the socket: what was sent is on record.
        self.flush_tally();
        if let (Some(s), Some(ts)) = (session, self.traffic_start()) {
            if self.outstanding.is_none() {
                self.request(s, ts, now).await;
            }
        }
        None
    }

    /// Sends `next` of program `i`, due at `due`. A failed send is counted; one that found
    /// the connection closed (`closed_by_peer`) comes back as `Err`, its error left to the
    /// connection's end so that one lost connection is one error.
    async fn send_one(
        &mut self,
        s: &mut D::Session,
        i: usize,
        next: NextSend,
        due: Instant,
        now: Instant,
    ) -> Result<(), Failure> {
        let program = &self.spec.plan.programs[i];
        let (due_us, when) = self.shared.wall_and_when(due);
        body_of(
            &mut self.body,
            self.shared.run_id,
            next,
            due_us,
            next.size
                .unwrap_or_else(|| program.size.at(next.stream, next.seq)),
        );
        let to = program.sends.to(&next);
        let recipients = match &to {
            To::User(r, _) => u32::from(self.cfg.range.contains(r) && *r != self.spec.ctx.ix),
            To::Group(group) => {
                let online = self.shared.group_online[group.index]
                    .load(Ordering::Relaxed)
                    .saturating_sub(1);
                self.shared
                    .fanout_start(next.stream, next.seq, online, due_us);
                self.shared.local_recipients(group, true)
            }
            To::Echo => 1,
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        let dest = match &to {
            To::User(_, id) => Dest::User(id),
            To::Group(group) => Dest::Group(&group.name),
            To::Echo => Dest::User(&self.spec.ctx.id),
        };
        let sent = s.send(tag, dest, &self.body).await;
        let bytes = self.body.len() as u64;
        let acceptance = self.cfg.acceptance;
        let by_pattern = !self.shared.patterns.names.is_empty();
        let t = self.tally(now);
        // Its lag is taken once the wake-up's writes are done (see `Vu::sends_written`).
        t.handed(due);
        t.sent(next.stream, next.seq, when);
        match sent {
            Ok(()) => {
                t.count(Counter::Sent, 1);
                if by_pattern {
                    t.written(next.stream);
                }
                t.count(Counter::BytesOut, bytes);
                t.live.sent += 1;
                if !acceptance {
                    t.live.expected += u64::from(recipients);
                }
            }
            Err(f) => {
                t.refused(next.stream, next.seq);
                t.count(Counter::SendErrors, 1);
                if f.kind == ErrorKind::ClosedByPeer {
                    return Err(f);
                }
                t.error(f.kind, f.detail);
                return Ok(());
            }
        }
        if acceptance {
            let pending = Pending {
                stream: next.stream,
                seq: next.seq,
                due,
                recipients,
            };
            self.pending.insert(tag, pending);
        }
        Ok(())
    }

    /// Sends the request of the step this user works in at `now`, if any.
    async fn request(&mut self, s: &mut D::Session, ts: Instant, now: Instant) {
        let offset = now.saturating_duration_since(ts);
        let Some(kind) = self
            .spec
            .plan
            .requests
            .iter()
            .find(|r| r.active_at(offset))
            .map(|r| r.kind)
        else {
            return;
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        match s.request(tag, kind).await {
            Ok(()) => {
                self.outstanding = Some((tag, Instant::now()));
                self.count(Counter::Requests, 1);
            }
            Err(f) => self.error(ErrorKind::RequestFailed, f.detail),
        }
    }

    /// When this user's next closed-loop request should go out, if it works in a step.
    pub(super) fn next_request_time(&self, ts: Instant, now: Instant) -> Option<Instant> {
        let offset = now.saturating_duration_since(ts);
        let mut best: Option<Instant> = None;
        for role in &self.spec.plan.requests {
            if role.active_at(offset) {
                return Some(now);
            }
            let step = role.step_duration;
            let mut t = role.start;
            while t < role.end() {
                if t + step > offset && role.active_at(t) {
                    let at = ts + t.max(offset);
                    best = Some(best.map_or(at, |b: Instant| b.min(at)));
                    break;
                }
                t += step;
            }
        }
        best
    }
}

/// Writes into `body` (emptied first) the envelope of `next`, a send of run `run` due at
/// `due_us`, padded to `size`.
fn body_of(body: &mut String, run: u32, next: NextSend, due_us: u64, size: usize) {
    body.clear();
    let env = Envelope {
        run,
        stream: next.stream,
        seq: next.seq,
        due_us,
    };
    envelope::encode(&env, size, body);
}
