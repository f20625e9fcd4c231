//! Lua's string patterns — `string.find`, `match`, `gmatch` and `gsub` — matched as Lua
//! 5.4's `lstrlib.c` matches them, but with the call's deadline checked as they go. Lua's
//! own matcher loops in C, where the instruction hook never fires: `.-.-.-.-.-b` on a
//! few KiB held a call (and the run, and Ctrl-C) for hours. Here every step of the
//! matcher counts, and every 64 Ki steps the clock is read ([`super::over`]). A `gsub`
//! result is held to the script's memory, and a `gsub` whose function calls `gsub`
//! again nests at most [`NESTED`] deep (each level is a Rust frame and a Lua call).

use std::cell::Cell;

use mlua::{Lua, MultiValue, Value};

const MAXCAPTURES: usize = 32;
/// As deep as Lua's matcher recurses (its `MAXCCALLS`): then "pattern too complex".
const MAXDEPTH: usize = 200;
/// How deep `gsub` calls through a function may nest.
const NESTED: u32 = 16;
const ESC: u8 = b'%';
const SPECIALS: &[u8] = b"^$*+?.([%-";

type R<T> = mlua::Result<T>;

fn fail<T>(msg: &str) -> R<T> {
    Err(mlua::Error::runtime(msg))
}

/// A capture: open, closed over `start..start + len`, or a position `()`.
#[derive(Clone, Copy)]
enum Cap {
    Open(usize),
    Closed(usize, usize),
    Position(usize),
}

/// One match attempt's state (Lua's `MatchState`).
struct M<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    caps: Vec<Cap>,
    depth: usize,
    steps: u32,
}

