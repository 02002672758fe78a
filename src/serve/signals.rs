//! Signals on the session side: `contacts` and `receipt` checked and handed to the writer
//! (both are stored), `receipts` pages read from the store, and `presence` and `typing`
//! fanned out at once to whoever is online (nothing stored). Every push goes through the
//! hub's fault injection, keyed so that no signal's key is a conversation's: `r:`+recipient
//! with the rseq for receipts (in the writer), `p:`+publisher with its presence number,
//! `t:`+typist with its typing number.

use std::sync::Arc;

use super::auth::valid_id;
use super::faults::{corrupt_body, Origin};
use super::gateway::Shared;
use super::hub::encode;
use super::outbox::Outbox;
use super::store::{self, Access};
use super::writer::{now_ms, Cmd};
use crate::wire::signal::{valid_note, MAX_CONTACTS, MAX_NOTE, RECEIPT_PAGE_MAX};
use crate::wire::{
    direct_conv, group_conv, ContactsAdd, Dest, ErrorCode, Presence, PresencePush, Receipt,
    ReceiptPage, ReceiptsQuery, Ref, ServerFrame, Status, Typing, TypingPush,
};

/// An error frame to answer with: the request's ref (if any), the code, the detail.
#[derive(Debug)]
pub struct Refusal(pub Option<Ref>, pub ErrorCode, pub String);

