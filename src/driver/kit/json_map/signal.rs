//! The placeholders of a signal's template, filled the same way by every driver that
//! describes signals as templates (`ws-json`, `socketio`): `{signal}` the token, `{to}` the
//! receipt's sender or the typing peer, `{low}`/`{high}` the two users of a direct
//! conversation in sorted order, `{group}` a group message's group, `{state}` and
//! `{status}`; and `{contacts}`, a JSON array of ids.

use super::template::Values;
use crate::driver::{Dest, Failure, Signal};
use crate::metrics::ErrorKind;

/// The values of the template of `signal` that `user` sends carrying `token`.
pub fn values<'a>(user: &'a str, signal: Signal<'a>, token: &'a str) -> Values<'a> {
    let vals = Values {
        user,
        signal: token,
        ..Values::default()
    };
    match signal {
        Signal::Read { sender, conv, .. } => {
            let (low, high) = if user <= sender {
                (user, sender)
            } else {
                (sender, user)
            };
            let group = match conv {
                Dest::User(_) => "",
                Dest::Group(g) => g,
            };
            Values {
                to: sender,
                low,
                high,
                group,
                ..vals
            }
        }
        Signal::Typing { conv, active } => {
            let (to, group) = match conv {
                Dest::User(to) => (to, ""),
                Dest::Group(g) => ("", g),
            };
            let state = if active { "start" } else { "stop" };
            Values {
                to,
                group,
                state,
                ..vals
            }
        }
        Signal::Presence { online } => {
            let status = if online { "online" } else { "offline" };
            Values { status, ..vals }
        }
    }
}

/// `ids` as the JSON array `{contacts}` stands for.
pub fn contacts(ids: &[&str]) -> Result<String, Failure> {
    serde_json::to_string(ids).map_err(|e| Failure::new(ErrorKind::Other, format!("contacts: {e}")))
}

/// The values of the contacts template of `user`, `list` being [`contacts`]' array.
pub fn contacts_values<'a>(user: &'a str, list: &'a str) -> Values<'a> {
    Values {
        user,
        contacts: list,
        ..Values::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_names_its_sender_and_the_pair_in_order() {
        let read = Signal::Read {
            sender: "alice",
            conv: Dest::User("alice"),
            message: "m",
        };
        let v = values("bob", read, "R1");
        assert_eq!(
            (v.to, v.low, v.high, v.group, v.signal),
            ("alice", "alice", "bob", "", "R1")
        );
        let typing = Signal::Typing {
            conv: Dest::User("carol"),
            active: false,
        };
        assert_eq!(
            (
                values("bob", typing, "T").to,
                values("bob", typing, "T").state
            ),
            ("carol", "stop")
        );
        assert_eq!(
            values("bob", Signal::Presence { online: true }, "P").status,
            "online"
        );
        assert_eq!(
            contacts(&["a", "b\""]).ok().as_deref(),
            Some(r#"["a","b\""]"#)
        );
    }
}
