//! Validation of `[target]`: URL, driver, auth, source addresses and the driver's own
//! option table. What a driver takes is its [`Spec`]; its options are checked by the driver
//! itself ([`crate::driver::check`]), with errors located through the scenario's spans.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::plan::{Auth, Target};
use super::schema::{AuthSpec, TargetSpec, TARGET_KEYS};
use super::source::Source;
use super::values::{heartbeat, positive};
use crate::driver::{self, AuthForm, Endpoint, Spec};
use crate::Result;

/// The secret of the embedded reference server and the default `secret` of drivers that
/// mint tokens.
pub const DEFAULT_SECRET: &str = "msgstorm";

/// Heartbeat interval when the scenario sets none: well inside common idle timeouts.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);

/// Default `target.connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The driver when the scenario names none.
const DEFAULT_DRIVER: &str = "native";

/// A driver's own table (`[target.<driver>]`), taken out of the tree before the rest of
/// `[target]` is read into the schema.
pub type DriverTable<'a> = (String, Spanned<DeValue<'a>>);

/// Takes every `[target.<driver>]` table of a built-in driver out of `root`.
pub fn take_driver_tables<'a>(root: &mut DeTable<'a>) -> Vec<DriverTable<'a>> {
    let Some(DeValue::Table(target)) = root.get_mut("target").map(Spanned::get_mut) else {
        return Vec::new();
    };
    let names: Vec<_> = target
        .keys()
        .filter(|k| driver::spec(k.get_ref()).is_some())
        .cloned()
        .collect();
    names
        .into_iter()
        .filter_map(|k| {
            let v = target.remove(&k)?;
            Some((k.into_inner().into_owned(), v))
        })
        .collect()
}

/// Every key `[target]` takes, for "unknown key" messages.
pub fn target_keys() -> Vec<&'static str> {
    let mut keys = TARGET_KEYS.to_vec();
    driver::for_each_spec(|s| keys.push(s.name));
    keys
}

