//! Shard channels (SSUBSCRIBE): each is held on the master of its slot,
//! as a node forwards SPUBLISH only within its shard, and follows the
//! slot. A new map, or the old owner's own SUNSUBSCRIBE when the slot
//! moves away, places it again where the slot went
//! ([`Worker::place_shards`]); a MOVED answering its SSUBSCRIBE is
//! followed at most [`MAX_HOPS`] times. A node's refusal of any
//! subscriber command is read here too ([`Worker::refused`]).
//!
//! Invariants: the session's mirror says where each shard channel is
//! held (`None`: to be placed again), and the client's confirmation
//! stands whatever the moves: they are the proxy's own.
//!
//! Never: tell the old owner (it drops the channel itself, or is down).

use crate::router;
use crate::session::Expect;
use crate::worker::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;

/// Most MOVED answers followed for one shard channel's resubscription;
/// past them it waits for the next map.
const MAX_HOPS: u8 = 5;

impl Worker {
    /// Subscribe `key`'s shard channels where the map says their slots
    /// are, unseen by the client: each one not placed (its node dropped
    /// it, or was lost) or placed on a node that no longer serves its slot.
    pub(super) fn place_shards(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
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

    /// A node refused a subscriber command (one channel of it here). A
    /// shard channel's SSUBSCRIBE answered MOVED (the map was behind) is
    /// sent where MOVED says (at most `MAX_HOPS` times), one answered
    /// CLUSTERDOWN or TRYAGAIN placed again later: the client's
    /// confirmation stands. An SUNSUBSCRIBE's stands too (the node does not
    /// hold the channel). Any other refusal (a permission, say) is the
    /// client's answer, and a shard channel so refused is no longer kept.
    pub(super) fn refused(
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
            let last = self
                .sessions
                .get_mut(owner)
                .and_then(|s| s.sub.as_mut())
                .and_then(|sub| sub.confirmed(seq, answer, error_answers));
            if let Some(answer) = last {
                self.fill_confirmation(owner, seq, answer);
            }
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
}
