//! The script hook, for what a scenario's tables cannot say: a Lua 5.4 file (built in,
//! no system library) whose `request(r)` is called before each step is sent and whose
//! `response(r)` is called with each reply. One Lua state per generator thread, each
//! client's own table in it (`r.state`); `r.random` is drawn from the client's seeded
//! stream, so a run under a seed is the same run. docs/load.md has the API with runnable
//! examples.
//!
//! Sandboxed against a hostile or careless author (docs/security.md, "The script
//! hook"): no `io`, `os`, `package` or `debug`, no bytecode, no finalizer; at most
//! [`MEMORY`] of memory and [`CALL_TIME`] a call — the script's top level included (it
//! runs when the script is loaded, `check` too) — held by the instruction hook (`watch`,
//! set on a call's main thread by the [`watchdog`] once the call is past its time) and in
//! the library functions that loop in C (`SANDBOX`, `pattern`) or whose cost grows with
//! their input (`GUARDS`); a run's cancel or end cuts a call within the watchdog's
//! 20 ms ([`serve`]). What a hook hands back to Rust, outside the memory limit, is
//! bounded: an `r.vars` value and `r.path` [`MAX_VALUE`], a header's value
//! [`MAX_VALUE`] and all of them [`MAX_KEPT`], `r.body` [`MEMORY`]; `strainline.json`
//! parses at most [`MAX_KEPT`].

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;
use mlua::{ffi, Function, Lua, LuaOptions, StdLib, Table, Value};

use super::flow::{Kept, MAX_KEPT, MAX_VALUE};
use super::request::Rendered;

mod pattern;
mod watchdog;

thread_local! {
    /// What `strainline.metric` was fed in the call running on this thread.
    static FED: RefCell<Vec<(String, f64)>> = const { RefCell::new(Vec::new()) };
}

/// The most values one call of a hook may feed metrics, and the longest name it may
/// give one.
pub const MAX_FED: usize = 1024;
pub const MAX_METRIC_NAME: usize = 64;

/// What the hook called last on this thread fed `strainline.metric` (nothing when the
/// call failed), taken.
pub fn take_fed() -> Vec<(String, f64)> {
    FED.with_borrow_mut(std::mem::take)
}

/// The most memory a script's state may hold (per generator thread).
pub const MEMORY: usize = 64 << 20;
/// The longest one call of a hook may run: a loop that never ends fails its step.
pub const CALL_TIME: Duration = Duration::from_secs(1);

/// A checked script: its source and which hooks it defines.
#[derive(Debug)]
pub struct Script {
    /// Unique in the process: the key of its states (an address is reused once freed,
    /// and a thread would then run the script that lived there before).
    id: u64,
    pub path: String,
    source: String,
    pub has_request: bool,
    pub has_response: bool,
}

/// What a script finds in place of the library functions that could escape the limits,
/// run before anything else with the memory limit as its argument. The instruction hook
/// (see [`watch`]) cannot stop a loop inside a C function, so those that loop over a
/// count the script chooses without allocating are written here in Lua, where it can
/// (`table.move`, `insert`, `remove`), or refuse what would loop (`string.rep` of a
/// result over the memory limit, `table.sort` of a table whose metatable could fake its
/// elements); the pattern functions are strainline's own ([`pattern`]). No bytecode
/// (`load` reads text only, no `string.dump`), no finalizer (`__gc`), no stopping the
/// collector, and the string metatable locked.
const SANDBOX: &str = r##"
local limit, check, hooked = ...
local error, getmetatable, load, select, setmetatable, rawget, type, tonumber, tostring =
      error, getmetatable, load, select, setmetatable, rawget, type, tonumber, tostring
local format, rep, concat, sort, tointeger, maxinteger, ult =
      string.format, string.rep, table.concat, table.sort, math.tointeger, math.maxinteger, math.ult
local collect, pcall, pack, unpack = collectgarbage, pcall, table.pack, table.unpack

local function int(x, i, fname)
  local n = tointeger(x)
  if n == nil then
    error(format("bad argument #%d to '%s' (number has no integer representation)", i, fname), 3)
  end
  return n
end

string.dump = nil
getmetatable("").__metatable = false
_G.load = function(chunk, name, mode, ...)
  check()
  if mode ~= nil and mode ~= "t" then
    error("load: only text chunks in a strainline script (no bytecode)", 2)
  end
  if select("#", ...) > 0 then return load(chunk, name, "t", ...) end
  return load(chunk, name, "t")
end
-- A message handler runs where the error was raised: raised by the time limit, that is
-- inside the instruction hook, where no hook fires, and a handler that loops would
-- never end. Here it runs after the error unwound, with the hook (there is no `debug`
-- to tell the difference).
_G.xpcall = function(f, handler, ...)
  if type(handler) ~= "function" then
    error("bad argument #2 to 'xpcall' (function expected)", 2)
  end
  local r = pack(pcall(f, ...))
  if r[1] then return unpack(r, 1, r.n) end
  local _, v = pcall(handler, r[2])
  return false, v
