//! The reply cache's worker side (`reply-cache yes`): GET served from the
//! worker's [`ReplyCache`], fills opted in with the node's CLIENT TRACKING,
//! writes invalidating and holding their keys at dispatch, and one RESP3
//! tracker connection per master receiving the invalidations (opened and
//! read in `trackers.rs`).
//!
//! ```text
//!   GET k ─► hit: the cached frame, at the GET's ring slot (no node)
//!          └► miss, admitted: ticket t ─► [CLIENT TRACKING ON REDIRECT id OPTIN]
//!                                         CLIENT CACHING YES, GET k (Fill(t))
//!                                         on the session's shared connection
//!   reply to Fill(t) ─► delivered as any reply; stored if t still stands
//!   tracker (per master) ◄── >invalidate [k ...] ─► forget k, poison its ticket
//!   SET k (any write) ─► forget k, hold k until SET's reply (no fill meanwhile)
//! ```
//!
//! Coherence: a stored reply was read by the node after CLIENT CACHING YES
//! on a connection whose invalidations go to this worker's tracker, so any
//! later change of the key reaches the tracker; one that arrives before the
//! fill's reply poisons the ticket. Writes sent through this worker forget
//! their keys before they are sent and hold them until answered, so a
//! session reads its own writes. Losing a tracker (or a change of the
//! masters) forgets everything and pauses fills until every master has a
//! tracker whose id is known again; a shared connection re-enables its
//! tracking toward the new id before its next fill.
//!
//! Across workers, the process-wide write epochs (`crate::cache::epochs`):
//! a write's reply moves its keys' counters before it is delivered, a
//! script that may write moves its unit's at dispatch and at its reply, a
//! FLUSHALL every unit's, a new map the units whose master changed, a
//! MOVED or ASK its slot's. An entry is served only while the counters it
//! was armed under stand, so no worker answers a value older than a write
//! acknowledged through any worker.
//!
//! Not filled: replica reads (read splitting on), redirected or retried
//! GETs, error replies. Sessions of another worker are served by that
//! worker's cache; a write made directly on a node reaches it as the
//! node's invalidation.
//!
//! Layout: this file holds the cache's state, the lookups and the writes'
//! holds; `fill` the fills and the opt-in they are sent behind.

mod fill;

use super::fanout::NIL_RESP2;
use super::purpose::{InFlight, Purpose};
use super::{Timer, Worker};
use crate::cache::tracking::TrackingTable;
use crate::cache::{ReplyCache, INLINE_FRAME, MAX_FILL_KEYS, TXN_HOLD};
use crate::command::{self, flags, Args, Command, Route};
use crate::resp::walk::frame_args;
use crate::resp::Proto;
use crate::router;
use crate::session::Session;
use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;

pub(super) const CLIENT_ID: &[u8] = b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";
const NIL_RESP3: &[u8] = b"_\r\n";
/// `GET ""`, the shortest GET frame.
const SHORTEST_GET: usize = b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n".len();

/// One master's tracker connection: the redirect target of the shared
/// connections' opt-in tracking.
pub struct Tracker {
    pub addr: SocketAddr,
    pub conn: Key,
    /// Its client id, once CLIENT ID answered (0 before).
    pub id: u64,
}

/// One master's BCAST tracker (for BCAST clients): a connection of its own
/// in `CLIENT TRACKING ON BCAST` (every key), redirected nowhere and
/// named by no redirect, so what it hears is exactly the node's BCAST
/// batches (`trackers.rs`).
pub struct BcastTracker {
    pub addr: SocketAddr,
    pub conn: Key,
    /// The node acknowledged its BCAST: every write from then on is heard.
    pub on: bool,
}

