//! Signals, the synchronous way: block a set in the main thread before any
//! other thread exists (threads inherit the mask), then let one thread
//! `sigwait` on it. No async-signal handler ever runs Rust code.

use std::io;
use std::mem::MaybeUninit;

pub struct SignalSet {
    set: libc::sigset_t,
}

impl SignalSet {
    pub fn new(signals: &[libc::c_int]) -> io::Result<SignalSet> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set; sigaddset only reads
        // valid signal numbers (checked by its return value).
        unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            for &s in signals {
                if libc::sigaddset(set.as_mut_ptr(), s) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(SignalSet {
                set: set.assume_init(),
            })
        }
    }

    /// Block the set in the calling thread (and every thread it spawns
    /// afterwards).
    pub fn block(&self) -> io::Result<()> {
        // SAFETY: valid set pointer; old mask not requested.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &self.set, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }

    /// Wait for one of the (blocked) signals and return its number.
    pub fn wait(&self) -> io::Result<libc::c_int> {
        let mut sig: libc::c_int = 0;
        // SAFETY: valid set and output pointer.
        let r = unsafe { libc::sigwait(&self.set, &mut sig) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(sig)
    }
}

/// Ignore SIGPIPE process-wide: a write to a closed socket then fails with
/// EPIPE instead of killing the process.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigwait_receives_a_blocked_signal() {
        // SIGUSR2 is blocked in this test thread only and sent to it.
        let set = SignalSet::new(&[libc::SIGUSR2]).unwrap();
        set.block().unwrap();
        // SAFETY: signals this very thread, which has SIGUSR2 blocked.
        unsafe {
            libc::pthread_kill(libc::pthread_self(), libc::SIGUSR2);
        }
        assert_eq!(set.wait().unwrap(), libc::SIGUSR2);
    }
}
