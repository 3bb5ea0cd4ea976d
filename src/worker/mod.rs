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
//! The routing kinds live in submodules: `dispatch` (what a request
//! means), `fanout` (per-slot split and merge, cluster-wide commands),
//! `txn` (MULTI/EXEC), `blocking` (leases), `pubsub` (subscriber
//! connections).
//!
//! A panic while handling one session's input is caught here, closes that
//! session only (its admission ticket is released by its drop), is logged,
//! and the worker goes on serving everyone else.

mod blocking;
mod dispatch;
mod fanout;
mod observe;
mod overload;
mod pubsub;
mod retry;
mod scripts;
#[cfg(debug_assertions)]
mod testhook;
mod txn;

use crate::backend::pool::{PoolKey, Pools};
use crate::backend::{Backend, InFlight, Io, Purpose, Read, Role, State};
use crate::config::ReadFrom;
use crate::resp::limits::Limits;
use crate::resp::Proto;
use crate::router::{self, Redirect};
use crate::session::{FlushOutcome, Input, ReadOutcome, Session};
use crate::shared::{Shared, WorkerMsg};
use crate::topology::Topology;
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

/// A request on its way to a backend.
pub struct Outgoing {
    pub session: Key,
    /// The ring slot, when the request already has one (a redirect, a
    /// fan-out part); otherwise one is reserved when it is queued.
    pub seq: Option<u64>,
    pub req: Bytes,
    pub purpose: Purpose,
    /// Redirects followed so far.
    pub hops: u8,
    /// TRYAGAIN waits spent so far.
    pub retries: u8,
    /// Precede it with ASKING on the same connection.
    pub asking: bool,
    /// Replies the request produces (transactions: one per command).
    pub expect: u32,
}

impl Outgoing {
    /// A new request from `session`, answered by one reply.
    pub fn new(session: Key, req: Bytes) -> Outgoing {
        Outgoing {
            session,
            seq: None,
            req,
            purpose: Purpose::Client,
            hops: 0,
            retries: 0,
            asking: false,
            expect: 1,
        }
    }

    fn retry(f: InFlight, asking: bool) -> Outgoing {
        let expect = if f.purpose == Purpose::Txn {
            txn::replies_of(&f)
        } else {
            1
        };
        Outgoing {
            session: f.session,
            seq: Some(f.seq),
            req: f.req,
            purpose: f.purpose,
            hops: f.hops.saturating_add(1),
            retries: f.retries,
            asking,
            expect,
        }
    }
}

pub enum Timer {
    Tick,
    ConnectTimeout(Key),
    /// A TRYAGAIN wait is over (key into `retrying`).
    Retry(Key),
}

