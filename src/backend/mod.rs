//! Backends: connections from a worker to cluster nodes.
//!
//! ```text
//!   sessions ──enqueue(InFlight)──► inflight FIFO ──writev (≤256 frames)──► node
//!                                     │ sent │ unsent │
//!   sessions ◄── reply (Bytes slice of rbuf) ◄── next_reply() ◄── rbuf ◄── node
//! ```
//!
//! A node reads a long write as it arrives and answers each command in
//! it as soon as it has that command whole, so the head of the FIFO may
//! be answered before its last byte has left: a transaction (MULTI, the
//! queued commands, EXEC in one request) gets its +OK and +QUEUED replies
//! while the rest is still being written. Replies are therefore paired
//! with the head once any of its bytes was written; only its final reply
//! needs all of it written (EXEC's, or a single command's: a node answers
//! nothing before it has the whole command).
//!
//! A node answers the requests of one connection in the order it received
//! them, so the head of the in-flight FIFO owns each reply that arrives:
//! no lookup, no reordering. Requests are the very `Bytes` slices the
//! sessions cut from their read buffers; the unsent tail of the FIFO is the
//! write queue, so a request is never copied nor queued twice.
//!
//! Three roles share this type: shared pipelined connections (most
//! traffic; `Role::Shared` names the connection set, so only they have
//! one), leases
//! (one blocking command at a time) and a session's subscriber connection
//! (every frame it receives belongs to that session; nothing is paired
//! with requests).
//!
//! A backend does socket work only. What a reply means (deliver, fold into
//! a merge, follow a redirect, drop an ASKING acknowledgement) is the
//! worker's decision. When a backend dies, its whole FIFO is handed back to
//! the worker, which answers every request in it with an error: nothing
//! waits forever.

pub mod auth;
pub mod connset;
mod tls;

use crate::resp::reply::{ReplyScan, ReplyScanner};
use crate::resp::Proto;
use crate::router::Redirect;
use bytes::{Bytes, BytesMut};
use mio::net::TcpStream;
use reactor::read::{read_budgeted, Growth, ReadEnd};
use reactor::writev::{IoBatch, MAX_IOV};
use reactor::Key;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

/// Read buffer growth: whenever less than 8 KiB is free, by 64 KiB or by
/// what it holds (doubling), so a large reply is read in few copies.
const GROWTH: Growth = Growth {
    min_spare: 8 * 1024,
    chunk: 64 * 1024,
    double: true,
};
/// Replies this large get a read buffer of their own, of their exact
/// size: grown by doubling, one would take up to twice its size (and the
/// copies), and the buffer it leaves would be the next replies' for as
/// long as the connection lives.
const LARGE_REPLY: usize = 1024 * 1024;

/// What the owner of a request makes of its reply: opaque to this module,
/// which only pairs replies with requests and hands each back with its tag
/// (the worker's purposes). The one thing a connection must know of it:
/// whether the request is a set-up command of the connection itself,
/// paired even on a subscriber connection, where every other frame is a
/// push.
pub trait Tag: Copy + Eq + std::fmt::Debug {
    /// A set-up command (AUTH, HELLO 3, SELECT, READONLY).
    fn is_setup(&self) -> bool;
}

/// A request on its way to a node: built by the worker when it sends the
/// request, queued in a connection's FIFO, and handed back with its reply
/// (or, when the connection dies, with an error) to be delivered, redirected
/// or sent again. The one type from dispatch to reply: a resend is the same
/// value, sent again.
pub struct InFlight<T> {
    /// The session the reply goes to (`Key::NONE` for the proxy's own
    /// commands: set-up, ASKING, reloads).
    pub session: Key,
    /// The reply's slot in that session's ring (0 for the proxy's own
    /// commands).
    pub seq: u64,
    pub req: Bytes,
    /// What the reply is for (see [`Tag`]).
    pub purpose: T,
    /// Redirects followed so far.
    pub hops: u8,
    /// TRYAGAIN waits spent so far.
    pub retries: u8,
    /// ASKING goes before it on the connection it is sent on (it follows
    /// an ASK redirect). Every resend decides it again.
    pub asking: bool,
    /// Replies this entry still expects (1 except for transactions, whose
    /// count the FIFO takes down as their replies arrive).
    pub expect: u32,
}

