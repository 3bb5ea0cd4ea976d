//! Sessions: the client side of the proxy.
//!
//! ```text
//!   client ──► rbuf (BytesMut) ──scan──► request frame (Bytes slice of rbuf)
//!                                            │ dispatch (worker)
//!                                            ▼
//!        ring slot reserved at seq N ◄── local answer / backend reply
//!                                            │
//!   client ◄── out (write queue) ◄── ready front of the ring, and pushes
//!              one writev per turn      whose barrier has left
//! ```
//!
//! A session owns its socket, its read buffer, its request scanner and its
//! reply ring. It does socket work only (read into the buffer, write the
//! ring's ready front); deciding what a request means is the worker's job.
//! Requests leave as zero-copy slices of `rbuf`; replies arrive as slices of
//! a backend's buffer or as locally built frames.
//!
//! What stops a session's input (a full dispatch window, a gated slot, a
//! blocking command outstanding, a close pending) is one value, its input
//! mode (`input::Input`), changed only through the methods there; the
//! slot gates it waits on are `gate::Gates`. Its write side (the write
//! queue, pushes, `flush`) is `output`; a subscriber's state is
//! `subscriptions`.
//!
//! Invariants: replies leave in request order (the ring); the read buffer
//! never grows past `query-buffer-limit`; a session never touches another
//! session or a backend. What it may have outstanding is windowed by the
//! size of its replies and its unsent output (`pressure`), and a reply
//! that must wait for a slow client is not left pinning a backend buffer
//! (`output::unpin`).

mod activity;
pub mod arena;
mod auth;
mod batch;
mod exec;
pub mod gate;
mod identity;
pub mod input;
mod output;
mod pipe;
pub mod pressure;
mod reply;
pub mod ring;
mod roles;
mod subscriptions;
mod tls;
mod waits;
mod written;

use crate::resp::encode::Proto;
use crate::resp::request::RequestScanner;
use crate::shared::Ticket;
use bytes::{Bytes, BytesMut};
pub use exec::ExecDenied;
use gate::Gates;
pub use input::Input;
use mio::net::TcpStream;
pub use output::FlushOutcome;
pub use pipe::Steer;
use pressure::Pressure;
use reactor::read::{read_budgeted_stamped, Growth, ReadEnd};
use reactor::Key;
pub use reply::{ClientReply, ReplyMode};
use ring::ReplyRing;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;
pub use subscriptions::{Expect, SubConn, Subscriptions, MAX_SUBSCRIPTIONS, PUSH_WINDOW};
pub use written::Written;

/// Read buffer growth: 16 KiB steps whenever less than 4 KiB is free.
const GROWTH: Growth = Growth {
    min_spare: 4 * 1024,
    chunk: READ_CHUNK,
    double: false,
};

/// The read buffer's step, and so the buffer a session takes at its
/// first read.
const READ_CHUNK: usize = 16 * 1024;

/// What one open connection costs in `maxmemory`'s figure besides the
/// bytes it buffers ([`Session::buffered`]): the session itself (its
/// slab entry) and the 16 KiB read buffer it takes at its first read,
/// counted from the accept to the close whatever its buffers' capacity
/// is at the moment. A Redis client's figure in `used_memory` is its
/// struct and its 16 KiB reply buffer in the same way, so with a client
/// connected the process is never at zero (`maxmemory 1` refuses
/// writes, as on a node).
pub const FIXED_COST: usize = std::mem::size_of::<Session>() + READ_CHUNK;

pub enum ReadOutcome {
    /// Read until the socket would block.
    Drained,
    /// The per-event budget ran out with data possibly left in the socket.
    Budget,
    /// The client closed its side.
    Eof,
    /// The read buffer reached `query-buffer-limit`.
    Overflow,
    Error(io::Error),
}

