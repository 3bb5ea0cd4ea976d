//! A ring pool's servers in and out of its ring: twemproxy's
//! `auto_eject_hosts`, with health checks of mithril's own.
//!
//! ```text
//!   worker: connection lost, connect failed, timeout,   ─► failed(i)
//!           -OOM / -BUSY / -LOADING
//!   refresher: a PING every second that fails           ─► failed(i)
//!   any reply, a PING answered                          ─► answered(i)
//!   failed(i) × server-failure-limit in a row ─► ejected for server-retry-timeout
//!   refresher: retry time passed and a PING answered    ─► back in the ring
//! ```
//!
//! The counters are atomics shared by the workers and the refresher: a
//! failure is counted where it is seen, and the refresher rebuilds the
//! ring from the servers that are in (`live`), exactly as twemproxy
//! rebuilds it for the same set. Unlike twemproxy, a server is probed
//! before it rejoins (twemproxy puts it back at the retry time and lets a
//! client's request find out whether it still fails), and a server no
//! client uses is still checked every second, so a request is not what
//! discovers a dead server.
//!
//! Without `auto_eject_hosts` nothing is ever ejected: a dead server's
//! keys get errors, as under twemproxy. Never: take a lock, or eject when
//! not asked to.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// One server's health.
#[derive(Default)]
pub struct ServerHealth {
    /// Failures in a row.
    failures: AtomicU32,
    /// Milliseconds (of the pool's clock) until which the server is out
    /// of the ring; 0: in it.
    out_until: AtomicU64,
    /// Times it was ejected (twemproxy's `server_ejects`, per server).
    ejects: AtomicU64,
    /// Unix microseconds of its last ejection (twemproxy's
    /// `server_ejected_at`), 0 if never.
    ejected_at_us: AtomicU64,
}

/// A ring pool's servers, in twemproxy's order (by name).
pub struct RingHealth {
    auto_eject: bool,
    limit: u32,
    retry_ms: u64,
    started: Instant,
    servers: Vec<ServerHealth>,
    /// A server left or may rejoin since the refresher last looked.
    changed: AtomicBool,
}

impl RingHealth {
    pub fn new(servers: usize, auto_eject: bool, limit: u32, retry_ms: u64) -> RingHealth {
        RingHealth {
            auto_eject,
            limit: limit.max(1),
            retry_ms,
            started: Instant::now(),
            servers: (0..servers).map(|_| ServerHealth::default()).collect(),
            changed: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        // Never 0, which means "in the ring".
        self.started.elapsed().as_millis() as u64 + 1
    }

    /// Server `i` failed once more; true when this ejected it (the caller
    /// asks for a refresh, which rebuilds the ring without it).
    pub fn failed(&self, i: usize) -> bool {
        let Some(s) = self.servers.get(i) else {
            return false;
        };
        if !self.auto_eject || s.out_until.load(Ordering::Relaxed) != 0 {
            return false;
        }
        if s.failures.fetch_add(1, Ordering::AcqRel) + 1 < self.limit {
            return false;
        }
        // The count starts again, as twemproxy's does, and only one
        // failure ejects.
        s.failures.store(0, Ordering::Release);
        let until = self.now_ms() + self.retry_ms;
        if s.out_until
            .compare_exchange(0, until, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        s.ejects.fetch_add(1, Ordering::Relaxed);
        let unix_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        s.ejected_at_us.store(unix_us, Ordering::Relaxed);
        self.changed.store(true, Ordering::Release);
        true
    }

    /// Server `i` answered: its failures in a row are over. One load when
    /// there were none (the common case, on every read of a reply).
    #[inline]
    pub fn answered(&self, i: usize) {
        if let Some(s) = self.servers.get(i) {
            if s.failures.load(Ordering::Relaxed) != 0 {
                s.failures.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Which servers are in the ring now.
    pub fn live(&self) -> Vec<bool> {
        self.servers
            .iter()
            .map(|s| s.out_until.load(Ordering::Acquire) == 0)
            .collect()
    }

    /// The ejected servers whose retry time has passed: the refresher
    /// probes each and calls [`rejoin`](Self::rejoin) or
    /// [`stay_out`](Self::stay_out).
    pub fn due(&self) -> Vec<usize> {
        let now = self.now_ms();
        self.servers
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                let t = s.out_until.load(Ordering::Acquire);
                t != 0 && t <= now
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Server `i` answered its probe after its retry time: back in.
    pub fn rejoin(&self, i: usize) {
        if let Some(s) = self.servers.get(i) {
            s.failures.store(0, Ordering::Release);
            s.out_until.store(0, Ordering::Release);
            self.changed.store(true, Ordering::Release);
        }
    }

    /// Server `i` still fails after its retry time: out for another one.
    pub fn stay_out(&self, i: usize) {
        if let Some(s) = self.servers.get(i) {
            s.out_until
                .store(self.now_ms() + self.retry_ms, Ordering::Release);
        }
    }

    /// Whether a server left or rejoined since the last call.
    pub fn take_changed(&self) -> bool {
        self.changed.swap(false, Ordering::AcqRel)
    }

    /// Server `i`'s ejections and the time of the last, in Unix
    /// microseconds (0: never), for the stats.
    pub fn ejections(&self, i: usize) -> (u64, u64) {
        self.servers.get(i).map_or((0, 0), |s| {
            (
                s.ejects.load(Ordering::Relaxed),
                s.ejected_at_us.load(Ordering::Relaxed),
            )
        })
    }

    pub fn auto_eject(&self) -> bool {
        self.auto_eject
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_leaves_after_the_limit_in_a_row_and_rejoins_when_told() {
        let h = RingHealth::new(3, true, 2, 60_000);
        assert!(!h.failed(1));
        h.answered(1); // a reply in between: the count starts again
        assert!(!h.failed(1));
        assert!(h.failed(1), "the second in a row ejects");
        assert_eq!(h.live(), [true, false, true]);
        assert!(h.take_changed());
        assert!(!h.take_changed());
        assert!(!h.failed(1), "an ejected server is not ejected twice");
        assert!(h.due().is_empty(), "not before its retry time");
        h.rejoin(1);
        assert_eq!(h.live(), [true, true, true]);
        assert_eq!(h.ejections(1).0, 1);
    }

    #[test]
    fn without_auto_eject_nothing_leaves() {
        let h = RingHealth::new(2, false, 1, 10);
        for _ in 0..10 {
            assert!(!h.failed(0));
        }
        assert_eq!(h.live(), [true, true]);
        assert!(!h.failed(7), "an unknown server is ignored");
    }

    #[test]
    fn a_server_past_its_retry_time_is_due_for_a_probe() {
        let h = RingHealth::new(1, true, 1, 0);
        assert!(h.failed(0));
        assert_eq!(h.due(), [0]);
        h.stay_out(0);
        assert_eq!(h.live(), [false]);
    }
}
