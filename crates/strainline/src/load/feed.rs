//! Data feeders: the rows of a scenario's `csv` or `jsonl` file, handed to clients as
//! `csv_order` says (per client, sequential, random, unique). A file of up to 64 MiB is
//! read into memory; a larger one is indexed once as it is checked (one byte offset
//! every [`STRIDE`] rows) and its rows read from disk a block at a time as clients take
//! them, so that memory stays bounded whatever the file's size.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// A row: its cells, in the order of the file's columns.
pub type Row = Arc<[String]>;

/// Rows between two offsets of a large file's index: a row costs reading at most this
/// many from disk, and the index 8 bytes per this many rows (31 MB for 10⁹ rows).
pub const STRIDE: u64 = 256;

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

/// A scenario's data: its columns and rows, and where `sequential` and `unique` are.
#[derive(Debug)]
pub struct Data {
    pub columns: Vec<String>,
    pub order: Order,
    /// The next row `sequential` and `unique` hand out (this generator's).
    next: AtomicU64,
    rows: Rows,
}

#[derive(Debug, Clone)]
enum Rows {
    Memory(Vec<Row>),
    Disk(Arc<Disk>),
}

/// A file too large to hold: its row count, the offset of every [`STRIDE`]th row, and
/// the block read last (sequential takers read each block once).
#[derive(Debug)]
struct Disk {
    file: PathBuf,
    format: Format,
    columns: Vec<String>,
    count: u64,
    marks: Vec<u64>,
    last: Mutex<Option<(u64, Vec<Row>)>>,
}

impl Clone for Data {
    fn clone(&self) -> Data {
        Data {
            columns: self.columns.clone(),
            order: self.order,
            next: AtomicU64::new(self.next.load(Relaxed)),
            rows: self.rows.clone(),
        }
    }
}

impl Data {
    /// Reads (or indexes) `file`: every row is checked now, so that a run never meets a
    /// bad one. The error names the key and file, says which row and line, and why.
    pub fn load(file: &Path, format: Format, order: Order) -> crate::error::Result<Data> {
        let shown = file.display();
        let meta = crate::os::file::check(file, format.key(), u64::MAX)?;
        let in_memory = meta.len() <= crate::os::file::MAX_INPUT;
        let Scan {
            columns,
            held,
            marks,
            count,
        } = scan(file, format, in_memory)
            .map_err(|e| bad(format!("{}: {shown}: {e}", format.key())))?;
        let rows = if in_memory {
            Rows::Memory(held)
        } else {
            Rows::Disk(Arc::new(Disk::new(file, format, &columns, count, marks)))
        };
        Ok(Data {
            columns,
            order,
            next: AtomicU64::new(0),
            rows,
        })
    }

    pub fn len(&self) -> u64 {
        match &self.rows {
            Rows::Memory(r) => r.len() as u64,
            Rows::Disk(d) => d.count,
        }
    }

    /// Whether its rows are read from disk as taken (the file is over 64 MiB).
    pub fn on_disk(&self) -> bool {
        matches!(self.rows, Rows::Disk(_))
    }

    /// The row `client` takes as it starts its flow; `None` when `unique` rows ran out
    /// (the client stops) or a large file could no longer be read (logged).
    pub fn take(&self, client: u64, rng: &mut crate::rng::Rng) -> Option<Row> {
        let n = self.len();
        let k = match self.order {
            Order::Client => client % n,
            Order::Sequential => self.next.fetch_add(1, Relaxed) % n,
            Order::Random => rng.below(n),
            Order::Unique { wrap } => {
                let k = self.next.fetch_add(1, Relaxed);
                if k >= n && !wrap {
                    return None;
                }
                k % n
            }
        };
        self.row(k)
    }

    /// Row `k` (mod the rows).
    pub fn row(&self, k: u64) -> Option<Row> {
        let k = k % self.len();
        match &self.rows {
            Rows::Memory(r) => Some(r[k as usize].clone()),
            Rows::Disk(d) => match d.row(k) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!("{}: {}: {e}", d.format.key(), d.file.display());
                    None
                }
            },
        }
    }
}