end
-- A coroutine the time limit killed died inside the hook, where Lua turns hooks off,
-- and stays so: closing it would run its pending `__close` handlers with no limit.
-- So a dead coroutine is never closed (`wrap` is written here, as Lua's closes one),
-- and what `close` would say of it (its error) is kept from its last resume.
local create0, resume, status, close = coroutine.create, coroutine.resume, coroutine.status, coroutine.close
-- A coroutine has the instruction hook of its own (a call's main thread has none while
-- within its time, see watchdog.rs).
local function create(f) return hooked(create0(f)) end
coroutine.create = create
local died = setmetatable({}, {__mode = "k"})
coroutine.resume = function(co, ...)
  local was = status(co)
  local r = pack(resume(co, ...))
  if not r[1] and was ~= "dead" and status(co) == "dead" then died[co] = {r[2]} end
  return unpack(r, 1, r.n)
end
coroutine.close = function(co)
  if status(co) ~= "dead" then return close(co) end
  local e = died[co]
  if e == nil then return true end
  return false, e[1]
end
coroutine.wrap = function(f)
  local co = create(f)
  return function(...)
    local r = pack(coroutine.resume(co, ...))
    if r[1] then return unpack(r, 2, r.n) end
    error(r[2], 2)
  end
end
_G.setmetatable = function(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("setmetatable: a __gc finalizer is not allowed in a strainline script", 2)
  end
  return setmetatable(t, mt)
end
local collects = {collect = true, count = true, step = true, isrunning = true}
_G.collectgarbage = function(opt, ...)
  if opt ~= nil and not collects[opt] then
    error(format("collectgarbage: '%s' is not allowed in a strainline script", tostring(opt)), 2)
  end
  return collect(opt, ...)
end

string.rep = function(s, n, sep)
  check()
  local each = #tostring(s) + (sep == nil and 0 or #tostring(sep))
  local count = n ~= nil and tonumber(n)
  if count and count > 0 and (each == 0 or each * (count + 0.0) > limit) then
    if each == 0 then return rep(s, 0, sep) end
    error(format("string.rep: a result of %.0f bytes is over the script's memory (%d)",
                 each * count, limit), 2)
  end
  return rep(s, n, sep)
end

table.move = function(a1, f, e, t, a2)
  f, e, t = int(f, 2, "move"), int(e, 3, "move"), int(t, 4, "move")
  if a2 == nil then a2 = a1 end
  if e >= f then
    if not (f > 0 or e < maxinteger + f) then
      error("bad argument #3 to 'move' (too many elements to move)", 2)
    end
    if t > maxinteger - (e - f) then
      error("bad argument #4 to 'move' (destination wrap around)", 2)
    end
    if t > e or t <= f or a1 ~= a2 then
      for i = 0, e - f do a2[t + i] = a1[f + i] end
    else
      for i = e - f, 0, -1 do a2[t + i] = a1[f + i] end
    end
  end
  return a2
end

table.insert = function(t, ...)
  local n, e = select("#", ...), #t + 1
  if n == 1 then t[e] = ...; return end
  if n ~= 2 then error("wrong number of arguments to 'insert'", 2) end
  local pos, v = ...
  pos = int(pos, 2, "insert")
  if not ult(pos - 1, e) then error("bad argument #2 to 'insert' (position out of bounds)", 2) end
  for i = e, pos + 1, -1 do t[i] = t[i - 1] end
  t[pos] = v
end

table.remove = function(t, pos)
  local size = #t
  if pos == nil then
    pos = size
  else
    pos = int(pos, 2, "remove")
    if pos ~= size and ult(size, pos - 1) then
      error("bad argument #2 to 'remove' (position out of bounds)", 2)
    end
  end
  local v = t[pos]
  while pos < size do t[pos] = t[pos + 1]; pos = pos + 1 end
  t[pos] = nil
  return v
end

table.concat = function(t, sep, i, j)
  check()
  if getmetatable(t) == nil then return concat(t, sep, i, j) end
  -- Its metamethods could fake a billion elements of a byte each: read them in Lua.
  sep, i = sep == nil and "" or sep, i == nil and 1 or int(i, 3, "concat")
  j = j == nil and #t or int(j, 4, "concat")
  local parts = {}
  for k = i, j do
    local v = t[k]
    local kind = type(v)
    if kind ~= "string" and kind ~= "number" then
      error(format("invalid value (at index %d) in table for 'concat'", k), 2)
    end
    parts[k - i + 1] = v
  end
  return concat(parts, sep)
end

table.sort = function(t, comp)
  check()
  if getmetatable(t) ~= nil then
    error("table.sort: a table with a metatable is not sorted in a strainline script", 2)
  end
  return sort(t, comp)
end
"##;

/// Builds `r` for a hook and hands back what it may change. What a hook may never read
/// is made only when it does, through `r`'s metatable: its headers and its variables
/// come as one string each (`name\0value\0…` and `string.pack("<s4s4")` pairs) made into
/// tables on first read, and its body is copied into Lua by `__body` (Rust) on first
/// read — a hook that never reads `r.body` never copies it. Assigning `r.body` or
/// `r.vars` marks them set (a later read sees what was set, `nil` included); what the
/// hook neither set nor read comes back as nil, not converted again.
const CALLERS: &str = r#"
local clients, body = __clients, __body
local gmatch, unpack, rawget, rawset, setmetatable = string.gmatch, string.unpack, rawget, rawset, setmetatable
-- Keys no script can name: the lazy fields' sources and which fields the hook set.
local HEADERS, VARS, MADE_BODY, MADE_VARS, SET_BODY, SET_VARS = {}, {}, {}, {}, {}, {}
-- Locked: a script reading getmetatable(r) gets false, and cannot add a finalizer to
-- every later `r` through it.
local lazy = {__metatable = false}
lazy.__index = function(r, k)
  if k == "headers" then
    local h, text = {}, r[HEADERS]
    if text ~= "" then
      for name, value in gmatch(text, "([^%z]*)%z([^%z]*)%z") do h[name] = value end
    end
    rawset(r, "headers", h)
    return h
  elseif k == "vars" then
    -- Made once: absent after that, it was set to nil.
    if r[SET_VARS] or r[MADE_VARS] then return nil end
    local v, text, i = {}, r[VARS], 1
    local n = #text
    while i <= n do
      local name, value
      name, value, i = unpack("<s4s4", text, i)
      v[name] = value
    end
    r[MADE_VARS] = v
    rawset(r, "vars", v)
    return v
  elseif k == "body" then
    if r[SET_BODY] or r[MADE_BODY] then return nil end
    local b = body()
    r[MADE_BODY] = b
    rawset(r, "body", b)
    return b
  end
  return nil
end
lazy.__newindex = function(r, k, v)
  if k == "body" then r[SET_BODY] = true elseif k == "vars" then r[SET_VARS] = true end
  rawset(r, k, v)
end
-- Whether the hook set `r.body` (to anything but what it read), and whether it read or
-- set `r.vars`.
local function body_set(r, b)
  return r[SET_BODY] or b ~= (r[MADE_BODY] or nil)
end
local function vars_touched(r, v)
  return r[SET_VARS] or r[MADE_VARS] ~= false or v ~= nil
end
function __request(f, step, client, seq, random, vars, method, path, headers)
  local state = clients[client]
  if state == nil then state = {}; clients[client] = state end
  -- Its hidden fields present (false when unset): reading one never calls `__index`.
  local r = setmetatable({step = step, client = client, seq = seq, random = random,
             state = state, method = method, path = path, [VARS] = vars, [HEADERS] = headers,
             [MADE_BODY] = false, [MADE_VARS] = false, [SET_BODY] = false, [SET_VARS] = false}, lazy)
  f(r)
  local m, p, b, v = r.method, r.path, rawget(r, "body"), rawget(r, "vars")
  return m ~= method and m or nil, p ~= path and p or nil,
         body_set(r, b), b, rawget(r, "headers"), vars_touched(r, v), v
end
function __response(f, step, client, seq, random, vars, status, latency_ms, headers)
  local state = clients[client]
  if state == nil then state = {}; clients[client] = state end
  local r = setmetatable({step = step, client = client, seq = seq, random = random,
             state = state, status = status, latency_ms = latency_ms, [VARS] = vars,
             [HEADERS] = headers, [MADE_BODY] = false, [MADE_VARS] = false, [SET_BODY] = false,
             [SET_VARS] = false}, lazy)
  local ok, name = f(r)
  local v = rawget(r, "vars")
  return ok, name, vars_touched(r, v), v, rawget(r, "next")
end
"#;

thread_local! {
    /// The body of the request or reply whose hook runs on this thread, lent for the
    /// call: `__body` copies it into Lua only when the hook reads `r.body` (inside the
    /// call, so under its memory limit, as any string the hook makes).
    static LENT: RefCell<Lent> = const { RefCell::new(Lent::Nothing) };
    /// Buffers the callers' joined strings are written in, kept between calls.
    static JOINED: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

#[cfg(test)]
thread_local! {
    /// How many bodies `__body` copied into Lua on this thread (tests).
    static BODIES_MADE: Cell<u64> = const { Cell::new(0) };
}

/// A body lent to a hook's call.
enum Lent {
    Nothing,
    Request(Bytes),
    Reply(Vec<u8>),
}

/// Lends `body` to the call `f` (taken back after it, whatever it returned).
fn lending<T>(body: Lent, f: impl FnOnce() -> T) -> (T, Lent) {
    LENT.with_borrow_mut(|l| *l = body);
    let out = f();
    (
        out,
        LENT.with_borrow_mut(|l| std::mem::replace(l, Lent::Nothing)),
    )
}

/// The call's two joined arguments as Lua strings: the header `fields` ([`join_into`])
/// and the client's variables ([`vars_into`]), made in this thread's kept buffers,
/// outside the call's limit.
fn joined<'a>(
    lua: &Lua,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    c: &Caller,
) -> mlua::Result<(mlua::String, mlua::String)> {
    JOINED.with_borrow_mut(|(h, v)| {
        join_into(h, fields);
        vars_into(v, c);
        Ok((lua.create_string(&h)?, lua.create_string(&v)?))
    })
}

/// Header fields as the callers take them: `name\0value\0` each, into `out`.
fn join_into<'a>(out: &mut Vec<u8>, fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
    out.clear();
    for (k, v) in fields {
        out.extend_from_slice(k);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
}

/// The client's variables as the callers take them: `string.pack("<s4s4", name,
/// value)` each (a value may hold any byte), into `out`.
fn vars_into(out: &mut Vec<u8>, c: &Caller) {
    out.clear();
    for (n, v) in c.names.iter().zip(c.values.iter()) {
        if let Some(v) = v {
            for part in [n.as_bytes(), v.as_bytes()] {
                let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(part);
            }
        }
    }
}

/// Instructions between two looks at the clock, in a coroutine (a call's main thread
/// has no hook while within its time: see [`watchdog`]).
const EVERY: c_int = 10_000;

thread_local! {
    /// When the call running on this thread must end: [`CALL_TIME`] after it started,
    /// or the end of the run it serves if sooner.
    static DEADLINE: Cell<Instant> = Cell::new(Instant::now());
    /// The run this thread serves: its cancel flag and when its calls are cut.
    static RUN: RefCell<Option<(Arc<AtomicBool>, Option<Instant>)>> = const { RefCell::new(None) };
}

/// Binds this thread's calls to a run: once `cancel` is set or `end` has passed, a call
/// still running fails within the watchdog's period (a Ctrl-C does not wait for a
/// hook's second).
pub fn serve(cancel: Arc<AtomicBool>, end: Option<Instant>) {
    watchdog::serve(cancel.clone());
    RUN.with(|r| *r.borrow_mut() = Some((cancel, end)));
}

/// Starts a call's clock, for the state whose main thread is `main`: the call is
/// watched until the guard is dropped.
fn begin_call(main: *mut ffi::lua_State) -> watchdog::Running {
    let mut until = Instant::now() + CALL_TIME;
    RUN.with(|r| {
        if let Some((_, Some(end))) = &*r.borrow() {
            until = until.min(*end);
        }
    });
    DEADLINE.with(|d| d.set(until));
    watchdog::begin(main, until)
}

/// Past the deadline: every instruction of `l`, and of the call's main thread, fails.
///
/// # Safety
/// `l` is a thread of the state whose call runs on this OS thread.
unsafe fn fail_every_instruction(l: *mut ffi::lua_State) {
    ffi::lua_sethook(l, Some(watch), ffi::LUA_MASKCOUNT, 1);
    let main = watchdog::running();
    if !main.is_null() && main != l {
        ffi::lua_sethook(main, Some(watch), ffi::LUA_MASKCOUNT, 1);
    }
}

/// Why the current call must end now, if it must.
fn over() -> Option<&'static CStr> {
    let stopped = RUN.try_with(|r| {
        r.borrow()
            .as_ref()
            .is_some_and(|(cancel, _)| cancel.load(Ordering::Relaxed))
    });
    let deadline = DEADLINE
        .try_with(Cell::get)
        .unwrap_or_else(|_| Instant::now());
    if stopped.unwrap_or(false) {
        Some(c"the run was stopped while the hook ran")
    } else if Instant::now() > deadline {
        Some(c"the script ran over 1 s (a loop that never ends?), or past the run's end")
    } else {
        None
    }
}

/// The instruction hook: set on every coroutine as it is made (every [`EVERY`]
/// instructions), and on a call's main thread by the [`watchdog`] once the call is past
/// its deadline or its run cancelled. Past the deadline every instruction fails, so a
/// `pcall` cannot swallow the error and loop on. Found within the time (a signal meant
/// for a call that ended), it takes itself off the main thread.
pub(crate) unsafe extern "C-unwind" fn watch(l: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    match over() {
        None => {
            if l == watchdog::running() {
                ffi::lua_sethook(l, None, 0, 0);
            } else if ffi::lua_gethookcount(l) != EVERY {
                ffi::lua_sethook(l, Some(watch), ffi::LUA_MASKCOUNT, EVERY);
            }
        }
        Some(why) => {
            fail_every_instruction(l);
            // No value with a destructor lives in this frame: the error's jump skips it.
            ffi::luaL_error(l, c"%s".as_ptr(), why.as_ptr());
        }
    }
}

/// The library functions whose cost grows with what the script hands them (a string's
/// length, a count, a table's size), each replaced by [`guarded`], which reads the clock
/// before it calls the original: the instruction hook fires every [`EVERY`]
/// instructions in a coroutine and, on a call's main thread, only once the
/// [`watchdog`] saw the deadline pass; a loop of such calls (`while true do utf8.len(s) end`, 4
/// instructions a turn) ran 2,500 of them, 10 ms each on 16 MiB, between two looks (a
/// 1 s call ran 18 s). Those written in Lua in [`SANDBOX`] (`string.rep`, `load`,
/// `table.concat`, `sort`) call `check` first. Constant-time ones need nothing. The
/// originals are kept where Lua names a function in an argument error (`_LOADED`), so
/// its messages still name it (`bad argument #1 to 'string.upper'`). `pairs` hands out the guarded
/// `next` (a table emptied of a million keys makes each `next` a scan).
const GUARDS: &str = r#"
local guard, loaded = ...
local linear = {
  _G = {"next", "rawequal", "select", "tonumber", "tostring"},
  string = {"byte", "char", "find", "format", "gmatch", "gsub", "lower", "match", "pack",
            "packsize", "reverse", "sub", "unpack", "upper"},
  table = {"pack", "unpack"},
  utf8 = {"char", "codepoint", "codes", "len", "offset"},
  strainline = {"hmac_sha256", "json", "sha256"},
}
local rawnext, opairs = next, pairs
for lib, names in pairs(linear) do
  local t = lib == "_G" and _G or _G[lib]
  local orig = {}
  for k, v in rawnext, t do orig[k] = v end
  for _, name in ipairs(names) do t[name] = guard(t[name]) end
  loaded[lib] = orig
end
local gnext = next
pairs = function(t)
  local f, s, c = opairs(t)
  if f == rawnext then f = gnext end
  return f, s, c
end
"#;

/// Reads the clock, and fails the call past its deadline as the instruction hook does.
unsafe extern "C-unwind" fn check(l: *mut ffi::lua_State) -> c_int {
    if let Some(why) = over() {
        fail_every_instruction(l);
        // No value with a destructor lives in this frame: the error's jump skips it.
        return ffi::luaL_error(l, c"%s".as_ptr(), why.as_ptr());
    }
    0
}

/// A library function (its upvalue) called after [`check`]: see [`GUARDS`].
unsafe extern "C-unwind" fn guarded(l: *mut ffi::lua_State) -> c_int {
    check(l);
    let n = ffi::lua_gettop(l);
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
    ffi::lua_insert(l, 1);
    ffi::lua_call(l, n, ffi::LUA_MULTRET);
    ffi::lua_gettop(l)
}

/// `guard(f)`: `f` behind [`guarded`].
unsafe extern "C-unwind" fn guard(l: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TFUNCTION);
    ffi::lua_settop(l, 1);
    ffi::lua_pushcclosure(l, guarded, 1);
    1
}

