//! The time limit's watchdog: Lua 5.4 sends every instruction through its hook code
//! while any hook is set, so a call's main thread runs with none while it is within
//! its time. One thread per process looks every [`PERIOD`] at the calls running; at a
//! call past its deadline, or whose run was cancelled, it signals the call's thread,
//! whose handler sets the instruction hook on the call's state (`lua_sethook`, which
//! Lua documents as safe in a signal handler). The hook then fails the call.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::{Duration, Instant};

use mlua::ffi;

/// How often the watchdog looks at the calls running.
pub const PERIOD: Duration = Duration::from_millis(20);

/// One thread's calls, as the watchdog sees them.
struct Slot {
    thread: libc::pthread_t,
    call: Mutex<Call>,
}

#[derive(Default)]
struct Call {
    /// The run the thread serves: its cancel flag.
    cancel: Option<Arc<AtomicBool>>,
    /// When the call running now must end (`None`: no call runs).
    deadline: Option<Instant>,
}

static SLOTS: Mutex<Vec<Weak<Slot>>> = Mutex::new(Vec::new());

thread_local! {
    /// The main thread of the state whose call runs on this thread (null: none), read
    /// by the signal handler.
    static RUNNING: AtomicPtr<ffi::lua_State> = const { AtomicPtr::new(std::ptr::null_mut()) };
    static SLOT: Arc<Slot> = register();
}

fn signal() -> c_int {
    libc::SIGRTMIN() + 1
}

/// The signal's handler: the instruction hook, at once, on the state of the call that
/// runs on this thread.
extern "C" fn on_signal(_: c_int) {
    let l = RUNNING.with(|r| r.load(Ordering::Acquire));
    if !l.is_null() {
        // SAFETY: `l` is the main thread of a state alive while it is set (cleared
        // before the call ends); lua_sethook may be called from a signal handler.
        unsafe { ffi::lua_sethook(l, Some(super::watch), ffi::LUA_MASKCOUNT, 1) };
    }
}

fn register() -> Arc<Slot> {
    static START: Once = Once::new();
    START.call_once(|| {
        // SAFETY: a zeroed sigaction with a valid handler and flags is well formed; the
        // handler reads a thread-local pointer and calls lua_sethook.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(signal(), &sa, std::ptr::null_mut());
        }
        std::thread::Builder::new()
            .name("script-watchdog".into())
            .spawn(watch_calls)
            .expect("the script's watchdog thread starts");
    });
    // SAFETY: pthread_self has no precondition.
    let slot = Arc::new(Slot {
        thread: unsafe { libc::pthread_self() },
        call: Mutex::new(Call::default()),
    });
    SLOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Arc::downgrade(&slot));
    slot
}

fn watch_calls() {
    loop {
        std::thread::sleep(PERIOD);
        let now = Instant::now();
        let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|w| w.strong_count() > 0);
        for slot in slots.iter().filter_map(Weak::upgrade) {
            let call = slot.call.lock().unwrap_or_else(|e| e.into_inner());
            let Some(deadline) = call.deadline else {
                continue;
            };
            let cancelled = call
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed));
            if cancelled || now > deadline {
                // SAFETY: the thread is alive: it holds no call past its end, and ends
                // one under this lock.
                unsafe { libc::pthread_kill(slot.thread, signal()) };
            }
        }
    }
}

/// Binds this thread's calls to a run's cancel flag.
pub fn serve(cancel: Arc<AtomicBool>) {
    SLOT.with(|s| s.call.lock().unwrap_or_else(|e| e.into_inner()).cancel = Some(cancel));
}

/// A call of `main`'s state running on this thread until `deadline`; ended when dropped.
pub struct Running(());

/// Starts watching a call of the state whose main thread is `main`.
pub fn begin(main: *mut ffi::lua_State, deadline: Instant) -> Running {
    RUNNING.with(|r| r.store(main, Ordering::Release));
    SLOT.with(|s| s.call.lock().unwrap_or_else(|e| e.into_inner()).deadline = Some(deadline));
    Running(())
}

/// The main thread of the state whose call runs on this thread (null: none).
pub fn running() -> *mut ffi::lua_State {
    RUNNING
        .try_with(|r| r.load(Ordering::Acquire))
        .unwrap_or(std::ptr::null_mut())
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = SLOT.try_with(|s| s.call.lock().unwrap_or_else(|e| e.into_inner()).deadline = None);
        let _ = RUNNING.try_with(|r| r.store(std::ptr::null_mut(), Ordering::Release));
    }
}
