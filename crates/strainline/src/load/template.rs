//! Templated text for scenario requests: `{{client}}` (the virtual client's number),
//! `{{seq}}` (its request counter), `{{random N}}` (N random alphanumeric bytes) and
//! `{{csv.COLUMN}}` or `{{row.COLUMN}}` (the client's row of the scenario's `csv` or
//! `jsonl` file), `{{uuid}}` (a random version-4 UUID, new at each use), `{{now_ms}}`
//! (the wall clock in Unix milliseconds), `{{env.NAME}}` (the environment's, read once)
//! and `{{NAME}}` (a variable of the client's flow: extracted, `[vars]`, a step's `set`); `{{NAME|url}}` percent-encodes a value and
//! `{{'{{'}}` is text as it stands (how `{{` itself is sent). Parsed once, rendered per request into a
//! reused buffer.

use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Lit(Vec<u8>),
    /// `{{'TEXT'}}`: text as it stands, a word's part wherever it is (not syntax).
    Quoted(Vec<u8>),
    Client,
    Seq,
    Random(usize),
    Uuid,
    NowMs,
    Csv(usize),
    /// `{{NAME|url}}`: another placeholder's value, percent-encoded (all but
    /// `A-Z a-z 0-9 - . _ ~`), for a query or a form field.
    Url(Box<Piece>),
    /// A flow variable, by its index among the scenario's.
    Var(usize),
    /// Another placeholder's value escaped for a JSON string (a `json = {…}` body's).
    Json(Box<Piece>),
}

/// How [`Text::encoded`] makes a text a field of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encode {
    /// A form field's name or value (`application/x-www-form-urlencoded`).
    Form,
    /// The inside of a JSON string.
    Json,
}

/// The flow variable a piece reads, through its filters.
fn var_of(p: &Piece) -> Option<usize> {
    match p {
        Piece::Var(i) => Some(*i),
        Piece::Url(inner) | Piece::Json(inner) => var_of(inner),
        _ => None,
    }
}

/// `raw` escaped for the inside of a JSON string (RFC 8259: `"`, `\` and controls).
pub fn json_escape(raw: &[u8], out: &mut Vec<u8>) {
    for &b in raw {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            b => out.push(b),
        }
    }
}

/// What put a byte into a rendered text: its own text (or a placeholder of the tool's:
/// `{{client}}`, `{{seq}}`, `{{random N}}`), a data file's column, a flow variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Culprit {
    Literal,
    Csv(usize),
    Var(usize),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    pieces: Vec<Piece>,
}

/// Values a template is rendered with.
pub struct Vars<'a> {
    pub client: u64,
    pub seq: u64,
    /// The client's CSV row, if the scenario has a CSV file.
    pub row: Option<&'a [String]>,
    pub random: &'a RandomPool,
    /// The client's flow variables (`None`: not extracted yet).
    pub values: &'a [Option<String>],
}

/// The most random bytes one text's `{{random N}}` placeholders may make in all: 64 MiB,
/// the largest body (`limits::BODY_BYTES`), so that no text renders gigabytes a request.
pub const MAX_RENDERED: usize = 64 << 20;

/// Random alphanumeric bytes, made once; `{{random N}}` takes a window of it.
#[derive(Clone)]
pub struct RandomPool(Arc<Vec<u8>>);

impl std::fmt::Debug for RandomPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RandomPool({} bytes)", self.0.len())
    }
}

impl RandomPool {
    pub fn new(seed: u64) -> RandomPool {
        RandomPool(Arc::new(crate::rng::text(64 * 1024, seed)))
    }

    fn write(&self, n: usize, salt: u64, out: &mut Vec<u8>) {
        let pool = &self.0;
        // Mixed whole: `salt`'s high bits (the request counter) move the start too.
        let mut start = (crate::rng::mix(salt) % pool.len() as u64) as usize;
        let mut left = n;
        while left > 0 {
            let take = left.min(pool.len() - start);
            out.extend_from_slice(&pool[start..start + take]);
            left -= take;
            start = 0;
        }
    }
}

