//! A session over TLS: the same read buffer and write queue as a plain
//! one, with rustls between them and the socket.
//!
//! ```text
//!   socket ──ciphertext──► rustls ──plaintext──► rbuf   (read_tls)
//!   out (write queue) ──plaintext──► rustls ──ciphertext──► socket   (flush_tls)
//! ```
//!
//! rustls works on byte buffers and never touches the socket itself: the
//! session hands it what the (non-blocking) socket had, and writes what
//! it has ready until the socket would block. Handshake messages, alerts
//! and tickets leave as soon as they exist, from the read that caused
//! them; what the socket does not take waits in rustls for writability.
//!
//! Bounds: rustls holds at most 16 KiB of received plaintext (moved into
//! `rbuf`, under `query-buffer-limit`, after every record) and one
//! handshake message (its own limit); the ciphertext it holds for
//! sending is at most its 64 KiB buffer limit, since replies are handed
//! to it only while it has room and only after the ciphertext before
//! them left; the rest stays in the write queue, where the output limits
//! count it. A handshake is bounded in time by `tls-handshake-timeout`
//! (`worker/tls.rs`).
//!
//! Never: block, or let a plain session pay more than one test of `tls`.

use super::{FlushOutcome, ReadOutcome, Session, GROWTH};
use crate::shared::Shared;
use crate::stats::WorkerStats;
use reactor::writev::MAX_IOV;
use std::io::{self, IoSlice, Write};
use std::sync::Arc;

/// A TLS session's state: the rustls connection, and with
/// `tls-auth-clients-user CN` what looks its user up once the handshake
/// is over (taken then).
pub(super) struct TlsState {
    pub(super) conn: rustls::ServerConnection,
    pub(super) by_cn: Option<Arc<Shared>>,
}

/// Frames handed to rustls per call (their plaintext becomes records of
/// up to 16 KiB each).
const FRAMES_PER_WRITE: usize = 64;

impl Session {
    /// The TLS connection, when the session is one.
    #[inline]
    pub fn tls(&self) -> Option<&rustls::ServerConnection> {
        self.tls.as_deref().map(|t| &t.conn)
    }

    /// The handshake is still under way.
    pub fn tls_handshaking(&self) -> bool {
        self.tls
            .as_deref()
            .map(|t| &t.conn)
            .is_some_and(|t| t.is_handshaking())
    }

    /// Nothing encrypted waits in rustls for the socket.
    #[inline]
    pub(super) fn tls_sent(&self) -> bool {
        self.tls
            .as_deref()
            .map(|t| &t.conn)
            .map_or(true, |t| !t.wants_write())
    }

