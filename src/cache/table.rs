//! The map one generation of the cache keeps its entries in: open
//! addressing with linear probing over one array of slots, each slot
//! holding the key's hash, the key and the entry side by side.
//!
//! Why not `std::collections::HashMap`: in a cache larger than the CPU's
//! own caches, nearly every hit misses on the slot it reads, and a map
//! that hides where a key's slot lives cannot be asked to load it early.
//! This one can ([`Table::prefetch`]): the worker asks for the slots of
//! every GET in a read batch before it looks the first one up, so the
//! loads overlap instead of following one another.
//!
//! Removal shifts the following run back (no tombstones), so a lookup
//! stops at the first empty slot and a table that sees many removals
//! does not slow down. The load is kept at most 5/8: a hit probes about
//! two adjacent slots, a miss about four.

use super::CacheKey;

struct Slot<V> {
    hash: u64,
    key: CacheKey,
    val: V,
}

pub(super) struct Table<V> {
    /// A power of two long, or empty (nothing allocated yet).
    slots: Box<[Option<Slot<V>>]>,
    len: usize,
}

/// The fewest slots a table allocates.
const MIN_SLOTS: usize = 16;

impl<V> Table<V> {
    pub fn new() -> Table<V> {
        Table {
            slots: Box::new([]),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// Where `key` (of `hash`) is, if it is here.
    fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            match &self.slots[i] {
                None => return None,
                Some(s) if s.hash == hash && s.key.as_slice() == key => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&V> {
        let i = self.find(hash, key)?;
        self.slots[i].as_ref().map(|s| &s.val)
    }

    /// Take `key` out, with the key as it was stored.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<(CacheKey, V)> {
        let i = self.find(hash, key)?;
        Some(self.remove_at(i))
    }

    fn remove_at(&mut self, mut hole: usize) -> (CacheKey, V) {
        let out = self.slots[hole].take().expect("a found slot is full");
        self.len -= 1;
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let home = match &self.slots[j] {
                None => break,
                Some(s) => s.hash as usize & mask,
            };
            // The entry at j may fill the hole when the hole lies on its
            // probe path: between its home slot and j.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
        (out.key, out.val)
    }

    /// Store `val` for `key`, replacing what was there.
    pub fn insert(&mut self, hash: u64, key: CacheKey, val: V) {
        if let Some(i) = self.find(hash, key.as_slice()) {
            if let Some(s) = &mut self.slots[i] {
                s.val = val;
            }
            return;
        }
        if (self.len + 1) * 8 > self.slots.len() * 5 {
            self.grow();
        }
        self.place(Slot { hash, key, val });
        self.len += 1;
    }

    /// Put `s` in the first free slot of its probe path (it is not here).
    fn place(&mut self, s: Slot<V>) {
        let mask = self.mask();
        let mut i = s.hash as usize & mask;
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some(s);
    }

    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(MIN_SLOTS);
        let mut fresh = Vec::with_capacity(n);
        fresh.resize_with(n, || None);
        let old = std::mem::replace(&mut self.slots, fresh.into_boxed_slice());
        for s in old.into_vec().into_iter().flatten() {
            self.place(s);
        }
    }

    /// Ask the CPU to load the slot a lookup of `hash` starts at (and the
    /// line after it: a slot spans two). Nothing else happens: a wrong
    /// guess costs a little memory bandwidth.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if self.len == 0 {
            return;
        }
        let p = &self.slots[hash as usize & self.mask()] as *const Option<Slot<V>> as *const i8;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is only a hint; it never faults nor reads
        // into the program, whatever the address (the second line may lie
        // past the array's end).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> Vec<u8> {
        format!("k{i}").into_bytes()
    }

    /// A poor hash on purpose: long runs, wrap-around, and backward shifts
    /// across the array's end.
    fn h(i: u32) -> u64 {
        (i as u64 % 7) * 3 + u64::MAX - 20
    }

    #[test]
    fn every_key_stays_findable_through_inserts_and_removes() {
        let mut t: Table<u32> = Table::new();
        let mut model = std::collections::HashMap::new();
        let mut x: u64 = 12345;
        for step in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = ((x >> 33) % 300) as u32;
            if (x >> 20) % 3 == 0 {
                assert_eq!(
                    t.remove(h(i), &key(i))
                        .map(|(k, v)| (k.as_slice().to_vec(), v)),
                    model.remove(&i).map(|v| (key(i), v)),
                    "remove {i} at step {step}"
                );
            } else {
                t.insert(h(i), CacheKey::new(&key(i)), step);
                model.insert(i, step);
            }
            assert_eq!(t.len(), model.len());
            if step % 97 == 0 {
                for j in 0..300 {
                    assert_eq!(
                        t.get(h(j), &key(j)),
                        model.get(&j),
                        "get {j} at step {step}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_load_stays_under_five_eighths() {
        let spread = |i: u32| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut t: Table<()> = Table::new();
        for i in 0..10_000u32 {
            t.insert(spread(i), CacheKey::new(&key(i)), ());
            assert!(t.len() * 8 <= t.slots.len() * 5);
        }
        t.prefetch(7);
        assert_eq!(t.get(spread(3), &key(3)), Some(&()));
        assert_eq!(t.get(spread(3), &key(4)), None);
    }
}
