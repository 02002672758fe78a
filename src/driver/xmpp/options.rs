//! `[target.xmpp]`: the XMPP driver's own keys, checked before anything connects.
//!
//! Every key is documented in `docs/drivers/xmpp.md`. An unknown key or a bad value is an
//! [`OptionError`] naming `target.xmpp.KEY`.

use std::path::PathBuf;
use std::time::Duration;

use crate::driver::OptionError;

/// Default resource of every session.
const DEFAULT_RESOURCE: &str = "msgstorm";
/// Default MUC nick template.
const DEFAULT_NICK: &str = "{user}";
/// Default for `offline_quiet`.
const DEFAULT_QUIET: Duration = Duration::from_millis(300);
/// The longest `offline_quiet`.
const QUIET_MAX: Duration = Duration::from_secs(60);
/// Default for `muc_history`: ejabberd's and Prosody's default room history length.
pub(super) const DEFAULT_HISTORY: u32 = 20;

/// The keys `[target.xmpp]` accepts, for error messages.
const KEYS: [&str; 13] = [
    "domain",
    "resource",
    "tls",
    "ca_file",
    "sasl",
    "register",
    "stream_management",
    "muc_domain",
    "room",
    "nick",
    "muc_history",
    "offline_quiet",
    "fetch",
];

/// An error about `target.xmpp.KEY`.
fn bad(key: &str, msg: impl Into<String>) -> OptionError {
    OptionError::option("xmpp", key, msg)
}

/// TLS on a plain `xmpp://` connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// None: the stream stays in the clear.
    Off,
    /// STARTTLS, required: a server that does not offer it fails the login.
    StartTls,
}

/// Which SASL mechanism to log in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sasl {
    /// SCRAM-SHA-1 when the server offers it, PLAIN otherwise.
    Auto,
    /// PLAIN only.
    Plain,
    /// SCRAM-SHA-1 only.
    ScramSha1,
}

/// Where a user fetches what it missed while offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetch {
    /// The server's offline storage, delivered after the initial presence.
    Offline,
    /// The offline storage and the user's MAM archive (XEP-0313), each message once.
    Mam,
}

/// The resolved `[target.xmpp]` options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The XMPP domain of user JIDs (`{user}@domain`); `None`: the URL's host.
    pub domain: Option<String>,
    /// Resource template (`{user}` is replaced).
    pub resource: String,
    /// TLS on `xmpp://`.
    pub tls: Tls,
    /// PEM file of the CA that signed the server's certificate.
    pub ca_file: Option<PathBuf>,
    /// SASL mechanism.
    pub sasl: Sasl,
    /// Create missing accounts by in-band registration (XEP-0077).
    pub register: bool,
    /// Enable XEP-0198 (acks are the acceptance); a server without it fails the login.
    pub stream_management: bool,
    /// The MUC service's domain; `None`: `conference.` + the domain.
    pub muc_domain: Option<String>,
    /// Room name template (`{group}` is replaced): the local part of the room's JID.
    pub room: String,
    /// Nick template in rooms (`{user}` is replaced).
    pub nick: String,
    /// Messages of room history asked for when a user joins a room again.
    pub muc_history: u32,
    /// After login, offline messages are over when nothing arrived for this long.
    pub offline_quiet: Duration,
    /// Where missed messages come from.
    pub fetch: Fetch,
}

