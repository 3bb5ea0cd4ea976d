//! Against strings a real redis-server wrote and the counts it gave for
//! them (testdata/README says how they were made).

use super::*;

const SPARSE_A: &[u8] = include_bytes!("testdata/sparse-a.hll");
const SPARSE_B: &[u8] = include_bytes!("testdata/sparse-b.hll");
const DENSE_A: &[u8] = include_bytes!("testdata/dense-a.hll");
const DENSE_B: &[u8] = include_bytes!("testdata/dense-b.hll");
const EMPTY: &[u8] = include_bytes!("testdata/empty.hll");

fn union_of(hlls: &[&[u8]]) -> Result<i64, Invalid> {
    let mut u = Union::new();
    for h in hlls {
        u.merge(h)?;
    }
    Ok(u.count())
}

/// A string of the given encoding with `body` after the header.
fn hll(encoding: u8, body: &[u8]) -> Vec<u8> {
    let mut v = b"HYLL".to_vec();
    v.push(encoding);
    v.extend_from_slice(&[0; 11]);
    v.extend_from_slice(body);
    v
}

/// The dense string holding `registers` (6 bits each, low bits first).
fn dense_of(registers: &[u8; REGISTERS]) -> Vec<u8> {
    let mut body = vec![0u8; DENSE_LEN - HEADER];
    for (i, &r) in registers.iter().enumerate() {
        let bit = i * BITS;
        let value = u16::from(r) << (bit & 7);
        body[bit / 8] |= value as u8;
        if let Some(next) = body.get_mut(bit / 8 + 1) {
            *next |= (value >> 8) as u8;
        }
    }
    hll(DENSE, &body)
}

#[test]
fn the_test_strings_are_what_they_claim() {
    for (name, h, encoding) in [
        ("sparse-a", SPARSE_A, SPARSE),
        ("sparse-b", SPARSE_B, SPARSE),
        ("empty", EMPTY, SPARSE),
        ("dense-a", DENSE_A, DENSE),
        ("dense-b", DENSE_B, DENSE),
    ] {
        assert_eq!(&h[..4], b"HYLL", "{name}");
        assert_eq!(h[4], encoding, "{name}");
    }
    assert_eq!(DENSE_A.len(), DENSE_LEN);
    assert_eq!(DENSE_LEN, 12304);
    assert_eq!(EMPTY, &hll(SPARSE, &[0x7f, 0xff])[..], "XZERO:16384");
}

#[test]
fn one_string_counts_as_the_server_counted_it() {
    assert_eq!(union_of(&[SPARSE_A]), Ok(99));
    assert_eq!(union_of(&[SPARSE_B]), Ok(99));
    assert_eq!(union_of(&[DENSE_A]), Ok(20096));
    assert_eq!(union_of(&[DENSE_B]), Ok(20164));
    assert_eq!(union_of(&[EMPTY]), Ok(0));
    assert_eq!(union_of(&[]), Ok(0), "no key at all");
}

#[test]
fn unions_count_as_the_server_counted_them() {
    let cases: [(&[&[u8]], i64); 7] = [
        (&[SPARSE_A, SPARSE_B], 149),
        (&[DENSE_A, DENSE_B], 30037),
        (&[SPARSE_A, DENSE_A], 20205),
        (&[SPARSE_B, DENSE_B], 20242),
        (&[SPARSE_A, SPARSE_B, DENSE_A, DENSE_B], 30168),
        (&[SPARSE_A, EMPTY], 99),
        (&[SPARSE_A, SPARSE_A], 99),
    ];
    for (hlls, want) in cases {
        assert_eq!(union_of(hlls), Ok(want));
        // The union does not depend on the order of the keys.
        let reversed: Vec<&[u8]> = hlls.iter().rev().copied().collect();
        assert_eq!(union_of(&reversed), Ok(want));
    }
}

#[test]
fn sparse_and_dense_of_the_same_registers_merge_alike() {
    for sparse in [SPARSE_A, SPARSE_B, EMPTY] {
        let mut from_sparse = Union::new();
        from_sparse.merge(sparse).unwrap();
        let dense = dense_of(&from_sparse.max);
        let mut from_dense = Union::new();
        from_dense.merge(&dense).unwrap();
        assert!(from_sparse.max[..] == from_dense.max[..]);
        assert_eq!(from_sparse.count(), from_dense.count());
    }
    // The last registers, whose bits end the dense string.
    let mut registers = [0u8; REGISTERS];
    registers[REGISTERS - 1] = 63;
    registers[REGISTERS - 2] = 17;
    registers[REGISTERS - 4] = 1;
    let mut u = Union::new();
    u.merge(&dense_of(&registers)).unwrap();
    assert!(u.max[..] == registers[..]);
}

