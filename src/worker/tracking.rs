//! Client-side caching through the proxy: a client's CLIENT TRACKING,
//! served from the invalidations the worker's trackers already receive.
//!
//! ```text
//!   tracking client: GET k ─► table: k → {session}   (remembered at dispatch)
//!                           └► CLIENT CACHING YES, GET k on the shared
//!                              connection (its OPTIN tracking → tracker)
//!   tracker ◄── >invalidate [k] ─► table.take(k) ─► each session: push
//!   SET k through this worker ──► table.take(k) ─► push (NOLOOP: not the writer)
//!   BCAST client ─► BCAST trackers (one per master, ON BCAST); the keys of
//!                   each batch they hear, per prefix of the client
//!   tracker lost, FLUSHALL, masters changed ─► every tracking client: null
//! ```
//!
//! A push goes out behind every reply the client was owed when it was
//! queued (its barrier is the session's last sequence), so a read whose
//! reply is still on its way cannot arrive after the invalidation that
//! followed it; the writer's own push follows its write's reply (EXEC's
//! for a write queued in MULTI). RESP3
//! clients get `>invalidate`; a REDIRECT target gets it too, or over RESP2
//! the message on `__redis__:invalidate` when it is subscribed to anything.
//!
//! Not the node's: the table is per worker, bounded by its share of
//! `tracking-table-max-keys` (the oldest keys are invalidated to make
//! room); a read whose master has no tracker with a known id yet is
//! followed by its invalidation at once (the client cannot cache it); a
//! read the proxy cannot send with the opt-in (a cross-slot PFCOUNT) is
//! too; a redirected or retried read, or one whose opt-in was refused, is
//! followed by the null. A script's keys are remembered apart, for the
//! node's invalidations only (it tracks them only if the script read). A REDIRECT target of another worker must have asked for
//! its id (CLIENT ID, HELLO: `Shared::named_clients`); its invalidations
//! cross the fabric (`WorkerMsg::Invalidate`). A write sent through
//! another worker reaches this worker's clients as the node's
//! invalidation, as a write made directly on a node.

use super::purpose::Purpose;
use super::{Timer, Worker};
use crate::cache::tracking::{self, Request};
use crate::command::{self, flags, Args, Command, Route};
use crate::resp::Proto;
use crate::router::{self, Decision, TxnOp};
use crate::session::Session;
use crate::shared::{Invalidation, WorkerMsg};
use bytes::Bytes;
use reactor::{Context, Key};

const OK: &[u8] = b"+OK\r\n";
/// Most keys remembered as written by a BCAST NOLOOP client, until the
/// node's invalidation of each comes back (past it they are forgotten:
/// the writer may hear of its own write).
const LOOP_WRITES_MOST: usize = 4096;
/// Most invalidations kept for full mailboxes of other workers; past it
/// they are dropped (logged at debug).
const OUTBOX_MOST: usize = 65536;

/// What a tracking session's command means for the table (decided before
/// the command is applied).
pub(super) enum Read {
    /// Not a read to remember.
    None,
    /// Remembered; sent with the opt-in.
    OptIn,
    /// Remembered nowhere: its invalidation follows its reply.
    Uncached,
}

impl Worker {
    /// Some session of this worker has tracking on, or the reply cache is:
    /// requests go through the cache's dispatch step.
    pub(super) fn update_hooked(&mut self) {
        self.cache.hooked = self.cache.on || self.cache.clients > 0;
    }

    /// Every master has a tracker whose id is known.
    pub(super) fn trackers_ready(&self) -> bool {
        let c = &self.cache;
        !c.masters.is_empty()
            && c.masters
                .iter()
                .all(|m| c.trackers.iter().any(|t| t.addr == *m && t.id != 0))
    }

