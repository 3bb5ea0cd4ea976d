//! A replication link over TLS (`tls-cluster yes`): the handshake bytes go
//! through rustls on their way out, the master's stream through it on its
//! way into the link's buffer. Same bounds as the plain link: what the
//! buffer may hold (`hold`) caps what is taken from rustls, which holds a
//! record more at most. In time, the handshake has `tls-handshake-timeout`
//! from the link's connect (checked by `feeds_tick`), however the master
//! trickles it.

use super::Link;
use reactor::read::ReadEnd;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// Bytes of ciphertext read per pass before the plaintext is taken.
const CHUNK: usize = 64 * 1024;

impl Link {
    /// Why the feed must end, if the link's TLS handshake is not over
    /// `limit` after its connect started. Timed from the connect, not from
    /// the last bytes (`heard`): a master that trickles its handshake out
    /// would otherwise keep it going.
    pub(super) fn handshake_overdue(&self, now: Instant, limit: Duration) -> Option<String> {
        let late = self.tls.as_deref().is_some_and(|c| c.is_handshaking())
            && now.saturating_duration_since(self.opened) > limit;
        late.then(|| {
            format!(
                "the TLS handshake with {} did not finish in time",
                self.addr
            )
        })
    }

    /// Whether the link has something to write: handshake bytes, or
    /// ciphertext rustls holds (its ClientHello first of all).
    pub(super) fn wants_write(&self) -> bool {
        !self.out.is_empty() || self.tls.as_deref().is_some_and(|c| c.wants_write())
    }
}

/// `link_write` for a TLS link: the handshake bytes handed to rustls, its
/// ciphertext written as far as the socket takes it.
pub(super) fn write(l: &mut Link) -> io::Result<()> {
    let Some(conn) = l.tls.as_deref_mut() else {
        return Ok(());
    };
    if !l.out.is_empty() {
        let n = conn.writer().write(&l.out)?;
        l.out.drain(..n);
    }
    crate::tls::send_ciphertext(conn, &mut &l.stream).map(|_| ())
}

/// `read_budgeted` for a TLS link: ciphertext until the socket would block
/// or `budget` bytes of it were read, its plaintext into `rbuf` up to
/// `limit`. The byte count is of ciphertext (what says the master is
/// alive).
pub(super) fn read(l: &mut Link, budget: usize, limit: usize) -> (ReadEnd, usize) {
    let mut total = 0;
    let mut eof = false;
    loop {
        let Some(conn) = l.tls.as_deref_mut() else {
            return (ReadEnd::Drained, total);
        };
        match crate::tls::take_plaintext(conn.reader(), &mut l.rbuf, limit, CHUNK) {
            Ok(true) if l.rbuf.len() >= limit => return (ReadEnd::Full, total),
            Ok(true) if eof => return (ReadEnd::Eof, total),
            Ok(true) => {}
            Ok(false) => return (ReadEnd::Eof, total),
            Err(e) => return (ReadEnd::Error(e), total),
        }
        if total >= budget {
            return (ReadEnd::Budget, total);
        }
        match conn.read_tls(&mut &l.stream) {
            Ok(0) => eof = true,
            Ok(n) => total += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (ReadEnd::Drained, total),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return (ReadEnd::Error(e), total),
        }
        if let Err(e) = conn.process_new_packets() {
            let _ = conn.write_tls(&mut &l.stream);
            let e = io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"));
            return (ReadEnd::Error(e), total);
        }
        if let Err(e) = crate::tls::send_ciphertext(conn, &mut &l.stream) {
            return (ReadEnd::Error(e), total);
        }
    }
}
