//! What one worker counts, on its own thread, in plain integers: per
//! command (calls, time, failures, rejections, a latency histogram), error
//! replies by code, per server pool and per node; the slow log's budget
//! and threshold as the worker last read them; the rate samples. A
//! [`WorkerStats`] is owned by its worker and leaves it only as the
//! snapshot the worker publishes (`Snapshot`, built in `worker::observe`).
//!
//! Invariants: nothing here is shared or atomic; a snapshot's per-command
//! entries and error counts are shared with the last one while nothing
//! changed, not copied.
//!
//! Never: take a lock or touch an atomic on the per-request path
//! ([`WorkerStats::stamp`], [`WorkerStats::reply_left`],
//! [`WorkerStats::is_slow`]); allocate there except the first time a
//! command is seen (its histogram).

use super::hist::Hist;
use super::{
    cmdid, error_code, sample, stamp_cmd, stamp_start, CmdSnap, Counters, ErrorCounts, Hub,
    NodeTotals, PoolCounters, Sample, MAX_ERROR_CODES, NO_STAMP,
};
use crate::command::Command;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Per-command counters of one worker.
#[derive(Default)]
struct CmdStats {
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
    hist: Option<Box<Hist>>,
    /// What the last snapshot published for this command, reused while
    /// nothing changed.
    published: Option<Arc<CmdSnap>>,
}

/// One worker's error replies by code.
#[derive(Default)]
struct Errors {
    counts: ErrorCounts,
    /// What the last snapshot published, reused while nothing changed.
    published: Option<Arc<ErrorCounts>>,
}

/// Samples kept for rates: one per tick, a bit more than a second's worth.
const SAMPLES: usize = 12;

/// One worker's statistics. Owned by the worker; `pub` fields are the
/// event counters the worker bumps where the event happens.
pub struct WorkerStats {
    /// The current turn's clock, µs since the hub's `base`.
    pub now_us: u64,
    turn: Instant,
    enabled: bool,
    /// `slowlog-log-slower-than` in µs (`u64::MAX`: off).
    pub slow_us: u64,
    /// Slow log entries this worker may still write this tick: at most
    /// `slowlog-max-len` per tick, since no more could be kept anyway, so
    /// a flood of slow requests cannot make the proxy slower still.
    slow_budget: usize,
    slow_per_tick: usize,
    cmds: Vec<CmdStats>,
    errors: Errors,
    pub counters: Counters,
    /// By server pool (`Shared::pools`' index; never empty): see
    /// [`WorkerStats::pool`].
    pub pools: Vec<PoolCounters>,
    /// Per-node totals of connections already closed, and node events,
    /// by server pool and address.
    pub nodes: HashMap<(usize, SocketAddr), NodeTotals>,
    /// Client bytes of sessions already closed.
    pub retired_in: u64,
    pub retired_out: u64,
    /// Repeated error lines, sampled.
    pub sampler: sample::Sampler,
    samples: VecDeque<Sample>,
    /// Per pool (by index): (failures, reconnects) as the last tick saw
    /// them, to log a node going down and coming back.
    pub pool_seen: Vec<(u32, u64)>,
}

impl WorkerStats {
    /// A worker's statistics for `pools` server pools.
    pub fn new(hub: &Hub, pools: usize) -> WorkerStats {
        let mut cmds = Vec::new();
        cmds.resize_with(cmdid::count(), CmdStats::default);
        WorkerStats {
            now_us: 0,
            turn: hub.base,
            enabled: hub.enabled,
            slow_us: hub.slow_threshold_us.load(Ordering::Relaxed),
            slow_budget: hub.slowlog.max_len(),
            slow_per_tick: hub.slowlog.max_len(),
            cmds,
            errors: Errors::default(),
            counters: Counters::default(),
            pools: vec![PoolCounters::default(); pools.max(1)],
            nodes: HashMap::new(),
            retired_in: 0,
            retired_out: 0,
            sampler: sample::Sampler::new(),
            samples: VecDeque::with_capacity(SAMPLES + 1),
            pool_seen: Vec::new(),
        }
    }

    /// Move the clock to this turn's `now`; `now_us` is the same instant
    /// in µs since `base`, which the event loop computes once per turn
    /// (its epoch is the hub's base: `server.rs`).
    #[inline]
    pub fn set_now(&mut self, now: Instant, now_us: u64) {
        self.turn = now;
        self.now_us = now_us;
    }

