//! The reply cache's trackers: one RESP3 connection per master per
//! worker (`Role::Tracker`), opened for every master that serves slots
//! while the cache (or a tracking client) needs them. Each learns its
//! client id (CLIENT ID), which the shared connections' CLIENT TRACKING
//! redirects to; its pushes are the invalidations (`invalidate [keys]`,
//! or a null after a flush on the node). Losing one, or a change of the
//! masters, empties the cache, and fills wait until every master has a
//! tracker with a known id again (see `cache/`).
//!
//! A tracker's silence counts as its loss: every tick (100 ms) an idle
//! tracker with a known id is sent a PING, and one that has let a request
//! wait [`TRACKER_SILENCE`] with nothing at all arriving (its master
//! frozen, or cut off) is closed as lost, so the cache stops answering
//! from what that tracker was to keep current within about 0.5 s of the
//! master's last word, long before a failover could promote a replica.
//!
//! BCAST clients have trackers of their own (`Role::Tracker` too, one per
//! master per worker, in `CacheState::bcast_trackers`): a connection in
//! `CLIENT TRACKING ON BCAST` that nothing redirects to, so its pushes are
//! exactly the node's BCAST batches (every key a command or event loop
//! turn changed, sorted, in one message), which `tracking.rs` splits per
//! prefix for each BCAST client. Were BCAST on the tracker above, a key
//! some shared connection had read with the opt-in would come twice: once
//! alone at the write (the node's table), once in the batch.
//!
//! ```text
//!   first BCAST client ─► open a BCAST tracker per master ─► ON BCAST
//!        its OK waits until every master's is acknowledged (≤ BCAST_WAIT)
//!   BCAST tracker ◄── >invalidate [k1 k2 ...] ─► BCAST clients, per prefix
//!   last BCAST client gone ─► the BCAST trackers close BCAST_LINGER later
//! ```

use super::cache::{limits, BcastTracker, Tracker, CLIENT_ID};
use super::purpose::{InFlight, Purpose};
use super::{Timer, Worker};
use crate::backend::Role;
use crate::resp::value::{self, Value};
use crate::resp::Proto;
use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const BCAST_ON: &[u8] = b"*4\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n$5\r\nBCAST\r\n";
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
/// How long a tracker may leave a request (its heartbeat) unanswered, with
/// no byte arriving, before it counts as lost. Measured by the tick's
/// sweep, so a silent master is noticed 300 to 500 ms after its last
/// reply (the PING goes out at most a tick after it, the sweep sees the
/// wait from the next tick on).
pub const TRACKER_SILENCE: Duration = Duration::from_millis(200);
/// How long the trackers stay once neither the cache nor any client's
/// tracking needs them.
const TRACKER_LINGER: Duration = Duration::from_secs(5);
/// How long the BCAST trackers stay once the worker's last BCAST client
/// went: a client switching modes (OFF, then ON BCAST with other
/// prefixes) finds them still on, so nothing it writes next goes unheard;
/// past it the nodes stop sending every change to this worker.
const BCAST_LINGER: Duration = Duration::from_secs(5);
/// Most time a BCAST client's `OK` waits for the BCAST trackers (a master
/// that cannot be reached): it is then given, and what changes on that
/// master meanwhile is not heard (the client is told to start over when
/// its tracker comes up, if it read since).
const BCAST_WAIT: Duration = Duration::from_secs(1);

impl Worker {
    /// At every tick: take CONFIG SET's values, open what trackers are
    /// missing, notice a changed set of masters.
    pub(super) fn cache_tick(&mut self, cx: &mut Context<'_, Timer>) {
        let on = self.shared.live.reply_cache.load(Relaxed);
        let (budget, age) = limits(&self.shared);
        self.cache.cache.set_limits(budget, age);
        if on != self.cache.on {
            self.cache.on = on;
            self.cache.cache.flush();
            self.update_hooked();
            log::info!(target: "mithril::cache", "worker {}: reply cache {}", self.id, if on { "on" } else { "off" });
        }
        self.tracking_outbox();
        self.tracking_bound();
        // Trackers exist while the cache or some client's tracking needs
        // them.
        if self.cache.hooked {
            self.cache.unhooked = None;
            self.cache_masters(cx);
            self.trackers_heartbeat(cx);
        } else if !self.cache.trackers.is_empty() {
            // Kept TRACKER_LINGER more: a client that turns tracking off
            // and on again reads with trackers that are up (a read before
            // they are is invalidated at once, a push Redis never sends).
            let since = *self.cache.unhooked.get_or_insert(cx.now);
            if cx.now.saturating_duration_since(since) >= TRACKER_LINGER {
                for t in std::mem::take(&mut self.cache.trackers) {
                    self.drop_backend(cx, t.conn);
                }
                self.cache.masters.clear();
                self.cache.unhooked = None;
            }
        }
        self.bcast_tick(cx);
        self.cache.update_open();
    }

