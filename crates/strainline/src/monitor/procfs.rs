//! Reading `/proc` cheaply. The monitor reads the same few files of the same processes
//! many times a second, so each process keeps its files open and re-reads them with
//! `pread` at offset 0 (the kernel regenerates the text on every read), which costs one
//! system call per file instead of three.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;

/// Kernel constants needed to turn `/proc` figures into bytes and seconds.
#[derive(Debug, Clone, Copy)]
pub struct KernelUnits {
    /// Bytes per page (RSS in `/proc/PID/stat` is in pages).
    pub page_size: u64,
    /// Clock ticks per second (CPU times in `/proc/PID/stat` are in ticks).
    pub clock_ticks: u64,
}

pub fn kernel_units() -> KernelUnits {
    static UNITS: OnceLock<KernelUnits> = OnceLock::new();
    *UNITS.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        KernelUnits {
            page_size: if page > 0 { page as u64 } else { 4096 },
            clock_ticks: if ticks > 0 { ticks as u64 } else { 100 },
        }
    })
}

pub use crate::os::process::{parse_stat, Stat};

/// The fields of `/proc/PID/status` the monitor uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// Peak resident set size (VmHWM), bytes.
    pub hwm_bytes: u64,
    /// Voluntary plus involuntary context switches.
    pub ctx_switches: u64,
}

pub fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        let kib = |l: &str| -> u64 {
            l.split_ascii_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        if line.starts_with("VmHWM:") {
            s.hwm_bytes = kib(line) * 1024;
        } else if line.starts_with("voluntary_ctxt_switches:")
            || line.starts_with("nonvoluntary_ctxt_switches:")
        {
            s.ctx_switches += kib(line);
        }
    }
    s
}

/// Storage I/O of a process from `/proc/PID/io`, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Io {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// `write_bytes` is what the process dirtied in the page cache for storage; what it
/// later truncated or deleted before writeback (`cancelled_write_bytes`: a database's
/// recycled log segments, temporary files) never reached the disk and is subtracted.
pub fn parse_io(text: &str) -> Io {
    let mut io = Io::default();
    let mut cancelled = 0u64;
    for line in text.lines() {
        let num = |v: &str| v.trim().parse().unwrap_or(0);
        if let Some(v) = line.strip_prefix("read_bytes: ") {
            io.read_bytes = num(v);
        } else if let Some(v) = line.strip_prefix("write_bytes: ") {
            io.write_bytes = num(v);
        } else if let Some(v) = line.strip_prefix("cancelled_write_bytes: ") {
            cancelled = num(v);
        }
    }
    io.write_bytes = io.write_bytes.saturating_sub(cancelled);
    io
}

/// A `/proc/PID` file opened only when first read: under churn (a build's compilers,
/// living a fraction of a second) most processes end before their first status read,
/// and an open and a close per file per process was a sixth of the monitor's cost.
enum Lazy {
    Unopened,
    Open(File),
    /// Absent or closed to us: not tried again.
    Absent,
}

impl Lazy {
    /// The file `name` of the process directory `dir`, opened at the first call. Opened
    /// relative to the directory's handle, so a pid that was recycled meanwhile cannot
    /// lend us another process's file: the handle stays bound to the process it named.
    fn get(&mut self, dir: &File, name: &str) -> Option<&File> {
        if matches!(self, Lazy::Unopened) {
            *self = match open_at(dir, name) {
                Ok(f) => Lazy::Open(f),
                Err(_) => Lazy::Absent,
            };
        }
        match self {
            Lazy::Open(f) => Some(f),
            _ => None,
        }
    }
}

