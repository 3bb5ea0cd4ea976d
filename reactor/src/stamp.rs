//! Arrival stamps: when the kernel received a socket's bytes.
//!
//! Two threads that each read their own sockets cannot tell from their own
//! reading which of two bytes arrived first: the thread woken first may be
//! scheduled last. The kernel knows: with `SO_TIMESTAMPNS` on a socket,
//! every segment it receives is stamped (CLOCK_REALTIME, ns), and a
//! `recvmsg` hands back the stamp of the last segment it read. [`now_ns`]
//! reads the same clock, so a loop can say "everything that arrived
//! before this instant has been read" and compare it with stamps.
//!
//! Where the option is not known (other systems, or a kernel refusing it)
//! [`enable`] fails, reads get no stamp (0) and callers use the time of
//! their read instead.
//! Never: allocate (the control buffer is on the stack) or panic.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;

/// SO_TIMESTAMPNS (its old, 64-bit-`time_t` form on the common Linux
/// ABIs; SCM_TIMESTAMPNS is the same number).
#[cfg(all(
    target_os = "linux",
    not(any(target_arch = "mips", target_arch = "mips64", target_arch = "sparc64"))
))]
const SO_TIMESTAMPNS: libc::c_int = 35;

/// Ask the kernel to stamp what `fd` receives.
pub fn enable(fd: RawFd) -> io::Result<()> {
    #[cfg(all(
        target_os = "linux",
        not(any(target_arch = "mips", target_arch = "mips64", target_arch = "sparc64"))
    ))]
    {
        let on: libc::c_int = 1;
        // SAFETY: a valid pointer to an int of the size given.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_TIMESTAMPNS,
                &on as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(());
        }
        Err(io::Error::last_os_error())
    }
    #[cfg(not(all(
        target_os = "linux",
        not(any(target_arch = "mips", target_arch = "mips64", target_arch = "sparc64"))
    )))]
    {
        let _ = fd;
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// CLOCK_REALTIME in ns: the stamps' clock.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Wait (at most `within`) until the kernel stamps what sockets receive.
/// Turning stamps on is deferred by Linux to a work queue the first time
/// any socket asks: the bytes received meanwhile carry none. A loopback
/// pair is stamped and read until a stamp comes. Returns whether one did.
pub fn wait_effective(within: std::time::Duration) -> bool {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let deadline = std::time::Instant::now() + within;
    let Ok(l) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return false;
    };
    let Ok(addr) = l.local_addr() else {
        return false;
    };
    let Ok(mut a) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let Ok((b, _)) = l.accept() else {
        return false;
    };
    if enable(b.as_raw_fd()).is_err() {
        return false;
    }
    let mut buf = [MaybeUninit::new(0u8); 8];
    loop {
        if a.write_all(b"x").is_err() {
            return false;
        }
        let mut stamp = 0;
        if recv_stamped(b.as_raw_fd(), &mut buf, &mut stamp).is_err() {
            return false;
        }
        if stamp != 0 {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Control buffer room: one cmsg carrying a timespec, 8-byte aligned.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// `read(2)` of `fd` into `dst` that also gives the arrival stamp of the
/// last byte read (in `stamp`, unchanged when the kernel gave none).
pub fn recv_stamped(fd: RawFd, dst: &mut [MaybeUninit<u8>], stamp: &mut u64) -> io::Result<usize> {
    if dst.is_empty() {
        return Ok(0);
    }
    let mut control = Control([0; 64]);
    loop {
        let mut iov = libc::iovec {
            iov_base: dst.as_mut_ptr() as *mut libc::c_void,
            iov_len: dst.len(),
        };
        // SAFETY: msghdr is plain data; zeroed is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.0.len() as _;
        // SAFETY: `iov` points at `dst`, valid for writes of its length;
        // the control buffer is ours and its length given.
        let r = unsafe { libc::recvmsg(fd, &mut msg, 0) };
        if r >= 0 {
            // SAFETY: the kernel filled `msg`'s control part; the CMSG
            // macros walk only within msg_controllen.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    #[cfg(all(
                        target_os = "linux",
                        not(any(
                            target_arch = "mips",
                            target_arch = "mips64",
                            target_arch = "sparc64"
                        ))
                    ))]
                    if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                        let ts =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                        *stamp = (ts.tv_sec as u64)
                            .saturating_mul(1_000_000_000)
                            .saturating_add(ts.tv_nsec as u64);
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_tcp_read_carries_the_kernels_stamp() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        // Accepted sockets inherit it; and Linux turns stamps on a moment
        // after the first socket asks.
        enable(l.as_raw_fd()).unwrap();
        assert!(wait_effective(std::time::Duration::from_secs(5)));
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        enable(b.as_raw_fd()).unwrap();
        let before = now_ns();
        a.write_all(b"hello").unwrap();
        let after = now_ns();
        let mut buf = [MaybeUninit::new(0u8); 16];
        let mut stamp = 0;
        let n = recv_stamped(b.as_raw_fd(), &mut buf, &mut stamp).unwrap();
        assert_eq!(n, 5);
        assert!(
            stamp >= before && stamp <= after,
            "{before} <= {stamp} <= {after}"
        );
    }
}