impl<T> InFlight<T> {
    pub fn new(session: Key, seq: u64, req: Bytes, purpose: T) -> InFlight<T> {
        InFlight {
            session,
            seq,
            req,
            purpose,
            hops: 0,
            retries: 0,
            asking: false,
            expect: 1,
        }
    }
}

/// Whose pipe a link stands for, and to which of the node's connection
/// sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub owner: u16,
    pub readonly: bool,
}

/// What a connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A pipelined connection shared by the worker's sessions: one of
    /// the connections of this connection set (an index into the
    /// worker's `ConnSets`), whose failure and backoff state it reports
    /// to.
    Shared(usize),
    /// A dedicated connection leased to one blocking command at a time.
    Lease,
    /// A session's own subscriber connection.
    Pubsub(Key),
    /// Was `Shared` in a set the current map no longer names (the node
    /// left): it takes no new request and is closed once its last reply
    /// is in.
    Retired,
    /// The reply cache's tracking connection to a master (RESP3): the
    /// invalidations of every key this worker cached from that master
    /// arrive on it as pushes.
    Tracker,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Connecting,
    Connected,
}

pub enum Read<T> {
    /// A complete reply frame for the FIFO's head.
    Reply(InFlight<T>, Bytes, u8),
    /// A reply for the FIFO's head, which expects more (a transaction).
    Intermediate(Bytes, u8),
    /// A frame not tied to a request: a RESP3 push, or anything a
    /// subscriber connection sends.
    Push(Bytes),
    /// Nothing more buffered.
    Empty,
    /// The node sent something that is not RESP, or a reply nobody asked
    /// for: the connection is no longer trustworthy.
    Broken(&'static str),
}

pub enum Io {
    Ok,
    /// More data may be waiting (read budget used up).
    Budget,
    Closed,
    Error(io::Error),
}

pub struct Backend<T> {
    pub key: Key,
    pub addr: SocketAddr,
    pub role: Role,
    pub proto: Proto,
    pub state: State,
    /// A redirect seen inside the transaction at the FIFO's head.
    pub txn_redirect: Option<Redirect>,
    /// A TRYAGAIN or CLUSTERDOWN a queued command of that transaction got
    /// (its EXEC then aborts: nothing of it ran).
    pub txn_retry: Option<Bytes>,
    /// The first other error a queued command of the transaction got (the
    /// node refused it as it was queued: NOREPLICAS, OOM, ...).
    pub txn_error: Option<Bytes>,
    /// None for a link (below): nothing to read or write.
    stream: Option<TcpStream>,
    /// With `tls-cluster yes`: the rustls connection between the FIFO and
    /// the socket (`tls.rs`).
    tls: Option<Box<rustls::ClientConnection>>,
    fd: RawFd,
    /// A link: the stand-in for a node pipe another worker owns
    /// (`backend-sharding yes`), with that worker's index. Its requests
    /// cross to the owner instead of being written, and its replies come
    /// back as frames fed into its read buffer; everything else (the
    /// FIFO, the pairing, redirects) is a connection's.
    pub link: Option<Link>,
    rbuf: BytesMut,
    scanner: ReplyScanner,
    inflight: VecDeque<InFlight<T>>,
    /// Entries at the back of `inflight` not yet fully written.
    unsent: usize,
    /// Bytes of the first unsent entry already written.
    woff: usize,
    pub dirty: bool,
    /// A readiness event said the node closed: read through to the EOF.
    pub hup: bool,
    pub since: Instant,
    /// Replies received so far.
    pub replies: u64,
    /// The sweep's view: `obs.bytes_in` when it last looked, and since when
    /// the connection has had requests waiting without a byte arriving.
    seen_bytes: u64,
    pub stalled_since: Option<Instant>,
    /// Request bytes in the FIFO (queued or awaiting their reply), for the
    /// `maxmemory` accounting (summed by the worker at each tick).
    queued_bytes: usize,
    /// Where the large reply being read ends, when `rbuf` was sized for
    /// it (see `LARGE_REPLY`); 0 otherwise. Reads stop there.
    large_end: usize,
    /// observe: bytes each way and the round-trip clock.
    pub obs: crate::stats::BackendObs,
    /// The tracker client id this connection's CLIENT TRACKING redirects
    /// to (0: tracking never asked for).
    pub tracking: u64,
    /// A lease's client id on its node, once its CLIENT ID is answered.
    pub node_id: Option<u64>,
    /// The server pool whose node this is (`crate::placement::PoolId`):
    /// its credentials, database and health.
    pub server_pool: usize,
    /// For a ring pool's server, its index in twemproxy's order: where its
    /// failures and answers are counted (`topology::health`).
    pub ring_server: Option<u16>,
    /// The database it selected (its set's, or its lease's session's).
    pub db: u32,
}

impl<T: Tag> Backend<T> {
    pub fn new(
        key: Key,
        addr: SocketAddr,
        role: Role,
        proto: Proto,
        stream: TcpStream,
        now: Instant,
    ) -> Backend<T> {
        let fd = stream.as_raw_fd();
        Backend {
            state: State::Connecting,
            stream: Some(stream),
            fd,
            link: None,
            ..Backend::unconnected(key, addr, role, proto, now)
        }
    }