    /// CLIENT TRACKING.
    pub(super) fn client_tracking(&mut self, cx: &mut Context<'_, Timer>, key: Key, args: &Args) {
        let a: Vec<&[u8]> = (2..args.len())
            .map(|i| args.get(i).unwrap_or_default())
            .collect();
        // A session of this worker, or one of another that asked for its
        // id (how a client learns the id it redirects to).
        let (sessions, shared, me) = (&self.sessions, &self.shared, self.id);
        let find = |id: u64| {
            if let Some((k, _)) = sessions.iter().find(|(_, x)| x.id == id) {
                return Some((me, k));
            }
            shared.named_clients.lock().ok()?.get(&id).copied()
        };
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        let parsed = tracking::parse(&a, s.tracking(), |id| find(id).is_some());
        let target = match &parsed {
            Ok(Request::On(t)) if t.redirect != 0 => find(t.redirect).unwrap_or((me, Key::NONE)),
            _ => (me, Key::NONE),
        };
        let req = match parsed {
            Ok(r) => r,
            Err(e) => return self.reply(key, e),
        };
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let was = s.tracking().is_some();
        match req {
            Request::On(mut t) => {
                // Nothing read under tracking yet: a null would say
                // nothing (Redis sends none when tracking goes on).
                t.clean = true;
                let bcast = t.bcast;
                s.track(Box::new(t), target);
                if !was {
                    self.cache.clients += 1;
                }
                if bcast && !self.cache.bcast.contains(&key) {
                    self.cache.bcast.push(key);
                }
                self.update_hooked();
                self.cache_masters(cx);
                if bcast && !self.bcast_ready() {
                    // The OK waits for every master's BCAST tracker to be
                    // on (at most BCAST_WAIT), so a write the client sends
                    // once it has its OK is heard (`trackers.rs`).
                    if let Some(s) = self.sessions.get_mut(key) {
                        let seq = s.ring.push_pending();
                        self.cache.bcast_waiting.push((key, seq, cx.now));
                    }
                    return;
                }
                if !bcast && !self.trackers_ready() {
                    // Likewise until every master has a tracker with a
                    // known id: a read sent before could not be tracked.
                    if let Some(s) = self.sessions.get_mut(key) {
                        let seq = s.ring.push_pending();
                        self.cache.track_waiting.push((key, seq, cx.now));
                    }
                    return;
                }
            }
            Request::Off => self.tracking_off(key),
        }
        self.reply(key, Bytes::from_static(OK));
    }

    /// Tracking goes off for `key` (CLIENT TRACKING OFF, RESET, close).
    pub(super) fn tracking_off(&mut self, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if s.untrack() {
            self.cache.clients -= 1;
            self.cache.bcast.retain(|&k| k != key);
            self.update_hooked();
        }
    }

    /// A session closes: it tracks no more (its table entries are dropped
    /// lazily: a closed session's key no longer resolves).
    pub(super) fn tracking_closed(&mut self, key: Key) {
        self.cache.clients -= 1;
        self.cache.bcast.retain(|&k| k != key);
        self.update_hooked();
    }

    /// Before a tracking session's command is applied: what its read
    /// means for the table, with its keys remembered when they are. Also
    /// marks the session as having sent a command (a later null is news).
    pub(super) fn tracking_read(
        &mut self,
        key: Key,
        cmd: &'static Command,
        decision: &Decision,
        args: &Args,
    ) -> Read {
        let ready = self.trackers_ready();
        let Some(t) = self.sessions.get_mut(key).and_then(|s| s.tracking_mut()) else {
            return Read::None;
        };
        t.clean = false;
        t.read_since_null |= cmd.flags & flags::WRITE == 0;
        // A script's declared keys are tracked by the node only if it
        // calls a read command: it goes with the opt-in, and its keys
        // wait for the node's word (`script_table`).
        let script = tracking::is_script(cmd.name);
        let reads = cmd.flags & flags::READONLY != 0
            && cmd.flags & flags::PUBSUB == 0
            && cmd.route != Route::Eval
            && !script;
        if reads && t.bcast && t.noloop && !self.cache.loop_writes.is_empty() {
            // A BCAST NOLOOP client reads a key it gave a time to live,
            // before its write was heard: the read may expire it, and
            // the node sends that deletion (no client's) in the same
            // batch as the write (unit/tracking's "lazy expired keys":
            // SET k PX 1, DEBUG SLEEP, GET k in one MULTI). It is not
            // left out: an invalidation too many is safe, one missing
            // is not.
            for i in command::keys(cmd, args) {
                let own = args
                    .get(i)
                    .filter(|k| self.cache.loop_writes.get(*k) == Some(&(key, true)));
                if let Some(k) = own {
                    self.cache.loop_writes.remove(k);
                }
            }
        }
        if !(reads || script) || !t.remembers() {
            return Read::None;
        }
        let how = match decision {
            Decision::Unit { .. } | Decision::Queue { .. } => Read::OptIn,
            Decision::Eval { unit: Some(_), .. } => Read::OptIn,
            // No key (numkeys 0): the node tracks nothing of it.
            Decision::Eval { unit: None, .. } => return Read::None,
            Decision::Fanout(k) if *k != command::Fanout::Pfcount => Read::OptIn,
            Decision::Refuse(_) | Decision::Local(_) => return Read::None,
            _ => Read::Uncached,
        };
        // A queued read is sent at EXEC, to one master: whether its
        // tracker is up is seen then (`send_opted`).
        let queued = matches!(decision, Decision::Queue { .. });
        if matches!(how, Read::Uncached) || !(ready || queued) {
            return Read::Uncached;
        }
        if queued {
            t.txn_reads = true;
        }
        // A CONFIG SET of tracking-table-max-keys counts from the next
        // read, not from the next tick.
        self.tracking_bound();
        let mut evicted = Vec::new();
        let table = if script {
            &mut self.cache.script_table
        } else {
            &mut self.cache.table
        };
        for i in command::keys(cmd, args) {
            if let Some(k) = args.get(i) {
                table.remember(k, key, |k, s| evicted.push((k, s)));
                // A new read: what the session wrote of it before is
                // not what the node will tell of next.
                if self.cache.script_loop.get(k) == Some(&key) {
                    self.cache.script_loop.remove(k);
                }
            }
        }
        self.tracking_evicted(evicted);
        how
    }

