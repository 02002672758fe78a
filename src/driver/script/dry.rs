//! `msgstorm validate --frames`: what an adapter script would send for one user's login, a
//! direct message and a group message, without connecting. Each flow runs until it ends or
//! first waits for the server; what it queued until then is shown, then what it waits for.

use mlua::{Function, MultiValue, Table, ThreadStatus, Value};

use super::link::Frame;
use super::vm::{one_line, take_outbox, Vm};

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
pub fn lines(vm: &Vm, user: &str, credentials: (&str, &str), to: &str, group: &str) -> Vec<String> {
    let mut out = Vec::new();
    let u = match vm
        .entry
        .new_user
        .call::<Table>((user, 0, credentials.0, credentials.1))
    {
        Ok(u) => u,
        Err(e) => return vec![format!("the user object: {}", one_line(&e))],
    };
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
        if let (Some(open), "direct") = (&vm.entry.open, what) {
            out.push(format!("  open({dest}) first:"));
            if !flow(
                vm,
                &u,
                open,
                MultiValue::from_iter([text(vm, dest)]),
                &mut out,
            ) {
                out.push("  the message itself needs what open waits for".to_owned());
                continue;
            }
        }
        let args = (u.clone(), dest, body());
        match f.call::<Value>(args) {
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
        match request.call::<Value>((u.clone(), "call")) {
            Ok(id) => {
                frames(&u, &mut out);
                out.push(format!("  its reply is the one with id {}", show(&id)));
            }
            Err(e) => out.push(format!("  error: {}", one_line(&e))),
        }
    }
    out
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
    let yielded = thread.resume::<MultiValue>(input);
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
        Ok(frames) => out.extend(frames.iter().map(|f| format!("  sends {}", shown(f)))),
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
