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
//! exactly where Redis would put them. Published messages are pushes: they
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

impl Worker {
    /// (P)SUBSCRIBE / (P)UNSUBSCRIBE.
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
        if unsubscribe && s.sub.is_none() {
            // Not subscribed to anything: Redis answers one confirmation
            // with a null channel and a count of 0, per argument (or one).
            let n = (args.len() - 1).max(1);
            let kind: &[u8] = if patterns {
                b"punsubscribe"
            } else {
                b"unsubscribe"
            };
            let proto = s.proto;
            for i in 0..n {
                let mut out = Vec::new();
                let mut e = Encoder::new(&mut out, proto);
                if proto == Proto::Resp3 {
                    e.push(3);
                } else {
                    e.array(3);
                }
                e.bulk(kind);
                match args.get(1 + i) {
                    Some(ch) => e.bulk(ch),
                    None => e.null(),
                };
                e.int(0);
                self.reply(key, Bytes::from(out));
            }
            return;
        }
        if !unsubscribe {
            let current = s.sub.as_ref().map(|x| x.count()).unwrap_or(0);
            if current + args.len() - 1 > MAX_SUBSCRIPTIONS {
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
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let Some(sub) = s.sub.as_mut() else { return };
        let set = if patterns {
            &mut sub.patterns
        } else {
            &mut sub.channels
        };
        // How many confirmations the node will send, and the mirror update.
        let confirmations = if unsubscribe && args.len() == 1 {
            let n = set.len().max(1);
            set.clear();
            n
        } else {
            for i in 1..args.len() {
                let name = args.get(i).unwrap_or_default().to_vec();
                if unsubscribe {
                    set.remove(&name);
                } else {
                    set.insert(name);
                }
            }
            args.len() - 1
        };
        let conn = sub.conn;
        for _ in 0..confirmations {
            let seq = s.ring.push_pending();
            if let Some(sub) = s.sub.as_mut() {
                sub.expect.push_back(seq);
            }
        }
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
}