pub struct Worker {
    pub id: usize,
    shared: Arc<Shared>,
    rx: FabricReceiver<WorkerMsg>,
    sessions: GenSlab<Session>,
    backends: GenSlab<Backend>,
    pools: Pools,
    topo: Arc<Topology>,
    limits: Limits,
    query_limit: usize,
    keepalive: Option<Duration>,
    connect_timeout: Duration,
    read_from: ReadFrom,
    dirty_sessions: Vec<Key>,
    dirty_backends: Vec<Key>,
    /// Sessions and backends whose read budget ran out with data left.
    ready_sessions: Vec<Key>,
    ready_backends: Vec<Key>,
    /// Argument ranges of the request being dispatched (reused).
    args: Vec<Range<usize>>,
    /// (P)(UN)SUBSCRIBEs being dispatched in waves, at most one per
    /// session (pubsub.rs).
    waves: Vec<(Key, pubsub::Wave)>,
    /// Idle leased connections by node and protocol.
    idle_leases: HashMap<(SocketAddr, Proto), Vec<Key>>,
    /// Requests waiting out a TRYAGAIN, and the node to resend them to.
    retrying: GenSlab<(InFlight, SocketAddr)>,
    /// A request unanswered this long fails its connection (None: never).
    backend_timeout: Option<Duration>,
    /// Retry waits a CLUSTERDOWN gets (retry.rs, from backend-timeout).
    clusterdown_waits: u8,
    commands: u64,
    any_master: usize,
    draining: Option<Instant>,
    stop: bool,
    tick_armed: bool,
    /// Output limits, dispatch windows, the memory budget (overload.rs).
    overload: overload::OverloadState,
    /// observe: statistics, published snapshots, cross-worker questions.
    obs: observe::Observe,
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
        let topo = shared.topology.load();
        let read_from = cfg.read_from_replicas;
        let mut pools = Pools::new(
            cfg.backend_conns,
            read_from != ReadFrom::No,
            0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1),
        );
        // Nothing is connected yet: nothing to retire.
        let _ = pools.remap(&topo);
        Worker {
            id,
            query_limit: cfg.query_buffer_limit.min(usize::MAX as u64) as usize,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            keepalive,
            limits,
            read_from,
            rx,
            sessions: GenSlab::with_capacity(1024),
            backends: GenSlab::with_capacity(64),
            pools,
            topo,
            dirty_sessions: Vec::with_capacity(1024),
            dirty_backends: Vec::with_capacity(64),
            ready_sessions: Vec::new(),
            ready_backends: Vec::new(),
            args: Vec::with_capacity(16),
            waves: Vec::new(),
            idle_leases: HashMap::new(),
            retrying: GenSlab::new(),
            backend_timeout: (cfg.backend_timeout_ms > 0)
                .then(|| Duration::from_millis(cfg.backend_timeout_ms)),
            clusterdown_waits: retry::clusterdown_waits(
                (cfg.backend_timeout_ms > 0).then(|| Duration::from_millis(cfg.backend_timeout_ms)),
            ),
            commands: 0,
            any_master: id,
            draining: None,
            stop: false,
            tick_armed: false,
            overload: overload::OverloadState::new(cfg),
            obs: observe::Observe::new(&shared),
            #[cfg(debug_assertions)]
            test_retry_wait: None,
            shared,
        }
    }

    // ----- sessions -------------------------------------------------------

    fn accept(&mut self, cx: &mut Context<'_, Timer>, a: crate::shared::Accepted) {
        if self.draining.is_some() {
            return; // dropping `a` closes the socket and releases the ticket
        }
        if let Err(e) = a.stream.set_nonblocking(true) {
            log::debug!(target: "mithril::worker", "worker {}: accepted socket unusable: {e}", self.id);
            return;
        }
        let mut stream = mio::net::TcpStream::from_std(a.stream);
        let _ = reactor::net::configure(&stream, self.keepalive);
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
        let start = self.shared.admin.acl.session_start();
        let now = cx.now;
        self.sessions
            .insert_with(|k| Session::new(k, id, stream, a.peer, a.ticket, start, now));
        self.shared.workers[self.id]
            .sessions
            .fetch_add(1, Ordering::Relaxed);
        log::debug!(target: "mithril::worker", "worker {}: client {id} connected from {}", self.id, a.peer);
    }

    fn close_session(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(mut s) = self.sessions.remove(key) else {
            return;
        };
        let _ = cx.registry.deregister(&mut s.stream);
        self.unaccount(s.pressure.accounted);
        self.obs.session_closed(&s); // observe
        self.shared.workers[self.id]
            .sessions
            .fetch_sub(1, Ordering::Relaxed);
        // A client that leaves mid-block: close its lease so the node
        // cancels the block. Its subscriber connection goes too.
        if let Some(lease) = s.input().lease() {
            self.close_lease_of(cx, key, lease);
        }
        if !self.waves.is_empty() {
            self.waves.retain(|w| w.0 != key);
        }
        if let Some(sub) = s.sub.take() {
            self.drop_backend(cx, sub.conn);
        }
        log::debug!(target: "mithril::worker", "worker {}: client {} closed", self.id, s.id);
    }

    #[inline]
    fn mark_session_dirty(&mut self, key: Key) {
        if let Some(s) = self.sessions.get_mut(key) {
            if !s.dirty {
                s.dirty = true;
                self.dirty_sessions.push(key);
            }
        }
    }

    /// Queue a reply for `session` at `seq` (dropped if the session is
    /// gone or the slot was already answered). `req` is the request, for
    /// the slow log (empty: not logged).
    #[inline]
    fn deliver(&mut self, session: Key, seq: u64, frame: Bytes, req: &[u8]) {
        if let Some(s) = self.sessions.get_mut(session) {
            // observe: a request that took long enough enters the slow log.
            let (front, stamp) = s.ring.fill_stamped(seq, frame);
            if !req.is_empty() && self.obs.stats.is_slow(stamp) {
                observe::log_slow(&self.shared, self.id, &mut self.obs.stats, s, stamp, req);
            }
            let cut = overload::mark_over_hard(&self.overload, s);
            if (front || cut) && !s.dirty {
                s.dirty = true;
                self.dirty_sessions.push(session);
            }
            if let Some(slot) = s.gates.take_retry(seq) {
                self.release_gates(session, &[slot]);
            }
        }
    }

    /// Append an immediate reply for the request being dispatched.
    #[inline]
    fn reply(&mut self, key: Key, frame: Bytes) {
        if let Some(s) = self.sessions.get_mut(key) {
            s.ring.push_ready(frame);
            let cut = overload::mark_over_hard(&self.overload, s);
            if (s.ring.front_ready() || cut) && !s.dirty {
                s.dirty = true;
                self.dirty_sessions.push(key);
            }
        }
    }

    fn reply_static(&mut self, key: Key, frame: &'static [u8]) {
        self.reply(key, Bytes::from_static(frame));
    }

    /// Read and dispatch, with a panic fence around this one session.
    fn session_input(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let r = catch_unwind(AssertUnwindSafe(|| self.session_read(cx, key)));
        if r.is_err() {
            let id = self.sessions.get(key).map(|s| s.id).unwrap_or(0);
            log::error!(
                target: "mithril::worker",
                "worker {}: panic while serving client {id}; closing that client (this is a bug)",
                self.id
            );
            self.close_session(cx, key);
        }
    }

    fn session_read(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let draining = self.draining.is_some();
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let s = match s.input() {
            // It reads and dispatches nothing more: closed once written.
            Input::Closing => return,
            // Requests held back by a pause go before any new input, so a
            // session that keeps pausing holds one read's worth at most.
            // Draining (SIGTERM), they are still dispatched, though nothing
            // more is read.
            Input::Backlog => {
                s.take_backlog();
                self.process_input(cx, key);
                match self.sessions.get_mut(key) {
                    // Still a backlog: a command going in waves took its
                    // turn, and nothing more is read until it is done.
                    Some(s) if !draining && !s.input().has_backlog() && !s.input().is_paused() => s,
                    _ => return,
                }
            }
            _ if draining => return,
            _ => s,
        };
        // A paused session reads nothing until it resumes. A blocked one
        // still reads (a client that leaves mid-block must be noticed); it
        // only stops dispatching, as one at a gate does.
        let reads = match s.input() {
            Input::Open | Input::Backlog | Input::AtGate | Input::Blocked { .. } => !s.eof,
            Input::Paused { .. } | Input::Closing => false,
        };
        if reads {
            match s.read(SESSION_READ_BUDGET, self.query_limit, s.hup) {
                ReadOutcome::Drained => {}
                ReadOutcome::Eof => {}
                ReadOutcome::Budget => self.ready_sessions.push(key),
                ReadOutcome::Overflow => {
                    self.obs.stats.counters.evicted_qbuf += 1; // observe
                    self.query_limit_close(cx, key);
                    return;
                }
                ReadOutcome::Error(e) => {
                    self.obs.stats.counters.client_err += 1; // observe
                    log::debug!(target: "mithril::worker", "client {} read error: {e}", s.id);
                    self.close_session(cx, key);
                    return;
                }
            }
            s.last_active = cx.now;
        }
        self.process_input(cx, key);
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let s = if s.eof && s.input().is_blocked() {
            // Gone mid-block (now, or its EOF came with the requests).
            self.abandon_block(cx, key);
            let Some(s) = self.sessions.get_mut(key) else {
                return;
            };
            s
        } else {
            s
        };
        if s.finished() {
            self.close_session(cx, key);
        } else {
            // Input read and dispatched: a coarse accounting point
            // (overload.rs).
            self.overload.account(s);
        }
        // Inside the panic fence (session_input): a violation closes it.
        #[cfg(debug_assertions)]
        self.check_session(key);
    }

    /// Debug builds: what must hold of session `key` (see
    /// `Session::check_invariants`), and what only the worker can see: the
    /// lease of a blocked session carries its command, its subscriber
    /// connection exists.
    #[cfg(debug_assertions)]
    fn check_session(&self, key: Key) {
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        s.check_invariants();
        if let Some(lease) = s.input().lease() {
            assert!(
                self.backends
                    .get(lease)
                    .is_some_and(|b| b.role == Role::Lease && b.carries(key)),
                "client {}: blocked on lease {lease:?}, which does not carry its command",
                s.id
            );
        }
        if let Some(sub) = &s.sub {
            assert!(
                self.backends
                    .get(sub.conn)
                    .is_some_and(|b| b.role == Role::Pubsub(key)),
                "client {}: its subscriber connection is gone",
                s.id
            );
        }
    }

    /// Debug builds: what must hold of backend `key` (see
    /// `Backend::check_invariants`), and that a pooled one is its pool's.
    #[cfg(debug_assertions)]
    fn check_backend(&self, key: Key) {
        let Some(b) = self.backends.get(key) else {
            return;
        };
        b.check_invariants();
        if let Some(pool) = b.pool() {
            assert!(
                self.pools.pools[pool].conns.contains(&key),
                "{}: a pooled connection its pool does not list",
                b.addr
            );
        }
    }

    /// Debug builds, after a flush: the checks above, fenced like a
    /// session's input. A violation is a bug: logged, and what broke it
    /// is closed (a session; a backend, answering what it carries).
    #[cfg(debug_assertions)]
    fn check_fenced(&mut self, cx: &mut Context<'_, Timer>, kind: Kind, key: Key) {
        let checked = catch_unwind(AssertUnwindSafe(|| match kind {
            SESSION => self.check_session(key),
            _ => self.check_backend(key),
        }));
        if checked.is_ok() {
            return;
        }
        log::error!(
            target: "mithril::worker",
            "worker {}: invariant violated after a flush; closing that connection (this is a bug)",
            self.id
        );
        match kind {
            SESSION => self.close_session(cx, key),
            _ => self.backend_failed(cx, key, "invariant violated"),
        }
    }

    /// Scan and dispatch every complete request in the read buffer, until
    /// the session must wait: its input mode says so (closing, blocked),
    /// its dispatch window is full, or its next request is gated.
    fn process_input(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        use crate::resp::request::Scan;
        loop {
            let Some(s) = self.sessions.get_mut(key) else {
                return;
            };
            if s.pressure.over_hard {
                // Cut off by its output limit, whatever its mode: closed at
                // this turn's flush; its input is dropped meanwhile.
                s.rbuf.clear();
                return;
            }
            // The rest of a (P)(UN)SUBSCRIBE dispatched in waves goes
            // before anything the client sent after it.
            let waving = !self.waves.is_empty() && self.waves.iter().any(|w| w.0 == key);
            match s.input() {
                Input::Closing => {
                    s.rbuf.clear();
                    return;
                }
                Input::Blocked { .. } => return,
                // A paused session may dispatch when its window has room
                // again; it stays paused (not reading) until it resumes.
                Input::Open | Input::Backlog | Input::AtGate | Input::Paused { .. } => {
                    if s.at_limit() {
                        // The dispatch window is full (see
                        // session::pressure): wait for replies to drain;
                        // what is buffered (or still to go in waves) goes
                        // first then.
                        s.pause_holding(waving);
                        return;
                    }
                }
            }
            if waving {
                if self.next_wave(key) {
                    // It took its most for this turn: the rest goes on in
                    // the next one (the ready list), and nothing more is
                    // read meanwhile.
                    if let Some(s) = self.sessions.get_mut(key) {
                        s.hold_backlog();
                    }
                    self.ready_sessions.push(key);
                    return;
                }
                continue;
            }
            // Before AUTH, only small requests (10 arguments, 16 KiB bulks).
            let (len, inline) = match s.scanner.scan(&s.rbuf, &self.limits, s.authenticated) {
                Scan::Incomplete => {
                    if let Some(need) = s.scanner.pending_hint() {
                        if need > self.query_limit {
                            // The request cannot fit: refused now, before
                            // the rest of it is read.
                            self.obs.stats.counters.evicted_qbuf += 1; // observe
                            self.request_too_large(cx, key, need);
                            return;
                        }
                        // A large argument is on its way: make room in
                        // big steps instead of small ones, but never more
                        // than the bytes already here again (at least
                        // 64 KiB): a header's claim alone reserves nothing,
                        // and growth stays a doubling (linear copying).
                        if need > s.rbuf.capacity() && need <= self.query_limit {
                            let more = (need - s.rbuf.len()).min(s.rbuf.len().max(64 * 1024));
                            s.rbuf.reserve(more);
                        }
                    }
                    return;
                }
                Scan::Skip { len } => {
                    let _ = s.rbuf.split_to(len);
                    continue;
                }
                Scan::Request { len } => (len, false),
                Scan::Inline { len } => (len, true),
                Scan::Error(e) => {
                    log::debug!(target: "mithril::worker", "client {} ({}): {e}", s.id, s.peer);
                    s.rbuf.clear();
                    s.close_after_flush();
                    let reply = e.reply();
                    self.reply(key, reply);
                    return;
                }
            };
            if !s.gates.is_empty() {
                // An inline command is looked at in its multibulk rewrite.
                let args = crate::command::Args {
                    buf: if inline {
                        s.scanner.inline_frame()
                    } else {
                        &s.rbuf[..len]
                    },
                    ranges: s.scanner.args(),
                };
                if s.gates.gated_for(&args) {
                    // Wait for the gate; the request stays in the buffer
                    // and is scanned again then.
                    s.wait_gate();
                    return;
                }
            }
            let frame = if inline {
                let _ = s.rbuf.split_to(len);
                let frame = Bytes::from(s.scanner.take_inline_frame());
                self.args.clear();
                self.args.extend_from_slice(s.scanner.args());
                frame
            } else {
                let frame = s.rbuf.split_to(len).freeze();
                if len >= LARGE_REQUEST && s.rbuf.len() <= len / 2 {
                    // The large allocation goes with the frame (freed once
                    // it is answered), not on as the read buffer of a
                    // client that stays busy: what follows is moved to a
                    // buffer of its own.
                    s.rbuf = bytes::BytesMut::from(&s.rbuf[..]);
                }
                // Exchanged, not copied: a million ranges are 16 MB.
                s.scanner.swap_args(&mut self.args);
                frame
            };
            self.commands += 1;
            self.dispatch(cx, key, frame);
            if self.args.len() > MANY_ARGS {
                // A request of many arguments (a huge MSET, a (P)(UN)SUBSCRIBE
                // of a million channels) left its argument vector large:
                // give it back now, not when the session goes idle.
                self.args = Vec::with_capacity(16);
            }
        }
    }

    fn flush_sessions(&mut self, cx: &mut Context<'_, Timer>) {
        let mut list = std::mem::take(&mut self.dirty_sessions);
        for key in list.drain(..) {
            let Some(s) = self.sessions.get_mut(key) else {
                continue;
            };
            s.dirty = false;
            if s.pressure.over_hard {
                // Its output passed the hard limit as it was appended.
                self.output_limit_close(cx, key, overload::Cut::Hard);
                continue;
            }
            match s.flush(&mut self.obs.stats) {
                FlushOutcome::Done | FlushOutcome::Blocked => {}
                FlushOutcome::Error(e) => {
                    self.obs.stats.counters.client_err += 1; // observe
                    log::debug!(target: "mithril::worker", "client {} write error: {e}", s.id);
                    self.close_session(cx, key);
                    continue;
                }
            }
            if s.finished() || (self.draining.is_some() && s.idle() && !s.input().has_backlog()) {
                self.close_session(cx, key);
                continue;
            }
            // Output limits, the dispatch window, resuming a paused session
            // (overload.rs).
            match overload::after_flush(&mut self.overload, s, cx.now) {
                overload::AfterFlush::Go => {}
                overload::AfterFlush::Resume => self.ready_sessions.push(key),
                overload::AfterFlush::Close(cut) => {
                    self.output_limit_close(cx, key, cut);
                    continue;
                }
            }
            // A throttled subscriber whose pushes drained: read its
            // connection again.
            let waiting = s.push_backlog();
            if let Some(sub) = s.sub.as_mut() {
                if sub.throttled && waiting < crate::session::PUSH_WINDOW / 2 {
                    sub.throttled = false;
                    self.ready_backends.push(sub.conn);
                }
            }
            #[cfg(debug_assertions)]
            self.check_fenced(cx, SESSION, key);
        }
        if self.dirty_sessions.is_empty() {
            self.dirty_sessions = list;
        }
    }

    // ----- backends -------------------------------------------------------

    #[inline]
    fn mark_backend_dirty(&mut self, key: Key) {
        if let Some(b) = self.backends.get_mut(key) {
            if !b.dirty {
                b.dirty = true;
                self.dirty_backends.push(key);
            }
        }
    }

    /// Open a connection to `addr`, queueing `init` frames (HELLO 3,
    /// READONLY) ahead of any request. An error is the reply to give.
    fn open_backend(
        &mut self,
        cx: &mut Context<'_, Timer>,
        addr: SocketAddr,
        role: Role,
        proto: Proto,
        readonly: bool,
    ) -> Result<Key, Bytes> {
        let mut stream = match reactor::net::connect(addr) {
            Ok(s) => s,
            Err(e) => {
                return Err(Bytes::from(format!(
                    "-CLUSTERDOWN mithril: cannot connect to {addr} ({e})\r\n"
                )))
            }
        };
        let _ = reactor::net::configure(&stream, self.keepalive);
        let key = self.backends.vacant_key();
        if let Err(e) = cx.registry.register(
            &mut stream,
            token_for(BACKEND, key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            return Err(Bytes::from(format!(
                "-ERR mithril: cannot register a connection to {addr} ({e})\r\n"
            )));
        }
        let now = cx.now;
        self.backends
            .insert_with(|k| Backend::new(k, addr, role, proto, stream, now));
        if let Some(b) = self.backends.get_mut(key) {
            // backend-password: authenticate before anything else.
            if let Some(auth) = crate::backend::auth::frame(&self.shared.config) {
                b.enqueue(InFlight::new(Key::NONE, 0, auth, Purpose::Init));
            }
            if proto == Proto::Resp3 {
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    Bytes::from_static(HELLO3),
                    Purpose::Init,
                ));
            }
            if readonly {
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    Bytes::from_static(READONLY),
                    Purpose::Init,
                ));
            }
        }
        cx.schedule_in(self.connect_timeout, Timer::ConnectTimeout(key));
        log::debug!(target: "mithril::worker", "worker {}: connecting to {addr} ({role:?}, {proto:?})", self.id);
        Ok(key)
    }

    /// The live connection of `pool` for this session, connecting if
    /// needed. An error is the reply to give the client.
    fn backend_for(
        &mut self,
        cx: &mut Context<'_, Timer>,
        pool: usize,
        sticky: usize,
    ) -> Result<Key, Bytes> {
        let k = self.pools.slot_key(pool, sticky);
        if self.backends.contains(k) {
            return Ok(k);
        }
        let PoolKey {
            addr,
            proto,
            readonly,
        } = self.pools.pools[pool].key;
        if self.pools.is_down(pool, cx.now) {
            // Keep asking for the map while a node is down: a failover is
            // noticed as soon as the cluster has one.
            self.shared.topology.request_refresh();
            let last = &self.pools.pools[pool].last_error;
            return Err(Bytes::from(format!(
                "-CLUSTERDOWN mithril: node {addr} is unreachable ({last})\r\n"
            )));
        }
        match self.open_backend(cx, addr, Role::Shared(pool), proto, readonly) {
            Ok(key) => {
                self.pools.set_conn(pool, sticky, key);
                Ok(key)
            }
            Err(e) => {
                self.pools.mark_failed(
                    pool,
                    cx.now,
                    String::from_utf8_lossy(&e).trim_end().to_string(),
                );
                Err(e)
            }
        }
    }

    /// Answer an outgoing request that could not be sent.
    fn fail_outgoing(&mut self, cx: &mut Context<'_, Timer>, out: Outgoing, err: Bytes) {
        self.obs.stats.counters.forward_errors += 1; // observe
        match out.seq {
            Some(seq) => {
                let f = InFlight {
                    session: out.session,
                    seq,
                    req: out.req,
                    purpose: out.purpose,
                    hops: out.hops,
                    retries: out.retries,
                    expect: 1,
                };
                self.complete(cx, f, err);
            }
            None => self.reply(out.session, err),
        }
    }

    /// Queue a request on `pool` (a ring slot is reserved unless it has one).
    fn send_to_pool(&mut self, cx: &mut Context<'_, Timer>, pool: usize, out: Outgoing) {
        let Some(s) = self.sessions.get(out.session) else {
            return;
        };
        let sticky = s.sticky;
        match self.backend_for(cx, pool, sticky) {
            Ok(bkey) => self.send_on(bkey, out),
            Err(err) => self.fail_outgoing(cx, out, err),
        }
    }

    /// Queue a request on a given connection.
    fn send_on(&mut self, bkey: Key, out: Outgoing) {
        let Outgoing {
            session,
            seq,
            req,
            purpose,
            hops,
            retries,
            asking,
            expect,
        } = out;
        let seq = match seq {
            Some(seq) => seq,
            None => match self.sessions.get_mut(session) {
                Some(s) => s.ring.push_pending(),
                None => return,
            },
        };
        let Some(b) = self.backends.get_mut(bkey) else {
            return;
        };
        if asking {
            b.enqueue(InFlight::new(
                Key::NONE,
                0,
                Bytes::from_static(router::ASKING),
                Purpose::Asking,
            ));
        }
        b.enqueue(InFlight {
            session,
            seq,
            req,
            purpose,
            hops,
            retries,
            expect,
        });
        self.mark_backend_dirty(bkey);
    }

    fn backend_event(&mut self, cx: &mut Context<'_, Timer>, key: Key, event: &Event) {
        let Some(b) = self.backends.get_mut(key) else {
            return;
        };
        if event.is_read_closed() || event.is_error() {
            b.hup = true;
        }
        if b.state == State::Connecting {
            match b.finish_connect() {
                Ok(true) => {
                    let pool = b.pool();
                    log::debug!(target: "mithril::worker", "worker {}: connected to {}", self.id, b.addr);
                    if let Some(pool) = pool {
                        self.pools.mark_ok(pool);
                    }
                    self.mark_backend_dirty(key);
                }
                Ok(false) => return,
                Err(e) => {
                    self.backend_failed(cx, key, &e.to_string());
                    return;
                }
            }
        } else if event.is_writable() {
            self.mark_backend_dirty(key);
        }
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.backend_read(cx, key);
        }
    }

    fn backend_read(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(b) = self.backends.get_mut(key) else {
            return;
        };
        if let Role::Pubsub(owner) = b.role {
            // Backpressure toward a slow subscriber: leave the messages in
            // the socket (and the node's output buffer) while its window is
            // full.
            if self.push_window_full(owner) {
                return;
            }
        }
        let Some(b) = self.backends.get_mut(key) else {
            return;
        };
        let io = b.read(BACKEND_READ_BUDGET, b.hup);
        let via = b.addr;
        let role = b.role;
        let replies_before = b.replies; // observe
        loop {
            let Some(b) = self.backends.get_mut(key) else {
                return;
            };
            match b.next_reply() {
                Read::Empty => {
                    // observe: this read's replies stop their round-trip clock.
                    if let Role::Shared(_) = role {
                        let n = b.replies - replies_before;
                        b.obs.clock.answered(n, self.obs.stats.now_us);
                    }
                    break;
                }
                Read::Push(frame) => {
                    if let Role::Pubsub(owner) = role {
                        if let Some(why) = self.pubsub_frame(owner, frame) {
                            self.backend_failed(cx, key, &why);
                            return;
                        }
                        // The window is exact: the rest waits in the buffer.
                        if self.push_window_full(owner) {
                            break;
                        }
                    }
                }
                Read::Intermediate(frame, head) => {
                    if head == b'-' && b.txn_redirect.is_none() {
                        b.txn_redirect = router::parse_redirect(&frame, via, &self.topo);
                        if b.txn_redirect.is_none()
                            && b.txn_retry.is_none()
                            && retry::is_retryable(&frame)
                        {
                            b.txn_retry = Some(frame);
                        }
                    }
                }
                Read::Broken(why) => {
                    self.backend_failed(cx, key, why);
                    return;
                }
                Read::Reply(f, frame, head) => self.on_reply(cx, key, via, f, frame, head),
            }
        }
        match io {
            Io::Ok => {}
            Io::Budget => self.ready_backends.push(key),
            Io::Closed => return self.backend_failed(cx, key, "connection closed by the node"),
            Io::Error(e) => return self.backend_failed(cx, key, &e.to_string()),
        }
        // A connection to a node that left the map, whose last reply is in.
        if self
            .backends
            .get(key)
            .is_some_and(|b| b.role == Role::Retired && b.in_flight() == 0)
        {
            self.drop_backend(cx, key);
        }
    }

    fn on_reply(
        &mut self,
        cx: &mut Context<'_, Timer>,
        bkey: Key,
        via: SocketAddr,
        f: InFlight,
        frame: Bytes,
        head: u8,
    ) {
        match f.purpose {
            Purpose::Asking | Purpose::Reload => return,
            Purpose::Init => {
                if head == b'-' {
                    let why = crate::backend::auth::setup_failure(&frame);
                    // The TCP connect succeeded (the pool was marked up):
                    // a refused set-up backs off like a refused connect.
                    if let Some(pool) = self.backends.get(bkey).and_then(Backend::pool) {
                        self.pools.mark_failed(pool, cx.now, why.clone());
                    }
                    self.backend_failed(cx, bkey, &why);
                }
                return;
            }
            Purpose::Blocking | Purpose::Kill(_) => self.lease_answered(bkey, f.session),
            _ => {}
        }
        // What the transaction's queued commands got before EXEC's reply:
        // taken now, whatever EXEC's reply says.
        let (txn_redirect, txn_retry) = match f.purpose {
            Purpose::Txn => self
                .backends
                .get_mut(bkey)
                .map(|b| (b.txn_redirect.take(), b.txn_retry.take()))
                .unwrap_or_default(),
            _ => (None, None),
        };
        if head == b'-' {
            if let Some(r) = router::parse_redirect(&frame, via, &self.topo) {
                self.follow(cx, via, f, r);
                return;
            }
            if retry::is_retryable(&frame) {
                self.try_again(cx, via, f, frame);
                return;
            }
            if f.purpose == Purpose::Client && scripts::is_missing(&frame) {
                return self.reload_missing(cx, bkey, f, frame);
            }
        }
        if let Some(r) = txn_redirect {
            self.follow(cx, via, f, r);
            return;
        }
        if let Some(cause) = txn_retry {
            // A queued command refused with TRYAGAIN (or CLUSTERDOWN)
            // aborted the transaction before anything ran: retry it whole,
            // as a single-slot request is; EXEC's own reply is the answer
            // if the waits run out.
            if frame.starts_with(b"-EXECABORT") {
                self.try_again_as(cx, via, f, &cause, frame);
                return;
            }
        }
        self.complete(cx, f, frame);
    }

    /// A request's final reply (or the error replacing it).
    fn complete(&mut self, cx: &mut Context<'_, Timer>, f: InFlight, frame: Bytes) {
        match f.purpose {
            Purpose::Client => self.deliver(f.session, f.seq, frame, &f.req),
            Purpose::Txn => self.deliver(f.session, f.seq, frame, observe::EXEC_FRAME),
            Purpose::Part(part) | Purpose::Kill(part) => {
                self.fold_part(cx, f.session, f.seq, part, frame)
            }
            Purpose::Scan(index) => {
                let frame = fanout::rewrite_scan_reply(&frame, index, self.topo.shards.len());
                self.deliver(f.session, f.seq, frame, &f.req);
            }
            Purpose::Blocking => {
                self.deliver(f.session, f.seq, frame, &[]);
                self.unblock(f.session);
            }
            Purpose::Asking | Purpose::Init | Purpose::Reload => {}
        }
    }

    /// Retry a redirected request where the cluster says its slot lives.
    fn follow(&mut self, cx: &mut Context<'_, Timer>, via: SocketAddr, f: InFlight, r: Redirect) {
        if f.hops >= router::MAX_HOPS {
            self.complete(cx, f, Bytes::from_static(router::ERR_TOO_MANY_REDIRECTS));
            return;
        }
        let Some(proto) = self.sessions.get(f.session).map(|s| s.proto) else {
            return; // the client left; nobody is waiting for this answer
        };
        let (addr, asking) = match r {
            Redirect::Moved { slot, addr } => {
                self.obs.stats.counters.moved += 1; // observe
                log::debug!(target: "mithril::worker", "worker {}: MOVED {slot} {addr}", self.id);
                self.shared.topology.request_refresh();
                self.pools.set_override(slot, addr);
                (addr, false)
            }
            Redirect::Ask { slot, addr } => {
                self.obs.stats.counters.ask += 1; // observe
                log::debug!(target: "mithril::worker", "worker {}: ASK {slot} {addr}", self.id);
                (addr, true)
            }
            Redirect::Unresolved { slot, ask } => {
                // A target the address book does not know (a new host
                // name, or `?`): refresh the topology and ask the same node
                // again after a wait, as for TRYAGAIN; by then the book
                // has the name, or the slot has settled.
                log::debug!(target: "mithril::worker", "worker {}: redirect of slot {slot} (ask {ask}) to an unknown endpoint", self.id);
                self.shared.topology.request_refresh();
                let frame = Bytes::from_static(ERR_UNRESOLVED);
                return self.try_again(cx, via, f, frame);
            }
        };
        if f.purpose == Purpose::Blocking {
            self.lease_redirect(cx, f, addr, asking);
            return;
        }
        let pool = self.pools.master_pool(addr, proto);
        self.send_to_pool(cx, pool, Outgoing::retry(f, asking));
    }

    /// Close a connection without answering anything (its requests'
    /// clients are gone, or it was idle).
    fn drop_backend(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        if let Some(mut b) = self.backends.remove(key) {
            let _ = cx.registry.deregister(b.stream_mut());
            self.obs.retire_backend(&b); // observe
            if b.role == Role::Lease {
                self.shared.lease_closed(b.addr);
            }
        }
    }

    /// Drop a backend connection and answer everything queued on it.
    fn backend_failed(&mut self, cx: &mut Context<'_, Timer>, key: Key, reason: &str) {
        let Some(mut b) = self.backends.remove(key) else {
            return;
        };
        let _ = cx.registry.deregister(b.stream_mut());
        self.obs.retire_backend(&b); // observe
        let addr = b.addr;
        if let (State::Connecting, Some(pool)) = (b.state, b.pool()) {
            self.pools.mark_failed(pool, cx.now, reason.to_string());
        }
        if b.role == Role::Lease {
            self.shared.lease_closed(addr);
        }
        if b.role == Role::Lease && b.in_flight() == 0 {
            // An idle lease the node closed (its `timeout`): nothing lost.
            log::debug!(target: "mithril::worker", "worker {}: idle lease to {addr} closed: {reason}", self.id);
            return;
        }
        // observe: counted per node; the warning is sampled per node.
        self.obs
            .backend_failed(self.id, addr, reason, b.in_flight(), cx.now);
        self.shared.topology.request_refresh();
        if let Role::Pubsub(owner) = b.role {
            // A subscriber that lost its connection lost its
            // subscriptions: close it rather than let it wait forever.
            if let Some(s) = self.sessions.get_mut(owner) {
                s.sub = None;
            }
            self.close_session(cx, owner);
            return;
        }
        let lost = Bytes::from(format!(
            "-ERR mithril: connection to {addr} lost ({reason})\r\n"
        ));
        let unsent = Bytes::from(format!(
            "-CLUSTERDOWN mithril: cannot reach {addr} ({reason})\r\n"
        ));
        let drained: Vec<(InFlight, bool)> = b.drain().collect();
        for (f, sent) in drained {
            let err = if sent { lost.clone() } else { unsent.clone() };
            self.complete(cx, f, err);
        }
    }

    fn flush_backends(&mut self, cx: &mut Context<'_, Timer>) {
        let mut list = std::mem::take(&mut self.dirty_backends);
        for key in list.drain(..) {
            let Some(b) = self.backends.get_mut(key) else {
                continue;
            };
            b.dirty = false;
            if b.state != State::Connected {
                continue;
            }
            let awaiting = b.awaiting(); // observe
            let written = b.flush();
            // observe: requests written now start their round-trip clock.
            if let Role::Shared(_) = b.role {
                let sent = b.awaiting().saturating_sub(awaiting);
                b.obs.clock.sent(sent, self.obs.stats.now_us);
            }
            if let Err(e) = written {
                self.backend_failed(cx, key, &e.to_string());
                continue;
            }
            #[cfg(debug_assertions)]
            self.check_fenced(cx, BACKEND, key);
        }
        if self.dirty_backends.is_empty() {
            self.dirty_backends = list;
        }
    }

    // ----- housekeeping ---------------------------------------------------

    fn check_topology(&mut self, cx: &mut Context<'_, Timer>) {
        let epoch = self.shared.topology.epoch();
        if epoch != self.pools.epoch {
            self.topo = self.shared.topology.load();
            let retired = self.pools.remap(&self.topo);
            self.retire_connections(cx, retired);
        }
    }

    /// Connections of pools the new map no longer names, and idle leases
    /// to nodes it no longer has: closed now when nothing is in flight on
    /// them, else once the last reply is in (`backend_read`).
    fn retire_connections(&mut self, cx: &mut Context<'_, Timer>, conns: Vec<Key>) {
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
        let topo = &self.topo;
        let gone: Vec<(SocketAddr, Proto)> = self
            .idle_leases
            .keys()
            .filter(|(addr, _)| !topo.nodes.iter().any(|n| n.addr == *addr))
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

    /// Drop connections whose oldest unanswered request passed
    /// `backend-timeout` (blocking leases and subscribers are exempt).
    fn check_timeouts(&mut self, cx: &mut Context<'_, Timer>) {
        let Some(limit) = self.backend_timeout else {
            return;
        };
        // Measured from the first sweep that saw the connection waiting
        // without progress: a stall is noticed within one TICK of `limit`.
        let now = cx.now;
        let late: Vec<Key> = self
            .backends
            .iter_mut()
            .filter(|(_, b)| matches!(b.role, Role::Shared(_)) && b.state == State::Connected)
            .filter_map(|(k, b)| (b.stalled_for(now) > limit).then_some(k))
            .collect();
        for k in late {
            self.backend_failed(cx, k, "backend-timeout: no reply in time");
        }
    }

    fn tick(&mut self, cx: &mut Context<'_, Timer>) {
        self.check_timeouts(cx);
        self.overload_tick(cx);
        self.observe_tick(cx); // observe: publish the statistics
        if let Some(deadline) = self.draining {
            if self.sessions.is_empty() || cx.now >= deadline {
                self.stop = true;
            }
        }
    }
}