    /// A link to the pipe `link.owner` keeps to `addr` (see `link`):
    /// connected from the start.
    pub fn new_link(
        key: Key,
        addr: SocketAddr,
        role: Role,
        proto: Proto,
        link: Link,
        now: Instant,
    ) -> Backend<T> {
        Backend {
            link: Some(link),
            ..Backend::unconnected(key, addr, role, proto, now)
        }
    }

    fn unconnected(
        key: Key,
        addr: SocketAddr,
        role: Role,
        proto: Proto,
        now: Instant,
    ) -> Backend<T> {
        Backend {
            key,
            addr,
            role,
            proto,
            state: State::Connected,
            txn_redirect: None,
            txn_retry: None,
            txn_error: None,
            stream: None,
            tls: None,
            fd: -1,
            link: None,
            rbuf: BytesMut::new(),
            scanner: ReplyScanner::new(),
            inflight: VecDeque::new(),
            unsent: 0,
            woff: 0,
            dirty: false,
            hup: false,
            since: now,
            replies: 0,
            seen_bytes: 0,
            stalled_since: None,
            queued_bytes: 0,
            large_end: 0,
            obs: Default::default(),
            tracking: 0,
            node_id: None,
            server_pool: 0,
            ring_server: None,
            db: 0,
        }
    }

    /// The connection set a shared connection belongs to (leases and
    /// subscriber connections belong to none).
    #[inline]
    pub fn conn_set(&self) -> Option<usize> {
        match self.role {
            Role::Shared(set) => Some(set),
            Role::Lease | Role::Pubsub(_) | Role::Retired | Role::Tracker => None,
        }
    }

    /// The socket, to (de)register (None for a link).
    pub fn stream_mut(&mut self) -> Option<&mut TcpStream> {
        self.stream.as_mut()
    }

    /// A link's unsent requests, each with the replies it expects, marked
    /// sent (they are on their way to the pipe's owner).
    pub fn take_unsent(&mut self, mut each: impl FnMut(&InFlight<T>)) {
        let start = self.inflight.len() - self.unsent;
        for f in self.inflight.range(start..) {
            self.obs.bytes_out += f.req.len() as u64; // observe
            each(f);
        }
        self.unsent = 0;
        self.woff = 0;
    }

    /// A reply frame from the pipe's owner, read as if from a socket.
    pub fn feed(&mut self, frame: &[u8]) {
        self.obs.bytes_in += frame.len() as u64; // observe
        self.rbuf.extend_from_slice(frame);
    }

