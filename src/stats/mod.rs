//! Statistics: what each worker counts, how the counts leave the worker,
//! and how readers (INFO, SLOWLOG, the metrics endpoints) put them
//! together.
//!
//! ```text
//!  worker thread (plain integers, no lock, no atomic per request)
//!    dispatch ── stamp = start µs << 16 | command id ──► ring slot
//!    reply leaves the ring ── WorkerStats::reply_left(stamp) ── calls, µs,
//!                                                                failed, histogram
//!    reply reaches the proxy ── is_slow(stamp)? ──► SlowLogs (its own mutex)
//!    an error reply is made or relayed ── error_reply(frame) ── count by code
//!                                         (where errors are handled, cold)
//!    every tick (100 ms) and when asked ── Snapshot ──► Hub::snapshots[worker]
//!                                                      (ArcSwap, published whole)
//!  readers (INFO on any worker, the metrics thread)
//!    load every worker's latest Snapshot, add them up
//! ```
//!
//! A request's start is the loop turn that read it (the turn's clock,
//! `cx.now`, read once per turn); its end is the turn its reply was queued
//! to the client. Both are microseconds since the process started, kept
//! with the command's dense id in one `u64` per reply slot (the *stamp*).
//!
//! Per server pool: twemproxy's pool figures (client EOFs and errors,
//! forward errors, fragments) are counted per pool ([`PoolCounters`], by
//! the session's pool, or the backend's `server_pool` for requests lost
//! with its connection), and node totals per pool and address (a node two
//! pools name is counted apart in each); the open clients of each pool are
//! counted as the snapshot is made. Readers sum them pool by pool and
//! group nodes by pool through the map ([`pools`]).
//!
//! Invariants: a worker's counters are written by that worker only; other
//! threads see them only through published snapshots, which are immutable.
//! A snapshot is at most one tick old, and INFO asks every worker to
//! publish first (see `worker::observe`), so INFO is exact.
//!
//! Never: take a lock or touch an atomic on the per-request path; allocate
//! there except the first time a command is seen (its histogram).
//!
//! Layout: this file holds the published shapes (`Snapshot` and its
//! parts), the stamps and the `Hub`; `worker` what one worker counts
//! (`WorkerStats`), `totals` the sums readers make of the snapshots.

pub mod cmdid;
pub mod gather;
pub mod hist;
pub mod pools;
pub mod sample;
pub mod slowlog;
mod totals;
mod worker;

pub use self::totals::{totals, Totals};
pub use self::worker::WorkerStats;

use crate::command::Command;
use arc_swap::ArcSwap;
use hist::Hist;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A stamp that counts nothing (no command id).
pub const NO_STAMP: u64 = cmdid::NONE as u64;

/// The command id in a stamp.
#[inline]
pub fn stamp_cmd(stamp: u64) -> u16 {
    (stamp & 0xFFFF) as u16
}

/// The start (µs since the process started) in a stamp.
#[inline]
pub fn stamp_start(stamp: u64) -> u64 {
    stamp >> 16
}

/// Counters of events that are not per request, or cheap enough to count
/// where they happen. Summed over workers by readers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Clients closed for passing a limit (`query-buffer-limit`).
    pub evicted_qbuf: u64,
    /// Redirects followed.
    pub moved: u64,
    pub ask: u64,
    /// Waits scheduled after TRYAGAIN, and after CLUSTERDOWN.
    pub tryagain: u64,
    pub clusterdown: u64,
    /// Requests (or fan-out parts) re-sent key by key after TRYAGAIN.
    pub splits: u64,
    /// Requests refused before running (unknown command, arity, NOAUTH).
    pub rejected: u64,
    /// Backend connections lost with requests on them (any cause).
    pub backend_errors: u64,
    /// Of those, by `backend-timeout`.
    pub backend_timeouts: u64,
    /// Slow log entries written.
    pub slow_entries: u64,
    /// Slow requests not logged: the worker's budget for this tick was
    /// spent (see `WorkerStats::slow_budget`).
    pub slow_skipped: u64,
}

/// Counters of one server pool (`Shared::pools`' index), kept by each
/// worker for the sessions of that pool and for its nodes' connections:
/// twemproxy's pool fields. Summed over workers by readers, pool by pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounters {
    /// Client connections that ended with the client's EOF, and with a
    /// read or write error.
    pub client_eof: u64,
    pub client_err: u64,
    /// Clients of the pool open when the snapshot was taken (a gauge,
    /// counted at publication, not kept between snapshots).
    pub client_connections: u64,
    /// Requests answered with the proxy's own error because their node
    /// could not be reached or its connection was lost.
    pub forward_errors: u64,
    /// Parts sent for fanned-out and cluster-wide requests.
    pub fragments: u64,
}

