//! Starting and stopping child processes so that none outlives the test.
//!
//! Owns: the spawner thread. Every child is forked from that one thread, which
//! lives as long as the process, and asks the kernel (PR_SET_PDEATHSIG) for
//! SIGKILL when its parent goes away. Linux sends that signal when the *thread*
//! that forked the child ends, so forking from short-lived test threads would
//! kill a cluster that a test shares through a static; one long-lived spawner
//! avoids that while still cleaning up after a test binary that is killed or
//! interrupted before its `Drop`s run. Also reads a process's figures from
//! /proc (memory, open descriptors). Never: signal anything but a PID this
//! process started, or use process-group or name-based kills.

use std::io;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use super::poll_until;

struct SpawnRequest {
    cmd: Command,
    reply: mpsc::Sender<io::Result<Child>>,
}

fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("support-spawner".into())
            .spawn(move || {
                for mut req in rx {
                    let _ = req.reply.send(req.cmd.spawn());
                }
            })
            .unwrap_or_else(|e| panic!("cannot start the spawner thread: {e}"));
        tx
    })
}

/// Spawns `cmd` from the long-lived spawner thread, with SIGKILL as its
/// parent-death signal, an empty signal mask, and SIGINT, SIGTERM and SIGHUP
/// at their default dispositions.
/// Everything else about `cmd` (stdio, process group, cwd) is the caller's.
pub fn spawn_child(mut cmd: Command) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let child_setup = move || -> io::Result<()> {
        // Only async-signal-safe calls here: we are between fork and exec.
        #[cfg(target_os = "linux")]
        // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: getppid, signal and _exit take no pointers; sigemptyset and
        // pthread_sigmask get a local set that sigemptyset initialises.
        unsafe {
            if libc::getppid() != parent {
                // The parent died before the death signal was armed.
                libc::_exit(1);
            }
            // std passes the signal mask and ignored signals on to children
            // as they are; a caller that blocks or ignores stop signals (the
            // dev-cluster launcher does) must not hand that to a server.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        Ok(())
    };
    // SAFETY: the closure only makes async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(child_setup);
    }
    let (tx, rx) = mpsc::channel();
    spawner()
        .send(SpawnRequest { cmd, reply: tx })
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("spawner thread dropped the request"))?
}

/// True while `pid` names a process (or an unreaped zombie).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Sends `sig` to one child we started (never to a group).
pub fn signal_child(child: &Child, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill on a PID we own; a failure (already exited) is harmless.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// A child stopped by SIGSTOP: its kernel still accepts connections for
/// it, and nothing answers them. SIGCONT when dropped, however the test
/// ends.
pub struct Stopped(libc::pid_t);

impl Stopped {
    pub fn stop(pid: u32) -> Stopped {
        let pid = libc::pid_t::try_from(pid).expect("a pid");
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        let rc = unsafe { libc::kill(pid, libc::SIGSTOP) };
        assert_eq!(rc, 0, "SIGSTOP {pid}: {}", io::Error::last_os_error());
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `stop`.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// Sends SIGTERM to every child, waits up to `grace` for all of them, then
/// SIGKILLs and reaps whatever is left. Returns the exit statuses in order.
pub fn terminate_all(children: &mut [&mut Child], grace: Duration) -> Vec<Option<ExitStatus>> {
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; children.len()];
    for c in children.iter() {
        signal_child(c, libc::SIGTERM);
    }
    let _ = poll_until(grace, || {
        let mut all = true;
        for (c, st) in children.iter_mut().zip(statuses.iter_mut()) {
            if st.is_none() {
                *st = c.try_wait().ok().flatten();
                all &= st.is_some();
            }
        }
        all.then_some(())
    });
    for (c, st) in children.iter_mut().zip(statuses.iter_mut()) {
        if st.is_none() {
            signal_child(c, libc::SIGKILL);
            *st = c.wait().ok();
        }
    }
    statuses
}

/// SIGKILL one child and reap it.
pub fn kill_and_reap(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(st)) = child.try_wait() {
        return Some(st);
    }
    signal_child(child, libc::SIGKILL);
    child.wait().ok()
}

/// Raises this process's open-file limit to its hard limit; returns the
/// limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    lim.rlim_cur
}

/// A field of /proc/PID/status in kB (VmRSS, VmHWM, ...).
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("cannot read /proc/{pid}/status: {e}"));
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Resident memory of `pid` in kB.
pub fn rss_kb(pid: u32) -> u64 {
    status_kb(pid, "VmRSS")
}

/// Open file descriptors of `pid`.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("cannot list /proc/{pid}/fd: {e}"))
        .count()
}

/// VmRSS of `pid` in kB, `None` once the process is gone.
pub fn try_rss_kb(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The largest RSS of a process while it runs, sampled every 10 ms from
/// another thread.
pub struct PeakRss {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<u64>,
}

impl PeakRss {
    pub fn start(pid: u32) -> PeakRss {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = stop.clone();
        let sampler = std::thread::spawn(move || {
            let mut peak = 0;
            // Until told, or until the process is gone (a test that failed).
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let Some(now) = try_rss_kb(pid) else { break };
                peak = peak.max(now);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            peak
        });
        PeakRss { stop, sampler }
    }

    /// The peak, in kB.
    pub fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().unwrap()
    }
}
