//! Read receipts, typing and presence, from the scenario to the report: what each user
//! sends besides messages is verified per recipient, in every output format.

mod loopback;
mod native;

use msgstorm::artifact::{Artifact, SignalRecord};
use msgstorm::ledger::signals::{SignalDelivery, SignalRow};
use msgstorm::vocab::SignalKind;

/// Asserts that more than 50 of each kind were owed and that every one arrived, once.
pub fn every_owed_arrived_once(rows: &[SignalRow]) {
    let ds: Vec<SignalDelivery> = rows.iter().map(|r| r.delivery).collect();
    owed_arrived_once(&ds);
}

/// Asserts of each of `ds` that more than 50 were owed and that every one arrived once,
/// intact.
pub fn owed_arrived_once(ds: &[SignalDelivery]) {
    for d in ds {
        assert!(d.expected > 50, "{d:?}");
        assert_eq!(
            (d.arrived, d.missing, d.duplicated, d.corrupted),
            (d.expected, 0, 0, 0),
            "{d:?}"
        );
    }
}

/// What happened to read receipts, typing notices and presence (in that order) in `a`.
pub fn deliveries(a: &Artifact) -> [SignalDelivery; 3] {
    let rows = SignalRecord::summary(a.signals.as_ref().expect("signals in result.json"));
    [SignalKind::Read, SignalKind::Typing, SignalKind::Presence].map(|kind| {
        rows.iter()
            .find(|r| r.kind == kind)
            .map(|r| r.delivery)
            .expect("a row per kind")
    })
}

/// 200 users over a 10 s day who talk to their contacts and in 8 groups (with [`SIGNALS`]:
/// who read half of what they get, type before half of their sends, direct and group, and
/// publish their presence).
pub const DAY: &str = r#"
[population]
users = 200

[population.sessions]
day = "10s"
length = { lognormal = "2s", spread = 1.0 }
gap = { exponential = "2s" }

[population.contacts]
mean = 6

[population.groups]
count = 8
min = 3
max = 20

[[traffic]]
name = "chat"
kind = "chat"
rate = 60
group_rate = 6
size = 120
"#;

/// Every signal: half the messages read, half the direct sends typed, presence.
pub const SIGNALS: &str = r#"
[signals]
receipts = 0.5
read_delay = { exponential = "300ms" }
typing = 0.5
typing_lead = "200ms"
presence = true
within = "1s"
"#;
