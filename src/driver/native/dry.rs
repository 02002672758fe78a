//! `msgstorm validate --frames`: the frames this driver would send for one user's login, a
//! direct and a group message, its contacts and each signal, without connecting.

use super::codec::signal_frame;
use crate::driver::{Dest, Signal};
use crate::envelope::{self, Envelope};
use crate::vocab::SignalKind;
use crate::wire::{self, ClientFrame, ContactsAdd};

/// The envelope of the dry run's message and tokens, as a run would send them.
const ENVELOPE: Envelope = Envelope {
    run: 1,
    stream: 0,
    seq: 0,
    due_us: 0,
};

/// The lines of a dry run as `user` (its login `token`), sending to `to` and to `group`.
pub(super) fn lines(user: &str, token: String, to: &str, group: &str) -> Vec<String> {
    let mut body = String::new();
    envelope::encode(&ENVELOPE, 100, &mut body);
    let signal_token = |kind| {
        let mut t = String::new();
        envelope::token::encode(kind, &ENVELOPE, &mut t);
        t
    };
    let send = |r#ref, to| ClientFrame::Send {
        r#ref,
        to,
        body: body.clone(),
    };
    let read = Signal::Read {
        sender: to,
        conv: Dest::User(to),
        message: &body,
    };
    let typing = Signal::Typing {
        conv: Dest::User(to),
        active: true,
    };
    let shown = [
        (
            format!("login of {user}:"),
            ClientFrame::Login {
                v: wire::PROTOCOL_VERSION,
                user: user.to_owned(),
                token,
            },
        ),
        (
            format!("direct message from {user} to {to}:"),
            send(1, wire::Dest::User(to.to_owned())),
        ),
        (
            format!("group message from {user} to {group}:"),
            send(2, wire::Dest::Group(group.to_owned())),
        ),
        (
            format!("contacts of {user} (presence):"),
            ClientFrame::Contacts(ContactsAdd {
                r#ref: 3,
                add: vec![to.to_owned()],
            }),
        ),
        (
            format!("presence of {user} at its login:"),
            signal_frame(
                user,
                0,
                Signal::Presence { online: true },
                &signal_token(SignalKind::Presence),
            ),
        ),
        (
            format!("{user} types to {to}:"),
            signal_frame(user, 0, typing, &signal_token(SignalKind::Typing)),
        ),
        (
            format!("{user} read a message of {to}'s:"),
            signal_frame(user, 4, read, &signal_token(SignalKind::Read)),
        ),
    ];
    shown
        .into_iter()
        .flat_map(|(what, frame)| {
            let json = serde_json::to_string(&frame).unwrap_or_else(|e| e.to_string());
            [what, format!("  sends {json}")]
        })
        .collect()
}
