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
    report: Mutex<Option<StartReport>>,
    notifier: Option<Notifier>,
}

impl Service {
    pub fn new(
        pidfile: Option<Pidfile>,
        report: Option<StartReport>,
        notifier: Option<Notifier>,
    ) -> Service {
        Service {
            pidfile: Mutex::new(pidfile),
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
}
