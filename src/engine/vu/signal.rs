//! Signals: a read receipt for each message the user reads, a typing notice before some of
//! its direct sends, its presence at each login and logout — each with a token that the
//! recipients' sessions hand back — and the arrival of other users' signals.
//!
//! Which messages a user reads, how long after their arrival, and which sends it types
//! before are pure functions of the seed and the message ([`chance`]), so shards and
//! re-runs agree. A read comes due only while the user is online: one due while it is away
//! is made when it is back (it reads when it opens the app); reads not made when the run
//! closes are never sent, so never owed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::Arc;

use tokio::time::Instant;

use super::Vu;
use crate::driver::{Dest, Driver, Failure, Session, Signal};
use crate::engine::patterns::Patterns;
use crate::engine::schedule::To;
use crate::envelope::{self, token, Decoded, Envelope};
use crate::ledger::signals::{Audience, SignalArrival};
use crate::ledger::Via;
use crate::metrics::{Counter, ErrorKind, Hist};
use crate::scenario::plan::{Contacts, SignalsPlan};
use crate::scenario::Plan;
use crate::scenario::{StreamId, UserIx};
use crate::vocab::SignalKind;

/// What every user of a run shares about signals.
#[derive(Debug)]
pub struct SignalCfg {
    /// The scenario's `[signals]`.
    pub plan: SignalsPlan,
    /// The run's seed: which messages are read and which sends typed.
    pub seed: u64,
    /// The contact graph presence goes to.
    pub contacts: Option<Arc<Contacts>>,
    /// Wire ids: prefix and first number.
    pub ids: (String, u64),
    /// The streams of the patterns that set their own shares (`[signals.pattern.NAME]`),
    /// with their (receipts, typing) shares.
    pub shares: Vec<(Range<StreamId>, (f64, f64))>,
}

impl SignalCfg {
    /// The signals of `plan`'s users (`plan.signals` is `s`).
    pub fn of(plan: &Plan, s: &SignalsPlan) -> SignalCfg {
        let shares = Patterns::of(plan)
            .ranges()
            .filter_map(|(streams, name)| {
                let p = s.patterns.iter().find(|p| p.pattern == name)?;
                Some((streams, p.or_run(s)))
            })
            .collect();
        SignalCfg {
            plan: s.clone(),
            seed: plan.seed,
            contacts: plan.population.contacts.clone(),
            ids: (plan.population.prefix.clone(), plan.population.first_id),
            shares,
        }
    }

    /// The (receipts, typing) shares of the messages of `stream`.
    fn shares_of(&self, stream: StreamId) -> (f64, f64) {
        self.shares
            .iter()
            .find(|(r, _)| r.contains(&stream))
            .map_or((self.plan.receipts, self.plan.typing), |s| s.1)
    }

    /// The wire id of user `u`.
    fn wire(&self, u: UserIx) -> String {
        format!("{}{}", self.ids.0, self.ids.1 + u64::from(u))
    }
}

/// The conversation a typing notice goes to.
enum Conv {
    /// A peer, by wire id.
    User(String),
    /// A group, by wire name.
    Group(String),
}

/// A message the user will read: when, and the message (stream, seq, due µs, sender).
type Read = (Instant, StreamId, u64, u64, UserIx);

/// One user's signal state (boxed in the user, and only with signals).
#[derive(Debug, Default)]
pub(super) struct SignalState {
    /// Reads to make, earliest first.
    reads: BinaryHeap<Reverse<Read>>,
    /// The next receipt seq per sender read.
    receipt_seq: foldhash::HashMap<UserIx, u64>,
    /// Receipts waiting for the server's acceptance, by tag: (sender, seq).
    pending: foldhash::HashMap<u64, (UserIx, u64)>,
    /// The next typing notice's seq.
    typing_seq: u64,
    /// The next presence change's seq.
    presence_seq: u64,
    /// Per program, the send (its count of sends before it) last typed for.
    typed: Vec<Option<u64>>,
    /// Per program, when its last send was due: a typing notice is never due before the
    /// send ahead of it (the user was still writing that one), nor before the traffic.
    last_due: Vec<Instant>,
    /// Since when the current session is online, wall µs.
    online_since: Option<u64>,
    /// The last time the current session received anything.
    last_heard: Option<Instant>,
    /// The server has been told the user's contacts.
    contacts_told: bool,
}

