//! What a session may be besides a client sending commands: a monitor
//! (MONITOR's feed comes to it as out-of-band pushes, `worker/monitor.rs`)
//! and a client others can name (CLIENT ID, HELLO: listed in
//! `Shared::named_clients` until it closes, `worker/tracking.rs`), and a
//! tracking client (CLIENT TRACKING: its options, and where its
//! invalidations go).
//!
//! Each flag is set and cleared through the methods here, which say
//! whether it changed, so the worker's lists follow the flag exactly.

use super::Session;
use crate::cache::tracking::ClientTracking;
use reactor::Key;

impl Session {
    /// It receives the MONITOR feed.
    #[inline]
    pub fn is_monitor(&self) -> bool {
        self.monitor
    }

    /// It becomes a monitor (`on`) or stops being one: `true` when that
    /// changed it.
    pub fn set_monitor(&mut self, on: bool) -> bool {
        std::mem::replace(&mut self.monitor, on) != on
    }

    /// It asked for its id: other clients may name it.
    #[inline]
    pub fn is_named(&self) -> bool {
        self.named
    }

    /// It asks for its id: `true` the first time.
    pub fn set_named(&mut self) -> bool {
        !std::mem::replace(&mut self.named, true)
    }

    /// Its CLIENT TRACKING, while on.
    #[inline]
    pub fn tracking(&self) -> Option<&ClientTracking> {
        self.tracking.as_deref()
    }

    #[inline]
    pub fn tracking_mut(&mut self) -> Option<&mut ClientTracking> {
        self.tracking.as_deref_mut()
    }

    /// Tracking goes on (or changes) with `t`, its invalidations sent to
    /// `target` (a worker and its session; `Key::NONE`: to itself).
    pub fn track(&mut self, t: Box<ClientTracking>, target: (usize, Key)) {
        self.tracking = Some(t);
        self.redirect_to = target;
    }

    /// Tracking goes off: `true` when it was on.
    pub fn untrack(&mut self) -> bool {
        self.tracking.take().is_some()
    }

    /// Where its invalidations go: the worker and session its REDIRECT
    /// names (`Key::NONE`: none, to itself).
    #[inline]
    pub fn tracking_target(&self) -> (usize, Key) {
        self.redirect_to
    }
}
