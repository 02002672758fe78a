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

use std::sync::Arc;

use hyper::body::Bytes;
use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};
use prost_reflect::DescriptorPool;

use super::answers::shape_of;
use super::http::headers_of;
use super::limits::{Guard, Limits};
use super::said::lua_text;

/// The user object's methods, run before the script.
const PRELUDE: &str = r#"
local U = {}
U.__index = U
function U:send(frame, kind)
  local n = #self._out + 1
  self._out[n] = frame
  if kind == "binary" then self._bin[n] = true end
end
function U:request(method, path, body, headers, ref, answer)
  local n = #self._out + 1
  self._out[n] = { method = method, path = path, body = body, headers = headers, ref = ref,
    answer = answer }
end
-- A declaration read by msgstorm, its error placed at the script's line that made it.
local function declared(read, t)
  local ok, d = pcall(read, t)
  if not ok then error((tostring(d):gsub("^runtime error: ", "")), 3) end
  return d
end
function U:long_poll(t) return coroutine.yield("long_poll", declared(__long_poll, t)) end
function U:sends(t) return coroutine.yield("sends", declared(__sends, t)) end
function U:http(method, path, body, headers, timeout)
  return coroutine.yield("http", method, path, body, headers, timeout)
end
function U:sse(path, headers) return coroutine.yield("sse", path, headers) end
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
-- The script's `poll` with its results in one table: a call returning more values than it
-- took arguments leaves mlua no stack to read them from.
function __poll(u) return table.pack(poll(u)) end
do
  -- An error caught after the call's deadline is raised again: a script cannot catch its
  -- way past the call bound (see limits.rs).
  local pcall_, xpcall_, resume_, expired = pcall, xpcall, coroutine.resume, __expired
  local function pass(ok, ...)
    if not ok and expired() then error((...), 0) end
    return ok, ...
  end
  pcall = function(f, ...) return pass(pcall_(f, ...)) end
  xpcall = function(f, handler, ...) return pass(xpcall_(f, handler, ...)) end
  coroutine.resume = function(co, ...) return pass(resume_(co, ...)) end
  __expired = nil
end
-- What each user keeps across its connections (`u.kept`), by user index: a user always
-- runs in the same interpreter.
local kept = {}
function __user(id, ix, username, password, url)
  local mine = kept[ix]
  if mine == nil then mine = {} kept[ix] = mine end
  return setmetatable({ id = id, ix = ix, username = username, password = password,
    token = password, url = url, state = {}, kept = mine, _out = {}, _bin = {}, _id = 0 }, U)
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
    /// `why` is `"start"` (before traffic: note where each conversation stands),
    /// `"missed"` (a late or returning user logs in) or `"verify"` (the final
    /// verification before the user disconnects).
    pub fetch: Option<Function>,
    /// `close(u)`: says goodbye before the connection closes.
    pub close: Option<Function>,
    /// `request(u, name)`: sends a request of the request/response workload; returns the
    /// id its reply carries.
    pub request: Option<Function>,
    /// `poll(u)` (HTTP targets) through the prelude's `__poll`: the next long-poll request
    /// — method, path, body, headers — or nil for none now, packed in one table.
    pub poll: Option<Function>,
    /// `contacts(u, ids)`: tells the server the user's contacts, once per run at its first
    /// login (may wait).
    pub contacts: Option<Function>,
    /// `receipt(u, sender, conv, message, token)`: sends a read receipt; returns the id its
    /// acceptance carries.
    pub receipt: Option<Function>,
    /// `typing(u, conv, active, token)`: sends a typing notice.
    pub typing: Option<Function>,
    /// `presence(u, online, token)`: publishes the user's presence.
    pub presence: Option<Function>,
    /// `upgrade(u)` (WebSocket targets): the path and query of the user's upgrade request,
    /// for servers that take credentials in the URL (OpenIM's `?sendID=…&token=…`).
    pub upgrade: Option<Function>,
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
    /// Its bounds: every call into it goes through [`Guard::run`].
    pub guard: Arc<Guard>,
}