/// A number fixed by `seed` and three values.
fn mixed(seed: u64, a: u64, b: u64, c: u64) -> u64 {
    [a, b, c].iter().fold(seed, |h, &x| splitmix(h ^ x))
}

/// A number in `[0, 1)` fixed by `seed` and three values.
fn chance(seed: u64, a: u64, b: u64, c: u64) -> f64 {
    (mixed(seed, a, b, c) >> 11) as f64 / (1u64 << 53) as f64
}

/// SplitMix64's finaliser.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Tags of the three decisions, so that they are independent of each other.
const READS: u64 = 0x5245_4144;
const DELAY: u64 = 0x444c_4159;
const TYPES: u64 = 0x5459_5045;

impl<D: Driver> Vu<D> {
    /// The user's signal state, when the run has signals.
    fn sig(&mut self) -> Option<&mut SignalState> {
        self.sig.as_deref_mut()
    }

    /// Right after a login: the session is online; the server learns the user's contacts
    /// (once per run) and the contacts its presence.
    pub(super) async fn signals_online(&mut self, session: &mut D::Session) {
        let Some(cfg) = self.cfg.signals.clone() else {
            return;
        };
        let now = Instant::now();
        let now_us = self.shared.wall_of(now);
        let ix = self.spec.ctx.ix;
        let Some(st) = self.sig() else { return };
        st.online_since = Some(now_us);
        st.last_heard = Some(now);
        if !cfg.plan.presence {
            return;
        }
        if !std::mem::replace(&mut st.contacts_told, true) {
            if let Some(contacts) = &cfg.contacts {
                let ids: Vec<String> = contacts.of(ix).iter().map(|&c| cfg.wire(c)).collect();
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                if let Err(f) = session.contacts(&ids).await {
                    self.error(
                        f.kind,
                        format!("telling the server the contacts: {}", f.detail),
                    );
                }
            }
        }
        self.presence(session, true).await;
        // Out now: what follows a login may write nothing for a while (a fetch that is
        // local, as Socket.IO's recovery replay is).
        if let Err(f) = session.flush().await {
            self.error(f.kind, format!("publishing presence: {}", f.detail));
        }
    }

    /// Before a planned logout: the contacts learn the user goes offline; the session's
    /// time online ends.
    pub(super) async fn signals_leaving(&mut self, session: &mut D::Session) {
        if self.cfg.signals.as_ref().is_some_and(|c| c.plan.presence) {
            self.presence(session, false).await;
        }
        self.signals_offline(Instant::now());
    }

    /// The session's time online ended at `at` (a close, or the last thing a lost
    /// connection received).
    pub(super) fn signals_offline(&mut self, at: Instant) {
        let at_us = self.shared.wall_of(at);
        let (ix, slot) = (self.spec.ctx.ix, self.spec.slot);
        let Some(st) = self.sig() else { return };
        if let Some(from) = st.online_since.take() {
            self.shared
                .recorder(slot)
                .signals
                .online(ix, from, at_us.max(from));
        }
    }

    /// The connection is gone: the user was surely online up to the last thing it heard.
    pub(super) fn signals_lost(&mut self) {
        if let Some(at) = self.sig().and_then(|s| s.last_heard) {
            self.signals_offline(at);
        }
    }

