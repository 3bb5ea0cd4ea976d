//! Upgrades without dropping a client: a new mithril process takes the
//! listening sockets of the running one, and the old one drains.
//!
//! ```text
//!  old (running, upgrade-socket S)            new (mithril --upgrade, same S)
//!   serve(S): accept ◄──── connect ─────────── take_over(S)
//!             read "MITHRIL-UPGRADE 1" ◄────── hello
//!             sendmsg(SCM_RIGHTS: every ──────► listeners kept by address
//!               listening socket)              bind what the file has more,
//!                                              start, serve (both accept now)
//!             read "READY" ◄────────────────── finish()
//!   handed_over(): stop accepting, release
//!   the pidfile, drain the clients it has
//!             write "DONE" ────────────────────► take the pidfile, MAINPID,
//!                                              listen on S itself
//! ```
//!
//! A listening socket is one kernel object: both processes hold it while
//! the new one starts, and a connection waiting in its queue is taken by
//! whichever accepts first, so none is refused at any moment. The old
//! process keeps serving the clients it has until each leaves or
//! `shutdown-timeout` passes, then drains as on SIGTERM.
//!
//! Descriptors cross with `sendmsg`/`recvmsg` and `SCM_RIGHTS`, written
//! here against `libc` (std's ancillary-data API is not stable; the
//! dependency a crate would add is larger than the two calls).
//!
//! Owns: the record of this process's listening sockets ([`listen`]), the
//! ones inherited from the old process, and the upgrade socket's thread.
//! Never: hand over anything but listening sockets, or let a failed new
//! process stop the old one (the old serves on until a new one says
//! READY).

use std::io::{self, BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

const HELLO: &str = "MITHRIL-UPGRADE 1";
/// Most listening sockets handed over (one message; Linux takes 253).
const MAX_FDS: usize = 250;
/// How long the new process may take from the hand-over to READY (its
/// first topology, its threads).
const READY_WAIT: Duration = Duration::from_secs(60);
/// How long each side waits for the other's short answers.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// This process's listening sockets: (address, descriptor), as opened.
static OPEN: Mutex<Vec<(SocketAddr, RawFd)>> = Mutex::new(Vec::new());
/// Sockets handed over by the old process, not claimed yet.
static INHERITED: Mutex<Vec<(SocketAddr, OwnedFd)>> = Mutex::new(Vec::new());
/// The hand-over under way in a new process, until `finish`.
static PENDING: Mutex<Option<UnixStream>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A listening socket on `addr`: the one the old process handed over for
/// that address if there is one, else a new one. Recorded for the next
/// upgrade either way.
pub fn listen(addr: SocketAddr, backlog: i32) -> io::Result<mio::net::TcpListener> {
    let inherited = {
        let mut list = lock(&INHERITED);
        list.iter()
            .position(|(a, _)| *a == addr)
            .map(|i| list.swap_remove(i).1)
    };
    let l = match inherited {
        Some(fd) => {
            let std_l = std::net::TcpListener::from(fd);
            std_l.set_nonblocking(true)?;
            log::info!(target: "mithril::upgrade", "{addr}: listening socket taken over");
            mio::net::TcpListener::from_std(std_l)
        }
        None => reactor::net::listen(addr, backlog)?,
    };
    lock(&OPEN).push((addr, l.as_raw_fd()));
    Ok(l)
}

/// Forget a listening socket about to be closed (it is not handed over).
pub fn forget(fd: RawFd) {
    lock(&OPEN).retain(|(_, f)| *f != fd);
}

// ----- the new process ---------------------------------------------------

/// `mithril --upgrade`: ask the process listening on `path` for its
/// listening sockets, before anything is bound. They are used by
/// [`listen`]; the old process goes on serving until [`finish`].
pub fn take_over(path: &Path) -> io::Result<usize> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "--upgrade: no mithril answers on the upgrade socket {} ({e})",
                path.display()
            ),
        )
    })?;
    s.set_read_timeout(Some(ANSWER_WAIT))?;
    s.write_all(format!("{HELLO}\n").as_bytes())?;
    let (text, fds) = recv_fds(&s)?;
    let text = String::from_utf8_lossy(&text);
    let Some(n) = text
        .trim()
        .strip_prefix("LISTENERS ")
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return Err(io::Error::other(format!(
            "--upgrade: the running process answered '{}'",
            text.trim()
        )));
    };
    if n != fds.len() {
        return Err(io::Error::other(format!(
            "--upgrade: {n} listening sockets announced, {} received",
            fds.len()
        )));
    }
    let mut got = Vec::new();
    for fd in fds {
        let l = std::net::TcpListener::from(fd);
        let addr = l.local_addr()?;
        got.push((addr, OwnedFd::from(l)));
    }
    let count = got.len();
    *lock(&INHERITED) = got;
    *lock(&PENDING) = Some(s);
    Ok(count)
}