/// A state with the sandbox's libraries and `strainline.*` helpers and its memory limit
/// set, for the script's own top-level code, and its main thread (for [`begin_call`]).
fn state(seed: u64) -> mlua::Result<(Lua, *mut ffi::lua_State)> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE,
        LuaOptions::default(),
    )?;
    let g = lua.globals();
    for unsafe_fn in ["dofile", "loadfile", "print"] {
        g.set(unsafe_fn, Value::Nil)?;
    }
    let lib = lua.create_table()?;
    lib.set(
        "hmac_sha256",
        lua.create_function(|_, (key, msg): (mlua::String, mlua::String)| {
            let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key.as_bytes());
            Ok(hex(ring::hmac::sign(&k, &msg.as_bytes()).as_ref()))
        })?,
    )?;
    lib.set(
        "sha256",
        lua.create_function(|_, msg: mlua::String| {
            Ok(hex(ring::digest::digest(
                &ring::digest::SHA256,
                &msg.as_bytes(),
            )
            .as_ref()))
        })?,
    )?;
    lib.set(
        "json",
        lua.create_function(|lua, text: mlua::String| {
            let text = text.as_bytes();
            if text.len() > MAX_KEPT {
                return Err(mlua::Error::runtime(format!(
                    "strainline.json: a text of {} bytes is over the {} KiB it parses (the most of a reply's body kept)",
                    text.len(),
                    MAX_KEPT >> 10
                )));
            }
            json(lua, &text)
        })?,
    )?;
    lib.set(
        "metric",
        lua.create_function(|_, (name, value): (mlua::String, Value)| {
            let x = match value {
                Value::Integer(n) => n as f64,
                Value::Number(x) => x,
                Value::Boolean(b) => f64::from(u8::from(b)),
                other => {
                    return Err(mlua::Error::runtime(format!(
                    "strainline.metric: the value is a {}: give a number (or a boolean, to a rate)",
                    other.type_name()
                )))
                }
            };
            // Copied out of the state's memory limit: kept short.
            if name.as_bytes().len() > MAX_METRIC_NAME {
                return Err(mlua::Error::runtime(format!(
                    "strainline.metric: a name of {} bytes: a metric's name is at most {MAX_METRIC_NAME}",
                    name.as_bytes().len()
                )));
            }
            let name = name.to_str()?.to_string();
            FED.with_borrow_mut(|fed| {
                if fed.len() >= MAX_FED {
                    return Err(mlua::Error::runtime(format!(
                        "strainline.metric: more than {MAX_FED} values in one call"
                    )));
                }
                fed.push((name, x));
                Ok(())
            })
        })?,
    )?;
    g.set("strainline", lib)?;
    g.set("__clients", lua.create_table()?)?;
    lua.load(format!("math.randomseed({})", seed % (1 << 53)))
        .exec()?;
    // `r` is made in Lua, from arguments: a table built by the VM costs a fraction of
    // one built field by field through the C API (0.31x to 0.40x to … the plain flow's
    // requests per CPU-second, docs/performance.md).
    g.set(
        "__body",
        lua.create_function(|lua, ()| {
            #[cfg(test)]
            BODIES_MADE.with(|n| n.set(n.get() + 1));
            LENT.with_borrow(|lent| {
                lua.create_string(match lent {
                    Lent::Request(b) => &b[..],
                    Lent::Reply(v) => &v[..],
                    Lent::Nothing => &[][..],
                })
            })
        })?,
    )?;
    lua.load(CALLERS).set_name("=strainline").exec()?;
    // Kept by the callers alone.
    g.set("__body", Value::Nil)?;
    // After the callers, which keep the library's own functions for their own input.
    // SAFETY: `check` and `guard` keep to the Lua C API's rules (each pushes no more
    // than the minimum stack a C function has).
    let (check, guard, hooked) = unsafe {
        (
            lua.create_c_function(check)?,
            lua.create_c_function(guard)?,
            lua.create_c_function(hooked)?,
        )
    };
    lua.load(SANDBOX)
        .set_name("=sandbox")
        .call::<()>((MEMORY, check, hooked))?;
    pattern::install(&lua)?;
    let loaded: Table = lua.named_registry_value(ffi::LUA_LOADED_TABLE)?;
    lua.load(GUARDS)
        .set_name("=guards")
        .call::<()>((guard, loaded))?;
    lua.set_memory_limit(MEMORY)?;
    let mut main = std::ptr::null_mut();
    // SAFETY: reads the main thread from the registry, leaving the stack as it was.
    unsafe {
        lua.exec_raw::<()>((), |l| {
            ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, ffi::LUA_RIDX_MAINTHREAD);
            main = ffi::lua_tothread(l, -1);
            ffi::lua_pop(l, 1);
        })?;
    }
    Ok((lua, main))
}

