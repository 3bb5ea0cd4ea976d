//! Backends: pipelined connections from a worker to cluster nodes.
//!
//! ```text
//!   sessions ──enqueue(InFlight)──► inflight FIFO ──writev (≤256 frames)──► node
//!                                     │ sent │ unsent │
//!   sessions ◄── reply (Bytes slice of rbuf) ◄── pop_sent() ◄── rbuf ◄── node
//! ```
//!
//! A node answers the requests of one connection in the order it received
//! them, so the head of the in-flight FIFO owns each reply that arrives:
//! no lookup, no reordering. Requests are the very `Bytes` slices the
//! sessions cut from their read buffers; the unsent tail of the FIFO is the
//! write queue, so a request is never copied nor queued twice.
//!
//! A backend does socket work only. What a reply means (deliver, follow a
//! redirect, discard an ASKING acknowledgement) is the worker's decision.
//! When a backend dies, its whole FIFO is handed back to the worker, which
//! answers every request in it with an error: nothing waits forever.

pub mod pool;

use bytes::{Bytes, BytesMut};
use mio::net::TcpStream;
use reactor::writev::{read_into, IoBatch, MAX_IOV};
use reactor::Key;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use crate::resp::reply::{ReplyScan, ReplyScanner};

const READ_CHUNK: usize = 64 * 1024;
const MIN_SPARE: usize = 8 * 1024;

/// What the worker does with the reply to an in-flight request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A client's request: the reply goes to `session` at `seq`.
    Client,
    /// An ASKING sent before a redirected request; its +OK is dropped.
    Asking,
}

pub struct InFlight {
    pub session: Key,
    pub seq: u64,
    pub req: Bytes,
    pub purpose: Purpose,
    /// Redirects followed so far.
    pub hops: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Connecting,
    Connected,
}

pub enum Read {
    /// A complete reply frame for the FIFO's head.
    Reply(InFlight, Bytes, u8),
    /// Out-of-band push frame (RESP3 `>`), not tied to a request.
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

pub struct Backend {
    pub key: Key,
    pub addr: SocketAddr,
    pub pool: usize,
    pub state: State,
    stream: TcpStream,
    fd: RawFd,
    rbuf: BytesMut,
    scanner: ReplyScanner,
    inflight: VecDeque<InFlight>,
    /// Entries at the back of `inflight` not yet fully written.
    unsent: usize,
    /// Bytes of the first unsent entry already written.
    woff: usize,
    pub dirty: bool,
    pub since: Instant,
}

impl Backend {
    pub fn new(
        key: Key,
        addr: SocketAddr,
        pool: usize,
        stream: TcpStream,
        now: Instant,
    ) -> Backend {
        let fd = stream.as_raw_fd();
        Backend {
            key,
            addr,
            pool,
            state: State::Connecting,
            stream,
            fd,
            rbuf: BytesMut::new(),
            scanner: ReplyScanner::new(),
            inflight: VecDeque::new(),
            unsent: 0,
            woff: 0,
            dirty: false,
            since: now,
        }
    }

    pub fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Queue a request; it is written at the end of the loop turn.
    #[inline]
    pub fn enqueue(&mut self, f: InFlight) {
        self.inflight.push_back(f);
        self.unsent += 1;
    }

    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    pub fn has_unsent(&self) -> bool {
        self.unsent > 0
    }

    /// Check a pending non-blocking connect. Ok(true): connected.
    pub fn finish_connect(&mut self) -> io::Result<bool> {
        if let Some(e) = self.stream.take_error()? {
            return Err(e);
        }
        match self.stream.peer_addr() {
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
                // Only empty frames: nothing to send for them.
                self.unsent = 0;
                self.woff = 0;
                return Ok(());
            }
            let written = match batch.write_to(self.fd) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            };
            self.consume(written);
            if written < wanted {
                return Ok(());
            }
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

    /// Read what the node sent, up to `budget` bytes.
    pub fn read(&mut self, budget: usize) -> Io {
        let mut total = 0;
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < MIN_SPARE {
                self.rbuf.reserve(READ_CHUNK);
            }
            match read_into(self.fd, self.rbuf.spare_capacity_mut()) {
                Ok(0) => return Io::Closed,
                Ok(n) => {
                    // SAFETY: read(2) initialised exactly n bytes.
                    unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
                    total += n;
                    if total >= budget {
                        return Io::Budget;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Ok,
                Err(e) => return Io::Error(e),
            }
        }
    }

    /// The next complete reply in the read buffer, paired with the request
    /// it answers.
    pub fn next_reply(&mut self) -> Read {
        match self.scanner.scan(&self.rbuf) {
            ReplyScan::Incomplete => Read::Empty,
            ReplyScan::Error(_) => Read::Broken("malformed reply"),
            ReplyScan::Complete { len, head } => {
                let frame = self.rbuf.split_to(len).freeze();
                if head == b'>' {
                    return Read::Push(frame);
                }
                if self.inflight.len() == self.unsent {
                    return Read::Broken("reply without a request");
                }
                match self.inflight.pop_front() {
                    Some(f) => Read::Reply(f, frame, head),
                    None => Read::Broken("reply without a request"),
                }
            }
        }
    }

    /// Take every in-flight request (the connection is being dropped).
    /// Returns them with a flag: true for those that reached the socket.
    pub fn drain(&mut self) -> impl Iterator<Item = (InFlight, bool)> + '_ {
        let sent = self.inflight.len() - self.unsent;
        self.unsent = 0;
        self.woff = 0;
        self.inflight
            .drain(..)
            .enumerate()
            .map(move |(i, f)| (f, i < sent))
    }
}
