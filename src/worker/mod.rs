//! Workers: one event loop per thread, owning its sessions, its backend
//! connections and its timers. Nothing inside a worker is locked or
//! atomically counted per request.
//!
//! Loop phases (see `reactor::event_loop`):
//!
//! ```text
//!   poll ─► events ─────────────► fabric ─────────────► timers ─► before_sleep
//!           session: read, scan,   new clients,          connect   flush backends
//!             dispatch requests    shutdown, topology    timeouts, (≤256 frames per
//!           backend: read replies, epoch check, leftover  tick       writev), then
//!             deliver / redirect   reads (budget)                   sessions
//! ```
//!
//! A request is read from the session's socket, cut as a `Bytes` slice,
//! given a ring slot, queued on a backend's FIFO, and written with every
//! other request queued on that backend this turn. Its reply comes back as
//! a slice of the backend's buffer into the ring slot, and leaves in order
//! with everything else ready for that session at the end of the turn.
//!
//! A request's way is split in two files named for its halves:
//! `request` (read, scan, dispatch, queue on a backend, write to the node)
//! and `reply` (read the node, pair, redirect or retry, deliver, write to
//! the client). The routing kinds live in submodules: `dispatch` (apply
//! the router's decision), `fanout` (per-slot split and merge,
//! cluster-wide commands), `txn` (MULTI/EXEC), `blocking` (leases),
//! `watch` (WATCH on a pinned lease),
//! `pubsub` (subscriber connections), `replfeed` (SYNC / PSYNC: a client
//! fed the masters' replication streams), `scripts` (SCRIPT/FUNCTION and the
//! registry's reloads), `retry` (TRYAGAIN, CLUSTERDOWN, gates), `down`
//! (a pipeline's CLUSTERDOWN waited out in order), `cache` (the reply
//! cache), `trackers` (its tracker connections), `tracking` (clients'
//! CLIENT TRACKING); `backend_end` (a node connection closed or failed);
//! `overload` and `observe` bound and count;
//! `invariants` checks, in debug builds.
//!
//! A panic while handling one session's input is caught here, closes that
//! session only (its admission ticket is released by its drop), is logged,
//! and the worker goes on serving everyone else.

mod admin;
mod backend_end;
mod blocking;
mod cache;
mod dispatch;
mod down;
mod fanout;
#[cfg(debug_assertions)]
mod invariants;
mod live;
mod monitor;
mod observe;
mod overload;
mod park;
mod pipes;
mod pubsub;
mod purpose;
mod replfeed;
mod reply;
mod request;
mod retry;
mod revoke;
mod scripts;
#[cfg(debug_assertions)]
mod testhook;
mod tls;
mod trackers;
mod tracking;
mod txn;
mod watch;

use self::purpose::{Backend, InFlight, Purpose, Read};
use crate::backend::connset::SetKey;
use crate::backend::{Io, Role, State};
use crate::placement::Placement;
use crate::resp::limits::Limits;
use crate::resp::Proto;
use crate::router::{self, Redirect};
use crate::session::{FlushOutcome, Input, ReadOutcome, Session};
use crate::shared::{Shared, WorkerMsg};
use bytes::Bytes;
use mio::event::Event;
use mio::Interest;
use reactor::event_loop::token_for;
use reactor::{Context, FabricReceiver, GenSlab, Handler, Key, Kind, TimerId};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const SESSION: Kind = Kind(1);
pub const BACKEND: Kind = Kind(2);

/// Bytes read from one client per readiness event before others get a turn.
const SESSION_READ_BUDGET: usize = 256 * 1024;
/// Bytes read from one backend per readiness event.
const BACKEND_READ_BUDGET: usize = 1024 * 1024;
/// Requests this large leave the read buffer they grew with the frame.
const LARGE_REQUEST: usize = 1024 * 1024;
/// Arguments past which a request's argument vector is given back as soon
/// as it is dispatched.
const MANY_ARGS: usize = 4096;
/// Housekeeping period.
const TICK: Duration = Duration::from_millis(100);

