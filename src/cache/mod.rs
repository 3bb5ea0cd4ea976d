//! The reply cache (`reply-cache yes`): one per worker, GET replies by key,
//! kept coherent by the cluster's own invalidations (CLIENT TRACKING).
//!
//! What it owns:
//! - Two generations of key → reply frame. New entries and hits go to the
//!   current one; when it holds half the byte budget the generations flip
//!   (the old one is dropped whole), so what is read stays and what is not
//!   ages out in at most two flips, without per-entry bookkeeping. A key of
//!   up to 22 bytes is kept in the map's slot itself (a lookup compares it
//!   without following a pointer), and so is a frame of up to
//!   [`INLINE_FRAME`] bytes (a hit copies it out of the line the lookup
//!   loaded); a larger frame is an allocation of its own, never a slice of
//!   a socket buffer, so a cached value keeps nothing else alive.
//! - Fill tickets: a miss that is admitted arms at most one ticket per key;
//!   the reply that answers it is stored only if that very ticket is still
//!   there. An invalidation (from a node, or a write dispatched here) takes
//!   the ticket away: the fill it would have made is poisoned.
//! - Holds: a write going to a node holds its keys (hashed into buckets)
//!   from its dispatch to its reply; no ticket is armed for a held key, so
//!   a read that could reach the node before the write cannot fill with
//!   the value the write replaces.
//! - Admission in proportion to the hit ratio, counted per key count (see
//!   [`Admission`]).
//! - Stamps: the process-wide write epochs ([`epochs`]) of an entry's key
//!   and unit as they were when its fill was armed. A fill is stored, and
//!   an entry served, only while both are unchanged: a write through any
//!   worker, a unit changing owner, a script that may write, all move them
//!   before their client is answered.
//!
//! What it must never do: perform I/O, know about sessions or nodes, or
//! grow past its budget by more than one entry. Everything here is O(1)
//! per key (hash map operations), and nothing is allocated on a hit (a
//! small one is copied into the caller's reused arena).

use bytes::{Bytes, BytesMut};
use epochs::{Epochs, Stamp};
use hints::Hints;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

/// What an entry costs beyond its key and frame bytes: the map's slot, the
/// two handles and the allocation's header, rounded up.
pub const ENTRY_OVERHEAD: usize = 104;
/// The least an entry costs, whatever its sizes: a small key and frame sit
/// inside the table's slot (112 bytes today, 8 of them the entry's write
/// epochs), and the index and the dense array's growth add the rest.
/// Measured with nil replies under 16-byte keys, before the epochs: 125
/// to 142 bytes of RSS an entry, where key + frame + 96 counted 117.
/// Follows the slot's size, so a layout change moves it too.
pub const ENTRY_FLOOR: usize = table::slot_size::<Entry>() + 40;
// mithril.conf, mithril.conf(5) and doc/architecture.md say 152.
const _: () = assert!(ENTRY_FLOOR == 152, "update the docs' least entry cost");
/// Buckets the holds are counted in (a false share only delays a fill):
/// a key's bucket is its epoch counter's index over 16.
const HOLD_BUCKETS: usize = 4096;
const _: () = assert!(HOLD_BUCKETS << 4 == epochs::KEY_COUNTERS);
/// A hold (as [`ReplyCache::release`] takes it) of a unit, not a key: a
/// script that may write, released at its reply.
pub const HOLD_UNIT: u32 = 1 << 16;
/// A hold of every unit: a FLUSHALL, or a keyless script that may write.
pub const HOLD_ALL: u32 = 1 << 17;
/// Most keys one [`ReplyCache::prefetch`] looks at.
pub const PREFETCH_MAX: usize = 32;
/// Most keys one command fills (an MGET past this is not cached).
pub const MAX_FILL_KEYS: usize = 64;
/// The sequence a queued (MULTI) command's hold carries until its EXEC is
/// dispatched.
pub const TXN_HOLD: u64 = u64::MAX;

