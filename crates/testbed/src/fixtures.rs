//! Programs with known behaviour, for proving that strainline's figures are true: a
//! memory profile with a short spike and a child, a busy loop, an idle sleeper, a parent
//! of many children, and a daemon that escapes with `setsid`. Each prints the kernel's
//! own figures at the end (`key=value` lines) so tests can compare against them.

use std::process::Command;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// Allocates `mib` MiB and writes every page, so all of it is resident.
pub fn touch(mib: usize) -> Vec<u8> {
    let mut v = vec![0u8; mib * MIB];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    std::hint::black_box(&mut v);
    v
}

/// This process's `VmHWM` (peak RSS) from the kernel, bytes.
pub fn own_hwm_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_ascii_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

static REINVOKE_PREFIX: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Arguments that come before a testbed subcommand when this program re-runs itself:
/// none for `strainline-testbed`, `["testbed"]` inside `strainline`.
pub fn set_reinvoke_prefix(prefix: Vec<String>) {
    let _ = REINVOKE_PREFIX.set(prefix);
}

/// This program's path and the arguments to reach a testbed subcommand.
fn self_argv(sub: &[&str]) -> Vec<String> {
    let exe = std::env::current_exe().expect("own path");
    let mut v = vec![exe.to_string_lossy().into_owned()];
    v.extend(REINVOKE_PREFIX.get().cloned().unwrap_or_default());
    v.extend(sub.iter().map(|s| s.to_string()));
    v
}

