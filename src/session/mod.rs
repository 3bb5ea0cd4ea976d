//! Sessions: the client side of the proxy.
//!
//! ```text
//!   client ──► rbuf (BytesMut) ──scan──► request frame (Bytes slice of rbuf)
//!                                            │ dispatch (worker)
//!                                            ▼
//!        ring slot reserved at seq N ◄── local answer / backend reply
//!                                            │
//!   client ◄── one writev per turn of the ready front of the ring
//! ```
//!
//! A session owns its socket, its read buffer, its request scanner and its
//! reply ring. It does socket work only (read into the buffer, write the
//! ring's ready front); deciding what a request means is the worker's job.
//! Requests leave as zero-copy slices of `rbuf`; replies arrive as slices of
//! a backend's buffer or as locally built frames.
//!
//! Invariants: replies leave in request order (the ring); the read buffer
//! never grows past `query-buffer-limit`; a session never touches another
//! session or a backend.

pub mod ring;

use crate::resp::encode::Proto;
use crate::resp::request::RequestScanner;
use crate::shared::Ticket;
use bytes::BytesMut;
use mio::net::TcpStream;
use reactor::writev::{read_into, IoBatch, MAX_IOV};
use reactor::Key;
use ring::ReplyRing;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

/// Read buffer growth step, and the least spare room before a read.
const READ_CHUNK: usize = 16 * 1024;
const MIN_SPARE: usize = 4 * 1024;

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

pub enum FlushOutcome {
    /// Everything ready was written (the front may still be pending).
    Done,
    /// The socket is full; wait for writability.
    Blocked,
    Error(io::Error),
}

pub struct Session {
    pub key: Key,
    pub id: u64,
    pub stream: TcpStream,
    fd: RawFd,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    pub rbuf: BytesMut,
    pub scanner: RequestScanner,
    pub ring: ReplyRing,
    /// Bytes of the ring's front reply already written.
    out_off: usize,
    /// Queued on the worker's flush list this turn.
    pub dirty: bool,
    /// The client half-closed (EOF): no more reads.
    pub eof: bool,
    /// Close once every queued reply is written (QUIT, protocol error).
    pub close_after_flush: bool,
    /// Dispatch stopped because the ring is full; resume when it drains.
    pub paused: bool,
    /// Picks this session's connection among a node's `backend-conns`.
    pub sticky: usize,
    pub proto: Proto,
    pub name: Option<Vec<u8>>,
    pub created: Instant,
    pub last_active: Instant,
    _ticket: Ticket,
    /// May run commands: true from the start when no `requirepass` is
    /// configured, else once AUTH / HELLO AUTH succeeded (RESET clears it).
    pub authenticated: bool,
    /// CLIENT SETINFO LIB-NAME / LIB-VER, shown by CLIENT INFO.
    pub lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    /// Full name of the last command that passed the auth gate (`cmd=` of
    /// CLIENT INFO); "NULL" before the first.
    pub last_cmd: &'static str,
}

impl Session {
    pub fn new(
        key: Key,
        id: u64,
        stream: TcpStream,
        peer: SocketAddr,
        ticket: Ticket,
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
            // Allocated on first read, so an idle connection costs little.
            rbuf: BytesMut::new(),
            scanner: RequestScanner::new(),
            ring: ReplyRing::new(),
            out_off: 0,
            dirty: false,
            eof: false,
            close_after_flush: false,
            paused: false,
            sticky: key.index as usize,
            proto: Proto::Resp2,
            name: None,
            created: now,
            last_active: now,
            _ticket: ticket,
            authenticated: !crate::admin::password_required(),
            lib_name: None,
            lib_ver: None,
            last_cmd: "NULL",
        }
    }

    /// Read what the socket has, up to `budget` bytes this call, never
    /// letting the buffer pass `limit` bytes.
    pub fn read(&mut self, budget: usize, limit: usize) -> ReadOutcome {
        let mut total = 0;
        loop {
            if self.rbuf.len() >= limit {
                return ReadOutcome::Overflow;
            }
            if self.rbuf.capacity() - self.rbuf.len() < MIN_SPARE {
                self.rbuf.reserve(READ_CHUNK);
            }
            let room = (self.rbuf.capacity() - self.rbuf.len()).min(limit - self.rbuf.len());
            let spare = &mut self.rbuf.spare_capacity_mut()[..room];
            match read_into(self.fd, spare) {
                Ok(0) => {
                    self.eof = true;
                    return ReadOutcome::Eof;
                }
                Ok(n) => {
                    // SAFETY: read(2) initialised exactly n bytes of the
                    // spare capacity.
                    unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
                    total += n;
                    if total >= budget {
                        return ReadOutcome::Budget;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Drained,
                Err(e) => return ReadOutcome::Error(e),
            }
        }
    }

    /// Write the ready front of the ring: one `writev` of up to 256 replies
    /// at a time, until the front is pending or the socket is full.
    pub fn flush(&mut self) -> FlushOutcome {
        loop {
            let mut batch = IoBatch::new();
            let mut first = true;
            for reply in self.ring.ready_front().take(MAX_IOV) {
                let part = if first {
                    &reply[self.out_off.min(reply.len())..]
                } else {
                    &reply[..]
                };
                first = false;
                batch.push(part);
            }
            if batch.is_empty() {
                // Only empty replies (or none) at the front.
                while self.ring.front_len() == Some(0) {
                    self.ring.pop_front();
                }
                if !self.ring.front_ready() {
                    return FlushOutcome::Done;
                }
                continue;
            }
            let wanted = batch.bytes();
            let written = match batch.write_to(self.fd) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return FlushOutcome::Blocked,
                Err(e) => return FlushOutcome::Error(e),
            };
            self.consume(written);
            if written < wanted {
                return FlushOutcome::Blocked;
            }
        }
    }

    fn consume(&mut self, mut n: usize) {
        while let Some(len) = self.ring.front_len() {
            let left = len - self.out_off.min(len);
            if n >= left {
                n -= left;
                self.out_off = 0;
                self.ring.pop_front();
            } else {
                self.out_off += n;
                return;
            }
        }
    }

    /// True when the session has nothing more to do and may be closed:
    /// the client is gone (or asked to go) and every reply was written.
    pub fn finished(&self) -> bool {
        (self.eof || self.close_after_flush) && self.ring.is_empty()
    }

    /// Bytes buffered for this session (input plus unsent output).
    pub fn buffered(&self) -> usize {
        self.rbuf.len() + self.ring.ready_front().map(|b| b.len()).sum::<usize>()
    }
}
