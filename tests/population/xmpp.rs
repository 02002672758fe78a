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
    let text = scenario(server, "pop", "", DAY);
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
