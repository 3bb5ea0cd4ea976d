//! Key-to-slot mapping for tests, written independently of mithril's
//! `topology` code: CRC16 (XMODEM: polynomial 0x1021, initial value 0, no
//! reflection) of the key, or of its hash tag, modulo 16384.
//!
//! The hash tag is what lies between the first `{` and the first `}` after it,
//! and only when that is non-empty; otherwise the whole key is hashed.
//! Never: share a table or a helper with the code under test.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

pub const SLOTS: u16 = 16384;

pub fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that decides its slot.
fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let after = &key[open + 1..];
        if let Some(close) = after.iter().position(|&b| b == b'}') {
            if close > 0 {
                return &after[..close];
            }
        }
    }
    key
}

/// The cluster slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16_xmodem(hashed_part(key)) % SLOTS
}

/// A key starting with `prefix` (followed by decimal digits) that hashes to
/// `slot`. The first call for a prefix fills a table for all 16384 slots
/// (about 170k hashes), later calls are lookups. Panics if `slot` is out of
/// range, or if `prefix` carries a hash tag for another slot.
pub fn key_for_slot(slot: u16, prefix: &str) -> String {
    assert!(slot < SLOTS, "key_for_slot: slot {slot} is out of range");
    if hashed_part(prefix.as_bytes()) != prefix.as_bytes() {
        // The tag in the prefix fixes the slot whatever follows it.
        let key = format!("{prefix}0");
        assert_eq!(
            key_slot(key.as_bytes()),
            slot,
            "key_for_slot: prefix {prefix:?} has a hash tag for another slot"
        );
        return key;
    }
    static TABLES: OnceLock<Mutex<HashMap<String, Vec<String>>>> = OnceLock::new();
    let mut tables = TABLES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let table = tables.entry(prefix.to_string()).or_insert_with(|| {
        let mut found: Vec<Option<String>> = vec![None; usize::from(SLOTS)];
        let mut missing = usize::from(SLOTS);
        let mut i: u64 = 0;
        while missing > 0 {
            assert!(
                i < 50_000_000,
                "key_for_slot: cannot cover every slot with {prefix:?}"
            );
            let key = format!("{prefix}{i}");
            let s = usize::from(key_slot(key.as_bytes()));
            if found[s].is_none() {
                found[s] = Some(key);
                missing -= 1;
            }
            i += 1;
        }
        found.into_iter().map(Option::unwrap_or_default).collect()
    });
    table[usize::from(slot)].clone()
}