    /// The head request, taken whole (the pipe failed under it).
    pub fn take_head(&mut self) -> Option<InFlight<T>> {
        let f = self.inflight.pop_front()?;
        if self.inflight.len() < self.unsent {
            self.unsent = self.inflight.len();
        }
        self.queued_bytes -= f.req.len().min(self.queued_bytes);
        Some(f)
    }

    /// Queue a request; it is written at the end of the loop turn.
    #[inline]
    pub fn enqueue(&mut self, f: InFlight<T>) {
        self.queued_bytes += f.req.len();
        self.inflight.push_back(f);
        self.unsent += 1;
    }

    /// Bytes this connection holds: the requests in its FIFO and the
    /// unparsed part of its read buffer.
    pub fn buffered(&self) -> usize {
        self.queued_bytes + self.rbuf.len()
    }

    /// observe: bytes of the requests in the FIFO (queued or awaiting
    /// their reply): twemproxy's `in_queue_bytes` plus `out_queue_bytes`.
    pub fn request_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// observe: bytes of the requests not written yet (of the first, what
    /// is left of it): twemproxy's `in_queue_bytes`. Walks the unsent
    /// tail, which is empty after every loop turn's writes unless the
    /// node stopped reading; called per tick, never per request.
    pub fn unsent_bytes(&self) -> usize {
        let start = self.inflight.len() - self.unsent;
        let whole: usize = self.inflight.range(start..).map(|f| f.req.len()).sum();
        whole.saturating_sub(if self.unsent > 0 { self.woff } else { 0 })
    }

    /// The request at the FIFO's head (the next to be answered).
    pub fn head_mut(&mut self) -> Option<&mut InFlight<T>> {
        self.inflight.front_mut()
    }

    /// The requests written and not answered yet, oldest first.
    pub fn sent(&self) -> impl Iterator<Item = &InFlight<T>> {
        self.inflight.iter().take(self.awaiting())
    }

    /// Requests queued or awaiting a reply.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Whether a request of `session` is in the FIFO (a lease carrying
    /// its holder's command).
    pub fn carries(&self, session: Key) -> bool {
        self.inflight.iter().any(|f| f.session == session)
    }

    /// Requests written and not answered yet.
    pub fn awaiting(&self) -> usize {
        self.inflight.len() - self.unsent
    }

    /// Called by the periodic sweep: how long requests have been waiting
    /// on this connection with nothing at all arriving (zero while bytes
    /// flow or nothing waits). A large reply that takes long to stream in
    /// is progress, not a stall: only a silent node is one. Costs the
    /// request path nothing beyond the byte count reads keep anyway.
    pub fn stalled_for(&mut self, now: Instant) -> std::time::Duration {
        if self.awaiting() == 0 || self.obs.bytes_in != self.seen_bytes {
            self.seen_bytes = self.obs.bytes_in;
            self.stalled_since = None;
            return std::time::Duration::ZERO;
        }
        now.saturating_duration_since(*self.stalled_since.get_or_insert(now))
    }

    pub fn has_unsent(&self) -> bool {
        self.unsent > 0
    }

    /// Check a pending non-blocking connect. Ok(true): connected.
    pub fn finish_connect(&mut self) -> io::Result<bool> {
        let Some(stream) = &self.stream else {
            return Ok(true);
        };
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
        match stream.peer_addr() {
            Ok(_) => {
                self.state = State::Connected;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Write unsent requests, up to 256 frames per `writev`, until done or
    /// the socket is full.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.tls.is_some() {
            return self.flush_tls();
        }
        while self.unsent > 0 {
            let start = self.inflight.len() - self.unsent;
            let mut batch = IoBatch::new();
            for (i, f) in self.inflight.range(start..).take(MAX_IOV).enumerate() {
                let part = if i == 0 {
                    &f.req[self.woff.min(f.req.len())..]
                } else {
                    &f.req[..]
                };
                batch.push(part);
            }
            let wanted = batch.bytes();
            if wanted == 0 {
                self.unsent = 0;
                self.woff = 0;
                break;
            }
            let written = match batch.write_to(self.fd) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            };
            self.obs.bytes_out += written as u64; // observe
            self.consume(written);
            if written < wanted {
                break;
            }
        }
        if let Role::Pubsub(_) = self.role {
            self.forget_sent_commands();
        }
        Ok(())
    }

