//! Signals over Socket.IO (`[target.socketio]` keys `receipt_event`, `typing_event`,
//! `presence_event`, `contacts_event`, their payloads and `signal`): each signal is an
//! event the user emits with the token in its payload (`{signal}`), and the app emits the
//! same event to the recipients with the token at the `signal` path of its first argument.
//!
//! Every signal is off until its event is named, so the driver offers exactly the signals
//! the app has ([`SignalEvents::offered`]). A receipt asks for an ack when sends do, and the
//! ack is its acceptance; typing and presence ask for none, except an `offline` presence
//! with `presence_ack`: Socket.IO drops an event that arrives in the same read as the
//! connection's close, so the user waits for its ack before closing. Receipts the app emits to a
//! sender that is away come back as the messages do, replayed by connection state recovery.
//! A signal event with an empty token (an app's own presence for a user that vanished) is
//! nobody's and is not handed out.

use super::codec::Emit;
use super::SocketIoSession;
use crate::driver::kit::json_map::path::Path;
use crate::driver::kit::json_map::template::{Template, Var};
use crate::driver::kit::json_map::{signal, text_of};
use crate::driver::kit::options::Table;
use crate::driver::{Failure, OptionError, Signal, Signals};
use crate::metrics::ErrorKind;
use serde_json::value::RawValue;

/// Placeholders of a receipt's payload (`{group}`: empty for a direct message).
const RECEIPT_VARS: &[Var] = &[Var::User, Var::To, Var::Group, Var::Signal, Var::NowMs];
/// Placeholders of a typing notice's payload (`{to}`: empty in a group; `{group}`: empty
/// to a peer).
const TYPING_VARS: &[Var] = &[
    Var::User,
    Var::To,
    Var::Group,
    Var::State,
    Var::Signal,
    Var::NowMs,
];
/// Placeholders of a presence's payload.
const PRESENCE_VARS: &[Var] = &[Var::User, Var::Status, Var::Signal, Var::NowMs];
/// Placeholders of the contacts payload.
const CONTACTS_VARS: &[Var] = &[Var::User, Var::Contacts, Var::NowMs];

/// The keys of `[target.socketio]` read here.
pub(super) const KEYS: [&str; 10] = [
    "receipt_event",
    "receipt",
    "typing_event",
    "typing",
    "presence_event",
    "presence",
    "contacts_event",
    "contacts",
    "signal",
    "presence_ack",
];

/// The signal events of `[target.socketio]`, resolved.
#[derive(Debug, Clone)]
pub struct SignalEvents {
    /// A read receipt to the message's sender.
    pub receipt: Option<Emit>,
    /// A typing notice to the peer or into the group.
    pub typing: Option<Emit>,
    /// Presence to the contacts online.
    pub presence: Option<Emit>,
    /// The user's contacts, emitted once at its first login.
    pub contacts: Option<Emit>,
    /// Where a signal event's token is in its first argument.
    pub token: Path,
    /// The app acknowledges presence: an `offline` presence waits for its ack before the
    /// connection closes (Socket.IO drops an event that arrives with the close).
    pub presence_ack: bool,
    /// The names of the signal events, as their first argument reads (the receipt's first
    /// when it is on).
    names: Vec<String>,
}