    /// Keys the table's bound evicted: their sessions are told.
    pub(super) fn tracking_evicted(&mut self, evicted: Vec<(Bytes, Vec<Key>)>) {
        for (k, sessions) in evicted {
            for s in sessions {
                self.track_push(s, Some(&[&k]), None);
            }
        }
    }

    /// CONFIG SET tracking-table-max-keys (seen at a tick): both tables
    /// take the worker's new share, the oldest keys past it invalidated.
    pub(super) fn tracking_bound(&mut self) {
        let share = super::cache::table_share(&self.shared);
        if share == self.cache.table.max_keys {
            return;
        }
        let mut evicted = Vec::new();
        self.cache.table.set_max(share, |k, s| evicted.push((k, s)));
        self.cache
            .script_table
            .set_max(share, |k, s| evicted.push((k, s)));
        self.tracking_evicted(evicted);
    }

    /// After the command: an uncached read's keys are invalidated behind
    /// its reply (`seq`); CLIENT CACHING's flag lasts one command (or one
    /// transaction), as on a node.
    pub(super) fn tracking_after(
        &mut self,
        key: Key,
        cmd: &'static Command,
        args: &Args,
        read: Read,
        seq: u64,
    ) {
        if let Read::Uncached = read {
            let keys: Vec<&[u8]> = command::keys(cmd, args)
                .filter_map(|i| args.get(i))
                .collect();
            if !keys.is_empty() {
                self.track_push(key, Some(&keys), Some(seq));
            }
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let in_txn = s.txn.is_some();
        if let Some(t) = s.tracking_mut() {
            if !in_txn && !crate::command::known::is_client_subcommand(cmd) {
                t.caching = false;
            }
        }
    }

    /// EXEC of a transaction whose reads were remembered: it is sent with
    /// the opt-in (`None`: it is not).
    pub(super) fn tracking_exec(&mut self, key: Key, decision: &Decision) -> bool {
        if !matches!(decision, Decision::Txn(TxnOp::Exec)) {
            return false;
        }
        let Some(t) = self.sessions.get_mut(key).and_then(|s| s.tracking_mut()) else {
            return false;
        };
        std::mem::take(&mut t.txn_reads)
    }

    /// A write of `key` dispatched by `writer`, whose reply is `seq`: the
    /// sessions that read it are told (the writer after its reply, and
    /// not at all with NOLOOP).
    /// `expires`: the write gives the key a time to live (see
    /// `tracking_read`).
    pub(super) fn tracking_written(
        &mut self,
        k: &[u8],
        writer: Key,
        (seq, queued): (u64, bool),
        expires: bool,
    ) {
        // A BCAST NOLOOP writer: the node's invalidation of this write
        // (the BCAST tracker hears of every key) is not for it.
        let (noloop, bcast_noloop) = self
            .sessions
            .get(writer)
            .and_then(|x| x.tracking())
            .map_or((false, false), |t| {
                (t.noloop && !t.bcast, t.noloop && t.matches(k))
            });
        if bcast_noloop {
            if self.cache.loop_writes.len() >= LOOP_WRITES_MOST {
                self.cache.loop_writes.clear();
            }
            self.cache
                .loop_writes
                .insert(Bytes::copy_from_slice(k), (writer, expires));
        }
        // A NOLOOP writer's script keys: the node's invalidation of this
        // write, if it tracked the key, is not for it either.
        if noloop && !self.cache.script_table.is_empty() {
            if self.cache.script_loop.len() >= LOOP_WRITES_MOST {
                self.cache.script_loop.clear();
            }
            self.cache
                .script_loop
                .insert(Bytes::copy_from_slice(k), writer);
        }
        let Some(sessions) = self.cache.table.take(k) else {
            return;
        };
        for s in sessions {
            if !self.reads_tracked(s) {
                continue;
            }
            if s == writer {
                let Some(t) = self.sessions.get_mut(s).and_then(|x| x.tracking_mut()) else {
                    continue;
                };
                if t.noloop {
                    continue;
                }
                if queued {
                    // Queued in MULTI: the write runs at EXEC.
                    t.txn_own.push(Bytes::copy_from_slice(k));
                } else {
                    self.track_push(s, Some(&[k]), Some(seq));
                }
            } else {
                self.track_push(s, Some(&[k]), None);
            }
        }
    }

    /// EXEC (or DISCARD, whose keys may still be tracked by the node: told
    /// too), reply at `seq`: the session's own writes queued in the
    /// transaction of keys it read are told behind it.
    pub(super) fn tracking_txn_end(&mut self, key: Key, seq: u64) {
        let Some(t) = self.sessions.get_mut(key).and_then(|x| x.tracking_mut()) else {
            return;
        };
        if t.txn_own.is_empty() {
            return;
        }
        let own = std::mem::take(&mut t.txn_own);
        for k in &own {
            self.track_push(key, Some(&[k]), Some(seq));
        }
    }

    /// A session the table names is told of its keys only while it tracks
    /// in the default mode: what it read before switching to BCAST (or
    /// before tracking went off) is not news to it (as Redis, which skips
    /// BCAST clients when it invalidates its table).
    fn reads_tracked(&self, s: Key) -> bool {
        self.sessions
            .get(s)
            .and_then(|x| x.tracking())
            .is_some_and(|t| !t.bcast)
    }

    /// Keys a tracker heard of in one push: every session that read one is
    /// told of it.
    pub(super) fn tracking_changed(&mut self, keys: &[&[u8]]) {
        for k in keys {
            let mut sessions = self.cache.table.take(k).unwrap_or_default();
            if !self.cache.script_table.is_empty() {
                let own = if self.cache.script_loop.is_empty() {
                    None
                } else {
                    self.cache.script_loop.remove(*k)
                };
                for s in self.cache.script_table.take(k).unwrap_or_default() {
                    if own == Some(s) {
                        // Its own write (NOLOOP): not told, and still
                        // remembered (its script may have read the key
                        // after writing it).
                        let mut evicted = Vec::new();
                        self.cache
                            .script_table
                            .remember(k, s, |k, s| evicted.push((k, s)));
                        self.tracking_evicted(evicted);
                    } else if !sessions.contains(&s) {
                        sessions.push(s);
                    }
                }
            }
            for s in sessions {
                if self.reads_tracked(s) {
                    self.track_push(s, Some(&[k]), None);
                }
            }
        }
    }

    /// Keys a BCAST tracker heard of in one push (the node's batch):
    /// every BCAST session is told of the ones under its prefixes, one
    /// push per prefix with all of them, as Redis batches BCAST
    /// invalidations (the batch is sorted and the prefixes cannot overlap,
    /// so the pushes come in the prefixes' order, as from Redis).
    pub(super) fn tracking_bcast(&mut self, keys: &[&[u8]]) {
        let looped: Vec<Option<Key>> = keys
            .iter()
            .map(|k| {
                if self.cache.loop_writes.is_empty() {
                    None
                } else {
                    self.cache.loop_writes.remove(*k).map(|w| w.0)
                }
            })
            .collect();
        let mut groups: Vec<(usize, Vec<&[u8]>)> = Vec::new();
        for i in 0..self.cache.bcast.len() {
            let s = self.cache.bcast[i];
            let Some(t) = self.sessions.get(s).and_then(|x| x.tracking()) else {
                continue;
            };
            groups.clear();
            for (k, looped) in keys.iter().zip(&looped) {
                if *looped == Some(s) {
                    continue;
                }
                let Some(p) = t.prefix_of(k) else { continue };
                match groups.iter_mut().find(|g| g.0 == p) {
                    Some(g) => g.1.push(k),
                    None => groups.push((p, vec![k])),
                }
            }
            for (_, g) in &groups {
                self.track_push(s, Some(g), None);
            }
        }
    }

    /// Every tracking session of this worker is told to forget everything
    /// (a node flushed, FLUSHALL here, a tracker or a tracked connection
    /// lost, the masters changed); `writer`'s after its reply `seq`.
    pub(super) fn tracking_flush(&mut self, writer: Option<(Key, u64)>) {
        self.cache.table.clear();
        self.cache.script_table.clear();
        self.cache.script_loop.clear();
        if self.cache.clients == 0 {
            return;
        }
        let keys: Vec<Key> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.tracking().is_some())
            .map(|(k, _)| k)
            .collect();
        for k in keys {
            let barrier = writer.filter(|w| w.0 == k).map(|w| w.1);
            self.track_push(k, None, barrier);
        }
    }

