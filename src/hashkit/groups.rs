//! Key placement over master-replica groups exactly as predixy places it
//! in a standalone or Sentinel pool: a group index from the (tagged) key.
//!
//! ```text
//!  key ──tagged()──► part ──GroupHash::hash()──► i64 ──group_of()──► index
//!                                     (one group: 0; random: the caller's number)
//! ```
//!
//! The facts, from predixy's `HashFunc.cpp` and `StandaloneServerPool.cpp`
//! (commit ca1630a):
//!
//! - `crc16` is CRC-16/XMODEM of the part (the table Redis Cluster uses),
//!   with no `% 16384`;
//! - `atol` reads an optional sign and the leading decimal digits into a
//!   C `long`, wrapping on overflow as x86-64 does, and negates it after a
//!   `-`: `12ab` is 12, `abc` and the empty key are 0, `-7` is -7;
//! - modula takes `long idx = hash; idx %= groups.size()`, where the size
//!   is a `size_t`: the hash is read as an unsigned 64-bit number before
//!   the remainder, so `-7` over 5 groups is `(2^64 - 7) % 5 = 4`.
//!
//! Pure: no I/O, no allocation, no randomness of its own.

use super::tagged;
use crate::topology::slot::crc16;

/// A group pool's key hash (predixy's `Hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupHash {
    Crc16,
    Atol,
}

impl GroupHash {
    /// Both, in the order predixy's documentation names them.
    pub const ALL: [GroupHash; 2] = [GroupHash::Atol, GroupHash::Crc16];

    pub fn name(self) -> &'static str {
        match self {
            GroupHash::Crc16 => "crc16",
            GroupHash::Atol => "atol",
        }
    }

    /// predixy reads the name without regard to case.
    pub fn from_name(s: &str) -> Option<GroupHash> {
        GroupHash::ALL
            .into_iter()
            .find(|h| h.name().eq_ignore_ascii_case(s))
    }

    /// The hash of `part` (already cut by the hash tag), as predixy's
    /// `long`.
    #[inline]
    pub fn hash(self, part: &[u8]) -> i64 {
        match self {
            GroupHash::Crc16 => i64::from(crc16(part)),
            GroupHash::Atol => atol(part),
        }
    }
}

/// C's `atol` as predixy writes it: see the module doc.
fn atol(part: &[u8]) -> i64 {
    let negative = part.first() == Some(&b'-');
    let digits = match part.first() {
        Some(b'+' | b'-') => &part[1..],
        _ => part,
    };
    let mut v: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(i64::from(b - b'0'));
    }
    if negative {
        v.wrapping_neg()
    } else {
        v
    }
}

/// The group of `key` among `groups` groups: every key on the one group
/// when there is one; `random` (the caller's number) for distribution
/// random; else the hash of the tagged key, modulo the count as predixy
/// computes it. `groups` is at least 1.
#[inline]
pub fn group_of(
    hash: GroupHash,
    tag: Option<[u8; 2]>,
    random: Option<u32>,
    groups: usize,
    key: &[u8],
) -> usize {
    if groups <= 1 {
        return 0;
    }
    if let Some(r) = random {
        return r as usize % groups;
    }
    (hash.hash(tagged(key, tag)) as u64 % groups as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atol_reads_a_sign_and_leading_digits_as_c_does() {
        assert_eq!(atol(b""), 0);
        assert_eq!(atol(b"abc"), 0);
        assert_eq!(atol(b"12ab"), 12);
        assert_eq!(atol(b"+42"), 42);
        assert_eq!(atol(b"-7"), -7);
        assert_eq!(atol(b"-"), 0);
        assert_eq!(atol(b"--3"), 0);
        assert_eq!(atol(b" 5"), 0, "predixy skips no blanks");
        // 2^63 wraps to i64::MIN, as the C long does on x86-64.
        assert_eq!(atol(b"9223372036854775808"), i64::MIN);
    }

    #[test]
    fn a_negative_hash_is_read_unsigned_before_the_remainder() {
        // (2^64 - 7) % 5 == 4, not -7 % 5 == -2.
        assert_eq!(group_of(GroupHash::Atol, None, None, 5, b"-7"), 4);
        assert_eq!(group_of(GroupHash::Atol, None, None, 5, b"7"), 2);
        assert_eq!(group_of(GroupHash::Atol, None, None, 1, b"-7"), 0);
    }

    #[test]
    fn crc16_has_no_slot_modulo_and_the_tag_cuts_the_key() {
        // CRC-16/XMODEM("123456789") = 0x31C3 = 12739.
        assert_eq!(GroupHash::Crc16.hash(b"123456789"), 12739);
        assert_eq!(
            group_of(GroupHash::Crc16, None, None, 2, b"123456789"),
            12739 % 2
        );
        let tag = Some(*b"{}");
        assert_eq!(
            group_of(GroupHash::Crc16, tag, None, 5, b"a{123456789}b"),
            12739 % 5
        );
        assert_eq!(group_of(GroupHash::Atol, tag, None, 5, b"x{13}"), 3);
        assert_eq!(group_of(GroupHash::Atol, tag, None, 5, b"13{}"), 3);
    }

    #[test]
    fn random_takes_the_callers_number_and_names_round_trip() {
        assert_eq!(group_of(GroupHash::Crc16, None, Some(7), 3, b"k"), 1);
        for h in GroupHash::ALL {
            assert_eq!(GroupHash::from_name(h.name()), Some(h));
        }
        assert_eq!(GroupHash::from_name("CRC16"), Some(GroupHash::Crc16));
        assert_eq!(GroupHash::from_name("fnv1a_64"), None);
    }
}
