//! What an adapter script may take, so that a bug in it cannot take the run down: each call
//! into the script (an entry point, or one resumption of a flow between two waits) runs for
//! at most `[target.script] call_limit` of interpreter time, and each interpreter holds at
//! most `memory_limit` bytes.
//!
//! The time bound is Lua's own count hook ([`mlua::Lua::set_global_hook`], every
//! [`HOOK_EVERY`] instructions, inherited by the script's own coroutines): past the call's
//! deadline it raises a Lua error naming the script's line. A script that catches errors
//! (`pcall`, `xpcall`, `coroutine.resume`) cannot swallow it: the prelude re-raises any
//! error caught after the deadline. The memory bound is the interpreter's allocator
//! ([`mlua::Lua::set_memory_limit`]): an allocation past it fails with Lua's memory error,
//! after an emergency collection, so garbage alone never trips it.
//!
//! The bound is set while the script runs (each call through [`Guard::run`]) and lifted
//! in between: with a bound set, mlua guards every operation Rust makes on the
//! interpreter (a string, a table, a field) with a protected call of its own, the largest
//! part of handing a frame to `receive` and reading its answer back. What Rust builds
//! between calls is a frame or an answer of a bounded size; the next call runs bounded
//! again. Codecs that build a value inside a call lift the bound while they build it and
//! check it once afterwards ([`lifted`]).
//!
//! An interpreter serves many users from several worker threads, one call at a time; the
//! [`Guard`] takes that turn itself so that a call's deadline is armed only once it runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{HookTriggers, Lua, VmState};

use crate::driver::kit::options::Table;
use crate::driver::OptionError;

/// The default bound of one call: far above what mapping a frame takes (microseconds), far
/// below what stalls a worker thread noticeably.
pub const CALL_LIMIT: Duration = Duration::from_millis(100);

/// The default memory of one interpreter: room for the state of tens of thousands of users.
pub const MEMORY_LIMIT: usize = 256 << 20;

/// How many Lua instructions run between two looks at the clock (about 10 µs of Lua).
const HOOK_EVERY: u32 = 1000;

/// The bounds of a run's adapter script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest one call into the script may run.
    pub call: Duration,
    /// The most memory one interpreter may hold, bytes.
    pub memory: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call: CALL_LIMIT,
            memory: MEMORY_LIMIT,
        }
    }
}

impl Limits {
    /// `call_limit` and `memory_limit` of `[target.script]`, or their defaults.
    pub(super) fn of(t: &Table<'_>) -> Result<Limits, OptionError> {
        let call = match t.duration("call_limit")? {
            Some(d) if d.is_zero() => {
                return Err(t.bad("call_limit", "must be more than 0 (e.g. \"100ms\")"))
            }
            Some(d) => d,
            None => CALL_LIMIT,
        };
        let memory = match t.str("memory_limit")? {
            Some(s) => bytes(s).map_err(|msg| t.bad("memory_limit", msg))?,
            None => MEMORY_LIMIT,
        };
        Ok(Limits { call, memory })
    }
}

/// `"256MiB"`, `"1GiB"`, `"512KiB"`: a memory size of at least 1 MiB.
fn bytes(text: &str) -> Result<usize, String> {
    let bad = || format!("`{text}` is not a memory size: use e.g. \"256MiB\" or \"1GiB\"");
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: usize = number.parse().map_err(|_| bad())?;
    let unit = match unit.trim() {
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(bad()),
    };
    match n.checked_mul(unit) {
        Some(b) if b >= 1 << 20 => Ok(b),
        Some(_) => Err(format!(
            "`{text}` is too small: an interpreter needs at least 1MiB"
        )),
        None => Err(bad()),
    }
}

/// What the hook raises past a call's deadline, after the script's `FILE:LINE: `.
pub const TOOK_TOO_LONG: &str = "took longer than";

/// One interpreter's turn-taking and bounds: one call at a time, each with a deadline.
#[derive(Debug)]
pub struct Guard {
    /// Held while a call runs: its deadline belongs to it alone.
    turn: Mutex<()>,
    /// The running call's deadline in nanoseconds from `epoch`; 0 when none runs.
    deadline: AtomicU64,
    /// Where deadlines count from.
    epoch: Instant,
    /// The bounds.
    limits: Limits,
    /// Where the script last ran while its interpreter was past half its memory
    /// (`FILE:LINE`), to say where a memory error came from.
    near: Mutex<Option<String>>,
    /// The script's name in messages.
    file: String,
    /// The interpreter, to set its memory bound for each call.
    lua: Interpreter,
}