/// Counters of one worker's cache, summed over workers for INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub lookups: u64,
    pub hits: u64,
    pub misses: u64,
    /// Tickets armed (fills admitted), and misses the admission turned
    /// away.
    pub fills_admitted: u64,
    pub fills_refused: u64,
    /// Replies stored.
    pub fills_stored: u64,
    /// Keys invalidated by a node, and by writes dispatched here.
    pub invalidations: u64,
    pub write_invalidations: u64,
    /// Tickets an invalidation took away before their reply came.
    pub poisoned: u64,
    /// Whole-cache flushes (lost tracker, new master set, FLUSHALL).
    pub flushes: u64,
    /// Generation flips.
    pub flips: u64,
    /// Sizes at the last snapshot: current and old generation.
    pub bytes_current: u64,
    pub bytes_old: u64,
    pub entries_current: u64,
    pub entries_old: u64,
}

impl CacheStats {
    pub fn add(&mut self, o: &CacheStats) {
        self.lookups += o.lookups;
        self.hits += o.hits;
        self.misses += o.misses;
        self.fills_admitted += o.fills_admitted;
        self.fills_refused += o.fills_refused;
        self.fills_stored += o.fills_stored;
        self.invalidations += o.invalidations;
        self.write_invalidations += o.write_invalidations;
        self.poisoned += o.poisoned;
        self.flushes += o.flushes;
        self.flips += o.flips;
        self.bytes_current += o.bytes_current;
        self.bytes_old += o.bytes_old;
        self.entries_current += o.entries_current;
        self.entries_old += o.entries_old;
    }
}

/// A keyed hash (seeded per worker: a client cannot aim its keys at one
/// bucket without knowing the seed).
#[derive(Clone, Copy)]
pub struct Seeded(u64);

pub struct SeededHasher(u64);

impl BuildHasher for Seeded {
    type Hasher = SeededHasher;
    fn build_hasher(&self) -> SeededHasher {
        SeededHasher(self.0)
    }
}

#[inline]
fn mix(a: u64, b: u64) -> u64 {
    let m = (a as u128).wrapping_mul(b as u128);
    (m as u64) ^ ((m >> 64) as u64)
}

impl Hasher for SeededHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h = self.0 ^ (bytes.len() as u64).wrapping_mul(K);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = mix(h ^ u64::from_le_bytes(w), K ^ 0xA076_1D64_78BD_642F);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = mix(h ^ u64::from_le_bytes(w), K ^ 0xE703_7ED1_A0B4_28DB);
        }
        self.0 = h;
    }
    #[inline]
    fn write_u8(&mut self, _: u8) {
        // Slices hash a length prefix through `write_length_prefix`/
        // `write_usize` on some std versions, and a 0xff terminator
        // through `write_u8` on others: the length is in `write` already.
    }
    #[inline]
    fn write_usize(&mut self, _: usize) {}
    #[inline]
    fn finish(&self) -> u64 {
        mix(self.0, 0x8EBC_6AF0_9C88_C6E3)
    }
}

/// A key as the generations hold it: up to 22 bytes in place (no pointer
/// to follow when a lookup compares it: the compare reads the map's own
/// slot), longer ones in their own allocation.
enum CacheKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

const INLINE_KEY: usize = 22;

impl CacheKey {
    fn new(key: &[u8]) -> CacheKey {
        if key.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..key.len()].copy_from_slice(key);
            CacheKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            CacheKey::Heap(key.into())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            CacheKey::Inline { len, bytes } => &bytes[..*len as usize],
            CacheKey::Heap(b) => b,
        }
    }
}

/// Frames up to this size are kept inside the map's slot: a hit reads
/// the lines the key compare already loaded and copies the bytes out,
/// instead of touching a reference count and a separate allocation (both
/// cache misses in a large cache). A GET of a 32-byte value is 39 bytes.
pub const INLINE_FRAME: usize = 62;

