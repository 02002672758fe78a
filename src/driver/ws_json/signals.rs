//! Signals over `ws-json` (`[target.ws-json]` keys `contacts`, `receipt`, `group_receipt`,
//! `typing`, `group_typing`, `presence`, `receipt_ok` and the `signal` rule): the frames a user sends for
//! each signal, filled with its token as `{signal}`, and the pushed signals recognised by
//! one rule that says where their token is.
//!
//! The driver offers exactly the signals whose templates are set ([`SignalOptions::offered`]).
//! A receipt carries `{req_id}` when sends are acknowledged (`ack`): the reply that
//! `receipt_ok` matches (the `ack` rule without it) is its acceptance. A pushed signal with
//! a sequence number (`signal.seq`: a stored receipt's place in the user's receipt inbox)
//! merges with the receipts fetched by `sync.receipts` as a pushed message merges with
//! its conversation's pages; a pushed signal with an empty token (a server's own presence
//! for a user that vanished) is nobody's and is not handed out.

use tokio_tungstenite::tungstenite::Message;

use super::WsJsonSession;
use crate::driver::kit::json_map::path::{Index, Matcher, Path};
use crate::driver::kit::json_map::template::{Template, Values, Var};
use crate::driver::kit::json_map::{now_ms, signal};
use crate::driver::kit::options::Table;
use crate::driver::{Dest, Failure, OptionError, Signal, Signals};
use crate::metrics::ErrorKind;

/// The key of the user's receipt inbox among its cursors: numbered by the `signal.seq` of
/// pushed receipts and the `receipts_seq` of fetched ones, and no conversation's id.
pub(super) const RECEIPTS: &str = "\0receipts";

/// Placeholders of the contacts frame.
const CONTACTS_VARS: &[Var] = &[Var::User, Var::ReqId, Var::Contacts, Var::NowMs];
/// Placeholders of a read receipt for a direct message.
const RECEIPT_VARS: &[Var] = &[
    Var::User,
    Var::ReqId,
    Var::To,
    Var::Low,
    Var::High,
    Var::Signal,
    Var::NowMs,
];
/// Placeholders of a read receipt for a group message.
const GROUP_RECEIPT_VARS: &[Var] = &[
    Var::User,
    Var::ReqId,
    Var::To,
    Var::Group,
    Var::Signal,
    Var::NowMs,
];
/// Placeholders of a typing notice.
const TYPING_VARS: &[Var] = &[
    Var::User,
    Var::ReqId,
    Var::To,
    Var::State,
    Var::Signal,
    Var::NowMs,
];
/// Placeholders of a typing notice into a group.
const GROUP_TYPING_VARS: &[Var] = &[
    Var::User,
    Var::ReqId,
    Var::Group,
    Var::State,
    Var::Signal,
    Var::NowMs,
];
/// Placeholders of a presence.
const PRESENCE_VARS: &[Var] = &[Var::User, Var::ReqId, Var::Status, Var::Signal, Var::NowMs];

/// A pushed signal: which frames, and where its token is.
#[derive(Debug, Clone)]
pub struct SignalRule {
    /// Which frames.
    pub matcher: Matcher,
    /// Where the token is.
    pub token: Path,
    /// Where a stored receipt's sequence number in the user's receipt inbox is.
    pub seq: Option<Path>,
}

/// The signal keys of `[target.ws-json]`, resolved.
#[derive(Debug, Clone, Default)]
pub struct SignalOptions {
    /// Telling the server the user's contacts (`{contacts}`: a JSON array of wire ids).
    pub contacts: Option<Template>,
    /// A read receipt for a direct message (`{to}`: the sender).
    pub receipt: Option<Template>,
    /// A read receipt for a group message (`{to}`: the sender, `{group}`).
    pub group_receipt: Option<Template>,
    /// A typing notice to the peer (`{to}`, `{state}`).
    pub typing: Option<Template>,
    /// A typing notice into a group (`{group}`, `{state}`).
    pub group_typing: Option<Template>,
    /// Presence (`{status}`).
    pub presence: Option<Template>,
    /// Which reply accepts a receipt (none: the `ack` rule's frames).
    pub receipt_ok: Option<Matcher>,
    /// Pushed signals.
    pub push: Option<SignalRule>,
}

