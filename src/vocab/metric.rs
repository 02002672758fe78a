//! The metric catalog: every latency histogram and every check metric once, with its key
//! in result files, its short name in `compare` gates, its label for people, its unit and
//! the direction that is better. The scenario (check metrics), the artifact (their JSON
//! names), `metrics` (histogram names), the live endpoint (OpenMetrics names), `compare`
//! and the renderers all read this one table.
//!
//! It lives in `vocab/`, not `report/`: the scenario and the artifact name check metrics,
//! and `report/` imports both, so only a leaf that imports nothing of the crate can be read
//! by all of them without an import cycle.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The unit of a metric's values (and of a check's bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A count.
    Count,
    /// Microseconds.
    #[serde(rename = "us")]
    Micros,
    /// A ratio, 0..1.
    Ratio,
}

/// Which direction of a metric is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Lower is better (latency, losses, errors, resource use).
    Lower,
    /// Higher is better (throughput, logins).
    Higher,
}

/// A latency histogram.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hist {
    /// TCP connect plus protocol handshake.
    Connect,
    /// Login, from its request to the server's answer.
    Login,
    /// Send, from the due time to the server's acceptance.
    SendAck,
    /// Due time of a send to its receipt by a recipient.
    EndToEnd,
    /// Due time of a group send to its receipt by the last online member.
    Fanout,
    /// How late a send went out after its due time (the generator's own lag).
    SendLag,
    /// Request round trip of the request pattern.
    Request,
    /// A read (when the reader read the message) to its receipt's arrival at the sender.
    Receipt,
    /// A typing notice's due time to its arrival at the peer.
    Typing,
    /// A login or logout to its presence's arrival at a contact.
    Presence,
}

/// What the catalog says of a latency histogram (all of them in µs, lower better).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistEntry {
    /// The histogram.
    pub hist: Hist,
    /// Its key in result files and reports: `send_ack`.
    pub key: &'static str,
    /// Its short name in `compare` rows and gates: `ack` (as in `ack_p99`).
    pub short: &'static str,
    /// What it measures, for people: `send → ack`.
    pub label: &'static str,
    /// Its OpenMetrics name before `_seconds`: `send_ack_latency`.
    pub openmetrics: &'static str,
    /// Its OpenMetrics help text.
    pub help: &'static str,
}

/// The histograms, in report order.
const HISTS: [HistEntry; 10] = [
    HistEntry {
        hist: Hist::Connect,
        key: "connect",
        short: "connect",
        label: "connect (handshake)",
        openmetrics: "connect_latency",
        help: "TCP connect plus protocol handshake",
    },
    HistEntry {
        hist: Hist::Login,
        key: "login",
        short: "login",
        label: "login",
        openmetrics: "login_latency",
        help: "Login, from its request to the server's answer",
    },
    HistEntry {
        hist: Hist::SendAck,
        key: "send_ack",
        short: "ack",
        label: "send → ack",
        openmetrics: "send_ack_latency",
        help: "From a send's due time to its acceptance",
    },
    HistEntry {
        hist: Hist::EndToEnd,
        key: "end_to_end",
        short: "e2e",
        label: "end-to-end (due → received)",
        openmetrics: "e2e_latency",
        help: "From a send's due time to its receipt",
    },
    HistEntry {
        hist: Hist::Fanout,
        key: "fanout",
        short: "fanout",
        label: "group fan-out (due → last member)",
        openmetrics: "fanout_latency",
        help: "From a group send's due time to its receipt by the last online member",
    },
    HistEntry {
        hist: Hist::SendLag,
        key: "send_lag",
        short: "send_lag",
        label: "send lag (due → written)",
        openmetrics: "send_lag",
        help: "How late sends went out after their due time (the generator's own lag)",
    },
    HistEntry {
        hist: Hist::Request,
        key: "request",
        short: "request",
        label: "request round trip",
        openmetrics: "request_latency",
        help: "Request round trip",
    },
    HistEntry {
        hist: Hist::Receipt,
        key: "receipt",
        short: "receipt",
        label: "read → receipt at sender",
        openmetrics: "receipt_latency",
        help: "From a message's read to its receipt's arrival at the sender",
    },
    HistEntry {
        hist: Hist::Typing,
        key: "typing",
        short: "typing",
        label: "typing → peer",
        openmetrics: "typing_latency",
        help: "From a typing notice's due time to its arrival at the peer",
    },
    HistEntry {
        hist: Hist::Presence,
        key: "presence",
        short: "presence",
        label: "login/logout → contact's presence",
        openmetrics: "presence_latency",
        help: "From a login or logout to its presence's arrival at a contact",
    },
];

