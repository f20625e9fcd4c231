//! Data feeders: the rows of a scenario's `csv` or `jsonl` file, handed to clients as
//! `csv_order` says (per client, sequential, random, unique). A file of any size is read
//! one way: checked and indexed in one pass as the scenario loads (`check` and `run`
//! alike), then its rows read from disk as clients take them. Memory holds the index
//! (16 bytes a block of [`STRIDE`] rows or [`BLOCK`] bytes, at most [`MAX_MARKS`] blocks),
//! the rows read last (about [`CACHE`] bytes) and the rows clients hold, none over
//! [`MAX_ROW`] bytes: a longer one is refused at its line, the file read no further.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// A row: its cells, in the order of the file's columns.
pub type Row = Arc<[String]>;

/// The most a row may hold, its line end included (a CSV row's quoted newlines too):
/// 64 KiB. A longer one is refused at its line, before more of the file is read.
pub const MAX_ROW: u64 = 64 << 10;

/// A block of the index ends after this many rows or [`BLOCK`] bytes, whichever comes
/// first (twice as many each time the index is thinned, see [`MAX_MARKS`]): a take that
/// misses reads through the block to its row, then as many rows again for the next
/// takes.
pub const STRIDE: u64 = 256;
/// See [`STRIDE`].
pub const BLOCK: u64 = 16 << 10;

/// The most blocks the index holds (16 bytes each: 16 MiB). A file of more — hundreds
/// of millions of rows — keeps every other one, as often as needed: its blocks are
/// longer, its memory the same.
pub const MAX_MARKS: usize = 1 << 20;

/// The rows read last, kept for the next takes (as `cost` estimates them): 8 MiB.
pub const CACHE: usize = 8 << 20;

/// How clients take rows (`csv_order`): a row is taken when a client starts its flow
/// (and again at each `restart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Client i uses row i mod rows (the default).
    Client,
    /// The next row, in file order, wrapping.
    Sequential,
    /// A row drawn at random (the client's seeded stream).
    Random,
    /// Each row once; then the client stops (`csv_exhausted = "stop"`, the default) or
    /// the rows start again (`"wrap"`).
    Unique { wrap: bool },
}

/// The file's format, from the key that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `csv`: RFC 4180, a header row naming the columns.
    Csv,
    /// `jsonl`: one JSON object a line; the first one's keys are the columns, and every
    /// line must have them (a string is its text, any other value its JSON).
    Jsonl,
}

impl Format {
    pub fn key(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
        }
    }
}

/// Why a client got no row: the rows of `unique` ran out, or the file could no longer
/// be read as it was checked (cut short or changed since; the first such error logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRow {
    RanOut,
    Unreadable,
}

/// A scenario's data: its columns and rows, and where `sequential` and `unique` are.
#[derive(Debug)]
pub struct Data {
    pub columns: Vec<String>,
    pub order: Order,
    /// The next row `sequential` and `unique` hand out (this generator's).
    next: AtomicU64,
    feed: Arc<Feed>,
}

impl Clone for Data {
    fn clone(&self) -> Data {
        Data {
            columns: self.columns.clone(),
            order: self.order,
            next: AtomicU64::new(self.next.load(Relaxed)),
            feed: self.feed.clone(),
        }
    }
}

impl Data {
    /// Checks and indexes `file`: every row is checked now, so that a run never meets a
    /// bad one. The error names the key and file, says which row and line, and why.
    pub fn load(file: &Path, format: Format, order: Order) -> crate::error::Result<Data> {
        crate::os::file::check(file, format.key(), u64::MAX)?;
        let feed = Feed::open(file, format, MAX_MARKS)
            .map_err(|e| e.context(format_args!("{}: {}", format.key(), file.display())))?;
        Ok(Data {
            columns: feed.columns.clone(),
            order,
            next: AtomicU64::new(0),
            feed: Arc::new(feed),
        })
    }

    pub fn len(&self) -> u64 {
        self.feed.count
    }

    /// The row `client` takes as it starts its flow, or why there is none.
    pub fn take(&self, client: u64, rng: &mut crate::rng::Rng) -> Result<Row, NoRow> {
        let n = self.len();
        let k = match self.order {
            Order::Client => client % n,
            Order::Sequential => self.next.fetch_add(1, Relaxed) % n,
            Order::Random => rng.below(n),
            Order::Unique { wrap } => {
                let k = self.next.fetch_add(1, Relaxed);
                if k >= n && !wrap {
                    return Err(NoRow::RanOut);
                }
                k % n
            }
        };
        self.row(k).ok_or(NoRow::Unreadable)
    }