/// `hooked(co)`: the coroutine `co` with the instruction hook every [`EVERY`]
/// instructions (see [`watch`]).
unsafe extern "C-unwind" fn hooked(l: *mut ffi::lua_State) -> c_int {
    let co = ffi::lua_tothread(l, 1);
    if !co.is_null() {
        ffi::lua_sethook(co, Some(watch), ffi::LUA_MASKCOUNT, EVERY);
    }
    ffi::lua_settop(l, 1);
    1
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// A JSON text as Lua sees it: objects and arrays as tables (arrays from 1), null as
/// nil; nil if it is not JSON. Built straight into Lua's tables, under its memory limit:
/// a `serde_json::Value` first, outside it, took 732 MB for 16 MiB of `[],`.
fn json(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    use serde::de::DeserializeSeed;
    let failed = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(text);
    let out = ToLua {
        lua,
        failed: &failed,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match (out, failed.into_inner()) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(_), None) => Ok(Value::Nil),
    }
}

/// Makes one JSON value in Lua as it is parsed; a Lua error (its memory) kept in `failed`.
#[derive(Clone, Copy)]
struct ToLua<'a> {
    lua: &'a Lua,
    failed: &'a RefCell<Option<mlua::Error>>,
}

impl ToLua<'_> {
    fn lua<T, E: serde::de::Error>(&self, r: mlua::Result<T>) -> Result<T, E> {
        r.map_err(|e| {
            let text = e.to_string();
            *self.failed.borrow_mut() = Some(e);
            E::custom(text)
        })
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for ToLua<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ToLua<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Boolean(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Integer(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(i64::try_from(u).map_or(Value::Number(u as f64), Value::Integer))
    }
    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        Ok(Value::Number(x))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.lua(self.lua.create_string(v).map(Value::String))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let t = self.lua(self.lua.create_table())?;
        let mut i = 1;
        while let Some(v) = seq.next_element_seed(self)? {
            self.lua(t.raw_set(i, v))?;
            i += 1;
        }
        Ok(Value::Table(t))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let t = self.lua(self.lua.create_table())?;
        while let Some(k) = map.next_key_seed(self)? {
            let v = map.next_value_seed(self)?;
            self.lua(t.raw_set(k, v))?;
        }
        Ok(Value::Table(t))
    }
}

impl Script {
    /// Reads and compiles `path` (beside the scenario): a syntax error is refused here,
    /// before the run, with its line.
    pub fn load(path: &Path) -> crate::error::Result<Script> {
        let shown = path.display().to_string();
        let source = crate::os::file::read_text(path, "script")?;
        // mlua's error is neither Send nor Sync: only its words can be kept.
        let (lua, main) = state(1).map_err(|e| crate::Error::environment(e.to_string()))?;
        let top = begin_call(main);
        lua.load(&source)
            .set_name(format!("@{shown}"))
            .exec()
            .map_err(|e| crate::Error::usage(format!("script: {}", one_line(&e))))?;
        drop(top);
        let g = lua.globals();
        let is_fn = |name: &str| matches!(g.get::<Value>(name), Ok(Value::Function(_)));
        let (has_request, has_response) = (is_fn("request"), is_fn("response"));
        if !has_request && !has_response {
            return Err(crate::Error::usage(format!(
                "script: {shown} defines neither request(r) nor response(r): give at least one"
            )));
        }
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Ok(Script {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            path: shown,
            source,
            has_request,
            has_response,
        })
    }
}

/// A Lua error in one line (its traceback dropped).
fn one_line(e: &mlua::Error) -> String {
    let text = e.to_string();
    text.lines().next().unwrap_or_default().to_string()
}

/// Why a hook's call failed: the Lua error in one line (the step fails with it).
#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A script's state on one thread, and what every call reaches for, looked up once
/// (its hooks, the clients' tables).
struct State {
    lua: Lua,
    request: Option<Function>,
    response: Option<Function>,
    /// `__request` and `__response` of [`CALLERS`].
    call_request: Function,
    call_response: Function,
    /// The state's main thread, where its calls run.
    main: *mut ffi::lua_State,
}

/// Closed under the limits a call has: whatever runs as the state closes (there is no
/// finalizer to run, see [`SANDBOX`]) meets the memory limit and a passed deadline.
impl Drop for State {
    fn drop(&mut self) {
        let _ = self.lua.set_memory_limit(MEMORY);
        let _ = DEADLINE.try_with(|d| d.set(Instant::now()));
        // SAFETY: the state is alive until `lua` is dropped, after this.
        unsafe { ffi::lua_sethook(self.main, Some(watch), ffi::LUA_MASKCOUNT, 1) };
    }
}

thread_local! {
    /// This thread's state of each script, by its id.
    static STATES: RefCell<HashMap<u64, State>> = RefCell::new(HashMap::new());
}

/// Runs `f` — a hook's call — under the memory limit. What strainline does around it
/// (the strings, tables and fields it makes and reads) runs without one: with a limit
/// set, mlua makes each of them a protected call of its own, and the hook's own requests
/// per CPU-second rose 16% (median of an A/B, docs/performance.md) without them.
/// Only strainline's code runs outside the call: a script cannot set a finalizer
/// (`__gc`), the one way a collection started from there could run the script's code.
fn limited<T>(lua: &Lua, f: impl FnOnce() -> mlua::Result<T>) -> mlua::Result<T> {
    lua.set_memory_limit(MEMORY)?;
    let out = f();
    lua.set_memory_limit(0)?;
    out
}

/// Runs `f` with this thread's state of `script`, made on first use (the script's top
/// level runs under the memory limit).
fn with_state<T>(
    script: &Arc<Script>,
    seed: u64,
    f: impl FnOnce(&State) -> mlua::Result<T>,
) -> Result<T, Failed> {
    STATES.with(|states| {
        let mut states = states.borrow_mut();
        let st = match states.entry(script.id) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let made = state(seed).and_then(|(lua, main)| {
                    let g = lua.globals();
                    // Taken before the script runs: it cannot put its own in their place.
                    let (call_request, call_response) = (g.get("__request")?, g.get("__response")?);
                    let top = begin_call(main);
                    lua.load(&script.source)
                        .set_name(format!("@{}", script.path))
                        .exec()?;
                    drop(top);
                    lua.set_memory_limit(0)?;
                    Ok(State {
                        request: g.get("request")?,
                        response: g.get("response")?,
                        call_request,
                        call_response,
                        main,
                        lua,
                    })
                });
                v.insert(made.map_err(|e| Failed(one_line(&e)))?)
            }
        };
        let _call = begin_call(st.main);
        // What this call feeds metrics, alone (not the script's top level's); nothing
        // of a call that failed.
        FED.with_borrow_mut(Vec::clear);
        f(st).map_err(|e| {
            FED.with_borrow_mut(Vec::clear);
            Failed(one_line(&e))
        })
    })
}

/// Who is calling: the step, the client, its request number, its variables (by the
/// scenario's names) and a draw from its stream.
pub struct Caller<'a> {
    pub step: &'a str,
    pub client: u64,
    pub seq: u64,
    pub names: &'a [String],
    pub values: &'a mut [Option<String>],
    pub random: f64,
}

