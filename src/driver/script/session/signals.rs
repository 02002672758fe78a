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
        ..Signals::default()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_names_its_sender_and_conversation_and_carries_the_token() {
        let lua = Lua::new();
        let read = Signal::Read {
            sender: "u1",
            conv: Dest::Group("lobby"),
            message: "ms1:…",
        };
        let (name, args) = call(&lua, read, "R0").expect("arguments");
        assert_eq!(name, "receipt");
        let args: Vec<Value> = args.into_iter().collect();
        assert_eq!(args.len(), 4);
        assert_eq!(args[0].to_string().expect("text"), "u1");
        let Value::Table(conv) = &args[1] else {
            panic!("conv is a table: {:?}", args[1]);
        };
        assert_eq!(conv.get::<String>("kind").expect("kind"), "group");
        assert_eq!(conv.get::<String>("name").expect("name"), "lobby");
        assert_eq!(args[3].to_string().expect("text"), "R0");
    }

    #[test]
    fn typing_and_presence_carry_their_flag_and_token() {
        let lua = Lua::new();
        let typing = Signal::Typing {
            conv: Dest::User("u2"),
            active: true,
        };
        let (name, args) = call(&lua, typing, "T0").expect("arguments");
        let args: Vec<Value> = args.into_iter().collect();
        assert_eq!(name, "typing");
        assert!(matches!(args[1], Value::Boolean(true)), "{args:?}");
        let (name, args) = call(&lua, Signal::Presence { online: false }, "P0").expect("args");
        let args: Vec<Value> = args.into_iter().collect();
        assert_eq!(name, "presence");
        assert!(matches!(args[0], Value::Boolean(false)), "{args:?}");
        assert_eq!(args[1].to_string().expect("text"), "P0");
    }
}
