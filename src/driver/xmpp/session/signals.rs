//! Signals over XMPP: read receipts as XEP-0333 chat markers (`<displayed/>`, stored for a
//! sender that is offline, XEP-0334 `<store/>` asking for it), typing as XEP-0085 chat
//! states (`<composing/>`, `<paused/>`; not to be stored: `<no-store/>`), presence as the user's broadcast
//! presence to its roster (RFC 6121), whose subscriptions [`XmppSession::add_contacts`]
//! sets up both ways. Every signal's token travels as its stanza's `id` (presence: its
//! `<status>`), which both servers keep as they route, store and deliver it.

use super::XmppSession;
use crate::driver::xmpp::codec::{escape, Element};
use crate::driver::xmpp::ns;
use crate::driver::{Dest, Event, Failure, Signal};
use crate::envelope::{token, MAGIC};
use crate::metrics::ErrorKind;

/// XEP-0333 chat markers.
const MARKERS: &str = "urn:xmpp:chat-markers:0";
/// XEP-0085 chat state notifications.
const CHAT_STATES: &str = "http://jabber.org/protocol/chatstates";
/// XEP-0334 message processing hints.
const HINTS: &str = "urn:xmpp:hints";
/// The chat states a peer may send.
const STATES: [&str; 5] = ["active", "composing", "paused", "inactive", "gone"];

/// The stanza id of a message with `body`: its envelope's header (the body up to the
/// header's last `:`), which the reader of the message derives again for its read marker;
/// `None` for a body that is no envelope.
pub(in crate::driver::xmpp) fn message_id(body: &str) -> Option<&str> {
    if !body.starts_with(MAGIC) {
        return None;
    }
    // `ms1:` <sum> `:` <run> `:` <stream> `:` <seq> `:` <due> `:` <hsum> `:`
    let (end, _) = body.match_indices(':').nth(6)?;
    Some(&body[..=end])
}

/// `token` when it is one (a signal of this tool), for the engine.
fn delivered(token: &str) -> Option<Event> {
    token::decode(token).map(|_| Event::Delivered {
        body: token.to_owned().into(),
    })
}

impl XmppSession {
    /// The bare JID of user id `user`.
    fn jid(&self, user: &str) -> String {
        format!("{}@{}", self.username.replace("{user}", user), self.domain)
    }

    /// Subscribes to each of `ids` and approves their subscriptions (a pre-approval where
    /// they have not asked yet, RFC 6121 §3.4): contacts both ways once each side has
    /// done the same, which [`Self::presence_in`] completes for requests that could not
    /// reach an account not yet registered.
    pub(super) async fn add_contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        for id in ids {
            let jid = self.jid(id);
            let to = escape(&jid).into_owned();
            self.stanza(&format!("<presence type='subscribed' to='{to}'/>"));
            self.stanza(&format!("<presence type='subscribe' to='{to}'/>"));
            self.resume.contacts.insert(jid);
        }
        self.write().await
    }

    /// Sends `signal` with `token` as its stanza id (presence: its status).
    pub(super) async fn send_signal(
        &mut self,
        tag: u64,
        signal: Signal<'_>,
        token: &str,
    ) -> Result<(), Failure> {
        let id = escape(token).into_owned();
        match signal {
            Signal::Read {
                sender, message, ..
            } => {
                let marked = escape(message_id(message).unwrap_or(message)).into_owned();
                let xml = format!(
                    "<message type='chat' to='{}' id='{id}'><displayed xmlns='{MARKERS}' \
                     id='{marked}'/><store xmlns='{HINTS}'/></message>",
                    escape(&self.jid(sender))
                );
                self.tracked(tag, xml);
            }
            Signal::Typing { conv, active } => {
                let (to, kind) = self.conv(conv)?;
                let state = if active { "composing" } else { "paused" };
                self.stanza(&format!(
                    "<message type='{kind}' to='{}' id='{id}'><{state} xmlns='{CHAT_STATES}'/>\
                     <no-store xmlns='{HINTS}'/></message>",
                    escape(&to)
                ));
            }
            Signal::Presence { online: true } => {
                // An update of the login's own presence, which made the session
                // available at once (nothing sent to the user in between goes to offline
                // storage); the contacts see the token in this one.
                self.stanza(&format!("<presence><status>{id}</status></presence>"));
            }
            Signal::Presence { online: false } => {
                self.stanza(&format!(
                    "<presence type='unavailable'><status>{id}</status></presence>"
                ));
                self.left = true;
            }
        }
        self.write().await
    }

    /// The JID and message type of `conv`.
    pub(super) fn conv(&self, conv: Dest<'_>) -> Result<(String, &'static str), Failure> {
        match conv {
            Dest::User(u) => Ok((self.jid(u), "chat")),
            Dest::Group(g) => match self.room(g) {
                Ok(room) => Ok((room, "groupchat")),
                Err(why) => Err(Failure::new(ErrorKind::SendFailed, why)),
            },
        }
    }

    /// The token of a received message without a body: a read marker or a chat state
    /// (one that Prosody stored offline, ignoring `<no-store/>`, comes too: the ledger
    /// counts it as extra where none was owed).
    pub(super) fn signal_in(&self, e: &Element) -> Option<Event> {
        let marker = e.child_ns("displayed", MARKERS).is_some();
        let state = STATES.iter().any(|s| e.child_ns(s, CHAT_STATES).is_some());
        if !(marker || state) {
            return None;
        }
        if e.attr("type") == Some("groupchat") {
            let from = e.attr("from").unwrap_or_default();
            if from
                .split_once('/')
                .is_none_or(|(_, nick)| nick == self.nick)
            {
                return None;
            }
        }
        delivered(e.attr("id")?)
    }

    /// A received `<presence>` that is no room's: a subscription request is approved; a
    /// contact that asks or approves is asked once more (in case our request never reached
    /// its account); a contact's presence hands its token to the engine.
    pub(super) fn presence_in(&mut self, e: &Element) -> Option<Event> {
        if e.child_ns("x", ns::MUC_USER).is_some() {
            return None;
        }
        let from = e.attr("from").unwrap_or_default();
        let bare = from.split('/').next().unwrap_or(from).to_owned();
        match e.attr("type") {
            None | Some("unavailable") => delivered(&e.child("status")?.text),
            Some(kind @ ("subscribe" | "subscribed")) => {
                let to = escape(&bare).into_owned();
                if kind == "subscribe" {
                    self.stanza(&format!("<presence type='subscribed' to='{to}'/>"));
                }
                // Our own request may have gone to an account that did not exist yet, and
                // a pre-approval sent then may have been dropped (ejabberd keeps none):
                // asked again, the contact's server approves it now.
                if self.resume.contacts.contains(&bare) && self.resubscribed.insert(bare) {
                    self.stanza(&format!("<presence type='subscribe' to='{to}'/>"));
                }
                None
            }
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{self, Envelope};

    #[test]
    fn a_message_id_is_its_envelope_header_without_the_padding() {
        let env = Envelope {
            run: 1,
            stream: 9,
            seq: 4,
            due_us: 1_700_000_000_000_000,
        };
        let (mut short, mut long) = (String::new(), String::new());
        envelope::encode(&env, 0, &mut short);
        envelope::encode(&env, 300, &mut long);
        assert_eq!(message_id(&short), Some(short.as_str()), "a bare header");
        let id = message_id(&long).expect("an envelope");
        assert_eq!(id, &long[..short.len()], "the header without its padding");
        assert_eq!(message_id("hello: there"), None);
    }
}