    /// Publishes the user's presence.
    async fn presence(&mut self, session: &mut D::Session, online: bool) {
        let now = Instant::now();
        let at_us = self.shared.wall_of(now);
        let (ix, slot, run) = (self.spec.ctx.ix, self.spec.slot, self.shared.run_id);
        let Some(st) = self.sig() else { return };
        let seq = st.presence_seq;
        st.presence_seq += 1;
        let mut t = String::new();
        token::encode(
            SignalKind::Presence,
            &envelope_of(run, ix, seq, at_us),
            &mut t,
        );
        let tag = self.take_tag();
        match session.signal(tag, Signal::Presence { online }, &t).await {
            Ok(()) => {
                self.shared.recorder(slot).signals.published(
                    SignalKind::Presence,
                    ix,
                    seq,
                    at_us,
                    Audience::Contacts,
                );
                self.count(Counter::SignalsSent, 1);
            }
            Err(f) => self.error(f.kind, format!("publishing presence: {}", f.detail)),
        }
    }

    /// A message `env` of this run arrived intact: the user may read it.
    pub(super) fn maybe_read(&mut self, env: &Envelope, now: Instant) {
        let Some(cfg) = self.cfg.signals.as_deref() else {
            return;
        };
        let me = u64::from(self.spec.ctx.ix);
        let (stream, seq) = (u64::from(env.stream), env.seq);
        if chance(cfg.seed ^ READS, stream, seq, me) >= cfg.shares_of(env.stream).0 {
            return;
        }
        let Some(sender) = self
            .shared
            .senders
            .as_ref()
            .and_then(|s| s.sender(env.stream))
        else {
            return;
        };
        let mut rng = fastrand::Rng::with_seed(mixed(cfg.seed ^ DELAY, stream, seq, me));
        let delay = cfg.plan.read_delay.draw(&mut rng);
        let at = now + delay;
        if let Some(st) = self.sig() {
            st.reads
                .push(Reverse((at, env.stream, env.seq, env.due_us, sender)));
        }
    }

    /// When the next read or typing notice is due (`ts`: the traffic start).
    pub(super) fn next_signal(&self, ts: Option<Instant>) -> Option<Instant> {
        let st = self.sig.as_deref()?;
        let read = st.reads.peek().map(|r| r.0 .0);
        let typing = ts.and_then(|ts| self.next_typing(ts).map(|(t, ..)| t));
        read.into_iter().chain(typing).min()
    }

    /// The earliest typing notice due, as (when, program, the send it precedes).
    fn next_typing(
        &self,
        ts: Instant,
    ) -> Option<(Instant, usize, crate::engine::schedule::NextSend)> {
        let cfg = self.cfg.signals.as_deref()?;
        if !cfg.plan.asks().typing {
            return None;
        }
        let st = self.sig.as_deref()?;
        let mut best: Option<(Instant, usize, crate::engine::schedule::NextSend)> = None;
        for (i, p) in self.spec.plan.programs.iter().enumerate() {
            if st.typed.get(i).copied().flatten() == Some(p.sent) {
                continue;
            }
            let Some((due, next)) = p.peek() else {
                continue;
            };
            let typed = chance(cfg.seed ^ TYPES, u64::from(next.stream), next.seq, 0)
                < cfg.shares_of(next.stream).1;
            if !typed || !p.sends.converse() {
                continue;
            }
            let floor = st.last_due.get(i).copied().unwrap_or(ts);
            let at = (ts + due)
                .checked_sub(cfg.plan.typing_lead)
                .unwrap_or(ts)
                .max(ts)
                .max(floor);
            if best.as_ref().is_none_or(|b| at < b.0) {
                best = Some((at, i, next));
            }
        }
        best
    }

    /// Makes the reads and typing notices due by `now`. A failure that found the
    /// connection gone comes back for the caller to count once.
    pub(super) async fn signals_due(
        &mut self,
        session: &mut D::Session,
        traffic: Option<Instant>,
        now: Instant,
    ) -> Option<Failure> {
        self.sig.as_ref()?;
        while let Some(Reverse(read)) = self.sig().and_then(|s| s.reads.peek().copied()) {
            if read.0 > now {
                break;
            }
            if let Some(st) = self.sig() {
                st.reads.pop();
            }
            if let Err(gone) = self.receipt(session, read).await {
                return Some(gone);
            }
        }
        let ts = traffic?;
        while let Some((at, i, next)) = self.next_typing(ts) {
            if at > now {
                break;
            }
            let sent = self.spec.plan.programs[i].sent;
            if let Some(st) = self.sig() {
                if st.typed.len() <= i {
                    st.typed.resize(i + 1, None);
                }
                st.typed[i] = Some(sent);
            }
            if let Err(gone) = self.typing(session, i, next, at).await {
                return Some(gone);
            }
        }
        None
    }

