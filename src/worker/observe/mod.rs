//! The worker's side of observability: counting, publishing, the slow log,
//! and the commands whose answer needs every worker (INFO, CLIENT LIST,
//! CLIENT KILL, CONFIG RESETSTAT) or the masters (INFO's keyspace).
//!
//! ```text
//!  INFO on worker A (3 masters, 2 workers)
//!    ring slot = gathering of 5 parts, finished by a closure
//!    parts 0..3: INFO of the node sections to each master (as DBSIZE fans out)
//!    handoff:    A ─► acceptor: take every connection waiting, hand it over
//!                acceptor ─► HandedOver ─► A   (after those Accepts)
//!    part 3+A:   A publishes its snapshot
//!    part 3+B:   Ask::Publish ─► worker B ─► Answer (fabric, both ways)
//!    last part in ─► info_text(every snapshot, masters merged) ─► reply
//! ```
//!
//! The hot path's share lives elsewhere and is marked `observe:` where it
//! sits: the stamp set at dispatch, `WorkerStats::reply_left` when a reply
//! leaves, the slow-log check when a reply arrives. Everything here runs
//! per tick, per event (connection, redirect, failure) or per admin
//! command, never per routed request.
//!
//! Invariants: a cross-worker answer occupies its session's ring slot until
//! every part is in (order is kept); no question about the workers'
//! clients is asked before the acceptor has handed over every connection
//! waiting when it was dispatched (or a second has passed); at most
//! `MAX_ASKS_IN_FLIGHT` questions are out or waiting per worker; answers a
//! full mailbox refused wait in the outbox and are retried each tick, never
//! dropped.
//!
//! Layout: this file holds the worker's observability state, the slow
//! log, the publication of snapshots and the tick; `ask` the questions to
//! every worker and the handoff they wait for, `commands` the commands
//! answered that way.

mod ask;
mod commands;

use self::ask::Waiting;
use super::purpose::{Backend, Purpose};
use super::{Timer, Worker};
use crate::command::{Args, Command};
use crate::router::Gather;
use crate::session::Session;
use crate::shared::{Shared, WorkerMsg};
use crate::stats::{
    cmdid, sample, slowlog, stamp_cmd, stamp_start, ClientsSnap, NodeSnap, Sample, Snapshot,
    WorkerStats,
};
use reactor::{Context, Key};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What a transaction is logged as in the slow log.
pub(super) const EXEC_FRAME: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

/// A worker's observability state.
pub struct Observe {
    pub stats: WorkerStats,
    /// Answers a full mailbox refused: (worker, message).
    outbox: Vec<(usize, WorkerMsg)>,
    /// Questions this worker sent and has no answer to yet.
    asks_out: usize,
    /// Questions waiting for a handoff from the acceptor, in order.
    waiting: VecDeque<Waiting>,
    /// The outstanding handoff request (0: none), how many of the front of
    /// `waiting` it covers, and since when.
    handoff: (u64, usize, Instant),
    /// The last handoff request number used.
    handoff_seq: u64,
    /// The topology epoch last logged.
    epoch_seen: u64,
    /// Commands, bytes in, bytes out at the last CONFIG RESETSTAT (the
    /// live counters keep counting; published figures start from here).
    reset_base: (u64, u64, u64),
}

impl Observe {
    pub fn new(shared: &Shared) -> Observe {
        Observe {
            stats: WorkerStats::new(&shared.stats, shared.pools.len()),
            outbox: Vec::new(),
            asks_out: 0,
            waiting: VecDeque::new(),
            handoff: (0, 0, Instant::now()),
            handoff_seq: 0,
            epoch_seen: 0,
            reset_base: (0, 0, 0),
        }
    }

    /// A session is closing: keep its byte counts.
    pub fn session_closed(&mut self, s: &Session) {
        let (read, written) = s.net_bytes();
        self.stats.retired_in += read;
        self.stats.retired_out += written;
        if s.eof() {
            self.stats.pool(s.pool()).client_eof += 1;
        }
    }

