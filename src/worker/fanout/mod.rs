//! Requests that need several nodes.
//!
//! Fan-out (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH, PFCOUNT): the keys are
//! grouped by slot — never by node, since a node refuses keys of two slots
//! in one command — and each group becomes a part, sent in parallel. The
//! request's ring slot holds a merge state that every part's reply folds
//! into (MGET items by key position, MSET all-OK, PFCOUNT a union, the
//! rest summed); when the last part is in, the slot becomes one ordinary
//! reply. A redirected part is retried like any request before it folds.
//! When all keys share one slot, the original request is forwarded
//! untouched.
//!
//! Cross-slot PFCOUNT counts the union of the HyperLogLogs, as one server
//! does, not the sum of per-slot counts (which overcounts whatever the
//! sets share): each key's HLL string is read with GET, one part per key,
//! merged register by register as the parts arrive, and the union's
//! cardinality estimated the way Redis 7 does (`crate::hll`). A missing
//! key is an empty set; the first bad key in key order gives the error
//! (WRONGTYPE, or INVALIDOBJ for a corrupt HLL), as on a server.
//!
//! A cross-slot MSET with a key but no value is refused whole, with the
//! server's arity error, before any part is sent.
//!
//! Cluster-wide (DBSIZE, FLUSHALL, SCAN, RANDOMKEY): the same merge for
//! every master; SCAN walks the masters one after the other with a cursor
//! that carries the master's index in its top bits.
//!
//! Layout: this file holds the split and the merge; `pfcount` the union
//! behind cross-slot PFCOUNT, `scan` the walk over the masters.

mod pfcount;
mod scan;

pub(super) use self::pfcount::union_merge;

use self::pfcount::{fold_union, union_reply};
use super::purpose::{InFlight, Purpose};
use super::{Timer, Worker};
use crate::command::{self, Args, Command, Fanout, Wide};
use crate::placement::Locate;
use crate::resp::encode::{array_into, bulk_into, Proto};
use crate::resp::int_reply;
use crate::resp::reply::{ReplyScan, ReplyScanner};
use crate::router;
use crate::session::ring::{Fold, Merge};
use bytes::Bytes;
use reactor::{Context, Key};

const ERR_BAD_PART: &[u8] =
    b"-ERR mithril: unexpected reply from a node to part of a multi-key command\r\n";

/// RESP2's null bulk; a RESP3 session's parts answer `_` instead.
pub(super) const NIL_RESP2: &[u8] = b"$-1\r\n";

/// A null reply, in either protocol.
fn is_nil(frame: &[u8]) -> bool {
    frame == NIL_RESP2 || frame == b"_\r\n"
}

/// A master's replication offset from its ROLE reply
/// (`["master", offset, [replicas]]`); None for anything else.
fn role_offset(frame: &Bytes) -> Option<i64> {
    let items = array_items(frame)?;
    let role = items.first()?;
    if !role.ends_with(b"\r\nmaster\r\n") {
        return None;
    }
    int_reply(items.get(1)?)
}

/// Split an array reply into its items (zero-copy slices of `frame`).
fn array_items(frame: &Bytes) -> Option<Vec<Bytes>> {
    let line_end = frame.windows(2).position(|w| w == b"\r\n")?;
    if frame.first() != Some(&b'*') {
        return None;
    }
    let n: usize = std::str::from_utf8(&frame[1..line_end])
        .ok()?
        .parse()
        .ok()?;
    let mut at = line_end + 2;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        let mut sc = ReplyScanner::new();
        match sc.scan(&frame[at..]) {
            ReplyScan::Complete { len, .. } => {
                items.push(frame.slice(at..at + len));
                at += len;
            }
            _ => return None,
        }
    }
    (at == frame.len()).then_some(items)
}