    /// Sends the receipt of `read`.
    async fn receipt(&mut self, session: &mut D::Session, read: Read) -> Result<(), Failure> {
        let (at, stream, seq, due_us, sender) = read;
        let Some(cfg) = self.cfg.signals.clone() else {
            return Ok(());
        };
        let (ix, slot, run) = (self.spec.ctx.ix, self.spec.slot, self.shared.run_id);
        let rseq = {
            let Some(st) = self.sig() else { return Ok(()) };
            let n = st.receipt_seq.entry(sender).or_insert(0);
            *n += 1;
            *n - 1
        };
        let at_us = self.due_online(at);
        let mut t = String::new();
        token::encode(SignalKind::Read, &envelope_of(run, ix, rseq, at_us), &mut t);
        let mut message = String::new();
        envelope::encode(&envelope_of(run, stream, seq, due_us), 0, &mut message);
        let sender_id = cfg.wire(sender);
        let group = self.shared.group_of_stream.get(&stream).cloned();
        let conv = match &group {
            Some(g) => Dest::Group(&g.name),
            None => Dest::User(&sender_id),
        };
        let tag = self.take_tag();
        let read = Signal::Read {
            sender: &sender_id,
            conv,
            message: &message,
        };
        let outcome = session.signal(tag, read, &t).await;
        let mut rec = self.shared.recorder(slot);
        match outcome {
            Ok(()) => {
                rec.signals.receipt_sent(ix, sender, rseq);
                drop(rec);
                self.count(Counter::SignalsSent, 1);
                if self.cfg.acceptance {
                    if let Some(st) = self.sig() {
                        st.pending.insert(tag, (sender, rseq));
                    }
                }
                Ok(())
            }
            Err(f) => {
                rec.signals.receipt_refused(ix, sender, rseq);
                drop(rec);
                if f.kind == ErrorKind::ClosedByPeer {
                    return Err(f);
                }
                self.error(f.kind, format!("sending a read receipt: {}", f.detail));
                Ok(())
            }
        }
    }

    /// Sends the typing notice that precedes `next` of program `i`, due at `at`.
    async fn typing(
        &mut self,
        session: &mut D::Session,
        i: usize,
        next: crate::engine::schedule::NextSend,
        at: Instant,
    ) -> Result<(), Failure> {
        let (ix, slot, run) = (self.spec.ctx.ix, self.spec.slot, self.shared.run_id);
        let (audience, conv) = match self.spec.plan.programs[i].sends.to(&next) {
            To::User(peer, id) => (Audience::Peer(peer), Conv::User(id.into_owned())),
            To::Group(g) => (Audience::Group(g.index as u32), Conv::Group(g.name.clone())),
            To::Echo => return Ok(()),
        };
        let at_us = self.due_online(at);
        let Some(st) = self.sig() else { return Ok(()) };
        let seq = st.typing_seq;
        st.typing_seq += 1;
        let mut t = String::new();
        token::encode(
            SignalKind::Typing,
            &envelope_of(run, ix, seq, at_us),
            &mut t,
        );
        let tag = self.take_tag();
        let typing = Signal::Typing {
            conv: match &conv {
                Conv::User(id) => Dest::User(id),
                Conv::Group(name) => Dest::Group(name),
            },
            active: true,
        };
        match session.signal(tag, typing, &t).await {
            Ok(()) => {
                self.shared.recorder(slot).signals.published(
                    SignalKind::Typing,
                    ix,
                    seq,
                    at_us,
                    audience,
                );
                self.count(Counter::SignalsSent, 1);
                Ok(())
            }
            Err(f) if f.kind == ErrorKind::ClosedByPeer => Err(f),
            Err(f) => {
                self.error(f.kind, format!("sending a typing notice: {}", f.detail));
                Ok(())
            }
        }
    }