/// `[target.script] vars` as the script's global `vars`: TOML strings, numbers, booleans,
/// arrays and tables as Lua's (dates as their text).
fn vars_table(lua: &Lua, vars: &toml::Table) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for (k, v) in vars {
        t.raw_set(k.as_str(), toml_value(lua, v)?)?;
    }
    Ok(t)
}

fn toml_value(lua: &Lua, v: &toml::Value) -> mlua::Result<Value> {
    Ok(match v {
        toml::Value::String(s) => Value::String(lua.create_string(s)?),
        toml::Value::Integer(i) => Value::Integer(*i),
        toml::Value::Float(f) => Value::Number(*f),
        toml::Value::Boolean(b) => Value::Boolean(*b),
        toml::Value::Datetime(d) => Value::String(lua.create_string(d.to_string())?),
        toml::Value::Array(a) => {
            let t = lua.create_table()?;
            for (i, item) in a.iter().enumerate() {
                t.raw_set(i + 1, toml_value(lua, item)?)?;
            }
            Value::Table(t)
        }
        toml::Value::Table(table) => Value::Table(vars_table(lua, table)?),
    })
}

/// The readers of the prelude's declarations (`u:long_poll`, `u:sends`), which check them
/// where the script makes them.
fn declarations(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    globals.set(
        "__long_poll",
        lua.create_function(super::long_poll::declare)?,
    )?;
    globals.set("__sends", lua.create_function(super::sends::declare)?)
}

/// The entry points a script must define.
const REQUIRED: [&str; 2] = ["login", "receive"];

impl Vm {
    /// A sandboxed state bounded by `limits` with `source` (named `name` in messages)
    /// loaded. Errors are one line: `NAME:LINE: what`.
    pub fn load(
        name: &str,
        source: &str,
        protos: &DescriptorPool,
        (limits, vars): (Limits, &toml::Table),
    ) -> Result<Vm, String> {
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE;
        let lua = Lua::new_with(libs, LuaOptions::default()).map_err(|e| e.to_string())?;
        let guard = Guard::install(&lua, limits, name).map_err(|e| e.to_string())?;
        let globals = lua.globals();
        for unsafe_global in ["dofile", "loadfile", "require", "collectgarbage"] {
            globals
                .set(unsafe_global, Value::Nil)
                .map_err(|e| e.to_string())?;
        }
        super::codecs::install(&lua, protos).map_err(|e| e.to_string())?;
        declarations(&lua, &globals).map_err(|e| e.to_string())?;
        globals
            .set("vars", vars_table(&lua, vars).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        lua.load(PRELUDE)
            .set_name("=prelude")
            .exec()
            .map_err(|e| e.to_string())?;
        guard
            .run(|| lua.load(source).set_name(format!("={name}")).exec())
            .map_err(|e| one_line(&e))?;
        let entry = entry_points(&globals, name)?;
        Ok(Vm { lua, entry, guard })
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
        poll: match get("poll")? {
            Some(_) => get("__poll")?,
            None => None,
        },
        contacts: get("contacts")?,
        receipt: get("receipt")?,
        typing: get("typing")?,
        presence: get("presence")?,
        upgrade: get("upgrade")?,
        new_user: need(get("__user")?)?,
    })
}

/// What an entry point queued: a frame for a socket, or an HTTP request.
#[derive(Debug)]
pub enum Out {
    /// A frame (`u:send`).
    Frame(super::frame::Frame),
    /// An HTTP request (`u:request`).
    Request(super::http::Request),
}

