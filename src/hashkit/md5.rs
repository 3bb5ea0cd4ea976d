//! MD5 (RFC 1321), small and dependency free: twemproxy places ketama
//! points at the MD5 of `<server name>-<i>`, and its `md5` key hash is the
//! first four bytes of a key's digest.
//!
//! Why by hand rather than a crate: this is placement only, never
//! security (MD5 is broken for collisions, which does not matter for
//! spreading keys), and RustCrypto's `md-5` brings `digest`,
//! `block-buffer`, `generic-array`, `typenum` and `crypto-common` along
//! for what is about eighty lines here, next to the hand-written SHA-1
//! (`script/sha1.rs`) and SHA-256 (`config/sha256.rs`). Checked against
//! RFC 1321's test suite below and, through the ketama ring and the `md5`
//! hash, against nutcracker itself (`tests/placement_nutcracker.rs`).
//!
//! Invariants: [`digest`] is a pure function of its input and does not
//! allocate. Never: use it to protect anything.

/// Left-rotation amounts, four per round, each used for four steps in a row.
const SHIFTS: [[u32; 4]; 4] = [
    [7, 12, 17, 22],
    [5, 9, 14, 20],
    [4, 11, 16, 23],
    [6, 10, 15, 21],
];

/// Per-step constants: the integer part of 2^32 * |sin(i + 1)| (RFC 1321,
/// section 3.4, table T).
const T: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// Initial state: the words A, B, C, D of RFC 1321, section 3.3.
const H0: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// Processes one 64-byte block into the running state.
fn compress(state: &mut [u32; 4], block: &[u8; 64]) {
    let mut x = [0u32; 16];
    for (i, word) in block.chunks_exact(4).enumerate() {
        x[i] = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
    }
    let [mut a, mut b, mut c, mut d] = *state;
    for i in 0..64 {
        // Each round has its own mixing function and its own order of
        // reading the sixteen message words.
        let round = i / 16;
        let (f, word) = match round {
            0 => ((b & c) | (!b & d), i),
            1 => ((b & d) | (c & !d), (5 * i + 1) % 16),
            2 => (b ^ c ^ d, (3 * i + 5) % 16),
            _ => (c ^ (b | !d), (7 * i) % 16),
        };
        let sum = a.wrapping_add(f).wrapping_add(T[i]).wrapping_add(x[word]);
        let rotated = b.wrapping_add(sum.rotate_left(SHIFTS[round][i % 4]));
        a = d;
        d = c;
        c = b;
        b = rotated;
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d]) {
        *s = s.wrapping_add(v);
    }
}

/// The MD5 digest of `data`.
pub fn digest(data: &[u8]) -> [u8; 16] {
    let mut state = H0;
    let mut blocks = data.chunks_exact(64);
    for block in blocks.by_ref() {
        let mut b = [0u8; 64];
        b.copy_from_slice(block);
        compress(&mut state, &b);
    }
    // Padding: 0x80, zeros, then the message length in bits (little
    // endian, unlike the SHA family), over one or two final blocks.
    let rest = blocks.remainder();
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let end = if rest.len() < 56 { 64 } else { 128 };
    let bits = (data.len() as u64).wrapping_mul(8);
    tail[end - 8..end].copy_from_slice(&bits.to_le_bytes());
    for block in tail[..end].chunks_exact(64) {
        let mut b = [0u8; 64];
        b.copy_from_slice(block);
        compress(&mut state, &b);
    }
    let mut out = [0u8; 16];
    for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_of(data: &[u8]) -> String {
        digest(data).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn rfc_1321_test_suite() {
        // RFC 1321, appendix A.5.
        assert_eq!(hex_of(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex_of(b"a"), "0cc175b9c0f1b6a831c399e269772661");
        assert_eq!(hex_of(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex_of(b"message digest"),
            "f96b697d7cb7938d525a2f31aaf161d0"
        );
        assert_eq!(
            hex_of(b"abcdefghijklmnopqrstuvwxyz"),
            "c3fcd3d76192e4007dfb496cca67e13b"
        );
        assert_eq!(
            hex_of(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
            "d174ab98d277d9f5a5611c2c9f419d9f"
        );
        assert_eq!(
            hex_of(
                b"1234567890123456789012345678901234567890\
                  1234567890123456789012345678901234567890"
            ),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    #[test]
    fn other_known_digests() {
        assert_eq!(
            hex_of(b"The quick brown fox jumps over the lazy dog"),
            "9e107d9d372bb6826bd81d3542a419d6"
        );
        assert_eq!(
            hex_of(&vec![b'a'; 1_000_000]),
            "7707d6ae4e027c70eea2a935c2296f21"
        );
    }

    #[test]
    fn every_padding_boundary() {
        // Lengths around one and two blocks, against a second
        // implementation over a padded copy: the length spills into a
        // second block from 56 bytes on.
        for n in [0usize, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            assert_eq!(digest(&data), reference(&data), "length {n}");
        }
    }

    fn reference(data: &[u8]) -> [u8; 16] {
        let mut m = data.to_vec();
        m.push(0x80);
        while m.len() % 64 != 56 {
            m.push(0);
        }
        m.extend_from_slice(&((data.len() as u64) * 8).to_le_bytes());
        let mut h = H0;
        for block in m.chunks_exact(64) {
            compress(&mut h, block.try_into().unwrap());
        }
        let mut out = [0u8; 16];
        for (i, w) in h.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}
