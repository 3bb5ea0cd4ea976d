//! A fixed-size log-linear latency histogram, in microseconds.
//!
//! Values below 32 µs each have a bucket of their own; above that every
//! power of two is split into 16 equal buckets, so a bucket is never wider
//! than 1/16 of its lower bound (6.25 %). Values of 2^36 µs (19 hours) and
//! more share the last bucket. That is 528 counters, allocated once per
//! command that is ever used on a worker; recording is an index computation
//! (one leading-zero count, one shift) and one increment.
//!
//! Percentiles are reported as the highest value the bucket holding them
//! can stand for (HdrHistogram's "highest equivalent value"), so a reported
//! p99 is never below the true one.
//!
//! Never: allocate or branch on anything but the value when recording.

/// Bits of sub-bucket resolution per power of two.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Values from 2^MAX_EXP µs on are clamped into the last bucket.
const MAX_EXP: u32 = 36;
/// Number of buckets.
pub const BUCKETS: usize = ((MAX_EXP - SUB_BITS) as u64 * SUB + SUB) as usize;

/// The bucket of value `v`. Branch-free: below 32 the shift is 0 and the
/// bucket is `v` itself; values past the range are clamped first.
#[inline]
pub fn index(v: u64) -> usize {
    let v = v.min((1 << MAX_EXP) - 1);
    // The power of two of `v`, at least SUB_BITS (v | 31 has bit 4 set).
    let e = 63 - (v | (2 * SUB - 1)).leading_zeros();
    let shift = e - SUB_BITS;
    ((u64::from(shift) << SUB_BITS) + (v >> shift)) as usize
}

/// The lowest value of bucket `i`.
pub fn lowest(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        return i;
    }
    let e = i / SUB + u64::from(SUB_BITS) - 1;
    let s = i % SUB + SUB;
    s << (e - u64::from(SUB_BITS))
}

/// The highest value bucket `i` stands for.
pub fn highest(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        return u64::MAX;
    }
    lowest(i + 1) - 1
}

/// Counts per bucket.
#[derive(Clone)]
pub struct Hist {
    counts: Box<[u64; BUCKETS]>,
}

impl Default for Hist {
    fn default() -> Self {
        Hist::new()
    }
}

impl std::fmt::Debug for Hist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hist")
            .field("count", &self.count())
            .finish()
    }
}

impl Hist {
    pub fn new() -> Hist {
        Hist {
            counts: Box::new([0; BUCKETS]),
        }
    }

    #[inline]
    pub fn record(&mut self, v: u64) {
        // `index` is below BUCKETS by construction; `get_mut` keeps even a
        // broken build from panicking here.
        if let Some(c) = self.counts.get_mut(index(v)) {
            *c += 1;
        }
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn clear(&mut self) {
        self.counts.fill(0);
    }

    /// Add another histogram's counts into this one.
    pub fn merge(&mut self, other: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }

    /// The value at percentile `p` (0 to 100): the highest value of the
    /// bucket holding the `ceil(p% of count)`-th smallest value. 0 when
    /// the histogram is empty.
    pub fn percentile(&self, p: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return highest(i);
            }
        }
        highest(BUCKETS - 1)
    }

    /// How many values are at most `bound` (exact when `bound + 1` is the
    /// lowest value of a bucket, as every `2^k - 1` is; otherwise the
    /// bucket straddling `bound` is left out).
    pub fn count_at_most(&self, bound: u64) -> u64 {
        self.counts
            .iter()
            .enumerate()
            .take_while(|&(i, _)| highest(i) <= bound)
            .map(|(_, &c)| c)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range() {
        assert_eq!(BUCKETS, 528);
        for v in 0..5000u64 {
            let i = index(v);
            assert!(lowest(i) <= v && v <= highest(i), "{v} in bucket {i}");
        }
        for i in 0..BUCKETS - 1 {
            assert_eq!(highest(i) + 1, lowest(i + 1), "bucket {i}");
            let width = highest(i) - lowest(i) + 1;
            assert!(width * 16 <= lowest(i).max(16), "bucket {i} too wide");
            assert_eq!(index(lowest(i)), i);
            assert_eq!(index(highest(i)), i);
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        assert_eq!(index(1 << 36), BUCKETS - 1);
        assert_eq!(index((1 << 36) - 1), BUCKETS - 1);
        for k in 5..36 {
            assert_eq!(lowest(index(1 << k)), 1 << k, "2^{k} starts a bucket");
        }
    }

    #[test]
    fn percentiles_are_upper_bounds_of_the_right_bucket() {
        let mut h = Hist::new();
        assert_eq!(h.percentile(50.0), 0);
        for v in 1..=1000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 1000);
        let p50 = h.percentile(50.0);
        assert!((500..=500 + 500 / 16).contains(&p50), "{p50}");
        let p99 = h.percentile(99.0);
        assert!((990..=990 + 990 / 16).contains(&p99), "{p99}");
        assert_eq!(h.percentile(100.0), highest(index(1000)));
        let mut other = Hist::new();
        other.record(20_000);
        h.merge(&other);
        assert_eq!(h.count(), 1001);
        assert_eq!(h.percentile(100.0), highest(index(20_000)));
        assert_eq!(h.count_at_most(31), 31);
        assert_eq!(h.count_at_most((1 << 10) - 1), 1000);
        h.clear();
        assert_eq!(h.count(), 0);
    }
}