    /// A backend connection is going away: keep its totals for its node.
    pub fn retire_backend(&mut self, b: &Backend) {
        let n = self.stats.node(b.server_pool, b.addr);
        n.requests += b.replies + b.in_flight() as u64;
        n.responses += b.replies;
        n.bytes_in += b.obs.bytes_in;
        n.bytes_out += b.obs.bytes_out;
        n.rtt_sum_us += b.obs.clock.sum_us;
        n.rtt_count += b.obs.clock.count;
    }

    /// A backend connection of server pool `pool` failed with `lost`
    /// requests on it: count it and log it, at most once a second per
    /// node.
    pub fn backend_failed(
        &mut self,
        worker: usize,
        (pool, addr): (usize, SocketAddr),
        reason: &str,
        lost: usize,
        now: Instant,
    ) {
        let c = &mut self.stats.counters;
        c.backend_errors += 1;
        let timeout = reason.starts_with("backend-timeout");
        if timeout {
            c.backend_timeouts += 1;
        }
        self.stats.pool(pool).forward_errors += lost as u64;
        let n = self.stats.node(pool, addr);
        n.errors += 1;
        if timeout {
            n.timeouts += 1;
        }
        if reason.starts_with("connection closed") {
            n.eof += 1;
        }
        if let Some(held) = self.stats.sampler.allow("backend-failed", Some(addr), now) {
            log::warn!(
                target: "mithril::worker",
                "worker {worker}: connection to {addr} failed: {reason}{}",
                sample::note(held)
            );
        }
    }
}

/// Write a slow log entry for request `req` of `s`, stamped `stamp`.
pub(super) fn log_slow(
    shared: &Shared,
    worker: usize,
    stats: &mut WorkerStats,
    s: &Session,
    stamp: u64,
    req: &[u8],
) {
    if cmdid::command(stamp_cmd(stamp)).is_none() || !stats.take_slow_budget() {
        return;
    }
    let Some(args) = slowlog::entry_args(req) else {
        return;
    };
    stats.counters.slow_entries += 1;
    let unix_secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    shared.stats.slowlog.push(
        worker,
        slowlog::SlowEntry {
            id: 0,
            unix_secs,
            micros: stats.now_us.saturating_sub(stamp_start(stamp)),
            args,
            addr: s.peer().to_string(),
            name: s.name().map(<[u8]>::to_vec).unwrap_or_default(),
        },
    );
}

