//! What a session may be besides a client sending commands: a monitor
//! (MONITOR's feed comes to it as out-of-band pushes, `worker/monitor.rs`)
//! and a client others can name (CLIENT ID, HELLO: listed in
//! `Shared::named_clients` until it closes, `worker/tracking.rs`).
//!
//! Each flag is set and cleared through the methods here, which say
//! whether it changed, so the worker's lists follow the flag exactly.

use super::Session;

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
}
