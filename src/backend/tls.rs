//! A node connection over TLS (`tls-cluster yes`): the same FIFO and read
//! buffer as a plain one, with a rustls client connection between them
//! and the socket.
//!
//! ```text
//!   inflight (unsent tail) ──plaintext──► rustls ──ciphertext──► socket   (flush_tls)
//!   socket ──ciphertext──► rustls ──plaintext──► rbuf ──► next_reply()     (read_tls)
//! ```
//!
//! A request counts as written once rustls has taken its plaintext: the
//! node cannot answer before the ciphertext that follows it has left, so
//! pairing replies with the FIFO's head (`next_reply`) needs no change.
//! The handshake starts with the first flush after the TCP connect (the
//! ClientHello rustls has ready); requests queued before it is over wait
//! in rustls's plaintext buffer (its 64 KiB limit), the rest in the FIFO,
//! and go once a read finishes the handshake ([`Backend::tls_wants_flush`]
//! tells the worker to flush then).
//!
//! Bounds: rustls holds at most its 64 KiB of ciphertext to send (the
//! FIFO is handed to it only while the ciphertext before left) and one
//! record of plaintext received beyond what `rbuf` takes. In time, the
//! handshake has `tls-handshake-timeout` from the connect's start
//! (`Timer::TlsHandshake`, armed when the connection opens): a node that
//! accepts TCP and never finishes it fails the connection like a refused
//! connect, whatever `backend-timeout` says. Until it is over nothing has
//! reached the node, however much plaintext rustls took: [`Backend::drain`]
//! hands every request back as unsent.
//!
//! Never: block, or cost a plain connection more than one test of `tls`.

use super::{Backend, Io, Role, Tag, GROWTH};
use reactor::writev::MAX_IOV;
use std::io::{self, IoSlice, Write};

/// Frames handed to rustls per call.
const FRAMES_PER_WRITE: usize = 64;

impl<T: Tag> Backend<T> {
    /// Speak TLS on this connection (before its first flush).
    pub fn start_tls(&mut self, conn: rustls::ClientConnection) {
        self.tls = Some(Box::new(conn));
    }

    /// Whether this is a TLS connection.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A TLS connection whose handshake is not over.
    pub fn tls_handshaking(&self) -> bool {
        self.tls.as_deref().is_some_and(|c| c.is_handshaking())
    }

    /// A read left something to write: handshake messages the socket did
    /// not take, or requests that waited for the handshake.
    #[inline]
    pub fn tls_wants_flush(&self) -> bool {
        self.tls
            .as_deref()
            .is_some_and(|c| c.wants_write() || (self.unsent > 0 && !c.is_handshaking()))
    }

    /// Writes the ciphertext rustls holds until all of it left (`Ok(true)`)
    /// or the socket would block.
    fn send_ciphertext(&mut self) -> io::Result<bool> {
        let (Some(conn), Some(stream)) = (self.tls.as_deref_mut(), self.stream.as_ref()) else {
            return Ok(true);
        };
        crate::tls::send_ciphertext(conn, &mut &*stream).map(|(all, _)| all)
    }

    /// `flush` for a TLS connection: the ciphertext waiting first, then the
    /// unsent requests encrypted while rustls takes them.
    #[cold]
    #[inline(never)]
    pub(super) fn flush_tls(&mut self) -> io::Result<()> {
        loop {
            if !self.send_ciphertext()? {
                break;
            }
            if self.unsent == 0 {
                break;
            }
            let Some(conn) = self.tls.as_deref_mut() else {
                break;
            };
            let start = self.inflight.len() - self.unsent;
            let mut iov = [IoSlice::new(&[]); FRAMES_PER_WRITE];
            let mut n = 0;
            let mut wanted = 0;
            for (i, f) in self
                .inflight
                .range(start..)
                .take(FRAMES_PER_WRITE.min(MAX_IOV))
                .enumerate()
            {
                let part = if i == 0 {
                    &f.req[self.woff.min(f.req.len())..]
                } else {
                    &f.req[..]
                };
                wanted += part.len();
                iov[i] = IoSlice::new(part);
                n = i + 1;
            }
            if wanted == 0 {
                self.unsent = 0;
                self.woff = 0;
                break;
            }
            let taken = conn.writer().write_vectored(&iov[..n])?;
            if taken == 0 {
                // rustls's buffer is full (requests queued during the
                // handshake): the rest goes once a read ends it.
                break;
            }
            self.obs.bytes_out += taken as u64; // observe (plaintext)
            self.consume(taken);
        }
        if let Role::Pubsub(_) = self.role {
            self.forget_sent_commands();
        }
        Ok(())
    }

    /// `read` for a TLS connection: ciphertext until the socket would
    /// block or `budget` bytes of it were read, each record's plaintext
    /// moved into `rbuf` (never past `limit`, a large reply's end).
    #[cold]
    #[inline(never)]
    pub(super) fn read_tls(&mut self, budget: usize, limit: usize) -> Io {
        let mut total = 0;
        let mut eof = false;
        loop {
            match self.take_plaintext(limit) {
                Ok(true) if eof && self.rbuf.len() < limit => return Io::Closed,
                Ok(true) => {}
                Ok(false) => return Io::Closed,
                Err(e) => return Io::Error(e),
            }
            if self.rbuf.len() >= limit || total >= budget {
                return Io::Budget;
            }
            let (Some(conn), Some(stream)) = (self.tls.as_deref_mut(), self.stream.as_ref()) else {
                return Io::Ok;
            };
            match conn.read_tls(&mut &*stream) {
                // The node's TCP EOF: what rustls holds is taken by the
                // next pass, which then reports the end.
                Ok(0) => eof = true,
                Ok(n) => {
                    total += n;
                    self.obs.bytes_in += n as u64; // observe (ciphertext)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Ok,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Io::Error(e),
            }
            if let Err(e) = conn.process_new_packets() {
                // The alert rustls queued goes out if the socket takes it.
                let _ = conn.write_tls(&mut &*stream);
                return Io::Error(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("TLS: {e}"),
                ));
            }
            if let Err(e) = self.send_ciphertext() {
                return Io::Error(e);
            }
        }
    }

    /// Moves the plaintext rustls holds into `rbuf`, up to `limit` bytes
    /// in all. `Ok(false)` once the node closed (close_notify or TCP EOF)
    /// and nothing is left.
    fn take_plaintext(&mut self, limit: usize) -> io::Result<bool> {
        let Some(conn) = self.tls.as_deref_mut() else {
            return Ok(true);
        };
        crate::tls::take_plaintext(conn.reader(), &mut self.rbuf, limit, GROWTH.chunk)
    }
}
