//! Signals through the script: `contacts` (a flow that may wait) once per run, and
//! `receipt`, `typing` and `presence` on the hot path, each given the token that the
//! recipients' `receive` hands back as `{ signal = token }`.

use mlua::{Lua, MultiValue, Table, Value};

use super::{script_error, Flow, ScriptSession};
use crate::driver::{Dest, Failure, Signal, Signals};
use crate::metrics::ErrorKind;

/// The signals a script with these entry points offers: each one it defines.
pub(in crate::driver::script) fn offered(entry: &crate::driver::script::vm::Entry) -> Signals {
    Signals {
        receipts: entry.receipt.is_some(),
        typing: entry.typing.is_some(),
        presence: entry.presence.is_some(),
    }
}

/// A conversation as the script sees it: `{ kind = "direct", name = PEER }` or
/// `{ kind = "group", name = GROUP }`.
pub(in crate::driver::script) fn conv(lua: &Lua, dest: Dest<'_>) -> mlua::Result<Table> {
    let (kind, name) = match dest {
        Dest::User(u) => ("direct", u),
        Dest::Group(g) => ("group", g),
    };
    let t = lua.create_table()?;
    t.raw_set("kind", kind)?;
    t.raw_set("name", name)?;
    Ok(t)
}

/// The entry point's name and its arguments after `u` for `signal` with `token`.
pub(in crate::driver::script) fn call(
    lua: &Lua,
    signal: Signal<'_>,
    token: &str,
) -> mlua::Result<(&'static str, MultiValue)> {
    let s = |text: &str| lua.create_string(text).map(Value::String);
    let token = s(token)?;
    Ok(match signal {
        Signal::Read {
            sender,
            conv: c,
            message,
        } => (
            "receipt",
            MultiValue::from_iter([s(sender)?, Value::Table(conv(lua, c)?), s(message)?, token]),
        ),
        Signal::Typing { conv: c, active } => (
            "typing",
            MultiValue::from_iter([Value::Table(conv(lua, c)?), Value::Boolean(active), token]),
        ),
        Signal::Presence { online } => (
            "presence",
            MultiValue::from_iter([Value::Boolean(online), token]),
        ),
    })
}

impl ScriptSession {
    /// Runs `contacts(u, ids)` when the script defines it (a server that knows its users'
    /// contacts by itself needs none).
    pub(super) async fn tell_contacts(&mut self, ids: &[&str]) -> Result<(), Failure> {
        let Some(f) = self.entry.contacts.clone() else {
            return Ok(());
        };
        let list = self
            .lua
            .create_sequence_from(ids.iter().copied())
            .map_err(|e| script_error("contacts", &e))?;
        let args = MultiValue::from_iter([Value::Table(list)]);
        self.flow(Flow::Contacts, &f, args, None).await
    }

    /// Calls the entry point of `signal` with `token`; a receipt's id waits for its
    /// acceptance like a send's.
    pub(super) async fn send_signal(
        &mut self,
        tag: u64,
        signal: Signal<'_>,
        token: &str,
    ) -> Result<(), Failure> {
        let (name, args) =
            call(&self.lua, signal, token).map_err(|e| script_error("signal", &e))?;
        let f = match name {
            "receipt" => self.entry.receipt.clone(),
            "typing" => self.entry.typing.clone(),
            _ => self.entry.presence.clone(),
        };
        let Some(f) = f else {
            return Err(Failure::new(
                ErrorKind::Script,
                format!("the script defines no function `{name}`"),
            ));
        };
        let id = self.call_hot(name, &f, args).await?;
        self.link.flush().await?;
        if name == "receipt" && self.acceptance {
            self.awaits_acceptance(name, &id, tag)?;
        }
        Ok(())
    }
}
