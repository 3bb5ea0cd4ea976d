//! Pub/sub: each subscribing session gets subscriber connections of its
//! own, one per node it subscribes on.
//!
//! Where subscriptions go. Channels and patterns go to one "home" node
//! (the master of the first shard; the session's first connection): Redis
//! Cluster forwards every PUBLISH to every node, so one node sees all
//! messages, and PUBSUB CHANNELS/NUMSUB/NUMPAT asked of that same node
//! count mithril's subscribers exactly. Two exceptions:
//!
//! - A shard channel (SSUBSCRIBE) goes to the master of its slot, as a
//!   node forwards SPUBLISH only within its shard. When the slot moves,
//!   the old owner sends an SUNSUBSCRIBE of its own: it is swallowed and
//!   the channel subscribed again where the slot went (the map, or the
//!   MOVED the old owner answers), unseen by the client. A new map moves
//!   every shard channel whose slot changed hands.
//! - Keyspace notifications are published only on the node where the key
//!   lives: a channel starting with `__keyspace@` or `__keyevent@`, and a
//!   pattern that could match such a channel (`__key*`, `*`, `_?key*`...;
//!   see [`keyspace::keyspace_pattern`]), go to every master as well, and
//!   follow the map (a new master gets them, a node no longer master loses
//!   them).
//!   A keyspace message is taken only from those masters, any other
//!   message only from home, so each reaches the client once.
//!
//! Ordering. A subscriber command produces one confirmation per channel
//! (a bare unsubscription names, from the session's mirror of its
//! subscriptions, every subscription of its kind): the session reserves
//! one ring slot per channel when it sends the command, so confirmations
//! interleave with other replies exactly where Redis would put them. The
//! confirmation is built here from the mirror, with the count a single
//! server would give (channels plus patterns; shard channels on their
//! own), and fills its slot when the node it was sent to confirms (for a
//! channel or pattern sent to every master, the last of them: once the
//! client has its confirmation, a write on any master publishes to it, as
//! on a single server; a master lost meanwhile counts as confirmed). A command naming channels is admitted against
//! the dispatch window like everything else: it goes in waves of as many
//! channels as the window has room for (at most `WAVE_MOST`, the most one
//! command does per loop turn), and the rest waits, as a paused session's
//! input does, until replies drain or the next turn comes. The
//! confirmations of a client subscribed to nothing are built here, in the
//! same waves. Published messages are pushes: they leave out of band as
//! soon as the last confirmation received before them has left (their
//! barrier), never earlier. At most PUSH_WINDOW frames (pushes waiting for
//! their barrier plus the session's unwritten queue) wait toward a slow
//! subscriber; past that the proxy stops reading its subscriber
//! connections, and the nodes' own pubsub output limit applies.
//!
//! Layout: this file holds a subscriber's connections, the subscriber
//! commands as they arrive, and what the subscriber connections send
//! back; `wire` the frames, `waves` a command's channels dispatched in
//! waves, `keyspace` the keyspace subscriptions kept on every master,
//! `shard` the shard channels kept where their slot is and the nodes'
//! refusals.

mod keyspace;
mod shard;
mod waves;
mod wire;

pub(super) use waves::Wave;

use self::keyspace::keyspace_channel;
use self::wire::{
    arg_at, command_frame, encode_confirmation, is_confirmation, leading_bulks, Kind,
};
use super::purpose::InFlight;
use super::{Timer, Worker};
use crate::backend::Role;
use crate::command::{Args, Command};
use crate::resp::encode::Encoder;
use crate::resp::Proto;
use crate::router;
use crate::session::Session;
use crate::session::{Expect, SubConn, Subscriptions, MAX_SUBSCRIPTIONS};
use bytes::Bytes;
use reactor::{Context, Key};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;

const ERR_TOO_MANY: &[u8] = b"-ERR mithril: too many subscriptions for one client (32768)\r\n";