impl PoolCounters {
    fn add(&mut self, o: &PoolCounters) {
        self.client_eof += o.client_eof;
        self.client_err += o.client_err;
        self.client_connections += o.client_connections;
        self.forward_errors += o.forward_errors;
        self.fragments += o.fragments;
    }
}

/// Per-node totals of one worker, kept across reconnections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeTotals {
    pub requests: u64,
    pub responses: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
    /// Sum and count of request round trips (written → answered).
    pub rtt_sum_us: u64,
    pub rtt_count: u64,
    pub errors: u64,
    pub timeouts: u64,
    /// Of the errors: the node closed the connection.
    pub eof: u64,
}

impl NodeTotals {
    fn add(&mut self, o: &NodeTotals) {
        self.requests += o.requests;
        self.responses += o.responses;
        self.bytes_out += o.bytes_out;
        self.bytes_in += o.bytes_in;
        self.rtt_sum_us += o.rtt_sum_us;
        self.rtt_count += o.rtt_count;
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.eof += o.eof;
    }
}

/// Round-trip clock of one backend connection: requests written in the
/// same turn form one batch; a reply closes the oldest batch's next
/// request. Work is per write and per read, not per request.
#[derive(Debug, Default)]
pub struct BatchClock {
    /// (µs when written, requests of that write not answered yet).
    batches: VecDeque<(u64, u32)>,
    pub sum_us: u64,
    pub count: u64,
}

impl BatchClock {
    /// `n` more requests were written at `now_us`.
    #[inline]
    pub fn sent(&mut self, n: usize, now_us: u64) {
        if n == 0 {
            return;
        }
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        match self.batches.back_mut() {
            Some(b) if b.0 == now_us => b.1 = b.1.saturating_add(n),
            _ => self.batches.push_back((now_us, n)),
        }
    }

    /// `n` replies arrived at `now_us`.
    #[inline]
    pub fn answered(&mut self, mut n: u64, now_us: u64) {
        while n > 0 {
            let Some(front) = self.batches.front_mut() else {
                return;
            };
            let k = n.min(u64::from(front.1));
            self.sum_us += k * now_us.saturating_sub(front.0);
            self.count += k;
            front.1 -= k as u32;
            n -= k;
            if front.1 == 0 {
                self.batches.pop_front();
            }
        }
    }
}

/// What a backend connection counts (a field of `Backend`).
#[derive(Debug, Default)]
pub struct BackendObs {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub clock: BatchClock,
}

/// One command's published figures.
#[derive(Clone, Debug)]
pub struct CmdSnap {
    pub id: u16,
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    pub hist: Option<Hist>,
}

impl CmdSnap {
    pub fn command(&self) -> Option<&'static Command> {
        cmdid::command(self.id)
    }
}

/// At most this many error codes are counted by name (Redis 7.2's bound):
/// an error of a code not seen before, once as many are known, counts only
/// in `total_error_replies`.
pub const MAX_ERROR_CODES: usize = 128;

/// Error replies by code: what `INFO errorstats` shows.
pub type ErrorCounts = Vec<(Box<[u8]>, u64)>;

/// The code Redis counts an error reply under: its first word, when a
/// space ends it within the first 31 bytes after the `-`; else `ERR`
/// (`afterErrorReply` in Redis's networking.c).
pub fn error_code(frame: &[u8]) -> &[u8] {
    let text = frame.strip_prefix(b"-").unwrap_or(frame);
    let text = text.strip_suffix(b"\r\n").unwrap_or(text);
    match text[..text.len().min(31)].iter().position(|&b| b == b' ') {
        Some(end) => &text[..end],
        None => b"ERR",
    }
}

/// One node as a worker sees it, for one server pool (a node two pools
/// name is two entries, as it has a connection set for each).
#[derive(Clone, Debug)]
pub struct NodeSnap {
    /// The server pool (`Shared::pools`' index).
    pub pool: usize,
    pub addr: SocketAddr,
    /// Live connections (pooled, leased, subscriber).
    pub connections: u64,
    /// Requests queued or awaiting a reply.
    pub in_flight: u64,
    /// Requests not yet written.
    pub unsent: u64,
    /// Bytes of the requests not yet written (what is left of them), and
    /// of those written and not answered yet.
    pub unsent_bytes: u64,
    pub awaiting_bytes: u64,
    /// Connects after a failure (the pool came back).
    pub reconnects: u64,
    /// The pool is backing off after failed connects.
    pub down: bool,
    pub totals: NodeTotals,
}