/// A guard's handle to its interpreter (weak: the interpreter holds the guard in its hook).
struct Interpreter(mlua::WeakLua);

impl std::fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interpreter")
    }
}

impl Guard {
    /// Bounds `lua` by `limits`: its memory from now on, and the time of each call run
    /// through [`Guard::run`].
    pub fn install(lua: &Lua, limits: Limits, file: &str) -> mlua::Result<Arc<Guard>> {
        let guard = Arc::new(Guard {
            turn: Mutex::new(()),
            deadline: AtomicU64::new(0),
            epoch: Instant::now(),
            limits,
            near: Mutex::new(None),
            file: file.to_owned(),
            lua: Interpreter(lua.weak()),
        });
        let hook = Arc::clone(&guard);
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |lua, debug| {
                let place = || {
                    let src = debug.source().short_src.unwrap_or_default().into_owned();
                    let line = debug.current_line().unwrap_or_default();
                    format!("{src}:{line}")
                };
                if hook.expired() {
                    return Err(mlua::Error::runtime(format!(
                        "{}: {TOOK_TOO_LONG} {} (`[target.script] call_limit`)",
                        place(),
                        humantime::format_duration(hook.limits.call)
                    )));
                }
                if lua.used_memory() > hook.limits.memory / 2 {
                    *lock(&hook.near) = Some(place());
                }
                Ok(VmState::Continue)
            },
        )?;
        let expired = Arc::clone(&guard);
        lua.globals().set(
            "__expired",
            lua.create_function(move |_, ()| Ok(expired.expired()))?,
        )?;
        Ok(guard)
    }

    /// Runs `call` (one call into the interpreter) in its turn, within the call bound. A
    /// memory error comes back naming the bound and the place.
    pub fn run<T>(&self, call: impl FnOnce() -> mlua::Result<T>) -> mlua::Result<T> {
        let _turn = lock(&self.turn);
        *lock(&self.near) = None;
        let lua = self.lua.0.try_upgrade();
        if let Some(lua) = &lua {
            lua.set_memory_limit(self.limits.memory)?;
        }
        let deadline = self.epoch.elapsed() + self.limits.call;
        let nanos = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
        self.deadline.store(nanos, Ordering::Relaxed);
        let done = call();
        self.deadline.store(0, Ordering::Relaxed);
        let lifted = lua.as_ref().map(|lua| lua.set_memory_limit(0));
        lifted.transpose()?;
        done.map_err(|e| match memory_error(&e) {
            true => mlua::Error::MemoryError(self.out_of_memory()),
            false => e,
        })
    }

    /// Whether the running call is past its deadline.
    fn expired(&self) -> bool {
        let deadline = self.deadline.load(Ordering::Relaxed);
        deadline != 0 && self.epoch.elapsed().as_nanos() > u128::from(deadline)
    }

    /// A memory error of a call, as one line naming the bound and, when known, where the
    /// script was running as its memory grew (else the script's file).
    fn out_of_memory(&self) -> String {
        let place = lock(&self.near).take().unwrap_or_else(|| self.file.clone());
        format!(
            "{place}: out of memory: the script's interpreter reached its limit of {} MiB \
             (`[target.script] memory_limit`)",
            self.limits.memory >> 20
        )
    }
}

/// Runs `build` (Rust making a value in `lua` inside a call, of a size that follows its
/// input's) with the memory bound lifted, then checks the bound once, after a collection
/// as the allocator would make: Lua's memory error when the interpreter is past it.
pub fn lifted<T>(lua: &Lua, build: impl FnOnce() -> mlua::Result<T>) -> mlua::Result<T> {
    let limit = lua.set_memory_limit(0)?;
    let built = build();
    lua.set_memory_limit(limit)?;
    if limit != 0 && lua.used_memory() > limit {
        lua.gc_collect()?;
        if lua.used_memory() > limit {
            return Err(mlua::Error::MemoryError("not enough memory".into()));
        }
    }
    built
}

/// Whether `e` is (or was caused by) Lua's memory error.
fn memory_error(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => memory_error(cause),
        _ => false,
    }
}

/// `m` locked; a panic elsewhere while it was held leaves nothing half-done here.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_take_binary_units_and_a_floor() {
        assert_eq!(bytes("256MiB"), Ok(256 << 20));
        assert_eq!(bytes("1GiB"), Ok(1 << 30));
        assert_eq!(bytes("2048KiB"), Ok(2 << 20));
        assert!(bytes("512KiB").unwrap_err().contains("too small"));
        assert!(bytes("256MB").unwrap_err().contains("not a memory size"));
        assert!(bytes("lots").unwrap_err().contains("not a memory size"));
    }
}