/// The worker's cache state.
pub struct CacheState {
    pub on: bool,
    pub cache: ReplyCache,
    pub trackers: Vec<Tracker>,
    /// The BCAST trackers: opened while BCAST clients exist, closed
    /// `BCAST_LINGER` after the last one went (`bcast_idle` since when).
    pub bcast_trackers: Vec<BcastTracker>,
    pub bcast_idle: Option<std::time::Instant>,
    /// Since when the trackers are not needed (closed `TRACKER_LINGER`
    /// later, `trackers.rs`).
    pub unhooked: Option<std::time::Instant>,
    /// BCAST clients' `OK`s (session, ring slot, since when) held until
    /// every master's BCAST tracker is on (at most `BCAST_WAIT`): one per
    /// pending ring slot, so bounded by the rings.
    pub bcast_waiting: Vec<(Key, u64, std::time::Instant)>,
    /// The same for CLIENT TRACKING ON in the other modes, until every
    /// master has a tracker with a known id (reads before that could not
    /// be tracked).
    pub track_waiting: Vec<(Key, u64, std::time::Instant)>,
    /// The masters the trackers were opened for (a change flushes).
    pub masters: Vec<SocketAddr>,
    /// The cache or client tracking needs the dispatch step (`on`, or
    /// `clients` > 0).
    pub hooked: bool,
    /// Sessions with CLIENT TRACKING on, and those in BCAST mode.
    pub clients: usize,
    pub bcast: Vec<Key>,
    /// Keys read by tracking sessions (`worker/tracking.rs`).
    pub table: TrackingTable<Key>,
    /// Keys declared by tracking sessions' scripts: the node tracks them
    /// only if the script read something, so only the node's
    /// invalidations (not writes through this worker) reach them.
    pub script_table: TrackingTable<Key>,
    /// The request being dispatched is a tracking client's read: it goes
    /// with the opt-in.
    pub tracked_read: bool,
    /// Invalidations for REDIRECT targets of other workers that a full
    /// mailbox refused, retried each tick (at most `OUTBOX_MOST`).
    pub outbox: Vec<(usize, crate::shared::WorkerMsg)>,
    /// Keys a BCAST NOLOOP client wrote, by that client (and whether the
    /// write gave the key a time to live), until the BCAST tracker hears
    /// of them (`worker/tracking.rs`).
    pub loop_writes: std::collections::HashMap<Bytes, (Key, bool)>,
    /// Keys a NOLOOP client in the default mode wrote while scripts' keys
    /// were remembered, by that client, until a tracker hears of them (at
    /// most `LOOP_WRITES_MOST`, `worker/tracking.rs`).
    pub script_loop: std::collections::HashMap<Bytes, Key>,
}

impl CacheState {
    pub fn new(shared: &crate::shared::Shared) -> CacheState {
        let (budget, age) = limits(shared);
        let max_keys = table_share(shared);
        let seed = shared.cache_seed;
        let epochs = shared.cache_epochs.clone();
        CacheState {
            on: false,
            cache: ReplyCache::new(budget, age, seed, epochs),
            trackers: Vec::new(),
            bcast_trackers: Vec::new(),
            bcast_idle: None,
            unhooked: None,
            bcast_waiting: Vec::new(),
            track_waiting: Vec::new(),
            masters: Vec::new(),
            hooked: false,
            clients: 0,
            bcast: Vec::new(),
            table: TrackingTable::new(max_keys, seed ^ 0x5851_F42D_4C95_7F2D),
            script_table: TrackingTable::new(max_keys, seed ^ 0x2545_F491_4F6C_DD1D),
            tracked_read: false,
            outbox: Vec::new(),
            loop_writes: std::collections::HashMap::new(),
            script_loop: std::collections::HashMap::new(),
        }
    }

    fn tracker_id(&self, addr: SocketAddr) -> u64 {
        self.trackers
            .iter()
            .find(|t| t.addr == addr)
            .map_or(0, |t| t.id)
    }

    /// Fills may be armed once every master has a tracker with a known id.
    pub(super) fn update_open(&mut self) {
        self.cache.fills_open = self.on
            && !self.masters.is_empty()
            && self
                .masters
                .iter()
                .all(|m| self.trackers.iter().any(|t| t.addr == *m && t.id != 0));
    }
}