    /// Only the sessions tracking in the default mode forget everything
    /// (a tracker or a tracked connection lost, a node's null on a
    /// tracker): what BCAST sessions hear comes from the BCAST trackers.
    pub(super) fn tracking_flush_reads(&mut self) {
        self.cache.table.clear();
        self.cache.script_table.clear();
        self.cache.script_loop.clear();
        if self.cache.clients == self.cache.bcast.len() {
            return;
        }
        let keys: Vec<Key> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.tracking().is_some_and(|t| !t.bcast))
            .map(|(k, _)| k)
            .collect();
        for k in keys {
            self.track_push(k, None, None);
        }
    }

    /// A shared connection whose reads the node tracked closed: the node
    /// forgot what it tracked for it (its invalidations went to the
    /// tracker under its id), so the cache and the tracking clients in
    /// the default mode start over.
    pub(super) fn tracked_conn_lost(&mut self) {
        if !self.cache.cache.is_empty() {
            self.cache.cache.flush();
        }
        self.tracking_flush_reads();
    }

    /// Only the BCAST sessions forget everything (a tracker came up: what
    /// changed while it was not there was not heard of).
    pub(super) fn tracking_flush_bcast(&mut self) {
        for i in 0..self.cache.bcast.len() {
            let s = self.cache.bcast[i];
            // Only a client that may have read something since: one that
            // only wrote (the suite's MSET right after BCAST ON) has
            // nothing to forget, and Redis sends it no null.
            let read = self
                .sessions
                .get_mut(s)
                .and_then(|x| x.tracking_mut())
                .is_some_and(|t| std::mem::take(&mut t.read_since_null));
            if read {
                self.track_push(s, None, None);
            }
        }
    }

    /// Queue `invalidate keys` (None: the null) toward `session`'s client
    /// or its REDIRECT target, behind `barrier` (default: everything it
    /// was owed so far).
    pub(super) fn track_push(
        &mut self,
        session: Key,
        keys: Option<&[&[u8]]>,
        barrier: Option<u64>,
    ) {
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let proto = s.proto;
        let target = s.tracking_target();
        let Some(t) = s.tracking_mut() else {
            return;
        };
        if keys.is_none() {
            if t.clean {
                return;
            }
            t.clean = true;
            t.read_since_null = false;
        }
        let null: &'static [u8] = if proto == Proto::Resp3 {
            b"_\r\n"
        } else {
            b"$-1\r\n"
        };
        let redirect = t.redirect;
        let own_last = s.ring.next_seq().saturating_sub(1);
        if redirect != 0 && target.0 != self.id {
            return self.track_push_remote(session, target, redirect, keys, null, own_last);
        }
        let to = if redirect == 0 { session } else { target.1 };
        let alive = redirect == 0 || self.sessions.get(to).is_some_and(|x| x.id == redirect);
        if !alive {
            if let Some(t) = self
                .sessions
                .get_mut(session)
                .and_then(|s| s.tracking_mut())
            {
                t.broken_redirect = true;
            }
            if proto == Proto::Resp3 {
                self.queue_push(session, own_last, tracking::redir_broken(redirect));
            }
            return;
        }
        let Some(x) = self.sessions.get(to) else {
            return;
        };
        let resp3 = x.proto == Proto::Resp3;
        let subscribed_target = redirect != 0 && x.sub.is_some();
        if !resp3 && !subscribed_target {
            // RESP2 without a redirect: nothing to send it on (as Redis).
            return;
        }
        if x.ring.next_seq() == 0 {
            return;
        }
        let b = match barrier {
            Some(b) if to == session => b,
            _ => x.ring.next_seq() - 1,
        };
        let frame = tracking::frame(resp3, keys, null);
        self.queue_push(to, b, frame);
    }

    /// The REDIRECT target is a session of worker `target.0`: the
    /// invalidation goes over the fabric, if the target is still listed.
    fn track_push_remote(
        &mut self,
        session: Key,
        target: (usize, Key),
        id: u64,
        keys: Option<&[&[u8]]>,
        null: &'static [u8],
        own_last: u64,
    ) {
        let listed = self
            .shared
            .named_clients
            .lock()
            .ok()
            .and_then(|m| m.get(&id).copied());
        if listed != Some(target) {
            let resp3 = self.sessions.get_mut(session).is_some_and(|s| {
                if let Some(t) = s.tracking_mut() {
                    t.broken_redirect = true;
                }
                s.proto == Proto::Resp3
            });
            if resp3 {
                self.queue_push(session, own_last, tracking::redir_broken(id));
            }
            return;
        }
        let msg = WorkerMsg::Invalidate(Box::new(Invalidation {
            target: target.1,
            id,
            keys: keys.map(|ks| ks.iter().map(|k| Bytes::copy_from_slice(k)).collect()),
            null,
        }));
        if let Some(w) = self.shared.workers.get(target.0) {
            if let Err(back) = w.tx.send(msg) {
                if self.cache.outbox.len() < OUTBOX_MOST {
                    self.cache.outbox.push((target.0, back));
                } else {
                    crate::debug_sampled!(target: "mithril::cache", "worker {}: invalidation toward client {id} dropped (outbox full)", self.id);
                }
            }
        }
    }

    /// Retry what a full mailbox refused (each tick).
    pub(super) fn tracking_outbox(&mut self) {
        if self.cache.outbox.is_empty() {
            return;
        }
        for (to, msg) in std::mem::take(&mut self.cache.outbox) {
            if let Some(w) = self.shared.workers.get(to) {
                if let Err(back) = w.tx.send(msg) {
                    self.cache.outbox.push((to, back));
                }
            }
        }
    }

    /// An invalidation from another worker for its client's REDIRECT
    /// target here.
    pub(super) fn tracking_remote(&mut self, m: Invalidation) {
        let Some(x) = self.sessions.get(m.target).filter(|x| x.id == m.id) else {
            return;
        };
        let resp3 = x.proto == Proto::Resp3;
        if !resp3 && x.sub.is_none() {
            return;
        }
        let Some(b) = x.ring.next_seq().checked_sub(1) else {
            return;
        };
        let keys: Option<Vec<&[u8]>> = m
            .keys
            .as_ref()
            .map(|ks| ks.iter().map(|k| &k[..]).collect());
        let frame = tracking::frame(resp3, keys.as_deref(), m.null);
        self.queue_push(m.target, b, frame);
    }

    /// `key` asked for its id: other workers' clients may redirect to it.
    pub(super) fn tracking_named(&mut self, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if !s.set_named() {
            return;
        }
        if let Ok(mut m) = self.shared.named_clients.lock() {
            m.insert(s.id, (self.id, key));
        }
    }

    fn queue_push(&mut self, to: Key, barrier: u64, frame: Bytes) {
        let Some(x) = self.sessions.get_mut(to) else {
            return;
        };
        x.push_oob(barrier, frame);
        super::overload::mark_over_hard(&self.overload, x);
        if x.mark_dirty() {
            self.dirty_sessions.push(to);
        }
    }

    /// A tracking read of one slot that is not a cached GET: to the
    /// slot's master, with the opt-in.
    pub(super) fn tracked_unit(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        slot: u16,
        frame: Bytes,
    ) {
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        match self.place.master(slot, proto) {
            Some(pool) => self.send_opted(cx, pool, key, None, frame, (Purpose::Client, 1), None),
            None => self.reply_static(key, router::ERR_SLOT_UNSERVED),
        }
    }
}

/// Session hook: it tracks no more, and other clients can no longer
/// redirect to it by its id.
#[inline]
pub(super) fn session_closed(w: &mut Worker, _cx: &mut Context<'_, Timer>, s: &mut Session) {
    if s.tracking().is_some() {
        w.tracking_closed(s.key);
    }
    if s.is_named() {
        if let Ok(mut m) = w.shared.named_clients.lock() {
            m.remove(&s.id);
        }
    }
}