    /// Row `k` (mod the rows); `None` if the file could no longer be read (the first
    /// such error is logged).
    pub fn row(&self, k: u64) -> Option<Row> {
        let f = &self.feed;
        f.row(k % self.len())
            .map_err(|e| {
                if !f.warned.swap(true, Relaxed) {
                    tracing::warn!("{}: {}: {e}", f.format.key(), f.path.display());
                }
            })
            .ok()
    }
}

/// What is wrong with a data file (the caller says which).
fn bad(msg: impl Into<String>) -> crate::Error {
    crate::Error::usage(msg)
}

/// A data file, open: its columns, row count, index and the rows read last.
#[derive(Debug)]
struct Feed {
    path: PathBuf,
    file: File,
    /// Its size when checked: a file that grows is read no further.
    end: u64,
    format: Format,
    columns: Vec<String>,
    count: u64,
    marks: Vec<Mark>,
    cache: Mutex<Cache>,
    warned: AtomicBool,
}

/// Where a block of the index starts: its first row, and that row's byte offset.
#[derive(Debug, Clone, Copy)]
struct Mark {
    row: u64,
    offset: u64,
}

/// The index being made: a mark a block, every other one dropped when it holds `max`
/// (the blocks twice as long from then on).
struct Index {
    marks: Vec<Mark>,
    rows_per: u64,
    bytes_per: u64,
    max: usize,
}

impl Index {
    fn new(max: usize) -> Index {
        Index {
            marks: Vec::new(),
            rows_per: STRIDE,
            bytes_per: BLOCK,
            max,
        }
    }

    /// Row `row` starts at `offset`: marked if it starts a block.
    fn add(&mut self, row: u64, offset: u64) {
        if self
            .marks
            .last()
            .is_some_and(|m| row - m.row < self.rows_per && offset - m.offset < self.bytes_per)
        {
            return;
        }
        self.marks.push(Mark { row, offset });
        if self.marks.len() >= self.max {
            self.marks = self.marks.iter().copied().step_by(2).collect();
            self.rows_per *= 2;
            self.bytes_per *= 2;
        }
    }
}

/// Runs of rows read last, the newest first, and their [`cost`] in all.
#[derive(Debug, Default)]
struct Cache {
    runs: VecDeque<(u64, Vec<Row>)>,
    cost: usize,
}

/// What a row holds in memory, roughly: its text, a `String` a cell and the `Arc`.
fn cost(rows: &[Row]) -> usize {
    rows.iter()
        .map(|r| 32 + r.iter().map(|c| 24 + c.len()).sum::<usize>())
        .sum()
}

impl Feed {
    /// Opens `file` (a regular file: not waiting on a FIFO swapped in since it was
    /// checked) and reads it through, checking every row and marking the blocks.
    fn open(file: &Path, format: Format, max_marks: usize) -> crate::error::Result<Feed> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(file)
            .map_err(|e| bad(e.to_string()).because(e))?;
        let meta = f.metadata().map_err(|e| bad(e.to_string()).because(e))?;
        if !meta.is_file() {
            return Err(bad("is not a regular file: give a file"));
        }
        let end = meta.len();
        let mut reader = Reader::open(&f, end, format, 0);
        let columns = reader.header()?.ok_or_else(|| {
            bad(match format {
                Format::Csv => "is empty (it needs a header row)",
                Format::Jsonl => "is empty (it needs a JSON object a line)",
            })
        })?;
        if format == Format::Jsonl {
            // The first object is the first row too: read it again.
            reader = Reader::open(&f, end, format, 0);
        }
        let (mut index, mut count) = (Index::new(max_marks), 0u64);
        loop {
            let offset = reader.offset();
            if !reader.record(&columns)? {
                break;
            }
            index.add(count, offset);
            count += 1;
        }
        if count == 0 {
            return Err(bad("has a header but no rows"));
        }
        Ok(Feed {
            path: file.to_path_buf(),
            file: f,
            end,
            format,
            columns,
            count,
            marks: index.marks,
            cache: Mutex::new(Cache::default()),
            warned: AtomicBool::new(false),
        })
    }

    /// Row `k` (< count): from the rows read last, or read from disk with the rows after
    /// it up to [`STRIDE`] or [`BLOCK`] bytes (sequential takers read each row once).
    fn row(&self, k: u64) -> crate::error::Result<Row> {
        let cache = || self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let hit = cache()
            .runs
            .iter()
            .find(|(first, rows)| (*first..*first + rows.len() as u64).contains(&k))
            .map(|(first, rows)| rows[(k - first) as usize].clone());
        if let Some(row) = hit {
            return Ok(row);
        }
        let cut = || bad("was cut short or changed since the run began");
        let mark = self.marks[self.marks.partition_point(|m| m.row <= k) - 1];
        let mut reader = Reader::open(&self.file, self.end, self.format, mark.offset);
        for _ in mark.row..k {
            if !reader.record(&self.columns)? {
                return Err(cut());
            }
        }
        let start = reader.offset();
        let mut rows = Vec::new();
        while (rows.len() as u64) < STRIDE
            && reader.offset() - start < BLOCK
            && k + (rows.len() as u64) < self.count
        {
            rows.push(reader.row(&self.columns)?.ok_or_else(cut)?);
        }
        let row = rows[0].clone();
        let spent = cost(&rows);
        let mut cache = cache();
        cache.runs.push_front((k, rows));
        cache.cost += spent;
        while cache.cost > CACHE && cache.runs.len() > 1 {
            let (_, old) = cache.runs.pop_back().expect("more than one");
            cache.cost -= cost(&old);
        }
        Ok(row)
    }
}

