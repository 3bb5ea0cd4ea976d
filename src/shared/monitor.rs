//! MONITOR: what every worker needs to know of the monitoring clients.
//!
//! The feed itself is built and delivered by the workers
//! (`worker/monitor.rs`); this is the little they share: how many
//! monitors there are in the whole process (the one relaxed load a
//! dispatched command pays), how many on each worker (where a batch of
//! lines has to go), and the bytes of batches sitting in each worker's
//! inbox (`pipe::PipeInbox`, as `PipeReply::Monitor`).
//!
//! Bound: a worker's inbox holds at most [`INBOX_MOST`] bytes of monitor
//! lines. A sender that would pass it drops its batch for that worker and
//! marks it `lost`; the receiving worker then disconnects its monitors,
//! which missed lines (what a node does to a client past its output
//! limit). Once delivered, the lines count toward each monitor's output
//! limits (`client-output-buffer-limit`, the pubsub class).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Most bytes of monitor lines waiting in one worker's inbox.
pub const INBOX_MOST: usize = 64 * 1024 * 1024;

#[derive(Default)]
pub struct PerWorker {
    /// Monitoring sessions on this worker.
    pub count: AtomicUsize,
    /// Bytes of monitor batches in its inbox, not taken yet.
    pub queued: AtomicUsize,
    /// A batch for it was dropped (its inbox was full).
    pub lost: AtomicBool,
}

pub struct Monitors {
    /// Read by every dispatched command on every worker, written only
    /// when a monitor comes or goes: on a cache line of its own.
    total: super::Padded<AtomicUsize>,
    pub workers: Vec<PerWorker>,
}

impl Monitors {
    pub fn new(workers: usize) -> Monitors {
        Monitors {
            total: super::Padded(AtomicUsize::new(0)),
            workers: (0..workers).map(|_| PerWorker::default()).collect(),
        }
    }

    /// Some client monitors (one relaxed load: the cost of a dispatched
    /// command while nobody does).
    #[inline]
    pub fn on(&self) -> bool {
        self.total.load(Ordering::Relaxed) != 0
    }

    /// A session of `worker` started monitoring.
    pub fn started(&self, worker: usize) {
        self.workers[worker].count.fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// A session of `worker` stopped monitoring (RESET, or it left).
    pub fn stopped(&self, worker: usize) {
        let _ =
            self.workers[worker]
                .count
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        let _ = self
            .total
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Monitoring sessions on `worker`.
    #[inline]
    pub fn on_worker(&self, worker: usize) -> usize {
        self.workers[worker].count.load(Ordering::Relaxed)
    }

    /// Reserve room for `len` bytes in `worker`'s inbox; false (and the
    /// worker marked `lost`) when that would pass [`INBOX_MOST`].
    pub fn reserve(&self, worker: usize, len: usize) -> bool {
        let w = &self.workers[worker];
        let ok = w
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q + len <= INBOX_MOST).then_some(q + len)
            })
            .is_ok();
        if !ok {
            w.lost.store(true, Ordering::Release);
        }
        ok
    }

    /// `worker` took `len` bytes of batches from its inbox.
    pub fn taken(&self, worker: usize, len: usize) {
        let _ =
            self.workers[worker]
                .queued
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                    Some(q.saturating_sub(len))
                });
    }

    /// Whether a batch for `worker` was dropped since it last asked.
    pub fn take_lost(&self, worker: usize) -> bool {
        let w = &self.workers[worker];
        w.lost.load(Ordering::Acquire) && w.lost.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_inbox_bound() {
        let m = Monitors::new(2);
        assert!(!m.on());
        m.started(1);
        assert!(m.on());
        assert_eq!((m.on_worker(0), m.on_worker(1)), (0, 1));
        m.stopped(1);
        m.stopped(1); // never below zero
        assert!(!m.on());
        assert!(m.reserve(0, INBOX_MOST - 1));
        assert!(!m.take_lost(0));
        assert!(!m.reserve(0, 2));
        assert!(m.take_lost(0));
        assert!(!m.take_lost(0));
        m.taken(0, INBOX_MOST - 1);
        assert!(m.reserve(0, 2));
    }
}
