//! The single writer: one thread owns the write connection, takes every queued command,
//! commits them in one transaction (group commit), and only then acks the senders and
//! pushes to online members. It assigns seqs from in-memory counters: per conversation, so
//! they are gapless, or one for the whole server (`--seqs server`), so a conversation's
//! skip. A `dup_store` fault stores a message a second time, with the next seq. Read
//! receipts are stored the same way, numbered per recipient (`rseq`), and contacts too.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::extract::ws::Utf8Bytes;
use rusqlite::{params, Connection, Transaction};
use tokio::sync::mpsc;

use super::config::{GroupPolicy, SeqScope};
use super::faults::{corrupt_body, Origin};
use super::hub::{encode, Hub};
use super::metrics::Metrics;
use super::outbox::Outbox;
use super::roster::Roster;
use super::store::{load_state, State};
use crate::wire::{direct_conv, group_conv, Dest, ErrorCode, Msg, ReceiptPush, Ref, ServerFrame};

/// A group membership change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupOp {
    /// Create the group with the caller as first member.
    Create,
    /// Join it (with `--groups invite`, only when already added).
    Join,
    /// Leave it.
    Leave,
    /// Add this user to it (the creator only).
    Add(String),
}

/// A command for the writer; replies go to `reply`.
#[derive(Debug)]
pub enum Cmd {
    /// Store a message from `user` and push it.
    Send {
        /// The logged-in sender.
        user: String,
        /// Echoed in the ack.
        r#ref: Ref,
        /// Recipient.
        to: Dest,
        /// Body.
        body: String,
        /// The sender's outbox.
        reply: Arc<Outbox>,
    },
    /// Change a group's membership.
    Group {
        /// What to do.
        op: GroupOp,
        /// The caller.
        user: String,
        /// Echoed in the reply.
        r#ref: Ref,
        /// The group.
        group: String,
        /// The caller's outbox.
        reply: Arc<Outbox>,
    },
    /// Make `user` and each of `add` contacts of each other.
    Contacts {
        /// The caller.
        user: String,
        /// Echoed in the reply.
        r#ref: Ref,
        /// Valid user ids.
        add: Vec<String>,
        /// The caller's outbox.
        reply: Arc<Outbox>,
    },
    /// Store a read receipt from `user` for `to` and push it.
    Receipt {
        /// The reader (the caller).
        user: String,
        /// Echoed in the reply.
        r#ref: Ref,
        /// The sender of the messages read (a valid user id).
        to: String,
        /// Their conversation.
        conv: String,
        /// A valid note.
        note: String,
        /// The caller's outbox.
        reply: Arc<Outbox>,
    },
    /// Commit what is queued and stop.
    Stop,
}

/// What one command produced, sent out after the commit.
enum Outcome {
    Stored {
        msg: Msg,
        r#ref: Ref,
        reply: Arc<Outbox>,
        group: Option<String>,
        to: Option<String>,
        /// A second copy of `msg` (`dup_store`).
        copy: Option<Msg>,
    },
    Done(Ref, Arc<Outbox>),
    Contacts {
        user: String,
        add: Vec<String>,
        /// Pairs that were not contacts before.
        new: u64,
        r#ref: Ref,
        reply: Arc<Outbox>,
    },
    Receipt {
        to: String,
        receipt: ReceiptPush,
        r#ref: Ref,
        reply: Arc<Outbox>,
    },
    Refused(Ref, Arc<Outbox>, ErrorCode, String),
}

/// Current time in ms since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The writer thread's state.
pub struct Writer {
    conn: Connection,
    state: State,
    hub: Arc<Hub>,
    roster: Arc<Roster>,
    metrics: Arc<Metrics>,
    batch_max: usize,
    policy: GroupPolicy,
    seqs: SeqScope,
}