/// What the hook left in `r.vars`, back into the client's variables.
fn vars_back(vars: &Table, c: &mut Caller) -> mlua::Result<()> {
    for (n, v) in c.names.iter().zip(c.values.iter_mut()) {
        *v = match vars.raw_get::<Value>(n.as_str())? {
            Value::Nil => None,
            Value::String(s) if v.as_deref().map(str::as_bytes) == Some(&s.as_bytes()[..]) => {
                continue;
            }
            Value::String(s) if s.as_bytes().len() > MAX_VALUE => {
                return Err(mlua::Error::runtime(format!(
                    "r.vars.{n}: a value of {} bytes is over the {} KiB a variable holds",
                    s.as_bytes().len(),
                    MAX_VALUE >> 10
                )));
            }
            Value::String(s) => Some(s.to_str()?.to_string()),
            Value::Integer(i) => Some(i.to_string()),
            Value::Number(x) => Some(x.to_string()),
            Value::Boolean(b) => Some(b.to_string()),
            _ => v.take(),
        };
    }
    Ok(())
}

/// Calls `request(r)` before `req` is sent; what it changed (method, path, headers,
/// body, variables) goes into the request.
pub fn request(
    script: &Arc<Script>,
    seed: u64,
    mut c: Caller,
    req: &mut Rendered,
) -> Result<(), Failed> {
    with_state(script, seed, |st| {
        let lua = &st.lua;
        let Some(f) = &st.request else {
            return Err(mlua::Error::runtime("no function request(r)"));
        };
        // Every string made here, outside the limit: the call only pushes them (the
        // step, method and path straight onto Lua's stack, not through a reference).
        let fields = (req.headers.iter()).map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes()));
        let (headers, vars) = joined(lua, fields, &c)?;
        let args = (
            f,
            c.step,
            c.client,
            c.seq,
            c.random,
            vars,
            req.method.as_str(),
            req.path.as_str(),
            headers,
        );
        type Back = (
            Option<mlua::String>,
            Option<mlua::String>,
            bool,
            Value,
            Option<Table>,
            bool,
            Value,
        );
        let (out, lent) = lending(Lent::Request(req.body.clone()), || {
            limited(lua, || st.call_request.call::<Back>(args))
        });
        drop(lent);
        let (method, path, set_body, body, headers, set_vars, vars) = out?;
        if let Some(method) = method {
            let method = method.as_bytes();
            req.method =
                Method::from_bytes(method.to_ascii_uppercase().as_slice()).map_err(|_| {
                    mlua::Error::runtime(format!(
                        "r.method '{}' is not a method",
                        String::from_utf8_lossy(&method)
                    ))
                })?;
        }
        if let Some(path) = path {
            if path.as_bytes().len() > MAX_VALUE {
                return Err(mlua::Error::runtime(format!(
                    "r.path: {} bytes is over the {} KiB a path from the hook may be",
                    path.as_bytes().len(),
                    MAX_VALUE >> 10
                )));
            }
            req.path = path.to_str()?.to_string();
            if !req.path.starts_with('/') {
                return Err(mlua::Error::runtime(format!(
                    "r.path '{}' does not start with /",
                    req.path
                )));
            }
        }
        // Set by the hook (`nil` leaves it as it was, as does the same text).
        if set_body {
            if let Some(body) = lua.unpack::<Option<mlua::String>>(body)? {
                if body.as_bytes()[..] != req.body[..] {
                    req.body = Bytes::from(body.as_bytes().to_vec());
                }
            }
        }
        // Read by the hook (and so perhaps changed): the request's headers are its.
        if let Some(headers) = headers {
            req.headers.clear();
            let mut total = 0;
            for pair in headers.pairs::<mlua::String, mlua::String>() {
                let (k, v) = pair?;
                let (kb, vb) = (k.as_bytes(), v.as_bytes());
                total += kb.len() + vb.len();
                if vb.len() > MAX_VALUE || total > MAX_KEPT {
                    return Err(mlua::Error::runtime(format!(
                        "r.headers: over the {} KiB a header's value or the {} KiB all of them may be",
                        MAX_VALUE >> 10,
                        MAX_KEPT >> 10
                    )));
                }
                let k = String::from_utf8_lossy(&kb).into_owned();
                let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                    mlua::Error::runtime(format!("r.headers: '{k}' is not a header name"))
                })?;
                let value = HeaderValue::from_bytes(&v.as_bytes()).map_err(|_| {
                    mlua::Error::runtime(format!("r.headers['{k}']: not a header value"))
                })?;
                req.headers.push((name, value));
            }
        }
        // Neither read nor set: the client's variables are as they were.
        if set_vars {
            vars_back(&lua.unpack::<Table>(vars)?, &mut c)?;
        }
        Ok(())
    })
}

/// What `response(r)` said of a reply: whether it judged it (returned `true` or
/// `false`; nothing is no verdict), the check it failed (`false, "name"`: `name`;
/// `false`: `script`), and the step it asked to go to next (`r.next`).
#[derive(Debug, Default, PartialEq)]
pub struct Said {
    pub judged: bool,
    pub failed: Option<String>,
    pub next: Option<String>,
}

