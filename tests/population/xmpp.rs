//! The population against real Prosody: users who come and go get what their contacts sent
//! while they were away from Prosody's offline storage, each message once.

use std::time::Duration;

use msgstorm::metrics::Counter;

use super::DAY;
use crate::common::run::run_msgstorm;
use crate::common::xmpp::{passed, scenario, shared, Kind};

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn prosody_users_who_come_and_go_get_every_message_of_their_contacts_once() {
    let server = shared(Kind::Prosody);
    // 1:1 only: a room member who left gets only the room's recent history on return, which
    // a day of heavy-tailed groups overflows (docs/drivers/xmpp.md).
    let day = DAY.replace("group_rate = 10\n", "").replace(
        "[population.groups]\ncount = 20\nmin = 3\nmax = 60\nexponent = 1.5\n",
        "",
    );
    assert!(!day.contains("groups"), "{day}");
    // Half the users log in together when the day starts warm, and a session's first sends
    // wait for its login: a debug-logging Prosody takes about a second for that wave.
    let day = format!("{day}\n[checks]\nmax_send_lag = \"5s\"\n");
    let text = scenario(server, "pop", "", &day);
    assert!(text.contains("max_send_lag"));
    let a = passed(run_msgstorm(&text, &[], Duration::from_secs(120)), server);
    let d = a.ledger.summary();
    let sent = a.metrics.count(Counter::Sent);
    assert!(sent > 500, "{sent} sent");
    assert_eq!((d.expected, d.delivered), (sent, sent), "{d:?}");
    assert_eq!((d.lost, d.duplicated, d.reordered), (0, 0, 0), "{d:?}");
    assert!(
        d.via_sync > 50 && d.via_push > 50,
        "both live and from storage: {d:?}"
    );
}
