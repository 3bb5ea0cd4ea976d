//! Pub/sub: each subscribing session gets its own subscriber connection.
//!
//! All subscriber connections go to one "home" node (the master of the
//! first shard): Redis Cluster forwards every PUBLISH to every node, so one
//! node sees all messages, and PUBSUB CHANNELS/NUMSUB/NUMPAT asked of that
//! same node count mithril's subscribers exactly.
//!
//! Ordering. A (P)(UN)SUBSCRIBE produces one confirmation per channel (one
//! per current subscription for a bare UNSUBSCRIBE): the session reserves
//! that many ring slots when it sends the command, from its own mirror of
//! the subscription set, so confirmations interleave with other replies
//! exactly where Redis would put them. A command naming channels is
//! admitted against the dispatch window like everything else: it goes in
//! waves of as many channels as the window has room for (at most
//! `WAVE_MOST`, the most one command does per loop turn), each sent as a
//! command of its own cut from the request (a node answers `UNSUBSCRIBE a
//! b` as it answers `UNSUBSCRIBE a` then `UNSUBSCRIBE b`), and the rest
//! waits, as a paused session's input does, until replies drain or the
//! next turn comes. The
//! confirmations of a client subscribed to nothing are built here, in the
//! same waves. Published messages are pushes: they
//! leave out of band as soon as the last confirmation received before them
//! has left (their barrier), never earlier. At most PUSH_WINDOW frames
//! (pushes waiting for their barrier plus the session's unwritten queue)
//! wait toward a slow subscriber; past that the proxy stops reading the
//! subscriber connection, and the node's own pubsub output limit applies.

use super::{Timer, Worker};
use crate::backend::{InFlight, Role};
use crate::command::{Args, Command};
use crate::resp::encode::Encoder;
use crate::resp::Proto;
use crate::router;
use crate::session::{Subscriptions, MAX_SUBSCRIPTIONS};
use bytes::Bytes;
use reactor::{Context, Key};
use std::collections::{HashSet, VecDeque};
use std::ops::Range;

const ERR_TOO_MANY: &[u8] = b"-ERR mithril: too many subscriptions for one client (32768)\r\n";

/// Most channels one wave takes: the work one (P)(UN)SUBSCRIBE does per
/// loop turn (a few milliseconds at most), whatever the window admits.
pub(super) const WAVE_MOST: usize = 1024;

/// PING while subscribed (RESP2): `["pong", message or ""]`.
pub(super) fn subscribed_ping(msg: Option<&[u8]>) -> Bytes {
    let mut out = Vec::new();
    Encoder::new(&mut out, Proto::Resp2)
        .array(2)
        .bulk(b"pong")
        .bulk(msg.unwrap_or_default());
    Bytes::from(out)
}

/// The first element of a pub/sub frame (`*3\r\n$9\r\nsubscribe...` or
/// `>3\r\n...`): its kind.
fn frame_kind(frame: &[u8]) -> Option<&[u8]> {
    let nl = frame.windows(2).position(|w| w == b"\r\n")?;
    let rest = frame.get(nl + 2..)?;
    let body = rest.strip_prefix(b"$")?;
    let nl2 = body.windows(2).position(|w| w == b"\r\n")?;
    let len: usize = std::str::from_utf8(&body[..nl2]).ok()?.parse().ok()?;
    body.get(nl2 + 2..nl2 + 2 + len)
}

fn is_confirmation(kind: &[u8]) -> bool {
    matches!(
        kind,
        b"subscribe" | b"unsubscribe" | b"psubscribe" | b"punsubscribe"
    )
}