/// What is in the outbox of `user` (a user object), which is left empty.
pub fn take_outbox(user: &Table) -> mlua::Result<Vec<Out>> {
    let out: Table = user.raw_get("_out")?;
    let n = out.raw_len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let bin: Table = user.raw_get("_bin")?;
    let mut queued = Vec::with_capacity(n);
    for i in 1..=n {
        match out.raw_get::<Value>(i)? {
            Value::Table(r) => queued.push(Out::Request(http_request(&r)?)),
            Value::String(frame) => {
                let binary = bin.raw_get::<Option<bool>>(i)?.unwrap_or(false);
                queued.push(Out::Frame(super::frame::Frame {
                    bytes: Bytes::copy_from_slice(&frame.as_bytes()),
                    text: !binary,
                    meta: None,
                }));
            }
            other => {
                return Err(mlua::Error::runtime(format!(
                    "u:send of a {}: a frame is a string",
                    other.type_name()
                )))
            }
        }
    }
    // Emptied in place: a new table per send would be one more allocation on the hot path.
    out.clear()?;
    if !bin.is_empty() {
        bin.clear()?;
    }
    Ok(queued)
}

/// An HTTP request a script queued with `u:request`: a table of `method`, `path`, `body`,
/// `headers` and `ref`.
fn http_request(t: &Table) -> mlua::Result<super::http::Request> {
    let field = |k: &str| t.raw_get::<Value>(k);
    let mut request = described([
        field("method")?,
        field("path")?,
        field("body")?,
        field("headers")?,
        field("ref")?,
    ])?;
    request.answer = shape_of(field("answer")?, |what| {
        mlua::Error::runtime(format!("u:request: `answer` {what}"))
    })?;
    Ok(request)
}

/// An HTTP request a script described (`u:request`, `u:http`, `poll`): its method, path,
/// body, headers (a table of names to values) and reference.
pub fn described(
    [method, path, body, headers, reference]: [Value; 5],
) -> mlua::Result<super::http::Request> {
    let text = |k: &str, v: Value| {
        lua_text(v).map_err(|t| {
            mlua::Error::runtime(format!("HTTP request: `{k}` must be a string, not a {t}"))
        })
    };
    let body = match body {
        Value::String(s) => Bytes::copy_from_slice(&s.as_bytes()),
        Value::Nil => Bytes::new(),
        other => {
            return Err(mlua::Error::runtime(format!(
                "HTTP request: `body` must be a string, not a {}",
                other.type_name()
            )))
        }
    };
    let pairs = match headers {
        Value::Table(h) => headers_of(&h)?,
        _ => super::http::Headers::from([]),
    };
    Ok(super::http::Request {
        method: text("method", method)?.unwrap_or_else(|| "GET".to_owned()),
        path: text("path", path)?.unwrap_or_else(|| "/".to_owned()),
        headers: pairs,
        body,
        reference: text("ref", reference)?,
        answer: None,
    })
}

/// What `refuse(reason)` raises before the reason: the server said no, not a script error.
pub const REFUSED: &str = "msgstorm:refused:";

/// The place of an error that has none.
const NO_LINE: &str = "(no line: the error came from outside the script)";