    fn consume(&mut self, mut n: usize) {
        while self.unsent > 0 {
            let idx = self.inflight.len() - self.unsent;
            let len = self.inflight[idx].req.len();
            let left = len - self.woff.min(len);
            if n >= left {
                n -= left;
                self.woff = 0;
                self.unsent -= 1;
            } else {
                self.woff += n;
                return;
            }
        }
    }

    /// Read what the node sent, up to `budget` bytes. A short read ends it
    /// (edge-triggered: later data raises a new event) unless `to_eof`.
    pub fn read(&mut self, budget: usize, to_eof: bool) -> Io {
        // Filling a buffer sized for a large reply: up to its end, where
        // it is taken before anything more is read (reported as Budget).
        let limit = if self.large_end != 0 {
            self.large_end
        } else {
            usize::MAX
        };
        if self.tls.is_some() {
            return self.read_tls(budget, limit);
        }
        let (end, n) = read_budgeted(self.fd, &mut self.rbuf, budget, limit, to_eof, GROWTH);
        self.obs.bytes_in += n as u64; // observe
        match end {
            ReadEnd::Drained => Io::Ok,
            ReadEnd::Budget | ReadEnd::Full => Io::Budget,
            ReadEnd::Eof => Io::Closed,
            ReadEnd::Error(e) => Io::Error(e),
        }
    }

    /// The next complete frame in the read buffer, paired with the request
    /// it answers.
    pub fn next_reply(&mut self) -> Read<T> {
        match self.scanner.scan(&self.rbuf) {
            ReplyScan::Incomplete => {
                // A large reply announced by its header (the node is
                // trusted that far): room for exactly all of it.
                if let Some(need) = self.scanner.pending_hint() {
                    if need >= LARGE_REPLY && need > self.rbuf.capacity() && self.large_end == 0 {
                        let mut room = BytesMut::with_capacity(need);
                        room.extend_from_slice(&self.rbuf);
                        self.rbuf = room;
                        self.large_end = need;
                    }
                }
                Read::Empty
            }
            ReplyScan::Error(_) => Read::Broken("malformed reply"),
            ReplyScan::Complete { len, head } => {
                let frame = self.rbuf.split_to(len).freeze();
                self.large_end = 0;
                if len >= LARGE_REPLY && self.rbuf.len() <= len / 2 {
                    // The large allocation goes with the frame (freed once
                    // the client has it); what follows gets its own.
                    self.rbuf = BytesMut::from(&self.rbuf[..]);
                }
                if let Role::Pubsub(_) = self.role {
                    // Its set-up replies (HELLO 3) are paired; everything
                    // else it sends belongs to the subscriber.
                    self.forget_sent_commands();
                    let init_sent = self.head_written()
                        && self.inflight.front().is_some_and(|f| f.purpose.is_setup());
                    if init_sent {
                        if let Some(f) = self.inflight.pop_front() {
                            self.queued_bytes -= f.req.len().min(self.queued_bytes);
                            return Read::Reply(f, frame, head);
                        }
                    }
                    return Read::Push(frame);
                }
                if head == b'>' {
                    return Read::Push(frame);
                }
                // One compare on the common path: the head was written
                // whole. A head written in part may take the intermediate
                // replies of a transaction, never its final one (the rest
                // would reach the node as new commands).
                let whole = self.head_written();
                if !whole && !self.head_started() {
                    return Read::Broken("reply without a request");
                }
                match self.inflight.front_mut() {
                    Some(f) if f.expect > 1 => {
                        f.expect -= 1;
                        return Read::Intermediate(frame, head);
                    }
                    Some(_) if !whole => {
                        return Read::Broken("final reply before the end of its request")
                    }
                    Some(_) => {}
                    None => return Read::Broken("reply without a request"),
                }
                self.replies += 1;
                match self.inflight.pop_front() {
                    Some(f) => {
                        self.queued_bytes -= f.req.len().min(self.queued_bytes);
                        Read::Reply(f, frame, head)
                    }
                    None => Read::Broken("reply without a request"),
                }
            }
        }
    }