/// PING while subscribed (RESP2): `["pong", message or ""]`.
pub(super) fn subscribed_ping(msg: Option<&[u8]>) -> Bytes {
    let mut out = Vec::new();
    Encoder::new(&mut out, Proto::Resp2)
        .array(2)
        .bulk(b"pong")
        .bulk(msg.unwrap_or_default());
    Bytes::from(out)
}

impl Worker {
    /// (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE. One naming channels is dispatched
    /// in waves (see [`Wave`]), run from the session's input processing; a
    /// bare unsubscription becomes one naming every subscription of its
    /// kind, from the mirror.
    pub(super) fn subscribe(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        frame: Bytes,
        args: &Args,
    ) {
        let (kind, unsubscribe) = Kind::of(cmd.name);
        let named = args.len() - 1;
        // Where the first channel's header starts: after the name's CRLF.
        let first = args.ranges.first().map_or(0, |r| r.end + 2);
        if kind == Kind::Shard && named > 0 && !unsubscribe {
            // The router saw every channel is of this unit.
            let unit = self
                .place
                .unit_of(self.pool_of(key), args.get(1).unwrap_or_default());
            if self.place.shard_of(unit).is_none() {
                return self.reply_static(key, router::ERR_SLOT_UNSERVED);
            }
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let wave = |frame: Bytes, at: usize, left: usize| Wave {
            frame,
            at,
            left,
            kind,
            unsubscribe,
        };
        if unsubscribe && s.sub.is_none() {
            // Not subscribed to anything: Redis answers one confirmation
            // with a count of 0 per argument, or one with a null channel.
            if named > 0 {
                self.waves.push((key, wave(frame, first, named)));
                return;
            }
            let mut out = Vec::new();
            encode_confirmation(&mut out, s.proto, kind.confirmation(true), None, 0);
            return self.reply(key, Bytes::from(out));
        }
        if !unsubscribe {
            let current = s.sub.as_ref().map(|x| x.count()).unwrap_or(0);
            if current + named > MAX_SUBSCRIPTIONS {
                return self.reply_static(key, ERR_TOO_MANY);
            }
        }
        if s.sub.is_none() {
            let proto = s.proto;
            let home = self.place.home(s.pool());
            let Some(home) = home
                .and_then(|shard| self.place.shard_master(shard, proto))
                .map(|p| self.place.addr_of(p))
            else {
                return self.reply_static(key, router::ERR_NO_TOPOLOGY);
            };
            let at = (s.pool(), s.db());
            let conn = match self.open_backend(cx, home, at, Role::Pubsub(key), proto, false) {
                Ok(k) => k,
                Err(e) => return self.reply(key, e),
            };
            let Some(s) = self.sessions.get_mut(key) else {
                return;
            };
            s.sub = Some(Box::new(Subscriptions {
                conns: vec![SubConn {
                    addr: home,
                    conn,
                    expect: VecDeque::new(),
                    everywhere: false,
                }],
                channels: HashSet::new(),
                patterns: HashSet::new(),
                shard: HashMap::new(),
                everywhere: false,
                retry_queued: false,
                barrier: 0,
                throttled: false,
                owed: HashMap::new(),
            }));
        }
        if named > 0 {
            self.waves.push((key, wave(frame, first, named)));
            return;
        }
        // A bare unsubscription: every current subscription of its kind,
        // named (in the mirror's order; a node's is its hash table's).
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let Some(sub) = s.sub.as_ref() else { return };
        let names: Vec<&[u8]> = match kind {
            Kind::Channel => sub.channels.iter().map(|c| &c[..]).collect(),
            Kind::Pattern => sub.patterns.iter().map(|c| &c[..]).collect(),
            Kind::Shard => sub.shard.keys().map(|c| &c[..]).collect(),
        };
        if names.is_empty() {
            let count = match kind {
                Kind::Shard => 0,
                _ => sub.plain_count(),
            };
            let mut out = Vec::new();
            encode_confirmation(&mut out, s.proto, kind.confirmation(true), None, count);
            return self.reply(key, Bytes::from(out));
        }
        let left = names.len();
        let all = command_frame(kind.command(true), &names);
        let first = arg_at(
            &all,
            all.iter().position(|&b| b == b'\n').map_or(0, |p| p + 1),
        )
        .map_or(0, |(_, next)| next);
        self.waves.push((key, wave(all, first, left)));
    }

    /// Queue a subscriber command on a subscriber connection.
    pub(super) fn send_subscriber(&mut self, conn: Key, key: Key, frame: Bytes) {
        if let Some(b) = self.backends.get_mut(conn) {
            b.enqueue(InFlight::new(
                key,
                0,
                frame,
                super::purpose::Purpose::Client,
            ));
            self.mark_backend_dirty(conn);
        }
    }

    /// A confirmation for the reserved slot `seq` of `key`.
    pub(super) fn fill_confirmation(&mut self, key: Key, seq: u64, frame: Bytes) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let front = s.ring.fill(seq, frame);
        let cut = super::overload::mark_over_hard(&self.overload, s);
        if (front || cut) && s.mark_dirty() {
            self.dirty_sessions.push(key);
        }
    }