/// This worker's share of `tracking-table-max-keys` (0: no bound).
pub(super) fn table_share(shared: &crate::shared::Shared) -> usize {
    let workers = shared.workers.len().max(1) as u64;
    match shared.live.tracking_table_max_keys.load(Relaxed) {
        0 => 0,
        n => (n / workers).max(1) as usize,
    }
}

/// This worker's share of the budget, and the max age in milliseconds.
pub(super) fn limits(shared: &crate::shared::Shared) -> (usize, u64) {
    let workers = shared.workers.len().max(1) as u64;
    let budget = shared.live.reply_cache_size.load(Relaxed) / workers;
    let age = shared.live.reply_cache_max_age_secs.load(Relaxed) * 1000;
    (budget.min(usize::MAX as u64) as usize, age)
}

/// The reply to store for a GET's frame (errors and other types are not).
fn storable(frame: &[u8]) -> Option<&[u8]> {
    match frame.first() {
        Some(b'$') => Some(frame),
        Some(b'_') => Some(NIL_RESP2),
        _ => None,
    }
}

/// The cache stores a miss as RESP2's nil; a RESP3 session gets its own.
fn is_nil_for(frame: &[u8], proto: Proto) -> bool {
    proto == Proto::Resp3 && frame == NIL_RESP2
}

/// [`as_reply`] for a frame being copied.
fn reply_of(frame: &[u8], proto: Proto) -> &[u8] {
    if is_nil_for(frame, proto) {
        NIL_RESP3
    } else {
        frame
    }
}

/// A stored frame as a session of `proto` gets it.
fn as_reply(frame: Bytes, proto: Proto) -> Bytes {
    if is_nil_for(&frame, proto) {
        Bytes::from_static(NIL_RESP3)
    } else {
        frame
    }
}

impl Worker {
    /// Whether a request goes through the cache's dispatch step (the
    /// reply cache, or some session's client tracking: one test on the
    /// hot path).
    #[inline]
    pub(super) fn cache_hooked(&self) -> bool {
        self.cache.hooked
    }

    /// Whether the reply cache is on.
    #[inline]
    pub(super) fn cache_on(&self) -> bool {
        self.cache.on
    }

    /// A batch was just read: start loading the cache slots of the GETs
    /// at its head, so that their lookups, one after another as the batch
    /// is dispatched, overlap their loads from memory instead of waiting
    /// for each in turn (cache/table.rs); a lone GET's bucket only, and
    /// its hash is returned for the read batch to ask for its entry (see
    /// `ReplyCache::prefetch`, `Worker::run_read_batch`).
    pub(super) fn prefetch_gets(&mut self, key: Key) -> Option<u64> {
        let c = &mut self.cache.cache;
        if !self.cache.on || c.entries() == 0 {
            return None;
        }
        let s = self.sessions.get(key)?;
        let mut b = &s.rbuf[..];
        if b.len() < SHORTEST_GET {
            return None;
        }
        // The GETs at the head, parsed as the cache asks for them (no
        // array of keys to set up for the lone one).
        c.prefetch(std::iter::from_fn(move || {
            let (k, rest) = crate::resp::request::leading_get(b)?;
            b = rest;
            Some(k)
        }))
    }

    fn cache_now_ms(&self) -> u64 {
        self.obs.stats.now_us / 1000
    }

