//! A pool's distribution for one set of live servers: the ketama
//! continuum, the modula slot table, or the list `random` picks from, as
//! nutcracker 0.5.0 builds them (`ketama_update`, `modula_update`,
//! `random_update`) and reads them (`*_dispatch`).
//!
//! ```text
//!  ketama:  for each live server s (sorted order), weight w, of W live in total:
//!             n = points(w, W, live)       C's float/double steps, below
//!             for i in 0 .. n/4:  md5("<name>-<i>") = 16 bytes
//!                                 = four little-endian u32 points, all owned by s
//!           all points sorted by value, ties in insertion order;
//!           hash h -> the first point >= h, past the last: the first point
//!  modula:  live servers fill w consecutive slots each; h -> slot h % W
//!  random:  live servers once each; r -> the (r % live)-th
//! ```
//!
//! Invariants: a ring is immutable once built, and reading it
//! ([`Ring::server_for_hash`], [`Ring::locate`]) neither allocates nor
//! panics; every index it answers is below the number of servers it was
//! built from and names a live server of non-zero weight.

use super::{md5, tagged, Distribution, HashFn};

/// Ketama points per server when all weights are equal (four per MD5).
const KETAMA_POINTS_PER_SERVER: f32 = 160.0;

/// Twemproxy formats a point's label into a 273-byte buffer: labels are
/// cut to 272 bytes (only names of some 260 bytes and more are affected).
const KETAMA_MAX_LABEL: usize = 272;

/// One pool's placement table for one live set. Build a new one whenever
/// the live set changes (nutcracker rebuilds at each ejection and retry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    dist: Distribution,
    /// Servers given to `build`, live or not.
    nserver: usize,
    /// Indices of the live servers of non-zero weight, ascending.
    live: Vec<u32>,
    /// Ketama: point values, ascending. Empty for the other distributions.
    points: Vec<u32>,
    /// Ketama: the server owning `points[i]`.
    owners: Vec<u32>,
    /// Modula: where `live[i]`'s slots end (exclusive), cumulative
    /// weights; the last is the total live weight.
    slot_ends: Vec<u64>,
}

impl Ring {
    /// Builds the table for `servers` (name and weight, in sorted order,
    /// see [`super::sorted_order`]), of which those with `live[i]` true
    /// take part; a missing `live` entry counts as not live. Without
    /// `auto_eject_hosts` nutcracker never takes a server out, dead or
    /// not: pass every server live then.
    ///
    /// Weight 0: nutcracker refuses it when loading its configuration
    /// ("has a zero weight"), so a configuration parser should refuse it
    /// too. Given one anyway, the ring treats that server as not live:
    /// it holds no key and does not count in `live_count`.
    ///
    /// Live weights adding up past `u32::MAX` (where nutcracker's 32-bit
    /// total wraps and its tables overflow) are totalled in 64 bits.
    pub fn build(dist: Distribution, servers: &[(&str, u32)], live: &[bool]) -> Ring {
        let up: Vec<u32> = servers
            .iter()
            .enumerate()
            .filter(|&(i, &(_, weight))| weight > 0 && live.get(i).copied().unwrap_or(false))
            .map(|(i, _)| i as u32)
            .collect();
        let mut ring = Ring {
            dist,
            nserver: servers.len(),
            live: up,
            points: Vec::new(),
            owners: Vec::new(),
            slot_ends: Vec::new(),
        };
        let weight_of = |i: u32| servers.get(i as usize).map_or(0, |&(_, w)| w);
        match dist {
            Distribution::Ketama => {
                let total: u64 = ring.live.iter().map(|&i| u64::from(weight_of(i))).sum();
                let nlive = ring.live.len();
                let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(nlive.saturating_mul(160));
                for &i in &ring.live {
                    let Some(&(name, weight)) = servers.get(i as usize) else {
                        continue;
                    };
                    let n = ketama_points(weight, total, nlive);
                    for p in 0..n / 4 {
                        let digest = md5::digest(&point_label(name, p));
                        for word in digest.chunks_exact(4) {
                            let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                            pairs.push((value, i));
                        }
                    }
                }
                // glibc's qsort, which nutcracker calls, is a merge sort
                // whenever it can allocate its buffer, so equal points keep
                // the order they were made in; Rust's stable sort does the
                // same. A hash equal to a shared value goes to the first.
                pairs.sort_by_key(|&(value, _)| value);
                ring.points = pairs.iter().map(|&(value, _)| value).collect();
                ring.owners = pairs.iter().map(|&(_, owner)| owner).collect();
            }
            Distribution::Modula => {
                let mut end = 0u64;
                ring.slot_ends = ring
                    .live
                    .iter()
                    .map(|&i| {
                        end += u64::from(weight_of(i));
                        end
                    })
                    .collect();
            }
            Distribution::Random => {}
        }
        ring
    }