/// A Lua error as one line: the script's message with its `NAME:LINE:` and no traceback.
/// An error without a place (`error(msg, 0)`, an error object that is not a string) gets
/// the place of the innermost script frame of its traceback.
pub fn one_line(e: &mlua::Error) -> String {
    match e {
        // A function of msgstorm's that failed (`codec.json_ack { … }` with a bad shape):
        // placed at the script's line that called it.
        mlua::Error::CallbackError { cause, traceback } => {
            let line = one_line(cause);
            let caller = traceback.lines().find_map(|l| place(l.trim_start()));
            match (line.strip_prefix(NO_LINE), caller) {
                (Some(rest), Some(at)) => format!("{at}{rest}"),
                _ => line,
            }
        }
        mlua::Error::SyntaxError { message, .. } => first_line(message),
        mlua::Error::RuntimeError(message) => placed(message),
        mlua::Error::MemoryError(message) => first_line(message),
        other => first_line(&other.to_string()),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

/// The first line of a runtime error's message, with the place its traceback gives when
/// the message has none.
fn placed(message: &str) -> String {
    let first = first_line(message);
    if first.starts_with(REFUSED) || place(&first).is_some() {
        return first;
    }
    let at = message
        .lines()
        .skip_while(|l| !l.starts_with("stack traceback:"))
        .find_map(|l| place(l.trim_start()))
        .unwrap_or(NO_LINE);
    let object = ["table: ", "userdata: ", "function: ", "thread: "]
        .iter()
        .find(|p| first.starts_with(**p))
        .map(|p| p.trim_end_matches(": "))
        .or(["nil", "true", "false"].into_iter().find(|w| first == *w));
    match object {
        Some(kind) => format!(
            "{at}: error({first}): the error object is a {kind}, not a message (raise \
             error(\"why\") or give it a __tostring)"
        ),
        None => format!("{at}: {first}"),
    }
}

/// The `NAME:LINE` a line of Lua's starts with (`adapter.lua:12: …`), if it does; not a
/// frame of C code (`[C]: in …`).
fn place(line: &str) -> Option<&str> {
    if line.starts_with('[') {
        return None;
    }
    line.match_indices(':').find_map(|(i, _)| {
        let rest = &line[i + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        (i > 0 && digits > 0 && rest[digits..].starts_with(':')).then(|| &line[..i + 1 + digits])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderName, HeaderValue};

    impl Vm {
        fn load_plain(name: &str, source: &str) -> Result<Vm, String> {
            Vm::load(
                name,
                source,
                &DescriptorPool::new(),
                (Limits::default(), &toml::Table::new()),
            )
        }
    }

    #[test]
    fn a_request_header_http_refuses_names_the_header() {
        let lua = Lua::new();
        let request = |name: &str, value: &str| {
            let headers = lua.create_table().expect("table");
            headers.raw_set(name, value).expect("set");
            let path = Value::String(lua.create_string("/send/1").expect("path"));
            described([
                Value::Nil,
                path,
                Value::Nil,
                Value::Table(headers),
                Value::Nil,
            ])
        };
        let good = request("X-Token", "abc").expect("a good header");
        assert_eq!(
            *good.headers,
            [(
                HeaderName::from_static("x-token"),
                HeaderValue::from_static("abc")
            )]
        );
        assert_eq!(
            (good.method.as_str(), good.path.as_str()),
            ("GET", "/send/1")
        );
        let err = request("Bad Name", "x").unwrap_err().to_string();
        assert!(err.contains("header `Bad Name`"), "{err}");
        let err = request("X-Token", "a\nb").unwrap_err().to_string();
        assert!(err.contains("header `X-Token`"), "{err}");
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
    fn a_bad_declaration_is_a_one_line_error_at_the_scripts_line() {
        let vm = Vm::load_plain(
            "a.lua",
            "local items = codec.json_items('events', {})\n\
             function login(u)\n  u:long_poll { path = '/s', cursor = 'next', items = items, \
             timeout = 3 }\nend\n\
             function join(u)\n  u:sends { direct = { path = {} } }\nend\n\
             function receive() end",
        )
        .expect("loads");
        let u: Table = vm
            .entry
            .new_user
            .call(("u1", 1, "u1", "", "http://x"))
            .expect("a user");
        for (f, want) in [
            (
                &vm.entry.login,
                "a.lua:3: u:long_poll: `timeout` is none of method, path",
            ),
            (
                vm.entry.join.as_ref().expect("join"),
                "a.lua:6: u:sends: direct.`path` must be a string, not a table",
            ),
        ] {
            let thread = vm.lua.create_thread(f.clone()).expect("a thread");
            let e = thread.resume::<Value>(u.clone()).expect_err("refused");
            let line = one_line(&e);
            assert!(line.starts_with(want), "{line}");
        }
        let err = Vm::load_plain(
            "a.lua",
            "local x\nlocal ok = codec.json_ack { push = 'body' }",
        )
        .unwrap_err();
        assert!(
            err.starts_with("a.lua:2: json_ack: shape key `push` is none of conv, seq, from"),
            "{err}"
        );
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
