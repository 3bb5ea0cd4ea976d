//! Output pressure: how much a session may dispatch while its client is
//! slow to read, and the bookkeeping the overload limits need.
//!
//! Owns the per-session numbers behind three bounds (the worker applies
//! them; see `worker/overload.rs`):
//!
//! - the **dispatch window**: how many replies the session may have
//!   outstanding. It starts at [`INITIAL_WINDOW`] (a client's first batch
//!   costs at most that many replies, whatever their size), then follows the size of
//!   the replies the session has been getting: about `client-output-high-
//!   water` bytes' worth of them, never more than [`MAX_OUTSTANDING`] and
//!   never less than one. Zero while the unsent output is at or above the
//!   high-water mark, so the session stops dispatching until its client
//!   reads.
//! - the **soft output limit** clock of `client-output-buffer-limit`.
//! - the bytes this session last added to its worker's buffered-bytes
//!   counter (`maxmemory`), so the worker can correct the counter by the
//!   difference at its next coarse accounting point.
//!
//! Why a window sized by replies: a request is small and its reply can be
//! huge (a GET of a 100 KB value). A client that pipelines such requests
//! and does not read would otherwise make the proxy fetch every reply it
//! asked for; with the window, what the proxy holds for it is about the
//! high-water mark in unsent output plus one window of replies in flight.
//! The reply-size estimate is the largest reply of the last flush, or half
//! of the previous estimate if that is larger, so it rises at once and
//! decays within a few turns.
//!
//! Invariant: nothing here is touched per request except the window
//! compare; the estimate is updated once per flush.

use super::ring::MAX_OUTSTANDING;
use std::time::Instant;

/// Replies a session may have outstanding before it has shown how large
/// its replies are (its first flush).
pub const INITIAL_WINDOW: usize = 16;

#[derive(Debug)]
pub struct Pressure {
    /// Replies the session may have outstanding; 0 while over high water.
    pub window: usize,
    /// The window while under high water: about high water in replies.
    pub fit: usize,
    /// Estimated bytes per reply; 0 until the first reply was collected.
    pub reply_est: usize,
    /// Largest reply collected since the last [`Pressure::update`].
    pub batch_max: usize,
    /// Bytes written to the client since the worker last looked (idle
    /// `timeout` counts writes as activity, as Redis does).
    pub wrote: bool,
    /// Bytes of out-of-band pushes waiting for their barrier.
    pub push_bytes: usize,
    /// Since when the unsent output has been at or above the soft limit.
    pub soft_since: Option<Instant>,
    /// Bytes this session last added to its worker's buffered counter.
    pub accounted: usize,
    /// Output held this session last added to its worker's share of
    /// `client-output-total-limit` (worker/overload.rs).
    pub held: usize,
    /// Its held output reached the hard output limit where a reply was
    /// appended: it is closed at this turn's flush, before writing, and
    /// its input is dropped meanwhile, whatever its input mode (see
    /// `session::input`).
    pub over_hard: bool,
}

impl Default for Pressure {
    fn default() -> Self {
        Pressure {
            window: INITIAL_WINDOW,
            fit: INITIAL_WINDOW,
            reply_est: 0,
            batch_max: 0,
            wrote: false,
            push_bytes: 0,
            soft_since: None,
            accounted: 0,
            held: 0,
            over_hard: false,
        }
    }
}

impl Pressure {
    /// After a flush: fold the replies just collected into the estimate and
    /// recompute the window for `unsent` bytes still waiting.
    #[inline]
    pub fn update(&mut self, unsent: usize, high_water: usize) {
        if self.batch_max != 0 {
            let est = self.batch_max.max(self.reply_est / 2);
            self.batch_max = 0;
            if est != self.reply_est {
                self.reply_est = est;
                self.fit = match high_water.checked_div(est) {
                    None => INITIAL_WINDOW,
                    Some(w) => w.clamp(1, MAX_OUTSTANDING),
                };
            }
        }
        self.window = if unsent >= high_water { 0 } else { self.fit };
    }

    /// A paused session may dispatch again: its output is down to half the
    /// high-water mark and half its window has drained.
    pub fn may_resume(&self, outstanding: usize, unsent: usize, high_water: usize) -> bool {
        unsent <= high_water / 2 && outstanding <= self.window / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HW: usize = 4 * 1024 * 1024;

    #[test]
    fn window_follows_reply_sizes() {
        let mut p = Pressure::default();
        assert_eq!(p.window, INITIAL_WINDOW);
        // Nothing collected yet: the initial window stays.
        p.update(0, HW);
        assert_eq!(p.window, INITIAL_WINDOW);
        // Small replies: the full ring.
        p.batch_max = 7;
        p.update(0, HW);
        assert_eq!(p.window, MAX_OUTSTANDING);
        // One 100 KB reply shrinks it at once.
        p.batch_max = 100 * 1024;
        p.update(0, HW);
        assert_eq!(p.window, 40);
        // Then it decays by half per flush of small replies.
        p.batch_max = 10;
        p.update(0, HW);
        assert_eq!(p.reply_est, 50 * 1024);
        assert_eq!(p.window, 81);
        // Replies bigger than the high-water mark: one at a time.
        p.batch_max = 64 * 1024 * 1024;
        p.update(0, HW);
        assert_eq!(p.window, 1);
    }

    #[test]
    fn over_high_water_closes_the_window_until_half_drained() {
        let mut p = Pressure {
            batch_max: 100,
            ..Default::default()
        };
        p.update(HW, HW);
        assert_eq!(p.window, 0);
        assert!(!p.may_resume(0, HW / 2 + 1, HW));
        p.update(HW / 2, HW);
        assert_eq!(p.window, HW / 100);
        assert!(p.may_resume(p.window / 2, HW / 2, HW));
        assert!(!p.may_resume(p.window / 2 + 1, HW / 2, HW));
    }
}
