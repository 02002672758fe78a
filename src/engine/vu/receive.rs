//! Receiving: the session's events (acceptances, refusals, replies, deliveries) and the
//! envelope check of every delivered body.

use tokio::time::Instant;

use super::Vu;
use crate::driver::{Driver, Event};
use crate::envelope::{self, Decoded, Envelope};
use crate::ledger::Via;
use crate::metrics::{Counter, ErrorKind, Hist};

use super::record::Receipt;

impl<D: Driver> Vu<D> {
    /// Accounts for one event of the session (`Closed` is the caller's business), which
    /// reached the kernel at `arrived` when the socket stamps arrivals.
    pub(super) fn handle(&mut self, ev: Event, arrived: Option<Instant>) {
        let receipt = match &ev {
            Event::Accepted { tag } => Some((*tag, None)),
            Event::Refused { tag, failure } => Some((*tag, Some(failure))),
            _ => None,
        };
        if let Some((tag, refused)) = receipt.filter(|_| self.sig.is_some()) {
            if self.receipt_answered(tag, refused) {
                return;
            }
        }
        match ev {
            Event::Accepted { tag } => {
                if let Some(p) = self.pending.remove(&tag) {
                    let now = arrived.unwrap_or_else(Instant::now);
                    let us = now.saturating_duration_since(p.due).as_micros() as u64;
                    let t = self.tally(now);
                    t.latency(Hist::SendAck, us);
                    t.count(Counter::Accepted, 1);
                    t.live.accepted += 1;
                    t.live.expected += u64::from(p.recipients);
                }
            }
            Event::Refused { tag, failure } => {
                if let Some(p) = self.pending.remove(&tag) {
                    let t = self.tally(Instant::now());
                    t.refused(p.stream, p.seq);
                    t.count(Counter::Refused, 1);
                    t.error(ErrorKind::SendFailed, failure.detail);
                    t.live.refused += 1;
                } else if self.outstanding.is_some_and(|(t, _)| t == tag) {
                    self.outstanding = None;
                    self.error(ErrorKind::RequestFailed, failure.detail);
                }
            }
            Event::Delivered { body } => self.deliver(&body, Via::Push, arrived),
            Event::Reply { tag } => {
                if let Some((t, at)) = self.outstanding {
                    if t == tag {
                        self.outstanding = None;
                        let now = arrived.unwrap_or_else(Instant::now);
                        let us = now.saturating_duration_since(at).as_micros() as u64;
                        let t = self.tally(now);
                        t.latency(Hist::Request, us);
                        t.count(Counter::Replies, 1);
                        t.live.replies += 1;
                    }
                }
            }
            Event::ProtocolError(f) => self.error(f.kind, f.detail),
            Event::Closed(_) => {}
        }
    }

    /// Verifies one delivered body, which reached the kernel at `arrived` when the socket
    /// stamps arrivals, and accounts for it.
    pub(super) fn deliver(&mut self, body: &str, via: Via, arrived: Option<Instant>) {
        if let Some((kind, decoded)) = envelope::token::decode(body) {
            self.signal_arrived(kind, decoded, via);
            return;
        }
        let now = arrived.unwrap_or_else(Instant::now);
        let (sec, now_us) = self.shared.sec_and_wall(now);
        let run = self.shared.run_id;
        let decoded = envelope::decode(body);
        let span = match &decoded {
            Decoded::Intact(env) | Decoded::Corrupt(env) => self.shared.span_of(env.due_us),
            Decoded::Damaged | Decoded::Foreign => 0,
        };
        let receipt = |env: Envelope, corrupt| Receipt {
            stream: env.stream,
            seq: env.seq,
            latency_us: now_us.saturating_sub(env.due_us),
            at_us: now_us,
            span,
            via,
            corrupt,
        };
        let own = match decoded {
            Decoded::Intact(env) | Decoded::Corrupt(env) => {
                env.run == run && self.own_streams.contains(&env.stream)
            }
            Decoded::Damaged | Decoded::Foreign => false,
        };
        let t = self.tally_in(sec);
        t.count(Counter::Received, 1);
        t.count(Counter::BytesIn, body.len() as u64);
        match decoded {
            // The user's own message echoed back (a group topic it also subscribes to).
            _ if own => {}
            Decoded::Intact(env) if env.run == run => {
                let receipt = receipt(env, false);
                // End-to-end latency is the live path; a sync's lateness is the user's absence.
                if via == Via::Push {
                    t.latency(Hist::EndToEnd, receipt.latency_us);
                }
                t.receipt(receipt);
                self.maybe_read(&env, now);
            }
            Decoded::Corrupt(env) if env.run == run => t.receipt(receipt(env, true)),
            Decoded::Damaged => t.damaged(),
            Decoded::Intact(_) | Decoded::Corrupt(_) | Decoded::Foreign => {
                t.error(
                    ErrorKind::Foreign,
                    format!("body not from this run: {}", clip(body)),
                );
            }
        }
        if self.tally.full() {
            self.flush_tally();
        }
    }
}

/// The first 80 characters of a body, for error examples.
fn clip(body: &str) -> String {
    body.chars().take(80).collect()
}