    /// GET, or an MGET of one slot, with the cache on: answered now when
    /// every key hits; otherwise sent, with the opt-in when a fill is
    /// admitted (replica reads never fill).
    pub(super) fn cached_read(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        slot: u16,
        read: bool,
        frame: Bytes,
        ranges: &[Range<usize>],
    ) {
        let Some((proto, cached)) = self.sessions.get(key).map(|s| (s.proto, caches(s))) else {
            return;
        };
        let multi = !frame[ranges[0].clone()].eq_ignore_ascii_case(b"get");
        let keys = ranges[1..].iter().map(|r| &frame[r.clone()]);
        if ranges.len() - 1 > MAX_FILL_KEYS || !cached {
            if self.cache.tracked_read {
                return self.tracked_unit(cx, key, slot, frame);
            }
            return self.forward_unit(cx, key, slot, read, frame);
        }
        if let Some(hit) = self.lookup_all(key, slot, keys, multi, proto) {
            return self.reply(key, hit);
        }
        if read && self.place.reads_replicas() && !self.cache.tracked_read {
            return self.forward_unit(cx, key, slot, read, frame);
        }
        let Some(pool) = self.place.master(slot, proto) else {
            return self.reply_static(key, router::ERR_SLOT_UNSERVED);
        };
        let plain = (Purpose::Client, slot);
        self.send_filling(cx, pool, key, None, frame, plain, Purpose::Fill);
    }

    /// One part of a cross-slot MGET: folded in now when every key hits,
    /// otherwise sent, filling when admitted.
    pub(super) fn cached_part(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        seq: u64,
        part: u32,
        slot: u16,
        req: Bytes,
    ) {
        let Some((proto, cached)) = self.sessions.get(key).map(|s| (s.proto, caches(s))) else {
            return;
        };
        if !cached {
            // Not a key the cache holds (`caches`).
            let f = InFlight::new(key, seq, req, Purpose::Part(part));
            return match self.place.master(slot, proto) {
                Some(set) => self.send_to_pool(cx, set, f),
                None => self.fold_part(
                    cx,
                    key,
                    seq,
                    part,
                    Bytes::from_static(router::ERR_SLOT_UNSERVED),
                ),
            };
        }
        let held = req.clone();
        if let Some(hit) = self.lookup_all(key, slot, frame_args(&held).skip(1), true, proto) {
            return self.fold_part(cx, key, seq, part, hit);
        }
        let Some(pool) = self.place.master(slot, proto) else {
            let err = Bytes::from_static(router::ERR_SLOT_UNSERVED);
            return self.fold_part(cx, key, seq, part, err);
        };
        // A part of an MGET of at most 64 keys (see `fanout`): its number
        // fits 16 bits; a larger one goes unfilled.
        let Ok(short) = u16::try_from(part) else {
            let f = InFlight::new(key, seq, req, Purpose::Part(part));
            return self.send_to_pool(cx, pool, f);
        };
        let fill = move |t| Purpose::FillPart(short, t);
        self.send_filling(
            cx,
            pool,
            key,
            Some(seq),
            req,
            (Purpose::Part(part), slot),
            fill,
        );
    }

