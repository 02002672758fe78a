//! Signals through the hub: read receipts to the message's sender (pushed or stored like a
//! direct message), typing notices to the peer or the group's members online, presence to
//! the contacts online.

use std::sync::Arc;

use super::hub::{Item, DIRECT};
use super::session::{reset, Cut};
use super::LoopbackSession;
use crate::driver::{Dest, Failure, Signal};

/// The conversation key of read receipts (faults of receipts are decided apart from the
/// sender's direct messages).
const RECEIPTS: u32 = DIRECT - 1;

impl LoopbackSession {
    /// Records `ids` as this user's contacts, both ways.
    pub(super) fn add_contacts(&self, ids: &[&str]) -> Result<(), Failure> {
        self.usable()?;
        let mut all = self.hub.contacts.write().unwrap_or_else(|p| p.into_inner());
        for &id in ids {
            for (a, b) in [(&*self.id, id), (id, &*self.id)] {
                let list = all.entry(a.into()).or_default();
                if !list.iter().any(|x| &**x == b) {
                    list.push(b.into());
                }
            }
        }
        Ok(())
    }

    /// Sends `signal` with `token`.
    pub(super) fn send_signal(
        &self,
        tag: u64,
        signal: Signal<'_>,
        token: &str,
    ) -> Result<(), Failure> {
        self.usable()?;
        let now = self.now();
        match signal {
            Signal::Read { sender, .. } => {
                let mb = self.hub.mailbox(sender);
                self.hub.push(&mb, (self.ix, RECEIPTS), token, now);
                self.hub.answer(&self.mailbox, Item::Accepted(tag), now);
            }
            Signal::Typing {
                conv: Dest::User(peer),
                ..
            } => self.hub.push_live(&self.hub.mailbox(peer), token, now),
            Signal::Typing {
                conv: Dest::Group(name),
                ..
            } => {
                if let Some(g) = self.hub.group(name) {
                    let members = g.members.read().unwrap_or_else(|p| p.into_inner());
                    for mb in members.iter().filter(|m| !Arc::ptr_eq(m, &self.mailbox)) {
                        self.hub.push_live(mb, token, now);
                    }
                }
            }
            Signal::Presence { .. } => {
                let contacts = self
                    .hub
                    .contacts
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&*self.id)
                    .cloned()
                    .unwrap_or_default();
                for c in contacts {
                    self.hub.push_live(&self.hub.mailbox(&c), token, now);
                }
            }
        }
        Ok(())
    }

    /// Fails when the `cut_user` hook broke the connection.
    fn usable(&self) -> Result<(), Failure> {
        match self.cut {
            Cut::Broken => Err(reset()),
            Cut::No | Cut::AtSend => Ok(()),
        }
    }
}
