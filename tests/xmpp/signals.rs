//! Read receipts, typing and presence through real ejabberd and Prosody: users with
//! contacts that chat, go away and come back (sessions); every receipt reaches its sender
//! once (live or stored while it was away), every typing notice and presence change owed
//! arrives (Prosody: every one; ejabberd: all but a bounded few), and Prosody's own log
//! counts the receipts and typing notices the users sent.

use std::time::Duration;

use msgstorm::ledger::signals::SignalDelivery;
use msgstorm::vocab::SignalKind;

use crate::common::run::run_msgstorm;
use crate::common::xmpp::{passed, scenario, shared, Kind, Server};

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(120);

/// Users with contacts chatting while online, in sessions of a few seconds with gaps between
/// them (a day of 12 s): senders away when their messages are read, recipients away when
/// typed at, contacts coming and going.
const SIGNALS: &str = r#"[population]
users = 60

[population.sessions]
day = "12s"
curve = "flat"
length = { lognormal = "3s", spread = 0.5 }
# Away for a second at least: ejabberd 23.01 routes to a session it has read and then finds
# closed, losing the stanza ("Race condition" in `ejabberd_sm`), when a user's new session
# follows its last one within moments.
gap = { uniform = ["1s", "3s"] }

[population.contacts]
mean = 6

[[traffic]]
kind = "chat"
rate = 60
size = 100
"#;

/// The checks of [`SIGNALS`]' runs.
const CHECKS: &str = r#"
[checks]
# Signals are what this test is about. On a busy test machine logins of a wave wait on the
# server's password hashing, a few sends go unconfirmed at a logout, and ejabberd 23.01
# strands a message that races a login now and then (see `xmpp::offline`).
max_send_lag = "20s"
max_send_error_rate = 0.2
max_lost = 5
max_duplicated = 0
"#;

/// Runs [`SIGNALS`] as `prefix` on `kind`'s shared server: every signal owed arrives but
/// at most `dropped` of each kind, no receipt twice. Returns the read receipts' and typing
/// notices' rows and the server.
fn signals_arrive(
    kind: Kind,
    prefix: &str,
    dropped: u64,
) -> (SignalDelivery, SignalDelivery, &'static Server) {
    // The two servers' runs take turns: each logs in 249 users (password hashing) and
    // chats on two cores; run together, end-to-end p99 reached 4.9 s and notices arrived
    // after their peers' short sessions had ended.
    static TURNS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = TURNS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = shared(kind);
    let rest = format!(
        "{SIGNALS}{}{CHECKS}max_receipts_lost = {dropped}\nmax_typing_missed = {dropped}\n\
         max_presence_missed = {dropped}\n",
        crate::signals::SIGNALS
    );
    let a = passed(
        run_msgstorm(&scenario(server, prefix, "", &rest), &[], LIMIT),
        server,
    );
    let d = a.ledger.summary();
    assert_eq!(d.duplicated, 0, "{d:?}");
    let record = a.signals.expect("signals asked");
    let rows = record.summary();
    let row = |k: SignalKind| {
        rows.iter()
            .find(|r| r.kind == k)
            .map(|r| r.delivery)
            .unwrap_or_else(|| panic!("{k:?} asked: {rows:?}"))
    };
    let (read, typing, presence) = (
        row(SignalKind::Read),
        row(SignalKind::Typing),
        row(SignalKind::Presence),
    );
    for (k, r) in [("read", read), ("typing", typing), ("presence", presence)] {
        assert!(r.expected > 0, "{k}: {r:?}");
        assert_eq!(r.arrived + r.missing, r.expected, "{k}: {r:?}");
        assert_eq!(r.corrupted, 0, "{k}: {r:?}");
    }
    for r in [read, typing, presence] {
        assert!(r.missing <= dropped, "{r:?}");
    }
    assert_eq!(read.duplicated, 0, "{read:?}");
    assert!(read.via_sync > 0, "receipts for senders away: {read:?}");
    (read, typing, server)
}

/// Signals of each kind ejabberd 23.01 may drop in a run: in runs of this scenario on a busy
/// machine it lost one typing notice of 60–150 owed in most runs, and one presence change
/// of about 600 or one receipt of about 300 in some — as it loses a message that races a
/// login now and then (`xmpp::offline`); the cause of the signals' drops is not pinned
/// down. A loaded CI run (end-to-end p99 4.9 s) missed 3 typing notices of 101: a notice
/// that late finds its peer's short session over, and typing is not stored. Prosody
/// dropped none in any run.
const EJABBERD_DROPS: u64 = 5;

#[test]
#[cfg_attr(
    not(peer_ejabberd),
    ignore = "ejabberd is not installed (scripts/test installs it)"
)]
fn ejabberd_receipts_typing_and_presence_arrive_as_owed() {
    signals_arrive(Kind::Ejabberd, "sig-e", EJABBERD_DROPS);
}

/// The stanzas `log` shows Prosody received from clients (`Received[c2s]`, at debug level)
/// that carry a token of `letter` to a user of `prefix`.
fn received(log: &str, letter: char, prefix: &str) -> u64 {
    let (id, to) = (format!("id='{letter}ms1:"), format!("to='{prefix}-"));
    log.lines()
        .filter(|l| l.contains("Received[c2s]: <message"))
        .filter(|l| l.contains(&id) && l.contains(&to))
        .count() as u64
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "Prosody is not installed (scripts/test installs it)"
)]
fn prosody_receipts_typing_and_presence_arrive_as_owed_and_as_it_saw_them() {
    let (read, typing, server) = signals_arrive(Kind::Prosody, "sig-p", 0);
    // Prosody's own view: it logs every stanza it takes from a client and every one it
    // stores offline (at debug level).
    let log = server.log();
    assert_eq!(received(&log, 'R', "sig-p"), read.sent, "{read:?}");
    assert_eq!(received(&log, 'T', "sig-p"), typing.sent, "{typing:?}");
    let stored = log
        .lines()
        .filter(|l| l.contains("Saved to offline storage"))
        .filter(|l| l.contains("to='sig-p-") && l.contains("id='Rms1:"))
        .count() as u64;
    // Stored receipts reach their senders when they come back, with what arrives live
    // while they fetch.
    assert!(stored > 0 && stored <= read.via_sync, "{stored}: {read:?}");
}