impl<'a> M<'a> {
    fn new(src: &'a [u8], pat: &'a [u8]) -> M<'a> {
        M {
            src,
            pat,
            caps: Vec::new(),
            depth: MAXDEPTH,
            steps: 0,
        }
    }

    /// Counts `n` steps; past the call's deadline, the error that ends it.
    fn tick(&mut self, n: u32) -> R<()> {
        self.steps += n;
        if self.steps >= 1 << 16 {
            self.steps = 0;
            if let Some(why) = super::over() {
                return fail(&why.to_string_lossy());
            }
        }
        Ok(())
    }

    /// The subject's byte at `i`, 0 past its end (Lua's strings end with one).
    fn s(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    fn p(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    fn class_end(&self, mut p: usize) -> R<usize> {
        let c = self.p(p);
        p += 1;
        match c {
            ESC => {
                if p >= self.pat.len() {
                    return fail("malformed pattern (ends with '%')");
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.p(p) == b'^' {
                    p += 1;
                }
                loop {
                    if p >= self.pat.len() {
                        return fail("malformed pattern (missing ']')");
                    }
                    let c = self.pat[p];
                    p += 1;
                    if c == ESC && p < self.pat.len() {
                        p += 1;
                    }
                    if self.p(p) == b']' {
                        return Ok(p + 1);
                    }
                }
            }
            _ => Ok(p),
        }
    }

    /// Whether `c` is in the bracket class `[p..=ec]` (`ec` at its `]`).
    fn bracket(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if self.p(p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                return !sig;
            }
            if self.p(p) == ESC {
                p += 1;
                if class(c, self.p(p)) {
                    return sig;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if self.p(p - 2) <= c && c <= self.p(p) {
                    return sig;
                }
            } else if self.p(p) == c {
                return sig;
            }
        }
    }

    fn single(&self, s: usize, p: usize, ep: usize) -> bool {
        if s >= self.src.len() {
            return false;
        }
        let c = self.src[s];
        match self.p(p) {
            b'.' => true,
            ESC => class(c, self.p(p + 1)),
            b'[' => self.bracket(c, p, ep - 1),
            pc => pc == c,
        }
    }

    /// Where a match of the pattern from `p` on the subject from `s` ends, if it does.
    fn do_match(&mut self, s: usize, p: usize) -> R<Option<usize>> {
        if self.depth == 0 {
            return fail("pattern too complex");
        }
        self.depth -= 1;
        let out = self.match_here(s, p);
        self.depth += 1;
        out
    }

    fn match_here(&mut self, mut s: usize, mut p: usize) -> R<Option<usize>> {
        loop {
            self.tick(1)?;
            if p >= self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat[p] {
                b'(' => {
                    return if self.p(p + 1) == b')' {
                        self.start_capture(s, p + 2, Cap::Position(s))
                    } else {
                        self.start_capture(s, p + 1, Cap::Open(s))
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                ESC if self.p(p + 1) == b'b' => match self.balance(s, p + 2)? {
                    Some(e) => {
                        s = e;
                        p += 4;
                    }
                    None => return Ok(None),
                },
                ESC if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return fail("missing '[' after '%f' in pattern");
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.s(s - 1) };
                    if !self.bracket(previous, p, ep - 1) && self.bracket(self.s(s), p, ep - 1) {
                        p = ep;
                    } else {
                        return Ok(None);
                    }
                }
                ESC if self.p(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.p(p + 1))? {
                        Some(e) => {
                            s = e;
                            p += 2;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    let ep = self.class_end(p)?;
                    let suffix = self.p(ep);
                    if !self.single(s, p, ep) {
                        if matches!(suffix, b'*' | b'?' | b'-') {
                            p = ep + 1;
                            continue;
                        }
                        return Ok(None);
                    }
                    match suffix {
                        b'?' => match self.do_match(s + 1, ep + 1)? {
                            Some(e) => return Ok(Some(e)),
                            None => p = ep + 1,
                        },
                        b'+' => return self.max_expand(s + 1, p, ep),
                        b'*' => return self.max_expand(s, p, ep),
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        }
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> R<Option<usize>> {
        let mut i = 0;
        while self.single(s + i, p, ep) {
            self.tick(1)?;
            i += 1;
        }
        loop {
            if let Some(e) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(e));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> R<Option<usize>> {
        loop {
            if let Some(e) = self.do_match(s, ep + 1)? {
                return Ok(Some(e));
            }
            if !self.single(s, p, ep) {
                return Ok(None);
            }
            s += 1;
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, cap: Cap) -> R<Option<usize>> {
        if self.caps.len() >= MAXCAPTURES {
            return fail("too many captures");
        }
        self.caps.push(cap);
        let out = self.do_match(s, p)?;
        if out.is_none() {
            self.caps.pop();
        }
        Ok(out)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> R<Option<usize>> {
        let Some(l) = self.caps.iter().rposition(|c| matches!(c, Cap::Open(_))) else {
            return fail("invalid pattern capture");
        };
        let Cap::Open(start) = self.caps[l] else {
            unreachable!()
        };
        self.caps[l] = Cap::Closed(start, s - start);
        let out = self.do_match(s, p)?;
        if out.is_none() {
            self.caps[l] = Cap::Open(start);
        }
        Ok(out)
    }

    fn match_capture(&mut self, s: usize, digit: u8) -> R<Option<usize>> {
        let l = usize::from(digit).wrapping_sub(usize::from(b'1'));
        let (start, len) = match self.caps.get(l) {
            Some(Cap::Closed(start, len)) => (*start, *len),
            Some(Cap::Position(_)) => return Ok(None),
            _ => return fail(&format!("invalid capture index %{}", l.wrapping_add(1))),
        };
        self.tick(1 + (len >> 6).min(1 << 16) as u32)?;
        let rest = &self.src[s.min(self.src.len())..];
        Ok((rest.len() >= len && rest[..len] == self.src[start..start + len]).then_some(s + len))
    }

    fn balance(&mut self, mut s: usize, p: usize) -> R<Option<usize>> {
        if p + 1 >= self.pat.len() {
            return fail("malformed pattern (missing arguments to '%b')");
        }
        let (b, e) = (self.pat[p], self.pat[p + 1]);
        if self.s(s) != b {
            return Ok(None);
        }
        let mut open = 1;
        loop {
            s += 1;
            if s >= self.src.len() {
                return Ok(None);
            }
            self.tick(1)?;
            if self.src[s] == e {
                open -= 1;
                if open == 0 {
                    return Ok(Some(s + 1));
                }
            } else if self.src[s] == b {
                open += 1;
            }
        }
    }

    /// Capture `i` as Lua sees it (the whole match `s..e` when there is none).
    fn capture(&self, lua: &Lua, i: usize, s: usize, e: usize) -> R<Value> {
        let (start, len) = match self.caps.get(i) {
            None if i == 0 => (s, e - s),
            None => return fail(&format!("invalid capture index %{}", i + 1)),
            Some(Cap::Open(_)) => return fail("unfinished capture"),
            Some(Cap::Position(at)) => return Ok(Value::Integer(*at as i64 + 1)),
            Some(Cap::Closed(start, len)) => (*start, *len),
        };
        Ok(Value::String(
            lua.create_string(&self.src[start..start + len])?,
        ))
    }

    /// Every capture, or the whole match `s..e` when there is none (and `whole`).
    fn captures(&self, lua: &Lua, s: usize, e: usize, whole: bool) -> R<MultiValue> {
        let n = if self.caps.is_empty() && whole {
            1
        } else {
            self.caps.len()
        };
        (0..n).map(|i| self.capture(lua, i, s, e)).collect()
    }

    fn reset(&mut self) {
        self.caps.clear();
        self.depth = MAXDEPTH;
    }
}

/// Lua's `%a`, `%d`, … (the C locale's classes); any other byte stands for itself.
fn class(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => c == b' ' || (b'\t'..=b'\r').contains(&c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_uppercase() {
        !res
    } else {
        res
    }
}

/// Where `init` (Lua's, from 1, negative from the end) starts in a subject of `len`.
fn start(init: Option<i64>, len: usize) -> usize {
    match init.unwrap_or(1) {
        i if i > 0 => (i as u64).min(len as u64 + 2) as usize - 1,
        0 => 0,
        i if i.unsigned_abs() > len as u64 => 0,
        i => len - i.unsigned_abs() as usize,
    }
}

/// `string.find` (`find`) or `string.match`.
fn find(
    lua: &Lua,
    (s, p, init, plain): (mlua::String, mlua::String, Option<i64>, Option<bool>),
    find: bool,
) -> R<MultiValue> {
    let (sb, pb) = (s.as_bytes(), p.as_bytes());
    let (src, pat): (&[u8], &[u8]) = (&sb, &pb);
    let first = start(init, src.len());
    if init.unwrap_or(1) > src.len() as i64 + 1 {
        return Ok(MultiValue::from_iter([Value::Nil]));
    }
    if find && (plain.unwrap_or(false) || !pat.iter().any(|c| SPECIALS.contains(c))) {
        // A linear search (two-way): no matcher, no steps to count.
        return Ok(match memchr::memmem::find(&src[first..], pat) {
            Some(at) => MultiValue::from_iter([
                Value::Integer((first + at + 1) as i64),
                Value::Integer((first + at + pat.len()) as i64),
            ]),
            None => MultiValue::from_iter([Value::Nil]),
        });
    }
    let anchor = pat.first() == Some(&b'^');
    let mut m = M::new(src, &pat[usize::from(anchor)..]);
    for s1 in first..=src.len() {
        m.reset();
        if let Some(e) = m.do_match(s1, 0)? {
            if !find {
                return m.captures(lua, s1, e, true);
            }
            let mut out =
                MultiValue::from_iter([Value::Integer(s1 as i64 + 1), Value::Integer(e as i64)]);
            out.extend(m.captures(lua, s1, e, false)?);
            return Ok(out);
        }
        if anchor {
            break;
        }
    }
    Ok(MultiValue::from_iter([Value::Nil]))
}

/// `string.gmatch`: an iterator over the matches (a `^` is no anchor here, as in Lua).
fn gmatch(lua: &Lua, (s, p, init): (mlua::String, mlua::String, Option<i64>)) -> R<mlua::Function> {
    let next = Cell::new(start(init, s.as_bytes().len()));
    let last = Cell::new(None);
    lua.create_function(move |lua, ()| {
        let (sb, pb) = (s.as_bytes(), p.as_bytes());
        let mut m = M::new(&sb, &pb);
        let src = m.src;
        for from in next.get()..=src.len() {
            m.reset();
            if let Some(e) = m.do_match(from, 0)? {
                if Some(e) != last.get() {
                    next.set(e);
                    last.set(Some(e));
                    return m.captures(lua, from, e, true);
                }
            }
        }
        next.set(src.len() + 1);
        Ok(MultiValue::new())
    })
}

thread_local! {
    /// How deep `gsub` calls through functions are nested on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// `string.gsub`.
fn gsub(
    lua: &Lua,
    (s, p, repl, max): (mlua::String, mlua::String, Value, Option<i64>),
) -> R<(mlua::String, i64)> {
    if !matches!(
        repl,
        Value::String(_)
            | Value::Integer(_)
            | Value::Number(_)
            | Value::Table(_)
            | Value::Function(_)
    ) {
        return fail(&format!(
            "bad argument #3 to 'gsub' (string/function/table expected, got {})",
            repl.type_name()
        ));
    }
    let depth = DEPTH.with(Cell::get);
    if depth >= NESTED {
        return fail(&format!(
            "gsub: its functions call gsub more than {NESTED} deep"
        ));
    }
    DEPTH.with(|d| d.set(depth + 1));
    let out = substitute(lua, &s, &p, &repl, max);
    DEPTH.with(|d| d.set(depth));
    out
}

fn substitute(
    lua: &Lua,
    s: &mlua::String,
    p: &mlua::String,
    repl: &Value,
    max: Option<i64>,
) -> R<(mlua::String, i64)> {
    let (sb, pb) = (s.as_bytes(), p.as_bytes());
    let (src, pat): (&[u8], &[u8]) = (&sb, &pb);
    let repl_text = match repl {
        Value::Table(_) | Value::Function(_) => None,
        v => Some(lua.coerce_string(v.clone())?.expect("a string or a number")),
    };
    let max = max.unwrap_or(src.len() as i64 + 1);
    let anchor = pat.first() == Some(&b'^');
    let mut m = M::new(src, &pat[usize::from(anchor)..]);
    let mut out: Vec<u8> = Vec::new();
    let (mut at, mut n, mut last, mut changed) = (0, 0, None, false);
    while n < max {
        m.reset();
        match m.do_match(at, 0)? {
            Some(e) if Some(e) != last => {
                n += 1;
                changed |= match &repl_text {
                    Some(text) => {
                        expand(lua, &m, &text.as_bytes(), at, e, &mut out)?;
                        true
                    }
                    None => replaced(lua, &m, repl, at, e, &mut out)?,
                };
                at = e;
                last = Some(e);
            }
            _ if at < src.len() => {
                out.push(src[at]);
                at += 1;
            }
            _ => break,
        }
        if out.len() > super::MEMORY {
            return fail("gsub: a result over the script's memory");
        }
        if anchor {
            break;
        }
    }
    if !changed {
        return Ok((s.clone(), n));
    }
    out.extend_from_slice(&src[at..]);
    Ok((lua.create_string(&out)?, n))
}

/// A replacement string with its `%0`…`%9` and `%%`, after a match of `s..e`.
fn expand(lua: &Lua, m: &M, text: &[u8], s: usize, e: usize, out: &mut Vec<u8>) -> R<()> {
    let mut i = 0;
    while i < text.len() {
        let Some(at) = memchr::memchr(ESC, &text[i..]) else {
            out.extend_from_slice(&text[i..]);
            break;
        };
        out.extend_from_slice(&text[i..i + at]);
        i += at + 1;
        let d = text.get(i).copied().unwrap_or(0);
        i += 1;
        match d {
            ESC => out.push(ESC),
            b'0' => out.extend_from_slice(&m.src[s..e]),
            b'1'..=b'9' => match m.capture(lua, usize::from(d - b'1'), s, e)? {
                Value::Integer(at) => out.extend_from_slice(at.to_string().as_bytes()),
                v => out.extend_from_slice(&lua.coerce_string(v)?.expect("a capture").as_bytes()),
            },
            _ => return fail("invalid use of '%' in replacement string"),
        }
        if out.len() > super::MEMORY {
            return fail("gsub: a result over the script's memory");
        }
    }
    Ok(())
}

/// What a table or function gives for a match of `s..e`: whether it replaced it.
fn replaced(lua: &Lua, m: &M, repl: &Value, s: usize, e: usize, out: &mut Vec<u8>) -> R<bool> {
    let v: Value = match repl {
        Value::Table(t) => t.get(m.capture(lua, 0, s, e)?)?,
        Value::Function(f) => f.call(m.captures(lua, s, e, true)?)?,
        _ => unreachable!("a string replacement is expanded"),
    };
    match v {
        Value::Nil | Value::Boolean(false) => {
            out.extend_from_slice(&m.src[s..e]);
            Ok(false)
        }
        Value::String(_) | Value::Integer(_) | Value::Number(_) => {
            out.extend_from_slice(&lua.coerce_string(v)?.expect("a string").as_bytes());
            Ok(true)
        }
        v => fail(&format!("invalid replacement value (a {})", v.type_name())),
    }
}

/// Puts these in place of the C library's pattern functions.
pub fn install(lua: &Lua) -> R<()> {
    let string: mlua::Table = lua.globals().get("string")?;
    string.set("find", lua.create_function(|lua, a| find(lua, a, true))?)?;
    string.set("match", lua.create_function(|lua, a| find(lua, a, false))?)?;
    string.set("gmatch", lua.create_function(gmatch)?)?;
    string.set("gsub", lua.create_function(gsub)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `expr` gives, as text, in `lua`.
    fn said(lua: &Lua, expr: &str) -> String {
        let code = format!(
            "local function show(...) local t = table.pack(...) local o = {{}} for i = 1, t.n do o[i] = type(t[i]) .. ':' .. tostring(t[i]) end return table.concat(o, ' ') end\n\
             local ok, e = pcall(function() return show({expr}) end) return ok and e or ('error: ' .. tostring(e):match('[^\\n]*'):gsub('^runtime error: ', ''):gsub('^.-:%d+: ', ''))"
        );
        lua.load(code).eval::<String>().unwrap()
    }

    /// Lua's own `lstrlib.c` and this port give the same answers, errors included.
    #[test]
    fn the_port_answers_as_lua_s_own_matcher_does() {
        let theirs = Lua::new();
        let ours = Lua::new();
        install(&ours).unwrap();
        let cases = [
            r#"string.find("hello world", "o w")"#,
            r#"string.find("hello world", "o", 6)"#,
            r#"string.find("hello", "l+")"#,
            r#"string.find("hello", "", 10)"#,
            r#"string.find("hello", "", 6)"#,
            r#"string.find("hello", "xyz", -2)"#,
            r#"string.find("a.b", ".", 1, true)"#,
            r#"string.find("  key = value", "(%w+)%s*=%s*(%w+)")"#,
            r#"string.find("abc", "^b")"#,
            r#"string.find("abc", "^a()")"#,
            r#"string.match("key=val; k2=v2", "(%w+)=(%w+)$")"#,
            r#"string.match("2024-05-06", "(%d+)-(%d+)-(%d+)")"#,
            r#"string.match("[[x]]", "%[(.-)%]")"#,
            r#"string.match("THE (quick) fox", "%((%a+)%)")"#,
            r#"string.match("f(a(b)c)d", "%b()")"#,
            r#"string.match("THE (quick) fox", "%f[%a]%a+", 5)"#,
            r#"string.match("hello", ".-(l+)(.*)")"#,
            r#"string.match("abcabc", "(abc)%1")"#,
            r#"string.match("x = [=[a]=]", "%[(=*)%[(.-)%]%1%]")"#,
            r#"string.match("aaa", "a-$")"#,
            r#"string.match("aaab", "a*ab?$")"#,
            r#"string.match("xyz", "[^%a]")"#,
            r#"string.match("a-z", "[a%-z]+")"#,
            r#"string.match("]x", "[]]")"#,
            r#"string.match("\0a", "%z?a")"#,
            r#"string.match("tab\there", "%s(%S+)")"#,
            r#"string.match("x", "(")"#,
            r#"string.match("x", "%")"#,
            r#"string.match("x", "[a")"#,
            r#"string.match("x", "%b")"#,
            r#"string.match("x", "%f")"#,
            r#"string.match("x", "(x)%2")"#,
            r#"string.match("x", "x)")"#,
            r#"string.match(("a"):rep(40), ("(a)"):rep(33))"#,
            r#"string.gsub("hello world", "o", "0")"#,
            r#"string.gsub("hello world", "(%w+)", "<%1>")"#,
            r#"string.gsub("hello world", "%w+", "%0 %0", 1)"#,
            r#"string.gsub("abc", "", "-")"#,
            r#"string.gsub("abc", "^", ">")"#,
            r#"string.gsub("$name is $age", "%$(%w+)", {name = "Ann", age = 7})"#,
            r#"string.gsub("1 2 3", "%d", function(d) return d * 2 end)"#,
            r#"string.gsub("1 2 3", "%d", function(d) if d == "2" then return false end return "x" end)"#,
            r#"string.gsub("abc", "b", "%2")"#,
            r#"string.gsub("abc", "b", "%x")"#,
            r#"string.gsub("abc", "b", "%%")"#,
            r#"string.gsub("abc", "(b)()", "%2")"#,
            r#"string.gsub("abc", "b", {})"#,
            r#"string.gsub("abc", "b", function() return {} end)"#,
            r#"string.gsub("abc", "b", true)"#,
            r#"string.gsub("abc", "b", 1.5)"#,
            r#"("a,b,,c"):gsub(",", ";")"#,
        ];
        for case in cases {
            assert_eq!(said(&ours, case), said(&theirs, case), "{case}");
        }
        let gm = r#"(function() local o = {} for k, v in string.gmatch("a=1, b=2, c=3", "(%w+)=(%w+)") do o[#o+1] = k .. v end
                    for w in string.gmatch("one two", "%a*") do o[#o+1] = "[" .. w .. "]" end
                    for p in ("abc"):gmatch("()") do o[#o+1] = p end
                    for w in ("abc"):gmatch(".", 2) do o[#o+1] = w end
                    for w in ("abc"):gmatch(".", 9) do o[#o+1] = w end
                    return table.concat(o, ",") end)()"#;
        assert_eq!(said(&ours, gm), said(&theirs, gm));
    }
}
