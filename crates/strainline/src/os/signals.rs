//! Ctrl-C, SIGTERM and SIGHUP, turned into flags the main loop reads. The handler also
//! notes whether the signal came from the terminal (the kernel) or from `kill`: a
//! terminal's Ctrl-C already reached the command, which shares strainline's process
//! group, so only a signal sent to strainline alone is forwarded.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

static LAST: AtomicI32 = AtomicI32::new(0);
static FROM_KILL: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU32 = AtomicU32::new(0);
static SEEN: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = if info.is_null() {
        0
    } else {
        unsafe { (*info).si_code }
    };
    FROM_KILL.store(
        code == libc::SI_USER || code == libc::SI_QUEUE,
        Ordering::SeqCst,
    );
    LAST.store(sig, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Installs the handlers. Blocking calls are interrupted (no SA_RESTART) so the main
/// loop notices at once.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler and flags is well formed; the
        // handler only touches atomics, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// A signal that arrived since the last call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub signal: i32,
    /// Sent with kill(2) rather than by the terminal.
    pub from_kill: bool,
    /// How many signals have arrived in all.
    pub count: u32,
}

pub fn take() -> Option<Received> {
    let count = COUNT.load(Ordering::SeqCst);
    if count == SEEN.swap(count, Ordering::SeqCst) {
        return None;
    }
    Some(Received {
        signal: LAST.load(Ordering::SeqCst),
        from_kill: FROM_KILL.load(Ordering::SeqCst),
        count,
    })
}

/// Acts as a Ctrl-C from the terminal would (the live view's `q`): the run stops the
/// way it does on SIGINT. A SIGINT is not sent: in raw mode the command under test
/// never saw the key, and strainline stops it in order.
pub fn interrupt() {
    LAST.store(libc::SIGINT, Ordering::SeqCst);
    FROM_KILL.store(false, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Whether any signal has arrived at all.
pub fn interrupted() -> bool {
    COUNT.load(Ordering::SeqCst) > 0
}
