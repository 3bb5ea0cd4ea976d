//! When a session was accepted and last active, and the last command it
//! ran: CLIENT INFO's `age=`, `idle=` and `cmd=`, and what the idle
//! timeout reads (`worker/overload.rs`).
//!
//! Invariant: `created` is fixed at the accept; `last_active` is the
//! loop's clock at its latest read or write (`active`); `last_cmd` is a
//! command table's name (or "NULL" before the first).

use super::Session;
use std::time::Instant;

impl Session {
    /// When it was accepted.
    #[inline]
    pub fn created(&self) -> Instant {
        self.created
    }

    /// When it last read or wrote.
    #[inline]
    pub fn last_active(&self) -> Instant {
        self.last_active
    }

    /// It read or wrote at `now` (the loop's clock).
    #[inline]
    pub fn active(&mut self, now: Instant) {
        self.last_active = now;
    }

    /// The full name of the last command that passed the auth gate
    /// ("NULL" before the first).
    #[inline]
    pub fn last_cmd(&self) -> &'static str {
        self.last_cmd
    }

    /// Command `name` (the table's) passed the auth gate.
    #[inline]
    pub fn ran(&mut self, name: &'static str) {
        self.last_cmd = name;
    }
}