/// A file read through: its columns, its rows (if held) or the offsets of every
/// [`STRIDE`]th row, and how many there are.
struct Scan {
    columns: Vec<String>,
    held: Vec<Row>,
    marks: Vec<u64>,
    count: u64,
}

/// Reads `file` through, checking every row; errors say what is wrong with it (the
/// caller names it).
fn scan(file: &Path, format: Format, hold: bool) -> crate::error::Result<Scan> {
    let mut reader = Reader::open(file, format, 0)?;
    let columns = reader.header()?.ok_or_else(|| {
        bad(match format {
            Format::Csv => "is empty (it needs a header row)",
            Format::Jsonl => "is empty (it needs a JSON object a line)",
        })
    })?;
    let (mut held, mut marks, mut count) = (Vec::new(), Vec::new(), 0u64);
    loop {
        let offset = reader.offset();
        let Some(row) = reader.row(&columns)? else {
            break;
        };
        if hold {
            held.push(row);
        } else if count % STRIDE == 0 {
            marks.push(offset);
        }
        count += 1;
    }
    if count == 0 {
        return Err(bad("has a header but no rows"));
    }
    Ok(Scan {
        columns,
        held,
        marks,
        count,
    })
}

/// What is wrong with a data file (the caller says which).
fn bad(msg: impl Into<String>) -> crate::Error {
    crate::Error::usage(msg)
}

impl Disk {
    fn new(file: &Path, format: Format, columns: &[String], count: u64, marks: Vec<u64>) -> Disk {
        Disk {
            file: file.to_path_buf(),
            format,
            columns: columns.to_vec(),
            count,
            marks,
            last: Mutex::new(None),
        }
    }

    fn row(&self, k: u64) -> crate::error::Result<Row> {
        let block = k / STRIDE;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((b, rows)) = last.as_ref() {
            if *b == block {
                return Ok(rows[(k % STRIDE) as usize].clone());
            }
        }
        let mut reader = Reader::open(&self.file, self.format, self.marks[block as usize])?;
        let mut rows = Vec::with_capacity(STRIDE as usize);
        while (rows.len() as u64) < STRIDE.min(self.count - block * STRIDE) {
            match reader.row(&self.columns)? {
                Some(r) => rows.push(r),
                None => return Err(bad("was cut short since the run began")),
            }
        }
        let row = rows
            .get((k % STRIDE) as usize)
            .cloned()
            .ok_or_else(|| bad("was cut short since the run began"))?;
        *last = Some((block, rows));
        Ok(row)
    }
}

/// Rows read from a file, from an offset.
struct Reader {
    format: Format,
    csv: Option<csv::Reader<BufReader<std::fs::File>>>,
    lines: Option<BufReader<std::fs::File>>,
    /// Where it was opened; where the next row starts; the lines and rows read (for
    /// errors).
    base: u64,
    offset: u64,
    line: u64,
    index: u64,
    /// JSON lines: the first object's keys, in the file's order of lines.
    keys: Vec<String>,
    text: String,
}