#[test]
fn sparse_opcodes_decode_to_their_registers() {
    // XZERO:1000, VAL:2x1, ZERO:19, VAL:3x2, XZERO:15362 (the example of
    // Redis's format notes).
    let ops = [
        0x40 | (999 >> 8) as u8,
        (999 & 0xff) as u8,
        0x80 | (1 << 2),
        18,
        0x80 | (2 << 2) | 1,
        0x40 | (15361 >> 8) as u8,
        (15361 & 0xff) as u8,
    ];
    let mut u = Union::new();
    u.merge(&hll(SPARSE, &ops)).unwrap();
    let set: Vec<(usize, u8)> = u
        .max
        .iter()
        .enumerate()
        .filter(|(_, &r)| r != 0)
        .map(|(i, &r)| (i, r))
        .collect();
    assert_eq!(set, [(1000, 2), (1020, 3), (1021, 3)]);
    // A VAL run of 4 that ends exactly at the last register is valid; the
    // maximum of two merged values wins.
    let mut u = Union::new();
    u.merge(&hll(
        SPARSE,
        &[0x40 | (16379 >> 8) as u8, 0xfb, 0x80 | (4 << 2) | 3],
    ))
    .unwrap();
    u.merge(&hll(
        SPARSE,
        &[0x40 | (16382 >> 8) as u8, 0xfe, 0x80 | (1 << 2)],
    ))
    .unwrap();
    assert_eq!(u.max[REGISTERS - 5..], [0, 5, 5, 5, 5]);
    u.merge(&hll(
        SPARSE,
        &[0x40 | (16382 >> 8) as u8, 0xfe, 0x80 | (9 << 2)],
    ))
    .unwrap();
    assert_eq!(u.max[REGISTERS - 5..], [0, 5, 5, 5, 10]);
}

#[test]
fn strings_that_are_not_hyperloglogs_are_refused() {
    let mut bad_magic = SPARSE_A.to_vec();
    bad_magic[3] = b'l';
    let mut bad_encoding = EMPTY.to_vec();
    bad_encoding[4] = 2;
    let mut raw_encoding = EMPTY.to_vec();
    raw_encoding[4] = 255; // a server's internal-only encoding
    let not_hll: [(&str, &[u8]); 8] = [
        ("empty string", b""),
        ("plain text", b"hello world, not an hll"),
        ("short header", &EMPTY[..HEADER - 1]),
        ("magic", &bad_magic),
        ("encoding", &bad_encoding),
        ("raw encoding", &raw_encoding),
        ("dense, a byte short", &DENSE_A[..DENSE_LEN - 1]),
        ("dense, a byte long", &[DENSE_A, &[0]].concat()),
    ];
    for (name, h) in not_hll {
        assert_eq!(Union::new().merge(h), Err(Invalid::NotHll), "{name}");
    }
    assert_eq!(
        Invalid::NotHll.reply(),
        b"-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n"
    );
}

#[test]
fn sparse_strings_that_miscount_their_registers_are_corrupt() {
    // Each refused by the server too (PFCOUNT of it and a missing key).
    let corrupt: [(&str, &[u8]); 10] = [
        ("no opcodes", &[]),
        ("one register short", &[0x7f, 0xfe]),
        ("XZERO:1 only", &[0x40, 0x00]),
        ("two XZERO:8193", &[0x60, 0x00, 0x60, 0x00]),
        ("a ZERO after the end", &[0x7f, 0xff, 0x00]),
        ("an XZERO after the end", &[0x7f, 0xff, 0x40, 0x00]),
        ("a VAL past the end", &[0x7f, 0xfe, 0x80 | 1]),
        ("a VAL after the end", &[0x7f, 0xff, 0x80]),
        ("past the end, then short", &[0x7f, 0xff, 0x7f, 0xff]),
        // The second byte of the XZERO is missing: read as 0, the run
        // is (0x3f << 8) + 1 = 16129 registers.
        ("cut XZERO", &[0x7f]),
    ];
    for (name, ops) in corrupt {
        let h = hll(SPARSE, ops);
        assert_eq!(Union::new().merge(&h), Err(Invalid::Corrupt), "{name}");
    }
    // ... but XZERO:255 and then a cut XZERO make 16384: the server
    // counts it (0).
    assert_eq!(union_of(&[&hll(SPARSE, &[0x40, 0xfe, 0x7f])]), Ok(0));
    // XZERO:16380, VAL:4x4 ends exactly at the end: the server counts 4.
    assert_eq!(union_of(&[&hll(SPARSE, &[0x7f, 0xfb, 0x8f])]), Ok(4));
    assert_eq!(
        Invalid::Corrupt.reply(),
        b"-INVALIDOBJ Corrupted HLL object detected\r\n"
    );
}

#[test]
fn the_estimate_matches_the_server_at_its_edges() {
    assert_eq!(Union::new().count(), 0);
    // Crafted dense strings and the server's answers to PFCOUNT of each
    // and a missing key. From Q + 1 = 51 up, a register leaves the
    // estimate; z then reaches 0 (or nearly), the estimate passes
    // i64::MAX, and the server's llroundl answers i64::MIN.
    let mut half = [0u8; REGISTERS];
    half[..REGISTERS / 2].fill(52);
    let cases: [(&str, [u8; REGISTERS], i64); 5] = [
        ("all 1", [1; REGISTERS], 23637),
        ("half 52", half, 13268),
        ("all 50", [50; REGISTERS], i64::MIN),
        ("all 51", [51; REGISTERS], i64::MIN),
        ("all 63", [63; REGISTERS], i64::MIN),
    ];
    for (name, registers, want) in cases {
        assert_eq!(union_of(&[&dense_of(&registers)]), Ok(want), "{name}");
    }
}