fn check_note(r#ref: Option<Ref>, note: &str) -> Result<(), Refusal> {
    if valid_note(note) {
        return Ok(());
    }
    let msg = format!("a note is at most {MAX_NOTE} bytes of A-Z a-z 0-9 : . _ -");
    Err(Refusal(r#ref, ErrorCode::Malformed, msg))
}

async fn to_writer(shared: &Shared, r#ref: Ref, cmd: Cmd) -> Result<(), Refusal> {
    shared.writer.send(cmd).await.map_err(|_| {
        let msg = "the store is closed".to_owned();
        Refusal(Some(r#ref), ErrorCode::ShuttingDown, msg)
    })
}

/// `contacts`: stored by the writer, which answers `ok` after the commit.
pub async fn contacts(
    shared: &Shared,
    user: String,
    c: ContactsAdd,
    reply: Arc<Outbox>,
) -> Result<(), Refusal> {
    let r = Some(c.r#ref);
    if c.add.len() > MAX_CONTACTS {
        let msg = format!("{} ids; at most {MAX_CONTACTS} per frame", c.add.len());
        return Err(Refusal(r, ErrorCode::Malformed, msg));
    }
    if let Some(bad) = c.add.iter().find(|id| !valid_id(id)) {
        let msg = format!("invalid user id `{bad}`");
        return Err(Refusal(r, ErrorCode::BadRecipient, msg));
    }
    let cmd = Cmd::Contacts {
        user,
        r#ref: c.r#ref,
        add: c.add,
        reply,
    };
    to_writer(shared, c.r#ref, cmd).await
}

/// `receipt`: stored by the writer, which answers `ok` after the commit and pushes it.
pub async fn receipt(
    shared: &Shared,
    user: String,
    rc: Receipt,
    reply: Arc<Outbox>,
) -> Result<(), Refusal> {
    check_note(Some(rc.r#ref), &rc.note)?;
    if !valid_id(&rc.to) {
        let msg = "invalid recipient id".to_owned();
        return Err(Refusal(Some(rc.r#ref), ErrorCode::BadRecipient, msg));
    }
    let cmd = Cmd::Receipt {
        user,
        r#ref: rc.r#ref,
        to: rc.to,
        conv: rc.conv,
        note: rc.note,
        reply,
    };
    to_writer(shared, rc.r#ref, cmd).await
}

/// `receipts`: one page of the caller's stored receipts.
pub async fn receipts(
    shared: &Shared,
    user: String,
    q: ReceiptsQuery,
) -> Result<ServerFrame, Refusal> {
    let limit = if q.limit == 0 {
        RECEIPT_PAGE_MAX
    } else {
        q.limit.min(RECEIPT_PAGE_MAX)
    };
    let empty = ReceiptPage {
        r#ref: q.r#ref,
        receipts: Vec::new(),
        more: true,
        last_rseq: u64::MAX,
    };
    let overhead = store::json_len(&ServerFrame::ReceiptPage(empty));
    let max_bytes = shared.config.max_frame.saturating_sub(overhead);
    let after = q.after;
    let read = shared
        .readers
        .with(move |db| store::receipts(db, &user, after, limit, max_bytes))
        .await;
    match read {
        Ok((receipts, more, last_rseq)) => {
            shared.metrics.receipts_synced.inc_by(receipts.len() as u64);
            Ok(ServerFrame::ReceiptPage(ReceiptPage {
                r#ref: q.r#ref,
                receipts,
                more,
                last_rseq,
            }))
        }
        Err(e) => Err(Refusal(Some(q.r#ref), ErrorCode::Internal, e.to_string())),
    }
}

/// `presence`: pushed to the caller's contacts online; `ok` when it has a ref.
pub fn presence(shared: &Shared, user: &str, p: Presence, reply: &Outbox) -> Result<(), Refusal> {
    check_note(p.r#ref, &p.note)?;
    let n = shared.roster.publish(user, p.status);
    publish(shared, user, p.status, &p.note, n);
    if let Some(r#ref) = p.r#ref {
        reply.push(encode(&ServerFrame::Ok { r#ref }));
    }
    Ok(())
}

/// The server's own `offline` (empty note) for `user`, whose last connection just closed,
/// when its contacts last heard it online.
pub fn vanished(shared: &Shared, user: &str) {
    if let Some(n) = shared.roster.vanished(user) {
        publish(shared, user, Status::Offline, "", n);
    }
}

/// Pushes `user`'s presence notice number `n` to its contacts online.
fn publish(shared: &Shared, user: &str, status: Status, note: &str, n: u64) {
    let ts = now_ms();
    let contacts = shared.roster.contacts(user);
    fan_out(
        shared,
        ("presence", 'p'),
        user,
        n,
        &contacts,
        note,
        |note| {
            ServerFrame::Presence(PresencePush {
                from: user.to_owned(),
                status,
                note,
                ts,
            })
        },
    );
}

/// Pushes the frame `build` makes from `note` to each of `to`: the signal `kind` (its name
/// and the letter of its fault key) numbered `n` of `user`. A `corrupt` fault gets the
/// frame built from the corrupted note.
fn fan_out(
    shared: &Shared,
    (kind, letter): (&'static str, char),
    user: &str,
    n: u64,
    to: &[String],
    note: &str,
    build: impl Fn(String) -> ServerFrame,
) {
    let frame = encode(&build(note.to_owned()));
    let key = format!("{letter}:{user}");
    let origin = Origin {
        key: &key,
        seq: n,
        from: user,
        signal: Some(kind),
    };
    for recipient in to.iter().filter(|r| **r != user) {
        let corrupted = || encode(&build(corrupt_body(note)));
        shared.hub.push(recipient, &origin, &frame, corrupted);
    }
}

/// `typing`: pushed to the other members of the conversation online; no reply.
pub async fn typing(shared: &Shared, user: String, t: Typing) -> Result<(), Refusal> {
    check_note(None, &t.note)?;
    let (conv, members) = match t.to {
        Dest::User(peer) if valid_id(&peer) => (direct_conv(&user, &peer), vec![peer]),
        Dest::User(_) => {
            let msg = "invalid recipient id".to_owned();
            return Err(Refusal(None, ErrorCode::BadRecipient, msg));
        }
        Dest::Group(g) => {
            if !valid_id(&g) {
                return Err(Refusal(
                    None,
                    ErrorCode::NoSuchGroup,
                    "no such group".into(),
                ));
            }
            let conv = group_conv(&g);
            let (u, c) = (user.clone(), conv.clone());
            let read = shared
                .readers
                .with(move |db| match store::access(db, &u, &c)? {
                    Access::Allowed => store::members(db, &g).map(Ok),
                    denied => Ok(Err(denied)),
                })
                .await;
            match read {
                Ok(Ok(members)) => (conv, members),
                Ok(Err(Access::NoSuchGroup)) => {
                    return Err(Refusal(
                        None,
                        ErrorCode::NoSuchGroup,
                        "no such group".into(),
                    ))
                }
                Ok(Err(_)) => {
                    let msg = "not a member of this group".to_owned();
                    return Err(Refusal(None, ErrorCode::NotMember, msg));
                }
                Err(e) => return Err(Refusal(None, ErrorCode::Internal, e.to_string())),
            }
        }
    };
    let n = shared.roster.typed(&user);
    let ts = now_ms();
    fan_out(
        shared,
        ("typing", 't'),
        &user,
        n,
        &members,
        &t.note,
        |note| {
            ServerFrame::Typing(TypingPush {
                from: user.clone(),
                conv: conv.clone(),
                state: t.state,
                note,
                ts,
            })
        },
    );
    Ok(())
}
