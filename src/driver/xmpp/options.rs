//! `[target.xmpp]`: the XMPP driver's own keys, checked before anything connects.
//!
//! Every key is documented in `docs/drivers/xmpp.md`. An unknown key or a bad value is an
//! [`OptionError`] naming `target.xmpp.KEY`.

use std::path::PathBuf;
use std::time::Duration;

use crate::driver::kit::options::Table;
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
        let t = Table::new(table, "xmpp");
        t.only(&KEYS)?;
        let domain = t.string("domain")?;
        if let Some(d) = &domain {
            if d.is_empty() || d.contains(['@', '/', ' ']) {
                return Err(t.bad("domain", format!("`{d}` is not a domain name")));
            }
        }
        let resource = t
            .string("resource")?
            .unwrap_or_else(|| DEFAULT_RESOURCE.to_owned());
        if resource.is_empty() {
            return Err(t.bad("resource", "must not be empty"));
        }
        let tls = tls(&t)?;
        let ca_file = t.string("ca_file")?.map(PathBuf::from);
        let sasl = sasl(&t)?;
        let register = t.flag("register")?.unwrap_or(false);
        let stream_management = t.flag("stream_management")?.unwrap_or(true);
        let muc_domain = t.string("muc_domain")?;
        let room = t.string("room")?.unwrap_or_else(|| "{group}".to_owned());
        if !room.contains("{group}") {
            return Err(t.bad(
                "room",
                format!("`{room}` must contain `{{group}}`: every group needs its own room"),
            ));
        }
        let nick = t.string("nick")?.unwrap_or_else(|| DEFAULT_NICK.to_owned());
        if !nick.contains("{user}") {
            return Err(t.bad(
                "nick",
                format!("`{nick}` must contain `{{user}}`: every user needs its own nick"),
            ));
        }
        let muc_history = t
            .int_in("muc_history", 0..=100_000, "an integer from 0 to 100000")?
            .map_or(DEFAULT_HISTORY, |n| n as u32);
        let offline_quiet = t.duration("offline_quiet")?.unwrap_or(DEFAULT_QUIET);
        if offline_quiet.is_zero() || offline_quiet > QUIET_MAX {
            return Err(t.bad(
                "offline_quiet",
                format!("must be > 0 and at most {QUIET_MAX:?}, got {offline_quiet:?}"),
            ));
        }
        let fetch = fetch(&t)?;
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

/// `tls`: off or STARTTLS (direct TLS is an `xmpps://` URL).
fn tls(t: &Table<'_>) -> Result<Tls, OptionError> {
    Ok(match t.string("tls")?.as_deref() {
        None | Some("off") => Tls::Off,
        Some("starttls") => Tls::StartTls,
        Some(other) => {
            return Err(t.bad(
                "tls",
                format!(
                    "`{other}`: must be \"off\" or \"starttls\" (direct TLS is an xmpps:// URL)"
                ),
            ))
        }
    })
}

/// `sasl`: the mechanism, or the best the server offers.
fn sasl(t: &Table<'_>) -> Result<Sasl, OptionError> {
    Ok(match t.string("sasl")?.as_deref() {
        None | Some("auto") => Sasl::Auto,
        Some("plain") => Sasl::Plain,
        Some("scram-sha-1") => Sasl::ScramSha1,
        Some(other) => {
            return Err(t.bad(
                "sasl",
                format!("`{other}`: must be \"auto\", \"plain\" or \"scram-sha-1\""),
            ))
        }
    })
}

/// `fetch`: how missed messages are fetched after login.
fn fetch(t: &Table<'_>) -> Result<Fetch, OptionError> {
    Ok(match t.string("fetch")?.as_deref() {
        None | Some("offline") => Fetch::Offline,
        Some("mam") => Fetch::Mam,
        Some(other) => {
            return Err(t.bad(
                "fetch",
                format!("`{other}`: must be \"offline\" or \"mam\""),
            ))
        }
    })
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