impl Options {
    /// Reads `table` (the raw `[target.xmpp]`).
    pub fn parse(table: &toml::Table) -> Result<Self, OptionError> {
        if let Some(key) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(bad(
                key,
                format!("unknown key `{key}`; allowed: {}", KEYS.join(", ")),
            ));
        }
        let domain = string(table, "domain")?;
        if let Some(d) = &domain {
            if d.is_empty() || d.contains(['@', '/', ' ']) {
                return Err(bad("domain", format!("`{d}` is not a domain name")));
            }
        }
        let resource = string(table, "resource")?.unwrap_or_else(|| DEFAULT_RESOURCE.to_owned());
        if resource.is_empty() {
            return Err(bad("resource", "must not be empty"));
        }
        let tls = match string(table, "tls")?.as_deref() {
            None | Some("off") => Tls::Off,
            Some("starttls") => Tls::StartTls,
            Some(other) => {
                return Err(bad(
                    "tls",
                    format!(
                        "`{other}`: must be \"off\" or \"starttls\" (direct TLS is an xmpps:// URL)"
                    ),
                ))
            }
        };
        let ca_file = string(table, "ca_file")?.map(PathBuf::from);
        let sasl = match string(table, "sasl")?.as_deref() {
            None | Some("auto") => Sasl::Auto,
            Some("plain") => Sasl::Plain,
            Some("scram-sha-1") => Sasl::ScramSha1,
            Some(other) => {
                return Err(bad(
                    "sasl",
                    format!("`{other}`: must be \"auto\", \"plain\" or \"scram-sha-1\""),
                ))
            }
        };
        let register = boolean(table, "register")?.unwrap_or(false);
        let stream_management = boolean(table, "stream_management")?.unwrap_or(true);
        let muc_domain = string(table, "muc_domain")?;
        let room = string(table, "room")?.unwrap_or_else(|| "{group}".to_owned());
        if !room.contains("{group}") {
            return Err(bad(
                "room",
                format!("`{room}` must contain `{{group}}`: every group needs its own room"),
            ));
        }
        let nick = string(table, "nick")?.unwrap_or_else(|| DEFAULT_NICK.to_owned());
        if !nick.contains("{user}") {
            return Err(bad(
                "nick",
                format!("`{nick}` must contain `{{user}}`: every user needs its own nick"),
            ));
        }
        let muc_history = match table.get("muc_history") {
            None => DEFAULT_HISTORY,
            Some(toml::Value::Integer(n @ 0..=100_000)) => *n as u32,
            Some(v) => return Err(wrong_type("muc_history", "an integer from 0 to 100000", v)),
        };
        let offline_quiet = match table.get("offline_quiet") {
            None => DEFAULT_QUIET,
            Some(toml::Value::String(s)) => humantime::parse_duration(s.trim()).map_err(|_| {
                bad(
                    "offline_quiet",
                    format!("not a duration: `{s}` (use e.g. `300ms`, `1s`)"),
                )
            })?,
            Some(v) => return Err(wrong_type("offline_quiet", "a duration string", v)),
        };
        if offline_quiet.is_zero() || offline_quiet > QUIET_MAX {
            return Err(bad(
                "offline_quiet",
                format!("must be > 0 and at most {QUIET_MAX:?}, got {offline_quiet:?}"),
            ));
        }
        let fetch = match string(table, "fetch")?.as_deref() {
            None | Some("offline") => Fetch::Offline,
            Some("mam") => Fetch::Mam,
            Some(other) => {
                return Err(bad(
                    "fetch",
                    format!("`{other}`: must be \"offline\" or \"mam\""),
                ))
            }
        };
        Ok(Options {
            domain,
            resource,
            tls,
            ca_file,
            sasl,
            register,
            stream_management,
            muc_domain,
            room,
            nick,
            muc_history,
            offline_quiet,
            fetch,
        })
    }
}

fn wrong_type(key: &str, want: &str, got: &toml::Value) -> OptionError {
    bad(key, format!("must be {want}, got {got}"))
}

fn string(table: &toml::Table, key: &str) -> Result<Option<String>, OptionError> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(wrong_type(key, "a string", v)),
    }
}

fn boolean(table: &toml::Table, key: &str) -> Result<Option<bool>, OptionError> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
        Some(v) => Err(wrong_type(key, "true or false", v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Options, OptionError> {
        let table: toml::Table = text.parse().expect("test TOML");
        Options::parse(&table)
    }

    #[test]
    fn defaults_and_every_key() {
        let o = parse("").expect("empty table is fine");
        assert_eq!((o.tls, o.sasl), (Tls::Off, Sasl::Auto));
        assert!(!o.register && o.stream_management);
        assert_eq!(o.muc_history, 20);
        assert_eq!(o.fetch, Fetch::Offline);
        let o = parse(
            r#"domain = "example.org"
            resource = "r-{user}"
            tls = "starttls"
            ca_file = "ca.pem"
            sasl = "plain"
            register = true
            stream_management = false
            muc_domain = "rooms.example.org"
            room = "t-{group}"
            nick = "n-{user}"
            muc_history = 50
            offline_quiet = "1s"
            fetch = "mam""#,
        )
        .expect("valid");
        assert_eq!(o.domain.as_deref(), Some("example.org"));
        assert_eq!((o.tls, o.sasl), (Tls::StartTls, Sasl::Plain));
        assert!(o.register && !o.stream_management);
        assert_eq!(o.offline_quiet, Duration::from_secs(1));
        assert_eq!(o.fetch, Fetch::Mam);
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            ("domian = \"x\"", "target.xmpp.domian"),
            ("domain = \"a@b\"", "target.xmpp.domain"),
            ("tls = \"direct\"", "target.xmpp.tls"),
            ("sasl = \"digest-md5\"", "target.xmpp.sasl"),
            ("register = \"yes\"", "target.xmpp.register"),
            ("nick = \"same\"", "target.xmpp.nick"),
            ("room = \"one\"", "target.xmpp.room"),
            ("muc_history = -1", "target.xmpp.muc_history"),
            ("offline_quiet = \"0s\"", "target.xmpp.offline_quiet"),
            ("resource = \"\"", "target.xmpp.resource"),
            ("fetch = \"both\"", "target.xmpp.fetch"),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.key, key, "{text}: {e}");
        }
    }
}