impl Hist {
    /// Every histogram, in report order.
    pub const ALL: [Hist; 10] = [
        Hist::Connect,
        Hist::Login,
        Hist::SendAck,
        Hist::EndToEnd,
        Hist::Fanout,
        Hist::SendLag,
        Hist::Request,
        Hist::Receipt,
        Hist::Typing,
        Hist::Presence,
    ];

    /// Its catalog entry.
    pub fn entry(self) -> &'static HistEntry {
        &HISTS[self as usize]
    }

    /// Its key in reports and result files ([`HistEntry::key`]).
    pub fn name(self) -> &'static str {
        self.entry().key
    }
}

/// The metric of a check, by its key in result files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckMetric {
    /// Messages never delivered (after sync).
    Lost,
    /// Extra copies delivered.
    Duplicated,
    /// Deliveries after a later message of the same stream.
    Reordered,
    /// Deliveries whose body failed its checksum.
    Corrupted,
    /// Deliveries after `late_after`.
    Late,
    /// End-to-end (due → received) p99.
    E2eP99,
    /// Send → acceptance p99.
    AckP99,
    /// Request round-trip p99.
    RequestP99,
    /// Successful logins ÷ attempts.
    LoginSuccess,
    /// Failed sends ÷ sends.
    SendErrorRate,
    /// Verified ÷ planned deliveries (and replies ÷ requests).
    Verified,
    /// Frames the driver did not understand (`protocol` errors).
    ProtocolErrors,
    /// Deliveries found only by the final verification sync ÷ expected.
    RepairedRate,
    /// Bodies not from this run plus deliveries to unexpected recipients.
    Foreign,
    /// Group joins that failed (`join_failed` errors).
    JoinFailures,
    /// Run-time failures of the `script` driver's adapter (`script` errors).
    ScriptErrors,
    /// The longest recovery after a chaos step (a step not recovered by the end of the run
    /// counts as the whole run).
    Recovery,
    /// Users online ÷ users the plan puts online, over the traffic outside chaos steps.
    Online,
    /// The generator's send lag (due → written) p99.
    SendLag,
    /// Sends made (sent, failed or due while their sender was offline) ÷ sends due.
    Offered,
    /// Read receipts sent and accepted that never reached their message's sender.
    ReceiptsLost,
    /// Extra copies of read receipts.
    ReceiptsDuplicated,
    /// Typing notices a peer online was owed and never got.
    TypingMissed,
    /// Presence changes a contact online was owed and never got.
    PresenceMissed,
    /// Read → receipt at the sender p99.
    ReceiptP99,
    /// Typing notice → peer p99.
    TypingP99,
    /// Login or logout → contact's presence p99.
    PresenceP99,
}

/// What the catalog says of a check metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckEntry {
    /// The metric.
    pub metric: CheckMetric,
    /// Its key in result files: `ack_p99_us`.
    pub key: &'static str,
    /// The unit of its value and bound.
    pub unit: Unit,
    /// The direction that is better.
    pub better: Better,
    /// The histogram whose p99 it is, for a latency.
    pub p99_of: Option<Hist>,
}

/// A check metric's catalog entry (a `const fn` keeps the table one line a metric).
const fn check(
    metric: CheckMetric,
    key: &'static str,
    unit: Unit,
    better: Better,
    p99_of: Option<Hist>,
) -> CheckEntry {
    CheckEntry {
        metric,
        key,
        unit,
        better,
        p99_of,
    }
}

