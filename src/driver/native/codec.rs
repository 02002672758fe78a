//! The native protocol's frames as this driver reads them (the frame types themselves are
//! [`crate::wire`], shared with `serve`): the frame of each signal, which request a reply
//! answers, and the failures of a frame that cannot be read or was not expected.

use crate::driver::kit::json_map::clip;
use crate::driver::{Dest, Failure, Signal};
use crate::metrics::ErrorKind;
use crate::wire::{self, ClientFrame, ServerFrame, Status, TypingState};

/// The frame `user` sends for `signal` carrying `token` as its note: a receipt (with `tag`
/// as its ref; its `ok` is the acceptance) for the conversation the message came in, a
/// typing notice, or presence.
pub(super) fn signal_frame(user: &str, tag: u64, signal: Signal<'_>, token: &str) -> ClientFrame {
    let note = token.to_owned();
    match signal {
        Signal::Read { sender, conv, .. } => ClientFrame::Receipt(wire::Receipt {
            r#ref: tag,
            to: sender.to_owned(),
            conv: match conv {
                Dest::User(peer) => wire::direct_conv(user, peer),
                Dest::Group(g) => wire::group_conv(g),
            },
            note,
        }),
        Signal::Typing { conv, active } => ClientFrame::Typing(wire::Typing {
            to: match conv {
                Dest::User(peer) => wire::Dest::User(peer.to_owned()),
                Dest::Group(g) => wire::Dest::Group(g.to_owned()),
            },
            state: if active {
                TypingState::Start
            } else {
                TypingState::Stop
            },
            note,
        }),
        Signal::Presence { online } => ClientFrame::Presence(wire::Presence {
            r#ref: None,
            status: if online {
                Status::Online
            } else {
                Status::Offline
            },
            note,
        }),
    }
}

/// The `ref` a server frame answers, if any.
pub(super) fn reply_ref(frame: &ServerFrame) -> Option<u64> {
    match frame {
        ServerFrame::Ok { r#ref }
        | ServerFrame::ConvList { r#ref, .. }
        | ServerFrame::SyncPage { r#ref, .. } => Some(*r#ref),
        ServerFrame::ReceiptPage(p) => Some(p.r#ref),
        ServerFrame::Error { r#ref, .. } => *r#ref,
        _ => None,
    }
}

/// Reads a frame that is not one of the [`wire::Hot`] ones.
pub(super) fn parse(text: &str) -> Result<ServerFrame, Failure> {
    serde_json::from_str(text).map_err(|e| unreadable(&e, text))
}

pub(super) fn unreadable(e: &serde_json::Error, text: &str) -> Failure {
    Failure::new(
        ErrorKind::Protocol,
        format!("unreadable frame ({e}): {}", clip(text)),
    )
}

pub(super) fn unexpected(what: &str, frame: &ServerFrame) -> Failure {
    Failure::new(
        ErrorKind::Protocol,
        format!("{what}: unexpected reply {}", clip(&format!("{frame:?}"))),
    )
}