    /// The server (an index into the sorted list given to `build`) for an
    /// already computed hash; `None` when no server is live. Under
    /// `random`, `hash` is taken as the random number to pick with.
    pub fn server_for_hash(&self, hash: u32) -> Option<usize> {
        let index = match self.dist {
            Distribution::Ketama => {
                let at = self.points.partition_point(|&p| p < hash);
                let at = if at == self.points.len() { 0 } else { at };
                *self.owners.get(at)?
            }
            Distribution::Modula => {
                let total = *self.slot_ends.last()?;
                if total == 0 {
                    return None;
                }
                let slot = u64::from(hash) % total;
                let at = self.slot_ends.partition_point(|&end| end <= slot);
                *self.live.get(at)?
            }
            Distribution::Random => {
                let n = self.live.len() as u64;
                if n == 0 {
                    return None;
                }
                *self.live.get((u64::from(hash) % n) as usize)?
            }
        };
        Some(index as usize)
    }

    /// Where nutcracker sends `key`: a pool of one server answers it
    /// (while live) without hashing; otherwise the part of the key inside
    /// the hash tag (see [`tagged`]) is hashed with `hash`, an empty key
    /// hashing to 0 whatever the function, and the distribution picks.
    /// `random` is used by [`Distribution::Random`] only, which never
    /// hashes the key.
    pub fn locate(
        &self,
        hash: HashFn,
        tag: Option<[u8; 2]>,
        key: &[u8],
        random: u32,
    ) -> Option<usize> {
        if self.nserver == 1 {
            return (!self.live.is_empty()).then_some(0);
        }
        if self.dist == Distribution::Random {
            return self.server_for_hash(random);
        }
        let part = tagged(key, tag);
        let h = if part.is_empty() { 0 } else { hash.hash(part) };
        self.server_for_hash(h)
    }

    /// Live servers (of non-zero weight) in this ring.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }
}

/// A server's ketama points, computed in the types and order twemproxy's
/// C computes them on x86-64: the share of the weight in `float`; times
/// 160, over 4, times the live count, each step rounded to `float`; plus
/// 1e-10 in `double`; back to `float`, `floorf`, times 4.
///
/// The rounding is why 25 servers of equal weight get 156 points each
/// rather than 160: 1/25 in `float` is a little under 0.04, and the
/// product lands just under 40.
fn ketama_points(weight: u32, total: u64, nlive: usize) -> u32 {
    let pct: f32 = weight as f32 / total as f32;
    let scaled: f32 = pct * KETAMA_POINTS_PER_SERVER / 4.0 * nlive as f32;
    let nudged: f32 = (f64::from(scaled) + 0.000_000_000_1) as f32;
    (nudged.floor() * 4.0) as u32
}