    pub fn now(&self) -> Instant {
        self.turn
    }

    /// The stamp for a request of `cmd` dispatched this turn.
    #[inline]
    pub fn stamp(&self, cmd: &'static Command) -> u64 {
        if !self.enabled {
            return NO_STAMP;
        }
        (self.now_us << 16) | u64::from(cmdid::of(cmd))
    }

    /// A reply stamped `stamp` left for its client this turn; `head` is
    /// its first byte (an error reply counts as a failed call). Always
    /// inlined: `Session::flush` and its TLS twin both call it, and the
    /// plain one must not pay a call per reply for that (callgrind).
    #[inline(always)]
    pub fn reply_left(&mut self, stamp: u64, head: u8) {
        let Some(c) = self.cmds.get_mut(usize::from(stamp_cmd(stamp))) else {
            return;
        };
        let took = self.now_us.saturating_sub(stamp_start(stamp));
        c.calls += 1;
        c.usec += took;
        c.failed += u64::from(head == b'-' || head == b'!');
        match c.hist.as_mut() {
            Some(h) => h.record(took),
            None => {
                let mut h = Box::<Hist>::default();
                h.record(took);
                c.hist = Some(h);
            }
        }
    }

    /// Whether a reply stamped `stamp`, arriving now, is slow-log material.
    #[inline]
    pub fn is_slow(&self, stamp: u64) -> bool {
        // NO_STAMP's start is 0: its command check comes second, so the
        // usual case (not slow) costs one compare.
        self.now_us.saturating_sub(stamp_start(stamp)) >= self.slow_us
            && stamp_cmd(stamp) != cmdid::NONE
    }

    /// Take one slow log entry from this tick's budget; false (and the
    /// request counted as skipped) when it is spent.
    pub fn take_slow_budget(&mut self) -> bool {
        if self.slow_budget == 0 {
            self.counters.slow_skipped += 1;
            return false;
        }
        self.slow_budget -= 1;
        true
    }

    /// A new tick: the slow log settings as CONFIG SET last left them,
    /// and the budget full again.
    pub fn refill_slow_budget(&mut self, hub: &Hub) {
        self.slow_us = hub.slow_threshold_us.load(Ordering::Relaxed);
        self.slow_per_tick = hub.slowlog.max_len();
        self.slow_budget = self.slow_per_tick;
    }

    /// Once per loop turn: the slow log settings as CONFIG SET last left
    /// them (two relaxed loads), so a change made through any worker holds
    /// for every reply this worker receives from the next turn on, as a
    /// CONFIG SET on a Redis node holds for the next command. A longer
    /// `slowlog-max-len` adds to this tick's budget at once (from 0, the
    /// log starts at once); a shorter one applies from the next tick.
    #[inline]
    pub fn sync_slow_settings(&mut self, hub: &Hub) {
        self.slow_us = hub.slow_threshold_us.load(Ordering::Relaxed);
        let per_tick = hub.slowlog.max_len();
        if per_tick != self.slow_per_tick {
            self.slow_budget += per_tick.saturating_sub(self.slow_per_tick);
            self.slow_per_tick = per_tick;
        }
    }

    /// A request of `cmd` was refused before running.
    pub fn rejected(&mut self, cmd: Option<&'static Command>) {
        self.counters.rejected += 1;
        if let Some(cmd) = cmd {
            if let Some(c) = self.cmds.get_mut(usize::from(cmdid::of(cmd))) {
                c.rejected += 1;
            }
        }
    }

    /// An error reply reaches a client (`frame` starts with `-`): counted
    /// under its code. Called where errors are made or relayed, never for
    /// other replies.
    #[cold]
    pub fn error_reply(&mut self, frame: &[u8]) {
        if !self.enabled {
            return;
        }
        let code = error_code(frame);
        let counts = &mut self.errors.counts;
        match counts.iter().position(|(c, _)| **c == *code) {
            Some(i) => counts[i].1 += 1,
            None if counts.len() < MAX_ERROR_CODES => counts.push((code.into(), 1)),
            None => return,
        }
        self.errors.published = None;
    }

    /// The error counts for a snapshot (shared while unchanged).
    pub fn error_snaps(&mut self) -> Arc<ErrorCounts> {
        self.errors
            .published
            .get_or_insert_with(|| Arc::new(self.errors.counts.clone()))
            .clone()
    }

