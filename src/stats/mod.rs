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

pub mod cmdid;
pub mod gather;
pub mod hist;
pub mod pools;
pub mod sample;
pub mod slowlog;

use crate::command::Command;
use arc_swap::ArcSwap;
use hist::Hist;
use std::collections::{BTreeMap, HashMap, VecDeque};
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

/// One worker's error replies by code.
#[derive(Default)]
struct Errors {
    counts: ErrorCounts,
    /// What the last snapshot published, reused while nothing changed.
    published: Option<Arc<ErrorCounts>>,
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

/// Sums over a set of snapshots.
pub struct Totals {
    pub commands: u64,
    pub counters: Counters,
    /// By server pool (`Shared::pools`' index), summed over workers.
    pub pools: Vec<PoolCounters>,
    pub clients: ClientsSnap,
    pub net_in: u64,
    pub net_out: u64,
    /// Per second over about the last second.
    pub ops_per_sec: f64,
    pub in_kbps: f64,
    pub out_kbps: f64,
    /// By command id, merged.
    pub cmds: Vec<CmdSnap>,
    /// By server pool and node address, merged, sorted by pool then
    /// address.
    pub nodes: Vec<NodeSnap>,
    /// The reply caches, summed.
    pub cache: crate::cache::CacheStats,
    /// Error replies by code, merged, sorted by code (as Redis lists them).
    pub errors: Vec<(Vec<u8>, u64)>,
}

impl Totals {
    /// Server pool `pool`'s counters (zero for a pool no worker counted).
    pub fn pool(&self, pool: usize) -> PoolCounters {
        self.pools.get(pool).copied().unwrap_or_default()
    }