    /// The index of `key`'s subscriber connection to `addr`, connecting
    /// if it has none. `None` if no connection could be opened.
    pub(super) fn sub_conn(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        addr: SocketAddr,
    ) -> Option<usize> {
        let s = self.sessions.get(key)?;
        let (proto, at) = (s.proto, (s.pool(), s.db()));
        if let Some(i) = s.sub.as_ref()?.conns.iter().position(|c| c.addr == addr) {
            return Some(i);
        }
        let conn = self
            .open_backend(cx, addr, at, Role::Pubsub(key), proto, false)
            .ok()?;
        let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
            self.drop_backend(cx, conn);
            return None;
        };
        sub.conns.push(SubConn {
            addr,
            conn,
            expect: VecDeque::new(),
            everywhere: false,
        });
        Some(sub.conns.len() - 1)
    }

    /// Send `cmd names...` on `key`'s subscriber connection `i` for the
    /// proxy's own sake: the confirmations are swallowed. `shard` marks a
    /// shard channel's (un)subscription (one name per command).
    pub(super) fn hidden(
        &mut self,
        key: Key,
        i: usize,
        cmd: &[u8],
        names: &[&[u8]],
        shard: Option<bool>,
        hops: u8,
    ) {
        if names.is_empty() {
            return;
        }
        let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
            return;
        };
        let Some(c) = sub.conns.get_mut(i) else {
            return;
        };
        for (j, name) in names.iter().enumerate() {
            c.expect.push_back(Expect {
                seq: None,
                reply: None,
                shard: shard.map(|unsub| (unsub, Box::from(*name))),
                hops,
                first: j == 0,
            });
        }
        let conn = c.conn;
        self.send_subscriber(conn, key, command_frame(cmd, names));
    }

    /// Whether some subscription of `key` is not where the map says: a
    /// shard channel not placed, or (keyspace subscriptions made) a master
    /// serving slots that does not hold them.
    pub(super) fn unsettled(&self, key: Key) -> bool {
        let pool = self.pool_of(key);
        let Some(sub) = self.sessions.get(key).and_then(|s| s.sub.as_ref()) else {
            return false;
        };
        if sub.shard.values().any(Option::is_none) {
            return true;
        }
        sub.everywhere
            && self
                .place
                .serving_masters(pool)
                .any(|addr| !sub.conns.iter().any(|c| c.everywhere && c.addr == addr))
    }

    /// Try `key`'s subscriptions again at a coming tick if some are not
    /// where the map says.
    pub(super) fn retry_later(&mut self, key: Key) {
        if !self.unsettled(key) {
            return;
        }
        if let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) {
            if !sub.retry_queued {
                sub.retry_queued = true;
                self.resubscribe.push(key);
            }
        }
    }

    /// A new map: every subscriber's keyspace subscriptions and shard
    /// channels follow it.
    pub(super) fn subscribers_follow_topology(&mut self, cx: &mut Context<'_, Timer>) {
        let keys: Vec<(Key, bool)> = self
            .sessions
            .iter()
            .filter_map(|(k, s)| s.sub.as_ref().map(|x| (k, x.everywhere)))
            .collect();
        for (key, everywhere) in keys {
            if everywhere {
                self.keyspace_everywhere(cx, key);
            }
            self.place_shards(cx, key);
        }
    }

    /// A tick (once a second): subscriptions that could not be made where
    /// the map says are tried again.
    pub(super) fn subscribers_retry(&mut self, cx: &mut Context<'_, Timer>) {
        for key in std::mem::take(&mut self.resubscribe) {
            let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
                continue;
            };
            sub.retry_queued = false;
            if sub.everywhere {
                self.keyspace_everywhere(cx, key);
            }
            self.place_shards(cx, key);
        }
    }

    /// `owner`'s subscriber connection `conn` is lost. True when the
    /// session must close: it was the home connection, which held its
    /// channels and patterns. Another one's shard channels are placed
    /// again once the map shows where, and its keyspace subscriptions
    /// follow the map; confirmations it owed are given.
    pub(super) fn subscriber_lost(&mut self, owner: Key, conn: Key) -> bool {
        let Some(sub) = self.sessions.get_mut(owner).and_then(|s| s.sub.as_mut()) else {
            return false;
        };
        let Some(i) = sub.conn_index(conn) else {
            return false;
        };
        if i == 0 {
            return true;
        }
        let c = sub.conns.remove(i);
        for placed in sub.shard.values_mut() {
            if *placed == Some(c.addr) {
                *placed = None;
            }
        }
        // What it owed counts as given (the others' still fill it).
        let mut fills = Vec::new();
        for e in c.expect {
            if let (Some(seq), Some(reply)) = (e.seq, e.reply) {
                fills.extend(sub.confirmed(seq, reply, false).map(|r| (seq, r)));
            }
        }
        for (seq, reply) in fills {
            self.fill_confirmation(owner, seq, reply);
        }
        self.retry_later(owner);
        false
    }

    /// A frame from `owner`'s subscriber connection `conn` (its set-up
    /// replies, AUTH and HELLO 3, are paired by the backend and never come
    /// here): a confirmation fills the slot reserved for it, a message
    /// goes out behind the confirmations received before it, a node's own
    /// SUNSUBSCRIBE (the slot moved away) is swallowed and the channel
    /// placed again.
    pub(super) fn pubsub_frame(
        &mut self,
        cx: &mut Context<'_, Timer>,
        owner: Key,
        conn: Key,
        frame: Bytes,
    ) {
        // An ACL change took the right away: nothing more reaches it.
        if self.revoked(owner) {
            return;
        }
        let pool = self.pool_of(owner);
        let Some(s) = self.sessions.get_mut(owner) else {
            return;
        };
        let Some(sub) = s.sub.as_mut() else {
            return;
        };
        let Some(i) = sub.conn_index(conn) else {
            return;
        };
        if frame.first() == Some(&b'-') {
            // A refusal where confirmations were due: it answers the whole
            // command, every channel it named. A MOVED naming another slot
            // than the front command's answers one already matched (the
            // node's own SUNSUBSCRIBE of the channel came before it).
            let c = &mut sub.conns[i];
            let redirect = router::parse_redirect(&frame, c.addr, self.place.map());
            if let Some(router::Redirect::Moved { slot, .. } | router::Redirect::Ask { slot, .. }) =
                redirect
            {
                let front = c.expect.front().and_then(|e| e.shard.as_ref());
                let unit = self.place.unit_of_slot(pool, slot);
                if front.map(|(_, ch)| self.place.unit_of(pool, ch)) != Some(unit) {
                    return;
                }
            }
            let mut batch = Vec::new();
            while let Some(e) = c.expect.pop_front() {
                batch.push(e);
                if c.expect.front().map_or(true, |e| e.first) {
                    break;
                }
            }
            for e in batch {
                self.refused(cx, owner, i, e, frame.clone());
            }
            return;
        }
        let [kind, second, third] = leading_bulks(&frame);
        let kind = kind.unwrap_or_default();
        if is_confirmation(kind) {
            if kind == b"sunsubscribe" {
                let ours = sub.conns[i].expect.front().is_some_and(
                    |e| matches!(&e.shard, Some((true, ch)) if Some(&ch[..]) == second),
                );
                if !ours {
                    let addr = sub.conns[i].addr;
                    let Some(placed) = second.and_then(|ch| sub.shard.get_mut(ch)) else {
                        return;
                    };
                    if *placed == Some(addr) {
                        *placed = None;
                        self.shared.topology.request_refresh();
                        self.place_shards(cx, owner);
                    }
                    return;
                }
            }
            let Some(e) = sub.conns[i].expect.pop_front() else {
                return;
            };
            if let Some(seq) = e.seq {
                sub.barrier = sub.barrier.max(seq);
                if let Some(reply) = e.reply.and_then(|r| sub.confirmed(seq, r, false)) {
                    self.fill_confirmation(owner, seq, reply);
                }
            }
            return;
        }
        // A keyspace message is taken from the masters that hold the
        // keyspace subscriptions, any other from home only (every node
        // forwards a PUBLISH, so a pattern held on several nodes hears it
        // from each).
        let channel = match kind {
            b"message" => second,
            b"pmessage" => third,
            _ => None,
        };
        if let Some(ch) = channel {
            let keep = if keyspace_channel(ch) {
                sub.conns[i].everywhere
            } else {
                i == 0
            };
            if !keep {
                return;
            }
        }
        let barrier = sub.barrier;
        s.push_oob(barrier, frame);
        super::overload::mark_over_hard(&self.overload, s);
        if s.mark_dirty() {
            self.dirty_sessions.push(owner);
        }
    }

    /// True (and the subscriber marked throttled) when PUSH_WINDOW frames
    /// already wait toward `owner`: stop reading its subscriber connections.
    pub(super) fn push_window_full(&mut self, owner: Key) -> bool {
        let Some(s) = self.sessions.get_mut(owner) else {
            return false;
        };
        if s.push_backlog() < crate::session::PUSH_WINDOW {
            return false;
        }
        if let Some(sub) = s.sub.as_mut() {
            sub.throttled = true;
        }
        true
    }

    /// Close every subscriber connection of a session that leaves its
    /// subscriptions (RESET) or goes; `cancel` answers the confirmations
    /// still due.
    pub(super) fn drop_subscriptions(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cancel: Option<&'static [u8]>,
    ) {
        let Some(mut sub) = self.sessions.get_mut(key).and_then(|s| s.sub.take()) else {
            return;
        };
        for c in std::mem::take(&mut sub.conns) {
            if let Some(err) = cancel {
                for e in c.expect {
                    if let (Some(seq), Some(_)) = (e.seq, e.reply) {
                        let err = Bytes::from_static(err);
                        if let Some(answer) = sub.confirmed(seq, err, true) {
                            self.fill_confirmation(key, seq, answer);
                        }
                    }
                }
            }
            self.drop_backend(cx, c.conn);
        }
        self.resubscribe.retain(|&k| k != key);
    }

    /// PUBSUB subcommands go to the subscribers' home node.
    pub(super) fn forward_pubsub_home(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
    ) {
        match self.place.home(self.pool_of(key)) {
            Some(home) => self.forward_shard(cx, key, home, frame),
            None => self.reply_static(key, router::ERR_NO_TOPOLOGY),
        }
    }
}

/// Session hook: its waves are dropped, its subscriber connections
/// closed, and it leaves the resubscription list.
#[inline]
pub(super) fn session_closed(w: &mut Worker, cx: &mut Context<'_, Timer>, s: &mut Session) {
    let key = s.key;
    if !w.waves.is_empty() {
        w.waves.retain(|x| x.0 != key);
    }
    if let Some(sub) = s.sub.take() {
        for c in sub.conns {
            w.drop_backend(cx, c.conn);
        }
        if !w.resubscribe.is_empty() {
            w.resubscribe.retain(|&k| k != key);
        }
    }
}