/// Validates `[target]` (absent: the embedded reference server with the native driver).
/// The driver's options are checked later by [`check_driver`], once the largest body is
/// known.
pub fn target(
    src: &Source<'_>,
    spec: Option<&Spanned<TargetSpec>>,
    tables: &[DriverTable<'_>],
) -> Result<Target> {
    let t = spec.map(Spanned::get_ref);
    let driver = driver_of(src, t)?;
    let endpoint = endpoint(src, spec, driver)?;
    let connect_timeout = match t.and_then(|t| t.connect_timeout.as_ref()) {
        Some(d) => src.value(d, "target.connect_timeout", positive)?,
        None => CONNECT_TIMEOUT,
    };
    // Users keep their connection alive like real clients unless told not to ("0s").
    let heartbeat = match t.and_then(|t| t.heartbeat.as_ref()) {
        Some(h) => src.value(h, "target.heartbeat", heartbeat)?,
        None => Some(DEFAULT_HEARTBEAT),
    };
    let auth = match t.and_then(|t| t.auth.as_ref()) {
        Some(a) => auth(src, a, driver)?,
        None if driver.auth.contains(&AuthForm::Secret) => Auth::Secret(DEFAULT_SECRET.into()),
        None => Auth::None,
    };
    let auth = url_credentials(src, t, endpoint.as_ref(), driver, auth)?;
    let source_addrs = source_addrs(src, t, driver)?;
    let options = options(src, tables, driver)?;
    Ok(Target {
        endpoint,
        driver,
        auth,
        connect_timeout,
        heartbeat,
        source_addrs,
        options,
        dir: src.file.parent().map(Path::to_path_buf).unwrap_or_default(),
        caps: driver.caps,
        signals: crate::driver::Signals::default(),
        kinds: Vec::new(),
        relay: None,
    })
}

/// `target.driver`, or the default driver.
fn driver_of(src: &Source<'_>, t: Option<&TargetSpec>) -> Result<&'static Spec> {
    match t.and_then(|t| t.driver.as_ref()) {
        Some(d) => driver::spec(d.get_ref()).ok_or_else(|| {
            let names: Vec<&str> = driver::specs().iter().map(|s| s.name).collect();
            src.at(
                d,
                "target.driver",
                super::source::unknown_among("driver", d.get_ref(), &names),
            )
        }),
        None => driver::spec(DEFAULT_DRIVER).ok_or_else(|| {
            crate::Error::Usage(format!("the `{DEFAULT_DRIVER}` driver is not built in"))
        }),
    }
}

/// `target.url`; absent, the embedded server, when `driver` talks to it.
fn endpoint(
    src: &Source<'_>,
    spec: Option<&Spanned<TargetSpec>>,
    driver: &'static Spec,
) -> Result<Option<Endpoint>> {
    let t = spec.map(Spanned::get_ref);
    match t.and_then(|t| t.url.as_ref()) {
        Some(u) => Ok(Some(
            Endpoint::parse(u.get_ref(), driver).map_err(|m| src.at(u, "target.url", m))?,
        )),
        None if driver.embedded_path.is_none() && !driver.schemes.is_empty() => {
            let span = t
                .and_then(|t| t.driver.as_ref())
                .map_or_else(|| spec.map_or(0..0, Spanned::span), Spanned::span);
            let embedded: Vec<String> = driver::specs()
                .iter()
                .filter(|s| s.embedded_path.is_some())
                .map(|s| s.name.to_owned())
                .collect();
            Err(src.error(
                span,
                "target.driver",
                format!(
                    "driver `{}` needs `target.url` (e.g. `{}`); without a url the embedded \
                     reference server is used, which speaks {}",
                    driver.name,
                    driver.schemes.first().map_or("", |s| s.example),
                    embedded.join(" and ")
                ),
            ))
        }
        None => Ok(None),
    }
}

/// `auth`, or the user name and password of the URL when it has them.
fn url_credentials(
    src: &Source<'_>,
    t: Option<&TargetSpec>,
    endpoint: Option<&Endpoint>,
    driver: &'static Spec,
    auth: Auth,
) -> Result<Auth> {
    let (Some(ep), Some(u)) = (endpoint, t.and_then(|t| t.url.as_ref())) else {
        return Ok(auth);
    };
    let Some((user, pass)) = &ep.userinfo else {
        return Ok(auth);
    };
    if !driver.auth.contains(&AuthForm::Password) {
        return Err(src.at(
            u,
            "target.url",
            format!(
                "driver `{}` takes no user name or password in the URL",
                driver.name
            ),
        ));
    }
    if auth != Auth::None {
        return Err(src.at(
            u,
            "target.url",
            "credentials are both in the URL and in `[target.auth]`: keep one",
        ));
    }
    Ok(Auth::Password {
        username: user.clone(),
        password: pass.clone().unwrap_or_default(),
    })
}

/// `target.source_addresses`, for drivers that bind them.
fn source_addrs(
    src: &Source<'_>,
    t: Option<&TargetSpec>,
    driver: &'static Spec,
) -> Result<Vec<std::net::IpAddr>> {
    let mut out = Vec::new();
    for (i, a) in t
        .map_or(&[][..], |t| &t.source_addresses)
        .iter()
        .enumerate()
    {
        let ip: std::net::IpAddr = a.get_ref().parse().map_err(|_| {
            src.at(
                a,
                format!("target.source_addresses[{i}]"),
                format!("`{}` is not an IP address, e.g. \"127.0.0.2\"", a.get_ref()),
            )
        })?;
        if !driver.source_addresses {
            let which: Vec<&str> = driver::specs()
                .iter()
                .filter(|s| s.source_addresses)
                .map(|s| s.name)
                .collect();
            return Err(src.at(
                a,
                "target.source_addresses",
                format!(
                    "driver `{}` does not bind source addresses; these drivers do: {}",
                    driver.name,
                    which.join(", ")
                ),
            ));
        }
        out.push(ip);
    }
    Ok(out)
}

/// The driver's own table, read as TOML (the driver checks it).
fn options(
    src: &Source<'_>,
    tables: &[DriverTable<'_>],
    driver: &'static Spec,
) -> Result<toml::Table> {
    let mut options = toml::Table::new();
    for (name, table) in tables {
        let key = format!("target.{name}");
        if name != driver.name {
            return Err(src.at(
                table,
                key,
                format!(
                    "options for driver `{name}`, but the driver is `{}`; use `[target.{}]`",
                    driver.name, driver.name
                ),
            ));
        }
        let DeValue::Table(inner) = table.get_ref() else {
            return Err(src.at(table, key, "must be a table"));
        };
        let de = toml::de::Deserializer::from(Spanned::new(table.span(), inner.clone()));
        options = serde::Deserialize::deserialize(de).map_err(|e: toml::de::Error| {
            src.error(e.span().unwrap_or(table.span()), key, e.message().trim())
        })?;
    }
    Ok(options)
}

/// Checks the driver's options and endpoint by building the driver (nothing connects),
/// and records what it can do as configured. An error names the key's line in the file,
/// or the `--set` that set it.
pub fn check_driver(
    src: &Source<'_>,
    root: &DeTable<'_>,
    target: &mut Target,
    max_body: usize,
) -> Result<()> {
    match driver::check(&target.driver_config(max_body, 0)) {
        Ok((caps, signals)) => {
            target.caps = caps;
            target.signals = signals;
            Ok(())
        }
        Err(e) => Err(src.error(span_of(root, &e.key), e.key, e.msg)),
    }
}

/// The span of dotted `key` in `root`, or of its longest prefix that is there.
fn span_of(root: &DeTable<'_>, key: &str) -> Range<usize> {
    let mut table = root;
    let mut span = 0..0;
    for part in key.split('.') {
        let Some(v) = table.get(part) else { break };
        span = v.span();
        match v.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    span
}

fn auth(src: &Source<'_>, spec: &Spanned<AuthSpec>, driver: &Spec) -> Result<Auth> {
    let a = spec.get_ref();
    let takes = |form| driver.auth.contains(&form);
    let none_taken = |span: &Spanned<String>, key: &str| {
        src.at(
            span,
            key.to_owned(),
            format!("driver `{}` takes no authentication", driver.name),
        )
    };
    match (&a.secret, &a.username, &a.password) {
        (None, None, None) => Ok(Auth::None),
        (Some(s), None, None) if takes(AuthForm::Secret) => Ok(Auth::Secret(s.get_ref().clone())),
        (Some(s), None, None) if takes(AuthForm::Password) => Err(src.at(
            s,
            "target.auth.secret",
            format!(
                "`secret` mints native tokens; driver `{}` takes `username` and `password`",
                driver.name
            ),
        )),
        (Some(s), None, None) => Err(none_taken(s, "target.auth.secret")),
        (None, Some(u), Some(p)) if takes(AuthForm::Password) => Ok(Auth::Password {
            username: u.get_ref().clone(),
            password: p.get_ref().clone(),
        }),
        (None, Some(u), Some(_)) if takes(AuthForm::Secret) => Err(src.at(
            u,
            "target.auth.username",
            format!(
                "driver `{}` logs in with tokens: set `secret` (the server's --secret) instead",
                driver.name
            ),
        )),
        (None, Some(u), Some(_)) => Err(none_taken(u, "target.auth.username")),
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