    /// Look every key (all of unit `unit`) up (a lookup of as many keys
    /// as there are): the reply when all of them hit, the GET's frame or
    /// an MGET's array.
    fn lookup_all<'k>(
        &mut self,
        session: Key,
        unit: u16,
        keys: impl Iterator<Item = &'k [u8]> + Clone,
        multi: bool,
        proto: Proto,
    ) -> Option<Bytes> {
        let now = self.cache_now_ms();
        let c = &mut self.cache.cache;
        let n = keys.clone().count();
        c.stats.lookups += n as u64;
        let mut found = 0usize;
        let mut all = true;
        if !multi {
            // Full within a batch (its frames not written yet): a new
            // buffer; the old one goes with the last of its frames.
            let arena = self.sessions.get_mut(session)?.hit_room(INLINE_FRAME);
            let hit = keys.clone().next().and_then(|k| c.get(k, unit, now, arena));
            let hit_now = hit.is_some();
            c.admission.record(1, hit_now);
            if let Some(h) = hit {
                c.stats.hits += 1;
                return Some(as_reply(h, proto));
            }
            c.stats.misses += 1;
            return None;
        }
        // The array is built where single hits go, the session's arena (a
        // miss takes back what was written): no allocation per MGET.
        let arena = self
            .sessions
            .get_mut(session)?
            .hit_room(INLINE_FRAME * n.min(8));
        // (Empty between lookups: each hit splits off what it wrote.)
        debug_assert!(arena.is_empty());
        crate::resp::encode::array_into(arena, n);
        for k in keys {
            let copy = |h: &[u8]| {
                if all {
                    arena.extend_from_slice(reply_of(h, proto));
                }
            };
            match c.get_with(k, unit, now, copy) {
                Some(()) => found += 1,
                None => all = false,
            }
        }
        c.stats.hits += found as u64;
        c.stats.misses += (n - found) as u64;
        c.admission.record(n, all);
        if !all {
            arena.clear();
            return None;
        }
        Some(arena.split().freeze())
    }

    /// At dispatch, before the decision is applied: a write forgets its
    /// keys and holds them until its reply (`seq`); a script that may
    /// write holds its whole unit (`unit`; every unit when it has none);
    /// FLUSHALL/FLUSHDB forget everything and hold every unit. Returns
    /// whether holds were taken.
    pub(super) fn cache_write(
        &mut self,
        key: Key,
        cmd: &'static Command,
        args: &Args,
        (queued, unit): (bool, Option<u16>),
    ) -> bool {
        let Some(next) = self.sessions.get(key).map(|s| s.ring.next_seq()) else {
            return false;
        };
        let seq = if queued { TXN_HOLD } else { next };
        if cmd.route == Route::ClusterWide(command::Wide::Flushall) {
            self.cache.cache.flush();
            // Queued: tracking clients hear of it after EXEC's reply.
            if !queued {
                self.tracking_flush(Some((key, next)));
            }
            // Every other worker's entries go at the flush's reply.
            if !self.cache.on {
                return false;
            }
            let hold = self.cache.cache.hold_all();
            if let Some(s) = self.sessions.get_mut(key) {
                s.holds.push((seq, hold));
            }
            return !queued;
        }
        // Scripts carry no WRITE flag: EVAL, EVALSHA and FCALL may write
        // their declared keys (their _RO forms may not).
        let writes = cmd.flags & flags::WRITE != 0 || crate::command::known::script_may_write(cmd);
        if !writes {
            return false;
        }
        if self.cache.clients > 0 {
            let expires = crate::cache::tracking::sets_expiry(cmd.name, args);
            for i in command::keys(cmd, args) {
                if let Some(k) = args.get(i) {
                    self.tracking_written(k, key, (next, queued), expires);
                }
            }
        }
        if !self.cache.on {
            return false;
        }
        // A script may write keys it did not declare (in its slot, or
        // anywhere on its node when it declared none): it holds its unit.
        let unit_hold = (crate::command::known::script_may_write(cmd) && !no_writes_shebang(args))
            .then(|| match unit {
                Some(u) => self.cache.cache.hold_unit(u),
                None => self.cache.cache.hold_all(),
            });
        let Some(s) = self.sessions.get_mut(key) else {
            return false;
        };
        let mut any = false;
        if let Some(h) = unit_hold {
            s.holds.push((seq, h));
            any = true;
        }
        for i in command::keys(cmd, args) {
            if let Some(k) = args.get(i) {
                let b = self.cache.cache.hold(k);
                s.holds.push((seq, b));
                any = true;
            }
        }
        any
    }

    /// A write whose reply was given at once (refused, or answered
    /// without a node): its holds go now.
    pub(super) fn cache_settle(&mut self, key: Key, seq: u64) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if s.ring.is_answered(seq) {
            release_seq(&mut self.cache.cache, &mut s.holds, seq);
        }
    }

    /// The reply at `seq` was delivered: release what it held.
    #[inline]
    pub(super) fn cache_release(&mut self, session: Key, seq: u64) {
        if let Some(s) = self.sessions.get_mut(session) {
            if !s.holds.is_empty() {
                release_seq(&mut self.cache.cache, &mut s.holds, seq);
            }
        }
    }

    /// EXEC dispatched at `seq`: the queued commands' holds last until
    /// its reply. DISCARD (`seq` None): they go now.
    pub(super) fn cache_txn_end(&mut self, key: Key, seq: Option<u64>) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        match seq {
            Some(seq) => {
                for h in s.holds.iter_mut().filter(|h| h.0 == TXN_HOLD) {
                    h.0 = seq;
                }
            }
            None => release_seq(&mut self.cache.cache, &mut s.holds, TXN_HOLD),
        }
    }

    /// A new map was installed over `old`: a unit of the cached pool whose
    /// master changed drops what every worker cached of it (a nil too: the
    /// new owner never tracked it); a ring rebuilt moves keys between
    /// units, so everything cached goes.
    pub(super) fn cache_map_changed(&mut self, old: &crate::topology::Topology) {
        use crate::topology::snapshot::Layout;
        let new = self.place.map().clone();
        let (Some(a), Some(b)) = (old.pools.first(), new.pools.first()) else {
            return;
        };
        let master = |m: &crate::topology::Topology, unit: u16| {
            m.shard_of(unit)
                .and_then(|s| m.master_of(s))
                .map(|n| n.addr)
        };
        match (&a.layout, &b.layout) {
            (Layout::Cluster, Layout::Cluster) if a.base == b.base => {
                let units = b.base..b.base.saturating_add(b.units.min(1 << 16) as u16);
                for unit in units {
                    if master(old, unit) != master(&new, unit) {
                        self.cache.cache.unit_moved(unit);
                    }
                }
            }
            _ => {
                let servers =
                    |m: &crate::topology::Topology, p: &crate::topology::snapshot::PoolMap| {
                        p.shards
                            .clone()
                            .map(|s| m.master_of(s).map(|n| n.addr))
                            .collect::<Vec<_>>()
                    };
                if a != b || servers(old, a) != servers(&new, b) {
                    self.cache.cache.units_remapped();
                }
            }
        }
    }

    /// A session closes: its holds go (nobody is left to read its writes).
    pub(super) fn cache_forget_session(&mut self, holds: Vec<(u64, u32)>) {
        for (_, b) in holds {
            self.cache.cache.release(b);
        }
    }
}