    /// Every byte of the FIFO's head was written: it may get its final
    /// reply.
    #[inline]
    fn head_written(&self) -> bool {
        self.inflight.len() > self.unsent
    }

    /// Some byte of the FIFO's head was written: it may be answered (in
    /// part, for a transaction still being written).
    #[inline]
    fn head_started(&self) -> bool {
        self.head_written() || (self.woff > 0 && !self.inflight.is_empty())
    }

    /// On a subscriber connection nothing is paired with the (P)(UN)SUBSCRIBE
    /// commands written: drop them once sent, but keep set-up commands
    /// (HELLO 3) until their reply arrives.
    fn forget_sent_commands(&mut self) {
        while self.inflight.len() > self.unsent
            && self.inflight.front().is_some_and(|f| !f.purpose.is_setup())
        {
            if let Some(f) = self.inflight.pop_front() {
                self.queued_bytes -= f.req.len().min(self.queued_bytes);
            }
        }
    }

    /// What must hold of a connection between two of the worker's steps
    /// (debug builds: the worker calls it after each flush; a failure is a
    /// bug, and panics). The walk over the FIFO runs while it holds at most
    /// `CHECK_WALK` entries.
    #[cfg(debug_assertions)]
    pub fn check_invariants(&self) {
        const CHECK_WALK: usize = 1024;
        let addr = self.addr;
        assert!(
            self.unsent <= self.inflight.len(),
            "{addr}: {} unsent of {} in flight",
            self.unsent,
            self.inflight.len()
        );
        match self.inflight.get(self.inflight.len() - self.unsent) {
            None => assert_eq!(self.woff, 0, "{addr}: write offset with nothing unsent"),
            Some(f) => assert!(
                self.woff == 0 || self.woff < f.req.len(),
                "{addr}: write offset {} into a {}-byte request",
                self.woff,
                f.req.len()
            ),
        }
        if self.state == State::Connecting {
            assert!(
                self.awaiting() == 0 && self.woff == 0,
                "{addr}: written to before it connected"
            );
        }
        if self.inflight.len() <= CHECK_WALK {
            let queued: usize = self.inflight.iter().map(|f| f.req.len()).sum();
            assert_eq!(
                self.queued_bytes, queued,
                "{addr}: request bytes counted {}, queued {queued}",
                self.queued_bytes
            );
        }
    }

    /// Take every in-flight request (the connection is being dropped),
    /// each with whether all of it reached the socket. One written in
    /// part did not run, whatever it was answered so far: a node runs a
    /// command, or a transaction's EXEC, only once it has all of it.
    /// Over TLS, nothing reached the node before the handshake ended: what
    /// rustls took until then waited in its buffer.
    pub fn drain(&mut self) -> impl Iterator<Item = (InFlight<T>, bool)> + '_ {
        let sent = if self.tls_handshaking() {
            0
        } else {
            self.inflight.len() - self.unsent
        };
        self.unsent = 0;
        self.woff = 0;
        self.queued_bytes = 0;
        self.inflight
            .drain(..)
            .enumerate()
            .map(move |(i, f)| (f, i < sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream as StdStream};

    /// What the worker's purposes are to a connection, for these tests.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Purpose {
        Client,
        Txn,
        Init,
    }

    impl Tag for Purpose {
        fn is_setup(&self) -> bool {
            *self == Purpose::Init
        }
    }

    type Backend = super::Backend<Purpose>;
    type InFlight = super::InFlight<Purpose>;
    type Read = super::Read<Purpose>;