/// Opens `name` read-only in the directory `dir`.
fn open_at(dir: &File, name: &str) -> io::Result<File> {
    use std::os::fd::FromRawFd;
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `dir` is an open directory and `c` a NUL-terminated name; a descriptor the
    // kernel returns is ours alone, and File takes ownership of it.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Open handles on one process's `/proc` files: `stat` and `statm`, read every tick,
/// from the start; the rest when first read.
pub struct ProcFiles {
    dir: File,
    stat: File,
    statm: Option<File>,
    status: Lazy,
    io: Lazy,
    fd_dir: Lazy,
    /// `smaps_rollup` (Linux 4.14+): the proportional set size.
    smaps_rollup: Lazy,
    buf: Vec<u8>,
}

impl ProcFiles {
    /// Opens the files of `pid`; fails if the process is gone.
    pub fn open(pid: u32) -> io::Result<ProcFiles> {
        let dir = File::open(format!("/proc/{pid}"))?;
        Ok(ProcFiles {
            stat: open_at(&dir, "stat")?,
            statm: open_at(&dir, "statm").ok(),
            dir,
            status: Lazy::Unopened,
            io: Lazy::Unopened,
            fd_dir: Lazy::Unopened,
            smaps_rollup: Lazy::Unopened,
            buf: vec![0; 4096],
        })
    }

    /// The command line, arguments joined by spaces (see [`cmdline`]): one open, one
    /// read.
    pub fn cmdline(&mut self) -> String {
        open_at(&self.dir, "cmdline")
            .and_then(|f| Self::pread(&f, &mut self.buf))
            .map(|n| join_args(&self.buf[..n]))
            .unwrap_or_default()
    }

    /// Reads a whole /proc file into `buf` and returns its length. A /proc read that
    /// returns less than asked for has returned everything, so one call usually does.
    pub(super) fn pread(file: &File, buf: &mut Vec<u8>) -> io::Result<usize> {
        let len = crate::os::kfile::read_on(file, buf, 0)?;
        if len == 0 {
            // A process that has exited answers with an empty file or ESRCH.
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(len)
    }

    fn read_text<'b>(file: &File, buf: &'b mut Vec<u8>) -> io::Result<std::borrow::Cow<'b, str>> {
        let len = Self::pread(file, buf)?;
        Ok(String::from_utf8_lossy(&buf[..len]))
    }

    /// Resident pages from `/proc/PID/statm`: a third of the kernel's cost of `stat`.
    pub fn rss_pages(&mut self) -> io::Result<u64> {
        let Some(f) = self.statm.as_ref() else {
            return self.stat().map(|s| s.rss_pages);
        };
        let text = Self::read_text(f, &mut self.buf)?;
        text.split_ascii_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed /proc statm"))
    }

    /// Reads `/proc/PID/stat`; an error means the process has exited.
    pub fn stat(&mut self) -> io::Result<Stat> {
        let text = Self::read_text(&self.stat, &mut self.buf)?;
        parse_stat(&text)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed /proc stat"))
    }

    pub fn status(&mut self) -> Option<Status> {
        let f = self.status.get(&self.dir, "status")?;
        Some(parse_status(&Self::read_text(f, &mut self.buf).ok()?))
    }

    /// The process's proportional set size, bytes: each shared page divided among the
    /// processes that map it, so a sum over a tree counts shared memory once.
    pub fn pss_bytes(&mut self) -> Option<u64> {
        let f = self.smaps_rollup.get(&self.dir, "smaps_rollup")?;
        let text = Self::read_text(f, &mut self.buf).ok()?;
        let kib: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    }

    pub fn io(&mut self) -> Option<Io> {
        let f = self.io.get(&self.dir, "io")?;
        Some(parse_io(&Self::read_text(f, &mut self.buf).ok()?))
    }

    /// Counts open file descriptors by listing `/proc/PID/fd` through the kept handle.
    pub fn fd_count(&mut self) -> Option<u64> {
        let fd = self.fd_dir.get(&self.dir, "fd")?.as_raw_fd();
        // SAFETY: fd is an open directory we own; getdents64 writes at most buf.len() bytes.
        unsafe {
            if libc::lseek(fd, 0, libc::SEEK_SET) < 0 {
                return None;
            }
        }
        let mut buf = [0u8; 8192];
        let mut count = 0u64;
        loop {
            // SAFETY: as above.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    fd,
                    buf.as_mut_ptr(),
                    buf.len() as libc::c_uint,
                )
            };
            if n < 0 {
                return None;
            }
            if n == 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                if buf[off + 19] != b'.' {
                    count += 1;
                }
                off += reclen.max(1);
            }
        }
        Some(count)
    }
}

