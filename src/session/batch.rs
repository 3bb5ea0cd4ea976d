//! A batch wait: the replies to one read leave together when they can
//! (`output::waits_for_batch`), so a session whose ready replies wait for
//! the rest of their read's is held back for at most `batch_wait_us`
//! (`worker/reply.rs`, `Timer::BatchWait`).
//!
//! Invariant: `batch_start` is the ring sequence of the first request of
//! its latest read; `batch_since` is 0 while no wait is on, the loop's µs
//! clock (at least 2) when one began, `BATCH_WAIT_OVER` once cut short;
//! changed only through the methods here.

use super::{Session, BATCH_WAIT_OVER};

impl Session {
    /// It read: the requests from here on are one batch.
    #[inline]
    pub fn batch_begins(&mut self) {
        self.batch_start = self.ring.next_seq();
    }

    /// A batch wait is on (or was cut short and not yet flushed).
    #[inline]
    pub fn in_batch_wait(&self) -> bool {
        self.batch_since != 0
    }

    /// Its replies wait for their batch from `now_us` on: `true` when no
    /// wait was on (the caller lists it for `Timer::BatchWait`).
    #[inline]
    pub fn start_batch_wait(&mut self, now_us: u64) -> bool {
        if self.batch_since != 0 {
            return false;
        }
        self.batch_since = now_us.max(BATCH_WAIT_OVER + 1);
        true
    }

    /// `Timer::BatchWait`: a wait on counts as over (its replies leave at
    /// the next flush): `true` when one was on.
    #[inline]
    pub fn cut_batch_wait(&mut self) -> bool {
        if self.batch_since == 0 {
            return false;
        }
        self.batch_since = BATCH_WAIT_OVER;
        true
    }

    /// Its replies leave now: no wait is on.
    #[inline]
    pub fn end_batch_wait(&mut self) {
        self.batch_since = 0;
    }
}
