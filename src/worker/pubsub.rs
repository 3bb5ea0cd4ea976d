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
//!   see [`keyspace_pattern`]), go to every master as well, and follow
//!   the map (a new master gets them, a node no longer master loses them).
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
//! channel sent to every master, the first of them; the others' only hold
//! back later messages). A command naming channels is admitted against
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

use super::purpose::InFlight;
use super::{Timer, Worker};
use crate::backend::Role;
use crate::command::{Args, Command};
use crate::resp::encode::Encoder;
use crate::resp::Proto;
use crate::router;
use crate::session::{Expect, SubConn, Subscriptions, MAX_SUBSCRIPTIONS};
use bytes::Bytes;
use reactor::{Context, Key};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::ops::Range;

const ERR_TOO_MANY: &[u8] = b"-ERR mithril: too many subscriptions for one client (32768)\r\n";

/// Most channels one wave takes: the work one subscriber command does per
/// loop turn (a few milliseconds at most), whatever the window admits.
pub(super) const WAVE_MOST: usize = 1024;

/// Most MOVED answers followed for one shard channel's resubscription;
/// past them it waits for the next map.
const MAX_HOPS: u8 = 5;

/// PING while subscribed (RESP2): `["pong", message or ""]`.
pub(super) fn subscribed_ping(msg: Option<&[u8]>) -> Bytes {
    let mut out = Vec::new();
    Encoder::new(&mut out, Proto::Resp2)
        .array(2)
        .bulk(b"pong")
        .bulk(msg.unwrap_or_default());
    Bytes::from(out)
}

/// What a subscriber command subscribes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    /// The kind of a subscriber command, and whether it unsubscribes.
    fn of(name: &str) -> (Kind, bool) {
        let kind = if name.starts_with('p') {
            Kind::Pattern
        } else if name.starts_with("ssub") || name.starts_with("sunsub") {
            Kind::Shard
        } else {
            Kind::Channel
        };
        (kind, name.contains("unsubscribe"))
    }

    /// The first element of its confirmations.
    fn confirmation(self, unsubscribe: bool) -> &'static [u8] {
        match (self, unsubscribe) {
            (Kind::Channel, false) => b"subscribe",
            (Kind::Channel, true) => b"unsubscribe",
            (Kind::Pattern, false) => b"psubscribe",
            (Kind::Pattern, true) => b"punsubscribe",
            (Kind::Shard, false) => b"ssubscribe",
            (Kind::Shard, true) => b"sunsubscribe",
        }
    }

    /// The command sent to a node.
    fn command(self, unsubscribe: bool) -> &'static [u8] {
        match (self, unsubscribe) {
            (Kind::Channel, false) => b"SUBSCRIBE",
            (Kind::Channel, true) => b"UNSUBSCRIBE",
            (Kind::Pattern, false) => b"PSUBSCRIBE",
            (Kind::Pattern, true) => b"PUNSUBSCRIBE",
            (Kind::Shard, false) => b"SSUBSCRIBE",
            (Kind::Shard, true) => b"SUNSUBSCRIBE",
        }
    }
}

const KEYSPACE: &[u8] = b"__keyspace@";
const KEYEVENT: &[u8] = b"__keyevent@";

/// A keyspace or keyevent notification channel: published only on the
/// node where the key lives.
pub(super) fn keyspace_channel(ch: &[u8]) -> bool {
    ch.starts_with(KEYSPACE) || ch.starts_with(KEYEVENT)
}

/// A pattern that could match a keyspace or keyevent channel.
pub(super) fn keyspace_pattern(p: &[u8]) -> bool {
    could_match_prefix(p, KEYSPACE) || could_match_prefix(p, KEYEVENT)
}

