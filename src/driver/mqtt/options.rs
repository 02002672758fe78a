//! `[target.mqtt]`: the MQTT driver's own keys, checked before anything connects.
//!
//! Every key is documented in `docs/drivers/mqtt.md`. An unknown key or a bad value is an
//! [`OptionError`] naming `target.mqtt.KEY`.

use std::path::PathBuf;
use std::time::Duration;

use crate::driver::kit::options::Table;
use crate::driver::OptionError;

/// Default topic a user receives direct messages on.
pub const DEFAULT_INBOX: &str = "msgstorm/u/{user}";
/// Default topic of a group.
pub const DEFAULT_GROUP: &str = "msgstorm/g/{group}";
/// Default for `max_inflight`: mosquitto's own default `max_inflight_messages`.
const DEFAULT_INFLIGHT: u16 = 20;
/// Default for `session_expiry` (MQTT 5).
const DEFAULT_EXPIRY: Duration = Duration::from_secs(3600);
/// The longest MQTT keep-alive (a 16-bit number of seconds).
const MAX_KEEP_ALIVE: Duration = Duration::from_secs(u16::MAX as u64);
/// The longest `replay_quiet`: the driver collects a replay for at most this long.
const REPLAY_QUIET_MAX: Duration = super::REPLAY_LIMIT;
/// Default for `replay_quiet`.
const DEFAULT_QUIET: Duration = Duration::from_millis(300);
/// Keep-alive when the scenario turns heartbeats off: MQTT's customary 60 s.
const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(60);

/// The keys `[target.mqtt]` accepts, for error messages.
const KEYS: [&str; 10] = [
    "version",
    "qos",
    "clean_session",
    "session_expiry",
    "inbox_topic",
    "group_topic",
    "keep_alive",
    "ca_file",
    "max_inflight",
    "replay_quiet",
];

/// The MQTT protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// MQTT 3.1.1 (protocol level 4).
    V4,
    /// MQTT 5.
    V5,
}

/// The resolved `[target.mqtt]` options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Protocol version.
    pub version: Version,
    /// QoS of every publish and subscription (0, 1 or 2).
    pub qos: u8,
    /// Start a new session at every connect (no queueing for offline users).
    pub clean_session: bool,
    /// MQTT 5 session expiry of persistent sessions.
    pub session_expiry: Duration,
    /// Inbox topic template with `{user}`.
    pub inbox_topic: String,
    /// Group topic template with `{group}`.
    pub group_topic: String,
    /// MQTT keep-alive (PINGREQ interval); zero turns it off.
    pub keep_alive: Duration,
    /// PEM file of the CA that signed the broker's certificate (`mqtts://`).
    pub ca_file: Option<PathBuf>,
    /// Unacknowledged publishes per connection.
    pub max_inflight: u16,
    /// After a reconnect, the replay of queued messages is over when nothing arrived for
    /// this long.
    pub replay_quiet: Duration,
}

impl Options {
    /// Reads `table` (the raw `[target.mqtt]`); `heartbeat` is the scenario's
    /// `target.heartbeat`, the default keep-alive.
    pub fn parse(table: &toml::Table, heartbeat: Option<Duration>) -> Result<Self, OptionError> {
        let t = Table::new(table, "mqtt");
        t.only(&KEYS)?;
        let version = match t.int("version")? {
            None | Some(4) => Version::V4,
            Some(5) => Version::V5,
            Some(v) => {
                return Err(t.bad("version", format!("must be 4 (MQTT 3.1.1) or 5, got {v}")))
            }
        };
        let qos = match t.int("qos")? {
            None => 1,
            Some(q @ 0..=2) => q as u8,
            Some(q) => return Err(t.bad("qos", format!("must be 0, 1 or 2, got {q}"))),
        };
        let clean_session = t.flag("clean_session")?.unwrap_or(false);
        let session_expiry = t.duration("session_expiry")?;
        if session_expiry.is_some() && version == Version::V4 {
            return Err(t.bad(
                "session_expiry",
                "is an MQTT 5 property; set `version = 5`, or leave it out (3.1.1 sessions \
                 last until the broker's `persistent_client_expiration`)",
            ));
        }
        let session_expiry = session_expiry.unwrap_or(DEFAULT_EXPIRY);
        if session_expiry.as_secs() > u64::from(u32::MAX) {
            return Err(t.bad("session_expiry", format!("at most {} s", u32::MAX)));
        }
        let inbox_topic = topic(&t, "inbox_topic", DEFAULT_INBOX, "{user}")?;
        let group_topic = topic(&t, "group_topic", DEFAULT_GROUP, "{group}")?;
        // Without a key of its own, keep-alive follows the heartbeat, as often as MQTT allows.
        let keep_alive = t.duration("keep_alive")?.unwrap_or_else(|| {
            heartbeat
                .unwrap_or(DEFAULT_KEEP_ALIVE)
                .clamp(Duration::from_secs(1), MAX_KEEP_ALIVE)
        });
        if !keep_alive.is_zero()
            && (keep_alive < Duration::from_secs(1) || keep_alive.as_secs() > u64::from(u16::MAX))
        {
            return Err(t.bad(
                "keep_alive",
                format!(
                    "MQTT keep-alive is whole seconds from 1s to {}s (or \"0s\": off), got {keep_alive:?}",
                    u16::MAX
                ),
            ));
        }
        let ca_file = match t.str("ca_file")? {
            None => None,
            Some("") => return Err(t.out_of_range("ca_file", "a file path", "\"\"")),
            Some(s) => Some(PathBuf::from(s)),
        };
        let max_inflight = t
            .int_in("max_inflight", 1..=65535, "1 to 65535")?
            .map_or(DEFAULT_INFLIGHT, |n| n as u16);
        let replay_quiet = t.duration("replay_quiet")?.unwrap_or(DEFAULT_QUIET);
        if replay_quiet.is_zero() || replay_quiet > REPLAY_QUIET_MAX {
            return Err(t.bad(
                "replay_quiet",
                format!("must be > 0 and at most {REPLAY_QUIET_MAX:?} (a replay is collected for at most that long), got {replay_quiet:?}"),
            ));
        }
        Ok(Options {
            version,
            qos,
            clean_session,
            session_expiry,
            inbox_topic,
            group_topic,
            keep_alive,
            ca_file,
            max_inflight,
            replay_quiet,
        })
    }