enum Stored {
    Inline { len: u8, bytes: [u8; INLINE_FRAME] },
    Shared(Bytes),
}

impl Stored {
    fn new(frame: &[u8]) -> Stored {
        if frame.len() <= INLINE_FRAME {
            let mut bytes = [0u8; INLINE_FRAME];
            bytes[..frame.len()].copy_from_slice(frame);
            Stored::Inline {
                len: frame.len() as u8,
                bytes,
            }
        } else {
            // An allocation of its own (never a slice of the node
            // connection's buffer, which it would keep alive). A Bytes
            // made from a vector allocates its shared header at its first
            // clone: here, not at the first hit.
            let frame = Bytes::copy_from_slice(frame);
            drop(frame.clone());
            Stored::Shared(frame)
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Stored::Inline { len, bytes } => &bytes[..*len as usize],
            Stored::Shared(b) => b,
        }
    }

    /// The frame as a handle: a large one shared, a small one copied into
    /// `arena` (a reused buffer of the reader's) and split off it.
    fn handle(&self, arena: &mut BytesMut) -> Bytes {
        match self {
            Stored::Inline { len, bytes } => {
                arena.extend_from_slice(&bytes[..*len as usize]);
                arena.split().freeze()
            }
            Stored::Shared(b) => b.clone(),
        }
    }
}

struct Entry {
    frame: Stored,
    /// Milliseconds (the cache's clock) when it was stored.
    born: u64,
    /// The write epochs of its key and unit when its fill was armed.
    stamp: Stamp,
}

/// A fill on its way: its ticket, and the epochs it was armed under.
#[derive(Clone, Copy)]
struct Armed {
    ticket: u32,
    unit: u16,
    stamp: Stamp,
}

struct Generation {
    map: Table<Entry>,
    bytes: usize,
}

fn cost(key: &[u8], frame: &[u8]) -> usize {
    (key.len() + frame.len() + ENTRY_OVERHEAD).max(ENTRY_FLOOR)
}

/// Admission of fills in proportion to the hit ratio, per key count (a
/// GET is 1, an MGET of n keys is n): every shape keeps its own recent
/// lookups and hits, halved every 4096 lookups. While at least one lookup
/// in eight hits, every miss may fill; below, a miss fills with the
/// probability 8 × ratio, floored at 1 / (8 × keys): one GET in eight, one
/// eight-key MGET in sixty-four. A shape seen fewer than 64 times is
/// admitted whole (a cache that just started, or just flipped, learns).
pub struct Admission {
    lookups: [u32; MAX_FILL_KEYS + 1],
    hits: [u32; MAX_FILL_KEYS + 1],
    /// Accumulated admission, in 1/65536 of a fill.
    credit: [u32; MAX_FILL_KEYS + 1],
}

const ONE: u64 = 1 << 16;

impl Default for Admission {
    fn default() -> Self {
        Admission {
            lookups: [0; MAX_FILL_KEYS + 1],
            hits: [0; MAX_FILL_KEYS + 1],
            credit: [0; MAX_FILL_KEYS + 1],
        }
    }
}

impl Admission {
    /// A lookup of `keys` keys, and whether it hit.
    pub fn record(&mut self, keys: usize, hit: bool) {
        let i = keys.min(MAX_FILL_KEYS);
        self.lookups[i] += 1;
        if hit {
            self.hits[i] += 1;
        }
        if self.lookups[i] >= 4096 {
            self.lookups[i] /= 2;
            self.hits[i] /= 2;
        }
    }

    /// Whether a miss of `keys` keys may fill.
    pub fn admit(&mut self, keys: usize) -> bool {
        let i = keys.clamp(1, MAX_FILL_KEYS);
        let (l, h) = (self.lookups[i] as u64, self.hits[i] as u64);
        if l < 64 || h * 8 >= l {
            return true;
        }
        // p = max(8h/l, 1/(8 keys)), in 1/65536 units.
        let p = (8 * h * ONE / l).max(ONE / (8 * i as u64)).min(ONE);
        let c = self.credit[i] as u64 + p;
        if c >= ONE {
            self.credit[i] = (c - ONE) as u32;
            true
        } else {
            self.credit[i] = c as u32;
            false
        }
    }
}

