//! `msgstorm new FAMILY DIR`: a starting scenario (and, for the `script` driver, its
//! adapter) for one protocol family, written into a new folder. Each validates as written;
//! those for the reference server's protocol (`native`, `ws-json`, `script-ws`) also run
//! against the embedded server as they are.

use std::path::Path;

use clap::ValueEnum;

use super::say;
use crate::error::{Error, Result, EXIT_OK};

/// The protocol families `msgstorm new` starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Family {
    /// The reference server's protocol (runs against the embedded server).
    Native,
    /// A JSON protocol over WebSocket, as templates (runs against the embedded server).
    WsJson,
    /// A Socket.IO 4 server.
    Socketio,
    /// An MQTT broker.
    Mqtt,
    /// An XMPP server.
    Xmpp,
    /// A Lua adapter over WebSocket (runs against the embedded server).
    ScriptWs,
    /// A Lua adapter over TCP with length-prefixed frames.
    ScriptTcp,
}

/// The part every family's scenario shares: users, traffic and checks.
const BODY: &str = include_str!("new/body.toml");

impl Family {
    /// The scenario's head (name, target) for this family.
    fn head(self) -> &'static str {
        match self {
            Family::Native => include_str!("new/native.toml"),
            Family::WsJson => include_str!("new/ws-json.toml"),
            Family::Socketio => include_str!("new/socketio.toml"),
            Family::Mqtt => include_str!("new/mqtt.toml"),
            Family::Xmpp => include_str!("new/xmpp.toml"),
            Family::ScriptWs => include_str!("new/script-ws.toml"),
            Family::ScriptTcp => include_str!("new/script-tcp.toml"),
        }
    }

    /// The adapter script, for the `script` families.
    fn adapter(self) -> Option<&'static str> {
        match self {
            Family::ScriptWs => Some(include_str!("../../scenarios/script-native.lua")),
            Family::ScriptTcp => Some(include_str!("new/script-tcp.lua")),
            _ => None,
        }
    }

    /// Whether the scenario runs as written against the embedded reference server.
    fn embedded(self) -> bool {
        matches!(self, Family::Native | Family::WsJson | Family::ScriptWs)
    }
}

/// Writes the starting files of `family` into the folder `dir` (created; refused when it
/// holds any of them already).
pub fn run(family: Family, dir: &Path) -> Result<u8> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .unwrap_or("scenario");
    let scenario = format!("{}{BODY}", family.head().replacen("{name}", name, 1));
    let mut files = vec![("scenario.toml", scenario.as_str())];
    if let Some(adapter) = family.adapter() {
        files.push(("adapter.lua", adapter));
    }
    for (file, _) in &files {
        let path = dir.join(file);
        if path.exists() {
            return Err(Error::Usage(format!(
                "{}: already there; `msgstorm new` writes only new files (name another folder)",
                path.display()
            )));
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_owned(),
        source,
    })?;
    for (file, text) in &files {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|source| Error::Write { path, source })?;
    }
    let scenario = dir.join("scenario.toml");
    let shown = scenario.display();
    let written: Vec<String> = files
        .iter()
        .map(|(f, _)| dir.join(f).display().to_string())
        .collect();
    say(&format!("wrote {}", written.join(" and ")));
    if family.embedded() {
        say(&format!(
            "next: msgstorm run {shown}   (against the embedded reference server; set \
             target.url for yours)"
        ));
    } else {
        say(&format!(
            "next: set target.url in {shown} to your server, then msgstorm validate {shown} \
             and msgstorm run {shown}"
        ));
    }
    Ok(EXIT_OK)
}
