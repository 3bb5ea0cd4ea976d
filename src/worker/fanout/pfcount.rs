//! Cross-slot PFCOUNT: the cardinality of the union of the HyperLogLogs,
//! as one server counts it, not the sum of per-slot counts. Each key's
//! HLL string is read with a GET of its own (one part per key), merged
//! register by register as the parts arrive, and the union estimated once
//! the last is in (`crate::hll`).
//!
//! Invariants: a missing key is an empty set; every string is merged, even
//! once another key failed, so that the error answered is the first bad
//! key's in key order (WRONGTYPE, or INVALIDOBJ for a corrupt HLL), as on
//! a server, whatever order the replies arrive in.
//!
//! Never: answer before every key's part is in.

use super::{bulk_body, ERR_BAD_PART};
use crate::command::Args;
use crate::resp::encode::bulk_into;
use crate::session::ring::{Fold, Merge};
use crate::worker::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};

/// The merge state of a PFCOUNT union over `keys` keys (one part each).
pub(in crate::worker) fn union_merge(keys: usize) -> Merge {
    let mut m = Merge::new(Fold::Union, keys as u32);
    m.fold.hll = Some(crate::hll::Union::new());
    m.fold.items = vec![Bytes::new(); keys];
    m
}

/// One key's GET reply into a PFCOUNT union (part `part` is key `part`):
/// its HLL string merged, nothing for a missing key (an empty set), or
/// an error kept at the key's position. Every string is merged, even once
/// another key failed: a bad string before that key in key order must
/// still be the one that answers.
pub(super) fn fold_union(m: &mut Merge, part: u32, frame: Bytes) {
    let error = if frame.first() == Some(&b'-') {
        Some(frame)
    } else {
        match bulk_body(&frame) {
            Some(None) => None,
            Some(Some(hll)) => match m.fold.hll.as_mut().map(|u| u.merge(hll)) {
                Some(Err(invalid)) => Some(Bytes::from_static(invalid.reply())),
                _ => None,
            },
            None => Some(Bytes::from_static(ERR_BAD_PART)),
        }
    };
    if let (Some(e), Some(at)) = (error, m.fold.items.get_mut(part as usize)) {
        *at = e;
    }
}

/// The reply of a PFCOUNT union once every key is in: the error of the
/// first bad key in key order, as a server answers, else the count.
pub(super) fn union_reply(m: &Merge) -> Bytes {
    if let Some(e) = m.fold.items.iter().find(|e| !e.is_empty()) {
        return e.clone();
    }
    let count = m.fold.hll.as_ref().map_or(0, crate::hll::Union::count);
    Bytes::from(format!(":{count}\r\n"))
}

impl Worker {
    /// PFCOUNT over several slots: the cardinality of the union, as one
    /// server computes it. Each key's HLL string is read with its own GET
    /// (MGET would answer nil for a key of another type, where PFCOUNT
    /// answers WRONGTYPE), part `i` for key `i`; the strings are merged
    /// here as they arrive (crate::hll) and the union is estimated once
    /// the last is in.
    pub(super) fn pfcount_union(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        args: &Args,
        nkeys: usize,
    ) {
        let keys = || (1..=nkeys).map(|i| args.get(i).unwrap_or_default());
        let mut buf = bytes::BytesMut::with_capacity(keys().map(|k| k.len() + 24).sum::<usize>());
        let mut ends = Vec::with_capacity(nkeys);
        for k in keys() {
            buf.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
            bulk_into(&mut buf, k);
            ends.push(buf.len());
        }
        let reqs = buf.freeze();
        let pool = self.pool_of(key);
        let slots: Vec<u16> = keys().map(|k| self.place.unit_of(pool, k)).collect();
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let mut merge = union_merge(nkeys);
        // Gate the keys' slots, each once (see `fanout`).
        let mut gated = slots.clone();
        gated.sort_unstable();
        gated.dedup();
        for &slot in &gated {
            s.gates.hold(slot);
        }
        merge.gated = gated;
        merge.request = frame; // observe: slow log
        let seq = s.ring.push_merge(merge);
        self.obs.stats.pool(s.pool()).fragments += nkeys as u64; // observe
        self.send_parts(cx, key, seq, reqs, slots.into_iter().zip(ends), false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(body: &[u8]) -> Bytes {
        let mut out = bytes::BytesMut::new();
        bulk_into(&mut out, body);
        out.freeze()
    }

    #[test]
    fn a_union_answers_the_first_bad_key_in_key_order_whatever_arrives_first() {
        let valid = bulk(include_bytes!("../../hll/testdata/sparse-a.hll"));
        let mut corrupt = b"HYLL\x01".to_vec();
        corrupt.extend_from_slice(&[0; 11]);
        corrupt.extend_from_slice(&[0x40, 0x00]); // XZERO:1, 16383 short
        let corrupt = bulk(&corrupt);
        let wrongtype = Bytes::from_static(
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        let replies = [valid, corrupt, wrongtype.clone()];
        for order in [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ] {
            let mut m = union_merge(3);
            for part in order {
                fold_union(&mut m, part, replies[part as usize].clone());
            }
            assert_eq!(union_reply(&m), crate::hll::ERR_CORRUPT, "{order:?}");
        }
        let mut m = union_merge(2);
        fold_union(&mut m, 1, bulk(b"not an hll"));
        fold_union(&mut m, 0, wrongtype.clone());
        assert_eq!(union_reply(&m), wrongtype);
    }

    #[test]
    fn a_union_counts_missing_keys_as_empty_sets() {
        let mut m = union_merge(4);
        fold_union(&mut m, 2, Bytes::from_static(b"_\r\n"));
        fold_union(&mut m, 0, Bytes::from_static(b"$-1\r\n"));
        fold_union(
            &mut m,
            3,
            bulk(include_bytes!("../../hll/testdata/sparse-b.hll")),
        );
        fold_union(
            &mut m,
            1,
            bulk(include_bytes!("../../hll/testdata/sparse-a.hll")),
        );
        // PFCOUNT sparse-a sparse-b on the server that wrote them.
        assert_eq!(union_reply(&m), Bytes::from_static(b":149\r\n"));
        assert_eq!(union_reply(&union_merge(2)), Bytes::from_static(b":0\r\n"));
        let mut m = union_merge(1);
        fold_union(&mut m, 0, Bytes::from_static(b":1\r\n"));
        assert_eq!(union_reply(&m), Bytes::from_static(ERR_BAD_PART));
    }
}