/// `<name>-<i>`, as twemproxy prints it: the name up to its first NUL
/// byte (`%.*s` stops there), the whole label cut to 272 bytes.
fn point_label(name: &str, i: u32) -> Vec<u8> {
    let name = name.as_bytes();
    let name = name
        .iter()
        .position(|&b| b == 0)
        .map_or(name, |nul| &name[..nul]);
    let mut label = Vec::with_capacity(name.len() + 11);
    label.extend_from_slice(name);
    label.push(b'-');
    label.extend_from_slice(i.to_string().as_bytes());
    label.truncate(KETAMA_MAX_LABEL);
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    fn equal(n: usize) -> Vec<(String, u32)> {
        (0..n).map(|i| (format!("10.0.0.{i}:6379"), 1)).collect()
    }

    fn refs(servers: &[(String, u32)]) -> Vec<(&str, u32)> {
        servers.iter().map(|(n, w)| (n.as_str(), *w)).collect()
    }

    fn points_of(ring: &Ring, server: usize) -> usize {
        ring.owners
            .iter()
            .filter(|&&o| o as usize == server)
            .count()
    }

    #[test]
    fn equal_weights_give_160_points_except_where_float_rounding_takes_4() {
        let short: Vec<usize> = (1..=100)
            .filter(|&n| ketama_points(1, n as u64, n) != 160)
            .collect();
        // Sizes the issue found by hand; the rest of `short` are sizes
        // like them.
        for n in [25, 47, 50] {
            assert!(short.contains(&n), "{n} not in {short:?}");
        }
        for &n in &short {
            assert_eq!(ketama_points(1, n as u64, n), 156, "{n} servers");
        }
        assert_eq!(ketama_points(1, 1, 1), 160);
        assert_eq!(ketama_points(1, 3, 3), 160);
    }

    /// Compared with twemproxy's expression compiled by gcc for x86-64:
    /// the pool sizes up to 200 where equal weights get 156 points, and a
    /// fold (`acc * 31 + points`) over a grid of weights, totals and live
    /// counts.
    #[test]
    fn point_counts_match_the_c_arithmetic() {
        let short: Vec<usize> = (1..=200)
            .filter(|&n| ketama_points(1, n as u64, n) != 160)
            .collect();
        assert_eq!(
            short,
            [
                25, 47, 50, 55, 61, 71, 94, 100, 107, 109, 110, 115, 122, 142, 159, 163, 188, 193,
                200
            ]
        );
        let mut acc: u32 = 0;
        for nlive in 1..=64usize {
            for w in 1..=8u32 {
                let first = u64::from(w) + nlive as u64 - 1;
                let last = u64::from(w) + (nlive as u64 - 1) * 8;
                for total in first..=last {
                    acc = acc
                        .wrapping_mul(31)
                        .wrapping_add(ketama_points(w, total, nlive));
                }
            }
        }
        assert_eq!(acc, 0xc57f_e674);
    }

    #[test]
    fn twenty_five_equal_servers_hold_156_points_each() {
        let servers = equal(25);
        let ring = Ring::build(Distribution::Ketama, &refs(&servers), &[true; 25]);
        assert_eq!(ring.points.len(), 25 * 156);
        for s in 0..25 {
            assert_eq!(points_of(&ring, s), 156);
        }
        assert!(ring.points.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn weighted_points_follow_the_share_of_live_weight() {
        let servers = [("a", 1), ("b", 2), ("c", 3)];
        let ring = Ring::build(Distribution::Ketama, &servers, &[true; 3]);
        // 160 * 3 * w / 6, rounded down to a multiple of 4.
        assert_eq!(
            [
                points_of(&ring, 0),
                points_of(&ring, 1),
                points_of(&ring, 2)
            ],
            [80, 160, 240]
        );
        // Without "b", weights total 4 over 2 live servers.
        let ring = Ring::build(Distribution::Ketama, &servers, &[true, false, true]);
        assert_eq!(
            [
                points_of(&ring, 0),
                points_of(&ring, 1),
                points_of(&ring, 2)
            ],
            [80, 0, 240]
        );
        assert_eq!(ring.live_count(), 2);
    }

    #[test]
    fn ketama_points_are_the_md5_words_of_each_label() {
        let ring = Ring::build(
            Distribution::Ketama,
            &[("alpha", 1), ("beta", 1)],
            &[true, true],
        );
        let d = md5::digest(b"beta-39");
        for word in d.chunks_exact(4) {
            let v = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            let at = ring.points.partition_point(|&p| p < v);
            assert_eq!(ring.points[at], v);
            assert_eq!(ring.server_for_hash(v), Some(1));
        }
        assert_eq!(ring.points.len(), 320);
    }

    #[test]
    fn a_hash_past_the_last_point_wraps_to_the_first() {
        let ring = Ring::build(
            Distribution::Ketama,
            &[("alpha", 1), ("beta", 1)],
            &[true, true],
        );
        let first = Some(ring.owners[0] as usize);
        let last = *ring.points.last().unwrap();
        assert!(last < u32::MAX);
        assert_eq!(ring.server_for_hash(last + 1), first);
        assert_eq!(ring.server_for_hash(u32::MAX), first);
        assert_eq!(ring.server_for_hash(0), first);
        assert_eq!(ring.server_for_hash(ring.points[0]), first);
        let owner_of_last = Some(*ring.owners.last().unwrap() as usize);
        assert_eq!(ring.server_for_hash(last), owner_of_last);
    }

    #[test]
    fn modula_fills_weight_slots_per_live_server() {
        let servers = [("a", 1), ("b", 2), ("c", 3)];
        let ring = Ring::build(Distribution::Modula, &servers, &[true; 3]);
        let got: Vec<Option<usize>> = (0..7).map(|h| ring.server_for_hash(h)).collect();
        let want = [0, 1, 1, 2, 2, 2, 0].map(Some);
        assert_eq!(got, want);
        let ring = Ring::build(Distribution::Modula, &servers, &[false, true, true]);
        let got: Vec<Option<usize>> = (0..6).map(|h| ring.server_for_hash(h)).collect();
        assert_eq!(got, [1, 1, 2, 2, 2, 1].map(Some));
        assert_eq!(
            ring.server_for_hash(u32::MAX),
            Some([1, 1, 2, 2, 2][(u32::MAX % 5) as usize])
        );
    }

    #[test]
    fn random_picks_among_live_servers_by_the_number_given() {
        let servers = [("a", 1), ("b", 5), ("c", 1)];
        let ring = Ring::build(Distribution::Random, &servers, &[true, false, true]);
        assert_eq!(ring.locate(HashFn::Md5, None, b"k", 0), Some(0));
        assert_eq!(ring.locate(HashFn::Md5, None, b"k", 1), Some(2));
        assert_eq!(ring.locate(HashFn::Md5, None, b"k", 2), Some(0));
        assert_eq!(ring.locate(HashFn::Md5, None, b"other", u32::MAX), Some(2));
    }

    #[test]
    fn no_live_server_answers_none() {
        let servers = [("a", 1), ("b", 1)];
        for dist in [
            Distribution::Ketama,
            Distribution::Modula,
            Distribution::Random,
        ] {
            let ring = Ring::build(dist, &servers, &[false, false]);
            assert_eq!(ring.live_count(), 0);
            assert_eq!(ring.server_for_hash(12345), None);
            assert_eq!(ring.locate(HashFn::Fnv1a_64, None, b"key", 7), None);
            let empty = Ring::build(dist, &[], &[]);
            assert_eq!(empty.locate(HashFn::Fnv1a_64, None, b"key", 7), None);
            assert_eq!(empty.server_for_hash(0), None);
            // `live` shorter than the server list: the rest are not live.
            let short = Ring::build(dist, &servers, &[true]);
            assert_eq!(short.live_count(), 1);
            assert_eq!(short.locate(HashFn::Fnv1a_64, None, b"key", 7), Some(0));
        }
    }

    #[test]
    fn a_one_server_pool_answers_that_server_without_hashing() {
        for dist in [
            Distribution::Ketama,
            Distribution::Modula,
            Distribution::Random,
        ] {
            let ring = Ring::build(dist, &[("only", 3)], &[true]);
            for key in [&b""[..], b"a", b"{tag}x", b"\xff"] {
                assert_eq!(ring.locate(HashFn::Crc32, Some(*b"{}"), key, 99), Some(0));
            }
            let dead = Ring::build(dist, &[("only", 3)], &[false]);
            assert_eq!(dead.locate(HashFn::Crc32, None, b"a", 0), None);
        }
    }

    #[test]
    fn weight_zero_holds_no_key() {
        let servers = [("a", 0), ("b", 1), ("c", 1)];
        for dist in [
            Distribution::Ketama,
            Distribution::Modula,
            Distribution::Random,
        ] {
            let ring = Ring::build(dist, &servers, &[true; 3]);
            assert_eq!(ring.live_count(), 2);
            for h in (0..u32::MAX).step_by(1 << 20) {
                assert_ne!(ring.server_for_hash(h), Some(0), "{dist:?} {h}");
            }
            let all_zero = Ring::build(dist, &[("a", 0), ("b", 0)], &[true, true]);
            assert_eq!(all_zero.locate(HashFn::Md5, None, b"k", 1), None);
        }
    }

    #[test]
    fn huge_weights_stay_bounded() {
        let servers = [("a", u32::MAX), ("b", u32::MAX), ("c", 1)];
        let ring = Ring::build(Distribution::Ketama, &servers, &[true; 3]);
        assert!(ring.points.len() <= 3 * 160 + 12);
        let ring = Ring::build(Distribution::Modula, &servers, &[true; 3]);
        assert_eq!(ring.server_for_hash(u32::MAX), Some(1));
        assert_eq!(ring.server_for_hash(0), Some(0));
    }

    #[test]
    fn empty_keys_hash_to_zero() {
        let servers = equal(5);
        let servers = refs(&servers);
        for dist in [Distribution::Ketama, Distribution::Modula] {
            let ring = Ring::build(dist, &servers, &[true; 5]);
            for f in HashFn::ALL {
                assert_eq!(
                    ring.locate(f, None, b"", 0),
                    ring.server_for_hash(0),
                    "{f:?}"
                );
                // A tag pair that is empty, or a key of tag characters
                // only, is the whole key hashed.
                assert_eq!(
                    ring.locate(f, Some(*b"{}"), b"{}", 0),
                    ring.server_for_hash(f.hash(b"{}"))
                );
            }
        }
    }

    #[test]
    fn tags_hash_only_their_inside() {
        let servers = equal(7);
        let servers = refs(&servers);
        let ring = Ring::build(Distribution::Ketama, &servers, &[true; 7]);
        let f = HashFn::Murmur;
        let at = |key: &[u8], tag| ring.locate(f, tag, key, 0);
        let user = ring.server_for_hash(f.hash(b"user1"));
        assert_eq!(at(b"{user1}.name", Some(*b"{}")), user);
        assert_eq!(at(b"x{user1}y{z}", Some(*b"{}")), user);
        assert_eq!(at(b"$user1$tail", Some(*b"$$")), user);
        assert_eq!(at(b"a[user1]", Some(*b"[]")), user);
        assert_eq!(
            at(b"{user1}.name", None),
            ring.server_for_hash(f.hash(b"{user1}.name"))
        );
    }

    #[test]
    fn labels_are_cut_like_twemproxys_buffer() {
        assert_eq!(point_label("host:6379", 17), b"host:6379-17");
        assert_eq!(point_label("a\0b", 0), b"a-0");
        let long = "n".repeat(300);
        let label = point_label(&long, 3);
        assert_eq!(label.len(), 272);
        assert!(label.iter().all(|&b| b == b'n'));
        let edge = "m".repeat(270);
        assert_eq!(point_label(&edge, 5).len(), 272);
        assert_eq!(&point_label(&edge, 5)[270..], b"-5");
        assert_eq!(&point_label(&edge, 12)[270..], b"-1");
    }

    #[test]
    fn equal_points_go_to_the_first_made() {
        // Two servers with the same label make the same points; the one
        // listed first owns every one of them.
        let ring = Ring::build(
            Distribution::Ketama,
            &[("same", 1), ("same", 1)],
            &[true, true],
        );
        for h in (0..u32::MAX).step_by(1 << 24) {
            assert_eq!(ring.server_for_hash(h), Some(0));
        }
    }
}