    /// `Session::read` for a TLS session: ciphertext until the socket
    /// would block (or `budget` bytes of it), each record's plaintext
    /// moved into `rbuf` (never past `limit`).
    #[cold]
    #[inline(never)]
    pub(super) fn read_tls(&mut self, budget: usize, limit: usize) -> ReadOutcome {
        let mut total = 0;
        loop {
            match self.take_plaintext(limit) {
                Ok(true) => {}
                Ok(false) => {
                    self.eof = true;
                    return ReadOutcome::Eof;
                }
                Err(e) => return ReadOutcome::Error(e),
            }
            if self.rbuf.len() >= limit {
                return ReadOutcome::Overflow;
            }
            if total >= budget {
                return ReadOutcome::Budget;
            }
            let Some(conn) = self.tls.as_deref_mut().map(|t| &mut t.conn) else {
                return ReadOutcome::Drained;
            };
            match conn.read_tls(&mut &self.stream) {
                // The peer's TCP EOF: what rustls holds is taken by the
                // next pass, which then reports the end.
                Ok(0) => {}
                Ok(n) => {
                    total += n;
                    self.net_in += n as u64; // observe (ciphertext)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Drained,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return ReadOutcome::Error(e),
            }
            if let Err(e) = conn.process_new_packets() {
                // The alert rustls queued goes out if the socket takes it.
                let _ = conn.write_tls(&mut &self.stream);
                return ReadOutcome::Error(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // Handshake messages, tickets, alerts: out now.
            if let Err(e) = self.send_ciphertext() {
                return ReadOutcome::Error(e);
            }
            if self.tls.as_ref().is_some_and(|t| t.by_cn.is_some()) && !self.tls_handshaking() {
                self.log_in_by_cn();
            }
        }
    }

    /// `tls-auth-clients-user CN`, once the handshake is over (before any
    /// request is scanned): the user the client certificate's common name
    /// names, if it exists and is on, as if it had sent AUTH; else the
    /// session stays as it started (the `default` user, and AUTH applies).
    #[cold]
    fn log_in_by_cn(&mut self) {
        let Some(t) = self.tls.as_deref_mut() else {
            return;
        };
        let Some(shared) = t.by_cn.take() else {
            return;
        };
        let cn = t
            .conn
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| crate::tls::common_name(leaf));
        let Some(cn) = cn else {
            return;
        };
        match shared.admin.acl.user(cn.as_bytes()) {
            Some(u) if u.enabled => {
                log::debug!(target: "mithril::session", "client {}: logged in as {cn} by its certificate", self.id);
                self.log_in(u);
            }
            _ => {
                log::debug!(target: "mithril::session", "client {}: its certificate names '{cn}', no user that is on", self.id);
            }
        }
    }

    /// Moves the plaintext rustls holds into `rbuf`, up to `limit` bytes
    /// in all. `Ok(false)` once the client closed its side (close_notify,
    /// or a TCP EOF) and nothing is left.
    fn take_plaintext(&mut self, limit: usize) -> io::Result<bool> {
        let Some(conn) = self.tls.as_deref_mut().map(|t| &mut t.conn) else {
            return Ok(true);
        };
        crate::tls::take_plaintext(conn.reader(), &mut self.rbuf, limit, GROWTH.chunk)
    }

    /// Writes the ciphertext rustls holds until it is all sent or the
    /// socket would block (`Ok(false)`).
    fn send_ciphertext(&mut self) -> io::Result<bool> {
        let Some(conn) = self.tls.as_deref_mut().map(|t| &mut t.conn) else {
            return Ok(true);
        };
        let (all, wrote) = crate::tls::send_ciphertext(conn, &mut &self.stream)?;
        self.pressure.wrote |= wrote;
        Ok(all)
    }

    /// `Session::flush` for a TLS session: the ciphertext rustls holds
    /// first, then the write queue's frames encrypted while rustls has
    /// room, until everything left or the socket would block.
    #[cold]
    #[inline(never)]
    pub(super) fn flush_tls(&mut self, stats: &mut WorkerStats) -> FlushOutcome {
        self.collect(stats);
        loop {
            match self.send_ciphertext() {
                Ok(true) => {}
                Ok(false) => return FlushOutcome::Blocked,
                Err(e) => return FlushOutcome::Error(e),
            }
            let Some(conn) = self.tls.as_deref_mut().map(|t| &mut t.conn) else {
                return FlushOutcome::Done;
            };
            // Before the handshake is over nothing may be sent (and no
            // request can have been answered).
            if self.out.is_empty() || conn.is_handshaking() {
                break;
            }
            let mut iov = [IoSlice::new(&[]); FRAMES_PER_WRITE];
            let mut n = 0;
            for (i, reply) in self
                .out
                .iter()
                .take(FRAMES_PER_WRITE.min(MAX_IOV))
                .enumerate()
            {
                iov[i] = IoSlice::new(if i == 0 {
                    &reply[self.out_off.min(reply.len())..]
                } else {
                    &reply[..]
                });
                n = i + 1;
            }
            let taken = match conn.writer().write_vectored(&iov[..n]) {
                Ok(taken) => taken,
                Err(e) => return FlushOutcome::Error(e),
            };
            if taken == 0 {
                if iov[..n].iter().all(|s| s.is_empty()) {
                    self.out.clear();
                    self.out_off = 0;
                    self.out_bytes = 0;
                    break;
                }
                // rustls had room (all its ciphertext left) and took
                // nothing: never loop on it.
                return FlushOutcome::Error(io::Error::other("TLS writer took no plaintext"));
            }
            self.net_out += taken as u64; // observe (plaintext)
            self.consume(taken);
        }
        self.hit_arena.reclaim();
        FlushOutcome::Done
    }

    /// Before closing: a close_notify, if the socket takes it.
    pub fn tls_close_notify(&mut self) {
        if let Some(conn) = self.tls.as_deref_mut().map(|t| &mut t.conn) {
            conn.send_close_notify();
            let _ = self.send_ciphertext();
        }
    }
}