/// Whether glob `p` (Redis's syntax: `*`, `?`, `[...]` with `^` and
/// ranges, `\` escapes) could match some string starting with `prefix`:
/// it matches the prefix up to a `*`, or all of it with pattern left.
fn could_match_prefix(p: &[u8], prefix: &[u8]) -> bool {
    let mut i = 0;
    for &c in prefix {
        let Some(&head) = p.get(i) else {
            return false; // the pattern ends inside the prefix
        };
        match head {
            b'*' => return true,
            b'?' => i += 1,
            b'[' => {
                let mut k = i + 1;
                let negate = p.get(k) == Some(&b'^');
                if negate {
                    k += 1;
                }
                let mut hit = false;
                loop {
                    match p.get(k) {
                        None => break,
                        Some(b']') => {
                            k += 1;
                            break;
                        }
                        Some(b'\\') if k + 1 < p.len() => {
                            hit |= p[k + 1] == c;
                            k += 2;
                        }
                        Some(&a) if p.get(k + 1) == Some(&b'-') && k + 2 < p.len() => {
                            let b = p[k + 2];
                            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                            hit |= (lo..=hi).contains(&c);
                            k += 3;
                        }
                        Some(&a) => {
                            hit |= a == c;
                            k += 1;
                        }
                    }
                }
                if hit == negate {
                    return false;
                }
                i = k;
            }
            b'\\' if i + 1 < p.len() => {
                if p[i + 1] != c {
                    return false;
                }
                i += 2;
            }
            lit => {
                if lit != c {
                    return false;
                }
                i += 1;
            }
        }
    }
    true
}

/// The first three bulk strings of a pub/sub frame (`*3\r\n$9\r\n
/// subscribe...` or `>3\r\n...`): its kind, then the channel (or pattern)
/// and, for a pmessage, the channel.
fn leading_bulks(frame: &[u8]) -> [Option<&[u8]>; 3] {
    let mut out = [None; 3];
    let Some(nl) = frame.windows(2).position(|w| w == b"\r\n") else {
        return out;
    };
    let mut at = nl + 2;
    for slot in out.iter_mut() {
        match arg_at(frame, at) {
            Some((r, next)) => {
                *slot = frame.get(r);
                at = next;
            }
            None => break,
        }
    }
    out
}

fn is_confirmation(kind: &[u8]) -> bool {
    matches!(
        kind,
        b"subscribe"
            | b"unsubscribe"
            | b"psubscribe"
            | b"punsubscribe"
            | b"ssubscribe"
            | b"sunsubscribe"
    )
}

/// A subscriber command naming channels, dispatched in waves: what is
/// left of it. Each channel is one confirmation, and so one reply slot: a
/// wave takes no more channels than the session's dispatch window has
/// room for, and the rest of the command waits (as the rest of a paused
/// session's input does) until replies have drained.
pub(super) struct Wave {
    /// The whole request (as the client sent it, or the names of a bare
    /// unsubscription).
    frame: Bytes,
    /// Where the next channel's `$` header starts.
    at: usize,
    /// Channels (or patterns) not dispatched yet.
    left: usize,
    kind: Kind,
    unsubscribe: bool,
}

/// The argument whose `$` header starts at `at` in a request frame: where
/// its bytes are, and where the next argument starts. `None` if the frame
/// holds no argument there (never for a frame the request scanner cut).
fn arg_at(frame: &[u8], at: usize) -> Option<(Range<usize>, usize)> {
    let rest = frame.get(at..)?.strip_prefix(b"$")?;
    let cr = rest.iter().take(24).position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..cr]).ok()?.parse().ok()?;
    let start = at + 1 + cr + 2;
    let end = start.checked_add(len)?;
    if frame.get(end..end.checked_add(2)?) != Some(&b"\r\n"[..]) {
        return None;
    }
    Some((start..end, end + 2))
}

