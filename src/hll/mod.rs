//! HyperLogLog strings as Redis stores them, and the union of several.
//!
//! Owns the arithmetic of a cross-slot PFCOUNT: reading the string a node
//! returns for GET of a key that PFADD wrote, folding it into a union
//! (the largest value of each register, as Redis's multi-key PFCOUNT
//! does), and Redis 7's estimate of the union's cardinality (Otmar Ertl's
//! estimator, "New cardinality estimation algorithms for HyperLogLog
//! sketches", arXiv:1702.01284).
//!
//! ```text
//!  header, 16 bytes:  "HYLL" | encoding | 3 unused | cached count (8, ignored)
//!  dense  (0):  16384 registers of 6 bits, least significant bits first,
//!               exactly 12288 bytes after the header
//!  sparse (1):  runs of registers, one opcode after the other
//!               00xxxxxx           ZERO   xxxxxx + 1 registers at 0
//!               01xxxxxx yyyyyyyy  XZERO  xxxxxxyyyyyyyy + 1 registers at 0
//!               1vvvvvxx           VAL    xx + 1 registers at vvvvv + 1
//! ```
//!
//! Invariant: a union answers what `PFCOUNT` of the same keys answers on
//! one server — the same checks in the same order, the same error for
//! each, the same floating-point steps in the same order (so the same
//! rounding). Pure: no I/O, no allocation but the union's registers.
//! Never: read past the end of an input string, whatever its opcodes say.

#[cfg(test)]
mod tests;

/// Bits of the hash that pick a register.
const P: u32 = 14;
/// Bits left for the run of zeros (a register holds at most `Q + 1`).
const Q: usize = 64 - P as usize;
/// Registers per HyperLogLog.
pub const REGISTERS: usize = 1 << P;
/// Bits per register in the dense encoding.
const BITS: usize = 6;
const REGISTER_MAX: u32 = (1 << BITS) - 1;
const HEADER: usize = 16;
/// The exact length of a dense HyperLogLog string.
pub const DENSE_LEN: usize = HEADER + (REGISTERS * BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
/// 0.5 / ln(2) (0.721347520444481703680, as the nearest f64): the
/// estimator's constant for an infinite number of registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// The reply to a string that is not a HyperLogLog (too short, another
/// magic, an unknown encoding, a dense string of the wrong length).
pub const ERR_NOT_HLL: &[u8] = b"-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
/// The reply to a sparse HyperLogLog whose runs do not add up to
/// [`REGISTERS`].
pub const ERR_CORRUPT: &[u8] = b"-INVALIDOBJ Corrupted HLL object detected\r\n";

/// Why a string could not be merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Not a HyperLogLog string at all: refused before merging.
    NotHll,
    /// A sparse string whose runs cover more or fewer than [`REGISTERS`]
    /// registers.
    Corrupt,
}

impl Invalid {
    /// The error reply a server gives for it (RESP, CRLF included).
    pub fn reply(self) -> &'static [u8] {
        match self {
            Invalid::NotHll => ERR_NOT_HLL,
            Invalid::Corrupt => ERR_CORRUPT,
        }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invalid::NotHll => "not a HyperLogLog string",
            Invalid::Corrupt => "corrupted sparse HyperLogLog",
        })
    }
}

/// The union of the HyperLogLogs merged so far: the largest value seen
/// for each register (an empty union counts 0, as a missing key does).
pub struct Union {
    max: Box<[u8; REGISTERS]>,
}

impl Default for Union {
    fn default() -> Self {
        Self::new()
    }
}

impl Union {
    pub fn new() -> Union {
        Union {
            max: Box::new([0; REGISTERS]),
        }
    }