    /// A connected backend and the node's end of its socket (which reads
    /// nothing until told to, so a long write stops part way).
    fn pair() -> (Backend, StdStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let ours = StdStream::connect(addr).unwrap();
        let (node, _) = l.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        let stream = TcpStream::from_std(ours);
        let mut b = Backend::new(
            Key::NONE,
            addr,
            Role::Shared(0),
            Proto::Resp2,
            stream,
            Instant::now(),
        );
        b.state = State::Connected;
        (b, node)
    }

    /// Reads until a frame is complete (or a second has passed).
    fn next(b: &mut Backend) -> Read {
        let end = Instant::now() + std::time::Duration::from_secs(1);
        loop {
            let r = b.next_reply();
            if !matches!(r, Read::Empty) || Instant::now() > end {
                return r;
            }
            let _ = b.read(1 << 20, false);
        }
    }

    /// A GET written whole to the node, awaiting its reply.
    fn send_get(b: &mut Backend) {
        b.enqueue(InFlight::new(
            Key::NONE,
            0,
            Bytes::from_static(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
            Purpose::Client,
        ));
        b.flush().unwrap();
    }

    #[test]
    fn an_in_flight_request_fits_a_cache_line() {
        // Every request is moved into and out of a FIFO by value.
        assert!(std::mem::size_of::<InFlight>() <= 64);
    }

    /// More than any loopback socket takes without the peer reading.
    const LONG: usize = 64 * 1024 * 1024;

    #[test]
    fn a_transaction_is_answered_in_part_while_it_is_being_written() {
        let (mut b, mut node) = pair();
        let mut f = InFlight::new(Key::NONE, 0, Bytes::from(vec![b'x'; LONG]), Purpose::Txn);
        f.expect = 3;
        b.enqueue(f);
        b.flush().unwrap();
        assert!(b.has_unsent() && b.awaiting() == 0, "written in part");
        node.write_all(b"+OK\r\n+QUEUED\r\n:1\r\n").unwrap();
        assert!(matches!(next(&mut b), Read::Intermediate(_, b'+')));
        assert!(matches!(next(&mut b), Read::Intermediate(_, b'+')));
        // The last reply (EXEC's) cannot come before the end of the write.
        assert!(matches!(next(&mut b), Read::Broken(_)));
    }

    #[test]
    fn queued_bytes_split_into_unsent_and_awaiting() {
        let (mut b, mut node) = pair();
        send_get(&mut b); // 20 bytes, written
        assert_eq!((b.unsent_bytes(), b.request_bytes()), (0, 20));
        // A long request stops part way; one behind it is not written.
        b.enqueue(InFlight::new(
            Key::NONE,
            0,
            Bytes::from(vec![b'x'; LONG]),
            Purpose::Client,
        ));
        b.enqueue(InFlight::new(
            Key::NONE,
            0,
            Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
            Purpose::Client,
        ));
        b.flush().unwrap();
        assert!(b.has_unsent());
        let unsent = b.unsent_bytes();
        assert_eq!(b.request_bytes(), 20 + LONG + 14);
        assert!(
            unsent > 14 && unsent < LONG + 14,
            "{unsent}: written in part"
        );
        // The GET's reply: only the unsent part is left.
        node.write_all(b"$-1\r\n").unwrap();
        assert!(matches!(next(&mut b), Read::Reply(..)));
        assert_eq!(b.request_bytes(), LONG + 14);
        assert_eq!(b.unsent_bytes(), unsent);
    }

    #[test]
    fn a_reply_before_any_byte_was_written_is_not_paired() {
        let (mut b, mut node) = pair();
        b.enqueue(InFlight::new(
            Key::NONE,
            0,
            Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
            Purpose::Client,
        ));
        node.write_all(b"+PONG\r\n").unwrap();
        assert!(matches!(
            next(&mut b),
            Read::Broken("reply without a request")
        ));
        // Once written, the same reply is its own.
        let (mut b, mut node) = pair();
        b.enqueue(InFlight::new(
            Key::NONE,
            0,
            Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
            Purpose::Client,
        ));
        b.flush().unwrap();
        node.write_all(b"+PONG\r\n").unwrap();
        assert!(matches!(next(&mut b), Read::Reply(_, _, b'+')));
        assert_eq!(b.in_flight(), 0);
    }

    #[test]
    fn a_large_reply_is_read_into_a_buffer_of_its_exact_size() {
        let (mut b, mut node) = pair();
        send_get(&mut b);
        let value = vec![b'v'; 3 << 20];
        let head = format!("${}\r\n", value.len());
        let need = head.len() + value.len() + 2;
        let writer = std::thread::spawn(move || {
            node.write_all(head.as_bytes()).unwrap();
            node.write_all(&value).unwrap();
            // The next reply follows at once, in the same stream.
            node.write_all(b"\r\n+PONG\r\n").unwrap();
            node
        });
        let end = Instant::now() + std::time::Duration::from_secs(5);
        let mut sized = false;
        let frame = loop {
            assert!(Instant::now() < end, "no reply");
            let _ = b.read(1 << 20, false);
            match b.next_reply() {
                Read::Reply(_, frame, b'$') => break frame,
                Read::Empty => {
                    if b.large_end != 0 {
                        assert_eq!(b.rbuf.capacity(), need, "room for exactly the reply");
                        sized = true;
                    }
                }
                _ => panic!("not the reply"),
            }
        };
        assert!(sized, "the header's length was used");
        assert_eq!(frame.len(), need);
        // Reads stopped at its end: what follows starts a buffer of its own.
        assert_eq!(b.large_end, 0);
        assert!(b.rbuf.capacity() < 1 << 20, "{}", b.rbuf.capacity());
        let _node = writer.join().unwrap();
    }

    #[test]
    fn a_large_reply_still_streaming_in_is_not_a_stall() {
        let (mut b, mut node) = pair();
        send_get(&mut b);
        let s = std::time::Duration::from_secs;
        let t0 = Instant::now();
        assert_eq!(b.stalled_for(t0), s(0));
        assert_eq!(b.stalled_for(t0 + s(6)), s(6), "a silent node stalls");
        // A part of a reply arrives: no reply is complete, but the node
        // is answering.
        node.write_all(b"$3000000\r\n").unwrap();
        node.write_all(&vec![b'v'; 1 << 20]).unwrap();
        let end = Instant::now() + s(5);
        while b.obs.bytes_in < 1 << 20 {
            assert!(Instant::now() < end, "nothing read");
            let _ = b.read(1 << 20, false);
        }
        assert!(matches!(b.next_reply(), Read::Empty));
        assert_eq!(b.stalled_for(t0 + s(12)), s(0), "bytes are progress");
        // Silent again from there: the clock starts at the first sweep
        // that sees no new byte.
        assert_eq!(b.stalled_for(t0 + s(18)), s(0));
        assert_eq!(b.stalled_for(t0 + s(24)), s(6));
    }

    #[test]
    fn a_request_written_in_part_drains_as_not_sent() {
        let (mut b, _node) = pair();
        b.enqueue(InFlight::new(
            Key::NONE,
            0,
            Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
            Purpose::Client,
        ));
        b.enqueue(InFlight::new(
            Key::NONE,
            1,
            Bytes::from(vec![b'x'; LONG]),
            Purpose::Txn,
        ));
        b.flush().unwrap();
        let sent: Vec<bool> = b.drain().map(|(_, sent)| sent).collect();
        assert_eq!(sent, [true, false]);
    }

    #[test]
    fn requests_taken_by_rustls_before_the_handshake_ended_drain_as_not_sent() {
        let (mut b, _node) = pair();
        let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("node.test").unwrap();
        b.start_tls(rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).unwrap());
        send_get(&mut b);
        // The ClientHello left; the GET waits in rustls for the node's
        // answer, which never comes.
        assert!(!b.has_unsent() && b.tls_handshaking());
        let sent: Vec<bool> = b.drain().map(|(_, sent)| sent).collect();
        assert_eq!(sent, [false]);
    }
}
