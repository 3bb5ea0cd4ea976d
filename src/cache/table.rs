//! The map one generation of the cache keeps its entries in: the entries
//! side by side in one dense array (hash, key and entry together), and an
//! index of buckets, linear probing, each bucket 8 bytes: 32 bits of the
//! key's hash and the entry's position.
//!
//! Why not `std::collections::HashMap`: in a cache larger than the CPU's
//! own caches, nearly every hit misses on the memory it reads, and a map
//! that hides where a key lives cannot be asked to load it early. This one
//! can ([`Table::prefetch_index`], then [`Table::prefetch_entry`]): the
//! worker asks for the buckets of every GET in a read batch, then for
//! their entries, before it looks the first one up, so the loads overlap
//! instead of following one another.
//!
//! The index is kept at most 3/4 full; a removal shifts the following run
//! back (no tombstones) and moves the last entry into the hole, so the
//! entries stay dense and a table that sees many removals neither slows
//! down nor grows. Memory per entry: the entry (104 bytes for an inline
//! key and frame) plus 8 to 16 bytes of index, about what the standard
//! map's 7/8-full table costs.

use super::CacheKey;

/// `repr(C)`: the hash and the key first, where a lookup reads first.
#[repr(C)]
struct Slot<V> {
    hash: u64,
    key: CacheKey,
    val: V,
}

pub(super) struct Table<V> {
    /// A power of two long, or empty. 0 is an empty bucket; otherwise the
    /// low 32 bits of the hash above the entry's position + 1.
    index: Box<[u64]>,
    slots: Vec<Slot<V>>,
}

/// Bytes one entry's slot takes (what the cache's least cost is built on).
pub(super) const fn slot_size<V>() -> usize {
    std::mem::size_of::<Slot<V>>()
}

/// The fewest buckets an index has.
const MIN_BUCKETS: usize = 16;

#[inline]
fn tag(hash: u64) -> u64 {
    hash & 0xFFFF_FFFF
}

#[inline]
fn bucket_of(tag: u64, pos: usize) -> u64 {
    (tag << 32) | (pos as u64 + 1)
}

#[inline]
fn pos_of(bucket: u64) -> usize {
    (bucket & 0xFFFF_FFFF) as usize - 1
}

