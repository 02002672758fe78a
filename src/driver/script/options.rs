//! The `[target.script]` options: the keys it takes, the `.proto` files, the transport
//! the URL names (WebSocket nodes, or TCP with a `framing`), and its TLS.

use std::path::PathBuf;

use prost_reflect::DescriptorPool;

use super::link::{Framing, FRAMINGS};
use super::{codecs, Transport};
use crate::driver::kit::connect::Connector;
use crate::driver::kit::options::Table;
use crate::driver::kit::ws::{Dialer, TLS_KEYS};
use crate::driver::{Config, OptionError};

/// The keys of `[target.script]`.
pub(super) const KEYS: [&str; 8] = [
    "file",
    "proto",
    "urls",
    "acceptance",
    "framing",
    "delimiter",
    TLS_KEYS[0],
    TLS_KEYS[1],
];
/// The `.proto` files `proto` names (one or a list, relative to the scenario), compiled.
pub(super) fn protos(config: &Config) -> Result<DescriptorPool, OptionError> {
    let t = Table::of(config);
    let files: Vec<PathBuf> = match t.t.get("proto") {
        Some(toml::Value::String(f)) => vec![config.dir.join(f)],
        _ => t
            .strings("proto", "a .proto file name or a list of them")?
            .unwrap_or_default()
            .into_iter()
            .map(|f| config.dir.join(f))
            .collect(),
    };
    codecs::compile_protos(&files).map_err(|msg| t.bad("proto", msg))
}

/// The transport the URL's scheme names, with `framing` for TCP.
pub(super) fn transport(config: &Config) -> Result<Transport, OptionError> {
    let t = Table::of(config);
    let err = |key: &str, msg: String| t.bad(key, msg);
    let framing = t.str("framing")?;
    let delimiter = t.str("delimiter")?;
    let tcp = config
        .endpoint
        .as_ref()
        .is_some_and(|ep| matches!(ep.scheme.name, "tcp" | "tls"));
    if !tcp {
        if let Some(key) = [("framing", framing), ("delimiter", delimiter)]
            .iter()
            .find_map(|(k, v)| v.map(|_| *k))
        {
            return Err(err(
                key,
                "only for tcp:// and tls:// (a WebSocket frames itself)".into(),
            ));
        }
        let mut dialers = vec![Dialer::new(config)?];
        for ep in more_urls(config)? {
            let node = Config {
                endpoint: Some(ep),
                ..config.clone()
            };
            dialers.push(Dialer::new(&node)?);
        }
        return Ok(Transport::Ws(dialers));
    }
    if config.options.contains_key("urls") {
        return Err(err("urls", "only for ws:// and wss:// targets".into()));
    }
    if config.endpoint.as_ref().is_some_and(|ep| ep.port == 0) {
        return Err(OptionError::url(
            "tcp:// and tls:// need a port (e.g. tcp://127.0.0.1:8463)",
        ));
    }
    let Some(framing) = framing else {
        return Err(err(
            "framing",
            format!("is required: how the stream is cut into frames, one of {FRAMINGS}"),
        ));
    };
    let framing = Framing::parse(framing, delimiter).map_err(|msg| err("framing", msg))?;
    Ok(Transport::Tcp {
        connector: connector(config)?,
        framing,
        max: config.max_body + (64 << 10),
    })
}

/// `urls`: more WebSocket nodes of the same service, users spread over them and the
/// target URL in turn.
pub(super) fn more_urls(config: &Config) -> Result<Vec<crate::driver::Endpoint>, OptionError> {
    let t = Table::of(config);
    t.strings("urls", "a list of ws:// URLs")?
        .unwrap_or_default()
        .into_iter()
        .map(|s| {
            let ep =
                crate::driver::Endpoint::parse(s, config.spec).map_err(|e| t.bad("urls", e))?;
            match ep.scheme.name {
                "ws" | "wss" => Ok(ep),
                _ => Err(t.bad(
                    "urls",
                    format!("`{s}`: more nodes are ws:// or wss:// URLs"),
                )),
            }
        })
        .collect()
}

/// The TCP connector, with TLS for `tls://`.
#[cfg(feature = "tls")]
pub(super) fn connector(config: &Config) -> Result<Connector, OptionError> {
    Connector::new(config)
}

/// Plain only: `tls://` needs the `tls` feature.
#[cfg(not(feature = "tls"))]
pub(super) fn connector(config: &Config) -> Result<Connector, OptionError> {
    match config.endpoint.as_ref().filter(|ep| ep.tls()) {
        Some(ep) => Err(OptionError::url(format!(
            "`{}`: this msgstorm was built without TLS (feature `tls`); use tcp://",
            ep.url
        ))),
        None => Ok(Connector::plain(config)),
    }
}