fn self_command(sub: &[&str]) -> Command {
    let argv = self_argv(sub);
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Idle at `base` MiB; at 300 ms spike to `spike` MiB for `spike_ms`; at 600 ms start a
/// child that holds `child` MiB for `child_ms`; idle until `total_ms`.
pub fn memhog(
    base: usize,
    spike: usize,
    spike_ms: u64,
    child: usize,
    child_ms: u64,
    total_ms: u64,
) {
    let start = Instant::now();
    let _base = touch(base);
    std::thread::sleep(ms(300).saturating_sub(start.elapsed()));
    {
        let extra = touch(spike.saturating_sub(base));
        std::thread::sleep(ms(spike_ms));
        drop(extra);
    }
    std::thread::sleep(ms(600).saturating_sub(start.elapsed()));
    let mut kid = self_command(&[
        "hold",
        "--mib",
        &child.to_string(),
        "--ms",
        &child_ms.to_string(),
    ])
    .spawn()
    .expect("spawn child");
    kid.wait().expect("wait child");
    std::thread::sleep(ms(total_ms).saturating_sub(start.elapsed()));
    println!("vmhwm_bytes={}", own_hwm_bytes());
}

/// Holds `mib` MiB for `ms` milliseconds.
pub fn hold(mib: usize, hold_ms: u64) {
    let _v = touch(mib);
    std::thread::sleep(ms(hold_ms));
    println!("vmhwm_bytes={}", own_hwm_bytes());
}

/// Keeps one core busy for `seconds`.
pub fn spin(seconds: f64) {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut x = 0u64;
    while Instant::now() < end {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    println!("spin_result={}", x % 10);
}

/// A noisy neighbour, for --seconds: each of `threads` threads alternates spells of
/// CPU-heavy work, memory-bandwidth-heavy work (copying a 64 MiB buffer, far beyond the
/// caches) and idleness, each spell 0.5–2 s long and its kind drawn at random (from
/// `seed` and the thread's number), so the machine's load keeps changing on no period a
/// measurement window could average away — what a shared CI machine's neighbours do.
/// Ends by itself.
pub fn noise(seconds: f64, threads: usize, seed: u64) {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let workers: Vec<_> = (0..threads.max(1))
        .map(|t| {
            std::thread::spawn(move || {
                let mut from = vec![1u8; 64 << 20];
                let mut to = vec![0u8; 64 << 20];
                let mut state = (0x9E37_79B9_7F4A_7C15u64 ^ seed).wrapping_mul(t as u64 + 1) | 1;
                let mut draw = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                while Instant::now() < end {
                    let spell = Duration::from_millis(500 + draw() % 1500);
                    let second = (Instant::now() + spell).min(end);
                    match draw() % 3 {
                        0 => {
                            let mut x = t as u64;
                            while Instant::now() < second {
                                for i in 0..10_000u64 {
                                    x = std::hint::black_box(
                                        x.wrapping_mul(6364136223846793005).wrapping_add(i),
                                    );
                                }
                            }
                        }
                        1 => {
                            while Instant::now() < second {
                                to.copy_from_slice(&from);
                                std::mem::swap(&mut from, &mut to);
                            }
                        }
                        _ => std::thread::sleep(second.saturating_duration_since(Instant::now())),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
}

/// Sleeps for `seconds`.
pub fn idle(seconds: f64) {
    std::thread::sleep(Duration::from_secs_f64(seconds));
}

/// Starts `children` sleeping children and waits for them.
pub fn forktree(children: usize, seconds: f64) {
    let kids: Vec<_> = (0..children)
        .map(|_| {
            self_command(&["idle", "--seconds", &seconds.to_string()])
                .spawn()
                .expect("spawn child")
        })
        .collect();
    for mut k in kids {
        k.wait().expect("wait child");
    }
}

/// Maps `mib` MiB shared and anonymous, touches every page, forks `children` that touch
/// it too (so each has it all resident) and sleep `seconds`, then waits for them.
pub fn shared(mib: usize, children: usize, seconds: f64) {
    let len = mib << 20;
    // SAFETY: a fresh anonymous shared mapping of `len` bytes, used only as bytes; the
    // children only touch it, sleep and _exit (no allocation after fork).
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        ) as *mut u8;
        assert!(p as *mut libc::c_void != libc::MAP_FAILED, "mmap failed");
        for i in (0..len).step_by(4096) {
            *p.add(i) = 1;
        }
        let nap = libc::timespec {
            tv_sec: seconds as libc::time_t,
            tv_nsec: (seconds.fract() * 1e9) as libc::c_long,
        };
        let mut kids = Vec::with_capacity(children);
        for _ in 0..children {
            let pid = libc::fork();
            if pid == 0 {
                let mut sum = 0u8;
                for i in (0..len).step_by(4096) {
                    sum = sum.wrapping_add(std::ptr::read_volatile(p.add(i)));
                }
                std::hint::black_box(sum);
                libc::nanosleep(&nap, std::ptr::null_mut());
                libc::_exit(0);
            }
            kids.push(pid);
        }
        for pid in kids {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
    }
}

/// Double-forks a grandchild that calls `setsid` and holds `mib` MiB for `seconds`, then
/// returns after `linger_ms`: the classic daemon that escapes its parent.
pub fn daemonize(mib: usize, seconds: f64, linger_ms: u64) {
    use std::ffi::CString;
    let hold_ms = ((seconds * 1000.0) as u64).to_string();
    let argv: Vec<CString> = self_argv(&["hold", "--mib", &mib.to_string(), "--ms", &hold_ms])
        .into_iter()
        .map(|a| CString::new(a).expect("no NUL in arguments"))
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: fork in a single-threaded program; the children only call
    // async-signal-safe functions (setsid, fork, execv, _exit) before exec.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::setsid();
            if libc::fork() == 0 {
                libc::execv(ptrs[0], ptrs.as_ptr());
                libc::_exit(127);
            }
            libc::_exit(0);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
    std::thread::sleep(ms(linger_ms));
}

/// Work of known complexity for scale tests: `n` units (linear) or `n²/1000` units
/// (quadratic), each `rounds` of hashing, after `start_ms` of CPU spent as a fixed start
/// (loading, parsing a configuration). Prints `ops=…` and `elapsed_ms=…`.
pub fn work(n: u64, quadratic: bool, start_ms: f64, rounds: u64) {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed().as_secs_f64() * 1000.0 < start_ms {
        for j in 0..1000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(j));
        }
    }
    let units = if quadratic { n * n / 1000 } else { n };
    for i in 0..units {
        for j in 0..rounds {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i ^ j));
        }
    }
    println!(
        "ops={units} elapsed_ms={:.3} check={}",
        start.elapsed().as_secs_f64() * 1000.0,
        x % 7
    );
}

/// A listening socket with `backlog`, accepting one connection every `every`; each
/// accepted connection is served on a thread of its own (one request, then closed, with
/// `close`). Returns only on error.
pub fn backlog(listen: &str, backlog: i32, every: Duration, close: bool) -> i32 {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    let Ok(addr) = listen.parse::<std::net::SocketAddrV4>() else {
        eprintln!("--listen takes IPv4 ADDR:PORT");
        return 2;
    };
    // SAFETY: plain socket calls on a descriptor this function owns.
    let listener = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            4,
        );
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: addr.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*addr.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        if libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        ) != 0
            || libc::listen(fd, backlog) != 0
        {
            eprintln!(
                "cannot listen on {listen}: {}",
                std::io::Error::last_os_error()
            );
            return 1;
        }
        std::net::TcpListener::from_raw_fd(fd)
    };
    println!("listening on {listen} (backlog {backlog})");
    loop {
        std::thread::sleep(every);
        let Ok((mut conn, _)) = listener.accept() else {
            return 1;
        };
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut pending = Vec::new();
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 {
                    return;
                }
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                    pending.drain(..end + 4);
                    if close {
                        let reply =
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
                        let _ = conn.write_all(reply);
                        return;
                    }
                    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if conn.write_all(reply).is_err() {
                        return;
                    }
                }
            }
        });
    }
}
