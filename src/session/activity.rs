//! When a session was accepted and last active, the last command it ran,
//! and the bytes it read and wrote: CLIENT INFO's `age=`, `idle=` and
//! `cmd=`, what the idle timeout reads (`worker/overload.rs`), and INFO's
//! network totals.
//!
//! Invariant: `created` is fixed at the accept; `last_active` is the
//! loop's clock at its latest read or write (`active`); `last_cmd` is a
//! command table's name (or "NULL" before the first); `net_in` / `net_out`
//! are counted only by its own reads and flushes.

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

    /// observe: the bytes read from and written to the client so far.
    #[inline]
    pub fn net_bytes(&self) -> (u64, u64) {
        (self.net_in, self.net_out)
    }
}
