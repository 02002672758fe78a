//! Validation of `[target]`: URL, driver, auth and the driver's own option table.

use std::time::Duration;

use toml::Spanned;

use super::plan::{Auth, DriverKind, Target};
use super::schema::{AuthSpec, Driver, TargetSpec};
use super::source::Source;
use super::validate::positive_dur;
use crate::Result;

/// The secret of the embedded reference server and the default native `secret`.
pub const DEFAULT_SECRET: &str = "msgstorm";

/// Heartbeat interval when the scenario sets none: well inside common idle timeouts.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);

/// Default `target.connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// URL schemes and the drivers that speak them.
const SCHEMES: [(&str, &[DriverKind]); 4] = [
    ("ws", &[DriverKind::Native, DriverKind::Echo]),
    ("wss", &[DriverKind::Native, DriverKind::Echo]),
    ("mqtt", &[DriverKind::Mqtt]),
    ("mqtts", &[DriverKind::Mqtt]),
];

/// Validates `[target]` (absent: the embedded reference server with the native driver).
pub fn target(src: &Source<'_>, spec: Option<&Spanned<TargetSpec>>) -> Result<Target> {
    let Some(spec) = spec.map(Spanned::get_ref) else {
        return Ok(Target {
            url: None,
            driver: DriverKind::Native,
            auth: Auth::Secret(DEFAULT_SECRET.into()),
            connect_timeout: CONNECT_TIMEOUT,
            heartbeat: Some(DEFAULT_HEARTBEAT),
            source_addrs: Vec::new(),
            options: toml::Table::new(),
        });
    };
    let driver = match spec.driver.as_ref().map(|d| *d.get_ref()) {
        None | Some(Driver::Native) => DriverKind::Native,
        Some(Driver::Mqtt) => DriverKind::Mqtt,
        Some(Driver::Echo) => DriverKind::Echo,
    };
    let url = match &spec.url {
        Some(u) => {
            let scheme = check_url(u.get_ref()).map_err(|m| src.at(u, "target.url", m))?;
            let speaks = SCHEMES
                .iter()
                .find(|(s, _)| *s == scheme)
                .map_or(&[][..], |(_, d)| *d);
            if !speaks.contains(&driver) {
                let fits: Vec<&str> = SCHEMES
                    .iter()
                    .filter(|(_, d)| d.contains(&driver))
                    .map(|(s, _)| *s)
                    .collect();
                return Err(src.at(
                    u,
                    "target.url",
                    format!(
                        "scheme `{scheme}://` does not fit driver `{}`; it needs {}",
                        driver.as_str(),
                        fits.iter()
                            .map(|s| format!("{s}://"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                ));
            }
            Some(u.get_ref().clone())
        }
        None if driver == DriverKind::Mqtt => {
            let d = spec.driver.as_ref().map_or(0..0, Spanned::span);
            return Err(src.error(
                d,
                "target.driver",
                "driver `mqtt` needs `target.url` (e.g. `mqtt://127.0.0.1:1883`); without a url \
                 the embedded reference server is used, which speaks native and echo",
            ));
        }
        None => None,
    };
    let connect_timeout = match &spec.connect_timeout {
        Some(d) => positive_dur(src, d, "target.connect_timeout")?,
        None => CONNECT_TIMEOUT,
    };
    // Users keep their connection alive like real clients unless told not to ("0s").
    let heartbeat = spec
        .heartbeat
        .as_ref()
        .map_or(DEFAULT_HEARTBEAT, |h| h.get_ref().0);
    let heartbeat = (!heartbeat.is_zero()).then_some(heartbeat);
    let auth = match &spec.auth {
        Some(a) => auth(src, a, driver)?,
        None if driver == DriverKind::Native => Auth::Secret(DEFAULT_SECRET.into()),
        None => Auth::None,
    };
    let mut source_addrs = Vec::new();
    for (i, a) in spec.source_addresses.iter().enumerate() {
        let ip: std::net::IpAddr = a.get_ref().parse().map_err(|_| {
            src.at(
                a,
                format!("target.source_addresses[{i}]"),
                format!("`{}` is not an IP address, e.g. \"127.0.0.2\"", a.get_ref()),
            )
        })?;
        if driver == DriverKind::Mqtt {
            return Err(src.at(
                a,
                "target.source_addresses",
                "only the WebSocket drivers (native, echo) bind source addresses",
            ));
        }
        source_addrs.push(ip);
    }
    let mut options = toml::Table::new();
    for (name, table) in [
        ("native", &spec.native),
        ("mqtt", &spec.mqtt),
        ("echo", &spec.echo),
    ] {
        let Some(table) = table else { continue };
        if name != driver.as_str() {
            return Err(src.at(
                table,
                format!("target.{name}"),
                format!(
                    "options for driver `{name}`, but the driver is `{}`; use `[target.{}]`",
                    driver.as_str(),
                    driver.as_str()
                ),
            ));
        }
        options = table.get_ref().clone();
    }
    Ok(Target {
        url,
        driver,
        auth,
        connect_timeout,
        heartbeat,
        source_addrs,
        options,
    })
}

fn auth(src: &Source<'_>, spec: &Spanned<AuthSpec>, driver: DriverKind) -> Result<Auth> {
    let a = spec.get_ref();
    match (&a.secret, &a.username, &a.password) {
        (None, None, None) => Ok(Auth::None),
        (Some(s), None, None) if driver == DriverKind::Native => {
            Ok(Auth::Secret(s.get_ref().clone()))
        }
        (Some(s), None, None) => Err(src.at(
            s,
            "target.auth.secret",
            format!(
                "`secret` mints native tokens; driver `{}` takes `username` and `password`",
                driver.as_str()
            ),
        )),
        (None, Some(u), Some(p)) if driver != DriverKind::Native => Ok(Auth::Password {
            username: u.get_ref().clone(),
            password: p.get_ref().clone(),
        }),
        (None, Some(u), Some(_)) => Err(src.at(
            u,
            "target.auth.username",
            "driver `native` logs in with tokens: set `secret` (the server's --secret) instead",
        )),
        (Some(s), _, _) => Err(src.at(
            s,
            "target.auth.secret",
            "set either `secret` or `username` + `password`, not both",
        )),
        (None, Some(u), None) => {
            Err(src.at(u, "target.auth.password", "`username` needs `password` too"))
        }
        (None, None, Some(p)) => {
            Err(src.at(p, "target.auth.username", "`password` needs `username` too"))
        }
    }
}

/// Checks `scheme://host[:port][/path]` and returns the scheme.
fn check_url(url: &str) -> Result<&str, String> {
    let bad = |why: &str| format!("url `{url}`: malformed: {why} (e.g. `ws://127.0.0.1:7700/ws`)");
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad("expected `scheme://host`"));
    };
    if !SCHEMES.iter().any(|(s, _)| *s == scheme) {
        return Err(format!(
            "url `{url}`: scheme `{scheme}` is not supported; use ws://, wss://, mqtt:// or mqtts://"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("unclosed `[` in the host"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(bad("unexpected text after `]`")),
        };
        if h.is_empty()
            || !h
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(bad("not an IPv6 address in `[…]`"));
        }
        (h, port)
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(bad("the host is missing"));
    }
    let host_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':');
    if !host.chars().all(host_ok) {
        return Err(bad(&format!("`{host}` is not a host name or address")));
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad(&format!("port `{p}` is not a number in 1..=65535")));
        }
    }
    Ok(scheme)
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn urls() {
        assert_eq!(check_url("ws://127.0.0.1:7700/ws"), Ok("ws"));
        assert_eq!(check_url("wss://chat.example.com/ws?x=1"), Ok("wss"));
        assert_eq!(check_url("mqtt://user:pw@[::1]:1883"), Ok("mqtt"));
        assert_eq!(check_url("mqtts://broker"), Ok("mqtts"));
        for bad in [
            "ws//x",
            "http://x",
            "ws://",
            "ws://:80/",
            "ws://h:99999",
            "ws://h:x",
            "ws://a b",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }
}
