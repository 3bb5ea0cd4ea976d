//! What a feed hands its client before the masters' streams: a new
//! replication id (FULLRESYNC's), and the empty RDB, the smallest file a
//! Redis 7.0 replica loads, with its checksum computed at compile time.

/// The replication id a PSYNC client is given: 40 hex digits, new each time.
pub(super) fn new_replid() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(out.len());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// The smallest RDB a Redis 7.0 replica loads: the version 10 header, the
/// EOF opcode and the CRC64 of both (little-endian). Redis 7.0.15 writes
/// aux fields too (redis-ver, ctime, ...); none is required to load.
pub const EMPTY_RDB: &[u8] = &empty_rdb();

const fn empty_rdb() -> [u8; 18] {
    let mut out = *b"REDIS0010\xff\0\0\0\0\0\0\0\0";
    let crc = crc64(&out, 10).to_le_bytes();
    let mut i = 0;
    while i < 8 {
        out[10 + i] = crc[i];
        i += 1;
    }
    out
}

/// Redis's CRC64 (Jones polynomial, reflected, no final xor) of
/// `data[..len]`, bit by bit: computed once, at compile time.
const fn crc64(data: &[u8], len: usize) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 reflected
    let mut crc = 0u64;
    let mut i = 0;
    while i < len {
        crc ^= data[i] as u64;
        let mut b = 0;
        while b < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            b += 1;
        }
        i += 1;
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_s() {
        // Redis's crc64 test vector (src/crc64.c).
        assert_eq!(crc64(b"123456789", 9), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn the_empty_rdb() {
        assert_eq!(&EMPTY_RDB[..10], b"REDIS0010\xff");
        assert_eq!(EMPTY_RDB.len(), 18);
        assert_eq!(
            u64::from_le_bytes(EMPTY_RDB[10..].try_into().unwrap()),
            crc64(EMPTY_RDB, 10)
        );
    }
}
