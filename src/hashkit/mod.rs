//! Key placement exactly as twemproxy 0.5.0 (nutcracker) does it, byte for
//! byte: its twelve hash functions, its three distributions, its hash
//! tags, and the server names and order its ketama ring is built from.
//!
//! ```text
//!  servers: lines ──server_name()──► names ──sorted_order()──► indices 0..n
//!  key ──tagged()──► part ──HashFn::hash()──► u32 ──Ring::server_for_hash()──► index
//!                    (empty part: 0)             (ketama | modula | random)
//!  Ring::locate() does the whole line; Ring::build() again for a new live set
//! ```
//!
//! Owns: the arithmetic only. Pure and dependency free: no I/O, no clock,
//! no randomness of its own (`random` takes the caller's number), nothing
//! shared; MD5 is written here (see `md5.rs` for why not a crate).
//! Invariants: for the same servers, live set, hash, tag and key, the
//! index answered is the one nutcracker 0.5.0 on x86-64 Linux picks,
//! which `tests/placement_nutcracker.rs` checks against the real binary;
//! nothing here panics or allocates on the per-key path
//! ([`Ring::locate`], [`Ring::server_for_hash`], [`tagged`],
//! [`HashFn::hash`]). Never: decide liveness (the caller says which
//! servers are ejected), or "fix" one of twemproxy's quirks (signed key
//! bytes, 15-bit crc32, 156-point servers): a pool moved from nutcracker
//! must find its keys where they are.
//!
//! `groups.rs` holds the other proxy's arithmetic: predixy's placement of
//! keys over the master-replica groups of a standalone or Sentinel pool.

mod groups;
mod hash;
mod md5;
mod ring;

pub use groups::{group_of, GroupHash};
pub use ring::Ring;

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
    /// function's own value, which [`Ring::locate`] never uses).
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

/// The port twemproxy leaves out of a server's name, for libmemcached's
/// sake.
const MEMCACHED_PORT: u16 = 11211;

/// Twemproxy's name for a `servers:` line `host:port:weight [name]`: the
/// name when one is given; else `host:port`, or just `host` when the port
/// is 11211. The weight is never part of it. A Unix socket line
/// (`/path:weight`, `host` starting with `/`) is named `/path:` — the
/// colon included, the port ignored — as nutcracker names it.
///
/// Nutcracker copies the port as written in the file; this prints the
/// number, so a port written with leading zeros (`:06379`) is the one
/// case where the caller must pass the name itself.
pub fn server_name(host: &str, port: u16, explicit: Option<&str>) -> String {
    match explicit {
        Some(name) => name.to_string(),
        None if host.starts_with('/') => format!("{host}:"),
        None if port == MEMCACHED_PORT => host.to_string(),
        None => format!("{host}:{port}"),
    }
}

/// The order twemproxy indexes a pool's servers in, as indices into
/// `names`: shorter names first, names of one length by their bytes as
/// unsigned (C's `strncmp` over the length, which also stops at a NUL
/// both share). Equal names keep their order; nutcracker refuses a pool
/// with two servers of one name.
pub fn sorted_order(names: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| name_cmp(names[a].as_bytes(), names[b].as_bytes()));
    order
}

/// Twemproxy's `string_compare`: length first, then `strncmp`.
fn name_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| {
        for (&x, &y) in a.iter().zip(b) {
            if x != y {
                return x.cmp(&y);
            }
            if x == 0 {
                break;
            }
        }
        std::cmp::Ordering::Equal
    })
}

/// The part of `key` hashed under hash tag `tag` (`[open, close]`): the
/// bytes between the first `open` and the first `close` after it, when
/// both are there and the part between is not empty; the whole key
/// otherwise. `open` and `close` may be the same byte (`$$`).
pub fn tagged(key: &[u8], tag: Option<[u8; 2]>) -> &[u8] {
    let Some([open, close]) = tag else {
        return key;
    };
    let Some(start) = key.iter().position(|&b| b == open) else {
        return key;
    };
    let inside = &key[start + 1..];
    match inside.iter().position(|&b| b == close) {
        Some(end) if end > 0 => &inside[..end],
        _ => key,
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

    #[test]
    fn server_names_follow_twemproxy() {
        assert_eq!(server_name("127.0.0.1", 6379, None), "127.0.0.1:6379");
        assert_eq!(server_name("127.0.0.1", 11211, None), "127.0.0.1");
        assert_eq!(server_name("cache-1", 6379, Some("alpha")), "alpha");
        assert_eq!(server_name("cache-1", 11211, Some("alpha")), "alpha");
        assert_eq!(server_name("/tmp/redis.sock", 0, None), "/tmp/redis.sock:");
    }

    #[test]
    fn servers_sort_shorter_names_first_then_bytewise() {
        let names = [
            "zeta",
            "alpha",
            "b",
            "10.0.0.1:6379",
            "9.0.0.1:6379",
            "beta",
        ];
        let order = sorted_order(&names);
        let sorted: Vec<&str> = order.iter().map(|&i| names[i]).collect();
        assert_eq!(
            sorted,
            [
                "b",
                "beta",
                "zeta",
                "alpha",
                "9.0.0.1:6379",
                "10.0.0.1:6379"
            ]
        );
        // Unsigned bytes: 0xc3 ("é") sorts after 'z'.
        let names = ["\u{e9}", "zz", "a"];
        assert_eq!(sorted_order(&names), [2, 1, 0]);
        // Equal names (nutcracker refuses them) keep their order.
        assert_eq!(sorted_order(&["x", "x", "a"]), [2, 0, 1]);
        assert_eq!(sorted_order(&[]), Vec::<usize>::new());
    }

    #[test]
    fn tags_pick_the_inside_of_the_first_pair() {
        let braces = Some(*b"{}");
        assert_eq!(tagged(b"{user}.name", braces), b"user");
        assert_eq!(tagged(b"pre{user}post{other}", braces), b"user");
        assert_eq!(tagged(b"{user", braces), b"{user");
        assert_eq!(tagged(b"user}", braces), b"user}");
        assert_eq!(tagged(b"}user{", braces), b"}user{");
        // An empty tag hashes the whole key, even if a later one is not.
        assert_eq!(tagged(b"{}user", braces), b"{}user");
        assert_eq!(tagged(b"{}{user}", braces), b"{}{user}");
        // The close is searched after the first open only.
        assert_eq!(tagged(b"{{user}", braces), b"{user");
        assert_eq!(tagged(b"$a$b$", Some(*b"$$")), b"a");
        assert_eq!(tagged(b"$$a$", Some(*b"$$")), b"$$a$");
        assert_eq!(tagged(b"", braces), b"");
        assert_eq!(tagged(b"{x}", None), b"{x}");
        assert_eq!(tagged(b"\xff{\x80}", braces), b"\x80");
    }
}
