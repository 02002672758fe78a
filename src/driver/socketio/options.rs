//! `[target.socketio]`: the app's event mapping and the connection's options, checked and
//! compiled once before anything connects.
//!
//! Templates and JSON paths are the `ws-json` driver's ([`Template`], [`Path`]); every key
//! is documented in `docs/drivers/socketio.md`. A mistake is an [`OptionError`] naming
//! `target.socketio.KEY`.

use crate::driver::kit::json_map::path::Path;
use crate::driver::kit::json_map::template::{Template, Var};
use crate::driver::kit::options::Table;
use crate::driver::{Endpoint, OptionError, Spec};

use super::codec::Emit;
use super::signals::{self, SignalEvents};

/// The driver's name, as in `[target.socketio]`.
pub const NAME: &str = "socketio";

/// Placeholders of the connect `auth` payload.
const AUTH_VARS: &[Var] = &[
    Var::User,
    Var::Token,
    Var::Username,
    Var::Password,
    Var::NowMs,
];
/// Placeholders of a send's payload.
const SEND_VARS: &[Var] = &[Var::User, Var::To, Var::Body, Var::NowMs];
/// Placeholders of a join's payload.
const JOIN_VARS: &[Var] = &[Var::User, Var::Group, Var::NowMs];

/// The keys of `[target.socketio]`.
const KEYS: &[&str] = &[
    "path",
    "namespace",
    "urls",
    "auth",
    "ack",
    "recovery",
    "direct_event",
    "direct",
    "group_event",
    "group",
    "join_event",
    "join",
    "message_event",
    "welcome_event",
    "body",
    "from",
    // For wss://, read by the shared WebSocket transport (`ws::TLS_KEYS`).
    "ca_file",
    "server_name",
];

/// The resolved `[target.socketio]`.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Engine.IO path when the URL gives none (`/socket.io/`).
    pub path: String,
    /// The namespace (`/`).
    pub namespace: String,
    /// More nodes of the app; users spread round-robin over `target.url` and these.
    pub urls: Vec<Endpoint>,
    /// The connect packet's `auth` object.
    pub auth: Template,
    /// Sends and joins ask for an ack, which is the acceptance.
    pub ack: bool,
    /// Connection state recovery: reconnects send `pid` and `offset`, and the packets
    /// the server replays are the missed messages.
    pub recovery: bool,
    /// A direct message.
    pub direct: Emit,
    /// A group message.
    pub group: Emit,
    /// Joining a room.
    pub join: Emit,
    /// The event that delivers a message.
    pub message_event: String,
    /// The event the app emits to every new connection through its adapter (so it
    /// carries an offset): a user going offline before it has an offset waits for it.
    pub welcome_event: Option<String>,
    /// Where the body is in its first argument (`None`: the argument is the body).
    pub body: Option<Path>,
    /// Where the sender is (own messages are not deliveries).
    pub from: Option<Path>,
    /// Read receipts, typing, presence and contacts, each off until its event is named.
    pub signals: SignalEvents,
}

