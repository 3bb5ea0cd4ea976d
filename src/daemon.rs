//! What surrounds the proxy when it runs as a service: the pidfile, the
//! start pipe back to the parent of a daemon, and systemd's notification
//! socket. The binary's glue between `reactor::daemon` (the mechanisms)
//! and `server::Lifecycle` (the moments).
//!
//! Invariants: the pidfile is written only once the proxy is ready, and
//! removed on every way out that runs code (normal stop, start failure,
//! second signal); `READY=1` is sent once, after the listeners are bound
//! and the first topology attempt is over; `STOPPING=1` at the first
//! shutdown signal.
//!
//! Must never: exit the process or start threads.

use std::sync::Mutex;

use mithril::server::Lifecycle;
use reactor::daemon::{Notifier, Pidfile, StartReport};

/// The service-side state of one run.
pub struct Service {
    pidfile: Mutex<Option<Pidfile>>,
    /// The pidfile to take once the old process hands over (`--upgrade`).
    later: Option<String>,
    report: Mutex<Option<StartReport>>,
    notifier: Option<Notifier>,
}

impl Service {
    pub fn new(
        pidfile: Option<Pidfile>,
        later: Option<String>,
        report: Option<StartReport>,
        notifier: Option<Notifier>,
    ) -> Service {
        Service {
            pidfile: Mutex::new(pidfile),
            later,
            report: Mutex::new(report),
            notifier,
        }
    }

    fn notify(&self, state: &str) {
        if let Some(n) = &self.notifier {
            if let Err(e) = n.notify(state) {
                log::warn!(target: "mithril::daemon", "cannot notify the service manager ({state}): {e}");
            }
        }
    }

    /// Start-up failed: tell the waiting parent why, remove the pidfile.
    pub fn failed(&self, why: &str) {
        if let Some(mut r) = lock(&self.report).take() {
            r.failed(why);
        }
        self.remove_pidfile();
    }

    /// The proxy stopped: remove the pidfile.
    pub fn finished(&self) {
        self.remove_pidfile();
    }

    fn remove_pidfile(&self) {
        // Dropping it unlinks the file, then releases the lock.
        drop(lock(&self.pidfile).take());
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lifecycle for Service {
    fn ready(&self) {
        if let Some(p) = lock(&self.pidfile).as_mut() {
            match p.write_pid(std::process::id()) {
                Ok(()) => {
                    log::info!(target: "mithril::daemon", "pid {} written to {}", std::process::id(), p.path().display())
                }
                Err(e) => {
                    log::warn!(target: "mithril::daemon", "cannot write pidfile {}: {e}", p.path().display())
                }
            }
        }
        if let Some(mut r) = lock(&self.report).take() {
            r.ready();
        }
        self.notify("READY=1");
    }

    fn stopping(&self) {
        self.notify("STOPPING=1");
    }

    fn exiting_now(&self) {
        self.remove_pidfile();
    }

    fn handed_over(&self) {
        // The new process writes its own pid there: unlock, keep the file.
        if let Some(p) = lock(&self.pidfile).take() {
            p.disown();
        }
    }

    fn took_over(&self) {
        if let Some(path) = &self.later {
            // The old process released it before answering DONE; a moment
            // more is allowed for its unlock to land.
            let mut tries = 0;
            let got = loop {
                match Pidfile::acquire(std::path::Path::new(path)) {
                    Ok(p) => break Some(p),
                    Err(e) if tries >= 100 => {
                        log::warn!(target: "mithril::daemon", "cannot take the pidfile after the upgrade: {e}");
                        break None;
                    }
                    Err(_) => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
            };
            if let Some(mut p) = got {
                match p.write_pid(std::process::id()) {
                    Ok(()) => {
                        log::info!(target: "mithril::daemon", "pid {} written to {}", std::process::id(), path)
                    }
                    Err(e) => {
                        log::warn!(target: "mithril::daemon", "cannot write pidfile {path}: {e}")
                    }
                }
                *lock(&self.pidfile) = Some(p);
            }
        }
        // systemd follows the new process (NotifyAccess=all in the unit).
        self.notify(&format!("MAINPID={}", std::process::id()));
    }
}
