//! Key placement as twemproxy 0.5.0 (nutcracker) does it, byte for byte.
//! This first part: its twelve key hashes, and the names of its hashes and
//! distributions.
//!
//! Owns: the arithmetic only. Pure and dependency free: no I/O, nothing
//! shared; MD5 is written here (see `md5.rs` for why not a crate).
//! Invariants: each hash gives the value nutcracker 0.5.0 computes on
//! x86-64 Linux; [`HashFn::hash`] neither panics nor allocates. Never:
//! "fix" one of twemproxy's quirks (signed key bytes, 15-bit crc32): a
//! pool moved from nutcracker must find its keys where they are.

mod hash;
mod md5;

/// A key hash, as named in a pool's `hash:` directive.
// `Fnv1a_64` and `Fnv1a_32` keep the digits apart as twemproxy's names do.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashFn {
    OneAtATime,
    Md5,
    Crc16,
    Crc32,
    Crc32a,
    Fnv1_64,
    Fnv1a_64,
    Fnv1_32,
    Fnv1a_32,
    Hsieh,
    Murmur,
    Jenkins,
}

impl HashFn {
    /// Every hash, in twemproxy's order.
    pub const ALL: [HashFn; 12] = [
        HashFn::OneAtATime,
        HashFn::Md5,
        HashFn::Crc16,
        HashFn::Crc32,
        HashFn::Crc32a,
        HashFn::Fnv1_64,
        HashFn::Fnv1a_64,
        HashFn::Fnv1_32,
        HashFn::Fnv1a_32,
        HashFn::Hsieh,
        HashFn::Murmur,
        HashFn::Jenkins,
    ];

    /// Twemproxy's default (`fnv1a_64`).
    pub const DEFAULT: HashFn = HashFn::Fnv1a_64;

    /// The name as twemproxy spells it.
    pub fn name(self) -> &'static str {
        match self {
            HashFn::OneAtATime => "one_at_a_time",
            HashFn::Md5 => "md5",
            HashFn::Crc16 => "crc16",
            HashFn::Crc32 => "crc32",
            HashFn::Crc32a => "crc32a",
            HashFn::Fnv1_64 => "fnv1_64",
            HashFn::Fnv1a_64 => "fnv1a_64",
            HashFn::Fnv1_32 => "fnv1_32",
            HashFn::Fnv1a_32 => "fnv1a_32",
            HashFn::Hsieh => "hsieh",
            HashFn::Murmur => "murmur",
            HashFn::Jenkins => "jenkins",
        }
    }

    /// The hash a `hash:` value names. Nutcracker compares the whole value
    /// byte for byte, so the match is exact: case matters.
    pub fn from_name(s: &str) -> Option<HashFn> {
        HashFn::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The hash of `key` (the whole slice; an empty key gets the
    /// function's own value; twemproxy places an empty key without hashing it).
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            HashFn::OneAtATime => hash::one_at_a_time(key),
            HashFn::Md5 => hash::md5(key),
            HashFn::Crc16 => hash::crc16(key),
            HashFn::Crc32 => hash::crc32(key),
            HashFn::Crc32a => hash::crc32a(key),
            HashFn::Fnv1_64 => hash::fnv1_64(key),
            HashFn::Fnv1a_64 => hash::fnv1a_64(key),
            HashFn::Fnv1_32 => hash::fnv1_32(key),
            HashFn::Fnv1a_32 => hash::fnv1a_32(key),
            HashFn::Hsieh => hash::hsieh(key),
            HashFn::Murmur => hash::murmur(key),
            HashFn::Jenkins => hash::jenkins(key),
        }
    }
}

/// How a pool spreads keys over its servers (`distribution:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distribution {
    Ketama,
    Modula,
    Random,
}

impl Distribution {
    /// Every distribution, in twemproxy's order.
    pub const ALL: [Distribution; 3] = [
        Distribution::Ketama,
        Distribution::Modula,
        Distribution::Random,
    ];

    /// Twemproxy's default (`ketama`).
    pub const DEFAULT: Distribution = Distribution::Ketama;

    /// The name as twemproxy spells it.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Ketama => "ketama",
            Distribution::Modula => "modula",
            Distribution::Random => "random",
        }
    }

    /// The distribution a `distribution:` value names; exact, as
    /// [`HashFn::from_name`].
    pub fn from_name(s: &str) -> Option<Distribution> {
        Distribution::ALL.into_iter().find(|d| d.name() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_exactly() {
        for f in HashFn::ALL {
            assert_eq!(HashFn::from_name(f.name()), Some(f));
        }
        for d in Distribution::ALL {
            assert_eq!(Distribution::from_name(d.name()), Some(d));
        }
        assert_eq!(HashFn::from_name("FNV1A_64"), None);
        assert_eq!(HashFn::from_name("fnv1a_64 "), None);
        assert_eq!(HashFn::from_name("fnv1a"), None);
        assert_eq!(HashFn::from_name(""), None);
        assert_eq!(Distribution::from_name("Ketama"), None);
        assert_eq!(Distribution::from_name("consistent"), None);
        assert_eq!(HashFn::DEFAULT.name(), "fnv1a_64");
        assert_eq!(Distribution::DEFAULT.name(), "ketama");
        let names: Vec<&str> = HashFn::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "one_at_a_time",
                "md5",
                "crc16",
                "crc32",
                "crc32a",
                "fnv1_64",
                "fnv1a_64",
                "fnv1_32",
                "fnv1a_32",
                "hsieh",
                "murmur",
                "jenkins"
            ]
        );
    }
}
