//! Write epochs shared by every worker's reply cache: how the caches of
//! several workers stay linearizable with writes made through any of them.
//!
//! Two tables of counters, one process-wide set:
//! - a key's epoch: 65,536 counters, a key counting in the one its hash
//!   (the same seed in every worker) picks. A write through mithril bumps
//!   its keys' counters when its reply comes back from the node, before
//!   that reply is handed to its client.
//! - a unit's epoch (a slot of the cluster, a server of a ring): bumped
//!   when the unit changes owner (a new map, a MOVED or ASK), and around a
//!   script that may write (it may touch keys it did not declare), at its
//!   dispatch and at its reply.
//!
//! An entry remembers both counters as they were when its fill was armed
//! (a [`Stamp`]); the fill is stored only if they have not moved since,
//! and a hit is served only while they still have not. So once a write's
//! client holds its reply, no worker answers from an entry filled before
//! the write reached the node: the write moved the counter first. A fill
//! armed after the bump reads the node after the write. Counters are
//! shared by unrelated keys that hash alike: a false share costs a miss,
//! never a stale hit.
//!
//! What it costs: two loads on a hit, and one atomic add per key of a
//! write. What it does not replace: the node's invalidations (writes made
//! directly on a node, expiry, eviction) and a worker's own holds (a
//! session's read behind its own write, before the write's reply).

use std::sync::atomic::{AtomicU32, Ordering};

/// Counters of the key table (a power of two: an index is the hash's top
/// bits).
pub const KEY_COUNTERS: usize = 1 << 16;
/// Counters of the unit table: every unit of the first pool (the one the
/// cache serves: a cluster's 16,384 slots, or a ring's servers); a larger
/// unit number shares a counter.
pub const UNIT_COUNTERS: usize = 1 << 14;

/// The two counters an entry was filled under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stamp {
    key: u32,
    unit: u32,
}

pub struct Epochs {
    // Arrays of their fixed sizes: an index is masked, never checked.
    keys: Box<[AtomicU32; KEY_COUNTERS]>,
    units: Box<[AtomicU32; UNIT_COUNTERS]>,
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs::new()
    }
}

impl Epochs {
    pub fn new() -> Epochs {
        // Zeroed memory: pages are only touched once a counter moves.
        fn table<const N: usize>() -> Box<[AtomicU32; N]> {
            let zeroed: Box<[u32]> = vec![0u32; N].into_boxed_slice();
            // SAFETY: AtomicU32 has the size, alignment and bit validity
            // of u32, and the slice holds exactly N of them, so it is a
            // boxed array of N atomics (the same allocation layout is
            // freed).
            unsafe { Box::from_raw(Box::into_raw(zeroed) as *mut [AtomicU32; N]) }
        }
        Epochs {
            keys: table::<KEY_COUNTERS>(),
            units: table::<UNIT_COUNTERS>(),
        }
    }

    /// The key counter of a key whose cache hash is `hash`.
    #[inline]
    pub fn key_index(hash: u64) -> u32 {
        (hash >> 48) as u32
    }

    /// The counters as they are now, for a key counter and a unit.
    #[inline]
    pub fn stamp(&self, index: u32, unit: u16) -> Stamp {
        Stamp {
            key: self.keys[index as usize % KEY_COUNTERS].load(Ordering::Acquire),
            unit: self.units[unit as usize % UNIT_COUNTERS].load(Ordering::Acquire),
        }
    }

    /// Start loading a key's counter (its line is cold in a large table).
    #[inline]
    pub fn prefetch(&self, index: u32) {
        let p: *const AtomicU32 = &self.keys[index as usize % KEY_COUNTERS];
        super::table::prefetch_line(p as *const u8);
    }

    /// A write of a key counted at `index` is answered (or may have run).
    #[inline]
    pub fn bump_key(&self, index: u32) {
        self.keys[index as usize % KEY_COUNTERS].fetch_add(1, Ordering::AcqRel);
    }

    /// Unit `unit` changed owner, or a script that may write runs on it.
    #[inline]
    pub fn bump_unit(&self, unit: u16) {
        self.units[unit as usize % UNIT_COUNTERS].fetch_add(1, Ordering::AcqRel);
    }

    /// Every unit (a FLUSHALL, a keyless script that may write).
    pub fn bump_all_units(&self) {
        for u in self.units.iter() {
            u.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Every key counter: a key's unit may have changed (a ring rebuilt),
    /// so its entry's unit counter is no longer the one to compare.
    pub fn bump_all_keys(&self) {
        for k in self.keys.iter() {
            k.fetch_add(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bump_of_either_counter_changes_the_stamp() {
        let e = Epochs::new();
        let s = e.stamp(7, 3);
        assert_eq!(e.stamp(7, 3), s);
        e.bump_key(7);
        assert_ne!(e.stamp(7, 3), s);
        let s = e.stamp(7, 3);
        e.bump_unit(3);
        assert_ne!(e.stamp(7, 3), s);
        let s = e.stamp(7, 3);
        e.bump_key(8);
        e.bump_unit(4);
        assert_eq!(e.stamp(7, 3), s, "other counters leave it alone");
        e.bump_all_units();
        assert_ne!(e.stamp(7, 3), s);
        let s = e.stamp(70000 % KEY_COUNTERS as u32, 3);
        e.bump_all_keys();
        assert_ne!(e.stamp(70000 % KEY_COUNTERS as u32, 3), s);
    }
}
