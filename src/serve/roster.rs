//! Who follows whose presence: every user's contacts in memory, loaded from the store at
//! start and extended by the writer after each commit of a `contacts` request, and each
//! user's presence as last published (what the server's own `offline` at an abrupt
//! disconnect depends on), with the per-user counters that key signal faults.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, RwLock};

use crate::wire::Status;

/// Contacts and presence of every user.
#[derive(Debug, Default)]
pub struct Roster {
    contacts: RwLock<HashMap<String, HashSet<String>>>,
    published: Mutex<HashMap<String, Published>>,
}

/// What a user published, and how many presence and typing notices so far.
#[derive(Debug, Default)]
struct Published {
    online: bool,
    presences: u64,
    typings: u64,
}

impl Roster {
    /// A roster holding `pairs` (each pair in either or both directions).
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        let roster = Roster::default();
        for (a, b) in pairs {
            roster.add(&a, std::slice::from_ref(&b));
        }
        roster
    }

    fn published(&self) -> MutexGuard<'_, HashMap<String, Published>> {
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `user` and each of `others` contacts of each other.
    pub fn add(&self, user: &str, others: &[String]) {
        let mut map = self.contacts.write().unwrap_or_else(|p| p.into_inner());
        for other in others {
            map.entry(user.to_owned())
                .or_default()
                .insert(other.clone());
            map.entry(other.clone())
                .or_default()
                .insert(user.to_owned());
        }
    }

    /// The contacts of `user`.
    pub fn contacts(&self, user: &str) -> Vec<String> {
        let map = self.contacts.read().unwrap_or_else(|p| p.into_inner());
        map.get(user)
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Notes that `user` published `status`; returns the number of this presence notice
    /// of the user (1, 2, …).
    pub fn publish(&self, user: &str, status: Status) -> u64 {
        let mut all = self.published();
        let p = all.entry(user.to_owned()).or_default();
        p.online = status == Status::Online;
        p.presences += 1;
        p.presences
    }

    /// The number of this typing notice of `user` (1, 2, …).
    pub fn typed(&self, user: &str) -> u64 {
        let mut all = self.published();
        let p = all.entry(user.to_owned()).or_default();
        p.typings += 1;
        p.typings
    }

    /// When `user`, whose last connection just closed, is still published online: notes
    /// it offline and returns the number of that presence notice.
    pub fn vanished(&self, user: &str) -> Option<u64> {
        let mut all = self.published();
        let p = all.get_mut(user).filter(|p| p.online)?;
        p.online = false;
        p.presences += 1;
        Some(p.presences)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contacts_are_mutual_and_an_abrupt_close_goes_offline_once() {
        let r = Roster::new(vec![("a".into(), "b".into())]);
        r.add("c", &["a".to_owned()]);
        let mut of_a = r.contacts("a");
        of_a.sort();
        assert_eq!(of_a, ["b", "c"]);
        assert_eq!(r.contacts("b"), ["a"]);
        assert_eq!(r.vanished("a"), None, "never published online");
        assert_eq!(r.publish("a", Status::Online), 1);
        assert_eq!(r.vanished("a"), Some(2));
        assert_eq!(r.vanished("a"), None);
        r.publish("a", Status::Offline);
        assert_eq!(r.vanished("a"), None, "went offline itself");
        assert_eq!((r.typed("a"), r.typed("a")), (1, 2));
    }
}