/// Calls `response(r)` with a reply: its status, head, body and latency.
pub fn response(
    script: &Arc<Script>,
    seed: u64,
    mut c: Caller,
    status: u16,
    kept: &mut Kept,
    latency: Duration,
) -> Result<Said, Failed> {
    with_state(script, seed, |st| {
        let lua = &st.lua;
        let Some(f) = &st.response else {
            return Err(mlua::Error::runtime("no function response(r)"));
        };
        let fields = (kept.headers.iter()).map(|(k, v)| (k.as_bytes(), v.as_bytes()));
        let (headers, vars) = joined(lua, fields, &c)?;
        let args = (
            f,
            c.step,
            c.client,
            c.seq,
            c.random,
            vars,
            status,
            latency.as_secs_f64() * 1e3,
            headers,
        );
        // The reply's body lent to the call, and given back to it after.
        let lent = Lent::Reply(std::mem::take(&mut kept.body));
        let (out, lent) = lending(lent, || {
            limited(lua, || {
                st.call_response
                    .call::<(Value, Option<String>, bool, Value, Option<String>)>(args)
            })
        });
        if let Lent::Reply(body) = lent {
            kept.body = body;
        }
        let (ok, name, set_vars, vars, next) = out?;
        if set_vars {
            vars_back(&lua.unpack::<Table>(vars)?, &mut c)?;
        }
        Ok(Said {
            judged: matches!(ok, Value::Boolean(_)),
            failed: matches!(ok, Value::Boolean(false))
                .then(|| name.unwrap_or_else(|| "script".into())),
            next,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(text: &str) -> crate::error::Result<Arc<Script>> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("flow.lua");
        std::fs::write(&p, text).unwrap();
        Script::load(&p).map(Arc::new)
    }

    /// A request as a step would render it.
    fn rendered(method: Method, path: &str, body: Bytes) -> Rendered {
        Rendered {
            method,
            path: path.into(),
            headers: Vec::new(),
            body,
            keep: super::super::flow::Keep::Nothing,
        }
    }

    fn caller<'a>(values: &'a mut [Option<String>], names: &'a [String]) -> Caller<'a> {
        Caller {
            step: "login",
            client: 3,
            seq: 0,
            names,
            values,
            random: 0.5,
        }
    }

    #[test]
    fn request_signs_the_body_with_an_hmac_rfc_4231_checks() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
        let s = script(
            "function request(r)\n  r.headers['x-signature'] = strainline.hmac_sha256('Jefe', r.body)\n  r.vars.n = (r.state.n or 0) + 1\n  r.state.n = r.vars.n\nend\n",
        )
        .unwrap();
        let names = vec!["n".to_string()];
        let mut values = vec![None];
        let mut req = rendered(
            Method::POST,
            "/signed",
            Bytes::from_static(b"what do ya want for nothing?"),
        );
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(
            req.headers[0].1,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(
            values[0].as_deref(),
            Some("2"),
            "r.state is kept per client"
        );
    }

    #[test]
    fn headers_are_read_changed_or_left_as_they_were() {
        // Untouched: the request's headers and body stay as they were, unconverted.
        let s = script("function request(r) r.vars.m = r.method end\n").unwrap();
        let names = vec!["m".to_string()];
        let mut values = vec![None];
        let mut req = rendered(Method::POST, "/a", Bytes::from_static(b"x"));
        req.headers.push((
            HeaderName::from_static("x-a"),
            HeaderValue::from_static("1"),
        ));
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(values[0].as_deref(), Some("POST"));
        assert_eq!((req.headers.len(), &req.body[..]), (1, &b"x"[..]));
        // Read and changed: one header replaced, one added, one removed; the path too.
        let s = script(
            "function request(r)\n  r.headers['x-b'] = r.headers['x-a'] .. '2'\n  r.headers['x-a'] = nil\n  r.path = '/b'\nend\n",
        )
        .unwrap();
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(req.headers.len(), 1);
        assert_eq!(req.headers[0].0.as_str(), "x-b");
        assert_eq!(req.headers[0].1, "12");
        assert_eq!(req.path, "/b");
        // A reply's header fields, as the response hook reads them.
        let s = script(
            "function response(r)\n  if r.headers['content-type'] ~= 'application/json' then return false, 'ct' end\nend\n",
        )
        .unwrap();
        let mut k = Kept::new(super::super::flow::Keep::All);
        k.take_header("content-type", b"application/json");
        let ms = Duration::from_millis(1);
        let said = response(&s, 1, caller(&mut values, &names), 200, &mut k, ms).unwrap();
        assert_eq!(said.failed, None);
        let mut none = Kept::new(super::super::flow::Keep::All);
        let said = response(&s, 1, caller(&mut values, &names), 200, &mut none, ms).unwrap();
        assert_eq!(said.failed.as_deref(), Some("ct"));
    }

    /// `r.body` is copied into Lua only when the hook reads it: not read, not copied
    /// (and the reply's body given back to it); read, the right bytes, once a call.
    #[test]
    fn the_body_is_copied_into_lua_only_when_read() {
        let made = || BODIES_MADE.with(Cell::get);
        let ms = Duration::from_millis(1);
        let reply = |b: &[u8]| {
            let mut k = Kept::new(super::super::flow::Keep::All);
            k.take_body(b);
            k
        };
        let s = script(
            "function request(r) r.headers['x-m'] = r.method .. r.path end\nfunction response(r) return r.status == 200 end\n",
        )
        .unwrap();
        let mut req = rendered(Method::POST, "/a", Bytes::from_static(b"pay\0load"));
        let mut k = reply(b"re\0ply");
        let before = made();
        request(&s, 1, caller(&mut [], &[]), &mut req).unwrap();
        let said = response(&s, 1, caller(&mut [], &[]), 200, &mut k, ms).unwrap();
        assert_eq!(made(), before, "a body not read is not copied");
        assert!(said.judged && said.failed.is_none());
        assert_eq!(
            (&req.body[..], &k.body[..]),
            (&b"pay\0load"[..], &b"re\0ply"[..])
        );
        assert_eq!(req.headers[0].1, "POST/a");
        let s = script(
            "function request(r)\n  assert(r.body == 'pay\\0load' and #r.body == 8)\n  r.headers['x-n'] = tostring(#r.body)\nend\nfunction response(r)\n  if r.body ~= 're\\0ply' or r.body ~= 're\\0ply' then return false, 'body' end\nend\n",
        )
        .unwrap();
        let before = made();
        request(&s, 1, caller(&mut [], &[]), &mut req).unwrap();
        let said = response(&s, 1, caller(&mut [], &[]), 200, &mut k, ms).unwrap();
        assert_eq!(said.failed, None);
        assert_eq!(made(), before + 2, "read twice a call, copied once");
        assert_eq!(
            (&req.body[..], &k.body[..]),
            (&b"pay\0load"[..], &b"re\0ply"[..])
        );
        // Set: sent as set; set to nil: read as nil, and the body stays as it was.
        let s = script("function request(r) r.body = r.body .. '!' end\n").unwrap();
        request(&s, 1, caller(&mut [], &[]), &mut req).unwrap();
        assert_eq!(&req.body[..], b"pay\0load!");
        let s = script("function request(r) r.body = nil assert(r.body == nil) end\n").unwrap();
        request(&s, 1, caller(&mut [], &[]), &mut req).unwrap();
        assert_eq!(&req.body[..], b"pay\0load!");
        let s = script("function request(r) r.body = 42 end\n").unwrap();
        request(&s, 1, caller(&mut [], &[]), &mut req).unwrap();
        assert_eq!(&req.body[..], b"42");
    }

    /// Each call has its own `r`: what one call set on it (a field of its own,
    /// `r.next`, the body, a header) is not seen by the next; `r.state` is the client's.
    #[test]
    fn a_field_set_by_one_call_is_not_seen_by_the_next() {
        let s = script(
            "function request(r)\n  assert(r.mine == nil and r.headers['x-a'] == nil, 'seen')\n  assert(r.body == '', 'body seen')\n  r.mine = 1 r.body = 'b' r.headers['x-a'] = '1'\nend\nfunction response(r)\n  r.state.n = (r.state.n or 0) + 1\n  assert(r.mine == nil and r.next == nil, 'seen')\n  r.mine = true\n  if r.state.n == 1 then r.next = 'page' end\nend\n",
        )
        .unwrap();
        for _ in 0..3 {
            let mut req = rendered(Method::GET, "/", Bytes::new());
            request(&s, 1, caller(&mut [], &[]), &mut req).unwrap();
            assert_eq!((&req.body[..], req.headers.len()), (&b"b"[..], 1));
        }
        let ms = Duration::from_millis(1);
        let mut k = Kept::new(super::super::flow::Keep::All);
        let said = response(&s, 1, caller(&mut [], &[]), 200, &mut k, ms).unwrap();
        assert_eq!(said.next.as_deref(), Some("page"));
        let said = response(&s, 1, caller(&mut [], &[]), 200, &mut k, ms).unwrap();
        assert_eq!(said.next, None, "r.next of the call before");
    }

    /// `r.vars` made on first read (any byte in a value); set, read back; untouched,
    /// the client's variables stay as they were.
    #[test]
    fn vars_are_read_set_or_left_as_they_were() {
        let names = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let mut values = vec![Some("x\0y".to_string()), None, Some(String::new())];
        let mut req = rendered(Method::GET, "/", Bytes::new());
        let s = script(
            "function request(r)\n  assert(r.vars.a == 'x\\0y' and r.vars.b == nil and r.vars.c == '')\n  r.vars.b = r.vars.a .. '!'\n  r.vars.c = nil\nend\n",
        )
        .unwrap();
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(values, [Some("x\0y".into()), Some("x\0y!".into()), None]);
        let s = script("function request(r) r.vars = {a = 'new'} assert(r.vars.a == 'new') end\n")
            .unwrap();
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(values, [Some("new".into()), None, None]);
        let s = script("function request(r) r.path = '/p' end\n").unwrap();
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(values, [Some("new".into()), None, None]);
        let s = script("function request(r) r.vars = nil end\n").unwrap();
        let e = request(&s, 1, caller(&mut values, &names), &mut req).unwrap_err();
        assert!(e.0.contains("nil") && e.0.contains("table"), "{e}");
    }

    #[test]
    fn response_fails_a_step_and_chooses_the_next_from_a_field() {
        let s = script(
            "function response(r)\n  local doc = strainline.json(r.body)\n  if doc == nil or doc.status ~= 'ok' then return false, 'status_ok' end\n  if doc.items[1] == 'more' then r.next = 'page' end\nend\n",
        )
        .unwrap();
        let mut values = vec![];
        let kept = |b: &str| {
            let mut k = Kept::new(super::super::flow::Keep::All);
            k.take_body(b.as_bytes());
            k
        };
        let ms = Duration::from_millis(3);
        let said = response(
            &s,
            1,
            caller(&mut values, &[]),
            200,
            &mut kept(r#"{"status":"error"}"#),
            ms,
        )
        .unwrap();
        assert_eq!(said.failed.as_deref(), Some("status_ok"));
        let said = response(
            &s,
            1,
            caller(&mut values, &[]),
            200,
            &mut kept(r#"{"status":"ok","items":["more"]}"#),
            ms,
        )
        .unwrap();
        // Nothing returned: no verdict, only the next step.
        assert_eq!(
            said,
            Said {
                judged: false,
                failed: None,
                next: Some("page".into())
            }
        );
        let s = script("function response(r)\n  return r.status == 200\nend\n").unwrap();
        let said = response(&s, 1, caller(&mut values, &[]), 200, &mut kept("{}"), ms).unwrap();
        assert!(said.judged && said.failed.is_none(), "{said:?}");
        let said = response(&s, 1, caller(&mut values, &[]), 500, &mut kept("{}"), ms).unwrap();
        assert!(
            said.judged && said.failed.as_deref() == Some("script"),
            "{said:?}"
        );
    }

    #[test]
    fn the_sandbox_has_no_files_no_os_and_no_endless_loop() {
        let e = script("function request(r) r.path = '/x' ")
            .unwrap_err()
            .to_string();
        assert!(e.contains("flow.lua:1:") && e.contains("expected"), "{e}");
        assert!(script("local x = 1\n")
            .unwrap_err()
            .to_string()
            .contains("neither request(r) nor response(r)"));
        for forbidden in [
            "io.open('/etc/passwd')",
            "os.execute('true')",
            "dofile('/etc/passwd')",
            "require('os')",
        ] {
            let s = script(&format!("function request(r) {forbidden} end\n")).unwrap();
            let mut req = rendered(Method::GET, "/", Bytes::new());
            let e = request(&s, 1, caller(&mut [], &[]), &mut req)
                .unwrap_err()
                .0;
            assert!(e.contains("nil"), "{forbidden}: {e}");
        }
        // The memory limit holds in a call, and the state serves the next one.
        let s = script(
            "function request(r)\n  if r.path == '/big' then local t = {} for i = 1, 1000 do t[i] = string.rep('x', 1000000) .. i end end\n  r.vars.n = 'ok'\nend\n",
        )
        .unwrap();
        let names = vec!["n".to_string()];
        let mut values = vec![None];
        let mut req = rendered(Method::GET, "/big", Bytes::new());
        let e = request(&s, 1, caller(&mut values, &names), &mut req)
            .unwrap_err()
            .0;
        assert!(e.contains("memory"), "{e}");
        let mut req = rendered(Method::GET, "/small", Bytes::new());
        request(&s, 1, caller(&mut values, &names), &mut req).unwrap();
        assert_eq!(values[0].as_deref(), Some("ok"));
        // No finalizer: the one way script code could run outside a call, unlimited.
        let s = script("function request(r) setmetatable({}, { __gc = function() end }) end\n")
            .unwrap();
        let mut req = rendered(Method::GET, "/", Bytes::new());
        let e = request(&s, 1, caller(&mut [], &[]), &mut req)
            .unwrap_err()
            .0;
        assert!(e.contains("__gc finalizer is not allowed"), "{e}");
        let s = script("function request(r) while true do end end\n").unwrap();
        let mut req = rendered(Method::GET, "/", Bytes::new());
        let t = Instant::now();
        let e = request(&s, 1, caller(&mut [], &[]), &mut req)
            .unwrap_err()
            .0;
        assert!(e.contains("ran over 1 s"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3));
    }

    /// Cuts this thread's calls 300 ms from now (a run's end, sooner than the 1 s): the
    /// same deadline, reached sooner, keeps these tests short.
    fn ending_soon() {
        serve(
            Arc::new(AtomicBool::new(false)),
            Some(Instant::now() + Duration::from_millis(300)),
        );
    }

    /// Runs `body` as a request hook, cut 300 ms after it starts: its error, and how
    /// long it took.
    fn hostile(body: &str) -> (Result<(), Failed>, Duration) {
        let s = script(&format!("function request(r)\n{body}\nend\n")).unwrap();
        let mut req = rendered(Method::GET, "/", Bytes::new());
        ending_soon();
        let t = Instant::now();
        let out = request(&s, 1, caller(&mut [], &[]), &mut req);
        (out, t.elapsed())
    }

    /// Every way out of a call's deadline a reviewer found, and the ones found after:
    /// each ends at its deadline (within the hook's 10,000 instructions or the matcher's
    /// 64 Ki steps) with an error that says why.
    #[test]
    fn no_hook_runs_past_its_second_or_its_memory() {
        const EITHER: &str = "its time or its memory";
        let limit = "ran over 1 s";
        for (body, want) in [
            ("coroutine.wrap(function() while true do end end)()", limit),
            ("local co = coroutine.create(function() while true do end end) coroutine.resume(co) while true do end", limit),
            ("table.move({}, 1, 1e15, 1, {})", limit),
            ("string.find(('a'):rep(3000), '.-.-.-.-.-.-.-.-.-.-b')", limit),
            ("string.find(('('):rep(200000), '%b()')", limit),
            ("for w in (('a'):rep(3000)):gmatch('.-.-.-.-.-b') do end", limit),
            ("string.gsub(('a'):rep(3000), '.-.-.-.-.-b', '')", limit),
            ("table.remove(setmetatable({}, {__len = function() return math.maxinteger end}), 1)", limit),
            ("table.insert(setmetatable({}, {__len = function() return math.maxinteger - 1 end}), 1, 0)", limit),
            // A pcall (or a coroutine's resume) cannot swallow the limit and loop on.
            ("while true do pcall(function() while true do end end) end", limit),
            ("while true do pcall(coroutine.wrap(function() while true do end end)) end", limit),
            ("pcall(function() while true do end end) while true do end", limit),
            ("xpcall(function() while true do end end, function() while true do end end) while true do end", limit),
            ("local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do pcall(co) end", limit),
            ("local s = ('x'):rep(1 << 24) s:gsub('', '') s:gsub('', '')", limit),
            ("error(setmetatable({}, {__tostring = function() while true do end end}))", ""),
            ("string.rep('x', math.maxinteger)", "over the script's memory"),
            ("string.rep('x', 1e15, ',')", "over the script's memory"),
            ("local s = ('x'):rep(1 << 20) s:gsub('x', s)", "over the script's memory"),
            // No bytecode: no string.dump, and load takes text only.
            ("load(string.dump(function() end), 'bc', 'b')", "field 'dump'"),
            ("assert(load('\\27LuaT\\0', 'bc', 't'))()", "binary chunk"),
            ("assert(load('\\27LuaT\\0'))()", "binary chunk"),
            ("load('return 1', 'x', 'b')", "only text chunks"),
            // No finalizer, through r's metatable or any other; no metatable to change.
            ("getmetatable(r).__gc = function() end", "index a boolean"),
            ("setmetatable(r, {})", "protected metatable"),
            ("getmetatable('').__index = {}", "index a boolean"),
            ("local mt = {} setmetatable({}, mt) mt.__gc = function() end setmetatable({}, mt)", "__gc finalizer"),
            ("collectgarbage('stop')", "not allowed"),
            ("collectgarbage('generational')", "not allowed"),
            ("table.sort(setmetatable({}, {__len = function() return 1e9 end}))", "with a metatable"),
            // C calling C (rawlen as __index) runs no instruction the hook sees: the
            // string it builds meets the memory limit or the clock first, by the
            // machine's speed; either ends it, with its reason.
            ("table.concat(setmetatable({}, {__len = function() return 1e9 end, __index = rawlen}))", EITHER),
            // Killed inside the hook, a coroutine's `__close` would run with no hook.
            ("coroutine.wrap(function() local x <close> = setmetatable({}, {__close = function() while true do end end}) while true do end end)()", limit),
            ("local co = coroutine.create(function() local x <close> = setmetatable({}, {__close = function() while true do end end}) while true do end end) coroutine.resume(co) coroutine.close(co) while true do end", limit),
            ("local function f(s) return (s:gsub('.', f)) end f('ab')", "more than 16 deep"),
            ("local function f() return f() + 1 end f()", "not enough memory"),
            // Linear C calls in a loop of a few instructions: each reads the clock first
            // (4 MiB: 2,500 calls of ~3 ms between two of the hook's looks, ~6 s).
            ("local s = ('x'):rep(1 << 22) while true do utf8.len(s) end", limit),
            ("local s = ('x'):rep(1 << 22) while true do s:upper() end", limit),
            ("local s = ('x'):rep(1 << 22) while true do strainline.sha256(s) end", limit),
            ("local t = {} for i = 1, 200000 do t[i] = i end while true do select('#', table.unpack(t)) end", limit),
            ("local t = {} for i = 1, 1 << 18 do t[i] = i end for i = 1, (1 << 18) - 1 do t[i] = nil end while true do for k in pairs(t) do end end", limit),
            ("local s = ('x'):rep(1 << 22) while true do pcall(utf8.len, s) end", limit),
        ] {
            let (out, took) = hostile(body);
            let e = out.expect_err(body).0;
            if want == EITHER {
                assert!(
                    e.contains(limit) || e.contains("not enough memory"),
                    "{body}: {e}"
                );
            } else {
                assert!(e.contains(want), "{body}: {e}");
            }
            assert!(took < Duration::from_millis(800), "{body}: {took:?}");
        }
        // What stays cheap and right: an empty string repeated, a plain find on a big
        // subject, the tables' functions as Lua's.
        for body in [
            "assert(string.rep('', math.maxinteger) == '')",
            "assert(('a'):rep(1000000):find(('a'):rep(500000) .. 'b', 1, true) == nil)",
            "local t = {1, 2, 3} table.insert(t, 1, 0) table.insert(t, 9) assert(table.concat(t, ',') == '0,1,2,3,9')",
            "local t = {1, 2, 3} assert(table.remove(t, 1) == 1 and table.remove(t) == 3 and #t == 1)",
            "local t = table.move({1, 2, 3}, 1, 3, 2) assert(table.concat(t, ',') == '1,1,2,3')",
            "local t = {3, 1, 2} table.sort(t) assert(table.concat(t, ',') == '1,2,3')",
            "local t = setmetatable({1, 2, 'x'}, {}) assert(table.concat(t, '-', 2) == '2-x' and table.concat(t) == '12x')",
            "assert(not pcall(table.concat, setmetatable({1, {}}, {})))",
            "assert(load('return 1 + 1')() == 2 and load('return x', 'c', 't', {x = 3})() == 3)",
            "assert(collectgarbage('count') > 0)",
            "local n = 0 local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end) assert(co(1) == 2 and co(5) == 10)",
            "local co = coroutine.create(function() error('x', 0) end) assert(not coroutine.resume(co)) local ok, e = coroutine.close(co) assert(not ok and e == 'x')",
            "local co = coroutine.create(function() end) coroutine.resume(co) assert(coroutine.close(co) == true)",
            "local ok, e = pcall(coroutine.wrap(function() error('y', 0) end)) assert(not ok and e == 'y')",
            "local closed local co = coroutine.create(function() local x <close> = setmetatable({}, {__close = function() closed = true end}) coroutine.yield() end) coroutine.resume(co) assert(coroutine.close(co) and closed)",
            "local ok, e = xpcall(function(a) error({a}) end, function(e) return e[1] + 1 end, 1) assert(not ok and e == 2)",
            "assert(select('#', xpcall(function() return 1, 2 end, tostring)) == 3)",
            "local ok, e = pcall(string.upper) assert(not ok and e:find(\"bad argument #1 to 'string.upper'\"), e)",
            "local ok, e = pcall(utf8.len, 'x', 9) assert(not ok and e:find(\"to 'utf8.len'\"), e)",
            "assert(select(2, 'a', 'b') == 'b' and tostring(1) == '1' and ('abc'):upper() == 'ABC' and utf8.len('\\u{e9}') == 1)",
            "local n = 0 for k, v in pairs({a = 1, b = 2}) do n = n + v end assert(n == 3)",
            "local t = setmetatable({}, {__pairs = function(t) return function(_, k) if not k then return 1, 1 end end, t, nil end}) for k in pairs(t) do assert(k == 1) end",
        ] {
            let (out, took) = hostile(body);
            assert!(out.is_ok(), "{body}: {:?}", out.err().map(|e| e.0));
            assert!(took < Duration::from_millis(500), "{body}: {took:?}");
        }
    }

    /// What a hook hands back to Rust, held outside the Lua limit (per client, for its
    /// variables), is bounded: a 20 MiB `r.vars` value in 32 clients took 692 MB, and
    /// `strainline.json` of 16 MiB of `[],` 732 MB.
    #[test]
    fn what_a_hook_hands_back_is_bounded() {
        let names = vec!["token".to_string()];
        let run = |body: &str| {
            let s = script(&format!("function request(r)\n{body}\nend\n")).unwrap();
            let mut values = vec![None];
            let mut req = rendered(Method::GET, "/", Bytes::new());
            let out = request(&s, 1, caller(&mut values, &names), &mut req);
            (out.map_err(|e| e.0), values, req)
        };
        let (out, values, _) = run("r.vars.token = string.rep('a', 1024 * 1024)");
        let e = out.unwrap_err();
        assert!(
            e.contains("r.vars.token: a value of 1048576 bytes is over the 64 KiB"),
            "{e}"
        );
        assert_eq!(values[0], None);
        let (out, values, _) = run("r.vars.token = string.rep('a', 64 * 1024)");
        out.unwrap();
        assert_eq!(values[0].as_ref().map(String::len), Some(64 << 10));
        let e = run("r.headers['x-a'] = string.rep('a', 65 * 1024)")
            .0
            .unwrap_err();
        assert!(e.contains("r.headers: over the 64 KiB"), "{e}");
        let e = run("for i = 1, 40 do r.headers['x-' .. i] = string.rep('a', 60 * 1024) end")
            .0
            .unwrap_err();
        assert!(e.contains("1024 KiB all of them"), "{e}");
        let e = run("r.path = '/' .. string.rep('a', 65 * 1024)")
            .0
            .unwrap_err();
        assert!(e.contains("r.path: 66561 bytes is over the 64 KiB"), "{e}");
        let (out, _, req) = run("r.headers['x-a'] = string.rep('a', 1000) r.path = '/b'");
        out.unwrap();
        assert_eq!((req.headers[0].1.len(), req.path.as_str()), (1000, "/b"));
        let e = run("strainline.json('[' .. string.rep('[]', 400 * 1024, ',') .. ']')")
            .0
            .unwrap_err();
        assert!(
            e.contains("strainline.json: a text of 1228801 bytes is over the 1024 KiB"),
            "{e}"
        );
        // Under the bound: parsed into Lua's tables, under its memory limit.
        let e = run("local t = strainline.json('[' .. string.rep('{\"a\":[1]}', 10000, ',') .. ']') assert(#t == 10000 and t[1].a[1] == 1)").0;
        e.unwrap();
        for ok in [
            "local d = strainline.json('{\"a\":[1,2.5,\"x\",true,null,{\"b\":18446744073709551615}]}') assert(d.a[1] == 1 and math.type(d.a[1]) == 'integer' and d.a[2] == 2.5 and d.a[3] == 'x' and d.a[4] == true and d.a[5] == nil and d.a[6].b == 18446744073709551615.0)",
            "assert(strainline.json('{') == nil and strainline.json('1 2') == nil and strainline.json('') == nil)",
        ] {
            run(ok).0.unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        // What `strainline.metric` hands back: at most 1024 values a call, each name
        // at most 64 bytes; a call's values alone, taken once.
        let e = run("for i = 1, 2000 do strainline.metric('n', i) end")
            .0
            .unwrap_err();
        assert!(e.contains("more than 1024 values in one call"), "{e}");
        assert!(take_fed().is_empty(), "a failed call's values are not kept");
        let e = run("strainline.metric(string.rep('n', 1 << 20), 1)")
            .0
            .unwrap_err();
        assert!(e.contains("a name of 1048576 bytes"), "{e}");
        let e = run("strainline.metric('n', {})").0.unwrap_err();
        assert!(e.contains("the value is a table"), "{e}");
        run("strainline.metric('n', 2.5) strainline.metric('ok', true)")
            .0
            .unwrap();
        assert_eq!(
            take_fed(),
            vec![("n".to_string(), 2.5), ("ok".to_string(), 1.0)]
        );
        assert!(take_fed().is_empty());
    }

    /// A script's top level runs under the same limits (`check` runs it, to find its hooks).
    #[test]
    fn a_script_s_top_level_is_limited_too() {
        for top in [
            "string.find(('a'):rep(3000), '.-.-.-.-.-.-.-.-.-.-b')",
            "coroutine.wrap(function() while true do end end)()",
            "table.move({}, 1, 1e15, 1, {})",
            "local s = ('x'):rep(1 << 22) while true do utf8.len(s) end",
        ] {
            ending_soon();
            let t = Instant::now();
            let e = script(&format!("{top}\nfunction request(r) end\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("ran over 1 s"), "{top}: {e}");
            assert!(t.elapsed() < Duration::from_millis(800), "{top}");
        }
    }

    /// A run's cancel ends a call at once, not at its second.
    #[test]
    fn a_cancelled_run_ends_a_call_at_once() {
        let s = script("function request(r) while true do end end\n").unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        serve(cancel.clone(), None);
        let flag = cancel.clone();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, Ordering::Relaxed);
        });
        let mut req = rendered(Method::GET, "/", Bytes::new());
        let t = Instant::now();
        let e = request(&s, 1, caller(&mut [], &[]), &mut req)
            .unwrap_err()
            .0;
        stopper.join().unwrap();
        assert!(e.contains("run was stopped"), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(600),
            "{:?}",
            t.elapsed()
        );
        RUN.with(|r| *r.borrow_mut() = None);
    }
}
