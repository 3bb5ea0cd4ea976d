//! Classic Unix daemon plumbing, with no knowledge of what the daemon does:
//! detaching into the background, the pidfile and its lock, and the
//! systemd readiness protocol.
//!
//! ```text
//!   terminal ── mithril -d ──► detach() ─fork─► Detached::Child(report)
//!                                 │                 setsid, chdir /, stdio → /dev/null
//!                                 │                 ... binds, starts threads ...
//!                                 ▼                 report.ready()  or  report.failed(why)
//!               Detached::Parent(waiter) ◄──── pipe ────┘
//!               waiter.wait(): Ok → exit 0, Err(why) → print, exit 1
//! ```
//!
//! Invariants:
//! - [`detach`] forks, so it must run while the process has exactly one
//!   thread: a fork copies only the calling thread, and a lock held by any
//!   other thread would stay locked forever in the child. It checks
//!   `/proc/self/task` and refuses otherwise.
//! - A [`Pidfile`] holds an exclusive `flock` on its file from
//!   [`Pidfile::acquire`] until it is dropped; the lock is what says "a
//!   process owns this pidfile", not the number written in it. The file is
//!   unlinked before the lock goes, so a new owner never locks an unlinked
//!   file (it also checks, after locking, that the path still names the
//!   file it locked).
//! - [`Notifier`] speaks systemd's `sd_notify` datagram protocol itself:
//!   no libsystemd.
//!
//! Must never: install signal handlers, start threads, or exit the process
//! (the caller decides what a failure means).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};

/// The message a started child sends up the pipe.
const READY: &[u8] = b"OK\n";

/// The number of threads of this process, from `/proc/self/task`; `None`
/// when it cannot be read (not Linux, or no /proc).
pub fn thread_count() -> Option<usize> {
    std::fs::read_dir("/proc/self/task")
        .ok()
        .map(|d| d.filter(|e| e.is_ok()).count())
}

/// Where [`detach`] leaves the caller.
pub enum Detached {
    /// The original process: wait for the child's verdict, then exit.
    Parent(StartWaiter),
    /// The background process, detached: start up, then report.
    Child(StartReport),
}

/// The parent's end of the start-up pipe.
pub struct StartWaiter {
    pipe: File,
    child: libc::pid_t,
}

impl StartWaiter {
    /// The child's process id.
    pub fn child(&self) -> u32 {
        self.child as u32
    }

    /// Blocks until the child reports. `Ok` once it says it is ready;
    /// `Err` with its message when it failed, or with a description of its
    /// end when it died without a word.
    pub fn wait(mut self) -> Result<(), String> {
        let mut text = Vec::new();
        // Read to EOF: the child closes its end right after reporting, or
        // by dying. A ready child keeps running; its pipe end is closed.
        let _ = self.pipe.read_to_end(&mut text);
        if text.starts_with(READY) {
            return Ok(());
        }
        let message = String::from_utf8_lossy(&text).trim_end().to_string();
        // The child has failed: reap it so its status can be told.
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        let reaped = unsafe { libc::waitpid(self.child, &mut status, 0) } == self.child;
        if !message.is_empty() {
            return Err(message);
        }
        Err(if !reaped {
            "the background process ended during start-up without a report".to_string()
        } else if libc::WIFSIGNALED(status) {
            format!(
                "the background process was killed by signal {} during start-up",
                libc::WTERMSIG(status)
            )
        } else {
            format!(
                "the background process exited with status {} during start-up without a report",
                libc::WEXITSTATUS(status)
            )
        })
    }
}

/// The child's end of the start-up pipe. Dropping it without a report
/// closes the pipe, which the parent takes as a failure.
pub struct StartReport {
    pipe: Option<File>,
}

impl StartReport {
    /// Tells the parent that start-up succeeded (it exits 0).
    pub fn ready(&mut self) {
        if let Some(mut p) = self.pipe.take() {
            let _ = p.write_all(READY);
        }
    }

