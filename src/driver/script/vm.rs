//! The Lua interpreters that run an adapter script: a few per run (one per worker thread of
//! the generator), each holding the script once; a user is a small table in one of them.
//!
//! A state is sandboxed: only Lua's `string`, `table`, `math`, `utf8` and `coroutine`
//! libraries and the base functions that touch nothing outside (no `io`, `os`, `package`,
//! `debug`, `dofile`, `loadfile`, `require`), plus what msgstorm gives — the `codec` table
//! ([`codecs`](super::codecs)) and the user methods of the prelude below.
//!
//! The prelude defines the user object `u` every entry point gets. Frames a script sends
//! (`u:send`) go into the user's outbox, which the session writes once the entry point
//! returns or yields. Everything that needs the session — waiting for a reply, the
//! per-conversation positions, handing over a fetched message — is a `coroutine.yield`
//! of an operation that the session carries out and resumes with its answer; so flows
//! read as straight code, the interpreter is never locked while a user waits, and the
//! entry points on the hot path (`direct`, `group`, `receive`, `heartbeat`) must not
//! wait.

use mlua::{Function, Lua, LuaOptions, StdLib, String as LuaString, Table, Value};
use prost_reflect::DescriptorPool;

/// The user object's methods, run before the script.
const PRELUDE: &str = r#"
local U = {}
U.__index = U
function U:send(frame, kind)
  local n = #self._out + 1
  self._out[n] = frame
  if kind == "binary" then self._bin[n] = true end
end
function U:next_id() self._id = self._id + 1 return self._id end
function U:call(frame, id, timeout) self:send(frame) return coroutine.yield("wait", id, timeout) end
function U:call_binary(frame, id, timeout) self:send(frame, "binary") return coroutine.yield("wait", id, timeout) end
function U:await(id, timeout) return coroutine.yield("wait", id, timeout) end
function U:upto(conv) return coroutine.yield("upto", conv) end
function U:cover(conv, seq) return coroutine.yield("cover", conv, seq) end
function U:deliver(body, conv, seq, from) return coroutine.yield("deliver", body, conv, seq, from) end
function U:publish(key, value) return coroutine.yield("publish", key, value) end
function U:lookup(key, timeout) return coroutine.yield("lookup", key, timeout) end
function U:claim(key, value) return coroutine.yield("claim", key, value) end
function U:sleep(seconds) return coroutine.yield("sleep", seconds) end
function refuse(reason) error("msgstorm:refused:" .. tostring(reason), 0) end
function __user(id, ix, username, password)
  return setmetatable({ id = id, ix = ix, username = username, password = password,
    token = password, state = {}, _out = {}, _bin = {}, _id = 0 }, U)
end
"#;

/// The entry points a script defines (globals of those names).
#[derive(Debug)]
pub struct Entry {
    /// `login(u)`: logs the user in; `refuse(reason)` when the server says no.
    pub login: Function,
    /// `receive(u, frame, kind)`: what an incoming frame is (a table, or nil to ignore).
    pub receive: Function,
    /// `direct(u, to, body)`: sends a direct message; returns the id its acceptance
    /// carries.
    pub direct: Option<Function>,
    /// `group(u, group, body)`: sends to a group; returns the id its acceptance carries.
    pub group: Option<Function>,
    /// `open(u, to)`: opens a one-to-one conversation before the first direct message to
    /// `to` on a connection (may wait).
    pub open: Option<Function>,
    /// `join(u, group)`: joins (or creates) a group before traffic.
    pub join: Option<Function>,
    /// `heartbeat(u)`: sends a heartbeat.
    pub heartbeat: Option<Function>,
    /// `fetch(u, why)`: fetches what the user missed (`u:deliver` for each message);
    /// `why` is `"start"` (before traffic: note where each conversation stands) or
    /// `"missed"` (a late or returning user).
    pub fetch: Option<Function>,
    /// `close(u)`: says goodbye before the connection closes.
    pub close: Option<Function>,
    /// `request(u, name)`: sends a request of the request/response workload; returns the
    /// id its reply carries.
    pub request: Option<Function>,
    /// The prelude's user constructor.
    pub new_user: Function,
}

/// One interpreter with the script loaded.
#[derive(Debug)]
pub struct Vm {
    /// The state.
    pub lua: Lua,
    /// The script's entry points.
    pub entry: Entry,
}

/// The entry points a script must define.
const REQUIRED: [&str; 2] = ["login", "receive"];