const HELLO3: &[u8] = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n";
const READONLY: &[u8] = b"*1\r\n$8\r\nREADONLY\r\n";
/// What a client gets when a redirect's endpoint stays unknown through
/// every retry wait.
const ERR_UNRESOLVED: &[u8] =
    b"-TRYAGAIN mithril: the cluster redirected to an endpoint not known yet\r\n";

/// `f` made ready to be sent again, after a redirect or a retry wait:
/// ASKING before it or not, and a transaction expecting every one of its
/// replies again (the FIFO it left counted them down).
fn resend(mut f: InFlight, asking: bool) -> InFlight {
    f.asking = asking;
    f.expect = if f.purpose == Purpose::Txn {
        txn::replies_of(&f)
    } else {
        1
    };
    f
}

pub enum Timer {
    Tick,
    ConnectTimeout(Key),
    /// A node connection over TLS must have finished its handshake by now
    /// (`tls-handshake-timeout` after its connect started; `tls.rs`).
    TlsHandshake(Key),
    /// A TRYAGAIN wait is over (key into `retrying`).
    Retry(Key),
    /// A CLUSTERDOWN wait of this session's requests on this slot is over
    /// (`downs`).
    Down(Key, u16),
    /// Look for a script running long sooner than the tick would
    /// (`scripts.rs`, armed while script calls are in flight).
    ScriptWatch,
    /// The replies in a batch wait (`Worker::batch_waiting`) leave now,
    /// whatever is still to come.
    BatchWait,
}