impl Writer {
    /// A writer on `conn`, loading its state from it, admitting group members by `policy`
    /// and counting seqs by `seqs`; contacts it stores go to `roster` too.
    pub fn new(
        conn: Connection,
        hub: Arc<Hub>,
        roster: Arc<Roster>,
        metrics: Arc<Metrics>,
        batch_max: usize,
        policy: GroupPolicy,
        seqs: SeqScope,
    ) -> crate::Result<Self> {
        let state = load_state(&conn)?;
        Ok(Writer {
            conn,
            state,
            hub,
            roster,
            metrics,
            batch_max: batch_max.max(1),
            policy,
            seqs,
        })
    }

    /// Runs until [`Cmd::Stop`] or until every sender is gone; commits everything received.
    pub fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let mut batch = Vec::with_capacity(self.batch_max);
        let mut stopping = false;
        while !stopping {
            let Some(first) = rx.blocking_recv() else {
                break;
            };
            batch.push(first);
            while batch.len() < self.batch_max {
                match rx.try_recv() {
                    Ok(cmd) => batch.push(cmd),
                    Err(_) => break,
                }
            }
            if batch.iter().any(|c| matches!(c, Cmd::Stop)) {
                stopping = true;
                rx.close();
                while let Ok(cmd) = rx.try_recv() {
                    batch.push(cmd);
                }
            }
            self.commit(&mut batch);
        }
    }

    fn commit(&mut self, batch: &mut Vec<Cmd>) {
        let started = Instant::now();
        let n = batch.len();
        let ts = now_ms();
        let mut outcomes = Vec::with_capacity(n);
        let rules = Rules {
            policy: self.policy,
            seqs: self.seqs,
            hub: &self.hub,
        };
        let applied = match self.conn.transaction() {
            Ok(tx) => apply_all(&tx, &mut self.state, &rules, batch, ts, &mut outcomes)
                .and_then(|()| tx.commit().map_err(|e| e.to_string())),
            Err(e) => Err(e.to_string()),
        };
        self.metrics.batch_size.observe(n as f64);
        self.metrics
            .commit_latency
            .observe(started.elapsed().as_secs_f64());
        match applied {
            Ok(()) => self.send_out(outcomes),
            Err(e) => {
                tracing::error!("commit of {n} commands failed: {e}");
                for cmd in batch.drain(..) {
                    refuse(cmd, ErrorCode::Internal, &format!("not stored: {e}"));
                }
                match load_state(&self.conn) {
                    Ok(st) => self.state = st,
                    Err(e) => tracing::error!("cannot reload the store state: {e}"),
                }
            }
        }
        batch.clear();
    }

    fn send_out(&self, outcomes: Vec<Outcome>) {
        for o in outcomes {
            match o {
                Outcome::Stored {
                    msg,
                    r#ref,
                    reply,
                    group,
                    to,
                    copy,
                } => {
                    self.metrics.accepted.inc();
                    reply.push(encode(&ServerFrame::Ack {
                        r#ref,
                        conv: msg.conv.clone(),
                        seq: msg.seq,
                        ts: msg.ts,
                    }));
                    let members = group.as_ref().and_then(|g| self.state.groups.get(g));
                    let recipients = || {
                        to.iter()
                            .chain(members.into_iter().flatten())
                            .filter(|r| **r != msg.from)
                    };
                    let frame: Utf8Bytes = encode(&ServerFrame::Msg(msg.clone()));
                    recipients().for_each(|r| self.hub.push_msg(r, &msg, &frame));
                    if let Some(copy) = copy {
                        let frame: Utf8Bytes = encode(&ServerFrame::Msg(copy.clone()));
                        recipients().for_each(|r| self.hub.push_msg(r, &copy, &frame));
                        let names = recipients().map(String::as_str);
                        self.hub.stored_twice(&msg, copy.seq, names);
                    }
                }
                Outcome::Done(r#ref, reply) => {
                    reply.push(encode(&ServerFrame::Ok { r#ref }));
                }
                Outcome::Contacts {
                    user,
                    add,
                    new,
                    r#ref,
                    reply,
                } => {
                    self.roster.add(&user, &add);
                    self.metrics.contacts.inc_by(new);
                    reply.push(encode(&ServerFrame::Ok { r#ref }));
                }
                Outcome::Receipt {
                    to,
                    receipt,
                    r#ref,
                    reply,
                } => {
                    self.metrics.receipts_stored.inc();
                    reply.push(encode(&ServerFrame::Ok { r#ref }));
                    self.push_receipt(&to, receipt);
                }
                Outcome::Refused(r#ref, reply, code, message) => {
                    self.metrics.error(code);
                    reply.push(encode(&ServerFrame::Error {
                        r#ref: Some(r#ref),
                        code,
                        message,
                        fatal: false,
                    }));
                }
            }
        }
    }
}

impl Writer {
    /// Pushes a committed receipt to `to`, faults keyed by (`r:` + `to`, rseq).
    fn push_receipt(&self, to: &str, receipt: ReceiptPush) {
        let key = format!("r:{to}");
        let origin = Origin {
            key: &key,
            seq: receipt.rseq,
            from: &receipt.from,
            signal: Some("receipt"),
        };
        let frame = encode(&ServerFrame::Receipt(receipt.clone()));
        self.hub.push(to, &origin, &frame, || {
            let note = corrupt_body(&receipt.note);
            encode(&ServerFrame::Receipt(ReceiptPush {
                note,
                ..receipt.clone()
            }))
        });
    }
}

fn refuse(cmd: Cmd, code: ErrorCode, message: &str) {
    let (r#ref, reply) = match cmd {
        Cmd::Send { r#ref, reply, .. }
        | Cmd::Group { r#ref, reply, .. }
        | Cmd::Contacts { r#ref, reply, .. }
        | Cmd::Receipt { r#ref, reply, .. } => (r#ref, reply),
        Cmd::Stop => return,
    };
    reply.push(encode(&ServerFrame::Error {
        r#ref: Some(r#ref),
        code,
        message: message.to_owned(),
        fatal: false,
    }));
}

/// How the writer applies commands.
struct Rules<'a> {
    policy: GroupPolicy,
    seqs: SeqScope,
    /// Asked whether a message is stored twice (`dup_store`).
    hub: &'a Hub,
}

fn apply_all(
    tx: &Transaction<'_>,
    st: &mut State,
    rules: &Rules<'_>,
    batch: &mut [Cmd],
    ts: u64,
    out: &mut Vec<Outcome>,
) -> Result<(), String> {
    for cmd in batch.iter() {
        match cmd {
            Cmd::Send {
                user,
                r#ref,
                to,
                body,
                reply,
            } => out.push(store_msg(tx, st, rules, user, *r#ref, to, body, ts, reply)?),
            Cmd::Group {
                op,
                user,
                r#ref,
                group,
                reply,
            } => {
                let r = GroupChange {
                    op,
                    user,
                    r#ref: *r#ref,
                    group,
                    reply,
                };
                out.push(change_group(tx, st, rules.policy, &r)?);
            }
            Cmd::Contacts {
                user,
                r#ref,
                add,
                reply,
            } => {
                let new = add_contacts(tx, user, add)?;
                out.push(Outcome::Contacts {
                    user: user.clone(),
                    add: add.clone(),
                    new,
                    r#ref: *r#ref,
                    reply: reply.clone(),
                });
            }
            Cmd::Receipt {
                user,
                r#ref,
                to,
                conv,
                note,
                reply,
            } => {
                let r = ReceiptCmd {
                    user,
                    to,
                    conv,
                    note,
                };
                out.push(match store_receipt(tx, st, &r, ts)? {
                    Ok(receipt) => Outcome::Receipt {
                        to: to.clone(),
                        receipt,
                        r#ref: *r#ref,
                        reply: reply.clone(),
                    },
                    Err((code, msg)) => Outcome::Refused(*r#ref, reply.clone(), code, msg),
                });
            }
            Cmd::Stop => {}
        }
    }
    Ok(())
}

/// Stores `user` and each of `add` as contacts of each other; returns how many pairs are new.
fn add_contacts(tx: &Transaction<'_>, user: &str, add: &[String]) -> Result<u64, String> {
    let mut q = tx
        .prepare_cached("INSERT OR IGNORE INTO contacts (user, contact) VALUES (?1, ?2)")
        .map_err(|e| e.to_string())?;
    let mut new = 0;
    for other in add {
        let there = q.execute([user, other]).map_err(|e| e.to_string())?;
        q.execute([other, user]).map_err(|e| e.to_string())?;
        new += u64::try_from(there).unwrap_or(0);
    }
    Ok(new)
}

/// A receipt as the writer applies it.
struct ReceiptCmd<'a> {
    user: &'a str,
    to: &'a str,
    conv: &'a str,
    note: &'a str,
}

/// Stores a receipt in `to`'s inbox with the next rseq, when both the reader and `to` are
/// members of the conversation; the refusal otherwise.
fn store_receipt(
    tx: &Transaction<'_>,
    st: &mut State,
    r: &ReceiptCmd<'_>,
    ts: u64,
) -> Result<Result<ReceiptPush, (ErrorCode, String)>, String> {
    let members = |a: &str, b: &str| [a, b].contains(&r.user) && [a, b].contains(&r.to);
    let allowed = if let Some(pair) = r.conv.strip_prefix("d:") {
        pair.split_once(':').map(|(a, b)| members(a, b))
    } else if let Some(g) = r.conv.strip_prefix("g:") {
        match st.groups.get(g) {
            None => return Ok(Err((ErrorCode::NoSuchGroup, format!("no group `{g}`")))),
            Some(m) => Some(m.contains(r.user) && m.contains(r.to)),
        }
    } else {
        None
    };
    match allowed {
        None => {
            let msg = "conversation ids are d:A:B or g:NAME".to_owned();
            return Ok(Err((ErrorCode::Malformed, msg)));
        }
        Some(false) => {
            let msg = format!(
                "`{}` and `{}` are not both members of `{}`",
                r.user, r.to, r.conv
            );
            return Ok(Err((ErrorCode::NotMember, msg)));
        }
        Some(true) => {}
    }
    let last = st.rseqs.entry(r.to.to_owned()).or_insert(0);
    let rseq = *last + 1;
    tx.prepare_cached(
        "INSERT INTO receipts (user, rseq, sender, conv, note, ts) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut q| q.execute(params![r.to, rseq, r.user, r.conv, r.note, ts]))
    .map_err(|e| e.to_string())?;
    *last = rseq;
    Ok(Ok(ReceiptPush {
        from: r.user.to_owned(),
        conv: r.conv.to_owned(),
        note: r.note.to_owned(),
        rseq,
        ts,
    }))
}

#[allow(clippy::too_many_arguments)]
fn store_msg(
    tx: &Transaction<'_>,
    st: &mut State,
    rules: &Rules<'_>,
    user: &str,
    r#ref: Ref,
    to: &Dest,
    body: &str,
    ts: u64,
    reply: &Arc<Outbox>,
) -> Result<Outcome, String> {
    let refused = |code, msg: String| Ok(Outcome::Refused(r#ref, reply.clone(), code, msg));
    let (conv, group, direct) = match to {
        Dest::User(u) => (direct_conv(user, u), None, Some(u.clone())),
        Dest::Group(g) => match st.groups.get(g) {
            None => return refused(ErrorCode::NoSuchGroup, format!("no group `{g}`")),
            Some(m) if !m.contains(user) => {
                return refused(ErrorCode::NotMember, format!("not a member of `{g}`"))
            }
            Some(_) => (group_conv(g), Some(g.clone()), None),
        },
    };
    let first = !st.seqs.contains_key(&conv);
    let seq = insert(tx, st, rules.seqs, &conv, user, body, ts)?;
    let copy = if rules.hub.stores_twice(&conv, seq) {
        Some(insert(tx, st, rules.seqs, &conv, user, body, ts)?)
    } else {
        None
    };
    if let (Some(other), true) = (&direct, first) {
        let mut q = tx
            .prepare_cached("INSERT OR IGNORE INTO user_convs (user, conv) VALUES (?1, ?2)")
            .map_err(|e| e.to_string())?;
        for u in [user, other.as_str()] {
            q.execute(params![u, conv]).map_err(|e| e.to_string())?;
        }
    }
    let msg = Msg {
        conv,
        seq,
        from: user.to_owned(),
        body: body.to_owned(),
        ts,
    };
    Ok(Outcome::Stored {
        copy: copy.map(|seq| Msg { seq, ..msg.clone() }),
        msg,
        r#ref,
        reply: reply.clone(),
        group,
        to: direct,
    })
}

/// Stores one message in `conv` with the next seq, and returns that seq.
fn insert(
    tx: &Transaction<'_>,
    st: &mut State,
    scope: SeqScope,
    conv: &str,
    user: &str,
    body: &str,
    ts: u64,
) -> Result<u64, String> {
    let last = st.seqs.entry(conv.to_owned()).or_insert(0);
    let seq = match scope {
        SeqScope::Conversation => *last + 1,
        SeqScope::Server => st.top + 1,
    };
    *last = seq;
    st.top = st.top.max(seq);
    tx.prepare_cached("INSERT INTO msgs (conv, seq, sender, body, ts) VALUES (?1, ?2, ?3, ?4, ?5)")
        .and_then(|mut q| q.execute(params![conv, seq, user, body, ts]))
        .map_err(|e| e.to_string())?;
    Ok(seq)
}

/// One group request, as the writer applies it.
struct GroupChange<'a> {
    op: &'a GroupOp,
    user: &'a str,
    r#ref: Ref,
    group: &'a str,
    reply: &'a Arc<Outbox>,
}

fn change_group(
    tx: &Transaction<'_>,
    st: &mut State,
    policy: GroupPolicy,
    c: &GroupChange<'_>,
) -> Result<Outcome, String> {
    let (user, group) = (c.user, c.group);
    let refused = |code, msg: String| Ok(Outcome::Refused(c.r#ref, c.reply.clone(), code, msg));
    let exec = |sql: &str, p: [&str; 2]| {
        tx.prepare_cached(sql)
            .and_then(|mut q| q.execute(p))
            .map_err(|e| e.to_string())
    };
    let creator = st.creators.get(group).map(String::as_str);
    let is_creator = creator == Some(user);
    match (c.op, st.groups.get_mut(group)) {
        (GroupOp::Create, Some(_)) => {
            return refused(ErrorCode::GroupExists, format!("group `{group}` exists"))
        }
        (GroupOp::Create, None) => {
            exec(
                "INSERT INTO groups (grp, creator) VALUES (?1, ?2)",
                [group, user],
            )?;
            exec(
                "INSERT INTO members (grp, user) VALUES (?1, ?2)",
                [group, user],
            )?;
            st.groups
                .insert(group.to_owned(), std::iter::once(user.to_owned()).collect());
            st.creators.insert(group.to_owned(), user.to_owned());
        }
        (_, None) => return refused(ErrorCode::NoSuchGroup, format!("no group `{group}`")),
        (GroupOp::Join, Some(members)) => {
            if policy == GroupPolicy::Invite && !members.contains(user) {
                let msg = format!("`{group}` is invite-only: its creator adds members");
                return refused(ErrorCode::Forbidden, msg);
            }
            if members.insert(user.to_owned()) {
                exec(
                    "INSERT OR IGNORE INTO members (grp, user) VALUES (?1, ?2)",
                    [group, user],
                )?;
            }
        }
        (GroupOp::Add(_), Some(_)) if !is_creator => {
            let msg = format!("only the creator of `{group}` adds members");
            return refused(ErrorCode::Forbidden, msg);
        }
        (GroupOp::Add(member), Some(members)) => {
            if members.insert(member.clone()) {
                exec(
                    "INSERT OR IGNORE INTO members (grp, user) VALUES (?1, ?2)",
                    [group, member],
                )?;
            }
        }
        (GroupOp::Leave, Some(members)) => {
            if members.remove(user) {
                exec(
                    "DELETE FROM members WHERE grp = ?1 AND user = ?2",
                    [group, user],
                )?;
            }
        }
    }
    Ok(Outcome::Done(c.r#ref, c.reply.clone()))
}