#[cfg(test)]
mod runaway {
    use std::time::{Duration, Instant};

    use mlua::{Function, Value};
    use prost_reflect::DescriptorPool;

    use super::Limits;
    use crate::driver::script::vm::{one_line, Vm};

    const LIMITS: Limits = Limits {
        call: Duration::from_millis(50),
        memory: 32 << 20,
    };

    /// `body` as the script's `receive`, called once through the guard: the one-line
    /// error it ends with, and how long it took.
    fn receive_fails(body: &str) -> (String, Duration) {
        let source = format!("function login(u) end\nfunction receive(u)\n{body}\nend\n");
        let vars = toml::Table::new();
        let vm =
            Vm::load("a.lua", &source, &DescriptorPool::new(), (LIMITS, &vars)).expect("loads");
        let f: Function = vm.entry.receive.clone();
        let started = Instant::now();
        let got = vm.guard.run(|| f.call::<Value>(()));
        let took = started.elapsed();
        let err = got.expect_err("the call fails");
        (one_line(&err), took)
    }

    #[test]
    fn an_endless_loop_is_stopped_at_the_bound_naming_its_line() {
        let (err, took) = receive_fails("  local n = 0\n  while true do n = n + 1 end");
        assert!(err.starts_with("a.lua:4: took longer than 50ms"), "{err}");
        assert!(took < Duration::from_millis(500), "stopped after {took:?}");
    }

    #[test]
    fn pcall_xpcall_and_resume_cannot_swallow_the_bound() {
        for body in [
            "  while true do pcall(function() while true do end end) end",
            "  while true do xpcall(function() while true do end end, function(e) return e end) end",
            "  while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        ] {
            let (err, took) = receive_fails(body);
            assert!(err.contains("took longer than 50ms"), "{body}: {err}");
            assert!(took < Duration::from_millis(500), "{body}: {took:?}");
        }
    }

    #[test]
    fn a_coroutine_that_never_yields_back_is_stopped() {
        let (err, _) =
            receive_fails("  local co = coroutine.wrap(function() while true do end end)\n  co()");
        assert!(err.contains("a.lua:3: took longer than"), "{err}");
    }

    #[test]
    fn deep_recursion_is_stopped_at_its_line() {
        // Lua's stack overflow, or whichever bound comes first (memory, time).
        let (err, _) = receive_fails("  local function f(n) return 1 + f(n + 1) end\n  f(1)");
        let stopped = ["stack overflow", "out of memory", "took longer than"];
        assert!(
            err.starts_with("a.lua:3:") && stopped.iter().any(|s| err.contains(s)),
            "{err}"
        );
    }

    #[test]
    fn a_huge_string_or_a_growing_table_hits_the_memory_limit() {
        let (err, _) = receive_fails("  return ('x'):rep(1 << 30)");
        assert!(
            err.starts_with("a.lua") && err.contains("limit of 32 MiB"),
            "{err}"
        );
        let (err, _) =
            receive_fails("  local t = {}\n  while true do t[#t + 1] = ('x'):rep(1e6) .. #t end");
        assert!(
            err.contains("out of memory") && err.contains("32 MiB"),
            "{err}"
        );
    }

    #[test]
    fn a_decoded_value_past_the_memory_limit_is_a_memory_error() {
        let (err, _) = receive_fails(
            "  local a = codec.json_decode('[' .. ('1,'):rep(3e6) .. '1]')\n  return #a",
        );
        assert!(
            err.contains("out of memory") && err.contains("32 MiB"),
            "{err}"
        );
    }

    #[test]
    fn an_error_object_that_is_not_a_string_names_its_line() {
        let (err, _) = receive_fails("  error({ code = 7 })");
        assert!(
            err.starts_with("a.lua:3: error(table: ") && err.contains("not a message"),
            "{err}"
        );
        let (err, _) = receive_fails("  error('no place', 0)");
        assert_eq!(err, "a.lua:3: no place");
        let (err, _) = receive_fails(
            "  error(setmetatable({}, { __tostring = function() return 'told' end }))",
        );
        assert_eq!(err, "a.lua:3: told");
    }

    #[test]
    fn a_script_whose_top_level_never_ends_does_not_load() {
        let vars = toml::Table::new();
        let err = Vm::load(
            "a.lua",
            "while true do end",
            &DescriptorPool::new(),
            (LIMITS, &vars),
        )
        .expect_err("refused");
        assert!(err.starts_with("a.lua:1: took longer than"), "{err}");
    }
}
