//! Timers: one binary heap per event loop, with cancellation.
//!
//! A timer is an entry in a [`GenSlab`] holding its payload, plus a heap
//! record `(deadline, key)`. Cancelling removes the slab entry; the heap
//! record becomes stale and is skipped when it surfaces. Stale records are
//! bounded: when they outnumber live timers (plus a small slack) the heap is
//! rebuilt from the live entries, so a workload that schedules and cancels in
//! a loop cannot grow the heap without limit.
//!
//! Deadlines are microseconds on the owning loop's clock
//! (`Context::now_us`, counted from the loop's epoch), not `Instant`s: the
//! loop compares the earliest one with its clock and turns the difference
//! into its poll timeout every turn, and in integers that is a compare and
//! a subtraction instead of two calls into the `Instant` arithmetic.
//!
//! Timers are for coarse events (connect timeouts, retry waits, debounce,
//! periodic samples), not for one deadline per request: per-request
//! deadlines are checked by a periodic sweep of the in-flight queues.

use crate::token::{GenSlab, Key};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// `d` in whole microseconds, rounded up.
pub fn micros_ceil(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(d.subsec_nanos().div_ceil(1000)))
}

/// Handle of a scheduled timer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(pub Key);

pub struct Timers<T> {
    /// (deadline in µs, schedule order, entry).
    heap: BinaryHeap<Reverse<(u64, u64, Key)>>,
    entries: GenSlab<T>,
    seq: u64,
}

impl<T> Default for Timers<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Timers<T> {
    pub fn new() -> Self {
        Timers {
            heap: BinaryHeap::new(),
            entries: GenSlab::new(),
            seq: 0,
        }
    }

    /// Schedule `data` to fire at `at` (µs on the loop's clock). Timers
    /// with equal deadlines fire in the order they were scheduled.
    pub fn schedule(&mut self, at: u64, data: T) -> TimerId {
        let key = self.entries.insert(data);
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, key)));
        self.maybe_compact();
        TimerId(key)
    }

    /// Schedule `data` to fire `after` from `now` (µs on the loop's clock).
    /// The clock counts whole microseconds, so a timer is exact to within
    /// one: far finer than the poll's millisecond timeout.
    pub fn schedule_in(&mut self, now: u64, after: Duration, data: T) -> TimerId {
        self.schedule(now.saturating_add(micros_ceil(after)), data)
    }

    /// Cancel a timer; returns its payload if it had not fired yet.
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        let data = self.entries.remove(id.0);
        if data.is_some() {
            self.maybe_compact();
        }
        data
    }

    pub fn is_pending(&self, id: TimerId) -> bool {
        self.entries.contains(id.0)
    }

    /// Number of live (not yet fired, not cancelled) timers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The earliest live deadline. Drops stale records it finds on top.
    pub fn next_deadline(&mut self) -> Option<u64> {
        while let Some(Reverse((at, _, key))) = self.heap.peek() {
            if self.entries.contains(*key) {
                return Some(*at);
            }
            self.heap.pop();
        }
        None
    }

    /// Pop one timer whose deadline is at or before `now`. The common
    /// case, nothing due, is a peek and a compare, inlined into the loop.
    #[inline]
    pub fn pop_expired(&mut self, now: u64) -> Option<(TimerId, T)> {
        match self.heap.peek() {
            Some(Reverse((at, _, _))) if *at <= now => self.pop_due(now),
            _ => None,
        }
    }

    fn pop_due(&mut self, now: u64) -> Option<(TimerId, T)> {
        loop {
            let Reverse((at, _, key)) = *self.heap.peek()?;
            // Not due yet: whether it was cancelled can wait (the common
            // case, checked once per loop turn).
            if at > now {
                return None;
            }
            if !self.entries.contains(key) {
                self.heap.pop();
                continue;
            }
            self.heap.pop();
            let data = self.entries.remove(key)?;
            return Some((TimerId(key), data));
        }
    }

    fn maybe_compact(&mut self) {
        let live = self.entries.len();
        if self.heap.len() > 2 * live + 64 {
            let entries = &self.entries;
            self.heap.retain(|Reverse((_, _, k))| entries.contains(*k));
        }
    }

    #[cfg(test)]
    fn heap_len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_in_deadline_order_then_fifo() {
        let t0 = 1_000_000u64;
        let mut t = Timers::new();
        t.schedule(t0 + 30_000, "c");
        t.schedule(t0 + 10_000, "a");
        t.schedule(t0 + 20_000, "b1");
        t.schedule(t0 + 20_000, "b2");
        assert_eq!(t.next_deadline(), Some(t0 + 10_000));
        assert!(t.pop_expired(t0).is_none());
        let mut fired = vec![];
        while let Some((_, d)) = t.pop_expired(t0 + 25_000) {
            fired.push(d);
        }
        assert_eq!(fired, vec!["a", "b1", "b2"]);
        assert_eq!(t.len(), 1);
        assert_eq!(t.pop_expired(t0 + 1_000_000).map(|x| x.1), Some("c"));
        assert!(t.is_empty());
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn cancel_prevents_firing_and_returns_payload() {
        let t0 = 1_000_000u64;
        let mut t = Timers::new();
        let a = t.schedule(t0, 1);
        let b = t.schedule(t0, 2);
        assert!(t.is_pending(a));
        assert_eq!(t.cancel(a), Some(1));
        assert!(!t.is_pending(a));
        assert_eq!(t.cancel(a), None);
        assert_eq!(t.pop_expired(t0).map(|x| x.1), Some(2));
        assert_eq!(t.cancel(b), None, "a fired timer cannot be cancelled");
        assert!(t.pop_expired(t0).is_none());
    }

    #[test]
    fn stale_records_are_bounded() {
        let t0 = 1_000_000u64;
        let mut t = Timers::new();
        let keep = t.schedule(t0 + 100_000_000, 0u32);
        for i in 0..100_000u32 {
            let id = t.schedule(t0 + 10_000_000, i);
            t.cancel(id);
        }
        assert!(
            t.heap_len() <= 2 * t.len() + 65,
            "heap grew to {}",
            t.heap_len()
        );
        assert_eq!(t.next_deadline(), Some(t0 + 100_000_000));
        assert!(t.is_pending(keep));
    }

    #[test]
    fn delays_count_in_whole_microseconds() {
        assert_eq!(micros_ceil(Duration::from_nanos(1)), 1);
        assert_eq!(micros_ceil(Duration::from_micros(7)), 7);
        assert_eq!(micros_ceil(Duration::from_millis(2)), 2_000);
        assert_eq!(micros_ceil(Duration::MAX), u64::MAX);
        let mut t = Timers::new();
        t.schedule_in(10, Duration::from_nanos(4_500), ());
        assert_eq!(t.next_deadline(), Some(15));
        assert!(t.pop_expired(14).is_none());
        assert!(t.pop_expired(15).is_some());
    }
}
