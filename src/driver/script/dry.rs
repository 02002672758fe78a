//! `msgstorm validate --frames`: what an adapter script would send for one user's login, a
//! direct message, a group message and the signals it defines, without connecting. Each
//! flow runs until it ends or first waits for the server; what it queued until then is
//! shown, then what it waits for.

use mlua::{Function, MultiValue, Table, ThreadStatus, Value};

use crate::driver::{Dest, Signal};
use crate::vocab::SignalKind;

use super::frame::Frame;
use super::session::signals::call;
use super::vm::{one_line, take_outbox, Out, Vm};

/// The body a dry run sends: a real envelope of 100 bytes, as a run would send it.
fn body() -> String {
    let env = crate::envelope::Envelope {
        run: 1,
        stream: Default::default(),
        seq: 0,
        due_us: 0,
    };
    let mut body = String::new();
    crate::envelope::encode(&env, 100, &mut body);
    body
}

/// The lines of a dry run of `vm`'s script as `user` (index 0), sending to `to` and to
/// `group`.
pub fn lines(
    vm: &Vm,
    user: &str,
    (username, password, url): (&str, &str, &str),
    to: &str,
    group: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let made = vm.guard.run(|| {
        vm.entry
            .new_user
            .call::<Table>((user, 0, username, password, url))
    });
    let u = match made {
        Ok(u) => u,
        Err(e) => return vec![format!("the user object: {}", one_line(&e))],
    };
    if let Some(upgrade) = &vm.entry.upgrade {
        match vm.guard.run(|| upgrade.call::<String>(u.clone())) {
            Ok(path) => out.push(format!("upgrade of {user}: GET {path}")),
            Err(e) => out.push(format!("upgrade of {user}: {}", one_line(&e))),
        }
    }
    out.push(format!("login of {user}:"));
    flow(vm, &u, &vm.entry.login, MultiValue::new(), &mut out);
    for (what, f, dest) in [
        ("direct", &vm.entry.direct, to),
        ("group", &vm.entry.group, group),
    ] {
        out.push(format!("{what} message from {user} to {dest}:"));
        let Some(f) = f else {
            out.push(format!("  (the script defines no `{what}`)"));
            continue;
        };
        let before = match what {
            "direct" => vm.entry.open.as_ref().map(|f| ("open", f)),
            _ => vm.entry.join.as_ref().map(|f| ("join", f)),
        };
        if let Some((name, first)) = before {
            out.push(format!("  {name}({dest}) first:"));
            let args = MultiValue::from_iter([text(vm, dest)]);
            if !flow(vm, &u, first, args, &mut out) {
                // A peer's conversation must be open before a message to it; a group's
                // message may go before the join's answer (it is shown as it would go).
                if name == "open" {
                    out.push("  the message itself needs what open waits for".to_owned());
                    continue;
                }
                out.push("  the message as the script sends it before join's answer:".to_owned());
            }
        }
        let args = (u.clone(), dest, body());
        match vm.guard.run(|| f.call::<Value>(args)) {
            Ok(id) => {
                frames(&u, &mut out);
                out.push(format!(
                    "  its acceptance is the reply with id {}",
                    show(&id)
                ));
            }
            Err(e) => out.push(format!("  error: {}", one_line(&e))),
        }
    }
    if let Some(request) = &vm.entry.request {
        out.push(format!("request `call` from {user}:"));
        match vm.guard.run(|| request.call::<Value>((u.clone(), "call"))) {
            Ok(id) => {
                frames(&u, &mut out);
                out.push(format!("  its reply is the one with id {}", show(&id)));
            }
            Err(e) => out.push(format!("  error: {}", one_line(&e))),
        }
    }
    signal_lines(vm, &u, to, &mut out);
    out
}

