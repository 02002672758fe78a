//! `msgstorm validate --frames`: what an adapter script would send for one user's login, a
//! direct message, a group message and the signals it defines, without connecting. Each
//! flow runs until it ends or first waits for the server; what it queued until then is
//! shown, then what it waits for.

use mlua::{Function, MultiValue, Table, ThreadStatus, Value};

use crate::driver::{Dest, Signal};
use crate::vocab::SignalKind;

use super::frame::Frame;
use super::http::Request;
use super::sends::Sends;
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
    let mut sends = None;
    flow(
        vm,
        &u,
        &vm.entry.login,
        MultiValue::new(),
        (&mut out, &mut sends),
    );
    for (what, f, dest) in [
        ("direct", &vm.entry.direct, to),
        ("group", &vm.entry.group, group),
    ] {
        out.push(format!("{what} message from {user} to {dest}:"));
        if templated(&u, sends.as_ref(), (what, dest), &mut out) {
            continue;
        }
        let Some(f) = f else {
            out.push(format!(
                "  (the script defines no `{what}`; a `u:sends` made after a flow's first \
                 wait is not shown)"
            ));
            continue;
        };
        let before = match what {
            "direct" => vm.entry.open.as_ref().map(|f| ("open", f)),
            _ => vm.entry.join.as_ref().map(|f| ("join", f)),
        };
        if let Some((name, first)) = before {
            out.push(format!("  {name}({dest}) first:"));
            let args = MultiValue::from_iter([text(vm, dest)]);
            if !flow(vm, &u, first, args, (&mut out, &mut sends)) {
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
    request_lines(vm, &u, user, &mut out);
    signal_lines(vm, &u, to, &mut out);
    out
}

/// What `request` sends for a request `call` of `user`, when the script defines it.
fn request_lines(vm: &Vm, u: &Table, user: &str, out: &mut Vec<String>) {
    let Some(request) = &vm.entry.request else {
        return;
    };
    out.push(format!("request `call` from {user}:"));
    match vm.guard.run(|| request.call::<Value>((u.clone(), "call"))) {
        Ok(id) => {
            frames(u, out);
            out.push(format!("  its reply is the one with id {}", show(&id)));
        }
        Err(e) => out.push(format!("  error: {}", one_line(&e))),
    }
}

/// The request of a message to `dest` (`what`: `"direct"` or `"group"`) when `sends`
/// declared its template; returns whether it did.
fn templated(
    u: &Table,
    sends: Option<&Sends>,
    (what, dest): (&str, &str),
    out: &mut Vec<String>,
) -> bool {
    let template = sends.and_then(|s| match what {
        "direct" => s.direct.clone(),
        _ => s.group.clone(),
    });
    let Some(template) = template else {
        return false;
    };
    // The session's next id, as a run would take it.
    let id = u.raw_get::<i64>("_id").unwrap_or(0) + 1;
    let _ = u.raw_set("_id", id);
    let id = id.to_string();
    out.push(requested(&template.request(&id, dest, &body())));
    out.push(format!(
        "  its acceptance is the reply with id {id} (by u:sends)"
    ));
    true
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
        flow(
            vm,
            u,
            contacts,
            MultiValue::from_iter([list]),
            (out, &mut None),
        );
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
/// What `u:sends` declared on the way goes to `sends`.
fn flow(
    vm: &Vm,
    u: &Table,
    f: &Function,
    args: MultiValue,
    (out, sends): (&mut Vec<String>, &mut Option<Sends>),
) -> bool {
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
    let mut yielded = vm.guard.run(|| thread.resume::<MultiValue>(input));
    // A declaration (`u:long_poll`, `u:sends`) needs no server: shown, and the flow goes on.
    while let Some(what) = yielded.as_ref().ok().and_then(declaration) {
        frames(u, out);
        out.push(format!("  declares u:{what}"));
        if let Some(Value::UserData(ud)) = yielded.as_ref().ok().and_then(|op| op.get(1)) {
            if let Ok(declared) = ud.borrow::<Sends>() {
                *sends = Some(declared.clone());
            }
        }
        yielded = vm.guard.run(|| thread.resume::<MultiValue>(()));
    }
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

/// The declaration a flow yielded, if it yielded one.
fn declaration(op: &MultiValue) -> Option<&'static str> {
    match op.front() {
        Some(Value::String(s)) if s.as_bytes().as_ref() == b"long_poll" => Some("long_poll"),
        Some(Value::String(s)) if s.as_bytes().as_ref() == b"sends" => Some("sends"),
        _ => None,
    }
}

/// Shows the frames `u` queued.
fn frames(u: &Table, out: &mut Vec<String>) {
    match take_outbox(u) {
        Ok(queued) => out.extend(queued.iter().map(|q| match q {
            Out::Frame(f) => format!("  sends {}", shown(f)),
            Out::Request(r) => requested(r),
        })),
        Err(e) => out.push(format!("  error: {}", one_line(&e))),
    }
}

/// A request's line.
fn requested(r: &Request) -> String {
    format!(
        "  requests {} {} {}",
        r.method,
        r.path,
        String::from_utf8_lossy(&r.body)
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::script::limits::Limits;

    #[test]
    fn a_dry_run_shows_declarations_and_the_sends_a_template_makes() {
        let source = r#"
local items = codec.json_items("events", { push = "body" })
function login(u)
  u:sends { direct = { method = "PUT", path = "/send/{id}", json = { to = "{to}", body = "{body}" } } }
  u:long_poll { path = "/sync?since=", cursor = "next", items = items }
end
function receive() end"#;
        let vm = Vm::load(
            "a.lua",
            source,
            &prost_reflect::DescriptorPool::new(),
            (Limits::default(), &toml::Table::new()),
        )
        .expect("loads");
        let lines = lines(&vm, "u0", ("u0", "", "http://x"), "u1", "g1");
        let shown = lines.join("\n");
        for want in [
            "login of u0:\n  declares u:sends\n  declares u:long_poll\n  done",
            "direct message from u0 to u1:\n  requests PUT /send/1 {\"body\":\"ms1:",
            "\",\"to\":\"u1\"}\n  its acceptance is the reply with id 1 (by u:sends)",
            "group message from u0 to g1:\n  (the script defines no `group`",
        ] {
            assert!(shown.contains(want), "{want}\n---\n{shown}");
        }
    }
}