/// One master's `[name, count, ...]` (an array, or a RESP3 map) folded
/// into the sums so far: the first part gives the names, each later one
/// adds its counts pair by pair (every master is asked the same names).
fn fold_pair_sum(f: &mut crate::session::ring::FoldState, frame: &Bytes) -> Result<(), Bytes> {
    let bad = || Bytes::from_static(ERR_BAD_PART);
    let items = match frame.first() {
        Some(b'%') => {
            // A map of n pairs is an array of 2n items once the header says so.
            let nl = frame
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or_else(bad)?;
            let n: usize = std::str::from_utf8(&frame[1..nl])
                .ok()
                .and_then(|n| n.parse().ok())
                .ok_or_else(bad)?;
            let mut flat = format!("*{}\r\n", n * 2).into_bytes();
            flat.extend_from_slice(&frame[nl + 2..]);
            array_items(&Bytes::from(flat))
        }
        _ => array_items(frame),
    }
    .ok_or_else(bad)?;
    if f.items.is_empty() {
        f.items = items;
        return Ok(());
    }
    if items.len() != f.items.len() {
        return Err(bad());
    }
    for (i, item) in items.into_iter().enumerate().skip(1).step_by(2) {
        let sum = int_reply(&f.items[i])
            .zip(int_reply(&item))
            .ok_or_else(bad)?;
        f.items[i] = Bytes::from(format!(":{}\r\n", sum.0.saturating_add(sum.1)));
    }
    Ok(())
}

/// The body of a bulk string reply: `Some(None)` for a null (RESP2
/// `$-1`, RESP3 `_`), `None` if `frame` is not a bulk string.
fn bulk_body(frame: &[u8]) -> Option<Option<&[u8]>> {
    if frame == b"$-1\r\n" || frame == b"_\r\n" {
        return Some(None);
    }
    let rest = frame.strip_prefix(b"$")?;
    let nl = rest.windows(2).position(|w| w == b"\r\n")?;
    let len: usize = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
    let body = rest.get(nl + 2..)?.strip_suffix(b"\r\n")?;
    (body.len() == len).then_some(Some(body))
}

