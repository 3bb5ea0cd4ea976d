//! twemproxy's twelve key hashes, each giving the value nutcracker 0.5.0
//! computes on x86-64 Linux for the same bytes.
//!
//! Most of them come from libmemcached and keep its quirks: `crc32` is 15
//! bits of a CRC, `crc16` never masks its accumulator, `fnv1a_64` runs in
//! 32 bits, `hsieh` starts from 0 rather than the length, `murmur` seeds
//! with the length. Several read the key through a signed `char`, so a
//! byte from 0x80 up enters them sign-extended; each function says which.
//!
//! Invariants: every function is pure, total and allocation free. An empty
//! key gets the function's own value here; twemproxy never hashes an empty
//! key (it places it at 0), which is [`super::Ring::locate`]'s business.

use super::md5;

/// A key byte read as x86's signed `char` and widened to 32 bits:
/// 0x80..=0xff become 0xffff_ff80..=0xffff_ffff.
fn signed(b: u8) -> u32 {
    b as i8 as i32 as u32
}

/// Bob Jenkins' one-at-a-time hash over signed bytes.
pub fn one_at_a_time(key: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in key {
        h = h.wrapping_add(signed(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// The first four bytes of the key's MD5 digest, little endian.
pub fn md5(key: &[u8]) -> u32 {
    let d = md5::digest(key);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// The CRC-16/XMODEM table (polynomial 0x1021, most significant bit first).
const CRC16_TABLE: [u16; 256] = {
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
};

/// CRC-16/XMODEM's table step with a 32-bit accumulator that is never
/// masked: the bits shifted past 16 stay, so the result is not the 16-bit
/// CRC (only its low 16 bits are). The byte's sign does not matter here,
/// the table index keeps its low eight bits.
pub fn crc16(key: &[u8]) -> u32 {
    let mut crc: u32 = 0;
    for &b in key {
        let index = ((crc >> 8) ^ u32::from(b)) & 0xff;
        crc = (crc << 8) ^ u32::from(CRC16_TABLE[index as usize]);
    }
    crc
}

/// The reflected CRC-32 table (IEEE 802.3, polynomial 0xedb88320).
const CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// The IEEE CRC-32 of the key, before its final inversion.
fn crc32_raw(key: &[u8]) -> u32 {
    let mut crc = u32::MAX;
    for &b in key {
        crc = (crc >> 8) ^ CRC32_TABLE[((crc ^ u32::from(b)) & 0xff) as usize];
    }
    crc
}

/// libmemcached's "crc32": bits 16..=30 of the IEEE CRC-32, a number below
/// 32768.
pub fn crc32(key: &[u8]) -> u32 {
    (!crc32_raw(key) >> 16) & 0x7fff
}

/// The IEEE CRC-32 (what zlib and `cksum -a crc32b` give).
pub fn crc32a(key: &[u8]) -> u32 {
    !crc32_raw(key)
}

const FNV_64_INIT: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_64_PRIME: u64 = 0x0000_0100_0000_01b3;
const FNV_32_INIT: u32 = 0x811c_9dc5;
const FNV_32_PRIME: u32 = 0x0100_0193;

/// 64-bit FNV-1 over signed bytes (each sign-extended to 64 bits),
/// truncated to its low 32 bits.
pub fn fnv1_64(key: &[u8]) -> u32 {
    let mut h = FNV_64_INIT;
    for &b in key {
        h = h.wrapping_mul(FNV_64_PRIME);
        h ^= b as i8 as i64 as u64;
    }
    h as u32
}

/// "64-bit" FNV-1a as twemproxy runs it: in 32 bits, from the low half of
/// the 64-bit offset basis (0x84222325) with the low half of the 64-bit
/// prime (0x1b3), over signed bytes. Twemproxy's default hash.
pub fn fnv1a_64(key: &[u8]) -> u32 {
    let mut h = FNV_64_INIT as u32;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(FNV_64_PRIME as u32);
    }
    h
}

/// 32-bit FNV-1 over signed bytes.
pub fn fnv1_32(key: &[u8]) -> u32 {
    let mut h = FNV_32_INIT;
    for &b in key {
        h = h.wrapping_mul(FNV_32_PRIME);
        h ^= signed(b);
    }
    h
}

/// 32-bit FNV-1a over signed bytes.
pub fn fnv1a_32(key: &[u8]) -> u32 {
    let mut h = FNV_32_INIT;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(FNV_32_PRIME);
    }
    h
}

/// Two bytes as a little-endian 16-bit number, widened.
fn le16(lo: u8, hi: u8) -> u32 {
    u32::from(u16::from_le_bytes([lo, hi]))
}

/// Paul Hsieh's SuperFastHash, started from 0 instead of the key length.
/// Bytes are read unsigned, except the third byte of a three-byte tail,
/// which twemproxy reads through a signed `char`. An empty key is 0.
pub fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    let mut h: u32 = 0;
    let mut words = key.chunks_exact(4);
    for w in words.by_ref() {
        h = h.wrapping_add(le16(w[0], w[1]));
        let tmp = (le16(w[2], w[3]) << 11) ^ h;
        h = (h << 16) ^ tmp;
        h = h.wrapping_add(h >> 11);
    }
    match *words.remainder() {
        [a, b, c] => {
            h = h.wrapping_add(le16(a, b));
            h ^= h << 16;
            h ^= signed(c) << 18;
            h = h.wrapping_add(h >> 11);
        }
        [a, b] => {
            h = h.wrapping_add(le16(a, b));
            h ^= h << 11;
            h = h.wrapping_add(h >> 17);
        }
        [a] => {
            h = h.wrapping_add(u32::from(a));
            h ^= h << 10;
            h = h.wrapping_add(h >> 1);
        }
        _ => {}
    }
    // The final avalanche.
    h ^= h << 3;
    h = h.wrapping_add(h >> 5);
    h ^= h << 4;
    h = h.wrapping_add(h >> 17);
    h ^= h << 25;
    h.wrapping_add(h >> 6)
}

/// MurmurHash2 (32-bit) with seed 0xdeadbeef times the key length, over
/// unsigned bytes read as little-endian words. Lengths are taken modulo
/// 2^32, as twemproxy's cast does.
pub fn murmur(key: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let len = key.len() as u32;
    let seed = 0xdead_beef_u32.wrapping_mul(len);
    let mut h = seed ^ len;
    let mut words = key.chunks_exact(4);
    for w in words.by_ref() {
        let mut k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// lookup3's mixing of one 12-byte block into the state.
fn jenkins_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

/// lookup3's final scramble of the state.
fn jenkins_final(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// Bob Jenkins' lookup3 `hashlittle` with the given initial value: the
/// key as little-endian words, twelve bytes a round, the last block
/// padded with zeros; a zero-length key skips the final scramble.
fn hashlittle(key: &[u8], initval: u32) -> u32 {
    let start = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (start, start, start);
    if key.is_empty() {
        return c;
    }
    let word = |block: &[u8], i: usize| {
        u32::from_le_bytes([block[i], block[i + 1], block[i + 2], block[i + 3]])
    };
    // Every block but the last is mixed; the last (1 to 12 bytes, never
    // empty) goes to the final scramble.
    let last_len = (key.len() - 1) % 12 + 1;
    let (body, last) = key.split_at(key.len() - last_len);
    for block in body.chunks_exact(12) {
        a = a.wrapping_add(word(block, 0));
        b = b.wrapping_add(word(block, 4));
        c = c.wrapping_add(word(block, 8));
        jenkins_mix(&mut a, &mut b, &mut c);
    }
    let mut padded = [0u8; 12];
    padded[..last.len()].copy_from_slice(last);
    a = a.wrapping_add(word(&padded, 0));
    b = b.wrapping_add(word(&padded, 4));
    c = c.wrapping_add(word(&padded, 8));
    jenkins_final(&mut a, &mut b, &mut c);
    c
}

/// lookup3 `hashlittle` with initial value 13, over unsigned bytes.
pub fn jenkins(key: &[u8]) -> u32 {
    hashlittle(key, 13)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Row = (&'static [u8], [u32; 12]);

    /// Values from twemproxy 0.5.0's own C functions (built for x86-64),
    /// in the order one_at_a_time, md5, crc16, crc32, crc32a, fnv1_64,
    /// fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins.
    const KNOWN: [Row; 9] = [
        (
            b"",
            [
                0, 0xd98c1dd4, 0, 0, 0, 0x84222325, 0x84222325, 0x811c9dc5, 0x811c9dc5, 0, 0,
                0xdeadbefc,
            ],
        ),
        (
            b"a",
            [
                0xca2e9442, 0xb975c10c, 0x00007c87, 0x000068b7, 0xe8b7be43, 0x8601b7be, 0x8601ec8c,
                0x050c5d7e, 0xe40c292c, 0x93642e87, 0x4b41757c, 0xe0a38690,
            ],
        ),
        (
            b"foo",
            [
                0x238678dd, 0xdb18bdac, 0x0c3caf96, 0x00000c73, 0x8c736521, 0x6ba13533, 0xfed9d577,
                0x408f5e13, 0xa9f37ed7, 0x76d4d427, 0xc4e0338f, 0x99f84f99,
            ],
        ),
        (
            b"hello world",
            [
                0x3e4a5a57, 0xbb3bb65e, 0xf2063be4, 0x00000d4a, 0x0d4a1185, 0xb1910e6f, 0x023cd2e7,
                0x548da96f, 0xd58b3fa7, 0x4f799873, 0x5e19153b, 0x153343fb,
            ],
        ),
        (
            b"The quick brown fox jumps over the lazy dog",
            [
                0x519e91f5, 0x9d7d109e, 0x22a3f0c8, 0x0000414f, 0x414fa339, 0x7de37ace, 0xe7e47110,
                0xe9c86c6e, 0x048fff90, 0x1c19ee97, 0x30c79125, 0x12b8163c,
            ],
        ),
        (
            b"123456789",
            [
                0xc66b58c5, 0x94e7f925, 0x869031c3, 0x00004bf4, 0xcbf43926, 0x2bf916d6, 0x23c6cdfc,
                0x24148816, 0xbb86b11c, 0xe4fc1670, 0xb7760690, 0x19777af6,
            ],
        ),
        // Bytes from 0x80 up: the signed-char functions differ from what
        // an unsigned reading would give.
        (
            b"\x80",
            [
                0xc31d4e27, 0x7edd398d, 0x00009188, 0x00003fba, 0x3fba6cad, 0x79fe485f, 0x79fdec5f,
                0xfaf3a29f, 0x04f3b29f, 0xd6f4cb32, 0x90556245, 0xb16fde48,
            ],
        ),
        (
            b"\xff\xfe\xfd",
            [
                0x475549b8, 0xc24e6789, 0x1e0dc11f, 0x000008ea, 0x08eaaf6d, 0x93edf087, 0x8f0e92d7,
                0x914c9107, 0xbf6d4517, 0xd989515e, 0xc2e4b7ff, 0x222bd93e,
            ],
        ),
        // hsieh reads the third byte of a three-byte tail signed.
        (
            b"ab\xe9",
            [
                0x7c6c3def, 0x8c72c1c8, 0x7c74ad14, 0x00003849, 0x38492bfc, 0x94505241, 0xfabde399,
                0xbc63d0c1, 0xb1b7c519, 0x125794e5, 0x6baf059f, 0x8927b2b4,
            ],
        ),
    ];

    const FNS: [fn(&[u8]) -> u32; 12] = [
        one_at_a_time,
        md5,
        crc16,
        crc32,
        crc32a,
        fnv1_64,
        fnv1a_64,
        fnv1_32,
        fnv1a_32,
        hsieh,
        murmur,
        jenkins,
    ];

    #[test]
    fn every_function_gives_twemproxys_value_for_known_keys() {
        for (key, want) in KNOWN {
            for (i, f) in FNS.iter().enumerate() {
                assert_eq!(
                    f(key),
                    want[i],
                    "function {i} of key {:?}",
                    key.escape_ascii().to_string()
                );
            }
        }
    }

    /// The same pseudo-random keys (lengths 0 to 40, every byte value)
    /// folded as `acc = acc * 31 + hash`; the C side computed the folds
    /// with twemproxy's functions, copying each key to every alignment
    /// (its jenkins reads words when the key is aligned).
    #[test]
    fn every_function_matches_twemproxy_over_three_thousand_keys() {
        let want: [u32; 12] = [
            0xcca1c770, 0xef332917, 0xcaf51d5a, 0xccb9a8ea, 0x4ba13271, 0x2ff2ccdb, 0xe6d140d5,
            0x95302c7b, 0x35fd7bd5, 0x5279a3d0, 0x1f8bfa90, 0x77e722ca,
        ];
        for (i, f) in FNS.iter().enumerate() {
            let mut state: u32 = 0x1234_5678;
            let mut acc: u32 = 0;
            for k in 0..3000 {
                let key: Vec<u8> = (0..k % 41)
                    .map(|_| {
                        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        (state >> 24) as u8
                    })
                    .collect();
                acc = acc.wrapping_mul(31).wrapping_add(f(&key));
            }
            assert_eq!(acc, want[i], "function {i}");
        }
    }

    #[test]
    fn the_tables_are_twemproxys() {
        // Spot checks against the literal tables in nc_crc16.c / nc_crc32.c.
        assert_eq!(CRC16_TABLE[1], 0x1021);
        assert_eq!(CRC16_TABLE[0x80], 0x9188);
        assert_eq!(CRC16_TABLE[255], 0x1ef0);
        assert_eq!(CRC32_TABLE[1], 0x7707_3096);
        assert_eq!(CRC32_TABLE[0x80], 0xedb8_8320);
        assert_eq!(CRC32_TABLE[255], 0x2d02_ef8d);
    }

    #[test]
    fn lookup3_reference_values() {
        // From the self-test in Bob Jenkins' lookup3.c.
        assert_eq!(hashlittle(b"", 0), 0xdead_beef);
        let four_score = b"Four score and seven years ago";
        assert_eq!(hashlittle(four_score, 0), 0x1777_0551);
        assert_eq!(hashlittle(four_score, 1), 0xcd62_8161);
    }

    #[test]
    fn signed_bytes_are_sign_extended() {
        assert_eq!(signed(0x7f), 0x7f);
        assert_eq!(signed(0x80), 0xffff_ff80);
        assert_eq!(signed(0xff), 0xffff_ffff);
        // One byte 0x80: FNV-1a-32 xors in 0xffffff80, not 0x80.
        let unsigned = (FNV_32_INIT ^ 0x80).wrapping_mul(FNV_32_PRIME);
        assert_ne!(fnv1a_32(b"\x80"), unsigned);
        assert_eq!(
            fnv1a_32(b"\x80"),
            (FNV_32_INIT ^ 0xffff_ff80).wrapping_mul(FNV_32_PRIME)
        );
    }

    #[test]
    fn crc32_is_fifteen_bits() {
        for key in [&b"a"[..], b"foo", b"\xff\xff\xff", b"123456789"] {
            assert!(crc32(key) < 0x8000);
        }
    }
}