    /// The counters of server pool `pool` (a session's `pool()`, a
    /// backend's `server_pool`); an index past the last, which no caller
    /// has, counts in the last pool rather than panicking.
    #[inline]
    pub fn pool(&mut self, pool: usize) -> &mut PoolCounters {
        let last = self.pools.len() - 1;
        &mut self.pools[pool.min(last)]
    }

    /// Counters for `n` pools (a reload added some).
    pub fn pools_grow(&mut self, n: usize) {
        if self.pools.len() < n {
            self.pools.resize(n, PoolCounters::default());
        }
    }

    /// The node totals for `addr` as a node of server pool `pool`.
    pub fn node(&mut self, pool: usize, addr: SocketAddr) -> &mut NodeTotals {
        self.nodes.entry((pool, addr)).or_default()
    }

    /// CONFIG RESETSTAT: forget every counter (not the slow log). Byte
    /// totals keep counting: the worker subtracts where they stood.
    pub fn reset(&mut self) {
        for c in &mut self.cmds {
            let hist = c.hist.take();
            *c = CmdStats::default();
            if let Some(mut h) = hist {
                h.clear();
                c.hist = Some(h);
            }
        }
        self.counters = Counters::default();
        self.pools.fill(PoolCounters::default());
        self.errors = Errors::default();
        self.nodes.clear();
        self.samples.clear();
    }

    /// Record a rate sample (once per tick) and return the one closest to
    /// a second before it.
    pub fn sample(&mut self, now: Sample) -> Sample {
        self.samples.push_back(now);
        while self.samples.len() > SAMPLES {
            self.samples.pop_front();
        }
        self.before(now)
    }

    /// The kept sample closest to a second before `now` (`now` itself when
    /// none is older).
    pub fn before(&self, now: Sample) -> Sample {
        let target = now.at.checked_sub(std::time::Duration::from_secs(1));
        let found = match target {
            Some(t) => self.samples.iter().find(|s| s.at >= t),
            None => self.samples.front(),
        };
        found.copied().filter(|s| s.at <= now.at).unwrap_or(now)
    }

    /// The per-command part of a snapshot: entries unchanged since the
    /// last one are shared, not copied.
    pub fn command_snaps(&mut self) -> Vec<Arc<CmdSnap>> {
        let mut out = Vec::new();
        for (id, c) in self.cmds.iter_mut().enumerate() {
            if c.calls == 0 && c.rejected == 0 {
                continue;
            }
            let fresh = match &c.published {
                Some(p) => p.calls != c.calls || p.rejected != c.rejected,
                None => true,
            };
            if fresh {
                c.published = Some(Arc::new(CmdSnap {
                    id: id as u16,
                    calls: c.calls,
                    usec: c.usec,
                    rejected: c.rejected,
                    failed: c.failed,
                    hist: c.hist.as_deref().cloned(),
                }));
            }
            if let Some(p) = &c.published {
                out.push(p.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command;
    use std::time::Duration;

    fn hub() -> Hub {
        Hub::new(1, &crate::config::Config::default(), Instant::now())
    }

    #[test]
    fn stamps_count_calls_time_and_failures() {
        let h = hub();
        let mut w = WorkerStats::new(&h, 1);
        let get = command::lookup(b"get").unwrap();
        w.set_now(h.base + Duration::from_micros(100), 100);
        let s = w.stamp(get);
        assert_eq!(stamp_start(s), 100);
        assert_eq!(cmdid::command(stamp_cmd(s)).unwrap().name, "get");
        w.set_now(h.base + Duration::from_micros(350), 350);
        w.reply_left(s, b'$');
        w.reply_left(s, b'-');
        w.reply_left(NO_STAMP, b'$');
        w.rejected(Some(get));
        let snaps = w.command_snaps();
        assert_eq!(snaps.len(), 1);
        let g = &snaps[0];
        assert_eq!((g.calls, g.usec, g.failed, g.rejected), (2, 500, 1, 1));
        assert_eq!(g.hist.as_ref().unwrap().count(), 2);
        let again = w.command_snaps();
        assert!(
            Arc::ptr_eq(&snaps[0], &again[0]),
            "unchanged entries are shared"
        );
        w.slow_us = 200;
        assert!(w.is_slow(s));
        w.slow_us = 300;
        assert!(!w.is_slow(s));
        assert!(!w.is_slow(NO_STAMP));
        w.reset();
        assert!(w.command_snaps().is_empty());
    }
}