impl<V> Table<V> {
    pub fn new() -> Table<V> {
        Table {
            index: Box::new([]),
            slots: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn mask(&self) -> usize {
        self.index.len().wrapping_sub(1)
    }

    /// A bucket's home: where a lookup of its hash starts (the index is
    /// never longer than 2^32, so the tag's bits are enough).
    #[inline]
    fn home(&self, tag: u64) -> usize {
        tag as usize & self.mask()
    }

    /// Where `key` (of `hash`) is: its bucket and its entry's position.
    fn find(&self, hash: u64, key: &[u8]) -> Option<(usize, usize)> {
        if self.slots.is_empty() {
            return None;
        }
        let t = tag(hash);
        let mask = self.mask();
        let mut i = self.home(t);
        loop {
            let b = self.index[i];
            if b == 0 {
                return None;
            }
            if b >> 32 == t {
                let p = pos_of(b);
                let s = &self.slots[p];
                if s.hash == hash && s.key.as_slice() == key {
                    return Some((i, p));
                }
            }
            i = (i + 1) & mask;
        }
    }

    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&V> {
        let (_, p) = self.find(hash, key)?;
        Some(&self.slots[p].val)
    }

    /// Take `key` out, with the key as it was stored.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<(CacheKey, V)> {
        let (i, p) = self.find(hash, key)?;
        self.unlink(i);
        let last = self.slots.len() - 1;
        let out = self.slots.swap_remove(p);
        if p != last {
            // The last entry moved to p: its bucket says so now.
            let moved = tag(self.slots[p].hash);
            let mask = self.mask();
            let mut j = self.home(moved);
            while self.index[j] != bucket_of(moved, last) {
                j = (j + 1) & mask;
            }
            self.index[j] = bucket_of(moved, p);
        }
        Some((out.key, out.val))
    }

    /// Empty bucket `hole`, shifting back the run after it.
    fn unlink(&mut self, mut hole: usize) {
        self.index[hole] = 0;
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let b = self.index[j];
            if b == 0 {
                return;
            }
            let home = self.home(b >> 32);
            // The bucket at j may fill the hole when the hole lies on its
            // probe path: between its home and j.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.index[hole] = b;
                self.index[j] = 0;
                hole = j;
            }
        }
    }

    /// Store `val` for `key`, replacing what was there.
    pub fn insert(&mut self, hash: u64, key: CacheKey, val: V) {
        if let Some((_, p)) = self.find(hash, key.as_slice()) {
            self.slots[p].val = val;
            return;
        }
        if (self.slots.len() + 1) * 4 > self.index.len() * 3 {
            self.grow();
        }
        let p = self.slots.len();
        self.slots.push(Slot { hash, key, val });
        self.place(tag(hash), p);
    }

    /// Put entry `p` in the first free bucket of its probe path.
    fn place(&mut self, t: u64, p: usize) {
        let mask = self.mask();
        let mut i = self.home(t);
        while self.index[i] != 0 {
            i = (i + 1) & mask;
        }
        self.index[i] = bucket_of(t, p);
    }

    fn grow(&mut self) {
        let n = (self.index.len() * 2).max(MIN_BUCKETS);
        self.index = vec![0u64; n].into_boxed_slice();
        for p in 0..self.slots.len() {
            self.place(tag(self.slots[p].hash), p);
        }
    }

    /// Ask the CPU to load the bucket a lookup of `hash` starts at.
    /// Nothing else happens: a wrong guess costs a little bandwidth.
    #[inline]
    pub fn prefetch_index(&self, hash: u64) {
        if self.slots.is_empty() {
            return;
        }
        // An aligned u64: on one line.
        prefetch_line(&self.index[self.home(tag(hash))] as *const u64 as *const u8);
    }

    /// Ask the CPU to load the entry the first bucket of `hash`'s tag
    /// names (its bucket should be loaded or on its way: see
    /// [`prefetch_index`](Self::prefetch_index)).
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        if self.slots.is_empty() {
            return;
        }
        let t = tag(hash);
        let mask = self.mask();
        let mut i = self.home(t);
        // A few buckets at most: the index is at most 3/4 full.
        for _ in 0..4 {
            let b = self.index[i];
            if b == 0 {
                return;
            }
            if b >> 32 == t {
                let s = &self.slots[pos_of(b)];
                prefetch(
                    s as *const Slot<V> as *const u8,
                    std::mem::size_of::<Slot<V>>(),
                );
                return;
            }
            i = (i + 1) & mask;
        }
    }
}

/// Prefetch every cache line of `len` bytes at `p`.
#[inline]
pub(super) fn prefetch(p: *const u8, len: usize) {
    let first = p as usize & !63;
    let last = (p as usize).wrapping_add(len.max(1) - 1) & !63;
    let mut line = first;
    while line <= last {
        prefetch_line(line as *const u8);
        line += 64;
    }
}

/// Prefetch the cache line of `p`.
#[inline]
pub(super) fn prefetch_line(p: *const u8) {
    // SAFETY: a prefetch is only a hint; it never faults nor reads into
    // the program, whatever the address.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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
        (i as u64 % 7 * 3).wrapping_add(u64::MAX - 20)
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
    fn the_index_stays_under_three_quarters_and_the_entries_dense() {
        let spread = |i: u32| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut t: Table<()> = Table::new();
        for i in 0..10_000u32 {
            t.insert(spread(i), CacheKey::new(&key(i)), ());
            assert!(t.len() * 4 <= t.index.len() * 3);
        }
        for i in (0..10_000u32).step_by(3) {
            assert!(t.remove(spread(i), &key(i)).is_some());
        }
        assert_eq!(t.len(), 10_000 - 3334);
        assert_eq!(t.slots.len(), t.len());
        for i in 0..10_000u32 {
            assert_eq!(t.get(spread(i), &key(i)).is_some(), i % 3 != 0, "{i}");
        }
        t.prefetch_index(7);
        t.prefetch_entry(spread(4));
        assert_eq!(t.get(spread(4), &key(4)), Some(&()));
        assert_eq!(t.get(spread(4), &key(5)), None, "a hash names one key only");
    }
}
