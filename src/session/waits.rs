//! The leases carrying a session's WAIT / WAITAOF parts (`worker/admin.rs`):
//! a WAIT may block for ever, so when the session leaves (or half-closes)
//! before they are answered they are closed, and the nodes forget it.
//!
//! Invariant: each entry is (a lease, the ring sequence of the WAIT it
//! carries); answered leases are dropped whenever one is added and before
//! the list is acted on (`keep_wait_leases`), so it grows only with WAITs
//! actually out.

use super::Session;
use reactor::Key;

impl Session {
    /// A WAIT of it is out on some lease.
    #[inline]
    pub fn has_wait_leases(&self) -> bool {
        !self.wait_leases.is_empty()
    }

    /// Its WAIT at ring sequence `seq` went out on `lease`; the leases
    /// for which `carries` is false (answered, gone back) are dropped.
    pub fn add_wait_lease(&mut self, lease: Key, seq: u64, carries: impl FnMut(Key) -> bool) {
        self.keep_wait_leases(carries);
        self.wait_leases.push((lease, seq));
    }

    /// Drops the leases for which `carries` is false (answered, gone
    /// back): what is left carries one of its WAITs.
    pub fn keep_wait_leases(&mut self, mut carries: impl FnMut(Key) -> bool) {
        self.wait_leases.retain(|&(k, _)| carries(k));
    }

    /// The leases carrying its WAITs, with their ring sequences, taken
    /// (to close them).
    pub fn take_wait_leases(&mut self) -> Vec<(Key, u64)> {
        std::mem::take(&mut self.wait_leases)
    }
}