pub struct Worker {
    pub id: usize,
    shared: Arc<Shared>,
    rx: FabricReceiver<WorkerMsg>,
    sessions: GenSlab<Session>,
    backends: GenSlab<Backend>,
    /// Which backend serves a unit or a shard, and the connection sets
    /// (`crate::placement`).
    place: Placement,
    limits: Limits,
    query_limit: usize,
    keepalive: Option<Duration>,
    connect_timeout: Duration,
    dirty_sessions: Vec<Key>,
    /// Sessions in a batch wait: their ready replies wait for the rest of
    /// their read (`Session::waits_for_batch`), until `Timer::BatchWait` at
    /// the latest: it is armed when the first enters an empty list and
    /// empties it, so it is armed exactly while the list is not empty.
    /// `batch_wait_us` (`reply-batch-wait-us`) is the longest wait, 0 for
    /// none. A session is listed once per wait, so the list is bounded by
    /// the sessions times the waits one can start in `batch_wait_us`.
    batch_waiting: Vec<Key>,
    batch_wait_us: u64,
    dirty_backends: Vec<Key>,
    /// Sessions whose read in this turn's events was a lone GET, with its
    /// key's hash, dispatched together in the fabric phase
    /// (`run_read_batch`). Emptied every turn; at most one entry per event
    /// of a poll.
    read_batch: Vec<(Key, u64)>,
    /// Sessions and backends whose read budget ran out with data left.
    ready_sessions: Vec<Key>,
    ready_backends: Vec<Key>,
    /// Argument ranges of the request being dispatched (reused).
    args: Vec<Range<usize>>,
    /// (P)(UN)SUBSCRIBEs being dispatched in waves, at most one per
    /// session (pubsub/waves.rs).
    waves: Vec<(Key, pubsub::Wave)>,
    /// Subscribers with a subscription not where the map says (a lost
    /// connection, a refused resubscription): tried again once a second.
    /// At most one entry per session (`Subscriptions::retry_queued`).
    resubscribe: Vec<Key>,
    /// Ticks since the last such try (once a second, not to hammer a
    /// node that is down).
    resubscribe_ticks: u8,
    /// The `Acl::generation` every session was last looked at for
    /// (`revoke.rs`).
    acl_seen: u64,
    /// Idle leased connections by node and protocol.
    idle_leases: HashMap<(SocketAddr, Proto, (usize, u32)), Vec<Key>>,
    /// Requests waiting out a TRYAGAIN, and the node to resend them to.
    retrying: GenSlab<(InFlight, SocketAddr)>,
    /// Requests waiting out a CLUSTERDOWN in order, by session, one wait
    /// per slot (down.rs). Empty but during a cluster's failure.
    downs: HashMap<Key, Vec<down::DownWait>>,
    /// Requests waiting for a failing-over group's new master (park.rs).
    parked: park::ParkLot,
    /// A request unanswered this long fails its connection (None: never).
    backend_timeout: Option<Duration>,
    /// The `Live::limits_gen` this worker's limits were taken at.
    limits_gen: u64,
    /// The map whose servers `preconnect` pools were last connected to
    /// (live.rs).
    preconnected: u64,
    /// Retry waits a CLUSTERDOWN gets (retry.rs, from backend-timeout).
    clusterdown_waits: u8,
    commands: u64,
    /// This worker told the script registry it sees a script call
    /// unanswered for a tick (`scripts.rs`, `scripts_tick`).
    script_stalled: bool,
    /// A `Timer::ScriptWatch` is pending.
    script_watch: bool,
    /// Sweeps in a row that saw no stall while one was reported.
    script_unstall: u8,
    /// Blocking commands held until they may go in arrival order
    /// (`blocking.rs`, `shared::block_order`).
    in_order: blocking::InOrder,
    draining: Option<Instant>,
    stop: bool,
    tick_armed: bool,
    /// The mailbox held messages when `has_pending_work` last looked.
    mail: bool,
    /// Output limits, dispatch windows, the memory budget (overload.rs).
    overload: overload::OverloadState,
    /// observe: statistics, published snapshots, cross-worker questions.
    obs: observe::Observe,
    /// The reply cache and its trackers (cache/).
    cache: cache::CacheState,
    /// backend-sharding: links to other workers' pipes (pipes.rs).
    pipes: pipes::PipeState,
    /// TLS sessions still handshaking, with their deadlines (tls.rs).
    tls_handshakes: Vec<(Key, Instant)>,
    /// MONITOR: this worker's monitors and this turn's lines (monitor.rs).
    monitor: monitor::MonitorState,
    /// SYNC / PSYNC clients and their links to the masters (replfeed.rs).
    replfeed: replfeed::FeedState,
    /// Test hook: every TRYAGAIN / CLUSTERDOWN wait lasts this long.
    #[cfg(debug_assertions)]
    test_retry_wait: Option<Duration>,
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>, rx: FabricReceiver<WorkerMsg>) -> Worker {
        let cfg = &shared.config;
        let limits = Limits {
            max_bulk_len: cfg.proto_max_bulk_len.min(usize::MAX as u64) as usize,
            ..Limits::default()
        };
        let keepalive =
            (cfg.tcp_keepalive_secs > 0).then(|| Duration::from_secs(cfg.tcp_keepalive_secs));
        let place = Placement::new(
            shared.topology.load(),
            shared.pools.iter().map(|p| p.conns).collect(),
            shared.pools.iter().map(|p| p.db).collect(),
            cfg.read_from_replicas,
            0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1),
            id,
        );
        Worker {
            id,
            query_limit: cfg.query_buffer_limit.min(usize::MAX as u64) as usize,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            keepalive,
            limits,
            rx,
            sessions: GenSlab::with_capacity(1024),
            backends: GenSlab::with_capacity(64),
            place,
            dirty_sessions: Vec::with_capacity(1024),
            batch_waiting: Vec::new(),
            batch_wait_us: cfg.reply_batch_wait_us,
            dirty_backends: Vec::with_capacity(64),
            read_batch: Vec::new(),
            ready_sessions: Vec::new(),
            ready_backends: Vec::new(),
            args: Vec::with_capacity(16),
            waves: Vec::new(),
            resubscribe: Vec::new(),
            resubscribe_ticks: 0,
            acl_seen: shared.admin.acl.generation(),
            idle_leases: HashMap::new(),
            retrying: GenSlab::new(),
            downs: HashMap::new(),
            parked: park::ParkLot::default(),
            limits_gen: 0,
            preconnected: u64::MAX,
            backend_timeout: (cfg.backend_timeout_ms > 0)
                .then(|| Duration::from_millis(cfg.backend_timeout_ms)),
            clusterdown_waits: retry::clusterdown_waits(
                (cfg.backend_timeout_ms > 0).then(|| Duration::from_millis(cfg.backend_timeout_ms)),
            ),
            commands: 0,
            script_stalled: false,
            script_watch: false,
            script_unstall: 0,
            in_order: blocking::InOrder::default(),
            draining: None,
            stop: false,
            tick_armed: false,
            mail: false,
            overload: overload::OverloadState::new(cfg),
            obs: observe::Observe::new(&shared),
            pipes: pipes::PipeState::new(&shared),
            monitor: Default::default(),
            tls_handshakes: Vec::new(),
            replfeed: replfeed::FeedState::default(),
            cache: cache::CacheState::new(&shared),
            #[cfg(debug_assertions)]
            test_retry_wait: None,
            shared,
        }
    }

    // ----- sessions -------------------------------------------------------

    /// The pool of session `key` (the first pool when it is gone).
    #[inline]
    pub(super) fn pool_of(&self, key: Key) -> usize {
        self.sessions.get(key).map_or(0, Session::pool)
    }

    /// The pool and database of session `key`: where a connection of its
    /// own (a lease) must point.
    #[inline]
    pub(super) fn where_of(&self, key: Key) -> (usize, u32) {
        self.sessions
            .get(key)
            .map_or((0, 0), |s| (s.pool(), s.db()))
    }

    fn accept(&mut self, cx: &mut Context<'_, Timer>, a: crate::shared::Accepted) {
        if self.draining.is_some() {
            return; // dropping `a` closes the socket and releases the ticket
        }
        if let Err(e) = a.stream.set_nonblocking(true) {
            log::debug!(target: "mithril::worker", "worker {}: accepted socket unusable: {e}", self.id);
            return;
        }
        // A client of the TLS listener: rustls between its socket and its
        // buffers, its handshake bounded in time (tls.rs).
        let tls = if a.tls {
            let Some(c) = self.tls_connection() else {
                return; // dropping `a` closes the socket
            };
            let by_cn = self.shared.config.tls.auth_clients_user;
            Some((c, by_cn.then(|| self.shared.clone())))
        } else {
            None
        };
        let mut stream = mio::net::TcpStream::from_std(a.stream);
        let _ = reactor::net::configure(&stream, self.keepalive);
        // Arrival stamps order blocking commands across workers; without
        // them a read's own time stands in. One worker has nothing to
        // order against, and its reads stay plain read(2) calls.
        let stamped = self.shared.workers.len() > 1
            && reactor::stamp::enable(std::os::fd::AsRawFd::as_raw_fd(&stream)).is_ok();
        let key = self.sessions.vacant_key();
        if let Err(e) = cx.registry.register(
            &mut stream,
            token_for(SESSION, key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warn!(target: "mithril::worker", "worker {}: cannot register a client socket: {e}", self.id);
            return;
        }
        let id = self.shared.new_client_id();
        let start = self.shared.session_start(a.pool);
        let now = cx.now;
        let db = self.shared.pools.get(a.pool).map_or(0, |p| p.db);
        if a.pool >= self.place.map().pools.len() {
            // A pool a reload added, whose map this worker has not taken
            // yet (it was published before the listener opened).
            self.check_topology(cx);
        }
        self.sessions.insert_with(|k| {
            let mut s = Session::new(k, id, stream, a.peer, a.pool, a.ticket, start, now);
            s.set_home_db(db);
            s.set_stamped(stamped);
            if let Some((c, by_cn)) = tls {
                s.set_tls(c, by_cn);
            }
            s
        });
        if a.tls {
            self.tls_started(key, now);
        }
        self.shared.workers[self.id]
            .sessions
            .fetch_add(1, Ordering::Relaxed);
        self.publish_sessions();
        log::debug!(target: "mithril::worker", "worker {}: client {id} connected from {}", self.id, a.peer);
    }

    /// Close session `key`: unregister it, take it out of the accounts,
    /// then let every component that keeps state for a session forget
    /// it, each through its own `session_closed` hook.
    fn close_session(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(mut s) = self.sessions.remove(key) else {
            return;
        };
        // Unregistered, then taken out of the worker's accounts.
        if s.tls().is_some_and(|t| !t.is_handshaking()) {
            s.tls_close_notify();
        }
        let _ = s.deregister(cx.registry);
        self.unaccount(s.pressure.accounted);
        self.overload.held = self.overload.held.saturating_sub(s.pressure.held);
        self.obs.session_closed(&s); // observe
        self.shared.workers[self.id]
            .sessions
            .fetch_sub(1, Ordering::Relaxed);
        self.publish_sessions();
        // Each component forgets what it kept for the session, through
        // its own hook (in its file; a cheap test when the session never
        // used it).
        blocking::session_closed(self, cx, &mut s);
        admin::session_closed(self, cx, &mut s);
        pubsub::session_closed(self, cx, &mut s);
        down::session_closed(self, cx, &mut s);
        watch::session_closed(self, cx, &mut s);
        cache::session_closed(self, cx, &mut s);
        tracking::session_closed(self, cx, &mut s);
        replfeed::session_closed(self, cx, &mut s);
        pipes::session_closed(self, cx, &mut s);
        monitor::session_closed(self, cx, &mut s);
        log::debug!(target: "mithril::worker", "worker {}: client {} closed", self.id, s.id);
    }

    // ----- housekeeping ---------------------------------------------------

    /// A new map (one atomic load when there is none): installed before
    /// the requests that come after it are placed.
    #[inline]
    fn check_topology(&mut self, cx: &mut Context<'_, Timer>) {
        if self.shared.topology.epoch() != self.place.epoch() {
            self.install_topology(cx);
        }
    }

    #[cold]
    #[inline(never)]
    fn install_topology(&mut self, cx: &mut Context<'_, Timer>) {
        // A pool a reload added is in the table before its map is
        // published: its tables are there before anything is placed by it.
        if self.shared.pools.len() != self.place.pools_known() {
            self.pools_added();
        }
        let old = self.place.map().clone();
        let retired = self.place.install(self.shared.topology.load());
        self.retire_connections(cx, retired);
        self.close_retired_pools(cx, &old);
        self.ring_servers_follow();
        if self.cache.on {
            self.cache_map_changed(&old);
            self.cache_masters(cx);
        }
        self.subscribers_follow_topology(cx);
        if !self.parked.is_empty() {
            self.unpark(cx);
        }
    }

    /// Connections of pools the new map no longer names, and idle leases
    /// to nodes it no longer has: closed now when nothing is in flight on
    /// them, else once the last reply is in (`backend_read`).
    pub(super) fn retire_connections(&mut self, cx: &mut Context<'_, Timer>, conns: Vec<Key>) {
        for k in conns {
            let Some(b) = self.backends.get_mut(k) else {
                continue;
            };
            // Detached: its pool's slot may be reused for another node.
            b.role = Role::Retired;
            if b.in_flight() == 0 {
                self.drop_backend(cx, k);
            }
        }
        let topo = self.place.map();
        let gone: Vec<(SocketAddr, Proto, (usize, u32))> = self
            .idle_leases
            .keys()
            .filter(|(addr, _, _)| !topo.nodes.iter().any(|n| n.addr == *addr))
            .copied()
            .collect();
        for slot in gone {
            for k in self.idle_leases.remove(&slot).unwrap_or_default() {
                self.drop_backend(cx, k);
            }
        }
    }

    fn begin_drain(&mut self, cx: &mut Context<'_, Timer>) {
        if self.draining.is_some() {
            return;
        }
        // Requests that reached the socket before the signal are answered:
        // read and dispatch what the kernel holds, one last time.
        for key in self.sessions.keys() {
            // A paused session left its input in the kernel (overload.rs).
            self.drain_take_input(cx, key);
            self.session_input(cx, key);
        }
        self.draining =
            Some(cx.now + Duration::from_secs(self.shared.config.shutdown_timeout_secs));
        // Replication feeds wait for no reply: they close now.
        self.feeds_close_all(cx);
        for key in self.sessions.keys() {
            if self
                .sessions
                .get(key)
                .is_some_and(|s| s.idle() && !s.input().has_backlog())
            {
                self.close_session(cx, key);
            }
        }
    }

    /// Drop connections whose oldest unanswered request passed their
    /// pool's `timeout` (or `backend-timeout`; blocking leases and
    /// subscribers are exempt).
    fn check_timeouts(&mut self, cx: &mut Context<'_, Timer>) {
        if self.backend_timeout.is_none() && self.shared.pools.iter().all(|p| p.timeout.is_none()) {
            return;
        }
        // Measured from the first sweep that saw the connection waiting
        // without progress: a stall is noticed within one TICK of `limit`.
        let now = cx.now;
        let pools = &self.shared.pools;
        let default = self.backend_timeout;
        let late: Vec<Key> = self
            .backends
            .iter_mut()
            .filter(|(_, b)| {
                // A link's requests are timed on the owner's pipe.
                matches!(b.role, Role::Shared(_)) && b.state == State::Connected && b.link.is_none()
            })
            .filter_map(|(k, b)| {
                let limit = pools.get(b.server_pool).map_or(default, |p| p.timeout)?;
                (b.stalled_for(now) > limit).then_some(k)
            })
            .collect();
        for k in late {
            self.backend_failed(cx, k, "backend-timeout: no reply in time");
        }
    }

    /// Leave the loop after this turn.
    fn stop(&mut self) {
        if !self.stop {
            self.stop = true;
            self.pipes_close();
        }
    }

    fn tick(&mut self, cx: &mut Context<'_, Timer>) {
        self.check_timeouts(cx);
        self.scripts_tick(cx.now);
        self.overload_tick(cx);
        self.cache_tick(cx);
        self.pipes_tick(cx);
        self.observe_tick(cx); // observe: publish the statistics
        self.revoke_tick(cx);
        let gen = self.shared.live.limits_gen.load(Ordering::Relaxed);
        if gen != self.limits_gen {
            self.take_limits(cx, gen);
        }
        if self.preconnected != self.place.epoch() {
            self.preconnect(cx);
        }
        if !self.parked.is_empty() {
            self.unpark(cx);
        }
        self.tls_tick(cx);
        if !self.replfeed.is_empty() {
            self.feeds_tick(cx);
        }
        if !self.resubscribe.is_empty() {
            self.resubscribe_ticks += 1;
            if self.resubscribe_ticks >= 10 {
                self.resubscribe_ticks = 0;
                self.subscribers_retry(cx);
            }
        }
        if let Some(deadline) = self.draining {
            if (self.sessions.is_empty() && self.pipes_idle()) || cx.now >= deadline {
                self.stop();
            }
        }
    }
}