impl NodeSnap {
    /// A node of `pool` with nothing counted yet.
    pub fn blank(pool: usize, addr: SocketAddr) -> NodeSnap {
        NodeSnap {
            pool,
            addr,
            connections: 0,
            in_flight: 0,
            unsent: 0,
            unsent_bytes: 0,
            awaiting_bytes: 0,
            reconnects: 0,
            down: false,
            totals: NodeTotals::default(),
        }
    }
}

/// The clients of one worker at snapshot time.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientsSnap {
    pub connected: u64,
    pub blocked: u64,
    /// Sessions with a WATCH in force, each on a pinned connection.
    pub watching: u64,
    pub pubsub: u64,
    /// Sessions with CLIENT TRACKING on.
    pub tracking: u64,
    /// Keys in the worker's tracking table, (key, client) pairs in it,
    /// and the distinct BCAST prefixes of its clients.
    pub tracking_keys: u64,
    pub tracking_items: u64,
    pub tracking_prefixes: u64,
    pub qbuf: u64,
    pub qbuf_max: u64,
    pub out: u64,
    pub out_max: u64,
    /// Replies dispatched and not written yet, over all clients.
    pub outstanding: u64,
}

/// A (time, commands, bytes in, bytes out) sample for rates.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Instant,
    pub commands: u64,
    pub net_in: u64,
    pub net_out: u64,
}

/// Everything one worker publishes.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub worker: usize,
    pub now: Sample,
    /// The sample closest to one second before `now` (for rates).
    pub before: Sample,
    pub counters: Counters,
    /// By server pool (`Shared::pools`' index).
    pub pools: Vec<PoolCounters>,
    pub clients: ClientsSnap,
    pub cmds: Vec<Arc<CmdSnap>>,
    pub nodes: Vec<NodeSnap>,
    /// The reply cache's counters and sizes.
    pub cache: crate::cache::CacheStats,
    /// Error replies by code, in the order first seen.
    pub errors: Arc<ErrorCounts>,
}

impl Snapshot {
    pub fn empty(worker: usize, at: Instant) -> Snapshot {
        let s = Sample {
            at,
            commands: 0,
            net_in: 0,
            net_out: 0,
        };
        Snapshot {
            worker,
            now: s,
            before: s,
            counters: Counters::default(),
            pools: Vec::new(),
            clients: ClientsSnap::default(),
            cmds: Vec::new(),
            nodes: Vec::new(),
            cache: Default::default(),
            errors: Arc::default(),
        }
    }
}

/// The statistics side of `Shared`: every worker's latest snapshot, the
/// slow logs, and the settings workers read once at start.
pub struct Hub {
    pub snapshots: Vec<ArcSwap<Snapshot>>,
    pub slowlog: slowlog::SlowLogs,
    /// `stats yes`: per-request accounting is on.
    pub enabled: bool,
    /// `slowlog-log-slower-than` in µs; `u64::MAX` when off. Live (CONFIG
    /// SET): workers copy it at every loop turn.
    pub slow_threshold_us: AtomicU64,
    /// The zero of every stamp.
    pub base: Instant,
}

impl Hub {
    pub fn new(workers: usize, cfg: &crate::config::Config, base: Instant) -> Hub {
        Hub {
            snapshots: (0..workers)
                .map(|w| ArcSwap::from_pointee(Snapshot::empty(w, base)))
                .collect(),
            slowlog: slowlog::SlowLogs::new(workers, cfg.slowlog_max_len),
            enabled: cfg.stats,
            slow_threshold_us: AtomicU64::new(slow_threshold(cfg.slowlog_log_slower_than)),
            base,
        }
    }

    /// CONFIG SET slowlog-log-slower-than (negative: off).
    pub fn set_slow_threshold(&self, micros: i64) {
        self.slow_threshold_us
            .store(slow_threshold(micros), Ordering::Relaxed);
    }

    /// The live `slowlog-log-slower-than`, as the directive spells it.
    pub fn slow_threshold(&self) -> i64 {
        match self.slow_threshold_us.load(Ordering::Relaxed) {
            u64::MAX => -1,
            us => i64::try_from(us).unwrap_or(i64::MAX),
        }
    }

    /// Every worker's latest snapshot.
    pub fn load_all(&self) -> Vec<Arc<Snapshot>> {
        self.snapshots.iter().map(|s| s.load_full()).collect()
    }
}

/// The directive's value as a threshold: negative is off (`u64::MAX`).
fn slow_threshold(micros: i64) -> u64 {
    u64::try_from(micros).unwrap_or(u64::MAX)
}