/// A (P)(UN)SUBSCRIBE naming channels, dispatched in waves: what is left
/// of it. Each channel is one confirmation, and so one reply slot: a wave
/// takes no more channels than the session's dispatch window has room for,
/// and the rest of the command waits (as the rest of a paused session's
/// input does) until replies have drained.
pub(super) struct Wave {
    /// The whole request, as the client sent it.
    frame: Bytes,
    /// Where the first channel's `$` header starts in `frame`.
    first: usize,
    /// Where the next channel's `$` header starts.
    at: usize,
    /// Channels (or patterns) not dispatched yet.
    left: usize,
    patterns: bool,
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

/// The confirmation of an unsubscription that removed nothing: the kind,
/// the channel (null for a bare command) and a count of 0.
fn encode_nothing_left(out: &mut Vec<u8>, proto: Proto, kind: &[u8], channel: Option<&[u8]>) {
    let mut e = Encoder::new(out, proto);
    e.push(3).bulk(kind);
    match channel {
        Some(ch) => e.bulk(ch),
        None => e.null(),
    };
    e.int(0);
}

impl Worker {
    /// (P)SUBSCRIBE / (P)UNSUBSCRIBE. One naming channels is dispatched in
    /// waves (see [`Wave`]), run from the session's input processing.
    pub(super) fn subscribe(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        frame: Bytes,
        args: &Args,
    ) {
        let patterns = cmd.name.starts_with('p');
        let unsubscribe = cmd.name.contains("unsubscribe");
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let named = args.len() - 1;
        let wave = |first: usize| Wave {
            first,
            at: first,
            left: named,
            patterns,
            unsubscribe,
            frame: frame.clone(),
        };
        // Where the first channel's header starts: after the name's CRLF.
        let first = args.ranges.first().map_or(0, |r| r.end + 2);
        if unsubscribe && s.sub.is_none() {
            // Not subscribed to anything: Redis answers one confirmation
            // with a count of 0 per argument, or one with a null channel.
            if named > 0 {
                self.waves.push((key, wave(first)));
                return;
            }
            let kind: &[u8] = if patterns {
                b"punsubscribe"
            } else {
                b"unsubscribe"
            };
            let mut out = Vec::new();
            encode_nothing_left(&mut out, s.proto, kind, None);
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
            let Some(home) = self
                .pools
                .pool_for_shard(0, proto)
                .map(|p| self.pools.pools[p].key.addr)
            else {
                return self.reply_static(key, router::ERR_NO_TOPOLOGY);
            };
            let conn = match self.open_backend(cx, home, Role::Pubsub(key), proto, false) {
                Ok(k) => k,
                Err(e) => return self.reply(key, e),
            };
            let Some(s) = self.sessions.get_mut(key) else {
                return;
            };
            s.sub = Some(Box::new(Subscriptions {
                conn,
                channels: HashSet::new(),
                patterns: HashSet::new(),
                expect: VecDeque::new(),
                barrier: 0,
                throttled: false,
            }));
        }
        if named > 0 {
            self.waves.push((key, wave(first)));
            return;
        }
        // A bare (P)UNSUBSCRIBE: one confirmation per current subscription
        // of its kind (at most MAX_SUBSCRIPTIONS), or one if there is none,
        // in an order only the node knows: sent whole.
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let Some(sub) = s.sub.as_mut() else { return };
        let set = if patterns {
            &mut sub.patterns
        } else {
            &mut sub.channels
        };
        let confirmations = set.len().max(1);
        set.clear();
        let conn = sub.conn;
        for _ in 0..confirmations {
            let seq = s.ring.push_pending();
            if let Some(sub) = s.sub.as_mut() {
                sub.expect.push_back(seq);
            }
        }
        self.send_subscriber(conn, key, frame);
    }

    /// Queue a (P)(UN)SUBSCRIBE frame on a subscriber connection.
    fn send_subscriber(&mut self, conn: Key, key: Key, frame: Bytes) {
        if let Some(b) = self.backends.get_mut(conn) {
            b.enqueue(InFlight::new(
                key,
                0,
                frame,
                crate::backend::Purpose::Client,
            ));
            self.mark_backend_dirty(conn);
        }
    }