/// The command line of a process, arguments joined by spaces; empty for kernel threads
/// or processes that are gone.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| join_args(&b))
        .unwrap_or_default()
}

/// The NUL-separated arguments of a `cmdline` file, joined by spaces.
fn join_args(b: &[u8]) -> String {
    b.split(|&c| c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The pid the kernel allocated last in this pid namespace (the last field of
/// `/proc/loadavg`), threads' included. While it stands still no process was created,
/// so a tree cannot have gained a member: the monitor skips listing `/proc` or the
/// cgroup then (wrapping around `pid_max` between two ticks would take millions of
/// forks).
pub fn last_pid() -> Option<u32> {
    static LOADAVG: OnceLock<Option<File>> = OnceLock::new();
    let f = LOADAVG
        .get_or_init(|| File::open("/proc/loadavg").ok())
        .as_ref()?;
    crate::os::kfile::read_with(f, |t| t.split_ascii_whitespace().nth(4)?.parse().ok())
}

/// Every pid in `/proc` (processes, not threads).
pub fn list_pids() -> io::Result<Vec<u32>> {
    let mut pids = Vec::with_capacity(256);
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        if let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// Reads and parses `/proc/PID/stat` once, without keeping the file open.
pub fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_command_names() {
        // A command name with spaces and a closing parenthesis, as `prctl` allows.
        let text = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 120 0 0 0 \
                    7 3 11 2 20 0 3 0 98765 10000000 2560 18446744073709551615 \
                    94000000000000 94000000100000 140730000000000";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.comm, "my (odd) name");
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.cpu_ticks, 10);
        assert_eq!(s.children_cpu_ticks, 13);
        assert_eq!(s.num_threads, 3);
        assert_eq!(s.start_ticks, 98765);
        assert_eq!(s.rss_pages, 2560);
        assert_eq!(s.start_stack, 140730000000000);
    }

    #[test]
    fn parses_status_and_io() {
        let status = "Name:\tx\nVmHWM:\t  13792 kB\nVmRSS:\t 1000 kB\n\
                      voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t2\n";
        let s = parse_status(status);
        assert_eq!(s.hwm_bytes, 13792 * 1024);
        assert_eq!(s.ctx_switches, 7);
        let io = parse_io(
            "rchar: 1\nwchar: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 4096\n",
        );
        assert_eq!(
            io,
            Io {
                read_bytes: 4096,
                write_bytes: 4096
            }
        );
    }

    #[test]
    fn the_last_pid_moves_when_a_process_is_created() {
        let before = last_pid().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let after = last_pid().unwrap();
        assert_ne!(before, after);
        // Another process may have been created since, never fewer.
        assert!(after >= pid || after < before, "{before} {pid} {after}");
    }

    #[test]
    fn reads_this_process_against_the_kernel() {
        let me = std::process::id();
        let mut files = ProcFiles::open(me).unwrap();
        let stat = files.stat().unwrap();
        assert_eq!(stat.pid, me);
        assert!(stat.rss_pages > 0);
        // Our getdents count must agree with the directory listing std makes.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The child may still be exec'ing (closing the descriptors it inherited, a CI run
        // read 11 then 5): both counts are taken again until the two readings hold still.
        let count = || {
            let fds = ProcFiles::open(child.id()).unwrap().fd_count();
            let listed = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
                .unwrap()
                .count() as u64;
            (fds, listed)
        };
        let (mut fds, mut listed) = count();
        for _ in 0..50 {
            let again = count();
            if again == (fds, listed) && fds == Some(listed) {
                break;
            }
            (fds, listed) = again;
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(fds, Some(listed));
        assert!(listed >= 3);
        assert!(files.status().unwrap().hwm_bytes >= stat.rss_pages * kernel_units().page_size);
    }
}