    /// Every pool's counters added up: the process's.
    pub fn all_pools(&self) -> PoolCounters {
        let mut sum = PoolCounters::default();
        for p in &self.pools {
            sum.add(p);
        }
        sum
    }
}

/// Add up the workers' snapshots.
pub fn totals(snaps: &[Arc<Snapshot>]) -> Totals {
    let mut t = Totals {
        commands: 0,
        counters: Counters::default(),
        pools: Vec::new(),
        clients: ClientsSnap::default(),
        net_in: 0,
        net_out: 0,
        ops_per_sec: 0.0,
        in_kbps: 0.0,
        out_kbps: 0.0,
        cmds: Vec::new(),
        nodes: Vec::new(),
        cache: Default::default(),
        errors: Vec::new(),
    };
    let mut errors: BTreeMap<&[u8], u64> = BTreeMap::new();
    let mut cmds: HashMap<u16, CmdSnap> = HashMap::new();
    let mut nodes: HashMap<(usize, SocketAddr), NodeSnap> = HashMap::new();
    for s in snaps {
        t.commands += s.now.commands;
        t.net_in += s.now.net_in;
        t.net_out += s.now.net_out;
        let secs = s
            .now
            .at
            .saturating_duration_since(s.before.at)
            .as_secs_f64();
        if secs > 0.0 {
            t.ops_per_sec += s.now.commands.saturating_sub(s.before.commands) as f64 / secs;
            t.in_kbps += s.now.net_in.saturating_sub(s.before.net_in) as f64 / secs / 1024.0;
            t.out_kbps += s.now.net_out.saturating_sub(s.before.net_out) as f64 / secs / 1024.0;
        }
        add_counters(&mut t.counters, &s.counters);
        if t.pools.len() < s.pools.len() {
            t.pools.resize(s.pools.len(), PoolCounters::default());
        }
        for (sum, p) in t.pools.iter_mut().zip(&s.pools) {
            sum.add(p);
        }
        t.cache.add(&s.cache);
        let c = &mut t.clients;
        c.connected += s.clients.connected;
        c.blocked += s.clients.blocked;
        c.watching += s.clients.watching;
        c.pubsub += s.clients.pubsub;
        c.tracking += s.clients.tracking;
        c.tracking_keys += s.clients.tracking_keys;
        c.tracking_items += s.clients.tracking_items;
        c.tracking_prefixes += s.clients.tracking_prefixes;
        c.qbuf += s.clients.qbuf;
        c.qbuf_max = c.qbuf_max.max(s.clients.qbuf_max);
        c.out += s.clients.out;
        c.out_max = c.out_max.max(s.clients.out_max);
        c.outstanding += s.clients.outstanding;
        for x in &s.cmds {
            let e = cmds.entry(x.id).or_insert_with(|| CmdSnap {
                id: x.id,
                calls: 0,
                usec: 0,
                rejected: 0,
                failed: 0,
                hist: None,
            });
            e.calls += x.calls;
            e.usec += x.usec;
            e.rejected += x.rejected;
            e.failed += x.failed;
            if let Some(h) = &x.hist {
                e.hist.get_or_insert_with(Hist::new).merge(h);
            }
        }
        for (code, n) in s.errors.iter() {
            *errors.entry(code).or_default() += n;
        }
        for n in &s.nodes {
            let e = nodes
                .entry((n.pool, n.addr))
                .or_insert_with(|| NodeSnap::blank(n.pool, n.addr));
            e.connections += n.connections;
            e.in_flight += n.in_flight;
            e.unsent += n.unsent;
            e.unsent_bytes += n.unsent_bytes;
            e.awaiting_bytes += n.awaiting_bytes;
            e.reconnects += n.reconnects;
            e.down |= n.down;
            e.totals.add(&n.totals);
        }
    }
    t.cmds = cmds.into_values().collect();
    t.cmds
        .sort_by_key(|c| c.command().map(|c| c.name).unwrap_or(""));
    t.nodes = nodes.into_values().collect();
    t.nodes.sort_by_key(|n| (n.pool, n.addr));
    t.errors = errors.into_iter().map(|(c, n)| (c.to_vec(), n)).collect();
    t
}

fn add_counters(a: &mut Counters, b: &Counters) {
    a.evicted_qbuf += b.evicted_qbuf;
    a.moved += b.moved;
    a.ask += b.ask;
    a.tryagain += b.tryagain;
    a.clusterdown += b.clusterdown;
    a.splits += b.splits;
    a.rejected += b.rejected;
    a.backend_errors += b.backend_errors;
    a.backend_timeouts += b.backend_timeouts;
    a.slow_entries += b.slow_entries;
    a.slow_skipped += b.slow_skipped;
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
    /// its first byte (an error reply counts as a failed call).
    #[inline]
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

    #[test]
    fn totals_add_workers_up() {
        let t0 = Instant::now();
        let mut a = Snapshot::empty(0, t0);
        let mut b = Snapshot::empty(1, t0);
        a.before.at = t0;
        a.now = Sample {
            at: t0 + Duration::from_secs(1),
            commands: 100,
            net_in: 2048,
            net_out: 0,
        };
        b.now = Sample {
            at: t0 + Duration::from_secs(2),
            commands: 50,
            net_in: 0,
            net_out: 0,
        };
        a.counters.moved = 2;
        b.counters.moved = 3;
        let get = cmdid::of(command::lookup(b"get").unwrap());
        let mut h = Hist::new();
        h.record(10);
        a.cmds.push(Arc::new(CmdSnap {
            id: get,
            calls: 1,
            usec: 10,
            rejected: 0,
            failed: 0,
            hist: Some(h.clone()),
        }));
        b.cmds.push(Arc::new(CmdSnap {
            id: get,
            calls: 1,
            usec: 30,
            rejected: 1,
            failed: 0,
            hist: Some(h),
        }));
        let t = totals(&[Arc::new(a), Arc::new(b)]);
        assert_eq!(t.commands, 150);
        assert_eq!(t.counters.moved, 5);
        assert!((t.ops_per_sec - 125.0).abs() < 1e-9, "{}", t.ops_per_sec);
        assert!((t.in_kbps - 2.0).abs() < 1e-9);
        assert_eq!(t.cmds.len(), 1);
        assert_eq!(
            (t.cmds[0].calls, t.cmds[0].usec, t.cmds[0].rejected),
            (2, 40, 1)
        );
        assert_eq!(t.cmds[0].hist.as_ref().unwrap().count(), 2);
    }
}