    /// The next wave of `key`'s (P)(UN)SUBSCRIBE: as many of its channels
    /// as the session's dispatch window has room for, and at most
    /// [`WAVE_MOST`]. When some are left, either the window is full (the
    /// session pauses until replies drain) or the wave took its most:
    /// `true`, the rest goes on in the next loop turn, so one command
    /// cannot keep the worker from its other clients.
    pub(super) fn next_wave(&mut self, key: Key) -> bool {
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
        let start = w.at;
        let mut end = start;
        let mut walked = 0;
        if let Some(sub) = s.sub.as_mut() {
            // Subscribed: the mirror follows, each confirmation comes from
            // the node into a slot reserved now.
            let set = if w.patterns {
                &mut sub.patterns
            } else {
                &mut sub.channels
            };
            while walked < n {
                let Some((name, next)) = arg_at(&w.frame, end) else {
                    break;
                };
                let name = &w.frame[name];
                if w.unsubscribe {
                    set.remove(name);
                } else {
                    set.insert(name.to_vec());
                }
                end = next;
                walked += 1;
            }
            let conn = sub.conn;
            for _ in 0..walked {
                let seq = s.ring.push_pending();
                if let Some(sub) = s.sub.as_mut() {
                    sub.expect.push_back(seq);
                }
            }
            if start == w.first && walked == w.left {
                // All of it in one wave: sent as the client sent it.
                self.send_subscriber(conn, key, w.frame.clone());
            } else if walked > 0 {
                // This wave's channels after a header of its own: the
                // command's name as the client spelt it, then a slice of
                // the request.
                let name_at = w
                    .frame
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                let mut head = format!("*{}\r\n", walked + 1).into_bytes();
                head.extend_from_slice(w.frame.get(name_at..w.first).unwrap_or_default());
                self.send_subscriber(conn, key, Bytes::from(head));
                self.send_subscriber(conn, key, w.frame.slice(start..end));
            }
        } else {
            // Subscribed to nothing: every confirmation is built here, in
            // one buffer cut into one frame per channel.
            let proto = s.proto;
            let kind: &[u8] = if w.patterns {
                b"punsubscribe"
            } else {
                b"unsubscribe"
            };
            let mut out = Vec::with_capacity(n * 32);
            let mut cuts = Vec::with_capacity(n);
            while walked < n {
                let Some((name, next)) = arg_at(&w.frame, end) else {
                    break;
                };
                encode_nothing_left(&mut out, proto, kind, Some(&w.frame[name]));
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
        }
        if walked < n {
            // Not a frame the scanner cut: nothing more to take from it.
            log::debug!(target: "mithril::worker", "worker {}: a (p)(un)subscribe frame ended early", self.id);
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

    /// A frame from `owner`'s subscriber connection (its set-up replies,
    /// AUTH and HELLO 3, are paired by the backend and never come here).
    /// `Some(reason)` would ask the caller to drop the connection.
    pub(super) fn pubsub_frame(&mut self, owner: Key, frame: Bytes) -> Option<String> {
        let s = self.sessions.get_mut(owner)?;
        let sub = s.sub.as_mut()?;
        let confirmation = frame_kind(&frame).is_some_and(is_confirmation);
        if confirmation {
            if let Some(seq) = sub.expect.pop_front() {
                sub.barrier = seq;
                let front = s.ring.fill(seq, frame);
                let cut = super::overload::mark_over_hard(&self.overload, s);
                if (front || cut) && !s.dirty {
                    s.dirty = true;
                    self.dirty_sessions.push(owner);
                }
            }
            return None;
        }
        let barrier = sub.barrier;
        s.push_oob(barrier, frame);
        super::overload::mark_over_hard(&self.overload, s);
        if !s.dirty {
            s.dirty = true;
            self.dirty_sessions.push(owner);
        }
        None
    }

    /// True (and the subscriber marked throttled) when PUSH_WINDOW frames
    /// already wait toward `owner`: stop reading its subscriber connection.
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

    /// PUBSUB subcommands go to the subscribers' home node.
    pub(super) fn forward_pubsub_home(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
    ) {
        if self.topo.shards.is_empty() {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        self.forward_shard(cx, key, 0, frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_frames() {
        assert_eq!(
            frame_kind(b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"),
            Some(&b"subscribe"[..])
        );
        assert_eq!(
            frame_kind(b">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nx\r\n"),
            Some(&b"message"[..])
        );
        assert_eq!(frame_kind(b":1\r\n"), None);
        assert!(is_confirmation(b"punsubscribe"));
        assert!(!is_confirmation(b"pmessage"));
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
}