impl Handler for Worker {
    type Timer = Timer;

    fn on_event(&mut self, cx: &mut Context<'_, Timer>, kind: Kind, key: Key, event: &Event) {
        self.obs.stats.set_now(cx.now, cx.now_us); // observe: the turn's clock
        self.in_order.events += 1;
        match kind {
            SESSION => {
                if event.is_writable() {
                    self.mark_session_dirty(key);
                }
                if event.is_read_closed() || event.is_error() {
                    if let Some(s) = self.sessions.get_mut(key) {
                        s.hung_up();
                    }
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    // A worker woken by a client's request places it by
                    // the newest map, not the one of its last turn (a ring
                    // that ejected a server while the worker slept).
                    self.check_topology(cx);
                    self.session_input_batched(cx, key);
                }
            }
            BACKEND => self.backend_event(cx, key, event),
            replfeed::FEED => self.feed_event(cx, key, event),
            _ => {}
        }
    }

    fn on_fabric(&mut self, cx: &mut Context<'_, Timer>) {
        self.obs.stats.set_now(cx.now, cx.now_us); // observe: the turn's clock

        // The lone GETs this turn's events read, first: before anything
        // else may read those sessions again (the ready list below).
        self.run_read_batch(cx);
        if !self.tick_armed {
            self.tick_armed = true;
            cx.schedule_in(TICK, Timer::Tick);
        }
        self.check_topology(cx);
        // observe: CONFIG SET of the slow log holds from the next turn on.
        self.obs.stats.sync_slow_settings(&self.shared.stats);
        // The mailbox is looked at again only when has_pending_work saw
        // messages or a sender woke the poll since (reactor::fabric): on
        // most turns it was looked at once, before the poll. is_empty is
        // two loads; try_recv on an empty channel costs more.
        // One worker has no arrival order to keep (`blocking.rs`).
        let ordered = self.shared.workers.len() > 1;
        let handed = if ordered {
            self.shared.block_order.accepted()
        } else {
            0
        };
        while (self.mail || cx.woken) && !self.rx.is_empty() {
            let Some(msg) = self.rx.try_recv() else { break };
            match msg {
                WorkerMsg::Accept(a) => self.accept(cx, a),
                WorkerMsg::Shutdown => self.begin_drain(cx),
                WorkerMsg::ListenerGone(addr) => self.listener_gone(cx, addr),
                WorkerMsg::Invalidate(m) => self.tracking_remote(*m),
                WorkerMsg::OutputBudget => self.overload.budget_due = true,
                other => self.observe_msg(cx, other), // observe
            }
        }
        if ordered && self.rx.is_empty() {
            // Every connection handed over before `handed` is registered.
            self.in_order.handed = self.in_order.handed.max(handed);
        }
        // Every turn: MONITOR lines use the inbox whatever
        // backend-sharding says (one load when it is empty).
        self.pipe_receive(cx);
        // Each is served once per turn, though its event's read and the
        // ready list's may both have put it there: copies would otherwise
        // multiply turn after turn, and with them what one client or node
        // may have read per turn.
        if !self.ready_backends.is_empty() {
            let mut list = std::mem::take(&mut self.ready_backends);
            list.sort_unstable();
            list.dedup();
            for key in list {
                self.backend_read(cx, key);
            }
        }
        if self.replfeed.has_ready() {
            self.feed_ready(cx);
        }
        if !self.ready_sessions.is_empty() {
            let mut list = std::mem::take(&mut self.ready_sessions);
            list.sort_unstable();
            list.dedup();
            for key in list {
                self.session_input(cx, key);
            }
        }
    }

