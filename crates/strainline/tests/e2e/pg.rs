//! A real PostgreSQL server for the store tests: the Debian `postgresql` package's
//! binaries, a fresh cluster in a temporary directory, on a free loopback port, with
//! password (SCRAM) authentication so that the tests can check a password never leaks.
//! One server per test process, one database per test. The server dies with the test
//! process (parent-death signal on a thread that never exits); clusters left by killed
//! test processes are removed at the next start.

use crate::common::free_port;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

pub const USER: &str = "strainline";
pub const PASSWORD: &str = "s3cret-Pg-pw";

struct Server {
    port: u16,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// The directory of the newest installed PostgreSQL's binaries.
fn bindir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|v| v.1).unwrap_or_else(|| {
        panic!(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): `make test` installs it \
             (apt-get install postgresql)"
        )
    })
}

/// `(uid, gid)` to run the server as: PostgreSQL refuses to run as root.
fn identity() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("running as root needs the 'postgres' user the postgresql package creates");
    let f: Vec<&str> = line.split(':').collect();
    Some((f[2].parse().unwrap(), f[3].parse().unwrap()))
}

fn as_server_user(cmd: &mut Command, who: Option<(u32, u32)>, pdeathsig: bool) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = who {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // After setuid, which clears it: the server goes when the test process goes.
            if pdeathsig && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn chown_tree(path: &Path, who: Option<(u32, u32)>) {
    if let Some((uid, gid)) = who {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    }
}

/// Removes clusters whose test process is gone.
fn sweep(base: &Path) {
    for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let pid: i32 = e.file_name().to_string_lossy().parse().unwrap_or(0);
        // SAFETY: signal 0 only checks for existence.
        if pid > 0 && unsafe { libc::kill(pid, 0) } != 0 {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn start() -> Server {
    let bin = bindir();
    let who = identity();
    let base = std::env::temp_dir().join("strainline-pg-tests");
    std::fs::create_dir_all(&base).unwrap();
    sweep(&base);
    let root = base.join(std::process::id().to_string());
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    chown_tree(&base, None);
    chown_tree(&root, who);
    let data = root.join("data");
    let pwfile = root.join("pw");
    std::fs::write(&pwfile, PASSWORD).unwrap();
    chown_tree(&pwfile, who);
    let mut init = Command::new(bin.join("initdb"));
    init.args([
        "-D",
        data.to_str().unwrap(),
        "-U",
        USER,
        "-E",
        "UTF8",
        "--no-sync",
    ])
    .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
    .arg(format!("--pwfile={}", pwfile.display()))
    .current_dir(&root)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    as_server_user(&mut init, who, false);
    let out = init.output().expect("run initdb");
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    let log = root.join("server.log");
    let (tx, rx) = mpsc::channel();
    let (bin2, data2, root2, log2) = (bin.clone(), data.clone(), root.clone(), log.clone());
    // The server's parent is this thread, which never exits: the parent-death signal
    // fires when the whole test process ends, not when one test's thread does.
    std::thread::spawn(move || {
        let mut cmd = Command::new(bin2.join("postgres"));
        cmd.args(["-D", data2.to_str().unwrap()])
            .args(["-p", &port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args([
                "-c",
                &format!("unix_socket_directories={}", root2.display()),
            ])
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            .current_dir(&root2)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log2).unwrap());
        as_server_user(&mut cmd, who, true);
        let mut child = cmd.spawn().expect("start postgres");
        tx.send(()).unwrap();
        let _ = child.wait();
        loop {
            std::thread::park();
        }
    });
    rx.recv().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let url = format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{port}/postgres");
        if postgres::Client::connect(&url, postgres::NoTls).is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "PostgreSQL did not accept connections within 30 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Server { port }
}

/// A URL to a fresh, empty database on the shared test server.
pub fn fresh_database() -> String {
    let server = SERVER.get_or_init(start);
    let name = format!("t{}", NEXT_DB.fetch_add(1, Ordering::SeqCst));
    let admin = format!(
        "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/postgres",
        server.port
    );
    let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    format!(
        "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{name}",
        server.port
    )
}
