//! The `[target.script]` options: the keys it takes, the `.proto` files, the transport
//! the URL names (WebSocket nodes, or TCP with a `framing`), and its TLS.

use std::path::PathBuf;

use ::http::HeaderValue;
use prost_reflect::DescriptorPool;

use super::link::{Framing, FRAMINGS};
use super::{codecs, http, Transport};
use crate::driver::kit::connect::Connector;
use crate::driver::kit::options::Table;
use crate::driver::kit::ws::{Dialer, TLS_KEYS};
use crate::driver::{Config, OptionError};

/// The keys of `[target.script]`.
pub(super) const KEYS: [&str; 12] = [
    "file",
    "http",
    "vars",
    "call_limit",
    "memory_limit",
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
    let scheme = config.endpoint.as_ref().map_or("ws", |ep| ep.scheme.name);
    if matches!(scheme, "http" | "https") {
        return http_transport(config, framing.or(delimiter).is_some());
    }
    if t.str("http")?.is_some() {
        return Err(err("http", "only for http:// and https:// targets".into()));
    }
    let tcp = matches!(scheme, "tcp" | "tls");
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

/// The connector of HTTP: offering `h2` by ALPN over TLS for HTTP/2, `http/1.1` otherwise.
#[cfg(feature = "tls")]
fn http_connector(config: &Config, version: http::Version) -> Result<Connector, OptionError> {
    let alpn: &[u8] = match version {
        http::Version::One => b"http/1.1",
        http::Version::Two => b"h2",
    };
    Ok(connector(config)?
        .with_alpn(&[alpn])
        .carrying(version.wire()))
}

/// Plain only: `https://` needs the `tls` feature.
#[cfg(not(feature = "tls"))]
fn http_connector(config: &Config, version: http::Version) -> Result<Connector, OptionError> {
    Ok(connector(config)?.carrying(version.wire()))
}

/// `vars`: the values the scenario gives the script (its global `vars`).
pub(super) fn vars(config: &Config) -> Result<toml::Table, OptionError> {
    let t = Table::of(config);
    match t.t.get("vars") {
        None => Ok(toml::Table::new()),
        Some(toml::Value::Table(v)) => Ok(v.clone()),
        Some(v) => Err(t.wrong("vars", "a table (`vars = { room = \"lobby\" }`)", v)),
    }
}

/// The URL each user connects to, by user index modulo the list's length: the target's,
/// then `urls`.
pub(super) fn user_urls(config: &Config) -> Result<Vec<String>, OptionError> {
    let mut urls: Vec<String> = config.endpoint.iter().map(|ep| ep.url.clone()).collect();
    if config
        .endpoint
        .as_ref()
        .is_some_and(|ep| matches!(ep.scheme.name, "ws" | "wss"))
    {
        urls.extend(more_urls(config)?.into_iter().map(|ep| ep.url));
    }
    if urls.is_empty() {
        urls.push(String::new());
    }
    Ok(urls)
}

/// HTTP: requests to the URL's host, paths after its own path.
fn http_transport(config: &Config, framed: bool) -> Result<Transport, OptionError> {
    let t = Table::of(config);
    if framed {
        return Err(t.bad("framing", "only for tcp:// and tls:// (HTTP frames itself)"));
    }
    if config.options.contains_key("urls") {
        return Err(t.bad("urls", "only for ws:// and wss:// targets"));
    }
    let version = match t.str("http")? {
        None | Some("1.1") => http::Version::One,
        Some("2") => http::Version::Two,
        Some(other) => {
            return Err(t.bad(
                "http",
                format!("`{other}`: \"1.1\" (keep-alive connections) or \"2\" (one multiplexed connection a user)"),
            ))
        }
    };
    let (authority, base) = match &config.endpoint {
        Some(ep) => {
            let default = ep.port == ep.scheme.default_port;
            let host = if ep.host.contains(':') {
                format!("[{}]", ep.host)
            } else {
                ep.host.clone()
            };
            let authority = if default {
                host
            } else {
                format!("{host}:{}", ep.port)
            };
            (authority, ep.path.trim_end_matches('/').to_owned())
        }
        None => (String::new(), String::new()),
    };
    let scheme = config.endpoint.as_ref().map_or("http", |ep| ep.scheme.name);
    let host = HeaderValue::from_str(&authority).map_err(|e| OptionError {
        key: "target.url".to_owned(),
        msg: format!("`{authority}` cannot be a `Host` header: {e}"),
    })?;
    Ok(Transport::Http(http::Dial {
        connector: http_connector(config, version)?,
        ix: 0,
        origin: format!("{scheme}://{authority}"),
        host,
        version,
        base,
        max_body: config.max_body + (64 << 10),
        max_answer: http::answer_limit(config.max_body + (64 << 10)),
    }))
}
