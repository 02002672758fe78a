//! Target URLs: the one parser every driver and the scenario layer use, so `ws://`,
//! `mqtt://` and the rest agree on IPv6 literals, default ports and credentials.
//!
//! Parsing is done by `http::Uri` (already in the tree through the WebSocket stack); this
//! module adds what a load tester needs on top: the scheme must be one the driver speaks,
//! the host must be there, the port defaults per scheme, and credentials in the URL are
//! split off so they can become the driver's password auth.

use crate::driver::{Scheme, Spec};

/// A parsed target URL, checked against the schemes of one driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL as written, with a password masked (for messages and reports).
    pub url: String,
    /// The scheme, one of the driver's.
    pub scheme: &'static Scheme,
    /// Host name or address; IPv6 literals without their brackets.
    pub host: String,
    /// Port (the scheme's default when the URL names none).
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
    /// `user[:password]` given in the URL.
    pub userinfo: Option<UserInfo>,
}

/// A user name and, when given, its password.
pub type UserInfo = (String, Option<String>);

impl Endpoint {
    /// Parses `url` for driver `spec`; the error says what is wrong and gives an example.
    pub fn parse(url: &str, spec: &Spec) -> Result<Endpoint, String> {
        let example = spec
            .schemes
            .first()
            .map_or_else(String::new, |s| format!(" (e.g. `{}`)", s.example));
        let bad = |why: &str| format!("url `{url}`: malformed: {why}{example}");
        let Some((scheme_name, rest)) = url.split_once("://") else {
            return Err(bad("expected `scheme://host`"));
        };
        let scheme = scheme_of(spec, scheme_name)?;
        // `http::Uri` does not take credentials in the authority: split them off first.
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (userinfo, hostport) = split_userinfo(&rest[..authority_end]).map_err(&bad)?;
        let tail = rest[authority_end..].split('#').next().unwrap_or_default();
        let uri: http::Uri = format!("http://{hostport}{tail}")
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        let host = uri.host().unwrap_or_default();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err(bad("the host is missing"));
        }
        let port = port_of(hostport)
            .map_err(|why| bad(&why))?
            .unwrap_or(scheme.default_port);
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        let shown = match &userinfo {
            Some((user, Some(_))) => format!("{scheme_name}://{user}:***@{hostport}{tail}"),
            _ => url.to_owned(),
        };
        Ok(Endpoint {
            url: shown,
            scheme,
            host: host.to_owned(),
            port,
            path,
            userinfo,
        })
    }

    /// `host:port` to connect to (IPv6 literals in brackets).
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The HTTP `Host` header: the port only when it is not the scheme's default.
    pub fn host_header(&self) -> String {
        if self.port == self.scheme.default_port {
            if self.host.contains(':') {
                format!("[{}]", self.host)
            } else {
                self.host.clone()
            }
        } else {
            self.addr()
        }
    }

    /// True for schemes that run over TLS (`wss`, `mqtts`).
    pub fn tls(&self) -> bool {
        self.scheme.tls
    }
}

/// The scheme of `spec` named `name`, or what the driver takes instead.
fn scheme_of(spec: &Spec, name: &str) -> Result<&'static Scheme, String> {
    if let Some(scheme) = spec.schemes.iter().find(|s| s.name == name) {
        return Ok(scheme);
    }
    let fits: Vec<String> = spec
        .schemes
        .iter()
        .map(|s| format!("{}://", s.name))
        .collect();
    Err(if fits.is_empty() {
        format!(
            "driver `{}` runs in this process and takes no url",
            spec.name
        )
    } else {
        format!(
            "scheme `{name}://` does not fit driver `{}`; it needs {}",
            spec.name,
            fits.join(" or ")
        )
    })
}

/// The credentials before `@` in `authority` (`http::Uri` does not take them), and the
/// host and port after it.
fn split_userinfo(authority: &str) -> Result<(Option<UserInfo>, &str), &'static str> {
    let Some((info, host)) = authority.rsplit_once('@') else {
        return Ok((None, authority));
    };
    let (user, pass) = match info.split_once(':') {
        Some((u, p)) => (u.to_owned(), Some(p.to_owned())),
        None => (info.to_owned(), None),
    };
    if user.is_empty() {
        return Err("empty user name before `@`");
    }
    Ok((Some((user, pass)), host))
}

/// The port `hostport` names, if it names one: `http::Uri` checks its digits but not its
/// range.
fn port_of(hostport: &str) -> Result<Option<u16>, String> {
    let text = hostport
        .rsplit_once(']')
        .map_or(hostport, |(_, after)| after)
        .rsplit_once(':')
        .map(|(_, p)| p);
    text.map(|p| {
        p.parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("port `{p}` is not a number in 1..=65535"))
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{Caps, Spec};

    const SPEC: Spec = Spec {
        name: "test",
        schemes: &[
            Scheme {
                name: "ws",
                default_port: 80,
                tls: false,
                example: "ws://127.0.0.1:7700/ws",
            },
            Scheme {
                name: "mqtts",
                default_port: 8883,
                tls: true,
                example: "mqtts://broker",
            },
        ],
        embedded_path: None,
        kinds: &[],
        requests: &[],
        auth: &[],
        source_addresses: false,
        files: &[],
        caps: Caps::NONE,
    };

    fn ok(url: &str) -> Endpoint {
        Endpoint::parse(url, &SPEC).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn splits_host_port_and_path() {
        let ep = ok("ws://127.0.0.1:7700/echo");
        assert_eq!(
            (ep.addr(), ep.path.as_str()),
            ("127.0.0.1:7700".into(), "/echo")
        );
        assert_eq!(ep.host_header(), "127.0.0.1:7700");
        let ep = ok("ws://example.test?x=1");
        assert_eq!(
            (ep.addr(), ep.path.as_str()),
            ("example.test:80".into(), "/?x=1")
        );
        assert_eq!(ep.host_header(), "example.test");
        assert_eq!(ok("ws://h/a#frag").path, "/a");
    }

    #[test]
    fn ipv6_and_credentials_agree_everywhere() {
        let ep = ok("ws://[::1]:9/e");
        assert_eq!((ep.host.as_str(), ep.addr()), ("::1", "[::1]:9".into()));
        let ep = ok("ws://[::1]/e");
        assert_eq!(ep.addr(), "[::1]:80");
        assert_eq!(ep.host_header(), "[::1]");
        let ep = ok("mqtts://user:pw@[::1]");
        assert_eq!(ep.addr(), "[::1]:8883");
        assert!(ep.tls());
        assert_eq!(ep.userinfo, Some(("user".into(), Some("pw".into()))));
        assert_eq!(ep.url, "mqtts://user:***@[::1]");
        assert_eq!(ok("ws://u@h").userinfo, Some(("u".into(), None)));
    }

    #[test]
    fn refuses_what_cannot_be_reached() {
        for bad in [
            "ws//x",
            "http://x",
            "ws://",
            "ws://:80/",
            "ws://h:99999",
            "ws://h:0",
            "ws://h:x",
            "ws://h:",
            "ws://a b",
            "ws://[::1",
            "ws://@h",
        ] {
            assert!(Endpoint::parse(bad, &SPEC).is_err(), "{bad}");
        }
        let e = Endpoint::parse("http://x", &SPEC).unwrap_err();
        assert_eq!(
            e,
            "scheme `http://` does not fit driver `test`; it needs ws:// or mqtts://"
        );
    }
}