/// A transaction being queued (between MULTI and EXEC).
#[derive(Default)]
pub struct Txn {
    /// The queued requests, as the client sent them.
    pub queued: Vec<Bytes>,
    /// The slot every key must hash to (the first key's).
    pub slot: Option<u16>,
    pub bytes: usize,
    /// An error while queueing: EXEC answers EXECABORT.
    pub failed: bool,
    /// A queued command may grow memory (denyoom): EXEC is refused while
    /// over `maxmemory`.
    pub denyoom: bool,
    /// FLUSHALL / FLUSHDB (the first one), SCRIPT LOAD and FLUSH queued: EXEC
    /// sends them to the masters other than the transaction's first.
    pub everywhere: Vec<Bytes>,
    /// A FLUSHALL / FLUSHDB is queued.
    pub flushes: bool,
    /// A SCRIPT FLUSH is queued: the registry forgets its scripts at EXEC.
    pub flushes_scripts: bool,
    /// The `Acl::generation` at MULTI: EXEC checks the queued commands
    /// again when it moved (`worker/txn.rs`).
    pub acl_gen: u64,
}

/// A session's WATCH: the exclusive connection (a lease) to the master of
/// the watched keys' slot that carries every read and write of the session
/// until EXEC, DISCARD, UNWATCH, RESET or the close (`worker/watch.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The leased connection (`Role::Lease`).
    pub conn: Key,
    /// The slot of every watched key; other slots are refused meanwhile.
    pub slot: u16,
    /// The watch can no longer be trusted (a command on it met MOVED or
    /// ASK, or its connection was lost): the next EXEC answers nil.
    pub broken: bool,
}

pub use arena::HitArena;

/// `Session::batch_since` of a wait that is over (`batch.rs`).
const BATCH_WAIT_OVER: u64 = 1;

/// Dispatches that move a session's pipelining score from one end to the
/// other (`backend-sharding auto`).
pub const PIPE_SCORE: u8 = 4;
/// `backend_for`'s connection choice for a session on the shared pipes.
pub const PIPE: usize = 1 << (usize::BITS - 1);