    /// Each tracker with a known id: lost when it has left a request
    /// unanswered for `TRACKER_SILENCE`, else sent a PING when idle.
    fn trackers_heartbeat(&mut self, cx: &mut Context<'_, Timer>) {
        let now = cx.now;
        let mut silent = Vec::new();
        for i in 0..self.cache.trackers.len() {
            let t = &self.cache.trackers[i];
            if t.id == 0 {
                continue;
            }
            let conn = t.conn;
            let Some(b) = self.backends.get_mut(conn) else {
                continue;
            };
            if b.stalled_for(now) > TRACKER_SILENCE {
                silent.push(conn);
            } else if b.in_flight() == 0 {
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    Bytes::from_static(PING),
                    Purpose::Reload,
                ));
                self.mark_backend_dirty(conn);
            }
        }
        for conn in silent {
            self.backend_failed(cx, conn, "silent: no reply to its heartbeat");
        }
    }

    /// The BCAST trackers close `BCAST_LINGER` after the last BCAST
    /// client went; `OK`s held past `BCAST_WAIT` are given.
    fn bcast_tick(&mut self, cx: &mut Context<'_, Timer>) {
        let now = cx.now;
        if !self.cache.bcast.is_empty() {
            self.cache.bcast_idle = None;
        } else if !self.cache.bcast_trackers.is_empty() {
            let since = *self.cache.bcast_idle.get_or_insert(now);
            if now.saturating_duration_since(since) >= BCAST_LINGER {
                for t in std::mem::take(&mut self.cache.bcast_trackers) {
                    self.drop_backend(cx, t.conn);
                }
                self.cache.bcast_idle = None;
                log::debug!(target: "mithril::cache", "worker {}: no BCAST client left: BCAST trackers closed", self.id);
            }
        }
        let late = |w: &(Key, u64, Instant)| now.saturating_duration_since(w.2) >= BCAST_WAIT;
        if self.cache.bcast_waiting.iter().any(late) {
            let (give, keep) = std::mem::take(&mut self.cache.bcast_waiting)
                .into_iter()
                .partition(late);
            self.cache.bcast_waiting = keep;
            self.bcast_answer(give);
        }
        if self.cache.track_waiting.iter().any(late) {
            let (give, keep) = std::mem::take(&mut self.cache.track_waiting)
                .into_iter()
                .partition(late);
            self.cache.track_waiting = keep;
            self.bcast_answer(give);
        }
    }

    /// Every master has a BCAST tracker whose BCAST is on.
    pub(super) fn bcast_ready(&self) -> bool {
        let c = &self.cache;
        !c.masters.is_empty()
            && c.masters
                .iter()
                .all(|m| c.bcast_trackers.iter().any(|t| t.addr == *m && t.on))
    }

    /// The held `OK`s of CLIENT TRACKING ON (BCAST or not).
    fn bcast_answer(&mut self, waiting: Vec<(Key, u64, Instant)>) {
        for (session, seq, _) in waiting {
            self.deliver(session, seq, Bytes::from_static(b"+OK\r\n"), b"");
        }
    }

    /// A BCAST tracker's CLIENT TRACKING ON BCAST was answered.
    pub(super) fn bcast_tracker_on(&mut self, conn: Key, ok: bool) {
        let Some(t) = self
            .cache
            .bcast_trackers
            .iter_mut()
            .find(|t| t.conn == conn)
        else {
            return;
        };
        if !ok {
            // Not on: the held OKs are given at BCAST_WAIT; nothing is
            // heard from this master (logged once per connection).
            log::warn!(target: "mithril::cache", "worker {}: {} refused CLIENT TRACKING ON BCAST: BCAST clients hear nothing of it", self.id, t.addr);
            return;
        }
        t.on = true;
        // From now on the node reports every key to it. What a BCAST
        // client read before may have changed unheard: it starts over
        // (once, if it read since).
        self.tracking_flush_bcast();
        if self.bcast_ready() && !self.cache.bcast_waiting.is_empty() {
            let waiting = std::mem::take(&mut self.cache.bcast_waiting);
            self.bcast_answer(waiting);
        }
    }

    /// Compare the masters with the map's; open a tracker for each that
    /// lacks one. A changed set flushes the cache.
    pub(super) fn cache_masters(&mut self, cx: &mut Context<'_, Timer>) {
        // Masters serving slots: a failed master the map still lists
        // (with no slots left) needs no tracker.
        let masters = self.place.map().serving_masters();
        if masters != self.cache.masters {
            if !self.cache.masters.is_empty() {
                self.cache.cache.flush();
                self.tracking_flush(None);
                log::debug!(target: "mithril::cache", "worker {}: masters changed: cache flushed", self.id);
            }
            // Trackers of nodes that are no longer masters go.
            let mut gone: Vec<Key> = Vec::new();
            self.cache.trackers.retain(|t| {
                let keep = masters.contains(&t.addr);
                if !keep {
                    gone.push(t.conn);
                }
                keep
            });
            self.cache.bcast_trackers.retain(|t| {
                let keep = masters.contains(&t.addr);
                if !keep {
                    gone.push(t.conn);
                }
                keep
            });
            for conn in gone {
                self.drop_backend(cx, conn);
            }
            self.cache.masters = masters;
        }
        for i in 0..self.cache.masters.len() {
            let addr = self.cache.masters[i];
            if self.cache.trackers.iter().any(|t| t.addr == addr) {
                continue;
            }
            if let Some(conn) = self.open_tracker(cx, addr, CLIENT_ID, Purpose::TrackerId) {
                self.cache.trackers.push(Tracker { addr, conn, id: 0 });
            }
        }
        self.bcast_trackers_open(cx);
        self.cache.update_open();
    }

    /// While BCAST clients exist: a BCAST tracker for each master that
    /// lacks one.
    pub(super) fn bcast_trackers_open(&mut self, cx: &mut Context<'_, Timer>) {
        if self.cache.bcast.is_empty() {
            return;
        }
        for i in 0..self.cache.masters.len() {
            let addr = self.cache.masters[i];
            if self.cache.bcast_trackers.iter().any(|t| t.addr == addr) {
                continue;
            }
            if let Some(conn) = self.open_tracker(cx, addr, BCAST_ON, Purpose::Tracking) {
                self.cache.bcast_trackers.push(BcastTracker {
                    addr,
                    conn,
                    on: false,
                });
            }
        }
    }

    /// A tracker connection to `addr` (either kind), `first` queued on it.
    fn open_tracker(
        &mut self,
        cx: &mut Context<'_, Timer>,
        addr: SocketAddr,
        first: &'static [u8],
        purpose: Purpose,
    ) -> Option<Key> {
        let pool = self.place.map().pool_of_addr(addr).unwrap_or(0);
        let db = self.shared.pools.get(pool).map_or(0, |p| p.db);
        match self.open_backend(cx, addr, (pool, db), Role::Tracker, Proto::Resp3, false) {
            Ok(conn) => {
                if let Some(b) = self.backends.get_mut(conn) {
                    b.enqueue(InFlight::new(
                        Key::NONE,
                        0,
                        Bytes::from_static(first),
                        purpose,
                    ));
                }
                self.mark_backend_dirty(conn);
                Some(conn)
            }
            Err(e) => {
                log::debug!(target: "mithril::cache", "worker {}: no tracker to {addr}: {}", self.id, String::from_utf8_lossy(&e).trim_end());
                None
            }
        }
    }

    /// A tracker connection closed or failed: its invalidations may be
    /// lost, so everything goes, and fills wait for a new tracker (opened
    /// at the next tick). Its id is forgotten first: no connection is told
    /// to redirect at it any more.
    pub(super) fn tracker_lost(&mut self, conn: Key) {
        if let Some(i) = self
            .cache
            .bcast_trackers
            .iter()
            .position(|t| t.conn == conn)
        {
            // A BCAST tracker: what its master changes is not heard until
            // the next tick opens another, whose BCAST starts the BCAST
            // clients over; so does this loss, for what they read.
            let t = self.cache.bcast_trackers.swap_remove(i);
            if t.on {
                self.tracking_flush_bcast();
                log::debug!(target: "mithril::cache", "worker {}: BCAST tracker to {} lost", self.id, t.addr);
            }
            return;
        }
        let Some(i) = self.cache.trackers.iter().position(|t| t.conn == conn) else {
            return;
        };
        let t = self.cache.trackers.swap_remove(i);
        // One that never learnt its id let no fill be armed: nothing of
        // the cache depended on it.
        if t.id != 0 {
            self.cache.cache.flush();
            self.tracking_flush_reads();
            self.pipe_tracker(t.addr, 0);
            log::debug!(target: "mithril::cache", "worker {}: tracker to {} lost: cache flushed", self.id, t.addr);
        }
        self.cache.update_open();
    }

    /// The reply to a tracker's CLIENT ID.
    pub(super) fn tracker_id(&mut self, conn: Key, frame: &[u8]) {
        let id = crate::resp::int_reply(frame).filter(|&n| n > 0);
        if let (Some(id), Some(t)) = (id, self.cache.trackers.iter_mut().find(|t| t.conn == conn)) {
            t.id = id as u64;
            let addr = t.addr;
            self.pipe_tracker(addr, id as u64);
        }
        self.cache.update_open();
        if !self.cache.track_waiting.is_empty() && self.trackers_ready() {
            let waiting = std::mem::take(&mut self.cache.track_waiting);
            self.bcast_answer(waiting);
        }
    }

    /// A push on a tracker connection: `invalidate [keys]`, or
    /// `invalidate` with a null (the node was flushed).
    pub(super) fn tracker_push(&mut self, conn: Key, frame: &[u8]) {
        if self.cache.bcast_trackers.iter().any(|t| t.conn == conn) {
            return self.bcast_tracker_push(frame);
        }
        // The tracker of a pipe this worker owns speaks for every worker
        // that read through the pipe.
        let addr = self
            .cache
            .trackers
            .iter()
            .find(|t| t.conn == conn)
            .map(|t| t.addr);
        let shared = self.pipes.on && addr.is_some_and(|a| self.owns_pipe(a));
        let Some(keys) = invalidated(frame) else {
            return;
        };
        match keys {
            Some(keys) => {
                let keys: Vec<&[u8]> = keys.iter().filter_map(Value::as_bytes).collect();
                for k in &keys {
                    if shared {
                        self.pipe_invalidate(Some(k));
                    }
                    self.cache.cache.invalidate(k);
                    self.cache.cache.stats.invalidations += 1;
                }
                if self.cache.clients > 0 {
                    self.tracking_changed(&keys);
                }
            }
            None => {
                if shared {
                    self.pipe_invalidate(None);
                }
                self.cache.cache.flush();
                self.tracking_flush_reads();
            }
        }
    }

    /// A push on a BCAST tracker: the node's batch, for the BCAST
    /// clients (a null: the node was flushed, they forget everything).
    fn bcast_tracker_push(&mut self, frame: &[u8]) {
        if self.cache.bcast.is_empty() {
            return;
        }
        match invalidated(frame) {
            Some(Some(keys)) => {
                let keys: Vec<&[u8]> = keys.iter().filter_map(Value::as_bytes).collect();
                self.tracking_bcast(&keys);
            }
            Some(None) => {
                for i in 0..self.cache.bcast.len() {
                    let s = self.cache.bcast[i];
                    self.track_push(s, None, None);
                }
            }
            None => {}
        }
    }
}

/// The keys of an `invalidate` push (`Some(None)`: the null of a flush);
/// `None` for any other frame.
fn invalidated(frame: &[u8]) -> Option<Option<Vec<Value>>> {
    let Ok(Some((Value::Push(items), _))) = value::parse(frame) else {
        return None;
    };
    let mut items = items.into_iter();
    if items.next().as_ref().and_then(Value::as_bytes) != Some(&b"invalidate"[..]) {
        return None;
    }
    Some(match items.next() {
        Some(Value::Array(keys) | Value::Set(keys) | Value::Push(keys)) => Some(keys),
        _ => None,
    })
}