impl SignalOptions {
    /// Reads the signal keys of `top`; `ack` says whether sends are acknowledged.
    pub(super) fn parse(top: &Table<'_>, ack: bool) -> Result<Self, OptionError> {
        let opts = SignalOptions {
            contacts: top.template("contacts", CONTACTS_VARS)?,
            receipt: top.template("receipt", RECEIPT_VARS)?,
            group_receipt: top.template("group_receipt", GROUP_RECEIPT_VARS)?,
            typing: top.template("typing", TYPING_VARS)?,
            group_typing: top.template("group_typing", GROUP_TYPING_VARS)?,
            presence: top.template("presence", PRESENCE_VARS)?,
            receipt_ok: match top.sub("receipt_ok")? {
                Some(t) => {
                    t.keys_with(&[])?;
                    Some(t.some_matcher()?)
                }
                None => None,
            },
            push: match top.sub("signal")? {
                Some(t) => {
                    t.keys_with(&["token", "seq"])?;
                    Some(SignalRule {
                        matcher: t.some_matcher()?,
                        token: t.need_path("token")?,
                        seq: t.path("seq")?,
                    })
                }
                None => None,
            },
        };
        let any = opts.receipt.is_some()
            || opts.group_receipt.is_some()
            || opts.typing.is_some()
            || opts.presence.is_some();
        if any && opts.push.is_none() {
            return Err(top.bad(
                "signal",
                "is required with a signal template: say which frame is a pushed signal and \
                 where its token is (`[target.ws-json.signal]` with `when` and `token`)",
            ));
        }
        if opts.presence.is_some() && opts.contacts.is_none() {
            return Err(top.bad(
                "contacts",
                "is required with `presence`: the frame that tells the server whom the user's \
                 presence goes to, as in `contacts = '{\"add\":{contacts}}'`",
            ));
        }
        if opts.group_typing.is_some() && opts.typing.is_none() {
            return Err(top.bad(
                "typing",
                "is required with `group_typing`: typing is offered for direct and group \
                 sends or not at all",
            ));
        }
        if opts.group_receipt.is_some() && opts.receipt.is_none() {
            return Err(top.bad(
                "receipt",
                "is required with `group_receipt`: receipts are offered for direct and group \
                 messages or not at all",
            ));
        }
        let acked = [
            ("receipt", &opts.receipt),
            ("group_receipt", &opts.group_receipt),
        ];
        for (key, t) in acked {
            if ack && t.as_ref().is_some_and(|t| !t.uses(Var::ReqId)) {
                return Err(top.bad(
                    key,
                    "needs `{req_id}`: sends are acknowledged (`ack`), so a receipt's \
                     acceptance is the reply carrying its request id",
                ));
            }
        }
        if opts.receipt_ok.is_some() && opts.receipt.is_none() {
            return Err(top.bad("receipt_ok", "applies to `receipt`, which is not given"));
        }
        Ok(opts)
    }

    /// The signals offered: those whose templates are set.
    pub(super) fn offered(&self) -> Signals {
        Signals {
            receipts: self.receipt.is_some(),
            typing: self.typing.is_some(),
            presence: self.presence.is_some(),
            keys: [
                "target.ws-json.receipt",
                "target.ws-json.typing",
                "target.ws-json.presence",
            ],
        }
    }

    /// Gives the paths of the pushed-signal rule and of `receipt_ok` their slots in `index`.
    pub(super) fn index(&mut self, index: &mut Index) {
        let matcher = |m: &mut Matcher, index: &mut Index| {
            m.when.iter_mut().for_each(|(p, _)| index.add(p));
            m.has.iter_mut().for_each(|p| index.add(p));
        };
        if let Some(p) = &mut self.push {
            matcher(&mut p.matcher, index);
            index.add(&mut p.token);
            if let Some(s) = &mut p.seq {
                index.add(s);
            }
        }
        if let Some(m) = &mut self.receipt_ok {
            matcher(m, index);
        }
    }
}

impl WsJsonSession {
    /// [`Session::contacts`](crate::driver::Session::contacts): one `contacts` frame with
    /// every id, waited for when replies carry a request id.
    pub(super) async fn send_contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        let (list, user) = (signal::contacts(ids)?, self.st.user.clone());
        let vals = signal::contacts_values(&user, &list);
        let opts = std::sync::Arc::clone(&self.opts);
        let Some(t) = &opts.signals.contacts else {
            return Err(Failure::new(ErrorKind::Protocol, "no `contacts` template"));
        };
        if opts.reply_id.is_none() {
            self.write(t, &vals).await?;
            return self.ws.flush().await;
        }
        let reply = self.call(t, vals).await?;
        match opts.error_of(&reply) {
            Some(reason) => Err(Failure::new(
                ErrorKind::Protocol,
                format!("contacts refused: {reason}"),
            )),
            None => Ok(()),
        }
    }

    /// [`Session::signal`](crate::driver::Session::signal): the signal's template filled
    /// with `token`; a receipt waits for its acceptance when sends do.
    pub(super) async fn send_signal(
        &mut self,
        tag: u64,
        signal: Signal<'_>,
        token: &str,
    ) -> Result<(), Failure> {
        let id = self.st.inbox.next_id();
        let opts = std::sync::Arc::clone(&self.opts);
        let sig = &opts.signals;
        let template = match signal {
            Signal::Read {
                conv: Dest::User(_),
                ..
            } => &sig.receipt,
            Signal::Read { .. } => &sig.group_receipt,
            Signal::Typing {
                conv: Dest::User(_),
                ..
            } => &sig.typing,
            Signal::Typing { .. } => &sig.group_typing,
            Signal::Presence { .. } => &sig.presence,
        };
        let Some(template) = template else {
            return Err(Failure::new(
                ErrorKind::SendFailed,
                "no template for this signal",
            ));
        };
        let text = {
            let vals = signal::values(&self.st.user, signal, token);
            template.fill(&Values { req_id: id, ..vals }, now_ms())
        };
        if matches!(signal, Signal::Read { .. }) && opts.ack.is_some() {
            self.st.inbox.expect_ack(id, tag);
        }
        self.ws.write(Message::text(text)).await
    }
}