/// How much of the file a reader reads at a time.
const CHUNK: usize = 16 << 10;

/// A file read from an offset a chunk at a time with `read_at` (no shared cursor: takers
/// read at once), no further than `end`.
struct Source<'f> {
    file: &'f File,
    end: u64,
    /// The file offset of `buf[0]`, the bytes in `buf`, and the next one not taken.
    at: u64,
    buf: Vec<u8>,
    len: usize,
    pos: usize,
}

impl Source<'_> {
    fn offset(&self) -> u64 {
        self.at + self.pos as u64
    }

    /// The bytes not taken yet, reading more when there are none; empty at the end.
    fn fill(&mut self) -> crate::error::Result<&[u8]> {
        if self.pos == self.len {
            self.at += self.len as u64;
            (self.pos, self.len) = (0, 0);
            let want = (CHUNK as u64).min(self.end.saturating_sub(self.at)) as usize;
            if want > 0 {
                self.len = loop {
                    match self.file.read_at(&mut self.buf[..want], self.at) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        r => break r.map_err(|e| bad(e.to_string()).because(e))?,
                    }
                };
            }
        }
        Ok(&self.buf[self.pos..self.len])
    }

    fn take(&mut self, n: usize) {
        self.pos += n;
    }
}

/// Rows read from a file, from an offset, none over [`MAX_ROW`]: CSV records parsed by
/// csv-core (its compiled code does the bytes), JSON lines found by memchr.
struct Reader<'f> {
    src: Source<'f>,
    format: Format,
    /// For errors, counted from where it was opened: the row's (first) line, the lines
    /// a CSV reader has read through, and the rows read.
    line: u64,
    lines: u64,
    index: u64,
    core: csv_core::Reader,
    /// The last row read: a CSV record's bytes and its fields' ends, or a JSON line and
    /// its object.
    out: Vec<u8>,
    ends: Vec<usize>,
    fields: usize,
    text: Vec<u8>,
    obj: serde_json::Map<String, serde_json::Value>,
}