/// Resident set size, from /proc/self/statm (0 where it cannot be read):
/// INFO memory and the metrics endpoint show it.
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub() -> Hub {
        Hub::new(1, &crate::config::Config::default(), Instant::now())
    }

    #[test]
    fn batch_clock_measures_round_trips() {
        let mut c = BatchClock::default();
        c.sent(2, 10);
        c.sent(1, 10);
        c.sent(2, 20);
        c.answered(2, 30);
        assert_eq!((c.count, c.sum_us), (2, 40));
        c.answered(3, 50);
        assert_eq!((c.count, c.sum_us), (5, 40 + 40 + 30 + 30));
        c.answered(1, 60); // more replies than requests: ignored
        assert_eq!(c.count, 5);
    }

    #[test]
    fn errors_count_by_their_code_as_redis_does() {
        assert_eq!(error_code(b"-ERR unknown command 'x'\r\n"), b"ERR");
        assert_eq!(error_code(b"-MY_ERR_CODE custom msg\r\n"), b"MY_ERR_CODE");
        assert_eq!(
            error_code(b"-NOSCRIPT No matching script.\r\n"),
            b"NOSCRIPT"
        );
        // No space within 32 bytes of the '-': ERR; a leading space: empty.
        assert_eq!(error_code(b"-ERR\r\n"), b"ERR");
        assert_eq!(
            error_code(b"-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 x\r\n"),
            b"ERR"
        );
        assert_eq!(
            error_code(b"-ABCDEFGHIJKLMNOPQRSTUVWXYZ01234 x\r\n"),
            b"ERR"
        );
        assert_eq!(
            error_code(b"-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123 x\r\n"),
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123"
        );
        assert_eq!(error_code(b"- lead\r\n"), b"");

        let h = hub();
        let mut w = WorkerStats::new(&h, 1);
        w.error_reply(b"-ERR x\r\n");
        w.error_reply(b"-WRONGTYPE y\r\n");
        w.error_reply(b"-ERR z\r\n");
        let first = w.error_snaps();
        assert_eq!(
            *first,
            vec![(b"ERR"[..].into(), 2), (b"WRONGTYPE"[..].into(), 1)]
        );
        assert!(Arc::ptr_eq(&first, &w.error_snaps()), "unchanged: shared");
        // Bounded: codes past the limit are not kept.
        for i in 0..2 * MAX_ERROR_CODES {
            w.error_reply(format!("-E{i} x\r\n").as_bytes());
        }
        assert_eq!(w.error_snaps().len(), MAX_ERROR_CODES);
        w.reset();
        assert!(w.error_snaps().is_empty());

        // Summed over workers, sorted by code.
        let t0 = Instant::now();
        let mut a = Snapshot::empty(0, t0);
        let mut b = Snapshot::empty(1, t0);
        a.errors = Arc::new(vec![(b"WRONGTYPE"[..].into(), 1), (b"ERR"[..].into(), 2)]);
        b.errors = Arc::new(vec![(b"ERR"[..].into(), 3)]);
        let t = totals(&[Arc::new(a), Arc::new(b)]);
        assert_eq!(
            t.errors,
            vec![(b"ERR".to_vec(), 5), (b"WRONGTYPE".to_vec(), 1)]
        );
    }

    #[test]
    fn pools_and_their_nodes_add_up_apart() {
        let h = hub();
        let mut w = WorkerStats::new(&h, 2);
        w.pool(0).fragments += 3;
        w.pool(1).client_eof += 1;
        w.pool(7).forward_errors += 1; // past the last: the last pool's
        let addr: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        w.node(0, addr).requests += 2;
        w.node(1, addr).requests += 5;
        let t0 = Instant::now();
        let snap = |w: &WorkerStats, id| {
            let mut s = Snapshot::empty(id, t0);
            s.pools = w.pools.clone();
            s.nodes = w
                .nodes
                .iter()
                .map(|(&(pool, addr), t)| NodeSnap {
                    totals: *t,
                    ..NodeSnap::blank(pool, addr)
                })
                .collect();
            Arc::new(s)
        };
        let (a, b) = (snap(&w, 0), snap(&w, 1));
        let t = totals(&[a, b]);
        assert_eq!(t.pools.len(), 2);
        assert_eq!(t.pool(0).fragments, 6);
        assert_eq!(t.pool(1).client_eof, 2);
        assert_eq!(t.pool(1).forward_errors, 2);
        assert_eq!(t.pool(9), PoolCounters::default());
        assert_eq!(t.all_pools().fragments, 6);
        // One address, two pools: two nodes, in pool order.
        let nodes: Vec<(usize, u64)> = t
            .nodes
            .iter()
            .map(|n| (n.pool, n.totals.requests))
            .collect();
        assert_eq!(nodes, [(0, 4), (1, 10)]);
        w.reset();
        assert_eq!(w.pools, vec![PoolCounters::default(); 2]);
    }
}
