//! What an XMPP user keeps between its connections: the account, the SCRAM salted
//! password, the rooms it joined with the messages seen in each, the XEP-0198 session to
//! resume, its place in the archive and its contacts.

use std::collections::{HashMap, HashSet, VecDeque};

use super::mam;
use super::sasl::Salted;
use super::sm::SmResume;
use crate::driver::Account;

/// Ids of the room messages a user has had, to recognise them in the history a rejoin
/// replays. Bounded: history never goes back further than `muc_history` messages.
#[derive(Debug, Default)]
pub(super) struct RoomSeen {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl RoomSeen {
    /// Records `id`; false when it was already there.
    pub(super) fn insert(&mut self, id: String, keep: usize) -> bool {
        if self.ids.contains(&id) {
            return false;
        }
        self.order.push_back(id.clone());
        self.ids.insert(id);
        while self.order.len() > keep {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        true
    }
}

/// What an XMPP user remembers between connections.
#[derive(Debug, Default)]
pub struct XmppResume {
    /// The account was registered (or found) by this run.
    pub(super) registered: bool,
    /// What registering found, until a login reports it.
    pub(super) account: Option<Account>,
    /// The SCRAM salted password of the last login.
    pub(super) salted: Option<Salted>,
    /// Rooms joined before, by room JID, with the message ids seen in each.
    pub(super) rooms: HashMap<String, RoomSeen>,
    /// The XEP-0198 session a lost connection left behind, to resume.
    pub(super) sm: Option<SmResume>,
    /// The archive id of the last message this user had (`fetch = "mam"`): its next MAM
    /// fetch starts after it.
    pub(super) mam_after: Option<String>,
    /// Messages that came one way (archive, push) and may come the other way later, to
    /// hand each out once (`fetch = "mam"`).
    pub(super) copies: mam::Copies,
    /// The user's contacts (bare JIDs), once the engine has told them: a subscription
    /// request from one of them is answered with our own request too.
    pub(super) contacts: HashSet<String>,
}
