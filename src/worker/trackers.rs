//! The reply cache's trackers: one RESP3 connection per master per
//! worker (`Role::Tracker`), opened for every master that serves slots
//! while the cache (or a tracking client) needs them. Each learns its
//! client id (CLIENT ID), which the shared connections' CLIENT TRACKING
//! redirects to; its pushes are the invalidations (`invalidate [keys]`,
//! or a null after a flush on the node). Losing one, or a change of the
//! masters, empties the cache, and fills wait until every master has a
//! tracker with a known id again (see `cache.rs`).

use super::cache::{limits, Tracker, CLIENT_ID};
use super::{Timer, Worker};
use crate::backend::{InFlight, Purpose, Role};
use crate::resp::value::{self, Value};
use crate::resp::Proto;
use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;

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
        // Trackers exist while the cache or some client's tracking needs
        // them.
        if self.cache.hooked {
            self.cache_masters(cx);
        } else if !self.cache.trackers.is_empty() {
            for t in std::mem::take(&mut self.cache.trackers) {
                self.drop_backend(cx, t.conn);
            }
            self.cache.masters.clear();
        }
        self.cache.update_open();
    }

    /// Compare the masters with the map's; open a tracker for each that
    /// lacks one. A changed set flushes the cache.
    pub(super) fn cache_masters(&mut self, cx: &mut Context<'_, Timer>) {
        // Masters serving slots: a failed master the map still lists
        // (with no slots left) needs no tracker.
        let topo = &self.topo;
        let mut masters: Vec<SocketAddr> = topo
            .shards
            .iter()
            .filter(|s| !s.ranges.is_empty())
            .filter_map(|s| topo.nodes.get(s.master))
            .map(|n| n.addr)
            .collect();
        masters.sort_unstable();
        masters.dedup();
        if masters != self.cache.masters {
            if !self.cache.masters.is_empty() {
                self.cache.cache.flush();
                self.tracking_flush(None);
                log::debug!(target: "mithril::cache", "worker {}: masters changed: cache flushed", self.id);
            }
            // Trackers of nodes that are no longer masters go.
            let (keep, gone): (Vec<Tracker>, Vec<Tracker>) =
                std::mem::take(&mut self.cache.trackers)
                    .into_iter()
                    .partition(|t| masters.contains(&t.addr));
            self.cache.trackers = keep;
            for t in gone {
                self.drop_backend(cx, t.conn);
            }
            self.cache.masters = masters;
        }
        for i in 0..self.cache.masters.len() {
            let addr = self.cache.masters[i];
            if self.cache.trackers.iter().any(|t| t.addr == addr) {
                continue;
            }
            match self.open_backend(cx, addr, Role::Tracker, Proto::Resp3, false) {
                Ok(conn) => {
                    if let Some(b) = self.backends.get_mut(conn) {
                        b.enqueue(InFlight::new(
                            Key::NONE,
                            0,
                            Bytes::from_static(CLIENT_ID),
                            Purpose::TrackerId,
                        ));
                    }
                    self.mark_backend_dirty(conn);
                    self.cache.trackers.push(Tracker {
                        addr,
                        conn,
                        id: 0,
                        bcast: false,
                    });
                }
                Err(e) => {
                    log::debug!(target: "mithril::cache", "worker {}: no tracker to {addr}: {}", self.id, String::from_utf8_lossy(&e).trim_end());
                }
            }
        }
        self.trackers_bcast();
        self.cache.update_open();
    }

    /// A tracker connection closed or failed: its invalidations may be
    /// lost, so everything goes, and fills wait for a new tracker (opened
    /// at the next tick). Its id is forgotten first: no connection is told
    /// to redirect at it any more.
    pub(super) fn tracker_lost(&mut self, conn: Key) {
        let Some(i) = self.cache.trackers.iter().position(|t| t.conn == conn) else {
            return;
        };
        let t = self.cache.trackers.swap_remove(i);
        // One that never learnt its id let no fill be armed: nothing of
        // the cache depended on it.
        if t.id != 0 {
            self.cache.cache.flush();
            self.tracking_flush(None);
            self.pipe_tracker(t.addr, 0);
            log::debug!(target: "mithril::cache", "worker {}: tracker to {} lost: cache flushed", self.id, t.addr);
        }
        self.cache.update_open();
    }

    /// The reply to a tracker's CLIENT ID.
    pub(super) fn tracker_id(&mut self, conn: Key, frame: &[u8]) {
        let id = frame
            .strip_prefix(b":")
            .and_then(|r| r.strip_suffix(b"\r\n"))
            .and_then(crate::resp::parse_i64)
            .filter(|&n| n > 0);
        if let (Some(id), Some(t)) = (id, self.cache.trackers.iter_mut().find(|t| t.conn == conn)) {
            t.id = id as u64;
            let addr = t.addr;
            self.pipe_tracker(addr, id as u64);
        }
        self.cache.update_open();
        // What BCAST clients would have heard while the tracker was not
        // there is lost: they start over.
        self.tracking_flush_bcast();
    }

    /// A push on a tracker connection: `invalidate [keys]`, or
    /// `invalidate` with a null (the node was flushed).
    pub(super) fn tracker_push(&mut self, conn: Key, frame: &[u8]) {
        // The tracker of a pipe this worker owns speaks for every worker
        // that read through the pipe.
        let addr = self
            .cache
            .trackers
            .iter()
            .find(|t| t.conn == conn)
            .map(|t| t.addr);
        let shared = self.pipes.on && addr.is_some_and(|a| self.owns_pipe(a));
        let Ok(Some((Value::Push(items), _))) = value::parse(frame) else {
            return;
        };
        if items.first().and_then(Value::as_bytes) != Some(&b"invalidate"[..]) {
            return;
        }
        match items.get(1).and_then(Value::as_array) {
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
                self.tracking_flush(None);
            }
        }
    }
}