/// The check metrics, in declaration order.
const CHECKS: [CheckEntry; 27] = {
    use Better::{Higher, Lower};
    use CheckMetric as M;
    use Unit::{Count, Micros, Ratio};
    [
        check(M::Lost, "lost", Count, Lower, None),
        check(M::Duplicated, "duplicated", Count, Lower, None),
        check(M::Reordered, "reordered", Count, Lower, None),
        check(M::Corrupted, "corrupted", Count, Lower, None),
        check(M::Late, "late", Count, Lower, None),
        check(M::E2eP99, "e2e_p99_us", Micros, Lower, Some(Hist::EndToEnd)),
        check(M::AckP99, "ack_p99_us", Micros, Lower, Some(Hist::SendAck)),
        check(
            M::RequestP99,
            "request_p99_us",
            Micros,
            Lower,
            Some(Hist::Request),
        ),
        check(M::LoginSuccess, "login_success", Ratio, Higher, None),
        check(M::SendErrorRate, "send_error_rate", Ratio, Lower, None),
        check(M::Verified, "verified", Ratio, Higher, None),
        check(M::ProtocolErrors, "protocol_errors", Count, Lower, None),
        check(M::RepairedRate, "repaired_rate", Ratio, Lower, None),
        check(M::Foreign, "foreign", Count, Lower, None),
        check(M::JoinFailures, "join_failures", Count, Lower, None),
        check(M::ScriptErrors, "script_errors", Count, Lower, None),
        check(M::Recovery, "recovery", Micros, Lower, None),
        check(M::Online, "online", Ratio, Higher, None),
        check(
            M::SendLag,
            "send_lag_p99_us",
            Micros,
            Lower,
            Some(Hist::SendLag),
        ),
        check(M::Offered, "offered", Ratio, Higher, None),
        check(M::ReceiptsLost, "receipts_lost", Count, Lower, None),
        check(
            M::ReceiptsDuplicated,
            "receipts_duplicated",
            Count,
            Lower,
            None,
        ),
        check(M::TypingMissed, "typing_missed", Count, Lower, None),
        check(M::PresenceMissed, "presence_missed", Count, Lower, None),
        check(
            M::ReceiptP99,
            "receipt_p99_us",
            Micros,
            Lower,
            Some(Hist::Receipt),
        ),
        check(
            M::TypingP99,
            "typing_p99_us",
            Micros,
            Lower,
            Some(Hist::Typing),
        ),
        check(
            M::PresenceP99,
            "presence_p99_us",
            Micros,
            Lower,
            Some(Hist::Presence),
        ),
    ]
};

impl CheckMetric {
    /// Its catalog entry.
    pub fn entry(self) -> &'static CheckEntry {
        &CHECKS[self as usize]
    }

    /// Its key in result files ([`CheckEntry::key`]).
    pub fn key(self) -> &'static str {
        self.entry().key
    }

    /// The unit of its value and bound.
    pub fn unit(self) -> Unit {
        self.entry().unit
    }

    /// The signal a check of read receipts, typing or presence counts (not its latency).
    pub fn signal(self) -> Option<super::SignalKind> {
        use super::SignalKind;
        match self {
            CheckMetric::ReceiptsLost | CheckMetric::ReceiptsDuplicated => Some(SignalKind::Read),
            CheckMetric::TypingMissed => Some(SignalKind::Typing),
            CheckMetric::PresenceMissed => Some(SignalKind::Presence),
            _ => None,
        }
    }
}

/// Serializes a catalog value as its key.
fn to_key<S: Serializer>(key: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(key)
}

/// Reads a catalog value from its key, naming the keys it knows when it is none of them.
fn from_key<'de, D, T: Copy>(
    d: D,
    what: &str,
    table: impl Iterator<Item = (T, &'static str)> + Clone,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let text = std::borrow::Cow::<str>::deserialize(d)?;
    if let Some((value, _)) = table.clone().find(|(_, k)| *k == text) {
        return Ok(value);
    }
    let known: Vec<&str> = table.map(|(_, k)| k).collect();
    Err(serde::de::Error::custom(format!(
        "unknown {what} `{text}`, expected one of {}",
        known.join(", ")
    )))
}

impl Serialize for Hist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        to_key(self.name(), s)
    }
}

impl<'de> Deserialize<'de> for Hist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_key(d, "histogram", HISTS.iter().map(|e| (e.hist, e.key)))
    }
}

impl Serialize for CheckMetric {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        to_key(self.key(), s)
    }
}

impl<'de> Deserialize<'de> for CheckMetric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_key(d, "check metric", CHECKS.iter().map(|e| (e.metric, e.key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_sits_at_its_own_variant() {
        for h in Hist::ALL {
            assert_eq!(h.entry().hist, h);
        }
        for (i, e) in CHECKS.iter().enumerate() {
            assert_eq!(e.metric as usize, i, "{}", e.key);
        }
    }

    #[test]
    fn metrics_are_written_and_read_by_their_keys() {
        for h in Hist::ALL {
            let json = serde_json::to_string(&h).expect("serialize");
            assert_eq!(json, format!("\"{}\"", h.name()));
            assert_eq!(serde_json::from_str::<Hist>(&json).expect("read"), h);
        }
        for e in &CHECKS {
            let json = serde_json::to_string(&e.metric).expect("serialize");
            assert_eq!(json, format!("\"{}\"", e.key));
            let back: CheckMetric = serde_json::from_str(&json).expect("read");
            assert_eq!(back, e.metric);
        }
        let err = serde_json::from_str::<CheckMetric>("\"ack\"").expect_err("not a key");
        assert!(err.to_string().contains("ack_p99_us"), "{err}");
    }
}