impl Options {
    /// Reads `table` (the raw `[target.socketio]`); `spec` parses the extra URLs.
    pub fn parse(table: &toml::Table, spec: &Spec) -> Result<Self, OptionError> {
        let top = Table::new(table, NAME);
        let keys: Vec<&str> = KEYS.iter().chain(&signals::KEYS).copied().collect();
        top.only(&keys)?;
        let text = |key: &str, default: &str| -> Result<String, OptionError> {
            Ok(top.str(key)?.unwrap_or(default).to_owned())
        };
        let flag = |key: &str| -> Result<bool, OptionError> {
            Ok(!table.contains_key(key) || top.bool(key)?)
        };
        let emit = |event: &str, default_event: &str, key: &str, default: &str, vars: &[Var]| {
            let name = text(event, default_event)?;
            if name.is_empty() {
                return Err(top.bad(event, "an empty event name"));
            }
            let payload = Template::parse(top.str(key)?.unwrap_or(default), vars)
                .map_err(|e| top.bad(key, e))?;
            let open = format!("[{},", serde_json::Value::from(name));
            Ok::<_, OptionError>(Emit { open, payload })
        };
        let (path, namespace) = path_and_namespace(&top)?;
        let urls = urls(table, &top, spec)?;
        let auth = auth(&top)?;
        // An empty path names the argument itself.
        let path_or_whole = |key: &str, default: &str| -> Result<Option<Path>, OptionError> {
            let p = top.str(key)?.unwrap_or(default);
            if p.is_empty() {
                return Ok(None);
            }
            Path::parse(p).map(Some).map_err(|e| top.bad(key, e))
        };
        let (message_event, welcome_event) = events(&top)?;
        Ok(Options {
            path,
            namespace,
            urls,
            auth,
            ack: flag("ack")?,
            recovery: flag("recovery")?,
            direct: emit(
                "direct_event",
                "dm",
                "direct",
                r#"{"to":"{to}","body":"{body}"}"#,
                SEND_VARS,
            )?,
            group: emit(
                "group_event",
                "group",
                "group",
                r#"{"room":"{to}","body":"{body}"}"#,
                SEND_VARS,
            )?,
            join: emit("join_event", "join", "join", r#""{group}""#, JOIN_VARS)?,
            message_event,
            welcome_event,
            body: path_or_whole("body", "body")?,
            from: path_or_whole("from", "from")?,
            signals: SignalEvents::parse(&top)?,
        })
    }

    /// The request path of `ep`: its own when it names one, else [`Options::path`]; with
    /// Engine.IO's query (`EIO=4&transport=websocket`) unless it is there.
    pub fn request_path(&self, ep: &Endpoint) -> String {
        let path = if ep.path == "/" { &self.path } else { &ep.path };
        if path.contains("EIO=") {
            return path.clone();
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}EIO=4&transport=websocket")
    }
}

/// `path` and `namespace`, each checked.
fn path_and_namespace(top: &Table<'_>) -> Result<(String, String), OptionError> {
    let text = |key: &str, default: &str| -> Result<String, OptionError> {
        Ok(top.str(key)?.unwrap_or(default).to_owned())
    };
    let path = text("path", "/socket.io/")?;
    if !path.starts_with('/') || path.contains('?') {
        return Err(top.bad(
            "path",
            "must start with `/` and hold no query, e.g. \"/socket.io/\"",
        ));
    }
    let namespace = text("namespace", "/")?;
    if !namespace.starts_with('/') || namespace.contains(',') {
        return Err(top.bad(
            "namespace",
            "must start with `/` and hold no `,`, e.g. \"/chat\"",
        ));
    }
    Ok((path, namespace))
}

/// `urls`: the endpoints users spread over, when more than the target's own.
fn urls(table: &toml::Table, top: &Table<'_>, spec: &Spec) -> Result<Vec<Endpoint>, OptionError> {
    let urls: Vec<Endpoint> = match table.get("urls") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                toml::Value::String(s) => Endpoint::parse(s, spec).map_err(|e| top.bad("urls", e)),
                other => Err(top.bad(
                    "urls",
                    format!("must hold URLs (strings), got {}", other.type_str()),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(top.bad(
                "urls",
                format!("must be an array of URLs, got {}", v.type_str()),
            ))
        }
    };
    Ok(urls)
}

/// `auth`: the handshake's auth payload, a JSON object.
fn auth(top: &Table<'_>) -> Result<Template, OptionError> {
    let auth = Template::parse(
        top.str("auth")?
            .unwrap_or(r#"{"user":"{user}","token":"{password}"}"#),
        AUTH_VARS,
    )
    .map_err(|e| top.bad("auth", e))?;
    if !auth
        .fill(&Default::default(), 0)
        .trim_start()
        .starts_with('{')
    {
        return Err(top.bad(
            "auth",
            "must be a JSON object, e.g. '{\"token\":\"{password}\"}'",
        ));
    }
    Ok(auth)
}

/// `message_event` and `welcome_event`, which must differ.
fn events(top: &Table<'_>) -> Result<(String, Option<String>), OptionError> {
    let message_event = top.str("message_event")?.unwrap_or("message").to_owned();
    if message_event.is_empty() {
        return Err(top.bad("message_event", "an empty event name"));
    }
    let welcome_event = match top.str("welcome_event")? {
        None => None,
        Some("") => return Err(top.bad("welcome_event", "an empty event name")),
        Some(name) if name == message_event => {
            let why = format!("`{name}` is the message event, not a welcome");
            return Err(top.bad("welcome_event", why));
        }
        Some(name) => Some(name.to_owned()),
    };
    Ok((message_event, welcome_event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Driver as _;

    fn parse(text: &str) -> Result<Options, OptionError> {
        let t: toml::Table = toml::from_str(text).expect("toml");
        Options::parse(&t, &super::super::SocketIoDriver::SPEC)
    }

    #[test]
    fn defaults_match_the_test_app() {
        let o = parse("").expect("defaults");
        assert_eq!(o.direct.open, r#"["dm","#);
        assert_eq!((o.ack, o.recovery, o.namespace.as_str()), (true, true, "/"));
        let ep = Endpoint::parse("ws://h:1", &super::super::SocketIoDriver::SPEC).expect("url");
        assert_eq!(o.request_path(&ep), "/socket.io/?EIO=4&transport=websocket");
        let ep =
            Endpoint::parse("ws://h:1/io/?x=1", &super::super::SocketIoDriver::SPEC).expect("url");
        assert_eq!(o.request_path(&ep), "/io/?x=1&EIO=4&transport=websocket");
        let o = parse("body = ''\nfrom = ''\nack = false").expect("whole");
        assert!(o.body.is_none() && o.from.is_none() && !o.ack);
        assert_eq!(o.welcome_event, None);
        let o = parse("welcome_event = 'hello'").expect("welcome");
        assert_eq!(o.welcome_event.as_deref(), Some("hello"));
        let off = o.signals.offered();
        assert!(
            !off.receipts && !off.typing && !off.presence,
            "signals are off by default"
        );
    }

    #[test]
    fn mistakes_name_their_key() {
        for (text, key) in [
            ("nope = 1", "target.socketio.nope"),
            ("namespace = 'chat'", "target.socketio.namespace"),
            ("urls = ['http://x']", "target.socketio.urls"),
            ("urls = 'ws://x'", "target.socketio.urls"),
            ("auth = '[1]'", "target.socketio.auth"),
            ("direct = '{\"to\":{to}}'", "target.socketio.direct"),
            ("join = '\"{to}\"'", "target.socketio.join"),
            ("body = 'a..b'", "target.socketio.body"),
            ("ack = 'yes'", "target.socketio.ack"),
            ("message_event = ''", "target.socketio.message_event"),
            ("welcome_event = ''", "target.socketio.welcome_event"),
            ("welcome_event = 'message'", "target.socketio.welcome_event"),
            ("receipt_event = ''", "target.socketio.receipt_event"),
            ("typing = '{}'", "target.socketio.typing"),
            ("presence_event = 'p'", "target.socketio.contacts_event"),
            (
                "receipt_event = 'x'\ntyping_event = 'x'",
                "target.socketio.typing_event",
            ),
            (
                "receipt_event = 'r'\nreceipt = '{\"t\":\"{state}\"}'",
                "target.socketio.receipt",
            ),
            ("signal = 'a..b'", "target.socketio.signal"),
            ("presence_ack = true", "target.socketio.presence_ack"),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.key, key, "{text}: {e}");
        }
    }
}
