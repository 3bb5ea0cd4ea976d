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

/// Bits of a SCAN cursor that carry the node's own cursor; the master
/// index sits above them.
const CURSOR_BITS: u32 = 52;
const CURSOR_MASK: u64 = (1 << CURSOR_BITS) - 1;

const ERR_INVALID_CURSOR: &[u8] = b"-ERR invalid cursor\r\n";
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

/// The merge state of a PFCOUNT union over `keys` keys (one part each).
pub(super) fn union_merge(keys: usize) -> Merge {
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
fn fold_union(m: &mut Merge, part: u32, frame: Bytes) {
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
fn union_reply(m: &Merge) -> Bytes {
    if let Some(e) = m.fold.items.iter().find(|e| !e.is_empty()) {
        return e.clone();
    }
    let count = m.fold.hll.as_ref().map_or(0, crate::hll::Union::count);
    Bytes::from(format!(":{count}\r\n"))
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

    /// PFCOUNT over several slots: the cardinality of the union, as one
    /// server computes it. Each key's HLL string is read with its own GET
    /// (MGET would answer nil for a key of another type, where PFCOUNT
    /// answers WRONGTYPE), part `i` for key `i`; the strings are merged
    /// here as they arrive (crate::hll) and the union is estimated once
    /// the last is in.
    fn pfcount_union(
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

    /// SCAN cursor [MATCH p] [COUNT n] [TYPE t]: the master index lives in
    /// the cursor's top bits, the node's cursor below. The page is filled
    /// over the masters, one node call after the other, until it holds
    /// COUNT keys (10 when not given), every master is done (cursor 0),
    /// or it made its calls (`SCAN_CALLS`, so a MATCH that few keys pass
    /// costs a bounded amount of work per call, as on a server).
    fn scan(&mut self, cx: &mut Context<'_, Timer>, key: Key, frame: Bytes, args: &Args) {
        let cursor = args
            .get(1)
            .and_then(|c| std::str::from_utf8(c).ok())
            .filter(|c| !c.starts_with('+') && !c.starts_with('-'))
            .and_then(|c| c.parse::<u64>().ok());
        let Some(cursor) = cursor else {
            return self.reply_static(key, ERR_INVALID_CURSOR);
        };
        let index = (cursor >> CURSOR_BITS) as usize;
        let masters = self.place.master_count(self.pool_of(key));
        if index >= masters {
            // A cursor from a larger cluster, or a made-up one: done.
            return self.reply_static(key, b"*2\r\n$1\r\n0\r\n*0\r\n");
        }
        // COUNT as the node reads it (the last one given); a bad one is
        // the node's error to give.
        let count = (2..args.len().saturating_sub(1))
            .step_by(2)
            .rev()
            .find(|&i| {
                args.get(i)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"count"))
            })
            .and_then(|i| {
                std::str::from_utf8(args.get(i + 1)?)
                    .ok()?
                    .parse::<i64>()
                    .ok()
            })
            .unwrap_or(10);
        let node_cursor = (cursor & CURSOR_MASK).to_string();
        let mut req = Vec::with_capacity(64);
        array_into(&mut req, args.len());
        bulk_into(&mut req, b"SCAN");
        bulk_into(&mut req, node_cursor.as_bytes());
        for i in 2..args.len() {
            bulk_into(&mut req, args.get(i).unwrap_or_default());
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let calls = SCAN_CALLS.max(2 * masters as u32);
        let mut page = Merge::new(Fold::ScanPage, calls);
        page.fold.sum = count;
        page.request = frame; // observe: slow log
        let seq = s.ring.push_merge(page);
        self.send_scan(cx, key, seq, index, Bytes::from(req));
    }

    fn send_scan(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        seq: u64,
        index: usize,
        req: Bytes,
    ) {
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        let shard = self.place.masters(self.pool_of(key)).nth(index);
        match shard.and_then(|shard| self.place.shard_master(shard, proto)) {
            Some(pool) => self.send_to_pool(
                cx,
                pool,
                InFlight::new(key, seq, req, Purpose::Scan(index as u32)),
            ),
            None => self.deliver(key, seq, Bytes::from_static(router::ERR_NO_TOPOLOGY), &[]),
        }
    }

    /// A node's SCAN reply for the page at `seq`: its keys join the page;
    /// then the page is answered (full, out of calls, or every master
    /// done) or the walk goes on where it stands, on the same node or the
    /// next master. `req` is the node request that got `frame`.
    pub(super) fn scan_page(
        &mut self,
        cx: &mut Context<'_, Timer>,
        session: Key,
        seq: u64,
        index: u32,
        req: &Bytes,
        frame: Bytes,
    ) {
        let masters = self.place.master_count(self.pool_of(session));
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let Some(page) = s.ring.merge_mut(seq) else {
            return;
        };
        let step = match scan_step(&frame, index, masters) {
            Ok(step) => step,
            Err(e) => {
                let request = std::mem::take(&mut page.request);
                return self.deliver(session, seq, e, &request);
            }
        };
        page.fold.items.extend(step.keys);
        page.parts_left = page.parts_left.saturating_sub(1);
        let full = page.fold.items.len() as i64 >= page.fold.sum || page.parts_left == 0;
        match step.next {
            Some((next, node_cursor)) if !full => {
                let Some(req) = with_cursor(req, node_cursor) else {
                    let request = std::mem::take(&mut page.request);
                    return self.deliver(session, seq, Bytes::from_static(ERR_BAD_PART), &request);
                };
                self.send_scan(cx, session, seq, next as usize, req);
            }
            next => {
                let cursor = next.map_or(0, |(i, c)| (u64::from(i) << CURSOR_BITS) | c);
                let text = cursor.to_string();
                let keys = std::mem::take(&mut page.fold.items);
                let request = std::mem::take(&mut page.request);
                let mut out = Vec::with_capacity(keys.iter().map(|k| k.len()).sum::<usize>() + 48);
                out.extend_from_slice(b"*2\r\n");
                bulk_into(&mut out, text.as_bytes());
                array_into(&mut out, keys.len());
                for k in &keys {
                    out.extend_from_slice(k);
                }
                self.deliver(session, seq, Bytes::from(out), &request);
            }
        }
    }
}

/// Most node calls one SCAN page makes (at least two per master).
const SCAN_CALLS: u32 = 32;

/// What one node's SCAN reply adds to a page.
struct ScanStep {
    /// Its keys (zero-copy slices of the reply).
    keys: Vec<Bytes>,
    /// Where the walk stands now: (master index, node cursor), or None
    /// when the last master is done.
    next: Option<(u32, u64)>,
}

/// Read a node's SCAN reply, from master `index` of `masters`: its keys,
/// and where the walk goes next (a finished node hands over to the next
/// master at its cursor 0). An error reply, or one that is not a SCAN
/// reply, is the page's answer.
fn scan_step(frame: &Bytes, index: u32, masters: usize) -> Result<ScanStep, Bytes> {
    if frame.first() == Some(&b'-') {
        return Err(frame.clone());
    }
    let bad = || Bytes::from_static(ERR_BAD_PART);
    let items = array_items(frame).ok_or_else(bad)?;
    let [cursor, keys] = &items[..] else {
        return Err(bad());
    };
    let node_cursor = bulk_body(cursor)
        .flatten()
        .and_then(|c| std::str::from_utf8(c).ok()?.parse::<u64>().ok())
        .ok_or_else(bad)?;
    if node_cursor > CURSOR_MASK {
        return Err(Bytes::from_static(
            b"-ERR mithril: a node's SCAN cursor is too large to carry\r\n",
        ));
    }
    let keys = array_items(keys).ok_or_else(bad)?;
    let next = match node_cursor {
        0 if (index as usize) + 1 < masters => Some((index + 1, 0)),
        0 => None,
        c => Some((index, c)),
    };
    Ok(ScanStep { keys, next })
}

/// The node request `req` (`SCAN <cursor> ...`, as `scan` builds it) with
/// another cursor.
fn with_cursor(req: &Bytes, cursor: u64) -> Option<Bytes> {
    let line = req.windows(2).position(|w| w == b"\r\n")? + 2;
    let name = b"$4\r\nSCAN\r\n";
    let rest = req.get(line..)?.strip_prefix(&name[..])?;
    let nl = rest.windows(2).position(|w| w == b"\r\n")?;
    let len: usize = std::str::from_utf8(rest.get(1..nl)?).ok()?.parse().ok()?;
    let tail = rest.get(nl + 2 + len + 2..)?;
    let mut out = Vec::with_capacity(req.len() + 20);
    out.extend_from_slice(&req[..line]);
    out.extend_from_slice(name);
    bulk_into(&mut out, cursor.to_string().as_bytes());
    out.extend_from_slice(tail);
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_arrays_and_rewrites_cursors() {
        let f = Bytes::from_static(b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n");
        let items = array_items(&f).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(&items[1][..], b"$-1\r\n");
        assert_eq!(&items[2][..], b"*1\r\n:1\r\n");
        assert!(array_items(&Bytes::from_static(b"*2\r\n$1\r\na\r\n")).is_none());

        let r = Bytes::from_static(b"*2\r\n$2\r\n17\r\n*1\r\n$1\r\nk\r\n");
        let step = scan_step(&r, 2, 3).unwrap();
        assert_eq!(step.keys, vec![Bytes::from_static(b"$1\r\nk\r\n")]);
        assert_eq!(step.next, Some((2, 17)));
        let done = Bytes::from_static(b"*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(scan_step(&done, 0, 3).unwrap().next, Some((1, 0)));
        assert_eq!(scan_step(&done, 2, 3).unwrap().next, None);
        let e = Bytes::from_static(b"-ERR syntax error\r\n");
        assert_eq!(scan_step(&e, 0, 3).err(), Some(e));
        let req = Bytes::from_static(b"*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nCOUNT\r\n$1\r\n5\r\n");
        assert_eq!(
            with_cursor(&req, 1234).unwrap(),
            Bytes::from_static(b"*4\r\n$4\r\nSCAN\r\n$4\r\n1234\r\n$5\r\nCOUNT\r\n$1\r\n5\r\n")
        );
        assert_eq!(int_reply(b":-5\r\n"), Some(-5));
    }

    fn bulk(body: &[u8]) -> Bytes {
        let mut out = bytes::BytesMut::new();
        bulk_into(&mut out, body);
        out.freeze()
    }

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

    #[test]
    fn a_union_answers_the_first_bad_key_in_key_order_whatever_arrives_first() {
        let valid = bulk(include_bytes!("../hll/testdata/sparse-a.hll"));
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
            bulk(include_bytes!("../hll/testdata/sparse-b.hll")),
        );
        fold_union(
            &mut m,
            1,
            bulk(include_bytes!("../hll/testdata/sparse-a.hll")),
        );
        // PFCOUNT sparse-a sparse-b on the server that wrote them.
        assert_eq!(union_reply(&m), Bytes::from_static(b":149\r\n"));
        assert_eq!(union_reply(&union_merge(2)), Bytes::from_static(b":0\r\n"));
        let mut m = union_merge(1);
        fold_union(&mut m, 0, Bytes::from_static(b":1\r\n"));
        assert_eq!(union_reply(&m), Bytes::from_static(ERR_BAD_PART));
    }
}