    /// Tells the parent why start-up failed (it prints this and exits 1).
    pub fn failed(&mut self, why: &str) {
        if let Some(mut p) = self.pipe.take() {
            let _ = p.write_all(why.as_bytes());
        }
    }

    /// True until [`ready`](Self::ready) or [`failed`](Self::failed) ran.
    pub fn pending(&self) -> bool {
        self.pipe.is_some()
    }
}

/// Forks into the background. The parent gets a [`StartWaiter`]; the
/// child has started a new session, changed to `/`, and has its standard
/// input, output and error on `/dev/null`, and gets a [`StartReport`].
///
/// Relative paths the caller still needs must be made absolute before.
/// Refuses when the process already runs more than one thread.
pub fn detach() -> io::Result<Detached> {
    match thread_count() {
        Some(1) | None => {}
        Some(n) => {
            return Err(io::Error::other(format!(
                "cannot daemonize: {n} threads are already running (fork copies only one)"
            )))
        }
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors into a valid array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here only.
    let (read_end, write_end) = unsafe {
        (
            File::from(OwnedFd::from_raw_fd(fds[0])),
            File::from(OwnedFd::from_raw_fd(fds[1])),
        )
    };
    // Anything buffered in std's stdout would otherwise be written twice.
    let _ = io::stdout().flush();
    // SAFETY: the process has one thread (checked above), so the child is
    // a complete copy and may run ordinary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        drop(write_end);
        return Ok(Detached::Parent(StartWaiter {
            pipe: read_end,
            child: pid,
        }));
    }
    drop(read_end);
    let mut report = StartReport {
        pipe: Some(write_end),
    };
    if let Err(e) = become_session_leader() {
        report.failed(&format!("cannot detach from the terminal: {e}"));
        return Err(e);
    }
    Ok(Detached::Child(report))
}