/// Why a miss did not arm a ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFill {
    /// Another fill of the key is on its way.
    Pending,
    /// A write of the key is in flight.
    Held,
    /// The admission said no.
    Refused,
    /// Fills are paused (a master is not tracked).
    Paused,
}

pub struct ReplyCache {
    gens: [Generation; 2],
    cur: usize,
    budget: usize,
    max_age_ms: u64,
    tickets: HashMap<Bytes, Armed, Seeded>,
    next_ticket: u32,
    holds: Box<[u16]>,
    seed: Seeded,
    /// The process-wide write epochs (every worker's cache hashes keys
    /// with the same seed, so a key's counter is the same everywhere).
    epochs: Arc<Epochs>,
    /// The hashes the last prefetch computed, for the lookups after it.
    hints: Hints,
    pub admission: Admission,
    /// Every master is tracked: fills may be armed.
    pub fills_open: bool,
    pub stats: CacheStats,
}

impl ReplyCache {
    pub fn new(budget: usize, max_age_ms: u64, seed: u64, epochs: Arc<Epochs>) -> ReplyCache {
        let seed = Seeded(seed | 1);
        ReplyCache {
            gens: [
                Generation {
                    map: Table::new(),
                    bytes: 0,
                },
                Generation {
                    map: Table::new(),
                    bytes: 0,
                },
            ],
            cur: 0,
            budget,
            max_age_ms,
            tickets: HashMap::with_hasher(seed),
            next_ticket: 1,
            holds: vec![0u16; HOLD_BUCKETS].into_boxed_slice(),
            seed,
            epochs,
            hints: Hints::new(),
            admission: Admission::default(),
            fills_open: false,
            stats: CacheStats::default(),
        }
    }

    pub fn set_limits(&mut self, budget: usize, max_age_ms: u64) {
        self.budget = budget;
        self.max_age_ms = max_age_ms;
        while self.bytes() > budget
            && (!self.gens[0].map.is_empty() || !self.gens[1].map.is_empty())
        {
            self.flip();
        }
    }

    /// Bytes held (both generations, with the per-entry overhead).
    pub fn bytes(&self) -> usize {
        self.gens[0].bytes + self.gens[1].bytes
    }

    pub fn entries(&self) -> usize {
        self.gens[0].map.len() + self.gens[1].map.len()
    }

    /// The reply stored for `key` (of unit `unit`), if it is younger than
    /// the max age and no write or owner change moved its epochs since it
    /// was armed, as a handle: a large frame shared, a small one copied
    /// into `arena` (a reused buffer of the reader's) and split off it. A
    /// hit in the old generation moves to the current one.
    pub fn get(
        &mut self,
        key: &[u8],
        unit: u16,
        now_ms: u64,
        arena: &mut BytesMut,
    ) -> Option<Bytes> {
        self.find(key, unit, now_ms, |f| f.handle(arena))
    }

    /// `f` of the reply stored for `key`, found as [`get`](Self::get)
    /// finds it: for a caller that copies the frame.
    pub fn get_with<R>(
        &mut self,
        key: &[u8],
        unit: u16,
        now_ms: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        self.find(key, unit, now_ms, |s| f(s.as_slice()))
    }

    /// The frame stored for `key`, as tests look at it.
    #[cfg(test)]
    pub fn get_slice(&mut self, key: &[u8], now_ms: u64) -> Option<&[u8]> {
        self.find(key, 0, now_ms, |_| ())?;
        let h = self.hash(key);
        let e = self.gens.iter().find_map(|g| g.map.get(h, key))?;
        Some(e.frame.as_slice())
    }

