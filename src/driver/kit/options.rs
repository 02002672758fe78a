//! Reading a driver's options table (`[target.<driver>]`): the one parser every driver's
//! options go through, so that a mistake reads the same whatever the driver — each an
//! [`OptionError`] naming the dotted key (`target.<driver>.<key>`), which the scenario layer
//! turns into `FILE:LINE: target.<driver>.<key>: ...`. The wording, in one place:
//!
//! - an unknown key: ``unknown key `k`; allowed: a, b, c``;
//! - a value of the wrong type: `must be <what>, got <its TOML type>`;
//! - a value out of range: `must be <what>, got <the value>`;
//! - a duration that does not parse: ``not a duration: `s` (use e.g. `300ms`, `1s`)``.
//!
//! A `ca_file` that cannot be read is refused where it is read, by
//! [`tls::client_config`](super::tls), in one wording for every driver. JSON paths,
//! templates and matchers are read by the same table: `kit::json_map::table`.

use std::fmt::Display;
use std::time::Duration;

use crate::driver::{Config, OptionError};

/// One table of a driver's options, with its dotted key for errors.
pub(crate) struct Table<'a> {
    /// The table.
    pub(crate) t: &'a toml::Table,
    /// Its dotted key, e.g. `target.ws-json`.
    pub(crate) at: String,
}

impl<'a> Table<'a> {
    /// The driver's own `[target.<name>]` table.
    pub(crate) fn of(config: &'a Config) -> Table<'a> {
        Table::new(&config.options, config.spec.name)
    }

    /// The table `t` of driver `driver` (`[target.<driver>]`).
    pub(crate) fn new(t: &'a toml::Table, driver: &str) -> Table<'a> {
        Table {
            t,
            at: format!("target.{driver}"),
        }
    }

    /// The error of a value of `key` of the wrong type: `want` says what it must be.
    pub(crate) fn wrong(&self, key: &str, want: &str, got: &toml::Value) -> OptionError {
        self.bad(key, format!("must be {want}, got {}", got.type_str()))
    }

    /// The error of a value of `key` out of its range: `want` says what it must be.
    pub(crate) fn out_of_range(&self, key: &str, want: &str, got: impl Display) -> OptionError {
        self.bad(key, format!("must be {want}, got {got}"))
    }

    /// The error of `key` in this table.
    pub(crate) fn bad(&self, key: &str, msg: impl Into<String>) -> OptionError {
        OptionError {
            key: format!("{}.{key}", self.at),
            msg: msg.into(),
        }
    }

    /// Refuses any key but `keys`.
    pub(crate) fn only(&self, keys: &[&str]) -> Result<(), OptionError> {
        match self.t.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(k) => Err(self.bad(
                k,
                format!("unknown key `{k}`; allowed: {}", keys.join(", ")),
            )),
            None => Ok(()),
        }
    }

    /// The string at `key`, if there is one.
    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.bad(key, format!("must be a string, got {}", v.type_str()))),
        }
    }

    /// The boolean at `key` (absent: false).
    pub(crate) fn bool(&self, key: &str) -> Result<bool, OptionError> {
        match self.t.get(key) {
            None => Ok(false),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(v) => Err(self.bad(key, format!("must be true or false, got {}", v.type_str()))),
        }
    }

    /// The table at `key`, if there is one.
    pub(crate) fn sub(&self, key: &str) -> Result<Option<Table<'a>>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(Table {
                t,
                at: format!("{}.{key}", self.at),
            })),
            Some(v) => Err(self.bad(key, format!("must be a table, got {}", v.type_str()))),
        }
    }

    #[cfg(feature = "xmpp")]
    /// The string at `key`, owned, if there is one.
    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, OptionError> {
        Ok(self.str(key)?.map(str::to_owned))
    }

    #[cfg(any(feature = "mqtt", feature = "xmpp", feature = "script"))]
    /// The boolean at `key`, if there is one.
    pub(crate) fn flag(&self, key: &str) -> Result<Option<bool>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(key, "true or false", v)),
        }
    }

    #[cfg(feature = "mqtt")]
    /// The integer at `key`, if there is one.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) => Ok(Some(*i)),
            Some(v) => Err(self.wrong(key, "an integer", v)),
        }
    }

    /// The integer at `key` within `range` (`want` says so in words), if there is one.
    pub(crate) fn int_in(
        &self,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
        want: &str,
    ) -> Result<Option<i64>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if range.contains(i) => Ok(Some(*i)),
            Some(toml::Value::Integer(i)) => Err(self.out_of_range(key, want, i)),
            Some(v) => Err(self.wrong(key, want, v)),
        }
    }

    /// The number at `key` (an integer or a float), if there is one.
    pub(crate) fn number(&self, key: &str, want: &str) -> Result<Option<f64>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::Float(f)) => Ok(Some(*f)),
            Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(v) => Err(self.wrong(key, want, v)),
        }
    }

    /// The duration at `key` (a string such as `"300ms"`), if there is one.
    pub(crate) fn duration(&self, key: &str) -> Result<Option<Duration>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => {
                humantime::parse_duration(s.trim()).map(Some).map_err(|_| {
                    self.bad(
                        key,
                        format!("not a duration: `{s}` (use e.g. `300ms`, `1s`)"),
                    )
                })
            }
            Some(v) => Err(self.wrong(key, "a duration such as \"300ms\"", v)),
        }
    }

    #[cfg(feature = "script")]
    /// The array of strings at `key` (`want` says what they must be), if there is one.
    pub(crate) fn strings(
        &self,
        key: &str,
        want: &str,
    ) -> Result<Option<Vec<&'a str>>, OptionError> {
        match self.t.get(key) {
            None => Ok(None),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s.as_str()),
                    other => Err(self.wrong(key, want, other)),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(v) => Err(self.wrong(key, want, v)),
        }
    }
}