impl Reader {
    fn open(file: &Path, format: Format, offset: u64) -> crate::error::Result<Reader> {
        let mut f = std::fs::File::open(file).map_err(|e| bad(e.to_string()))?;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| bad(e.to_string()))?;
        let buf = BufReader::with_capacity(64 << 10, f);
        let (csv, lines) = match format {
            Format::Csv => (
                Some(
                    csv::ReaderBuilder::new()
                        .has_headers(false)
                        .flexible(true)
                        .from_reader(buf),
                ),
                None,
            ),
            Format::Jsonl => (None, Some(buf)),
        };
        Ok(Reader {
            format,
            csv,
            lines,
            base: offset,
            offset,
            line: 0,
            index: 0,
            keys: Vec::new(),
            text: String::new(),
        })
    }

    fn offset(&self) -> u64 {
        self.offset
    }

    /// The columns: the CSV's header, or the first JSON object's keys (that line is a
    /// row too, and is read again as one).
    fn header(&mut self) -> crate::error::Result<Option<Vec<String>>> {
        match self.format {
            Format::Csv => Ok(self.csv_record()?.map(|r| r.to_vec())),
            Format::Jsonl => {
                let start = self.offset;
                let Some(obj) = self.json_object()? else {
                    return Ok(None);
                };
                self.keys = obj.keys().cloned().collect();
                // The first object is the first row: read it again.
                let lines = self.lines.as_mut().expect("jsonl");
                lines
                    .seek(SeekFrom::Start(start))
                    .map_err(|e| bad(e.to_string()))?;
                (self.offset, self.line) = (start, 0);
                Ok(Some(self.keys.clone()))
            }
        }
    }

    /// The next row, checked against `columns`; `None` at the end.
    fn row(&mut self, columns: &[String]) -> crate::error::Result<Option<Row>> {
        self.index += 1;
        match self.format {
            Format::Csv => {
                let line = self.line + 1;
                let Some(rec) = self.csv_record()? else {
                    return Ok(None);
                };
                if rec.len() < columns.len() {
                    return Err(bad(format!(
                        "row {} (line {line}) has {} field(s), the header {}: give every row a value for each column",
                        self.index,
                        rec.len(),
                        columns.len()
                    )));
                }
                Ok(Some(rec.into_iter().take(columns.len()).collect()))
            }
            Format::Jsonl => {
                let Some(mut obj) = self.json_object()? else {
                    return Ok(None);
                };
                let keys = if self.keys.is_empty() {
                    columns
                } else {
                    &self.keys
                };
                let mut row = Vec::with_capacity(keys.len());
                for key in keys {
                    match obj.remove(key) {
                        Some(serde_json::Value::String(s)) => row.push(s),
                        Some(v) => row.push(v.to_string()),
                        None => {
                            return Err(bad(format!(
                                "line {} has no key '{key}' (the first line's keys are the columns: every line needs them)",
                                self.line
                            )))
                        }
                    }
                }
                Ok(Some(row.into()))
            }
        }
    }

    fn csv_record(&mut self) -> crate::error::Result<Option<Vec<String>>> {
        let csv = self.csv.as_mut().expect("csv");
        let mut rec = csv::StringRecord::new();
        let more = csv.read_record(&mut rec).map_err(|e| {
            let line = e.position().map_or(self.line + 1, |p| p.line());
            bad(format!("line {line}: {e}"))
        })?;
        // The reader counts from where it was opened: the next record starts here.
        let pos = csv.position();
        self.offset = self.base + pos.byte();
        self.line = pos.line().saturating_sub(1);
        Ok(more.then(|| rec.iter().map(str::to_string).collect()))
    }

    /// The next non-blank line as a JSON object.
    fn json_object(
        &mut self,
    ) -> crate::error::Result<Option<serde_json::Map<String, serde_json::Value>>> {
        let lines = self.lines.as_mut().expect("jsonl");
        loop {
            self.text.clear();
            let n = lines
                .by_ref()
                .take(crate::os::file::MAX_INPUT)
                .read_line(&mut self.text)
                .map_err(|e| bad(format!("line {}: {e}", self.line + 1)))?;
            if n == 0 {
                return Ok(None);
            }
            self.offset += n as u64;
            self.line += 1;
            if self.text.trim().is_empty() {
                continue;
            }
            return match serde_json::from_str(&self.text) {
                Ok(serde_json::Value::Object(o)) => Ok(Some(o)),
                Ok(_) => Err(bad(format!(
                    "line {}: not a JSON object (give one object a line, e.g. {{\"user\": \"a\"}})",
                    self.line
                ))),
                Err(e) => Err(bad(format!("line {}: not JSON: {e}", self.line))),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        (dir, file)
    }

    fn cells(r: Option<Row>) -> Vec<String> {
        r.unwrap().to_vec()
    }

    #[test]
    fn csv_quotes_escapes_and_blank_lines() {
        let (_d, f) = write(
            "serial,model\nSN-1,\"ICR, 3231\"\n\n\"SN-\"\"2\"\"\",x\r\n",
            "d.csv",
        );
        let d = Data::load(&f, Format::Csv, Order::Client).unwrap();
        assert_eq!(d.columns, ["serial", "model"]);
        assert_eq!(d.len(), 2, "the blank line is skipped");
        assert_eq!(cells(d.row(0)), ["SN-1", "ICR, 3231"]);
        assert_eq!(cells(d.row(1)), ["SN-\"2\"", "x"]);
    }

    #[test]
    fn a_short_row_or_a_line_without_a_key_is_refused_at_its_line() {
        let (_d, f) = write("a,b\n1,2\n3\n", "d.csv");
        let e = Data::load(&f, Format::Csv, Order::Client)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("row 2 (line 3) has 1 field(s), the header 2"),
            "{e}"
        );
        let (_d, f) = write("{\"u\": \"a\", \"n\": 1}\n\n{\"u\": \"b\"}\n", "d.jsonl");
        let e = Data::load(&f, Format::Jsonl, Order::Client)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3 has no key 'n'"), "{e}");
        let (_d, f) = write("{\"u\": \"a\"}\n[1]\n", "d.jsonl");
        let e = Data::load(&f, Format::Jsonl, Order::Client)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: not a JSON object"), "{e}");
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

    /// The disk path (a file over 64 MiB) gives the same rows as the memory path, read
    /// block by block from the index, for every order.
    #[test]
    fn rows_read_from_disk_are_the_rows_read_into_memory() {
        for (format, name) in [(Format::Csv, "d.csv"), (Format::Jsonl, "d.jsonl")] {
            let mut text = match format {
                Format::Csv => "id,name\n".to_string(),
                Format::Jsonl => String::new(),
            };
            for i in 0..1000 {
                match format {
                    Format::Csv => text += &format!("{i},\"n, {i}\"\n"),
                    Format::Jsonl => text += &format!("{{\"id\": {i}, \"name\": \"n, {i}\"}}\n"),
                }
                if i % 97 == 0 {
                    text += "\n";
                }
            }
            let (_d, f) = write(&text, name);
            let memory = Data::load(&f, format, Order::Client).unwrap();
            let mut disk = memory.clone();
            disk.rows = Rows::Disk(Arc::new(index(&f, format, &memory.columns)));
            assert!(disk.on_disk() && !memory.on_disk());
            assert_eq!(disk.len(), 1000);
            for k in [0, 1, 255, 256, 257, 511, 999, 1000, 3, 998] {
                assert_eq!(cells(disk.row(k)), cells(memory.row(k)), "{name} row {k}");
            }
            let mut rng = crate::rng::Rng::new(7);
            let mut rng2 = crate::rng::Rng::new(7);
            for order in [
                Order::Sequential,
                Order::Random,
                Order::Unique { wrap: true },
            ] {
                let (mut a, mut b) = (memory.clone(), disk.clone());
                (a.order, b.order) = (order, order);
                for c in 0..600 {
                    assert_eq!(cells(a.take(c, &mut rng)), cells(b.take(c, &mut rng2)));
                }
            }
        }
    }

    /// The index [`Data::load`] makes of a file over 64 MiB, for a small one.
    fn index(file: &Path, format: Format, columns: &[String]) -> Disk {
        let scan = scan(file, format, false).unwrap();
        assert_eq!(scan.columns, columns);
        Disk::new(file, format, &scan.columns, scan.count, scan.marks)
    }

    #[test]
    fn unique_rows_run_out_unless_they_wrap() {
        let (_d, f) = write("u\na\nb\n", "d.csv");
        let d = Data::load(&f, Format::Csv, Order::Unique { wrap: false }).unwrap();
        let mut rng = crate::rng::Rng::new(1);
        assert_eq!(cells(d.take(0, &mut rng)), ["a"]);
        assert_eq!(cells(d.take(1, &mut rng)), ["b"]);
        assert!(d.take(2, &mut rng).is_none());
    }
}