    /// Fold one HyperLogLog string into the union. On error the union
    /// may hold part of that string's registers; the caller answers the
    /// error and drops the union, as a server does.
    pub fn merge(&mut self, hll: &[u8]) -> Result<(), Invalid> {
        if hll.len() < HEADER || &hll[..4] != b"HYLL" {
            return Err(Invalid::NotHll);
        }
        match hll[4] {
            DENSE if hll.len() == DENSE_LEN => {
                self.merge_dense(&hll[HEADER..]);
                Ok(())
            }
            SPARSE => self.merge_sparse(&hll[HEADER..]),
            _ => Err(Invalid::NotHll),
        }
    }

    fn merge_dense(&mut self, registers: &[u8]) {
        for (i, max) in self.max.iter_mut().enumerate() {
            let byte = i * BITS / 8;
            let shift = (i * BITS) & 7;
            let low = u32::from(registers.get(byte).copied().unwrap_or(0));
            // The last register ends inside the last byte; what lies
            // beyond it (a server's terminating zero) adds nothing.
            let high = u32::from(registers.get(byte + 1).copied().unwrap_or(0));
            let value = ((low >> shift) | (high << (8 - shift))) & REGISTER_MAX;
            *max = (*max).max(value as u8);
        }
    }

    fn merge_sparse(&mut self, ops: &[u8]) -> Result<(), Invalid> {
        // Registers covered so far: the runs must add up to exactly
        // REGISTERS, and a run that would pass the end is corrupt at once,
        // whatever follows it. (So the redis-server 7.0.15 this was checked
        // against answers, a build with the hyperloglog fixes of 2025; the
        // older code ignored a VAL past an exact end.)
        let mut at = 0usize;
        let mut p = 0;
        while let Some(&op) = ops.get(p) {
            let run = match op & 0xc0 {
                0x00 => {
                    p += 1;
                    usize::from(op & 0x3f) + 1
                }
                0x40 => {
                    // A server reads the second byte even when the string
                    // ends after the first (its terminating zero).
                    let low = ops.get(p + 1).copied().unwrap_or(0);
                    p += 2;
                    (usize::from(op & 0x3f) << 8 | usize::from(low)) + 1
                }
                _ => {
                    let run = usize::from(op & 0x03) + 1;
                    let value = ((op >> 2) & 0x1f) + 1;
                    let regs = self.max.get_mut(at..at + run).ok_or(Invalid::Corrupt)?;
                    for max in regs {
                        *max = (*max).max(value);
                    }
                    p += 1;
                    run
                }
            };
            at += run;
            if at > REGISTERS {
                return Err(Invalid::Corrupt);
            }
        }
        if at == REGISTERS {
            Ok(())
        } else {
            Err(Invalid::Corrupt)
        }
    }

    /// The estimated cardinality of the union, as a server answers it.
    pub fn count(&self) -> i64 {
        // Registers by value. Values above Q + 1 cannot come from a hash,
        // only from a crafted dense string; like a server, count them in
        // the histogram and leave them out of the estimate.
        let mut histogram = [0u32; 64];
        for &r in self.max.iter() {
            histogram[usize::from(r & 63)] += 1;
        }
        estimate(&histogram)
    }
}

/// Ertl's estimate from the register histogram, step for step as Redis 7
/// computes it (the rounding of each step matters for an exact answer).
fn estimate(histogram: &[u32; 64]) -> i64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histogram[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(histogram[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    // Rounded half away from zero; 0 when every register is 0 (z is +inf).
    // A server rounds with llroundl, which gives i64::MIN for a value past
    // i64::MAX (only crafted registers get there: z near 0), and answers
    // that; so does this.
    let e = (ALPHA_INF * m * m / z).round();
    if e < TWO_POW_63 {
        e as i64
    } else {
        i64::MIN
    }
}

/// 2^63, the first value a signed 64-bit integer cannot hold.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Ertl's sigma: x + sum over k >= 1 of x^(2^k) * 2^(k-1).
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// Ertl's tau: (1 - x - sum over k >= 1 of (1 - x^(2^-k))^2 * 2^-k) / 3.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if z == before {
            return z / 3.0;
        }
    }
}