impl<'f> Reader<'f> {
    fn open(file: &'f File, end: u64, format: Format, offset: u64) -> Reader<'f> {
        Reader {
            src: Source {
                file,
                end,
                at: offset,
                buf: vec![0; CHUNK],
                len: 0,
                pos: 0,
            },
            format,
            line: 0,
            lines: 0,
            index: 0,
            core: csv_core::Reader::new(),
            out: vec![0; 1 << 10],
            ends: vec![0; 64],
            fields: 0,
            text: Vec::new(),
            obj: serde_json::Map::new(),
        }
    }

    /// Where the next row starts (after the blank lines before it, if any).
    fn offset(&self) -> u64 {
        self.src.offset()
    }

    /// The columns: the CSV's header, or the first JSON object's keys.
    fn header(&mut self) -> crate::error::Result<Option<Vec<String>>> {
        if !self.next()? {
            return Ok(None);
        }
        Ok(Some(match self.format {
            Format::Csv => self.cells(usize::MAX),
            Format::Jsonl => self.obj.keys().cloned().collect(),
        }))
    }

    /// The next row, checked against `columns`; `None` at the end.
    fn row(&mut self, columns: &[String]) -> crate::error::Result<Option<Row>> {
        if !self.record(columns)? {
            return Ok(None);
        }
        Ok(Some(match self.format {
            Format::Csv => self.cells(columns.len()).into(),
            Format::Jsonl => columns
                .iter()
                .map(|key| match self.obj.remove(key) {
                    Some(serde_json::Value::String(s)) => s,
                    Some(v) => v.to_string(),
                    None => unreachable!("checked by record"),
                })
                .collect(),
        }))
    }

    /// The CSV record's first `n` cells, as text (checked UTF-8 by `next`).
    fn cells(&self, n: usize) -> Vec<String> {
        (0..self.fields.min(n))
            .map(|i| String::from_utf8_lossy(self.field(i)).into_owned())
            .collect()
    }

    fn field(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.out[start..self.ends[i]]
    }

    /// Reads the next row and checks it against `columns`, keeping it for [`Self::row`];
    /// false at the end.
    fn record(&mut self, columns: &[String]) -> crate::error::Result<bool> {
        self.index += 1;
        if !self.next()? {
            return Ok(false);
        }
        match self.format {
            Format::Csv if self.fields < columns.len() => Err(bad(format!(
                "row {} (line {}) has {} field(s), the header {}: give every row a value for each column",
                self.index,
                self.line,
                self.fields,
                columns.len()
            ))),
            Format::Csv => Ok(true),
            Format::Jsonl => match columns.iter().find(|k| !self.obj.contains_key(*k)) {
                Some(key) => Err(bad(format!(
                    "line {} has no key '{key}' (the first line's keys are the columns: every line needs them)",
                    self.line
                ))),
                None => Ok(true),
            },
        }
    }

    /// The next CSV record or non-blank JSON line, kept; false at the end.
    fn next(&mut self) -> crate::error::Result<bool> {
        match self.format {
            Format::Csv => self.next_csv(),
            Format::Jsonl => self.next_json(),
        }
    }

    fn next_csv(&mut self) -> crate::error::Result<bool> {
        use csv_core::ReadRecordResult as R;
        // Blank lines before a record are skipped here: its bound and line are its own.
        loop {
            let input = self.src.fill()?;
            let blank = input
                .iter()
                .take_while(|b| matches!(b, b'\n' | b'\r'))
                .count();
            let lines = memchr::memchr_iter(b'\n', &input[..blank]).count();
            let more = blank == input.len() && blank > 0;
            self.src.take(blank);
            self.lines += lines as u64;
            if !more {
                break;
            }
        }
        let (start, line) = (self.src.offset(), self.lines + 1);
        let (mut nout, mut nend) = (0, 0);
        loop {
            let input = self.src.fill()?;
            let (res, nin, o, e) =
                self.core
                    .read_record(input, &mut self.out[nout..], &mut self.ends[nend..]);
            self.lines += memchr::memchr_iter(b'\n', &input[..nin]).count() as u64;
            self.src.take(nin);
            (nout, nend) = (nout + o, nend + e);
            if self.src.offset() - start > MAX_ROW {
                return Err(over(line));
            }
            match res {
                R::InputEmpty => {}
                R::OutputFull => self.out.resize(self.out.len() * 2, 0),
                R::OutputEndsFull => self.ends.resize(self.ends.len() * 2, 0),
                R::Record => break,
                R::End => return Ok(false),
            }
        }
        (self.fields, self.line) = (nend, line);
        if (0..nend).any(|i| std::str::from_utf8(self.field(i)).is_err()) {
            return Err(bad(format!("line {line}: a field is not UTF-8 text")));
        }
        Ok(true)
    }

    fn next_json(&mut self) -> crate::error::Result<bool> {
        loop {
            self.text.clear();
            let first = self.src.offset() == 0;
            loop {
                let input = self.src.fill()?;
                if input.is_empty() {
                    break;
                }
                let (n, done) = match memchr::memchr(b'\n', input) {
                    Some(i) => (i + 1, true),
                    None => (input.len(), false),
                };
                self.text.extend_from_slice(&input[..n]);
                self.src.take(n);
                if self.text.len() as u64 > MAX_ROW {
                    return Err(over(self.line + 1));
                }
                if done {
                    break;
                }
            }
            if self.text.is_empty() {
                return Ok(false);
            }
            self.line += 1;
            let text = match first {
                true => self
                    .text
                    .strip_prefix("\u{feff}".as_bytes())
                    .unwrap_or(&self.text),
                false => &self.text[..],
            };
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return match serde_json::from_slice(text) {
                Ok(serde_json::Value::Object(o)) => {
                    self.obj = o;
                    Ok(true)
                }
                Ok(_) => Err(bad(format!(
                    "line {}: not a JSON object (give one object a line, e.g. {{\"user\": \"a\"}})",
                    self.line
                ))),
                Err(e) => Err(bad(format!("line {}: not JSON: {e}", self.line))),
            };
        }
    }
}

/// A row over [`MAX_ROW`], refused at its first line.
fn over(line: u64) -> crate::Error {
    bad(format!(
        "line {line}: a row of more than {MAX_ROW} bytes (64 KiB, the most a row may hold): split it, or check the file's line ends and quotes"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: impl AsRef<[u8]>, name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        (dir, file)
    }

    fn cells(r: Option<Row>) -> Vec<String> {
        r.unwrap().to_vec()
    }

    fn refused(text: impl AsRef<[u8]>, name: &str) -> String {
        let (_d, f) = write(text, name);
        let format = if name.ends_with(".csv") {
            Format::Csv
        } else {
            Format::Jsonl
        };
        Data::load(&f, format, Order::Client)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn csv_quotes_escapes_blank_lines_crlf_and_a_bom() {
        let (_d, f) = write(
            "\u{feff}serial,model\r\nSN-1,\"ICR, 3231\"\r\n\r\n\"SN-\"\"2\"\"\",\"x\ny\"\r\n",
            "d.csv",
        );
        let d = Data::load(&f, Format::Csv, Order::Client).unwrap();
        assert_eq!(d.columns, ["serial", "model"]);
        assert_eq!(d.len(), 2, "the blank line is skipped");
        assert_eq!(cells(d.row(0)), ["SN-1", "ICR, 3231"]);
        assert_eq!(cells(d.row(1)), ["SN-\"2\"", "x\ny"]);
        let (_d, f) = write("\u{feff}{\"u\": \"a\"}\r\n", "d.jsonl");
        let d = Data::load(&f, Format::Jsonl, Order::Client).unwrap();
        assert_eq!(cells(d.row(0)), ["a"]);
    }

    #[test]
    fn a_short_row_or_a_line_without_a_key_is_refused_at_its_line() {
        let e = refused("a,b\n1,2\n3\n", "d.csv");
        assert!(
            e.contains("row 2 (line 3) has 1 field(s), the header 2"),
            "{e}"
        );
        let e = refused("{\"u\": \"a\", \"n\": 1}\n\n{\"u\": \"b\"}\n", "d.jsonl");
        assert!(e.contains("line 3 has no key 'n'"), "{e}");
        let e = refused("{\"u\": \"a\"}\n[1]\n", "d.jsonl");
        assert!(e.contains("line 2: not a JSON object"), "{e}");
        let e = refused(b"a\n\"x\xff\"\n", "d.csv");
        assert!(e.contains("line 2: a field is not UTF-8 text"), "{e}");
        for (text, name, said) in [
            ("", "d.csv", "is empty"),
            ("\n\n", "d.jsonl", "is empty"),
            ("a,b\n", "d.csv", "has a header but no rows"),
        ] {
            let e = refused(text, name);
            assert!(e.contains(said), "{name} {text:?}: {e}");
        }
    }

    /// A row of 64 KiB with its line end is read; one byte more is refused at its line,
    /// the bound named — a quoted field's newlines counted, a JSON line alike.
    #[test]
    fn a_row_over_the_bound_is_refused_at_its_line() {
        let fill = |n: u64| "x".repeat(n as usize);
        let fits = format!("a,b\n1,2\n\"{}\",3\n", fill(MAX_ROW - 5));
        let (_d, f) = write(&fits, "d.csv");
        let d = Data::load(&f, Format::Csv, Order::Client).unwrap();
        assert_eq!(d.row(1).unwrap()[0].len() as u64, MAX_ROW - 5);
        let over = format!("a,b\n1,2\n\"{}\n{}\",3\n", fill(10), fill(MAX_ROW));
        let e = refused(&over, "d.csv");
        assert!(
            e.contains("line 3: a row of more than 65536 bytes (64 KiB"),
            "{e}"
        );
        let e = refused(fill(3 * MAX_ROW), "d.csv");
        assert!(e.contains("line 1: a row of more than"), "{e}");
        let line = format!("{{\"u\": \"{}\"}}\n", fill(MAX_ROW - 10));
        let (_d, f) = write(format!("{line}{line}"), "d.jsonl");
        assert_eq!(
            Data::load(&f, Format::Jsonl, Order::Client).unwrap().len(),
            2
        );
        let e = refused(format!("{line}\n{}", "[".repeat(3 << 16)), "d.jsonl");
        assert!(e.contains("line 3: a row of more than"), "{e}");
    }

    #[test]
    fn json_lines_give_strings_as_text_and_other_values_as_json() {
        let (_d, f) = write(
            "{\"user\": \"ann\", \"age\": 41, \"tags\": [\"x\"]}\n{\"user\": \"bob\", \"age\": 7, \"tags\": []}\n",
            "d.jsonl",
        );
        let d = Data::load(&f, Format::Jsonl, Order::Client).unwrap();
        let at = |c: &str| d.columns.iter().position(|x| x == c).unwrap();
        let r = cells(d.row(1));
        assert_eq!(
            (
                r[at("user")].as_str(),
                r[at("age")].as_str(),
                r[at("tags")].as_str()
            ),
            ("bob", "7", "[]")
        );
    }

    /// Every row read back from disk is the row written, in every order, across blocks
    /// ended by rows or by bytes, with the index full (thinned) or not.
    #[test]
    fn rows_read_from_disk_are_the_rows_written() {
        for (format, name) in [(Format::Csv, "d.csv"), (Format::Jsonl, "d.jsonl")] {
            let rows = 3000u64;
            // Every 7th row is 3 KiB long: blocks end after 256 rows or 16 KiB.
            let pad = |i: u64| {
                if i.is_multiple_of(7) {
                    "p".repeat(3000)
                } else {
                    String::new()
                }
            };
            let mut text = match format {
                Format::Csv => "id,name\n".to_string(),
                Format::Jsonl => String::new(),
            };
            for i in 0..rows {
                match format {
                    Format::Csv => text += &format!("{i},\"n, {i}{}\"\n", pad(i)),
                    Format::Jsonl => {
                        text += &format!("{{\"id\": {i}, \"name\": \"n, {i}{}\"}}\n", pad(i))
                    }
                }
                if i.is_multiple_of(97) {
                    text += "\n";
                }
            }
            let (_d, f) = write(&text, name);
            let want = |k: u64| vec![k.to_string(), format!("n, {k}{}", pad(k))];
            for max in [MAX_MARKS, 4] {
                let feed = Feed::open(&f, format, max).unwrap();
                assert!(feed.marks.len() < max, "{}", feed.marks.len());
                let d = Data {
                    columns: feed.columns.clone(),
                    order: Order::Client,
                    next: AtomicU64::new(0),
                    feed: Arc::new(feed),
                };
                assert_eq!(d.len(), rows);
                for k in [0, 1, 255, 256, 257, 511, 2999, 3000, 3, 998] {
                    assert_eq!(cells(d.row(k)), want(k % rows), "{name} row {k}");
                }
                for order in [
                    Order::Sequential,
                    Order::Random,
                    Order::Unique { wrap: true },
                ] {
                    let mut d = d.clone();
                    d.order = order;
                    let mut rng = crate::rng::Rng::new(7);
                    let mut expect = crate::rng::Rng::new(7);
                    for c in 0..rows + 500 {
                        let k = match order {
                            Order::Random => expect.below(rows),
                            _ => c % rows,
                        };
                        assert_eq!(d.take(c, &mut rng).unwrap().to_vec(), want(k));
                    }
                }
            }
        }
    }

    #[test]
    fn unique_rows_run_out_unless_they_wrap_and_a_file_cut_short_is_said_so() {
        let (_d, f) = write("u\na\nb\n", "d.csv");
        let d = Data::load(&f, Format::Csv, Order::Unique { wrap: false }).unwrap();
        let mut rng = crate::rng::Rng::new(1);
        assert_eq!(d.take(0, &mut rng).unwrap().to_vec(), ["a"]);
        assert_eq!(d.take(1, &mut rng).unwrap().to_vec(), ["b"]);
        assert_eq!(d.take(2, &mut rng), Err(NoRow::RanOut));
        let (_d, f) = write("u\na\nb\n", "d.csv");
        let d = Data::load(&f, Format::Csv, Order::Random).unwrap();
        std::fs::write(&f, "u\n").unwrap();
        assert_eq!(d.take(0, &mut rng), Err(NoRow::Unreadable));
    }
}