/// Whether this process is taking over from another (`take_over` ran and
/// `finish` has not).
pub fn pending() -> bool {
    lock(&PENDING).is_some()
}

/// The new process serves: tell the old one, which stops accepting and
/// releases the pidfile, then answers DONE. Sockets inherited and not
/// used (the file no longer names their address) are closed.
pub fn finish() -> io::Result<()> {
    lock(&INHERITED).clear();
    let Some(mut s) = lock(&PENDING).take() else {
        return Ok(());
    };
    s.write_all(b"READY\n")?;
    s.set_read_timeout(Some(ANSWER_WAIT))?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    if line.trim() != "DONE" {
        return Err(io::Error::other(format!(
            "the old process answered '{}' to READY",
            line.trim()
        )));
    }
    Ok(())
}

// ----- the running process -----------------------------------------------

/// Listen on the upgrade socket `path` (a stale file left by a process
/// that is gone is replaced; one a live process answers on is an error,
/// unless `took_over`: this process has just taken over from it).
pub fn bind(path: &Path, took_over: bool) -> io::Result<UnixListener> {
    if took_over {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    match UnixListener::bind(path) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "upgrade-socket {}: another mithril listens there (start this one \
                         with --upgrade to take over from it)",
                        path.display()
                    ),
                ));
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        Err(e) => Err(e),
    }
}

/// The upgrade socket's thread body: hand the listening sockets to the
/// first new process that asks and says READY, then call `handed_over`
/// and answer DONE. A new process that fails before READY changes
/// nothing: the next one may ask.
pub fn serve(listener: UnixListener, path: PathBuf, handed_over: impl FnOnce()) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        match hand_over(&conn) {
            Ok(()) => {
                log::info!(target: "mithril::upgrade", "a new process took the listening sockets and serves: this one stops accepting and drains");
                handed_over();
                let mut c = &conn;
                let _ = c.write_all(b"DONE\n");
                return;
            }
            Err(e) => {
                log::warn!(target: "mithril::upgrade", "upgrade through {} failed, serving on: {e}", path.display())
            }
        }
    }
}

fn hand_over(conn: &UnixStream) -> io::Result<()> {
    conn.set_read_timeout(Some(ANSWER_WAIT))?;
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line)?;
    if line.trim() != HELLO {
        return Err(io::Error::other(format!(
            "unknown greeting '{}'",
            line.trim()
        )));
    }
    let fds: Vec<RawFd> = lock(&OPEN)
        .iter()
        .map(|(_, fd)| *fd)
        .take(MAX_FDS)
        .collect();
    send_fds(conn, format!("LISTENERS {}\n", fds.len()).as_bytes(), &fds)?;
    conn.set_read_timeout(Some(READY_WAIT))?;
    line.clear();
    r.read_line(&mut line)?;
    if line.trim() != "READY" {
        return Err(io::Error::other(if line.is_empty() {
            "the new process closed the connection before it served".to_string()
        } else {
            format!("the new process said '{}'", line.trim())
        }));
    }
    Ok(())
}

// ----- descriptors over a unix socket --------------------------------------

fn send_fds(s: &UnixStream, payload: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(bytes as u32) } as usize;
    // u64s keep the control buffer aligned for cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8).max(1)];
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer is `space` bytes, aligned, and holds
        // one header with room for `bytes` of data, which the copy fills.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(bytes as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr() as *const u8, libc::CMSG_DATA(cmsg), bytes);
        }
    }
    // SAFETY: msg points at live buffers for the length of the call.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != payload.len() {
        return Err(io::Error::other("short write of the hand-over message"));
    }
    Ok(())
}

fn recv_fds(s: &UnixStream) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut buf = vec![0u8; 256];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space =
        unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: an all-zero msghdr is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: msg points at live buffers for the length of the call.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg's control part; the CMSG_* macros walk
    // the headers it wrote, and each SCM_RIGHTS descriptor is ours to own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned((data as *const RawFd).add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::other("too many listening sockets handed over"));
    }
    buf.truncate(n as usize);
    Ok((buf, fds))
}
