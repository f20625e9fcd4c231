//! A sleep with microsecond precision for the open model's schedule. tokio's timer wheel
//! has millisecond resolution, which would add up to a millisecond of the generator's
//! own error to every corrected latency; a `timerfd` armed at the absolute intended time
//! and awaited through the reactor wakes within the kernel's timer precision instead.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use tokio::io::unix::AsyncFd;

pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
}

fn monotonic_now() -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts
}

impl PreciseTimer {
    /// Must be called inside a tokio runtime with IO enabled.
    pub fn new() -> io::Result<PreciseTimer> {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Timers of this thread may fire late by the thread's "timer slack" (50 µs by
        // default); ask for none.
        // SAFETY: prctl with these arguments has no memory effects.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
        // SAFETY: fd is a fresh descriptor we own.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an OwnedFd keeps its descriptor open and unchanged until dropped.
        let fd = unsafe { AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(PreciseTimer { fd })
    }

    /// Sleeps until `at` (returns at once if it has passed).
    pub async fn sleep_until(&self, at: Instant) {
        let now = Instant::now();
        if at <= now {
            return;
        }
        let wait = at - now;
        let base = monotonic_now();
        let mut ns = base.tv_nsec as i128 + wait.subsec_nanos() as i128;
        let mut sec = base.tv_sec as i128 + wait.as_secs() as i128;
        if ns >= 1_000_000_000 {
            ns -= 1_000_000_000;
            sec += 1;
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: sec as libc::time_t,
                tv_nsec: ns as libc::c_long,
            },
        };
        let fd = self.fd.get_ref().as_raw_fd();
        // SAFETY: a valid timerfd and itimerspec.
        if unsafe {
            libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        } != 0
        {
            tokio::time::sleep_until(at.into()).await;
            return;
        }
        loop {
            let Ok(mut guard) = self.fd.readable().await else {
                tokio::time::sleep_until(at.into()).await;
                return;
            };
            let mut expirations = 0u64;
            // SAFETY: reading 8 bytes into a u64 from a timerfd.
            let n = unsafe { libc::read(fd, (&mut expirations as *mut u64).cast(), 8) };
            if n == 8 {
                return;
            }
            guard.clear_ready();
            if Instant::now() >= at {
                return;
            }
        }
    }
}