impl SignalEvents {
    /// Reads the signal keys of `top`.
    pub(super) fn parse(top: &Table<'_>) -> Result<Self, OptionError> {
        let emit = |event: &str, key: &str, default: &str, vars: &[Var]| {
            let Some(name) = top.str(event)? else {
                if top.t.contains_key(key) {
                    return Err(top.bad(key, format!("applies to `{event}`, which is not given")));
                }
                return Ok(None);
            };
            if name.is_empty() {
                return Err(top.bad(event, "an empty event name"));
            }
            let payload = Template::parse(top.str(key)?.unwrap_or(default), vars)
                .map_err(|e| top.bad(key, e))?;
            let open = format!("[{},", serde_json::Value::from(name));
            Ok::<_, OptionError>(Some((name.to_owned(), Emit { open, payload })))
        };
        // Each signal's event key, payload key, default payload and placeholders.
        let [receipt, typing, presence, contacts] = [
            (
                "receipt_event",
                "receipt",
                r#"{"to":"{to}","group":"{group}","signal":"{signal}"}"#,
                RECEIPT_VARS,
            ),
            (
                "typing_event",
                "typing",
                r#"{"to":"{to}","group":"{group}","state":"{state}","signal":"{signal}"}"#,
                TYPING_VARS,
            ),
            (
                "presence_event",
                "presence",
                r#"{"status":"{status}","signal":"{signal}"}"#,
                PRESENCE_VARS,
            ),
            ("contacts_event", "contacts", "{contacts}", CONTACTS_VARS),
        ]
        .map(|(event, key, default, vars)| emit(event, key, default, vars));
        let (receipt, typing, presence, contacts) = (receipt?, typing?, presence?, contacts?);
        if presence.is_some() && contacts.is_none() {
            return Err(top.bad(
                "contacts_event",
                "is required with `presence_event`: the event that tells the app whom the \
                 user's presence goes to",
            ));
        }
        let token = Path::parse(top.str("signal")?.unwrap_or("signal"))
            .map_err(|e| top.bad("signal", e))?;
        let mut names = Vec::new();
        for (name, _) in [&receipt, &typing, &presence].into_iter().flatten() {
            if names.contains(name) {
                return Err(top.bad(
                    "typing_event",
                    format!("`{name}` names two signals; each needs its own event"),
                ));
            }
            names.push(name.clone());
        }
        let presence_ack = top.bool("presence_ack")?;
        if presence_ack && presence.is_none() {
            return Err(top.bad(
                "presence_ack",
                "applies to `presence_event`, which is not given",
            ));
        }
        Ok(SignalEvents {
            presence_ack,
            receipt: receipt.map(|(_, e)| e),
            typing: typing.map(|(_, e)| e),
            presence: presence.map(|(_, e)| e),
            contacts: contacts.map(|(_, e)| e),
            token,
            names,
        })
    }

    /// The signals offered: those whose events are named.
    pub(super) fn offered(&self) -> Signals {
        Signals {
            receipts: self.receipt.is_some(),
            typing: self.typing.is_some(),
            presence: self.presence.is_some(),
            keys: [
                "target.socketio.receipt_event",
                "target.socketio.typing_event",
                "target.socketio.presence_event",
            ],
        }
    }

    /// Whether the event named `name` is the receipt event.
    pub(super) fn is_receipt(&self, name: &str) -> bool {
        self.receipt.is_some() && self.names.first().is_some_and(|n| n == name)
    }

    /// Whether the event named `name` is a signal.
    pub(super) fn is_signal(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// The token of a signal event's first argument (`None` for an empty one: nobody's).
    pub(super) fn token(&self, payload: &RawValue) -> Result<Option<String>, String> {
        match self.token.with(payload, |v| v.map(text_of)) {
            Some(t) if t.is_empty() => Ok(None),
            Some(t) => Ok(Some(t)),
            None => Err(format!("a signal without a token at `{}`", self.token)),
        }
    }
}

impl SocketIoSession {
    /// [`Session::contacts`](crate::driver::Session::contacts): the contacts event with
    /// every id, waited for when acks are on.
    pub(super) async fn send_contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        let opts = std::sync::Arc::clone(&self.opts);
        let Some(emit) = &opts.signals.contacts else {
            return Err(Failure::new(ErrorKind::Protocol, "no `contacts_event`"));
        };
        let (list, user) = (signal::contacts(ids)?, self.st.user.clone());
        let id = self
            .emit(emit, &signal::contacts_values(&user, &list), opts.ack)
            .await?;
        self.ws.flush().await?;
        match id {
            Some(id) => self.await_ack(id, ErrorKind::Protocol, "contacts").await,
            None => Ok(()),
        }
    }

    /// [`Session::signal`](crate::driver::Session::signal): the signal's event with `token`
    /// in its payload; a receipt asks for an ack when sends do.
    pub(super) async fn send_signal(
        &mut self,
        tag: u64,
        signal: Signal<'_>,
        token: &str,
    ) -> Result<(), Failure> {
        let opts = std::sync::Arc::clone(&self.opts);
        let sig = &opts.signals;
        let (emit, receipt) = match signal {
            Signal::Read { .. } => (&sig.receipt, true),
            Signal::Typing { .. } => (&sig.typing, false),
            Signal::Presence { .. } => (&sig.presence, false),
        };
        let Some(emit) = emit else {
            return Err(Failure::new(
                ErrorKind::SendFailed,
                "the app has no event for this signal",
            ));
        };
        let user = self.st.user.clone();
        let vals = signal::values(&user, signal, token);
        let leaving = matches!(signal, Signal::Presence { online: false }) && sig.presence_ack;
        let id = self
            .emit(emit, &vals, (receipt && opts.ack) || leaving)
            .await?;
        match id {
            Some(id) if leaving => {
                self.ws.flush().await?;
                self.await_ack(id, ErrorKind::Protocol, "presence").await
            }
            Some(id) => {
                self.st.inbox.expect_ack(id, tag);
                Ok(())
            }
            None => Ok(()),
        }
    }
}
