//! SHA-1 (FIPS 180-4), small and dependency free: Redis names a script by
//! the SHA-1 of its body (`EVALSHA`, `SCRIPT LOAD`), so the proxy computes
//! the same name to remember the bodies it forwards.
//!
//! Not for security: SHA-1 is broken as a collision-resistant hash; here it
//! is only the name Redis gives a script. Invariants: [`digest`] is a pure
//! function of its input and does not allocate; [`parse_hex`] accepts what
//! Redis accepts as a script name (40 hex digits, either case).

/// Initial hash value.
const H0: [u32; 5] = [
    0x6745_2301,
    0xefcd_ab89,
    0x98ba_dcfe,
    0x1032_5476,
    0xc3d2_e1f0,
];

/// Processes one 64-byte block into the running state.
fn compress(state: &mut [u32; 5], block: &[u8; 64]) {
    let mut w = [0u32; 80];
    for (i, word) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    }
    for i in 16..80 {
        w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
    }
    let [mut a, mut b, mut c, mut d, mut e] = *state;
    for (i, &wi) in w.iter().enumerate() {
        let (f, k) = match i {
            0..=19 => ((b & c) | (!b & d), 0x5a82_7999),
            20..=39 => (b ^ c ^ d, 0x6ed9_eba1),
            40..=59 => ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc),
            _ => (b ^ c ^ d, 0xca62_c1d6),
        };
        let t = a
            .rotate_left(5)
            .wrapping_add(f)
            .wrapping_add(e)
            .wrapping_add(k)
            .wrapping_add(wi);
        e = d;
        d = c;
        c = b.rotate_left(30);
        b = a;
        a = t;
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e]) {
        *s = s.wrapping_add(v);
    }
}

/// The SHA-1 digest of `data`.
pub fn digest(data: &[u8]) -> [u8; 20] {
    let mut state = H0;
    let mut blocks = data.chunks_exact(64);
    for block in blocks.by_ref() {
        let mut b = [0u8; 64];
        b.copy_from_slice(block);
        compress(&mut state, &b);
    }
    // Padding: 0x80, zeros, then the message length in bits (big endian),
    // over one or two final blocks.
    let rest = blocks.remainder();
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let end = if rest.len() < 56 { 64 } else { 128 };
    let bits = (data.len() as u64).wrapping_mul(8);
    tail[end - 8..end].copy_from_slice(&bits.to_be_bytes());
    for block in tail[..end].chunks_exact(64) {
        let mut b = [0u8; 64];
        b.copy_from_slice(block);
        compress(&mut state, &b);
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// Lower-case hex, as Redis prints a script's name.
pub fn hex(digest: &[u8; 20]) -> [u8; 40] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 40];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    out
}

/// The digest a script name stands for: exactly 40 hex digits, either case
/// (Redis lower-cases the name it is given). `None` for anything else,
/// which no script can be called.
pub fn parse_hex(text: &[u8]) -> Option<[u8; 20]> {
    if text.len() != 40 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 20];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_of(data: &[u8]) -> String {
        String::from_utf8(hex(&digest(data)).to_vec()).unwrap()
    }

    #[test]
    fn known_vectors() {
        // FIPS 180-2 appendix A and the empty string.
        assert_eq!(hex_of(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(hex_of(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            hex_of(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        assert_eq!(
            hex_of(&vec![b'a'; 1_000_000]),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
        // What Redis 7.0 answers to SCRIPT LOAD "return 1".
        assert_eq!(
            hex_of(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn every_padding_boundary() {
        // Lengths around one and two blocks, against a byte-at-a-time
        // reference: the padding spills into a second block from 56 bytes.
        for n in [0usize, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129] {
            let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
            assert_eq!(digest(&data), reference(&data), "length {n}");
        }
    }

    /// A straightforward second implementation over a padded copy.
    fn reference(data: &[u8]) -> [u8; 20] {
        let mut m = data.to_vec();
        m.push(0x80);
        while m.len() % 64 != 56 {
            m.push(0);
        }
        m.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
        let mut h = H0;
        for block in m.chunks_exact(64) {
            compress(&mut h, block.try_into().unwrap());
        }
        let mut out = [0u8; 20];
        for (i, w) in h.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        out
    }

    #[test]
    fn hex_names_round_trip_in_either_case() {
        let d = digest(b"return 1");
        assert_eq!(parse_hex(&hex(&d)), Some(d));
        assert_eq!(
            parse_hex(b"E0E1F9FABFC9D4800C877A703B823AC0578FF8DB"),
            Some(d)
        );
        assert_eq!(parse_hex(b"e0e1"), None);
        assert_eq!(parse_hex(b"g0e1f9fabfc9d4800c877a703b823ac0578ff8db"), None);
        assert_eq!(parse_hex(&[b'0'; 41]), None);
        assert_eq!(parse_hex(b""), None);
    }
}