/// setsid, chdir to `/`, standard streams onto `/dev/null`.
fn become_session_leader() -> io::Result<()> {
    // SAFETY: setsid takes no arguments; it fails only for a group leader,
    // which a freshly forked child is not.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    std::env::set_current_dir("/")?;
    let null = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in 0..=2 {
        // SAFETY: dup2 onto the standard descriptors from a valid one.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Why a pidfile could not be taken.
#[derive(Debug)]
pub enum PidfileError {
    /// Another process holds the lock; its pid as written in the file,
    /// when readable.
    Held { path: PathBuf, pid: Option<u32> },
    /// The file could not be opened or locked.
    Io { path: PathBuf, error: io::Error },
}

impl std::fmt::Display for PidfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PidfileError::Held {
                path,
                pid: Some(pid),
            } => write!(
                f,
                "pidfile {} is locked by another running process (pid {pid}): \
                 is mithril already running?",
                path.display()
            ),
            PidfileError::Held { path, pid: None } => write!(
                f,
                "pidfile {} is locked by another running process: is mithril already running?",
                path.display()
            ),
            PidfileError::Io { path, error } => {
                write!(f, "cannot use pidfile {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for PidfileError {}

/// A pidfile this process owns: open, exclusively locked, removed on drop.
#[derive(Debug)]
pub struct Pidfile {
    path: PathBuf,
    file: File,
    /// False once [`disown`](Self::disown) gave the file to a child.
    remove_on_drop: bool,
}

impl Pidfile {
    /// Opens (creating it if needed) and locks `path` without blocking.
    /// Leaves its contents alone: [`write_pid`](Self::write_pid) writes the
    /// number once the process has really started.
    pub fn acquire(path: &Path) -> Result<Pidfile, PidfileError> {
        let io_err = |error| PidfileError::Io {
            path: path.to_path_buf(),
            error,
        };
        // A previous owner may unlink the file between our open and our
        // lock; then the path names a new file (or none) and we retry.
        for _ in 0..16 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .custom_flags(libc::O_CLOEXEC)
                .open(path)
                .map_err(io_err)?;
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Err(PidfileError::Held {
                        path: path.to_path_buf(),
                        pid: read_pid(&file),
                    });
                }
                return Err(io_err(e));
            }
            let mine = file.metadata().map_err(io_err)?;
            match std::fs::metadata(path) {
                Ok(now) if now.dev() == mine.dev() && now.ino() == mine.ino() => {
                    return Ok(Pidfile {
                        path: path.to_path_buf(),
                        file,
                        remove_on_drop: true,
                    })
                }
                _ => continue,
            }
        }
        Err(io_err(io::Error::other(
            "the file keeps being replaced while it is locked",
        )))
    }

    /// Replaces the file's contents with `pid` and a newline.
    pub fn write_pid(&mut self, pid: u32) -> io::Result<()> {
        self.file.set_len(0)?;
        let text = format!("{pid}\n");
        // Positioned write: the file offset is irrelevant after set_len.
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(text.as_bytes(), 0)?;
        self.file.sync_data()
    }

    /// Closes this process's handle and leaves the file in place: for the
    /// parent after [`detach`], whose child shares the same lock (a `flock`
    /// belongs to the open file description, which the fork duplicated).
    pub fn disown(mut self) {
        self.remove_on_drop = false;
    }

    /// The path this pidfile lives at.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        // Unlink while the lock is still held (it goes with the file).
        if self.remove_on_drop {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn read_pid(mut file: &File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// A connection to the service manager's notification socket
/// (`NOTIFY_SOCKET`), for `Type=notify` units.
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
}

impl Notifier {
    /// The notifier `NOTIFY_SOCKET` names: a path, or an abstract socket
    /// name written with a leading `@`. `None` when the variable is unset
    /// or empty; `Some(Err)` when it names nothing usable.
    pub fn from_env() -> Option<io::Result<Notifier>> {
        let value = std::env::var_os("NOTIFY_SOCKET").filter(|v| !v.is_empty())?;
        Some(Notifier::new(Path::new(&value)))
    }

    /// A notifier that sends to `target` (`@name` for an abstract socket).
    pub fn new(target: &Path) -> io::Result<Notifier> {
        use std::os::unix::ffi::OsStrExt;
        let bytes = target.as_os_str().as_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name)?
            }
            None => SocketAddr::from_pathname(target)?,
        };
        let socket = UnixDatagram::unbound()?;
        Ok(Notifier { socket, addr })
    }

    /// Sends one notification, such as `READY=1` or `STOPPING=1`.
    pub fn notify(&self, state: &str) -> io::Result<()> {
        self.socket.send_to_addr(state.as_bytes(), &self.addr)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("reactor-daemon-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_pidfile_is_exclusive_and_removed_on_drop() {
        let dir = temp("pidfile");
        let path = dir.join("x.pid");
        let mut first = Pidfile::acquire(&path).unwrap();
        first.write_pid(4242).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "4242\n");
        // flock locks belong to open file descriptions: a second open in
        // the same process conflicts just as another process would.
        match Pidfile::acquire(&path) {
            Err(PidfileError::Held { pid, .. }) => assert_eq!(pid, Some(4242)),
            other => panic!("expected Held, got {other:?}"),
        }
        first.write_pid(7).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "7\n");
        drop(first);
        assert!(!path.exists());
        let again = Pidfile::acquire(&path).unwrap();
        assert_eq!(std::fs::read_to_string(again.path()).unwrap(), "");
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pidfile_in_a_missing_directory_is_an_io_error() {
        let err = Pidfile::acquire(Path::new("/nonexistent-dir-for-test/x.pid")).unwrap_err();
        assert!(matches!(err, PidfileError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("/nonexistent-dir-for-test/x.pid"));
    }

    #[test]
    fn notifications_reach_path_and_abstract_sockets() {
        let dir = temp("notify");
        let path = dir.join("notify.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        Notifier::new(&path).unwrap().notify("READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("reactor-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_server = UnixDatagram::bind_addr(&addr).unwrap();
        Notifier::new(Path::new(&format!("@{name}")))
            .unwrap()
            .notify("STOPPING=1")
            .unwrap();
        let n = abstract_server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