impl Worker {
    /// Local commands that observe the whole proxy; false: not one of them.
    /// The local commands that need every worker (or the masters): INFO,
    /// CLIENT LIST/KILL, CONFIG RESETSTAT, SLOWLOG.
    pub(super) fn gather(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        what: Gather,
        cmd: &'static Command,
        args: &Args,
    ) {
        match what {
            Gather::Info => self.info(cx, key, args),
            Gather::ClientList => self.client_list(cx, key, cmd, args),
            Gather::ClientKill => self.client_kill(cx, key, cmd, args),
            Gather::ClientUnblock => self.client_unblock(cx, key, cmd, args),
            Gather::ResetStats => self.reset_stats(cx, key, args),
            Gather::Slowlog => {
                let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
                    return;
                };
                let logs = &self.shared.stats.slowlog;
                let r = slowlog::command(logs, proto, cmd.name, args);
                self.reply(key, r);
                // Logged once it ran, as on a node: RESET leaves its own
                // entry, GET and LEN do not see theirs.
                self.slow_local(key, cmd, args);
            }
        }
    }

    /// With `slowlog-log-slower-than 0` every command is logged, those the
    /// proxy answers itself too (they take no measurable time), but for
    /// those flagged `skip_slowlog` (EXEC: a transaction the node ran is
    /// logged when its reply comes). Called after the command ran, with
    /// the threshold as it is now.
    pub(super) fn slow_local(&mut self, key: Key, cmd: &'static Command, args: &Args) {
        if cmd.flags & crate::command::flags::SKIP_SLOWLOG != 0 {
            return;
        }
        self.obs.stats.sync_slow_settings(&self.shared.stats);
        if self.obs.stats.slow_us != 0 || !self.obs.stats.take_slow_budget() {
            return;
        }
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        let entry = slowlog::SlowEntry {
            id: 0,
            unix_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            micros: 0,
            args: slowlog::trim_args(args),
            addr: s.peer().to_string(),
            name: s.name().map(<[u8]>::to_vec).unwrap_or_default(),
        };
        self.obs.stats.counters.slow_entries += 1;
        self.shared.stats.slowlog.push(self.id, entry);
    }

    /// An error reply for a request of `purpose` (a node's or the proxy's)
    /// that reaches its client as it is: counted by code for INFO
    /// errorstats. A part of a merge counts once merged (`fanout`,
    /// `collect_part`); a transaction's queued replies are not replies.
    #[cold]
    pub(super) fn observe_error(&mut self, purpose: Purpose, frame: &[u8]) {
        if matches!(
            purpose,
            Purpose::Client | Purpose::Txn | Purpose::Scan(_) | Purpose::Blocking | Purpose::Pin(_)
        ) {
            self.obs.stats.error_reply(frame);
        }
    }

    /// A request refused before it ran: count it, and make sure its error
    /// reply is not counted as a call.
    pub(super) fn observe_rejected(&mut self, key: Key, cmd: Option<&'static Command>) {
        self.obs.stats.rejected(cmd);
        if let Some(s) = self.sessions.get_mut(key) {
            s.ring.stamp = crate::stats::NO_STAMP;
        }
    }

    /// Commands dispatched, bytes read and written, since the worker
    /// started (closed sessions included).
    fn live_totals(&self) -> (u64, u64, u64) {
        let (mut net_in, mut net_out) = (self.obs.stats.retired_in, self.obs.stats.retired_out);
        for (_, s) in self.sessions.iter() {
            let (read, written) = s.net_bytes();
            net_in += read;
            net_out += written;
        }
        (self.commands, net_in, net_out)
    }

    /// Publish this worker's snapshot. `tick`: also take a rate sample.
    pub(super) fn publish_stats(&mut self, tick: bool) {
        let now = self.obs.stats.now();
        let mut clients = ClientsSnap::default();
        let mut pools = self.obs.stats.pools.clone();
        let last = pools.len() - 1;
        let (mut net_in, mut net_out) = (self.obs.stats.retired_in, self.obs.stats.retired_out);
        for (_, s) in self.sessions.iter() {
            clients.connected += 1;
            pools[s.pool().min(last)].client_connections += 1;
            clients.blocked += u64::from(s.input().is_blocked());
            clients.watching += u64::from(s.pin.is_some());
            clients.pubsub += u64::from(s.sub.as_ref().is_some_and(|x| x.count() > 0));
            clients.tracking += u64::from(s.tracking().is_some());
            let (q, o) = (s.rbuf.len() as u64, s.out_bytes() as u64);
            clients.qbuf += q;
            clients.qbuf_max = clients.qbuf_max.max(q);
            clients.out += o;
            clients.out_max = clients.out_max.max(o);
            clients.outstanding += s.outstanding() as u64;
            let (read, written) = s.net_bytes();
            net_in += read;
            net_out += written;
        }
        clients.tracking_keys = self.cache.table.len() as u64;
        clients.tracking_items = self.cache.table.items() as u64;
        if !self.cache.bcast.is_empty() {
            let mut prefixes: Vec<&[u8]> = self
                .cache
                .bcast
                .iter()
                .filter_map(|k| self.sessions.get(*k))
                .filter_map(|s| s.tracking())
                .flat_map(|t| t.prefixes.iter().map(Vec::as_slice))
                .collect();
            prefixes.sort_unstable();
            prefixes.dedup();
            clients.tracking_prefixes = prefixes.len() as u64;
        }
        let mut nodes: HashMap<(usize, SocketAddr), NodeSnap> = HashMap::new();
        for (&(pool, addr), t) in &self.obs.stats.nodes {
            nodes
                .entry((pool, addr))
                .or_insert_with(|| NodeSnap::blank(pool, addr))
                .totals = *t;
        }
        for (_, b) in self.backends.iter() {
            let (pool, addr) = (b.server_pool, b.addr);
            let e = nodes
                .entry((pool, addr))
                .or_insert_with(|| NodeSnap::blank(pool, addr));
            let in_flight = b.in_flight() as u64;
            e.connections += 1;
            e.in_flight += in_flight;
            e.unsent += in_flight - b.awaiting() as u64;
            // observe: per tick, over the unsent tail only (empty but for
            // a node that stopped reading).
            let (unsent_bytes, queued_bytes) = (b.unsent_bytes() as u64, b.request_bytes() as u64);
            e.unsent_bytes += unsent_bytes;
            e.awaiting_bytes += queued_bytes.saturating_sub(unsent_bytes);
            e.totals.requests += b.replies + in_flight;
            e.totals.responses += b.replies;
            e.totals.bytes_in += b.obs.bytes_in;
            e.totals.bytes_out += b.obs.bytes_out;
            e.totals.rtt_sum_us += b.obs.clock.sum_us;
            e.totals.rtt_count += b.obs.clock.count;
        }
        for (i, p) in self.place.conns.sets.iter().enumerate() {
            if p.retired {
                continue;
            }
            let (pool, addr) = (usize::from(p.key.pool), p.key.addr);
            let e = nodes
                .entry((pool, addr))
                .or_insert_with(|| NodeSnap::blank(pool, addr));
            e.reconnects += p.reconnects;
            e.down |= self.place.conns.is_down(i, now);
        }
        let (c0, in0, out0) = self.obs.reset_base;
        let sample = Sample {
            at: now,
            commands: self.commands.saturating_sub(c0),
            net_in: net_in.saturating_sub(in0),
            net_out: net_out.saturating_sub(out0),
        };
        let before = if tick {
            self.obs.stats.sample(sample)
        } else {
            self.obs.stats.before(sample)
        };
        let snap = Snapshot {
            worker: self.id,
            now: sample,
            before,
            counters: self.obs.stats.counters,
            pools,
            clients,
            cmds: self.obs.stats.command_snaps(),
            nodes: nodes.into_values().collect(),
            cache: self.cache.cache.snapshot(),
            errors: self.obs.stats.error_snaps(),
        };
        if let Some(slot) = self.shared.stats.snapshots.get(self.id) {
            slot.store(Arc::new(snap));
        }
    }

    /// Housekeeping, once per tick: publish, retry refused answers, log
    /// nodes going down and coming back, and topology changes.
    pub(super) fn observe_tick(&mut self, cx: &mut Context<'_, Timer>) {
        self.handoff_tick(cx);
        self.obs.stats.refill_slow_budget(&self.shared.stats);
        self.publish_stats(true);
        if !self.obs.outbox.is_empty() {
            for (to, msg) in std::mem::take(&mut self.obs.outbox) {
                let Some(w) = self.shared.workers.get(to) else {
                    continue;
                };
                if let Err(back) = w.tx.send(msg) {
                    self.obs.outbox.push((to, back));
                }
            }
        }
        let seen = &mut self.obs.stats.pool_seen;
        seen.resize(self.place.conns.sets.len(), (0, 0));
        for (p, was) in self.place.conns.sets.iter().zip(seen.iter_mut()) {
            if p.retired {
                // Its slot starts afresh when it is reused.
                *was = (0, 0);
                continue;
            }
            if p.failures > 0 && was.0 == 0 {
                log::info!(
                    target: "mithril::worker",
                    "worker {}: node {} is down: {}",
                    self.id,
                    p.key.addr,
                    p.last_error
                );
            }
            if p.reconnects > was.1 {
                log::info!(
                    target: "mithril::worker",
                    "worker {}: node {} is up again",
                    self.id,
                    p.key.addr
                );
            }
            *was = (p.failures, p.reconnects);
        }
        let topo = self.place.map();
        if topo.epoch != self.obs.epoch_seen {
            self.obs.epoch_seen = topo.epoch;
            let replicas: usize = topo.shards.iter().map(|s| s.replicas.len()).sum();
            log::info!(
                target: "mithril::worker",
                "worker {}: now routing with topology epoch {} ({} masters, {replicas} replicas)",
                self.id,
                topo.epoch,
                topo.shards.len()
            );
        }
    }
}