    fn on_timer(&mut self, cx: &mut Context<'_, Timer>, id: TimerId, data: Timer) {
        match data {
            Timer::Tick => {
                cx.schedule_in(TICK, Timer::Tick);
                self.tick(cx);
            }
            Timer::ScriptWatch => self.script_watch(cx),
            Timer::BatchWait => self.end_batch_waits(),
            Timer::Retry(key) => self.retry_now(cx, key),
            Timer::Down(session, slot) => self.down_timer(cx, id, session, slot),
            Timer::ConnectTimeout(key) => {
                if self
                    .backends
                    .get(key)
                    .is_some_and(|b| b.state == State::Connecting)
                {
                    self.backend_failed(cx, key, "connect timeout");
                }
            }
            Timer::TlsHandshake(key) => self.backend_tls_due(cx, key),
        }
    }

    fn before_sleep(&mut self, cx: &mut Context<'_, Timer>) {
        self.monitor_flush(cx);
        if !self.in_order.waiting.is_empty() {
            self.blocking_in_order(cx);
        }
        self.flush_backends(cx);
        self.flush_sessions(cx);
        if self.shared.workers.len() > 1 {
            let wake = self.blocking_read_checks(cx);
            self.blocking_turn_done(cx.woken, wake);
        }
        self.shared.workers[self.id]
            .commands
            .store(self.commands, Ordering::Relaxed);
        if self.draining.is_some() && self.sessions.is_empty() && self.pipes_idle() {
            self.stop();
        }
    }

    #[inline]
    fn has_pending_work(&mut self) -> bool {
        self.mail = !self.rx.is_empty();
        if self.shared.workers.len() > 1 {
            // Whatever arrived before this poll starts is read by the end
            // of its turn (`blocking_turn_done` publishes it).
            self.in_order.poll_ns = reactor::stamp::now_ns();
        }
        self.mail
            || std::mem::take(&mut self.in_order.again)
            || !self.ready_sessions.is_empty()
            || !self.ready_backends.is_empty()
            || self.replfeed.has_ready()
            || self.pipe_pending()
    }

    fn keep_running(&self) -> bool {
        !self.stop
    }
}