impl Vm {
    /// A sandboxed state with `source` (named `name` in messages) loaded. Errors are one
    /// line: `NAME:LINE: what`.
    pub fn load(name: &str, source: &str, protos: &DescriptorPool) -> Result<Vm, String> {
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE;
        let lua = Lua::new_with(libs, LuaOptions::default()).map_err(|e| e.to_string())?;
        let globals = lua.globals();
        for unsafe_global in ["dofile", "loadfile", "require", "collectgarbage"] {
            globals
                .set(unsafe_global, Value::Nil)
                .map_err(|e| e.to_string())?;
        }
        super::codecs::install(&lua, protos).map_err(|e| e.to_string())?;
        lua.load(PRELUDE)
            .set_name("=prelude")
            .exec()
            .map_err(|e| e.to_string())?;
        lua.load(source)
            .set_name(format!("={name}"))
            .exec()
            .map_err(|e| one_line(&e))?;
        let entry = entry_points(&globals, name)?;
        Ok(Vm { lua, entry })
    }
}

/// The script's entry points, the required ones checked.
fn entry_points(globals: &Table, name: &str) -> Result<Entry, String> {
    let get = |key: &str| -> Result<Option<Function>, String> {
        match globals.get::<Value>(key).map_err(|e| e.to_string())? {
            Value::Nil => Ok(None),
            Value::Function(f) => Ok(Some(f)),
            other => Err(format!(
                "{name}: `{key}` must be a function, not a {}",
                other.type_name()
            )),
        }
    };
    for key in REQUIRED {
        if get(key)?.is_none() {
            return Err(format!(
                "{name}: the script defines no function `{key}` (an adapter needs {})",
                REQUIRED.join(" and ")
            ));
        }
    }
    let need = |f: Option<Function>| f.ok_or_else(|| "checked above".to_owned());
    Ok(Entry {
        login: need(get("login")?)?,
        receive: need(get("receive")?)?,
        direct: get("direct")?,
        group: get("group")?,
        open: get("open")?,
        join: get("join")?,
        heartbeat: get("heartbeat")?,
        fetch: get("fetch")?,
        close: get("close")?,
        request: get("request")?,
        new_user: need(get("__user")?)?,
    })
}

/// The frames in the outbox of `user` (a user object), which is left empty.
pub fn take_outbox(user: &Table) -> mlua::Result<Vec<super::link::Frame>> {
    let out: Table = user.raw_get("_out")?;
    let n = out.raw_len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let bin: Table = user.raw_get("_bin")?;
    let mut frames = Vec::with_capacity(n);
    for i in 1..=n {
        let frame: LuaString = out.raw_get(i)?;
        let binary = bin.raw_get::<Option<bool>>(i)?.unwrap_or(false);
        frames.push(super::link::Frame {
            bytes: frame.as_bytes().to_vec(),
            text: !binary,
        });
    }
    // Emptied in place: a new table per send would be one more allocation on the hot path.
    out.clear()?;
    if !bin.is_empty() {
        bin.clear()?;
    }
    Ok(frames)
}

/// What `refuse(reason)` raises before the reason: the server said no, not a script error.
pub const REFUSED: &str = "msgstorm:refused:";

/// A Lua error as one line: the script's message with its `NAME:LINE:` and no traceback.
pub fn one_line(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => one_line(cause),
        mlua::Error::SyntaxError { message, .. } => first_line(message),
        mlua::Error::RuntimeError(message) => first_line(message),
        other => first_line(&other.to_string()),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Vm {
        fn load_plain(name: &str, source: &str) -> Result<Vm, String> {
            Vm::load(name, source, &DescriptorPool::new())
        }
    }

    #[test]
    fn syntax_errors_and_missing_functions_name_the_line() {
        let err = Vm::load_plain("a.lua", "function login(u)\n  local x = = 1\nend").unwrap_err();
        assert!(err.starts_with("a.lua:2:"), "{err}");
        let err = Vm::load_plain("a.lua", "function login(u) end").unwrap_err();
        assert!(err.contains("no function `receive`"), "{err}");
        let err = Vm::load_plain("a.lua", "login = 1 function receive() end").unwrap_err();
        assert!(err.contains("`login` must be a function"), "{err}");
        let err = Vm::load_plain("a.lua", "local x = nil\nx.y = 1").unwrap_err();
        assert!(err.starts_with("a.lua:2:"), "{err}");
    }

    #[test]
    fn the_sandbox_has_no_files_os_or_modules() {
        let vm = Vm::load_plain(
            "s.lua",
            "function login() end function receive() end\n\
             probe = { io, os, package, debug, dofile, loadfile, require }",
        )
        .expect("loads");
        let probe: Table = vm.lua.globals().get("probe").expect("probe");
        assert_eq!(
            probe.raw_len(),
            0,
            "nothing outside the sandbox is reachable"
        );
        let err = Vm::load_plain("s.lua", "io.open('/etc/passwd')").unwrap_err();
        assert!(err.contains("s.lua:1:"), "{err}");
    }
}