impl Text {
    /// Parses `s`; `columns` are the CSV header's names. The error says what is wrong
    /// and at which byte offset of `s`.
    pub fn parse(s: &str, columns: &[String]) -> Result<Text, (usize, String)> {
        Text::parse_with(s, columns, &[])
    }

    /// [`Text::parse`] where `names` are the variables the scenario's steps extract.
    pub fn parse_with(
        s: &str,
        columns: &[String],
        names: &[String],
    ) -> Result<Text, (usize, String)> {
        let mut pieces = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        let mut random = 0usize;
        while i < s.len() {
            if s[i..].starts_with("{{") {
                let close = s[i..]
                    .find("}}")
                    .ok_or((i, "'{{' without a closing '}}'".to_string()))?;
                let inner = s[i + 2..i + close].trim();
                // `{{'{{'}}`: text as it stands (the way to send `{{` itself).
                if let Some(text) = inner.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
                    if !lit.is_empty() {
                        pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    pieces.push(Piece::Quoted(text.as_bytes().to_vec()));
                    i += close + 2;
                    continue;
                }
                if let Some((base, filter)) = inner.split_once('|') {
                    if filter.trim() != "url" {
                        return Err((
                            i,
                            format!(
                                "unknown filter '{}' in '{{{{{inner}}}}}' (expected url: {{{{NAME|url}}}} sends the value percent-encoded)",
                                filter.trim()
                            ),
                        ));
                    }
                    let one = Text::parse_with(&format!("{{{{{}}}}}", base.trim()), columns, names)
                        .map_err(|(_, e)| (i, e))?;
                    let [p] = one.pieces.as_slice() else {
                        return Err((i, format!("'{{{{{inner}}}}}': url takes one placeholder")));
                    };
                    // Its random bytes count against the text's (encoded, up to three
                    // times as many).
                    if let Piece::Random(bytes) = p {
                        random += 3 * bytes;
                        if random > MAX_RENDERED {
                            return Err((
                                i,
                                format!(
                                    "'{{{{{inner}}}}}': the text's random bytes, percent-encoded, would reach {random}, more than {MAX_RENDERED} (64 MiB, the largest body): give a smaller N"
                                ),
                            ));
                        }
                    }
                    if !lit.is_empty() {
                        pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    pieces.push(Piece::Url(Box::new(p.clone())));
                    i += close + 2;
                    continue;
                }
                let piece = placeholder(inner, i, columns, names, &mut random)?;
                if !lit.is_empty() {
                    pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                pieces.push(piece);
                i += close + 2;
            } else {
                let ch = s[i..].chars().next().expect("in bounds");
                let mut b = [0u8; 4];
                lit.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                i += ch.len_utf8();
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        Ok(Text { pieces })
    }

    /// Whether the text is the same for every request.
    #[cfg(test)]
    pub fn is_constant(&self) -> bool {
        self.pieces
            .iter()
            .all(|p| matches!(p, Piece::Lit(_) | Piece::Quoted(_)))
    }

    /// Literal text, as it stands.
    pub fn literal(text: &[u8]) -> Text {
        Text {
            pieces: vec![Piece::Lit(text.to_vec())],
        }
    }

    /// The random bytes its `{{random N}}` make (alphanumeric: escaped for a form or
    /// JSON, as many).
    pub fn random_bytes(&self) -> usize {
        fn of(p: &Piece) -> usize {
            match p {
                Piece::Random(n) => *n,
                Piece::Url(inner) | Piece::Json(inner) => of(inner),
                _ => 0,
            }
        }
        self.pieces.iter().map(of).sum()
    }

    /// The texts one after another, as one text.
    pub fn concat(texts: impl IntoIterator<Item = Text>) -> Text {
        let mut pieces: Vec<Piece> = Vec::new();
        for t in texts {
            for p in t.pieces {
                match (pieces.last_mut(), p) {
                    (Some(Piece::Lit(a)), Piece::Lit(b)) => a.extend_from_slice(&b),
                    (_, p) => pieces.push(p),
                }
            }
        }
        Text { pieces }
    }

    /// The text as a field of a body: its own text escaped now, each placeholder's value
    /// escaped as it is rendered (`{{name}}` in a form sends `a%26b` for `a&b`; in JSON,
    /// `a\"b` for `a"b`). A value already `|url`-encoded is left so in a form.
    pub fn encoded(&self, how: Encode) -> Text {
        let pieces = self
            .pieces
            .iter()
            .map(|p| match (p, how) {
                (Piece::Lit(b) | Piece::Quoted(b), _) => {
                    let mut out = Vec::new();
                    match how {
                        Encode::Form => crate::units::percent_encode(b, &mut out),
                        Encode::Json => json_escape(b, &mut out),
                    }
                    Piece::Lit(out)
                }
                (Piece::Url(_), Encode::Form) => p.clone(),
                (p, Encode::Form) => Piece::Url(Box::new(p.clone())),
                (p, Encode::Json) => Piece::Json(Box::new(p.clone())),
            })
            .collect();
        Text { pieces }
    }

    /// `text` as it stands: no placeholder read in it, one word wherever it is.
    pub fn quoted(text: &str) -> Text {
        Text {
            pieces: vec![Piece::Quoted(text.as_bytes().to_vec())],
        }
    }

    /// Its text when it has no placeholder (one piece of text, or none): a check
    /// compares with it as it stands, without rendering.
    pub fn constant(&self) -> Option<&[u8]> {
        match self.pieces.as_slice() {
            [] => Some(&[]),
            [Piece::Lit(b) | Piece::Quoted(b)] => Some(b),
            _ => None,
        }
    }

    /// Rendered with `v`, or borrowed as it stands when it has no placeholder.
    pub fn rendered<'t>(&'t self, v: &Vars) -> std::borrow::Cow<'t, [u8]> {
        match self.constant() {
            Some(b) => std::borrow::Cow::Borrowed(b),
            None => {
                let mut out = Vec::new();
                self.render(v, &mut out);
                std::borrow::Cow::Owned(out)
            }
        }
    }

    pub fn render(&self, v: &Vars, out: &mut Vec<u8>) {
        for p in &self.pieces {
            render_piece(p, v, out);
        }
    }

    /// Its words, for a protocol whose body is a command of words (Redis): split at
    /// the whitespace of its own text outside `"…"` (where `\` escapes the next
    /// character), as the protocol splits a workload's command. A placeholder belongs
    /// to the word it stands in, so its value stays one word whatever it holds.
    pub fn words(&self) -> Vec<Text> {
        let mut words: Vec<Text> = Vec::new();
        let mut word: Option<Text> = None;
        let (mut quoted, mut escaped) = (false, false);
        let push_lit = |w: &mut Option<Text>, bytes: &[u8]| {
            let w = w.get_or_insert_with(|| Text { pieces: Vec::new() });
            match w.pieces.last_mut() {
                Some(Piece::Lit(l)) => l.extend_from_slice(bytes),
                _ => w.pieces.push(Piece::Lit(bytes.to_vec())),
            }
        };
        for p in &self.pieces {
            let Piece::Lit(lit) = p else {
                word.get_or_insert_with(|| Text { pieces: Vec::new() })
                    .pieces
                    .push(p.clone());
                continue;
            };
            for &b in lit {
                match b {
                    _ if escaped => {
                        escaped = false;
                        push_lit(&mut word, &[b]);
                    }
                    b'\\' if quoted => escaped = true,
                    b'"' if quoted => quoted = false,
                    b'"' if word.is_none() => {
                        quoted = true;
                        push_lit(&mut word, &[]);
                    }
                    b if b.is_ascii_whitespace() && !quoted => words.extend(word.take()),
                    b => push_lit(&mut word, &[b]),
                }
            }
        }
        words.extend(word);
        words
    }

    /// What put a byte `bad` refuses into the text as rendered with `v`: its own
    /// text, or one of its placeholders.
    pub fn culprit(&self, v: &Vars, bad: impl Fn(u8) -> bool) -> Option<Culprit> {
        self.pieces.iter().find_map(|p| {
            let mut out = Vec::new();
            let (culprit, text): (Culprit, &[u8]) = match p {
                Piece::Lit(b) | Piece::Quoted(b) => (Culprit::Literal, b),
                Piece::Csv(i) => (
                    Culprit::Csv(*i),
                    v.row
                        .and_then(|r| r.get(*i))
                        .map_or(&[][..], |c| c.as_bytes()),
                ),
                Piece::Var(i) => (
                    Culprit::Var(*i),
                    v.values
                        .get(*i)
                        .and_then(|x| x.as_deref())
                        .map_or(&[][..], str::as_bytes),
                ),
                Piece::Client
                | Piece::Seq
                | Piece::Random(_)
                | Piece::Uuid
                | Piece::NowMs
                | Piece::Url(_)
                | Piece::Json(_) => {
                    let one = Text {
                        pieces: vec![p.clone()],
                    };
                    one.render(v, &mut out);
                    (Culprit::Literal, &out[..])
                }
            };
            text.iter().any(|&b| bad(b)).then_some(culprit)
        })
    }

    /// The first flow variable it uses that `values` lacks: it cannot be sent.
    /// The flow variables it reads, in order (a variable read twice, twice).
    pub fn reads(&self) -> Vec<usize> {
        self.pieces.iter().filter_map(var_of).collect()
    }

    pub fn missing(&self, values: &[Option<String>]) -> Option<usize> {
        self.pieces.iter().find_map(|p| {
            let var = var_of(p)?;
            values.get(var).is_none_or(|v| v.is_none()).then_some(var)
        })
    }

    pub fn render_string(&self, v: &Vars) -> String {
        let mut out = Vec::new();
        self.render(v, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// One word placeholder's piece (`{{client}}`, `{{random N}}`, `{{env.NAME}}`,
/// `{{csv.COLUMN}}`, a variable of the flow…), from its text `inner` at byte `i`;
/// `random` counts the text's random bytes so far.
fn placeholder(
    inner: &str,
    i: usize,
    columns: &[String],
    names: &[String],
    random: &mut usize,
) -> Result<Piece, (usize, String)> {
    Ok(
        match inner.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["client"] => Piece::Client,
            ["seq"] => Piece::Seq,
            ["uuid"] => Piece::Uuid,
            ["now_ms"] => Piece::NowMs,
            ["random", n] => {
                let bytes: usize = n.parse().map_err(|_| {
                    (
                        i,
                        format!("{{{{random {n}}}}}: N must be a number of bytes"),
                    )
                })?;
                *random += bytes;
                if *random > MAX_RENDERED {
                    return Err((
                    i,
                    format!(
                        "{{{{random {n}}}}}: the text's random bytes would reach {random}, more than {MAX_RENDERED} (64 MiB, the largest body): give a smaller N"
                    ),
                ));
                }
                Piece::Random(bytes)
            }
            // The environment's value, read once, as data: a word's part, one
            // RESP argument, never syntax.
            [name] if name.starts_with("env.") => {
                let var = &name[4..];
                if var.is_empty() || var.contains('=') {
                    return Err((i, format!("{{{{{name}}}}}: give the environment variable's name, e.g. {{{{env.API_TOKEN}}}}")));
                }
                match std::env::var(var) {
                Ok(v) => Piece::Quoted(v.into_bytes()),
                Err(std::env::VarError::NotPresent) => return Err((
                    i,
                    format!("{{{{{name}}}}}: the environment has no {var} (export it before the run: it is read where the scenario is loaded, on each agent with --agents)"),
                )),
                Err(std::env::VarError::NotUnicode(_)) => return Err((
                    i,
                    format!("{{{{{name}}}}}: the environment's {var} is not UTF-8"),
                )),
            }
            }
            [name] if name.starts_with("csv.") || name.starts_with("row.") => {
                let col = &name[4..];
                let idx = columns.iter().position(|c| c == col).ok_or_else(|| {
                (
                    i,
                    if columns.is_empty() {
                        format!("{{{{{name}}}}} needs a data file (add csv = \"FILE\" or jsonl = \"FILE\" to the scenario)")
                    } else {
                        format!("{{{{{name}}}}}: the data file has no column '{col}' (it has: {})", columns.join(", "))
                    },
                )
            })?;
                Piece::Csv(idx)
            }
            [name] if names.iter().any(|n| n == name) => {
                Piece::Var(names.iter().position(|n| n == name).expect("found"))
            }
            _ => {
                let extracted = match names {
                    [] => "a variable of the flow: it has none".to_string(),
                    n => format!("a variable of the flow: {}", n.join(", ")),
                };
                return Err((
                i,
                format!(
                    "unknown placeholder '{{{{{inner}}}}}' (expected {{{{client}}}}, {{{{seq}}}}, {{{{random N}}}}, {{{{uuid}}}}, {{{{now_ms}}}}, {{{{env.NAME}}}}, {{{{csv.COLUMN}}}} or {extracted})"
                ),
            ));
            }
        },
    )
}

/// `n` in decimal at the end of `out`, as `n.to_string()` writes it, without a String
/// or the formatter (it is rendered per request).
pub fn push_decimal(mut n: u64, out: &mut Vec<u8>) {
    if n < 10 {
        out.push(b'0' + n as u8);
        return;
    }
    // Two digits a division.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[n as usize * 2..n as usize * 2 + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    out.extend_from_slice(&digits[at..]);
}

/// One piece of a text, rendered with `v` onto `out`.
fn render_piece(p: &Piece, v: &Vars, out: &mut Vec<u8>) {
    match p {
        Piece::Lit(b) | Piece::Quoted(b) => out.extend_from_slice(b),
        Piece::Client => push_decimal(v.client, out),
        Piece::Seq => push_decimal(v.seq, out),
        Piece::Random(n) => v.random.write(*n, v.client ^ (v.seq << 20), out),
        Piece::Uuid => uuid(out),
        Piece::NowMs => {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            out.extend_from_slice(ms.to_string().as_bytes())
        }
        Piece::Csv(i) => {
            if let Some(cell) = v.row.and_then(|r| r.get(*i)) {
                out.extend_from_slice(cell.as_bytes())
            }
        }
        Piece::Var(i) => {
            if let Some(Some(value)) = v.values.get(*i) {
                out.extend_from_slice(value.as_bytes())
            }
        }
        Piece::Url(inner) => {
            let mut raw = Vec::new();
            render_piece(inner, v, &mut raw);
            crate::units::percent_encode(&raw, out);
        }
        Piece::Json(inner) => {
            let mut raw = Vec::new();
            render_piece(inner, v, &mut raw);
            json_escape(&raw, out);
        }
    }
}

/// A version-4 UUID (RFC 9562) in its 36-character text: 122 random bits from a
/// per-thread generator seeded from the kernel's randomness, so that no two runs, threads
/// or uses share one; made without allocating (it is rendered per request).
fn uuid(out: &mut Vec<u8>) {
    use std::cell::RefCell;
    thread_local! {
        static RNG: RefCell<crate::rng::Rng> = RefCell::new(crate::rng::Rng::new(crate::rng::fresh_seed()));
    }
    let (hi, lo) = RNG.with(|r| {
        let mut r = r.borrow_mut();
        (r.next_u64(), r.next_u64())
    });
    let hi = (hi & !0xF000) | 0x4000; // version 4
    let lo = (lo & !(0b11 << 62)) | (0b10 << 62); // variant 10
    let hex = crate::units::HEX_LOWER;
    for (i, byte) in hi
        .to_be_bytes()
        .into_iter()
        .chain(lo.to_be_bytes())
        .enumerate()
    {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.extend_from_slice(&[hex[usize::from(byte >> 4)], hex[usize::from(byte & 15)]]);
    }
}

/// `word` as one quoted word of a command (`"…"`, its `"` and `\` escaped), which the
/// protocol's splitting reads back as exactly `word`.
pub fn quote_word(word: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in word {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_written_as_to_string_writes_it() {
        for n in [
            0,
            7,
            10,
            99,
            100,
            101,
            999,
            1000,
            1 << 40,
            1_234_567_890,
            u64::MAX,
        ] {
            let mut out = b"k".to_vec();
            push_decimal(n, &mut out);
            assert_eq!(out, format!("k{n}").into_bytes());
        }
        // Each number of digits' ends: 10^k - 1, 10^k, 10^k + 1, and u64's last ones.
        let mut edges: Vec<u64> = (1..20).map(|k| 10u64.pow(k)).collect();
        edges.extend((0..64).map(|b| 1u64 << b));
        for p in edges {
            for n in [p - 1, p, p + 1, u64::MAX - p] {
                let mut out = Vec::new();
                push_decimal(n, &mut out);
                assert_eq!(out, n.to_string().into_bytes());
            }
        }
    }

    /// `t` rendered for client 0's first request with flow values `values`.
    fn rendered(t: &Text, values: &[Option<String>]) -> String {
        let pool = RandomPool::new(1);
        t.render_string(&Vars {
            client: 0,
            seq: 0,
            row: None,
            random: &pool,
            values,
        })
    }

    #[test]
    fn a_value_stays_one_word_of_a_command() {
        let names = ["v".to_string()];
        let t =
            Text::parse_with(r#"SET  "a key" k:{{v}}x "say \"hi\"" {{v}}"#, &[], &names).unwrap();
        let words = t.words();
        // A quoted text is a word's part, its quote and space not syntax.
        let q = Text::parse(r#"SET {{'"'}}a b{{'"'}} v{{' '}}w"#, &[]).unwrap();
        let said: Vec<String> = q.words().iter().map(|w| rendered(w, &[])).collect();
        assert_eq!(said, ["SET", "\"a", "b\"", "v w"]);
        let pool = RandomPool::new(1);
        let values = [Some("v EX 1\r\n\"q".to_string())];
        let vars = Vars {
            client: 0,
            seq: 0,
            row: None,
            random: &pool,
            values: &values,
        };
        let rendered: Vec<String> = words.iter().map(|w| w.render_string(&vars)).collect();
        assert_eq!(
            rendered,
            [
                "SET",
                "a key",
                "k:v EX 1\r\n\"qx",
                "say \"hi\"",
                "v EX 1\r\n\"q"
            ]
        );
        let mut quoted = Vec::new();
        quote_word(rendered[2].as_bytes(), &mut quoted);
        assert_eq!(quoted, b"\"k:v EX 1\r\n\\\"qx\"");
    }

    #[test]
    fn a_value_is_sent_percent_encoded_with_url_and_braces_as_text_when_quoted() {
        let names = ["tok".to_string()];
        let t =
            Text::parse_with("a={{tok|url}}&b={{ tok | url }}&c={{'{{'}}x}}", &[], &names).unwrap();
        assert_eq!(
            rendered(&t, &[Some("AbC+d/E=1 &x".to_string())]),
            "a=AbC%2Bd%2FE%3D1%20%26x&b=AbC%2Bd%2FE%3D1%20%26x&c={{x}}"
        );
        assert_eq!(t.missing(&[None]), Some(0));
        let e = Text::parse_with("{{tok|upper}}", &[], &names).unwrap_err();
        assert!(e.1.contains("unknown filter 'upper'"), "{e:?}");
        // Random bytes behind url count against the text's 64 MiB, encoded.
        let e = Text::parse("{{random 20000000|url}}{{random 20000000|url}}", &[]).unwrap_err();
        assert!(e.1.contains("percent-encoded, would reach"), "{e:?}");
        let e = Text::parse_with("{{nope|url}}", &[], &names).unwrap_err();
        assert!(e.1.contains("unknown placeholder '{{nope}}'"), "{e:?}");
    }

    #[test]
    fn a_uuid_is_version_4_and_new_at_each_use() {
        let t = Text::parse("{{uuid}} {{uuid}} {{now_ms}}", &[]).unwrap();
        let (a, b) = (rendered(&t, &[]), rendered(&t, &[]));
        let parts: Vec<&str> = a.split(' ').collect();
        let re = regex::Regex::new(
            "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
        )
        .unwrap();
        assert!(re.is_match(parts[0]) && re.is_match(parts[1]), "{a}");
        assert_ne!(parts[0], parts[1]);
        assert_ne!(a.split(' ').next(), b.split(' ').next());
        let ms: u128 = parts[2].parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        assert!(ms <= now && now - ms < 5_000, "{ms} vs {now}");
    }

    #[test]
    fn renders_every_placeholder() {
        let cols = vec!["serial".to_string(), "model".to_string()];
        let t = Text::parse(
            "/push/{{client}}?n={{seq}}&s={{csv.serial}}&r={{random 8}}",
            &cols,
        )
        .unwrap();
        let pool = RandomPool::new(1);
        let row = vec!["SN-42".to_string(), "ICR".to_string()];
        let out = t.render_string(&Vars {
            client: 7,
            seq: 3,
            row: Some(&row),
            random: &pool,
            values: &[],
        });
        assert!(out.starts_with("/push/7?n=3&s=SN-42&r="), "{out}");
        let r = &out["/push/7?n=3&s=SN-42&r=".len()..];
        assert_eq!(r.len(), 8);
        assert!(r.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert!(!t.is_constant());
        assert!(Text::parse("/health", &cols).unwrap().is_constant());
    }

    #[test]
    fn random_bytes_differ_request_to_request_and_client_to_client() {
        let t = Text::parse("{{random 16}}", &[]).unwrap();
        let pool = RandomPool::new(1);
        let render = |client, seq| {
            t.render_string(&Vars {
                client,
                seq,
                row: None,
                random: &pool,
                values: &[],
            })
        };
        let mut seen = std::collections::HashSet::new();
        for client in 0..4 {
            for seq in 0..64 {
                seen.insert(render(client, seq));
            }
        }
        // A Redis workload renders as client 0: its requests must not all send the
        // same bytes (they did: the counter's bits never reached the pool's window).
        assert!(seen.len() >= 250, "{} distinct of 256", seen.len());
    }

    #[test]
    fn explains_bad_placeholders_with_their_position() {
        let e = Text::parse("/x/{{clinet}}", &[]).unwrap_err();
        assert_eq!(e.0, 3);
        assert!(e.1.contains("unknown placeholder '{{clinet}}'"), "{}", e.1);
        let e = Text::parse("/x/{{csv.id}}", &[]).unwrap_err();
        assert!(e.1.contains("needs a data file"), "{}", e.1);
        let e = Text::parse("/x/{{csv.id}}", &["serial".to_string()]).unwrap_err();
        assert!(e.1.contains("no column 'id' (it has: serial)"), "{}", e.1);
        assert!(Text::parse("/x/{{seq", &[])
            .unwrap_err()
            .1
            .contains("without a closing"));
    }
}
