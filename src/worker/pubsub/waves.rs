//! A subscriber command naming channels, dispatched in waves: each
//! channel is one confirmation and so one ring slot, and a wave takes no
//! more channels than the session's dispatch window has room for, and at
//! most [`WAVE_MOST`]; the rest of the command waits, as a paused
//! session's input does. A wave updates the session's mirror of its
//! subscriptions, builds each confirmation with the count a single server
//! would give, and sends the channels to the nodes that hold them.
//!
//! Invariants: a channel's ring slot is reserved before it is sent, so
//! its confirmation takes the place Redis would give it; the channels of
//! one command are walked in order, each once.
//!
//! Never: take more than [`WAVE_MOST`] channels in one loop turn.

use super::keyspace::{keyspace_channel, keyspace_pattern};
use super::wire::{arg_at, bulk_into, encode_confirmation, Kind};
use crate::session::Expect;
use crate::worker::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};

/// Most channels one wave takes: the work one subscriber command does per
/// loop turn (a few milliseconds at most), whatever the window admits.
const WAVE_MOST: usize = 1024;

/// A subscriber command naming channels, dispatched in waves: what is
/// left of it. Each channel is one confirmation, and so one reply slot: a
/// wave takes no more channels than the session's dispatch window has
/// room for, and the rest of the command waits (as the rest of a paused
/// session's input does) until replies have drained.
pub(in crate::worker) struct Wave {
    /// The whole request (as the client sent it, or the names of a bare
    /// unsubscription).
    pub(super) frame: Bytes,
    /// Where the next channel's `$` header starts.
    pub(super) at: usize,
    /// Channels (or patterns) not dispatched yet.
    pub(super) left: usize,
    pub(super) kind: Kind,
    pub(super) unsubscribe: bool,
}

impl Worker {
    /// The next wave of `key`'s subscriber command: as many of its channels
    /// as the session's dispatch window has room for, and at most
    /// [`WAVE_MOST`]. When some are left, either the window is full (the
    /// session pauses until replies drain) or the wave took its most:
    /// `true`, the rest goes on in the next loop turn, so one command
    /// cannot keep the worker from its other clients.
    pub(in crate::worker) fn next_wave(&mut self, cx: &mut Context<'_, Timer>, key: Key) -> bool {
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
            // Every connection it goes to confirms it: the last fills it.
            let owed = targets.iter().filter(|&&t| t < sub.conns.len()).count();
            sub.owe(seq, owed);
            let slot = match w.kind {
                Kind::Shard => self.place.unit_of(pool, name),
                _ => 0,
            };
            for &t in targets.iter() {
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
                    reply: Some(conf.clone()),
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
}