    /// One lookup: `f` of the fresh entry for `key`, which moves to the
    /// current generation if it was in the old one; a stale one goes (too
    /// old, or its epochs moved).
    fn find<R>(
        &mut self,
        key: &[u8],
        unit: u16,
        now_ms: u64,
        f: impl FnOnce(&Stored) -> R,
    ) -> Option<R> {
        let max_age = self.max_age_ms;
        let h = match self.hints.take(key) {
            Some(h) => h,
            None => self.hash(key),
        };
        let stamp = self.epochs.stamp(Epochs::key_index(h), unit);
        let fresh = |e: &Entry| {
            e.stamp == stamp && (max_age == 0 || now_ms.saturating_sub(e.born) <= max_age)
        };
        let cur = self.cur;
        if let Some(e) = self.gens[cur].map.get(h, key) {
            if fresh(e) {
                return Some(f(&e.frame));
            }
            self.remove_hashed(h, key);
            return None;
        }
        let old = 1 - cur;
        let (k, e) = self.gens[old].map.remove(h, key)?;
        let c = cost(k.as_slice(), e.frame.as_slice());
        self.gens[old].bytes -= c.min(self.gens[old].bytes);
        if !fresh(&e) {
            return None;
        }
        let r = f(&e.frame);
        self.gens[cur].bytes += c;
        self.gens[cur].map.insert(h, k, e);
        self.maybe_flip();
        Some(r)
    }

