//! The budgeted read every socket of a loop does on readiness.
//!
//! The loop is edge-triggered, so a readable socket must be read until
//! the kernel has nothing more, or the next edge never comes. Two rules
//! bound that and save a system call:
//!
//! - **Budget.** At most `budget` bytes per readiness event: one busy peer
//!   cannot starve the others. A read that stops on its budget reports
//!   [`ReadEnd::Budget`]; the caller puts the socket on its ready list and
//!   reads it again later in the turn (the kernel will not signal again).
//! - **Short read.** A read that returned less than the room offered has
//!   emptied the socket's queue at that moment: the socket counts as
//!   drained without a further `read` that would only say `EAGAIN`. Data
//!   arriving after it raises a new edge. Not so when the peer closed
//!   (`to_eof`, a HUP hint): then the reads go on to the EOF.
//!
//! The buffer grows by the caller's [`Growth`] before a read whenever its
//! spare room falls below `min_spare` and it is below `limit`; a read
//! never takes more than the budget left, nor past `limit` bytes in all
//! (a session's query-buffer-limit; the end of a large reply's own
//! buffer).
//! Never: allocate when the spare room suffices, or panic.

use crate::writev::read_into;
use bytes::BytesMut;
use std::io;
use std::os::fd::RawFd;

/// How a read buffer grows.
#[derive(Clone, Copy, Debug)]
pub struct Growth {
    /// Grow when less than this is free.
    pub min_spare: usize,
    /// Grow by at least this much.
    pub chunk: usize,
    /// Grow by the bytes already held when that is more (doubling).
    pub double: bool,
}

/// Why a budgeted read stopped.
#[derive(Debug)]
pub enum ReadEnd {
    /// The socket has nothing more for now.
    Drained,
    /// The budget ran out with data possibly left in the socket.
    Budget,
    /// The peer closed its side.
    Eof,
    /// The buffer holds `limit` bytes.
    Full,
    Error(io::Error),
}

/// Read from `fd` into `buf` under the rules above. Returns why it
/// stopped and how many bytes it read.
#[inline(always)]
pub fn read_budgeted(
    fd: RawFd,
    buf: &mut BytesMut,
    budget: usize,
    limit: usize,
    to_eof: bool,
    growth: Growth,
) -> (ReadEnd, usize) {
    read_budgeted_stamped(fd, buf, budget, limit, to_eof, growth, None)
}

/// [`read_budgeted`] that also keeps, in `stamp`, the kernel's arrival
/// stamp of the last bytes read (`crate::stamp`; a socket without stamps
/// leaves it as it was).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn read_budgeted_stamped(
    fd: RawFd,
    buf: &mut BytesMut,
    budget: usize,
    limit: usize,
    to_eof: bool,
    growth: Growth,
    mut stamp: Option<&mut u64>,
) -> (ReadEnd, usize) {
    let mut total = 0;
    loop {
        if buf.len() >= limit {
            return (ReadEnd::Full, total);
        }
        // Grow only while below the limit: a buffer sized for what it must
        // hold (a large reply) is filled, not grown.
        if buf.capacity() - buf.len() < growth.min_spare && buf.capacity() < limit {
            let more = if growth.double {
                growth.chunk.max(buf.len())
            } else {
                growth.chunk
            };
            buf.reserve(more);
        }
        // Never more than the budget left: a buffer grown large would let
        // one read take megabytes, whose scan and dispatch would keep the
        // loop from everyone else.
        let room = (buf.capacity() - buf.len())
            .min(limit - buf.len())
            .min(budget - total);
        let spare = &mut buf.spare_capacity_mut()[..room];
        let got = match stamp.as_deref_mut() {
            Some(stamp) => crate::stamp::recv_stamped(fd, spare, stamp),
            None => read_into(fd, spare),
        };
        match got {
            Ok(0) => return (ReadEnd::Eof, total),
            Ok(n) => {
                // SAFETY: read(2) initialised exactly n bytes of the spare
                // capacity, and n <= room <= the spare capacity's length.
                unsafe { buf.set_len(buf.len() + n) };
                total += n;
                if total >= budget {
                    return (ReadEnd::Budget, total);
                }
                if n < room && !to_eof {
                    return (ReadEnd::Drained, total);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (ReadEnd::Drained, total),
            Err(e) => return (ReadEnd::Error(e), total),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    const GROW: Growth = Growth {
        min_spare: 16,
        chunk: 64,
        double: false,
    };

    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    #[test]
    fn a_short_read_counts_as_drained() {
        let (mut a, b) = pair();
        a.write_all(b"hello").unwrap();
        let mut buf = BytesMut::new();
        let (end, n) = read_budgeted(b.as_raw_fd(), &mut buf, 1 << 20, usize::MAX, false, GROW);
        assert!(matches!(end, ReadEnd::Drained), "{end:?}");
        assert_eq!((n, &buf[..]), (5, &b"hello"[..]));
    }

    #[test]
    fn the_budget_and_the_limit_stop_a_read() {
        let (mut a, b) = pair();
        a.write_all(&[7u8; 1000]).unwrap();
        let mut buf = BytesMut::new();
        let (end, n) = read_budgeted(b.as_raw_fd(), &mut buf, 100, usize::MAX, false, GROW);
        assert!(matches!(end, ReadEnd::Budget), "{end:?}");
        assert!((100..1000).contains(&n), "{n}");
        let mut buf = BytesMut::new();
        let (end, n) = read_budgeted(b.as_raw_fd(), &mut buf, 1 << 20, 50, false, GROW);
        assert!(matches!(end, ReadEnd::Full), "{end:?}");
        assert_eq!((n, buf.len()), (50, 50));
    }

    #[test]
    fn a_closed_peer_is_read_to_its_eof() {
        let (mut a, b) = pair();
        a.write_all(b"bye").unwrap();
        drop(a);
        let mut buf = BytesMut::new();
        let (end, n) = read_budgeted(b.as_raw_fd(), &mut buf, 1 << 20, usize::MAX, true, GROW);
        assert!(matches!(end, ReadEnd::Eof), "{end:?}");
        assert_eq!(n, 3);
    }
}