pub struct Session {
    pub key: Key,
    pub id: u64,
    /// Its socket: read and written only here; the worker registers it
    /// before the session exists and takes it off the poll at the close.
    stream: TcpStream,
    fd: RawFd,
    /// The client's address and the one it connected to, fixed at the
    /// accept.
    peer: SocketAddr,
    local: Option<SocketAddr>,
    /// The pool whose listener accepted the client: where its requests
    /// go (`crate::placement::PoolId`). Fixed for the session's life.
    pool: usize,
    /// The database its requests run in (SELECT): which connection set of
    /// a node they take; and its pool's, where it starts.
    db: u32,
    home_db: u32,
    pub rbuf: BytesMut,
    pub scanner: RequestScanner,
    pub ring: ReplyRing,
    /// Replies (and pushes) that may leave, in order; written with writev.
    out: VecDeque<Bytes>,
    /// Where small reply-cache hits are copied to leave (see
    /// `cache::INLINE_FRAME` and `arena.rs`).
    hit_arena: HitArena,
    /// Bytes of `out`'s front already written.
    out_off: usize,
    out_bytes: usize,
    /// Out-of-band pushes waiting for their barrier: (seq, frame).
    pushes: VecDeque<(u64, Bytes)>,
    /// Queued on the worker's flush list this turn: set only by
    /// `mark_dirty` (whose caller lists it), cleared by `flushing`.
    dirty: bool,
    /// The ring sequence of the first request of its latest read: the
    /// replies to one read leave together when they can (`waits_for_batch`).
    batch_start: u64,
    /// Since when (the loop's µs clock, at least 2) its ready replies wait
    /// for the rest of their read's (a batch wait); 0 while none wait,
    /// `BATCH_WAIT_OVER` once the wait is cut short (`Timer::BatchWait`);
    /// see `batch.rs`.
    batch_since: u64,
    /// Whether it reads, whether it dispatches, and what wakes it: open,
    /// paused, at a gate, blocked, closing (see `input`).
    input: Input,
    /// The client half-closed (EOF): no more reads.
    eof: bool,
    /// The kernel's arrival stamp (CLOCK_REALTIME ns) of the last bytes
    /// read from the client, 0 if none came (`reactor::stamp`): what orders
    /// blocking commands read by different workers (`worker/blocking.rs`).
    arrived: u64,
    /// The socket has stamps enabled, so reads are recvmsg(2) calls that
    /// keep `arrived` (two workers or more); else plain read(2).
    stamped: bool,
    /// A readiness event said the peer closed: read through to the EOF.
    hup: bool,
    /// Picks this session's connection among a node's `backend-conns`
    /// (fixed at the accept).
    sticky: usize,
    /// `backend-sharding`: its requests go through the nodes' shared
    /// pipes; what `auto` wants for it (its pipelining score: 0 is
    /// request-response, `PIPE_SCORE` pipelining), and whether it waits
    /// for its replies to move; changed only in `pipe.rs` (the worker's
    /// side is `worker/pipes.rs`).
    pipe: bool,
    pipe_score: u8,
    moving: bool,
    /// Commands queued between MULTI and EXEC.
    pub txn: Option<Box<Txn>>,
    /// An EXEC in flight some of whose commands an ACL change refused
    /// (`exec.rs`).
    exec_denied: Option<Box<ExecDenied>>,
    /// Subscriptions and the subscriber connection, once subscribed.
    pub sub: Option<Box<Subscriptions>>,
    /// WATCH in force: the pinned connection (see [`Pin`]).
    pub pin: Option<Pin>,
    /// Slots held by requests still being retried or merged, and the
    /// tainted slots (see `gate`): a later request on a held slot waits
    /// (`Input::AtGate`), so it cannot run before the earlier request's
    /// resends.
    pub gates: Gates,
    pub proto: Proto,
    /// Its name, and below its library (`identity.rs`).
    name: Option<Vec<u8>>,
    /// When it was accepted and last read or wrote (`activity.rs`).
    created: Instant,
    last_active: Instant,
    _ticket: Ticket,
    /// The login (`auth.rs`): may run commands (true from the start when
    /// no `requirepass` is configured, else once AUTH / HELLO AUTH
    /// succeeded; RESET clears it), the user AUTH named (`None`: the
    /// `default` user), whether that user's permissions are checked, the
    /// `Acl::generation` those were read at, and failed AUTHs so far.
    authenticated: bool,
    user: Option<std::sync::Arc<crate::acl::User>>,
    restricted: bool,
    acl_gen: u64,
    auth_failures: u64,
    /// Dispatch window and overload bookkeeping (see `pressure`).
    pub pressure: Pressure,
    /// CLIENT SETINFO LIB-NAME / LIB-VER, shown by CLIENT INFO.
    lib_name: Option<Vec<u8>>,
    lib_ver: Option<Vec<u8>>,
    /// Full name of the last command that passed the auth gate (`cmd=` of
    /// CLIENT INFO); "NULL" before the first.
    last_cmd: &'static str,
    /// observe: bytes read from and written to this client (`activity.rs`).
    net_in: u64,
    net_out: u64,
    /// Reply cache holds of this session's writes in flight: (the write's
    /// ring sequence, the hold as `ReplyCache::release` takes it),
    /// released when it is answered (`worker/cache/mod.rs`).
    /// `cache::TXN_HOLD` marks a queued command's, until its EXEC.
    pub holds: Vec<(u64, u32)>,
    /// CLIENT TRACKING, while on (`worker/tracking.rs`), and the worker
    /// and session its REDIRECT names (`Key::NONE`: none); see `roles.rs`.
    tracking: Option<Box<crate::cache::tracking::ClientTracking>>,
    redirect_to: (usize, Key),
    /// Asked for its id (CLIENT ID, HELLO): listed in
    /// `Shared::named_clients` until it closes (`roles.rs`).
    named: bool,
    /// The masters it wrote to since its last WAIT (`worker/admin.rs`).
    written: Written,
    /// Leases carrying its WAIT / WAITAOF parts, with the WAIT's ring
    /// sequence: closed if it leaves before they are answered (a WAIT may
    /// block for ever; `waits.rs`).
    wait_leases: Vec<(Key, u64)>,
    /// CLIENT REPLY (`reply.rs`).
    reply_mode: ReplyMode,
    /// Ring sequences whose replies are dropped as they leave (CLIENT
    /// REPLY OFF / SKIP), in order, adjacent ranges merged. Bounded by the
    /// ring: each range holds at least one slot still in it.
    quiet: VecDeque<std::ops::Range<u64>>,
    /// MONITOR: it receives the feed of every client's commands
    /// (`worker/monitor.rs`), as out-of-band pushes (`roles.rs`).
    monitor: bool,
    /// Accepted on the TLS listener: rustls between the socket and the
    /// buffers (`tls.rs`). `None` for a plain session, whose reads and
    /// flushes test only this.
    tls: Option<Box<tls::TlsState>>,
}