impl Handler for Worker {
    type Timer = Timer;

    fn on_event(&mut self, cx: &mut Context<'_, Timer>, kind: Kind, key: Key, event: &Event) {
        self.obs.stats.set_now(cx.now, cx.now_us); // observe: the turn's clock
        match kind {
            SESSION => {
                if event.is_writable() {
                    self.mark_session_dirty(key);
                }
                if event.is_read_closed() || event.is_error() {
                    if let Some(s) = self.sessions.get_mut(key) {
                        s.hup = true;
                    }
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.session_input(cx, key);
                }
            }
            BACKEND => self.backend_event(cx, key, event),
            _ => {}
        }
    }

    fn on_fabric(&mut self, cx: &mut Context<'_, Timer>) {
        self.obs.stats.set_now(cx.now, cx.now_us); // observe: the turn's clock
        if !self.tick_armed {
            self.tick_armed = true;
            cx.schedule_in(TICK, Timer::Tick);
        }
        self.check_topology(cx);
        // observe: CONFIG SET of the slow log holds from the next turn on.
        self.obs.stats.sync_slow_settings(&self.shared.stats);
        // is_empty is two loads; try_recv on an empty channel costs more,
        // and this runs every turn.
        while !self.rx.is_empty() {
            let Some(msg) = self.rx.try_recv() else { break };
            match msg {
                WorkerMsg::Accept(a) => self.accept(cx, a),
                WorkerMsg::Shutdown => self.begin_drain(cx),
                other => self.observe_msg(cx, other), // observe
            }
        }
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
        if !self.ready_sessions.is_empty() {
            let mut list = std::mem::take(&mut self.ready_sessions);
            list.sort_unstable();
            list.dedup();
            for key in list {
                self.session_input(cx, key);
            }
        }
    }

    fn on_timer(&mut self, cx: &mut Context<'_, Timer>, _id: TimerId, data: Timer) {
        match data {
            Timer::Tick => {
                cx.schedule_in(TICK, Timer::Tick);
                self.tick(cx);
            }
            Timer::Retry(key) => self.retry_now(cx, key),
            Timer::ConnectTimeout(key) => {
                if self
                    .backends
                    .get(key)
                    .is_some_and(|b| b.state == State::Connecting)
                {
                    self.backend_failed(cx, key, "connect timeout");
                }
            }
        }
    }

    fn before_sleep(&mut self, cx: &mut Context<'_, Timer>) {
        self.flush_backends(cx);
        self.flush_sessions(cx);
        self.shared.workers[self.id]
            .commands
            .store(self.commands, Ordering::Relaxed);
        if self.draining.is_some() && self.sessions.is_empty() {
            self.stop = true;
        }
    }

    fn has_pending_work(&self) -> bool {
        !self.ready_sessions.is_empty() || !self.ready_backends.is_empty() || !self.rx.is_empty()
    }

    fn keep_running(&self) -> bool {
        !self.stop
    }
}
