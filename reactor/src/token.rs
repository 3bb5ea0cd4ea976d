//! Generational slab keys and their packing into `mio::Token`s.
//!
//! A [`Key`] is a slab index plus the generation the slot had when the value
//! was inserted. Removing a value bumps the slot's generation, so every key
//! handed out before the removal stops resolving: `get` returns `None` rather
//! than the newcomer that reused the index. This is what lets a late backend
//! reply, a timer or a readiness event for a closed session be dropped
//! quietly instead of being misrouted.
//!
//! A token packs `kind (4 bits) | generation (28 bits) | index (32 bits)`.
//! Generations wrap at 2^28; a stale key would have to survive 268 million
//! reuses of one slot to alias, which a closed connection's events cannot.

use mio::Token;
use slab::Slab;

/// A slab key with the generation of the value it was issued for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub index: u32,
    pub gen: u32,
}

impl Key {
    /// A key that never resolves (generation 0 is never issued).
    pub const NONE: Key = Key {
        index: u32::MAX,
        gen: 0,
    };

    /// Pack into a 64-bit value (for passing through channels or timers).
    pub fn to_u64(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.index)
    }

    pub fn from_u64(v: u64) -> Key {
        Key {
            index: v as u32,
            gen: (v >> 32) as u32,
        }
    }
}

/// The kind of object a token designates (0..=15). Kind 15 is reserved for
/// the loop's own waker.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Kind(pub u8);

impl Kind {
    pub const WAKER: Kind = Kind(15);
}

const GEN_BITS: u32 = 28;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

/// Pack a kind and a key into a mio token.
pub fn encode(kind: Kind, key: Key) -> Token {
    debug_assert!(kind.0 < 16);
    let v = (u64::from(kind.0 & 0xf) << 60)
        | (u64::from(key.gen & GEN_MASK) << 32)
        | u64::from(key.index);
    Token(v as usize)
}

/// Unpack a token made by [`encode`].
pub fn decode(token: Token) -> (Kind, Key) {
    let v = token.0 as u64;
    let kind = Kind((v >> 60) as u8);
    let gen = ((v >> 32) as u32) & GEN_MASK;
    (
        kind,
        Key {
            index: v as u32,
            gen,
        },
    )
}

/// A slab whose keys carry generations. Each value is stored with the
/// generation of its key, so resolving a key is one slab access and one
/// compare; a parallel vector keeps every slot's generation across removal,
/// for the next value that takes the slot.
pub struct GenSlab<T> {
    slab: Slab<Entry<T>>,
    gens: Vec<u32>,
}

struct Entry<T> {
    gen: u32,
    value: T,
}

impl<T> Default for GenSlab<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> GenSlab<T> {
    pub fn new() -> Self {
        GenSlab {
            slab: Slab::new(),
            gens: Vec::new(),
        }
    }

    pub fn with_capacity(n: usize) -> Self {
        GenSlab {
            slab: Slab::with_capacity(n),
            gens: Vec::with_capacity(n),
        }
    }

    /// The key the next `insert` will return.
    pub fn vacant_key(&self) -> Key {
        let index = self.slab.vacant_key();
        Key {
            index: index as u32,
            gen: self.gens.get(index).copied().unwrap_or(1),
        }
    }

    /// Insert a value built from its own key.
    pub fn insert_with(&mut self, f: impl FnOnce(Key) -> T) -> Key {
        let key = self.vacant_key();
        let value = f(key);
        let index = self.slab.insert(Entry {
            gen: key.gen,
            value,
        });
        debug_assert_eq!(index as u32, key.index);
        if index >= self.gens.len() {
            self.gens.resize(index + 1, 1);
        }
        key
    }

    pub fn insert(&mut self, value: T) -> Key {
        self.insert_with(|_| value)
    }

    #[inline]
    fn entry(&self, key: Key) -> Option<&Entry<T>> {
        self.slab
            .get(key.index as usize)
            .filter(|e| e.gen == key.gen & GEN_MASK)
    }

    pub fn contains(&self, key: Key) -> bool {
        self.entry(key).is_some()
    }

    #[inline]
    pub fn get(&self, key: Key) -> Option<&T> {
        self.entry(key).map(|e| &e.value)
    }

    #[inline]
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        match self.slab.get_mut(key.index as usize) {
            Some(e) if e.gen == key.gen & GEN_MASK => Some(&mut e.value),
            _ => None,
        }
    }

    /// Remove the value; every outstanding copy of `key` stops resolving.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        self.entry(key)?;
        let i = key.index as usize;
        let value = self.slab.remove(i).value;
        // Skip 0 so that Key::NONE-like keys never resolve, and stay within
        // the bits a token can carry.
        let next = (self.gens[i].wrapping_add(1)) & GEN_MASK;
        self.gens[i] = if next == 0 { 1 } else { next };
        Some(value)
    }

    pub fn len(&self) -> usize {
        self.slab.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        self.slab.iter().map(|(i, e)| {
            (
                Key {
                    index: i as u32,
                    gen: e.gen,
                },
                &e.value,
            )
        })
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Key, &mut T)> {
        self.slab.iter_mut().map(|(i, e)| {
            (
                Key {
                    index: i as u32,
                    gen: e.gen,
                },
                &mut e.value,
            )
        })
    }

    /// Keys of every live value, collected (for loops that remove while
    /// iterating).
    pub fn keys(&self) -> Vec<Key> {
        self.iter().map(|(k, _)| k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trip() {
        for kind in [0u8, 1, 7, 15] {
            for key in [
                Key { index: 0, gen: 1 },
                Key {
                    index: 12345,
                    gen: GEN_MASK,
                },
                Key {
                    index: u32::MAX,
                    gen: 77,
                },
            ] {
                let (k, back) = decode(encode(Kind(kind), key));
                assert_eq!(k, Kind(kind));
                assert_eq!(back, key);
            }
        }
    }

    #[test]
    fn stale_keys_do_not_resolve_after_reuse() {
        let mut s = GenSlab::new();
        let a = s.insert("a");
        assert_eq!(s.get(a), Some(&"a"));
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b");
        assert_eq!(a.index, b.index, "slab reuses the slot");
        assert_ne!(a.gen, b.gen);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get_mut(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(b), Some(&"b"));
        assert!(!s.contains(Key::NONE));
    }

    #[test]
    fn insert_with_sees_own_key() {
        let mut s = GenSlab::new();
        let k1 = s.insert_with(|k| k);
        let k2 = s.insert_with(|k| k);
        assert_eq!(s.get(k1), Some(&k1));
        assert_eq!(s.get(k2), Some(&k2));
        let keys: Vec<Key> = s.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![k1, k2]);
        assert_eq!(s.keys(), vec![k1, k2]);
        s.remove(k1);
        let k3 = s.insert_with(|k| k);
        assert_eq!(s.get(k3), Some(&k3));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn generation_wraps_without_hitting_zero() {
        let mut s = GenSlab::new();
        let k = s.insert(1);
        s.gens[k.index as usize] = GEN_MASK;
        s.slab[k.index as usize].gen = GEN_MASK;
        let k = Key {
            index: k.index,
            gen: GEN_MASK,
        };
        assert!(s.remove(k).is_some());
        let k2 = s.insert(2);
        assert_eq!(k2.gen, 1);
    }
}
