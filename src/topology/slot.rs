//! Key → slot: CRC16 (XMODEM: polynomial 0x1021, initial 0) modulo 16384,
//! hashing only the `{hash tag}` when the key has a non-empty one.
//!
//! Tag rule (as Redis Cluster defines it): find the first `{`; if a `}`
//! follows it with at least one byte between them, hash the bytes between
//! that `{` and the first `}` after it; otherwise hash the whole key.

pub const SLOTS: usize = 16384;

const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

static CRC16: [u16; 256] = crc16_table();

/// `CRC16_HI[x]`: the CRC of the two bytes `[x, 0]` from a zero register,
/// so two bytes fold in with two independent lookups (slicing by two):
/// crc' = CRC16_HI[hi ^ b0] ^ CRC16[lo ^ b1].
static CRC16_HI: [u16; 256] = crc16_hi_table();

const fn crc16_hi_table() -> [u16; 256] {
    let t = crc16_table();
    let mut out = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let a = t[i];
        out[i] = (a << 8) ^ t[(a >> 8) as usize];
        i += 1;
    }
    out
}

#[inline]
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    let mut pairs = data.chunks_exact(2);
    for p in &mut pairs {
        let hi = ((crc >> 8) as u8 ^ p[0]) as usize;
        let lo = ((crc & 0xff) as u8 ^ p[1]) as usize;
        crc = CRC16_HI[hi] ^ CRC16[lo];
    }
    if let [b] = pairs.remainder() {
        crc = (crc << 8) ^ CRC16[(((crc >> 8) as u8) ^ b) as usize];
    }
    crc
}

/// Position of the first `needle` in `hay` (libc's vectorised memchr).
#[inline]
fn find(hay: &[u8], needle: u8) -> Option<usize> {
    if hay.is_empty() {
        return None;
    }
    // SAFETY: memchr reads at most hay.len() bytes of a valid slice; the
    // pointer it returns, if any, lies inside that slice.
    let p = unsafe {
        libc::memchr(
            hay.as_ptr() as *const libc::c_void,
            needle as i32,
            hay.len(),
        )
    };
    if p.is_null() {
        None
    } else {
        Some(p as usize - hay.as_ptr() as usize)
    }
}

/// The part of `key` that is hashed.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = find(key, b'{') {
        let rest = &key[open + 1..];
        if let Some(len) = find(rest, b'}') {
            if len > 0 {
                return &rest[..len];
            }
        }
    }
    key
}

#[inline]
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

/// A hasher for maps keyed by slot number: one multiply (Fibonacci
/// hashing) instead of SipHash, which showed up in fan-out profiles. Slots
/// come from keys, but there are only 16384 of them, so hash flooding
/// cannot grow a map beyond that.
#[derive(Default, Clone, Copy)]
pub struct SlotHasher(u64);

impl std::hash::Hasher for SlotHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u16(&mut self, n: u16) {
        self.0 = (u64::from(n) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A `HashMap` keyed by slot.
pub type SlotMap<V> = std::collections::HashMap<u16, V, std::hash::BuildHasherDefault<SlotHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The check value of CRC16/XMODEM, and slots Redis documents.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn slicing_by_two_matches_the_bytewise_crc() {
        fn bytewise(data: &[u8]) -> u16 {
            let mut crc: u16 = 0;
            for &b in data {
                crc = (crc << 8) ^ CRC16[(((crc >> 8) as u8) ^ b) as usize];
            }
            crc
        }
        let mut x: u64 = 0x1234_5678_9abc_def1;
        for len in 0..200 {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(crc16(&data), bytewise(&data), "len {len}");
        }
    }

    #[test]
    fn hash_tags() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{}"), b"{}");
        assert_eq!(hash_tag(b"{a"), b"{a");
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
    }
}