impl Session {
    /// Its socket's descriptor (CLIENT INFO's `fd=`).
    #[inline]
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The close: its socket leaves the worker's poll.
    pub fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        registry.deregister(&mut self.stream)
    }

    /// The client's address.
    #[inline]
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The address it connected to (`None` if the socket could not say).
    #[inline]
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    /// The client half-closed: set only by a read that met the EOF, and
    /// never cleared (no more reads).
    #[inline]
    pub fn eof(&self) -> bool {
        self.eof
    }

    /// A readiness event said the peer closed (or erred): its reads go
    /// through to the EOF from now on.
    #[inline]
    pub fn hung_up(&mut self) {
        self.hup = true;
    }

    /// The peer closed, by a readiness event: read through to the EOF.
    #[inline]
    pub fn hup(&self) -> bool {
        self.hup
    }

    /// The kernel's arrival stamp of the last bytes read from the client
    /// (0 if none came, or the socket keeps no stamps).
    #[inline]
    pub fn arrived(&self) -> u64 {
        self.arrived
    }

    /// The pool the session belongs to (`crate::placement::PoolId`).
    #[inline]
    pub fn pool(&self) -> usize {
        self.pool
    }

    /// The database the session's requests run in.
    #[inline]
    pub fn db(&self) -> u32 {
        self.db
    }

    /// SELECT: later requests run in database `db` (the caller checked it
    /// is one the pool has).
    pub fn select(&mut self, db: u32) {
        self.db = db;
    }

    /// The pool's database: where the session starts (and RESET goes).
    pub fn set_home_db(&mut self, db: u32) {
        self.home_db = db;
        self.db = db;
    }

    /// The database the session selected when it is not its pool's: the
    /// connection sets the placement names are the pool's, so only then
    /// does a request look up the set of its database.
    #[inline]
    pub fn other_db(&self) -> Option<u32> {
        (self.db != self.home_db).then_some(self.db)
    }

    /// Its own connection among a node's `backend-conns` (also which of
    /// a node's replicas its reads prefer).
    #[inline]
    pub fn sticky(&self) -> usize {
        self.sticky
    }

    /// Which of a node's connections its requests take: its own among
    /// `backend-conns`, or `PIPE`, the node's shared pipe.
    #[inline]
    pub fn conn_choice(&self) -> usize {
        if self.pipe {
            PIPE
        } else {
            self.sticky
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        key: Key,
        id: u64,
        stream: TcpStream,
        peer: SocketAddr,
        pool: usize,
        ticket: Ticket,
        start: crate::acl::SessionStart,
        now: Instant,
    ) -> Session {
        let fd = stream.as_raw_fd();
        let local = stream.local_addr().ok();
        Session {
            key,
            id,
            stream,
            fd,
            peer,
            local,
            pool,
            db: 0,
            home_db: 0,
            // Allocated on first read, so an idle connection costs little.
            rbuf: BytesMut::new(),
            scanner: RequestScanner::new(),
            ring: ReplyRing::new(),
            out: VecDeque::new(),
            hit_arena: HitArena::default(),
            out_off: 0,
            out_bytes: 0,
            pushes: VecDeque::new(),
            dirty: false,
            batch_start: 0,
            batch_since: 0,
            input: Input::Open,
            eof: false,
            hup: false,
            arrived: 0,
            stamped: false,
            sticky: key.index as usize,
            pipe: false,
            pipe_score: PIPE_SCORE,
            moving: false,
            written: Written::default(),
            wait_leases: Vec::new(),
            txn: None,
            exec_denied: None,
            sub: None,
            pin: None,
            gates: Gates::default(),
            proto: Proto::Resp2,
            name: None,
            created: now,
            last_active: now,
            _ticket: ticket,
            authenticated: start.authenticated,
            user: None,
            restricted: start.restricted,
            acl_gen: start.generation,
            auth_failures: 0,
            pressure: Pressure::default(),
            lib_name: None,
            lib_ver: None,
            last_cmd: "NULL",
            net_in: 0,
            net_out: 0,
            holds: Vec::new(),
            tracking: None,
            redirect_to: (0, Key::NONE),
            named: false,
            reply_mode: ReplyMode::default(),
            quiet: VecDeque::new(),
            monitor: false,
            tls: None,
        }
    }

    /// To be flushed this turn: `true` when it was not yet, and the
    /// caller puts it on the worker's flush list (so it is listed once).
    #[inline]
    pub fn mark_dirty(&mut self) -> bool {
        !std::mem::replace(&mut self.dirty, true)
    }

    /// Taken off the flush list to be flushed.
    #[inline]
    pub fn flushing(&mut self) {
        self.dirty = false;
    }

    /// The session speaks TLS over its socket, through `conn`; with
    /// `by_cn`, its client certificate's common name names its user
    /// (`tls-auth-clients-user CN`, `tls.rs`).
    pub fn set_tls(
        &mut self,
        conn: rustls::ServerConnection,
        by_cn: Option<std::sync::Arc<crate::shared::Shared>>,
    ) {
        self.tls = Some(Box::new(tls::TlsState { conn, by_cn }));
    }

    /// Reads keep the kernel's arrival stamps (the socket has them on).
    pub fn set_stamped(&mut self, on: bool) {
        self.stamped = on;
    }

    /// Read what the socket has, up to `budget` bytes this call, never
    /// letting the buffer pass `limit` bytes.
    ///
    /// With edge-triggered readiness a read that returns less than the room
    /// offered has drained the socket: anything arriving later raises a new
    /// event. So no second read just to see EAGAIN (half the read system
    /// calls of a request-response client) — unless `to_eof`: the event
    /// said the peer closed, and the EOF must be seen now.
    pub fn read(&mut self, budget: usize, limit: usize, to_eof: bool) -> ReadOutcome {
        if self.tls.is_some() {
            return self.read_tls(budget, limit);
        }
        let stamp = self.stamped.then_some(&mut self.arrived);
        let (end, n) = read_budgeted_stamped(
            self.fd,
            &mut self.rbuf,
            budget,
            limit,
            to_eof,
            GROWTH,
            stamp,
        );
        self.net_in += n as u64; // observe
        match end {
            ReadEnd::Drained => ReadOutcome::Drained,
            ReadEnd::Budget => ReadOutcome::Budget,
            ReadEnd::Eof => {
                self.eof = true;
                ReadOutcome::Eof
            }
            ReadEnd::Full => ReadOutcome::Overflow,
            ReadEnd::Error(e) => ReadOutcome::Error(e),
        }
    }

    /// Replies dispatched and not yet written (the ring plus the write
    /// queue): what the per-session bound counts.
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.ring.len() + self.out.len()
    }

    /// The dispatch window is full (at most `MAX_OUTSTANDING`; less while
    /// replies are large or the client is not reading: see `pressure`).
    #[inline]
    pub fn at_limit(&self) -> bool {
        self.outstanding() >= self.pressure.window
    }

    /// True when the session has nothing more to do and may be closed:
    /// the client is gone (or asked to go) and every reply was written.
    /// Requests read but held back by a pause still count as work.
    pub fn finished(&self) -> bool {
        match self.input {
            Input::Closing => self.idle() && self.tls_sent(),
            _ => self.eof && self.idle() && !self.input.has_backlog(),
        }
    }

    /// Nothing dispatched is waiting to be answered or written.
    pub fn idle(&self) -> bool {
        self.ring.is_empty() && self.out.is_empty()
    }

    /// Bytes buffered for this session (input plus unsent output,
    /// pushes included).
    pub fn buffered(&self) -> usize {
        self.rbuf.len() + self.out_bytes + self.pressure.push_bytes
    }

    /// Give back the buffers an idle session grew (its read buffer, and
    /// the ring and write queue a deep pipeline left large), as Redis frees
    /// an idle client's query buffer. Only when nothing is buffered.
    /// Returns about how many bytes were released.
    pub fn shrink_idle(&mut self) -> usize {
        if !self.rbuf.is_empty() || !self.idle() || !self.pushes.is_empty() {
            return 0;
        }
        let released = self.rbuf.capacity()
            + self.hit_arena.capacity()
            + self.out.capacity() * std::mem::size_of::<Bytes>()
            + self.pushes.capacity() * std::mem::size_of::<(u64, Bytes)>();
        if self.rbuf.capacity() > 0 {
            self.rbuf = BytesMut::new();
        }
        self.scanner.release();
        self.hit_arena.release();
        self.out = VecDeque::new();
        self.out_off = 0;
        self.pushes = VecDeque::new();
        self.ring.shrink();
        released
    }

    /// What must hold of a session between two of the worker's steps
    /// (debug builds: the worker calls it after dispatch and after each
    /// flush, with what it alone can see: the lease and the subscriber
    /// connection exist). A failure is a bug, and panics; the worker's
    /// panic fence then closes this session. Walks are bounded by
    /// `ring::CHECK_WALK`, as in the ring's own check.
    #[cfg(debug_assertions)]
    pub fn check_invariants(&self) {
        use ring::{CHECK_WALK, MAX_OUTSTANDING};
        let id = self.id;
        self.ring.check_invariants();
        self.gates.check_invariants();
        // Dispatch stops at the window, which is at most the ring window;
        // the last request dispatched may add a slot per argument
        // ((UN)SUBSCRIBE confirmations).
        let per_request = crate::resp::limits::Limits::default().max_multibulk_len;
        assert!(
            self.pressure.window <= MAX_OUTSTANDING,
            "client {id}: window {} past the ring window",
            self.pressure.window
        );
        assert!(
            self.ring.len() <= MAX_OUTSTANDING + per_request,
            "client {id}: {} replies outstanding in the ring",
            self.ring.len()
        );
        // The write queue's byte count, and where its front was cut.
        match self.out.front() {
            None => assert_eq!(self.out_off, 0, "client {id}: offset into an empty queue"),
            Some(f) => assert!(
                self.out_off == 0 || self.out_off < f.len(),
                "client {id}: offset {} into a {}-byte front",
                self.out_off,
                f.len()
            ),
        }
        if self.out.len() <= CHECK_WALK {
            let queued: usize = self.out.iter().map(Bytes::len).sum();
            assert_eq!(
                self.out_bytes + self.out_off,
                queued,
                "client {id}: unsent bytes counted {} (+{} written of the front), queued {queued}",
                self.out_bytes,
                self.out_off
            );
        }
        if self.pushes.len() <= CHECK_WALK {
            let pushed: usize = self.pushes.iter().map(|p| p.1.len()).sum();
            assert_eq!(
                self.pressure.push_bytes, pushed,
                "client {id}: push bytes counted {}, queued {pushed}",
                self.pressure.push_bytes
            );
        }
        // What the input mode says it waits for is there.
        match self.input {
            Input::Blocked { seq, .. } => assert!(
                self.ring.is_pending(seq),
                "client {id}: blocked on ring slot {seq}, which is not pending"
            ),
            // Moving between a node's connections and its shared pipe
            // (worker/pipes.rs) is a wait of its own.
            Input::AtGate | Input::Paused { gated: true, .. } => assert!(
                !self.gates.is_empty() || self.moving,
                "client {id}: waits at a gate, and holds none"
            ),
            Input::Closing => assert!(
                self.rbuf.is_empty(),
                "client {id}: closing, and its input was kept"
            ),
            Input::Open | Input::Backlog | Input::Paused { gated: false, .. } | Input::Feed => {}
        }
        // Every gate holder is a merge in the ring, a request under retry
        // whose slot still waits for its reply, or a CLUSTERDOWN wait.
        for &(seq, slot) in self.gates.retries() {
            assert!(
                self.ring.is_pending(seq),
                "client {id}: retry gate on slot {slot} for ring slot {seq}, which is not pending"
            );
        }
        if self.ring.len() <= CHECK_WALK {
            let mut holders: crate::topology::slot::SlotMap<u32> = Default::default();
            let gated = self.ring.merges().flat_map(|m| m.gated.iter());
            let retried = self.gates.retries().iter().map(|g| &g.1);
            let down = self.gates.downs().iter();
            for &slot in gated.chain(retried).chain(down) {
                *holders.entry(slot).or_insert(0) += 1;
            }
            for (slot, n) in self.gates.held() {
                assert_eq!(
                    holders.remove(&slot),
                    Some(n),
                    "client {id}: slot {slot} has {n} gate holders"
                );
            }
            assert!(
                holders.is_empty(),
                "client {id}: gates held by merges or retries and not counted: {holders:?}"
            );
        }
        // The confirmations a subscriber waits for have their slots.
        if let Some(sub) = self.sub.as_ref() {
            for c in sub.conns.iter().filter(|c| c.expect.len() <= CHECK_WALK) {
                let seqs: Vec<u64> = c.expect.iter().filter_map(|e| e.seq).collect();
                let ordered = seqs.windows(2).all(|w| w[0] < w[1]);
                assert!(ordered, "client {id}: confirmations expected out of order");
                let answered = c.expect.iter().filter(|e| e.reply.is_some());
                assert!(
                    answered
                        .filter_map(|e| e.seq)
                        .all(|seq| self.ring.is_pending(seq)),
                    "client {id}: a confirmation expected for a slot not pending"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Written;

    #[test]
    fn written_masters_are_taken_by_the_next_wait() {
        let mut w = Written::default();
        assert_eq!(w.take(1, 0, 3), Some(vec![]), "nothing written");
        w.note(1, Some(2));
        w.note(1, Some(0));
        w.note(1, Some(2));
        assert_eq!(w.take(1, 0, 3), Some(vec![0, 2]));
        assert_eq!(w.take(1, 0, 3), Some(vec![]), "taken by the WAIT before");
        // A wider write, a shard past 64, or a new epoch: every master.
        w.note(1, None);
        assert_eq!(w.take(1, 0, 3), None);
        w.note(1, Some(70));
        assert_eq!(w.take(1, 0, 3), None);
        w.note(1, Some(1));
        assert_eq!(w.take(2, 0, 3), None, "indexes of an older map");
        w.note(1, Some(1));
        w.note(2, Some(0));
        assert_eq!(w.take(2, 0, 3), None, "a write under each map");
        w.note(3, Some(1));
        assert_eq!(w.take(3, 0, 3), Some(vec![1]));
    }
}