    /// Program `i` made (or dropped) its send due at `due`.
    pub(super) fn sent_due(&mut self, i: usize, due: Instant) {
        if let Some(st) = self.sig() {
            if st.last_due.len() <= i {
                st.last_due.resize(i + 1, due);
            }
            st.last_due[i] = due;
        }
    }

    /// The acceptance or refusal of `tag` when it is a receipt's; false otherwise.
    pub(super) fn receipt_answered(&mut self, tag: u64, refused: Option<&Failure>) -> bool {
        let (ix, slot) = (self.spec.ctx.ix, self.spec.slot);
        let Some((sender, seq)) = self.sig().and_then(|s| s.pending.remove(&tag)) else {
            return false;
        };
        if let Some(f) = refused {
            self.shared
                .recorder(slot)
                .signals
                .receipt_refused(ix, sender, seq);
            self.error(
                ErrorKind::SendFailed,
                format!("a read receipt: {}", f.detail),
            );
        }
        true
    }

    /// Whether read receipts are waiting for the server's acceptance.
    pub(super) fn receipts_pending(&self) -> bool {
        self.sig.as_deref().is_some_and(|s| !s.pending.is_empty())
    }

    /// Receipts still waiting for acceptance when the user goes offline are not owed.
    pub(super) fn receipts_unconfirmed(&mut self) {
        let (ix, slot) = (self.spec.ctx.ix, self.spec.slot);
        let Some(st) = self.sig() else { return };
        let pending = std::mem::take(&mut st.pending);
        let mut rec = self.shared.recorder(slot);
        for (sender, seq) in pending.into_values() {
            rec.signals.receipt_refused(ix, sender, seq);
        }
    }

    /// Another user's signal arrived with `decoded` as its token, `via` a push or a fetch.
    pub(super) fn signal_arrived(&mut self, kind: SignalKind, decoded: Decoded, via: Via) {
        let now = Instant::now();
        let now_us = self.shared.wall_of(now);
        let (ix, slot, run) = (self.spec.ctx.ix, self.spec.slot, self.shared.run_id);
        if let Some(st) = self.sig() {
            st.last_heard = Some(now);
        }
        let (env, corrupt) = match decoded {
            Decoded::Intact(env) if env.run == run => (env, false),
            Decoded::Corrupt(env) if env.run == run => (env, true),
            Decoded::Damaged => {
                self.tally(now).damaged();
                return;
            }
            Decoded::Intact(_) | Decoded::Corrupt(_) | Decoded::Foreign => {
                self.error(
                    ErrorKind::Foreign,
                    format!("a {} signal not from this run", kind.name()),
                );
                return;
            }
        };
        let arrival = self
            .shared
            .recorder(slot)
            .signals
            .arrived(kind, env.stream, ix, env.seq, via, corrupt);
        if arrival == SignalArrival::First && via == Via::Push {
            let hist = match kind {
                SignalKind::Read => Hist::Receipt,
                SignalKind::Typing => Hist::Typing,
                SignalKind::Presence => Hist::Presence,
            };
            self.tally(now)
                .latency(hist, now_us.saturating_sub(env.due_us));
        }
    }

    /// Notes that the session received something now (for its time online).
    pub(super) fn heard(&mut self) {
        if let Some(st) = self.sig() {
            st.last_heard = Some(Instant::now());
        }
    }

    /// When a read or typing notice due at `at` is made, wall µs: at `at`, or when the user
    /// came online if it was away then (nobody reads or types while away).
    fn due_online(&self, at: Instant) -> u64 {
        let since = self.sig.as_deref().and_then(|s| s.online_since);
        self.shared.wall_of(at).max(since.unwrap_or(0))
    }

    /// The tag of the next send, request or signal.
    fn take_tag(&mut self) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        tag
    }
}

/// The envelope a token or a message header carries.
fn envelope_of(run: u32, stream: StreamId, seq: u64, due_us: u64) -> Envelope {
    Envelope {
        run,
        stream,
        seq,
        due_us,
    }
}