impl Worker {
    pub(super) fn fanout(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        kind: Fanout,
        frame: Bytes,
        args: &Args,
    ) {
        // Keys (and for MSET their values) per argument position.
        let step = if kind == Fanout::Mset { 2 } else { 1 };
        if step == 2 && args.len() % 2 == 0 {
            // A key without its value: the table's arity (-3) lets it
            // through, and pairing the arguments below would drop that
            // key. A server refuses the whole command, so refuse it before
            // any part is sent.
            return self.reply(key, Bytes::from(command::wrong_arity_reply(cmd)));
        }
        let nkeys = (args.len() - 1) / step;
        let map = self.place.map().clone();
        let slot_of = |i: usize| map.unit_of(args.get(1 + i * step).unwrap_or_default());
        let first = slot_of(0);
        // One key is never refused with TRYAGAIN, so a tainted slot does
        // not matter to it; and PFCOUNT of one key must reach the node as
        // it is, since only there may it answer the key's cached count.
        let lone_pfcount = kind == Fanout::Pfcount && nkeys == 1;
        if (1..nkeys).all(|i| slot_of(i) == first) && (lone_pfcount || !self.tainted(key, first)) {
            // One slot: the node can take the request as it is.
            let read = kind == Fanout::Mget;
            if self.cache.tracked_read && !(read && self.cache_on()) {
                // A tracking client's read: to the master, opted in.
                return self.tracked_unit(cx, key, first, frame);
            }
            if read && self.cache_on() {
                return self.cached_read(cx, key, first, read, frame, args.ranges);
            }
            return self.forward_unit(cx, key, first, read, frame);
        }
        if self.place.map().is_empty() {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        if kind == Fanout::Pfcount {
            return self.pfcount_union(cx, key, frame, args, nkeys);
        }
        // Group key indexes by slot: sort (slot, index) pairs, so each
        // slot's keys form one run, in request order within it.
        let mut order: Vec<(u16, u32)> = (0..nkeys).map(|i| (slot_of(i), i as u32)).collect();
        order.sort_unstable();
        let mut runs: Vec<(u16, std::ops::Range<usize>)> = Vec::new();
        for (at, &(slot, _)) in order.iter().enumerate() {
            match runs.last_mut() {
                Some((s, r)) if *s == slot => r.end = at + 1,
                _ => runs.push((slot, at..at + 1)),
            }
        }
        let name = args.get(0).unwrap_or_default();
        let fold = match kind {
            Fanout::Mget => Fold::Items,
            Fanout::Mset => Fold::AllOk,
            Fanout::SumIntegers => Fold::Sum,
            Fanout::Pfcount => Fold::Union, // taken by pfcount_union above
        };
        // Every part's request goes into one buffer, then is cut into
        // zero-copy slices: one allocation for all parts.
        let mut buf = bytes::BytesMut::with_capacity(frame.len() + runs.len() * (16 + name.len()));
        let mut ends = Vec::with_capacity(runs.len());
        for (_, r) in &runs {
            let keys = &order[r.clone()];
            array_into(&mut buf, 1 + keys.len() * step);
            bulk_into(&mut buf, name);
            for &(_, k) in keys {
                for j in 0..step {
                    bulk_into(
                        &mut buf,
                        args.get(1 + k as usize * step + j).unwrap_or_default(),
                    );
                }
            }
            ends.push(buf.len());
        }
        let reqs = buf.freeze();
        let mut merge = Merge::new(fold, runs.len() as u32);
        if fold == Fold::Items {
            merge.fold.items = vec![Bytes::new(); nkeys];
            merge.fold.part_keys = runs
                .iter()
                .map(|(_, r)| order[r.clone()].iter().map(|&(_, k)| k).collect())
                .collect();
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        // Gate the parts' slots: a later request of this session on one of
        // them waits until every part (retries included) is in.
        merge.gated = runs.iter().map(|(slot, _)| *slot).collect();
        for (slot, _) in &runs {
            s.gates.hold(*slot);
        }
        merge.request = frame.clone(); // observe: slow log
        let parts = runs.len() as u64;
        let seq = s.ring.push_merge(merge);
        self.obs.stats.pool(s.pool()).fragments += parts; // observe
        let slots = runs.into_iter().map(|(slot, _)| slot);
        // MGETs the cache serves: up to 64 keys (so up to 64 parts).
        let cached =
            kind == Fanout::Mget && self.cache_on() && nkeys <= crate::cache::MAX_FILL_KEYS;
        self.send_parts(cx, key, seq, reqs, slots.zip(ends), cached);
    }

    /// Send the parts of the merge at `seq`: part `i` is the next piece of
    /// `reqs`, up to its end offset, for the master of its slot (an
    /// unserved slot folds its error in at once).
    fn send_parts(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        seq: u64,
        mut reqs: Bytes,
        parts: impl Iterator<Item = (u16, usize)>,
        cached: bool,
    ) {
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        let mut at = 0;
        for (part, (slot, end)) in parts.enumerate() {
            let req = reqs.split_to(end - at);
            at = end;
            if cached {
                // An MGET part: from the reply cache, or filling it.
                self.cached_part(cx, key, seq, part as u32, slot, req);
                continue;
            }
            let plain = Purpose::Part(part as u32);
            match self.place.master(slot, proto) {
                Some(pool) if self.cache.tracked_read => {
                    self.send_opted(cx, pool, key, Some(seq), req, (plain, 1), None)
                }
                Some(pool) => self.send_to_pool(cx, pool, InFlight::new(key, seq, req, plain)),
                None => self.fold_part(
                    cx,
                    key,
                    seq,
                    part as u32,
                    Bytes::from_static(router::ERR_SLOT_UNSERVED),
                ),
            }
        }
    }

    /// Fold one part's reply into the merge at `seq`; the last part turns
    /// the merge into the reply.
    pub(super) fn fold_part(
        &mut self,
        cx: &mut Context<'_, Timer>,
        session: Key,
        seq: u64,
        part: u32,
        frame: Bytes,
    ) {
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let proto = s.proto;
        let Some(m) = s.ring.merge_mut(seq) else {
            // A gathered answer (INFO, CLIENT LIST/KILL; SCRIPT and
            // FUNCTION on every master) keeps each part's raw reply; its
            // closure builds the reply (worker/observe/ask.rs).
            return self.collect_part(session, seq, part, frame);
        };
        if m.fold.kind == Fold::Union {
            fold_union(m, part, frame);
        } else if frame.first() == Some(&b'-') {
            m.fold.error.get_or_insert(frame);
        } else {
            let f = &mut m.fold;
            match f.kind {
                Fold::Sum => match int_reply(&frame) {
                    Some(n) => f.sum = f.sum.saturating_add(n),
                    None => {
                        f.error.get_or_insert(Bytes::from_static(ERR_BAD_PART));
                    }
                },
                Fold::AllOk => {
                    if &frame[..] != b"+OK\r\n" {
                        f.error.get_or_insert(frame);
                    }
                }
                Fold::Union => {} // folded above
                Fold::Concat | Fold::ScanPage => match array_items(&frame) {
                    Some(items) => f.items.extend(items),
                    None => {
                        f.error.get_or_insert(Bytes::from_static(ERR_BAD_PART));
                    }
                },
                Fold::AnyOf => {
                    if !is_nil(&frame) {
                        f.items.push(frame);
                    }
                }
                Fold::PairSum => {
                    if let Err(e) = fold_pair_sum(f, &frame) {
                        f.error.get_or_insert(e);
                    }
                }
                Fold::Status => {
                    if frame.first() != Some(&b'+') {
                        f.error.get_or_insert(Bytes::from_static(ERR_BAD_PART));
                    } else if f.items.is_empty() {
                        f.items.push(frame);
                    }
                }
                Fold::Role => match role_offset(&frame) {
                    Some(n) => f.sum = f.sum.max(n),
                    None => {
                        f.error.get_or_insert(Bytes::from_static(ERR_BAD_PART));
                    }
                },
                Fold::Min => match int_reply(&frame) {
                    Some(n) => f.sum = f.sum.min(n),
                    None => {
                        f.error.get_or_insert(Bytes::from_static(ERR_BAD_PART));
                    }
                },
                Fold::Items => {
                    let positions = f.part_keys.get(part as usize);
                    match (array_items(&frame), positions) {
                        (Some(items), Some(pos)) if items.len() == pos.len() => {
                            for (item, &p) in items.into_iter().zip(pos.iter()) {
                                if let Some(slot) = f.items.get_mut(p as usize) {
                                    *slot = item;
                                }
                            }
                        }
                        _ => {
                            f.error.get_or_insert(Bytes::from_static(ERR_BAD_PART));
                        }
                    }
                }
            }
        }
        m.parts_left = m.parts_left.saturating_sub(1);
        if m.parts_left > 0 {
            if m.split.as_ref().is_some_and(|s| !s.waiting.is_empty()) {
                self.send_waiting(cx, session, seq);
            }
            return;
        }
        let gated = std::mem::take(&mut m.gated);
        let request = std::mem::take(&mut m.request); // observe: slow log
        let reply = if let Some(e) = m.fold.error.take() {
            e
        } else {
            match m.fold.kind {
                Fold::Sum | Fold::Min => Bytes::from(format!(":{}\r\n", m.fold.sum)),
                Fold::Role => {
                    Bytes::from(format!("*3\r\n$6\r\nmaster\r\n:{}\r\n*0\r\n", m.fold.sum))
                }
                Fold::Status => m
                    .fold
                    .items
                    .pop()
                    .unwrap_or_else(|| Bytes::from_static(ERR_BAD_PART)),
                Fold::Union => union_reply(m),
                Fold::AllOk => Bytes::from_static(b"+OK\r\n"),
                Fold::AnyOf => match m.fold.items.len() {
                    0 if proto == Proto::Resp3 => Bytes::from_static(b"_\r\n"),
                    0 => Bytes::from_static(NIL_RESP2),
                    n => {
                        let pick = (self.place.random() % n as u64) as usize;
                        m.fold.items.swap_remove(pick)
                    }
                },
                Fold::PairSum => {
                    let items = &m.fold.items;
                    let mut out =
                        Vec::with_capacity(items.iter().map(|i| i.len()).sum::<usize>() + 16);
                    if proto == Proto::Resp3 {
                        out.extend_from_slice(format!("%{}\r\n", items.len() / 2).as_bytes());
                    } else {
                        array_into(&mut out, items.len());
                    }
                    for i in items {
                        out.extend_from_slice(i);
                    }
                    Bytes::from(out)
                }
                Fold::Items | Fold::Concat | Fold::ScanPage => {
                    let items = &m.fold.items;
                    let total: usize = items.iter().map(|i| i.len()).sum();
                    let mut out = Vec::with_capacity(total + 16);
                    array_into(&mut out, items.len());
                    for i in items {
                        out.extend_from_slice(i);
                    }
                    Bytes::from(out)
                }
            }
        };
        if reply.first() == Some(&b'-') {
            self.obs.stats.error_reply(&reply); // observe
        }
        self.deliver(session, seq, reply, &request);
        if !gated.is_empty() {
            self.release_gates(session, &gated);
        }
    }

    /// Commands about the whole cluster.
    pub(super) fn wide(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        wide: Wide,
        frame: Bytes,
        args: &Args,
    ) {
        if self.place.master_count(self.pool_of(key)) == 0 {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        match wide {
            // Any master's key, nil only when every master is empty.
            Wide::Randomkey => self.every_master(cx, key, Fold::AnyOf, frame),
            Wide::Keys => self.every_master(cx, key, Fold::Concat, frame),
            Wide::ShardNumsub => self.every_master(cx, key, Fold::PairSum, frame),
            Wide::Dbsize => self.every_master(
                cx,
                key,
                Fold::Sum,
                Bytes::from_static(b"*1\r\n$6\r\nDBSIZE\r\n"),
            ),
            Wide::Flushall | Wide::EveryOk => self.every_master(cx, key, Fold::AllOk, frame),
            Wide::EveryStatus => self.every_master(cx, key, Fold::Status, frame),
            Wide::EveryMin => self.every_master(cx, key, Fold::Min, frame),
            Wide::Role => self.every_master(cx, key, Fold::Role, frame),
            Wide::ConfigSet => self.config_set(cx, key, frame, args),
            Wide::EverySum => self.every_master(cx, key, Fold::Sum, frame),
            Wide::Scan => self.scan(cx, key, frame, args),
            Wide::Wait => self.wait(cx, key, frame, args),
            Wide::Debug => self.debug(cx, key, frame, args),
            Wide::ConfigGet => self.config_get(cx, key, frame, args),
            scripting => self.scripting(cx, key, scripting, frame, args),
        }
    }

    fn every_master(&mut self, cx: &mut Context<'_, Timer>, key: Key, fold: Fold, req: Bytes) {
        let masters = self.place.master_count(self.pool_of(key));
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let proto = s.proto;
        let mut merge = Merge::new(fold, masters as u32);
        merge.request = req.clone(); // observe: slow log
        let seq = s.ring.push_merge(merge);
        self.obs.stats.pool(s.pool()).fragments += masters as u64; // observe
        self.parts_to_masters(cx, key, seq, masters, proto, &req);
    }

    /// Sends `req` to the first `masters` masters as parts 0.. of the
    /// merge at `seq`; a master with no pool folds a no-topology error in
    /// its place.
    pub(super) fn parts_to_masters(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        seq: u64,
        masters: usize,
        proto: Proto,
        req: &Bytes,
    ) {
        let shards = self.place.masters(self.pool_of(key));
        for (part, shard) in shards.take(masters).enumerate() {
            let out = InFlight::new(key, seq, req.clone(), Purpose::Part(part as u32));
            match self.place.shard_master(shard, proto) {
                // A watching session's part for its pinned node goes on
                // the pin, in order with its other commands (watch.rs).
                Some(pool) => self.send_part(cx, pool, out),
                None => self.fold_part(
                    cx,
                    key,
                    seq,
                    part as u32,
                    Bytes::from_static(router::ERR_NO_TOPOLOGY),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_bodies_and_nulls() {
        assert_eq!(bulk_body(b"$2\r\nab\r\n"), Some(Some(&b"ab"[..])));
        assert_eq!(bulk_body(b"$0\r\n\r\n"), Some(Some(&b""[..])));
        assert_eq!(bulk_body(b"$-1\r\n"), Some(None));
        assert_eq!(bulk_body(b"_\r\n"), Some(None));
        assert_eq!(bulk_body(b"$3\r\nab\r\n"), None);
        assert_eq!(bulk_body(b"$2\r\nabc\r\n"), None);
        assert_eq!(bulk_body(b":1\r\n"), None);
        assert_eq!(bulk_body(b"+OK\r\n"), None);
    }
}
