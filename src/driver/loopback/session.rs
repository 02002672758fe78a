//! One user's connection to the hub ([`LoopbackSession`]): sends go straight into the
//! hub, events come out of the user's mailbox; the `cut_user` hook breaks it on purpose.

use std::sync::{Arc, RwLock};

use tokio::time::Instant;

use super::hub::{lock, Fault, Group, Hub, Item, Mailbox, Mark, DIRECT};
use crate::driver::{Dest, Event, Failure, Session};
use crate::metrics::ErrorKind;
use crate::vocab::UserIx;

/// One user's connection to the hub. Dropping it disconnects the user.
#[derive(Debug)]
pub struct LoopbackSession {
    pub(super) hub: Arc<Hub>,
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) ix: UserIx,
    /// The user's wire id.
    pub(super) id: Box<str>,
    /// `send` panics (the `panic_user` hook).
    pub(super) panics: bool,
    /// Where the `cut_user` hook stands for this connection.
    pub(super) cut: Cut,
}

/// The `cut_user` hook on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    /// Not cut.
    No,
    /// The next send breaks the connection.
    AtSend,
    /// Broken: every call fails.
    Broken,
}

/// What every call of a connection broken by the `cut_user` hook fails with.
pub(super) fn reset() -> Failure {
    Failure::new(
        ErrorKind::ClosedByPeer,
        "connection reset by peer (test hook)",
    )
}

impl LoopbackSession {
    pub(super) fn now(&self) -> Option<Instant> {
        self.hub.timed.then(Instant::now)
    }

    /// Turns a queued item into the engine's event, applying and counting its fault.
    pub(super) fn hand_out(&self, item: Item) -> Event {
        match item {
            Item::Accepted(tag) => Event::Accepted { tag },
            Item::Refused(tag, why) => Event::Refused {
                tag,
                failure: Failure::new(ErrorKind::SendFailed, why),
            },
            Item::Reply(tag) => Event::Reply { tag },
            Item::Push(mut body, mark) => {
                match mark {
                    Mark::Clean => {}
                    Mark::Corrupt => {
                        let last = body.pop();
                        body.push(if last == Some('x') { 'y' } else { 'x' });
                        self.hub.count(Fault::Corrupted);
                    }
                    Mark::Copy => self.hub.count(Fault::Duplicated),
                    Mark::Reordered => self.hub.count(Fault::Reordered),
                }
                Event::Delivered { body: body.into() }
            }
        }
    }
}

impl Drop for LoopbackSession {
    fn drop(&mut self) {
        let mut st = lock(&self.mailbox.state);
        st.online = false;
        st.last_ready = None;
        self.hub.unhold(&mut st);
        let queue = std::mem::take(&mut st.queue);
        for q in queue {
            match q.item {
                Item::Push(body, Mark::Reordered) => {
                    self.hub.count(Fault::Dropped);
                    st.store.push(body);
                }
                Item::Push(body, Mark::Clean | Mark::Corrupt) => st.store.push(body),
                Item::Push(_, Mark::Copy)
                | Item::Accepted(_)
                | Item::Refused(..)
                | Item::Reply(_) => {}
            }
        }
    }
}

impl Session for LoopbackSession {
    type Resume = ();

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        assert!(
            !self.panics,
            "loopback: injected panic in the send of user {}",
            self.ix
        );
        match self.cut {
            Cut::No => {}
            Cut::AtSend => {
                self.cut = Cut::Broken;
                return Ok(());
            }
            Cut::Broken => return Err(reset()),
        }
        let now = self.now();
        match dest {
            Dest::User(id) => {
                let users = self.hub.users.read().unwrap_or_else(|p| p.into_inner());
                match users.get(id) {
                    Some(mb) => self.hub.push(mb, (self.ix, DIRECT), body, now),
                    None => {
                        drop(users);
                        let mb = self.hub.mailbox(id);
                        self.hub.push(&mb, (self.ix, DIRECT), body, now);
                    }
                }
            }
            Dest::Group(name) => {
                let Some(group) = self.hub.group(name) else {
                    let item = Item::Refused(tag, "no such group");
                    self.hub.answer(&self.mailbox, item, now);
                    return Ok(());
                };
                let members = group.members.read().unwrap_or_else(|p| p.into_inner());
                for mb in members.iter().filter(|m| !Arc::ptr_eq(m, &self.mailbox)) {
                    self.hub.push(mb, (self.ix, group.id), body, now);
                }
            }
        }
        self.hub.answer(&self.mailbox, Item::Accepted(tag), now);
        Ok(())
    }

    async fn request(&mut self, tag: u64, _name: &'static str) -> Result<(), Failure> {
        let now = self.now();
        self.hub.answer(&self.mailbox, Item::Reply(tag), now);
        Ok(())
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        match self.cut {
            Cut::Broken => Err(reset()),
            Cut::No | Cut::AtSend => Ok(()),
        }
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        let g = {
            let mut groups = self.hub.groups.write().unwrap_or_else(|p| p.into_inner());
            let id = groups.len() as u32;
            groups
                .entry(group.into())
                .or_insert_with(|| {
                    Arc::new(Group {
                        id,
                        members: RwLock::default(),
                    })
                })
                .clone()
        };
        let mut members = g.members.write().unwrap_or_else(|p| p.into_inner());
        if !members.iter().any(|m| Arc::ptr_eq(m, &self.mailbox)) {
            members.push(self.mailbox.clone());
        }
        Ok(())
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        let mut st = lock(&self.mailbox.state);
        self.hub.unhold(&mut st);
        out.append(&mut st.store);
        Ok(())
    }

    async fn next_event(&mut self) -> Event {
        if self.cut == Cut::Broken {
            return Event::Closed(reset());
        }
        loop {
            let wait = {
                let mut st = lock(&self.mailbox.state);
                match st.queue.front().map(|q| q.ready) {
                    None => None,
                    Some(Some(t)) if t > Instant::now() => Some(t),
                    Some(_) => {
                        if let Some(q) = st.queue.pop_front() {
                            drop(st);
                            return self.hand_out(q.item);
                        }
                        None
                    }
                }
            };
            match wait {
                Some(t) => {
                    tokio::select! {
                        _ = self.mailbox.notify.notified() => {}
                        _ = tokio::time::sleep_until(t) => {}
                    }
                }
                None => self.mailbox.notify.notified().await,
            }
        }
    }

    async fn contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        self.add_contacts(ids)
    }

    async fn signal(
        &mut self,
        tag: u64,
        signal: crate::driver::Signal<'_>,
        token: &str,
    ) -> Result<(), Failure> {
        self.send_signal(tag, signal, token)
    }

    async fn close(self) {}

    fn into_resume(self) {}
}