/// What the signal entry points the script defines send: `contacts` with `to` as the one
/// contact, a read receipt to `to` for a direct message, a typing notice to `to`, presence.
fn signal_lines(vm: &Vm, u: &Table, to: &str, out: &mut Vec<String>) {
    if let Some(contacts) = &vm.entry.contacts {
        out.push(format!("contacts ({to}):"));
        let list = vm
            .lua
            .create_sequence_from([to])
            .map_or(Value::Nil, Value::Table);
        flow(vm, u, contacts, MultiValue::from_iter([list]), out);
    }
    let message = body();
    let mut token = String::new();
    let env = crate::envelope::Envelope {
        run: 1,
        stream: Default::default(),
        seq: 0,
        due_us: 0,
    };
    let signals = [
        (
            &vm.entry.receipt,
            Signal::Read {
                sender: to,
                conv: Dest::User(to),
                message: &message,
            },
            SignalKind::Read,
        ),
        (
            &vm.entry.typing,
            Signal::Typing {
                conv: Dest::User(to),
                active: true,
            },
            SignalKind::Typing,
        ),
        (
            &vm.entry.presence,
            Signal::Presence { online: true },
            SignalKind::Presence,
        ),
    ];
    for (f, signal, kind) in signals {
        let Some(f) = f else { continue };
        token.clear();
        crate::envelope::token::encode(kind, &env, &mut token);
        let (name, args) = match call(&vm.lua, signal, &token) {
            Ok(called) => called,
            Err(e) => {
                out.push(format!("  error: {}", one_line(&e)));
                continue;
            }
        };
        out.push(format!("{name} with token {token}:"));
        let mut all = MultiValue::from_iter([Value::Table(u.clone())]);
        all.extend(args);
        match vm.guard.run(|| f.call::<Value>(all)) {
            Ok(id) => {
                frames(u, out);
                if name == "receipt" {
                    out.push(format!(
                        "  its acceptance is the reply with id {}",
                        show(&id)
                    ));
                }
            }
            Err(e) => out.push(format!("  error: {}", one_line(&e))),
        }
    }
}

/// A Lua string argument (nil when Lua cannot make one).
fn text(vm: &Vm, s: &str) -> Value {
    vm.lua.create_string(s).map_or(Value::Nil, Value::String)
}

/// Runs `f(u, args…)` as a coroutine up to its end or its first operation; returns
/// whether it ended without waiting.
fn flow(vm: &Vm, u: &Table, f: &Function, args: MultiValue, out: &mut Vec<String>) -> bool {
    let thread = match vm.lua.create_thread(f.clone()) {
        Ok(t) => t,
        Err(e) => {
            out.push(format!("  error: {}", one_line(&e)));
            return false;
        }
    };
    let mut input = MultiValue::new();
    input.push_back(Value::Table(u.clone()));
    input.extend(args);
    let yielded = vm.guard.run(|| thread.resume::<MultiValue>(input));
    frames(u, out);
    match yielded {
        Err(e) => {
            out.push(format!("  error: {}", one_line(&e)));
            false
        }
        Ok(_) if thread.status() != ThreadStatus::Resumable => {
            out.push("  done".to_owned());
            true
        }
        Ok(op) => {
            let words: Vec<String> = op.iter().map(show).collect();
            out.push(format!(
                "  then waits ({}): the rest needs the server",
                words.join(" ")
            ));
            false
        }
    }
}

/// Shows the frames `u` queued.
fn frames(u: &Table, out: &mut Vec<String>) {
    match take_outbox(u) {
        Ok(queued) => out.extend(queued.iter().map(|q| match q {
            Out::Frame(f) => format!("  sends {}", shown(f)),
            Out::Request(r) => format!(
                "  requests {} {} {}",
                r.method,
                r.path,
                String::from_utf8_lossy(&r.body)
            ),
        })),
        Err(e) => out.push(format!("  error: {}", one_line(&e))),
    }
}

/// A frame as text, or as the hex of its first bytes when binary.
fn shown(f: &Frame) -> String {
    let clip = 300;
    if f.text {
        let text = String::from_utf8_lossy(&f.bytes);
        let cut: String = text.chars().take(clip).collect();
        let more = if text.chars().count() > clip {
            "…"
        } else {
            ""
        };
        format!("text {cut}{more}")
    } else {
        let n = f.bytes.len();
        let head = hex::encode(&f.bytes[..n.min(64)]);
        let more = if n > 64 { "…" } else { "" };
        format!("binary ({n} bytes) {head}{more}")
    }
}

/// A Lua value for a line of the dry run.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{:?}", s.to_string_lossy()),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Nil => "nil".to_owned(),
        other => other.type_name().to_owned(),
    }
}
