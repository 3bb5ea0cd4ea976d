//! The hashes a prefetch computed, kept for the lookups that follow it.
//!
//! [`ReplyCache::prefetch`](super::ReplyCache::prefetch) hashes the keys
//! of a read's leading GETs; the lookups of those keys come next, in the
//! same order (the GETs dispatched one after another), and take their
//! hash from here instead of computing it again. A hint is known by the
//! address of its key's bytes; a lookup of another key (another address)
//! drops what is left, and the next prefetch starts over.
//!
//! A hint can only be wrong if a key's bytes changed at the same address
//! between the prefetch and the lookup; even then no wrong entry is
//! served: an entry is found only under its key's true hash (the table
//! compares the stored hash and the key), so a wrong hash is a miss.

use super::PREFETCH_MAX;

pub(super) struct Hints {
    /// (address of the key's bytes, its hash), in the prefetch's order.
    keys: [(usize, u64); PREFETCH_MAX],
    /// The next hint a lookup may take.
    pub(super) next: usize,
    len: usize,
}

impl Hints {
    pub(super) fn new() -> Hints {
        Hints {
            keys: [(0, 0); PREFETCH_MAX],
            next: 0,
            len: 0,
        }
    }

    pub(super) fn clear(&mut self) {
        self.next = 0;
        self.len = 0;
    }

    /// `key`'s hash is `hash` (past [`PREFETCH_MAX`] keys, not kept).
    #[inline]
    pub(super) fn push(&mut self, key: &[u8], hash: u64) {
        if let Some(slot) = self.keys.get_mut(self.len) {
            *slot = (key.as_ptr() as usize, hash);
            self.len += 1;
        }
    }

    /// The hashes kept, in order.
    pub(super) fn hashes(&self) -> impl Iterator<Item = u64> + '_ {
        self.keys[..self.len].iter().map(|&(_, h)| h)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// `key`'s hash when it is the next hint's key; otherwise what is
    /// left is dropped.
    #[inline]
    pub(super) fn take(&mut self, key: &[u8]) -> Option<u64> {
        let i = self.next;
        if i < self.len {
            let (at, h) = self.keys[i];
            if at == key.as_ptr() as usize {
                self.next = i + 1;
                return Some(h);
            }
            self.len = 0;
        }
        None
    }
}