/// An EVAL whose script declares `#!lua flags=no-writes` (or any
/// shebang naming no-writes): it writes nothing, like EVAL_RO.
fn no_writes_shebang(args: &Args) -> bool {
    let Some(body) = args.get(1) else {
        return false;
    };
    if !body.starts_with(b"#!") {
        return false;
    }
    let line = body.split(|&b| b == b'\n').next().unwrap_or_default();
    line.windows(9).any(|w| w == b"no-writes")
}

fn release_seq(cache: &mut ReplyCache, holds: &mut Vec<(u64, u32)>, seq: u64) {
    holds.retain(|&(q, b)| {
        if q == seq {
            cache.release(b);
            false
        } else {
            true
        }
    });
}

/// Whether the reply cache serves session `s`: it holds the keys of the
/// first pool's database 0 only (the same key in another pool, or another
/// database, is another value).
fn caches(s: &crate::session::Session) -> bool {
    s.pool() == 0 && s.db() == 0
}

/// Session hook: its reply cache holds go (nobody is left to read its
/// writes).
#[inline]
pub(super) fn session_closed(w: &mut Worker, _cx: &mut Context<'_, Timer>, s: &mut Session) {
    if !s.holds.is_empty() {
        w.cache_forget_session(std::mem::take(&mut s.holds));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nil_is_stored_once_and_served_in_each_protocol() {
        assert_eq!(storable(b"_\r\n"), Some(NIL_RESP2));
        assert_eq!(storable(b"-WRONGTYPE x\r\n"), None);
        let nil = Bytes::from_static(NIL_RESP2);
        assert_eq!(&as_reply(nil.clone(), Proto::Resp3)[..], NIL_RESP3);
        assert_eq!(&as_reply(nil, Proto::Resp2)[..], NIL_RESP2);
    }
}