fn bulk_into(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// `cmd names...` as a request frame.
fn command_frame(cmd: &[u8], names: &[&[u8]]) -> Bytes {
    let mut f = format!("*{}\r\n", names.len() + 1).into_bytes();
    bulk_into(&mut f, cmd);
    for n in names {
        bulk_into(&mut f, n);
    }
    Bytes::from(f)
}

/// A confirmation: its kind, the channel (null for a bare command that
/// found nothing) and the count.
fn encode_confirmation(
    out: &mut Vec<u8>,
    proto: Proto,
    kind: &[u8],
    channel: Option<&[u8]>,
    count: usize,
) {
    let mut e = Encoder::new(out, proto);
    e.push(3).bulk(kind);
    match channel {
        Some(ch) => e.bulk(ch),
        None => e.null(),
    };
    e.int(count as i64);
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
    fn send_subscriber(&mut self, conn: Key, key: Key, frame: Bytes) {
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
    fn fill_confirmation(&mut self, key: Key, seq: u64, frame: Bytes) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let front = s.ring.fill(seq, frame);
        let cut = super::overload::mark_over_hard(&self.overload, s);
        if (front || cut) && !s.dirty {
            s.dirty = true;
            self.dirty_sessions.push(key);
        }
    }

    /// The index of `key`'s subscriber connection to `addr`, connecting
    /// if it has none. `None` if no connection could be opened.
    fn sub_conn(
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
    fn hidden(
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

    /// The next wave of `key`'s subscriber command: as many of its channels
    /// as the session's dispatch window has room for, and at most
    /// [`WAVE_MOST`]. When some are left, either the window is full (the
    /// session pauses until replies drain) or the wave took its most:
    /// `true`, the rest goes on in the next loop turn, so one command
    /// cannot keep the worker from its other clients.
    pub(super) fn next_wave(&mut self, cx: &mut Context<'_, Timer>, key: Key) -> bool {
        let Some(i) = self.waves.iter().position(|w| w.0 == key) else {
            return false;
        };
        let (_, mut w) = self.waves.swap_remove(i);
        let Some(s) = self.sessions.get_mut(key) else {
            return false;
        };
        let room = s.pressure.window.saturating_sub(s.outstanding());
        let n = w.left.min(room).min(WAVE_MOST);
        if n == 0 {
            self.waves.push((key, w));
            return false;
        }
        let (walked, end) = if s.sub.is_some() {
            self.wave_subscribed(cx, key, &w, n)
        } else {
            self.wave_unsubscribed(key, &w, n)
        };
        if walked < n {
            // Not a frame the scanner cut: nothing more to take from it.
            crate::debug_sampled!(target: "mithril::worker", "worker {}: a subscriber command's frame ended early", self.id);
            return false;
        }
        w.at = end;
        w.left -= walked;
        if w.left == 0 {
            return false;
        }
        self.waves.push((key, w));
        n == WAVE_MOST && room > n
    }

    /// A wave of a client subscribed to nothing (unsubscriptions only):
    /// every confirmation is built here, in one buffer cut into one frame
    /// per channel. The channels walked, and where the next starts.
    fn wave_unsubscribed(&mut self, key: Key, w: &Wave, n: usize) -> (usize, usize) {
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return (0, w.at);
        };
        let kind = w.kind.confirmation(true);
        let mut out = Vec::with_capacity(n * 32);
        let mut cuts = Vec::with_capacity(n);
        let (mut walked, mut end) = (0, w.at);
        while walked < n {
            let Some((name, next)) = arg_at(&w.frame, end) else {
                break;
            };
            encode_confirmation(&mut out, proto, kind, Some(&w.frame[name]), 0);
            cuts.push(out.len());
            end = next;
            walked += 1;
        }
        let out = Bytes::from(out);
        let mut from = 0;
        for to in cuts {
            self.reply(key, out.slice(from..to));
            from = to;
        }
        (walked, end)
    }

    /// A wave of a subscribed client. The mirror follows, each channel's
    /// confirmation is built here with the count a single server would
    /// give, and waits in a slot reserved now for the node (or the first
    /// of the nodes) that the channel is sent to; one that needs no node
    /// (unsubscribing from what the session does not have) is answered at
    /// once. The channels walked, and where the next starts.
    fn wave_subscribed(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        w: &Wave,
        n: usize,
    ) -> (usize, usize) {
        let pool = self.pool_of(key);
        // Connections first (opening one needs the whole worker).
        let mut shard_addr = None;
        if !w.unsubscribe {
            let mut at = w.at;
            let mut keyspace = false;
            for _ in 0..n {
                let Some((name, next)) = arg_at(&w.frame, at) else {
                    break;
                };
                let name = &w.frame[name];
                match w.kind {
                    Kind::Shard => {
                        // Every channel of the command is in this slot.
                        let unit = self.place.unit_of(pool, name);
                        shard_addr = self.place.master_node(unit).map(|node| node.addr);
                        break;
                    }
                    Kind::Channel => keyspace |= keyspace_channel(name),
                    Kind::Pattern => keyspace |= keyspace_pattern(name),
                }
                at = next;
            }
            if let Some(addr) = shard_addr {
                shard_addr = self.sub_conn(cx, key, addr).map(|_| addr);
            }
            if keyspace
                && !self
                    .sessions
                    .get(key)
                    .and_then(|s| s.sub.as_ref())
                    .is_some_and(|x| x.everywhere)
            {
                self.keyspace_everywhere(cx, key);
            }
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return (0, w.at);
        };
        let proto = s.proto;
        let ring = &mut s.ring;
        let Some(sub) = s.sub.as_mut() else {
            return (0, w.at);
        };
        let shard_conn = shard_addr.and_then(|a| sub.conns.iter().position(|c| c.addr == a));
        let everywhere: Vec<usize> = (0..sub.conns.len())
            .filter(|&i| sub.conns[i].everywhere)
            .collect();
        let kind_name = w.kind.confirmation(w.unsubscribe);
        // Per connection (and per run of one slot for shard channels: a
        // node takes one slot's per command): the names it is sent and how
        // many, in the order of its confirmations.
        let mut outs: Vec<(usize, u16, Vec<u8>, usize)> = Vec::new();
        let mut local: Vec<(u64, Bytes)> = Vec::new();
        let mut targets: Vec<usize> = Vec::new();
        let (mut walked, mut end) = (0, w.at);
        while walked < n {
            let Some((range, next)) = arg_at(&w.frame, end) else {
                break;
            };
            let name = &w.frame[range];
            targets.clear();
            let had = match w.kind {
                Kind::Channel if w.unsubscribe => sub.channels.remove(name),
                Kind::Channel => !sub.channels.insert(name.to_vec()),
                Kind::Pattern if w.unsubscribe => sub.patterns.remove(name),
                Kind::Pattern => !sub.patterns.insert(name.to_vec()),
                Kind::Shard if w.unsubscribe => {
                    let placed = sub.shard.remove(name);
                    if let Some(i) = placed
                        .flatten()
                        .and_then(|a| sub.conns.iter().position(|c| c.addr == a))
                    {
                        targets.push(i);
                    }
                    placed.is_some()
                }
                Kind::Shard => sub.shard.insert(name.to_vec(), shard_addr).is_some(),
            };
            if w.unsubscribe && !had {
                // Nothing to undo on any node.
            } else {
                match w.kind {
                    Kind::Channel if keyspace_channel(name) => targets.extend(&everywhere),
                    Kind::Channel => targets.push(0),
                    Kind::Pattern => {
                        targets.push(0);
                        if keyspace_pattern(name) {
                            targets.extend(everywhere.iter().filter(|&&i| i != 0));
                        }
                    }
                    Kind::Shard if w.unsubscribe => {} // its node, above
                    Kind::Shard => targets.extend(shard_conn),
                }
            }
            let count = match w.kind {
                Kind::Shard => sub.shard.len(),
                _ => sub.plain_count(),
            };
            let mut conf = Vec::with_capacity(32 + name.len());
            encode_confirmation(&mut conf, proto, kind_name, Some(name), count);
            let conf = Bytes::from(conf);
            let seq = ring.push_pending();
            if targets.is_empty() {
                local.push((seq, conf.clone()));
            }
            let slot = match w.kind {
                Kind::Shard => self.place.unit_of(pool, name),
                _ => 0,
            };
            for (j, &t) in targets.iter().enumerate() {
                let Some(c) = sub.conns.get_mut(t) else {
                    continue;
                };
                let run = outs
                    .iter_mut()
                    .rev()
                    .find(|o| o.0 == t)
                    .filter(|o| o.1 == slot);
                let first = match run {
                    Some(o) => {
                        bulk_into(&mut o.2, name);
                        o.3 += 1;
                        false
                    }
                    None => {
                        let mut body = Vec::with_capacity(64);
                        bulk_into(&mut body, name);
                        outs.push((t, slot, body, 1));
                        true
                    }
                };
                c.expect.push_back(Expect {
                    seq: Some(seq),
                    reply: (j == 0).then(|| conf.clone()),
                    shard: (w.kind == Kind::Shard).then(|| (w.unsubscribe, Box::from(name))),
                    hops: 0,
                    first,
                });
            }
            end = next;
            walked += 1;
        }
        let cmd = w.kind.command(w.unsubscribe);
        let sends: Vec<(Key, Bytes)> = outs
            .into_iter()
            .filter_map(|(t, _, body, count)| {
                let conn = sub.conns.get(t)?.conn;
                let mut f = Vec::with_capacity(body.len() + 32);
                f.extend_from_slice(format!("*{}\r\n", count + 1).as_bytes());
                bulk_into(&mut f, cmd);
                f.extend_from_slice(&body);
                Some((conn, Bytes::from(f)))
            })
            .collect();
        for (conn, f) in sends {
            self.send_subscriber(conn, key, f);
        }
        for (seq, conf) in local {
            self.fill_confirmation(key, seq, conf);
        }
        if w.kind == Kind::Shard && !w.unsubscribe && shard_conn.is_none() {
            self.retry_later(key);
        }
        (walked, end)
    }

    /// Make `key`'s keyspace subscriptions on every master the map names
    /// serving slots (and only there): a master that lacks them gets them,
    /// a node that is no longer one loses them (a master left without
    /// slots has no keys; one the map still calls a master of no slots
    /// after a failover is a replica, which applies the writes too, and
    /// would repeat every event). Unseen by the client.
    fn keyspace_everywhere(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let masters: Vec<SocketAddr> = self.place.serving_masters(self.pool_of(key)).collect();
        let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
            return;
        };
        sub.everywhere = true;
        if masters.is_empty() {
            // No master known healthy: keep what is held until the map
            // names one again.
            return;
        }
        let channels: Vec<Vec<u8>> = sub
            .channels
            .iter()
            .filter(|c| keyspace_channel(c))
            .cloned()
            .collect();
        let patterns: Vec<Vec<u8>> = sub
            .patterns
            .iter()
            .filter(|p| keyspace_pattern(p))
            .cloned()
            .collect();
        let channels: Vec<&[u8]> = channels.iter().map(|c| &c[..]).collect();
        let patterns: Vec<&[u8]> = patterns.iter().map(|c| &c[..]).collect();
        // Nodes that are masters no more: their copies go (home keeps its
        // patterns, which serve every other channel too).
        let gone: Vec<usize> = (0..sub.conns.len())
            .filter(|&i| sub.conns[i].everywhere && !masters.contains(&sub.conns[i].addr))
            .collect();
        for &i in &gone {
            sub.conns[i].everywhere = false;
        }
        for i in gone {
            self.hidden(key, i, b"UNSUBSCRIBE", &channels, None, 0);
            if i != 0 {
                self.hidden(key, i, b"PUNSUBSCRIBE", &patterns, None, 0);
            }
        }
        for addr in masters {
            let Some(i) = self.sub_conn(cx, key, addr) else {
                continue;
            };
            let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
                return;
            };
            if sub.conns[i].everywhere {
                continue;
            }
            sub.conns[i].everywhere = true;
            self.hidden(key, i, b"SUBSCRIBE", &channels, None, 0);
            if i != 0 {
                self.hidden(key, i, b"PSUBSCRIBE", &patterns, None, 0);
            }
        }
        self.retry_later(key);
    }

    /// Subscribe `key`'s shard channels where the map says their slots
    /// are, unseen by the client: each one not placed (its node dropped
    /// it, or was lost) or placed on a node that no longer serves its slot.
    fn place_shards(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let pool = self.pool_of(key);
        let place = &self.place;
        let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
            return;
        };
        let want = |ch: &[u8]| {
            place
                .master_node(place.unit_of(pool, ch))
                .filter(|node| node.healthy)
                .map(|node| node.addr)
        };
        // The old owner is not told: a node drops the shard channels of a
        // slot it loses (the SUNSUBSCRIBE it sends is swallowed), and one
        // that is down cannot be told.
        let moves: Vec<(Vec<u8>, Option<SocketAddr>)> = sub
            .shard
            .iter()
            .filter_map(|(ch, &placed)| {
                let to = want(ch);
                (to != placed || placed.is_none()).then(|| (ch.clone(), to))
            })
            .collect();
        for (ch, to) in moves {
            let at = to.and_then(|a| self.sub_conn(cx, key, a).map(|i| (a, i)));
            let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
                return;
            };
            match at {
                Some((addr, i)) => {
                    sub.shard.insert(ch.clone(), Some(addr));
                    self.hidden(key, i, b"SSUBSCRIBE", &[&ch], Some(false), 0);
                }
                None => {
                    sub.shard.insert(ch, None);
                }
            }
        }
        self.retry_later(key);
    }

    /// Whether some subscription of `key` is not where the map says: a
    /// shard channel not placed, or (keyspace subscriptions made) a master
    /// serving slots that does not hold them.
    fn unsettled(&self, key: Key) -> bool {
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
    fn retry_later(&mut self, key: Key) {
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
        for e in c.expect {
            if let (Some(seq), Some(reply)) = (e.seq, e.reply) {
                self.fill_confirmation(owner, seq, reply);
            }
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
                if let Some(reply) = e.reply {
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
        if !s.dirty {
            s.dirty = true;
            self.dirty_sessions.push(owner);
        }
    }

    /// A node refused a subscriber command (one channel of it here). A
    /// shard channel's SSUBSCRIBE answered MOVED (the map was behind) is
    /// sent where MOVED says (at most `MAX_HOPS` times), one answered
    /// CLUSTERDOWN or TRYAGAIN placed again later: the client's
    /// confirmation stands. An SUNSUBSCRIBE's stands too (the node does not
    /// hold the channel). Any other refusal (a permission, say) is the
    /// client's answer, and a shard channel so refused is no longer kept.
    fn refused(
        &mut self,
        cx: &mut Context<'_, Timer>,
        owner: Key,
        i: usize,
        e: Expect,
        frame: Bytes,
    ) {
        let Some(sub) = self.sessions.get_mut(owner).and_then(|s| s.sub.as_mut()) else {
            return;
        };
        if let Some(seq) = e.seq {
            sub.barrier = sub.barrier.max(seq);
        }
        let from = sub.conns[i].addr;
        let transient = [&b"-MOVED "[..], b"-ASK ", b"-CLUSTERDOWN", b"-TRYAGAIN"]
            .iter()
            .any(|p| frame.starts_with(p));
        let mut follow = None;
        let mut retry = false;
        let error_answers = match &e.shard {
            Some((false, ch)) => {
                let here = sub.shard.get(&ch[..]) == Some(&Some(from));
                if !transient {
                    if here {
                        sub.shard.remove(&ch[..]);
                    }
                } else if here {
                    self.shared.topology.request_refresh();
                    let to = match router::parse_redirect(&frame, from, self.place.map()) {
                        Some(router::Redirect::Moved { addr, .. })
                            if addr != from && e.hops < MAX_HOPS =>
                        {
                            Some(addr)
                        }
                        _ => None,
                    };
                    sub.shard.insert(ch.to_vec(), to);
                    retry = to.is_none();
                    follow = to.map(|addr| (addr, ch.clone()));
                }
                !transient
            }
            Some((true, _)) => false,
            None => true,
        };
        if let (Some(seq), Some(reply)) = (e.seq, e.reply) {
            let answer = if error_answers { frame } else { reply };
            self.fill_confirmation(owner, seq, answer);
        }
        if retry {
            self.retry_later(owner);
        }
        let Some((addr, ch)) = follow else {
            return;
        };
        match self.sub_conn(cx, owner, addr) {
            Some(j) => self.hidden(owner, j, b"SSUBSCRIBE", &[&ch], Some(false), e.hops + 1),
            None => {
                if let Some(sub) = self.sessions.get_mut(owner).and_then(|s| s.sub.as_mut()) {
                    sub.shard.insert(ch.into_vec(), None);
                }
                self.retry_later(owner);
            }
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
        let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.take()) else {
            return;
        };
        for c in sub.conns {
            if let Some(err) = cancel {
                for e in c.expect {
                    if let (Some(seq), Some(_)) = (e.seq, e.reply) {
                        self.fill_confirmation(key, seq, Bytes::from_static(err));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_bulks_of_frames() {
        let [k, ch, _] = leading_bulks(b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
        assert_eq!((k, ch), (Some(&b"subscribe"[..]), Some(&b"a"[..])));
        let [k, p, ch] =
            leading_bulks(b">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$2\r\nab\r\n$1\r\nx\r\n");
        assert_eq!(k, Some(&b"pmessage"[..]));
        assert_eq!(p, Some(&b"*"[..]));
        assert_eq!(ch, Some(&b"ab"[..]));
        assert_eq!(leading_bulks(b":1\r\n"), [None, None, None]);
        assert!(is_confirmation(b"sunsubscribe"));
        assert!(!is_confirmation(b"smessage"));
    }

    #[test]
    fn arguments_are_walked_one_header_at_a_time() {
        let f = b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n$3\r\nbcd\r\n";
        let (name, next) = arg_at(f, 4).unwrap();
        assert_eq!(&f[name], b"unsubscribe");
        let (a, next) = arg_at(f, next).unwrap();
        assert_eq!(&f[a], b"a");
        let (bcd, end) = arg_at(f, next).unwrap();
        assert_eq!(&f[bcd], b"bcd");
        assert_eq!(end, f.len());
        assert_eq!(arg_at(f, end), None);
        assert_eq!(arg_at(b"$5\r\nab\r\n", 0), None, "shorter than announced");
        assert_eq!(arg_at(b"$x\r\n", 0), None);
    }

    #[test]
    fn keyspace_channels_and_the_patterns_that_could_match_them() {
        assert!(keyspace_channel(b"__keyspace@0__:foo"));
        assert!(keyspace_channel(b"__keyevent@0__:set"));
        assert!(!keyspace_channel(b"__keyspac"));
        assert!(!keyspace_channel(b"news"));
        for p in [
            "*",
            "__key*",
            "__key*__:*",
            "__keyspace@0__:*",
            "__keyevent@*",
            "_?keyspace@*",
            "__key[se]*",
            "__key[^x]pace@*",
            "__keyspace@",
            "\\_\\_keyspace@*",
            "[_]*",
        ] {
            assert!(keyspace_pattern(p.as_bytes()), "{p}");
        }
        for p in [
            "news.*",
            "__key",
            "__keyspace",
            "__key[^se]*",
            "?",
            "a*",
            "__keyx*",
            "",
        ] {
            assert!(!keyspace_pattern(p.as_bytes()), "{p}");
        }
    }

    #[test]
    fn confirmations_are_encoded_for_both_protocols() {
        let mut out = Vec::new();
        encode_confirmation(&mut out, Proto::Resp2, b"ssubscribe", Some(b"a"), 2);
        assert_eq!(out, b"*3\r\n$10\r\nssubscribe\r\n$1\r\na\r\n:2\r\n");
        out.clear();
        encode_confirmation(&mut out, Proto::Resp3, b"sunsubscribe", None, 0);
        assert_eq!(out, b">3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n");
        assert_eq!(
            &command_frame(b"SSUBSCRIBE", &[b"a", b"bc"])[..],
            b"*3\r\n$10\r\nSSUBSCRIBE\r\n$1\r\na\r\n$2\r\nbc\r\n"
        );
        assert_eq!(Kind::of("sunsubscribe"), (Kind::Shard, true));
        assert_eq!(Kind::of("psubscribe"), (Kind::Pattern, false));
        assert_eq!(Kind::of("unsubscribe"), (Kind::Channel, true));
        assert_eq!(Kind::of("subscribe"), (Kind::Channel, false));
        assert_eq!(Kind::of("ssubscribe"), (Kind::Shard, false));
    }
}