    /// The inbox topic of `user`.
    pub fn inbox(&self, user: &str) -> String {
        self.inbox_topic.replace("{user}", user)
    }

    /// The topic of `group`.
    pub fn group(&self, group: &str) -> String {
        self.group_topic.replace("{group}", group)
    }
}

/// A topic template: must contain `placeholder` and no MQTT wildcard.
fn topic(
    t: &Table<'_>,
    key: &str,
    default: &str,
    placeholder: &str,
) -> Result<String, OptionError> {
    let topic = match t.t.get(key) {
        None => return Ok(default.to_owned()),
        Some(toml::Value::String(s)) => s.clone(),
        Some(v) => return Err(t.wrong(key, "a topic template string", v)),
    };
    if !topic.contains(placeholder) {
        return Err(t.bad(
            key,
            format!("`{topic}` must contain `{placeholder}` (e.g. `{default}`)"),
        ));
    }
    if topic.contains(['+', '#']) || topic.starts_with('$') {
        return Err(t.bad(
            key,
            format!("`{topic}`: a topic to publish to cannot hold `+`, `#` or start with `$`"),
        ));
    }
    Ok(topic)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Options, OptionError> {
        let table: toml::Table = text.parse().expect("test TOML");
        Options::parse(&table, Some(Duration::from_secs(30)))
    }

    #[test]
    fn defaults() {
        let o = parse("").expect("empty table is fine");
        assert_eq!(o.version, Version::V4);
        assert_eq!(o.qos, 1);
        assert!(!o.clean_session);
        assert_eq!(o.keep_alive, Duration::from_secs(30));
        assert_eq!(o.inbox("u7"), "msgstorm/u/u7");
        assert_eq!(o.group("g1"), "msgstorm/g/g1");
        assert_eq!(o.max_inflight, 20);
    }

    #[test]
    fn keep_alive_follows_a_long_heartbeat_as_far_as_mqtt_allows() {
        let table = toml::Table::new();
        let day = Duration::from_secs(86_400);
        let o = Options::parse(&table, Some(day)).expect("a long heartbeat is not an MQTT error");
        assert_eq!(o.keep_alive, Duration::from_secs(65_535));
        let quiet: toml::Table = "replay_quiet = \"2h\"".parse().expect("test TOML");
        let e = Options::parse(&quiet, None).expect_err("longer than a replay is collected");
        assert_eq!(e.key, "target.mqtt.replay_quiet");
        assert!(e.msg.contains("at most 60s"), "{}", e.msg);
    }

    #[test]
    fn every_key() {
        let o = parse(
            r#"version = 5
            qos = 2
            clean_session = true
            session_expiry = "10m"
            inbox_topic = "chat/{user}/in"
            group_topic = "rooms/{group}"
            keep_alive = "45s"
            ca_file = "ca.pem"
            max_inflight = 8
            replay_quiet = "1s""#,
        )
        .expect("valid");
        assert_eq!(o.version, Version::V5);
        assert_eq!(o.qos, 2);
        assert_eq!(o.session_expiry, Duration::from_secs(600));
        assert_eq!(o.inbox("a"), "chat/a/in");
        assert_eq!(o.ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(o.replay_quiet, Duration::from_secs(1));
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            ("qoss = 1", "target.mqtt.qoss"),
            ("qos = 3", "target.mqtt.qos"),
            ("version = 3", "target.mqtt.version"),
            ("qos = \"1\"", "target.mqtt.qos"),
            ("session_expiry = \"1h\"", "target.mqtt.session_expiry"),
            ("inbox_topic = \"in/x\"", "target.mqtt.inbox_topic"),
            ("group_topic = \"g/+/{group}\"", "target.mqtt.group_topic"),
            ("keep_alive = \"500ms\"", "target.mqtt.keep_alive"),
            ("keep_alive = \"soon\"", "target.mqtt.keep_alive"),
            ("max_inflight = 0", "target.mqtt.max_inflight"),
            ("clean_session = 1", "target.mqtt.clean_session"),
            ("replay_quiet = \"0s\"", "target.mqtt.replay_quiet"),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.key, key, "{text}: {e}");
        }
        let e = parse("qoss = 1").expect_err("unknown");
        assert!(e.msg.contains("allowed: version, qos"), "{e}");
    }
}