    fn hash(&self, key: &[u8]) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write(key);
        h.finish()
    }

    fn bucket(&self, key: &[u8]) -> usize {
        bucket_of(Epochs::key_index(self.hash(key)))
    }

    /// Start loading what lookups of the first [`PREFETCH_MAX`] keys of
    /// `keys` will read (see [`Table::prefetch_index`]): every key's
    /// bucket first, then, while those arrive, every key's entry; the old
    /// generation's too while it holds anything, since a miss in the
    /// current one goes on there. A lone key has its buckets loaded only,
    /// since the entry's position is not known before they arrive; its
    /// hash is returned, for the caller to ask for its entries
    /// ([`Self::prefetch_entries`]) once other work has overlapped that
    /// load (the worker's read batch: the other sessions' reads of the
    /// same turn). Their hashes stay as [`Hints`] for their lookups;
    /// `keys` is taken lazily (the caller parses as it yields).
    pub fn prefetch<'k>(&mut self, keys: impl Iterator<Item = &'k [u8]>) -> Option<u64> {
        self.hints.clear();
        for k in keys.take(PREFETCH_MAX) {
            self.prefetch_buckets(k);
        }
        if self.hints.len() < 2 {
            return self.hints.hashes().next();
        }
        for h in self.hints.hashes() {
            self.prefetch_entries(h);
        }
        None
    }

    /// Start loading the buckets and epoch counter a lookup of `key`
    /// reads; its hash is kept as the next hint.
    #[inline]
    fn prefetch_buckets(&mut self, key: &[u8]) {
        let h = self.hash(key);
        for g in &self.gens {
            g.map.prefetch_index(h);
        }
        self.epochs.prefetch(Epochs::key_index(h));
        self.hints.push(key, h);
    }

    /// Start loading the entries a lookup of the key of `hash` reads (its
    /// buckets should be loaded or on their way).
    pub fn prefetch_entries(&self, hash: u64) {
        for g in &self.gens {
            g.map.prefetch_entry(hash);
        }
    }

    /// Arm a fill ticket for `key` (of unit `unit`) after a miss of a
    /// command of `keys` keys. The ticket's number travels with the
    /// request; the epochs it is armed under stay with the ticket.
    pub fn arm(&mut self, key: &[u8], keys: usize, unit: u16) -> Result<u32, NoFill> {
        if !self.fills_open {
            return Err(NoFill::Paused);
        }
        // Admission first: on a workload without locality it refuses
        // nearly every miss, which then costs no lookup of the key (a
        // pending or held key it admitted spends a fill's worth of credit
        // on a key that is being filled or written anyway).
        if !self.admission.admit(keys) {
            self.stats.fills_refused += 1;
            return Err(NoFill::Refused);
        }
        if self.tickets.contains_key(key) {
            return Err(NoFill::Pending);
        }
        let index = Epochs::key_index(self.hash(key));
        if self.holds[bucket_of(index)] > 0 {
            return Err(NoFill::Held);
        }
        let t = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1).max(1);
        let armed = Armed {
            ticket: t,
            unit,
            stamp: self.epochs.stamp(index, unit),
        };
        self.tickets.insert(Bytes::copy_from_slice(key), armed);
        self.stats.fills_admitted += 1;
        Ok(t)
    }

    /// Arm one ticket for the keys of a command of several (an MGET) that
    /// missed: every key without a pending fill or a hold gets it. `None`:
    /// nothing to fill (paused, refused, or every key pending or held).
    pub fn arm_all<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k [u8]> + Clone,
        n: usize,
        unit: u16,
    ) -> Option<u32> {
        if !self.fills_open {
            return None;
        }
        // Admission first, as in `arm`.
        if !self.admission.admit(n) {
            self.stats.fills_refused += 1;
            return None;
        }
        let armable = |c: &Self, k: &[u8]| !c.tickets.contains_key(k) && c.holds[c.bucket(k)] == 0;
        if !keys.clone().any(|k| armable(self, k)) {
            return None;
        }
        let t = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1).max(1);
        for k in keys {
            if armable(self, k) {
                let stamp = self.epochs.stamp(Epochs::key_index(self.hash(k)), unit);
                let armed = Armed {
                    ticket: t,
                    unit,
                    stamp,
                };
                self.tickets.insert(Bytes::copy_from_slice(k), armed);
            }
        }
        self.stats.fills_admitted += 1;
        Some(t)
    }

    /// Give a ticket up (its reply was an error, or went elsewhere).
    pub fn cancel(&mut self, key: &[u8], ticket: u32) {
        if self.tickets.get(key).is_some_and(|a| a.ticket == ticket) {
            self.tickets.remove(key);
        }
    }

    /// The reply to a ticket's request: stored if the ticket still stands
    /// and its epochs have not moved since it was armed (a write, through
    /// any worker, may have reached the node after this read).
    pub fn fill(&mut self, key: &[u8], ticket: u32, frame: &[u8], now_ms: u64) -> bool {
        let Some(armed) = self.tickets.get(key).copied() else {
            return false;
        };
        if armed.ticket != ticket {
            return false;
        }
        self.tickets.remove(key);
        let h = self.hash(key);
        if self.epochs.stamp(Epochs::key_index(h), armed.unit) != armed.stamp {
            self.stats.poisoned += 1;
            return false;
        }
        let c = cost(key, frame);
        if c > self.budget / 2 {
            return false; // larger than a generation: never cached
        }
        let e = Entry {
            frame: Stored::new(frame),
            born: now_ms,
            stamp: armed.stamp,
        };
        let k = CacheKey::new(key);
        self.remove_hashed(h, key);
        let cur = self.cur;
        self.gens[cur].bytes += c;
        self.gens[cur].map.insert(h, k, e);
        self.stats.fills_stored += 1;
        self.maybe_flip();
        true
    }

    fn maybe_flip(&mut self) {
        if self.gens[self.cur].bytes > self.budget / 2 {
            self.flip();
        }
    }

    fn flip(&mut self) {
        let old = 1 - self.cur;
        self.gens[old] = Generation {
            map: Table::new(),
            bytes: 0,
        };
        self.cur = old;
        self.stats.flips += 1;
    }

    fn remove(&mut self, key: &[u8]) {
        self.remove_hashed(self.hash(key), key);
    }

    /// [`remove`](Self::remove) of a key whose hash the caller has.
    fn remove_hashed(&mut self, h: u64, key: &[u8]) {
        for g in &mut self.gens {
            if let Some((k, e)) = g.map.remove(h, key) {
                g.bytes -= cost(k.as_slice(), e.frame.as_slice()).min(g.bytes);
            }
        }
    }

    /// A key changed: forget it, and poison a fill on its way.
    pub fn invalidate(&mut self, key: &[u8]) {
        self.remove(key);
        if self.tickets.remove(key).is_some() {
            self.stats.poisoned += 1;
        }
    }

    /// A write of `key` was dispatched: invalidate it and hold it until
    /// [`release`](Self::release) of what is returned (its epoch
    /// counter's index).
    pub fn hold(&mut self, key: &[u8]) -> u32 {
        self.invalidate(key);
        self.stats.write_invalidations += 1;
        let index = Epochs::key_index(self.hash(key));
        let b = bucket_of(index);
        self.holds[b] = self.holds[b].saturating_add(1);
        index
    }

    /// A script that may write was dispatched on `unit`: no worker serves
    /// an entry of that unit armed before now, and none armed until its
    /// reply ([`release`](Self::release) of what is returned) is kept.
    pub fn hold_unit(&mut self, unit: u16) -> u32 {
        self.epochs.bump_unit(unit);
        HOLD_UNIT | u32::from(unit)
    }

    /// [`hold_unit`](Self::hold_unit) of every unit (a flush, a keyless
    /// script that may write).
    pub fn hold_all(&mut self) -> u32 {
        self.epochs.bump_all_units();
        HOLD_ALL
    }

    /// The write of a hold was answered (or its session went): its
    /// epochs move, so no worker serves what was cached before it, and a
    /// key's fills may be armed again here.
    pub fn release(&mut self, hold: u32) {
        if hold & HOLD_ALL != 0 {
            self.epochs.bump_all_units();
        } else if hold & HOLD_UNIT != 0 {
            self.epochs.bump_unit(hold as u16);
        } else {
            if let Some(h) = self.holds.get_mut(bucket_of(hold)) {
                *h = h.saturating_sub(1);
            }
            self.epochs.bump_key(hold);
        }
    }

    /// Unit `unit` changed owner (a new map, a redirect): whatever any
    /// worker cached of it goes, and fills on their way are not kept.
    pub fn unit_moved(&self, unit: u16) {
        self.epochs.bump_unit(unit);
    }

    /// Keys may have changed units (a ring rebuilt): every entry goes.
    pub fn units_remapped(&self) {
        self.epochs.bump_all_keys();
    }

    /// Forget everything, and poison every fill on its way.
    pub fn flush(&mut self) {
        self.stats.poisoned += self.tickets.len() as u64;
        self.tickets = HashMap::with_hasher(self.seed);
        for g in &mut self.gens {
            *g = Generation {
                map: Table::new(),
                bytes: 0,
            };
        }
        self.stats.flushes += 1;
    }

    /// Whether anything is cached or on its way (writes must still hold
    /// their keys when this is false: a fill may be armed after them).
    pub fn is_empty(&self) -> bool {
        self.tickets.is_empty() && self.gens[0].map.is_empty() && self.gens[1].map.is_empty()
    }

    /// The counters, with the sizes as they are now.
    pub fn snapshot(&self) -> CacheStats {
        let mut s = self.stats;
        let (c, o) = (&self.gens[self.cur], &self.gens[1 - self.cur]);
        s.bytes_current = c.bytes as u64;
        s.bytes_old = o.bytes as u64;
        s.entries_current = c.map.len() as u64;
        s.entries_old = o.map.len() as u64;
        s
    }
}

fn bucket_of(index: u32) -> usize {
    (index as usize >> 4) % HOLD_BUCKETS
}

pub mod epochs;
mod hints;
mod table;
pub mod tracking;

use table::Table;

#[cfg(test)]
mod tests;
