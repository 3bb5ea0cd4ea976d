//! Slot gates: what keeps a session's later requests behind its earlier
//! ones while those are still being merged or retried.
//!
//! A fan-out holds a gate on each of its slots from dispatch until its
//! last part has folded (redirects, retries and key-by-key resends
//! included); a single-slot request under TRYAGAIN retry holds one on its
//! slot until its reply is delivered (a *retry gate*, found again by the
//! request's ring sequence). A later request of the same session that
//! names a held slot, or any cluster-wide command while any gate is held,
//! is not dispatched: the session waits at the gate (`Input::AtGate`) and
//! is woken when one opens. The worker (`worker/fanout/`,
//! `worker/retry.rs`) decides when to hold and release; this type only
//! keeps the count.
//!
//! Requests of one slot waiting out a CLUSTERDOWN in order (a request
//! refused while later ones of the session were in flight, and those of
//! them refused too) hold one gate on it for as long as the wait lasts (a
//! *down gate*, one per slot).
//!
//! A slot is *tainted* when a single-slot request's TRYAGAIN had to be
//! passed to the client (something was dispatched after it, so a retry
//! could have reordered): the session's later multi-key commands on it
//! take the gated fan-out path even when all their keys share the slot,
//! until that slot's owner changes. The mark keeps the master that owned
//! the slot when it was made; the worker says who owns it now (a MOVED
//! override, else the map), and a mark whose slot moved is dropped when it
//! is next looked at or when a new mark is made. Other topology changes
//! leave the marks alone.
//!
//! Cost: a session holding no gate pays one emptiness test per request,
//! and one per delivered reply (the retry gates).

use crate::command::{self, Args, Route};
use crate::placement::Locate;
use crate::topology::slot::SlotMap;
use std::net::SocketAddr;

#[derive(Default)]
pub struct Gates {
    /// Slot → holders (fan-outs not finished, requests under retry).
    held: SlotMap<u32>,
    /// Single-slot requests under TRYAGAIN retry: (ring seq, slot held).
    retry: Vec<(u64, u16)>,
    /// Slots whose requests wait out a CLUSTERDOWN in order, one entry
    /// per wait (the worker keeps the requests: `worker/retry.rs`).
    down: Vec<u16>,
    /// Slots that passed a TRYAGAIN to the client, with the master that
    /// owned each then.
    tainted: SlotMap<SocketAddr>,
}

impl Gates {
    /// No gate is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// One more holder of `slot`'s gate.
    pub fn hold(&mut self, slot: u16) {
        *self.held.entry(slot).or_insert(0) += 1;
    }

    /// One holder of `slot`'s gate is done; the gate opens with the last.
    pub fn release(&mut self, slot: u16) {
        if let Some(n) = self.held.get_mut(&slot) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(&slot);
            }
        }
    }

    /// The request at ring sequence `seq` is retried: hold its slot until
    /// its reply is delivered (see [`take_retry`](Self::take_retry)).
    pub fn hold_retry(&mut self, seq: u64, slot: u16) {
        self.hold(slot);
        self.retry.push((seq, slot));
    }

    /// The slot the request at `seq` holds as a retry gate, no longer
    /// tracked as one (its holder still counts: the caller releases it, or
    /// hands it to a merge that will).
    #[inline]
    pub fn take_retry(&mut self, seq: u64) -> Option<u16> {
        if self.retry.is_empty() {
            return None;
        }
        let i = self.retry.iter().position(|g| g.0 == seq)?;
        Some(self.retry.swap_remove(i).1)
    }

    /// Requests of `slot` wait out a CLUSTERDOWN in order: hold its gate
    /// until the last of them is answered ([`release_down`](Self::release_down)).
    pub fn hold_down(&mut self, slot: u16) {
        self.hold(slot);
        self.down.push(slot);
    }

    /// The CLUSTERDOWN wait on `slot` is over: its gate opens (unless
    /// another holder has it).
    pub fn release_down(&mut self, slot: u16) {
        if let Some(i) = self.down.iter().position(|&s| s == slot) {
            self.down.swap_remove(i);
            self.release(slot);
        }
    }

    /// Whether the request about to be dispatched must wait for a gate: it
    /// names a gated unit (as `loc` places its keys), or it is
    /// cluster-wide while any gate is held.
    pub fn gated_for(&self, args: &Args, loc: &impl Locate) -> bool {
        if self.held.is_empty() {
            return false;
        }
        let Ok(cmd) = command::resolve(args) else {
            return false;
        };
        match cmd.route {
            Route::ClusterWide(_) => true,
            Route::Slot | Route::SlotPairs | Route::Eval | Route::Fanout(_) | Route::Blocking => {
                command::keys(cmd, args).any(|i| {
                    self.held
                        .contains_key(&loc.unit_of(args.get(i).unwrap_or_default()))
                })
            }
            _ => false,
        }
    }

    /// `slot` passed a TRYAGAIN to the client while `owner` served it: the
    /// mark holds until the slot's owner is another master. Marks whose
    /// slot moved meanwhile (`owner_of` tells the owner of a slot now) go
    /// first, so none piles up (or comes back).
    pub fn taint(
        &mut self,
        slot: u16,
        owner: SocketAddr,
        owner_of: impl Fn(u16) -> Option<SocketAddr>,
    ) {
        self.tainted
            .retain(|&marked, &mut was| owner_of(marked) == Some(was));
        self.tainted.insert(slot, owner);
    }

    /// Whether `slot` is tainted, `owner` telling who owns it now (asked
    /// only when the slot has a mark); a mark whose slot moved is dropped.
    pub fn tainted(&mut self, slot: u16, owner: impl FnOnce() -> Option<SocketAddr>) -> bool {
        if self.tainted.is_empty() {
            return false;
        }
        let Some(&was) = self.tainted.get(&slot) else {
            return false;
        };
        if owner() == Some(was) {
            return true;
        }
        self.tainted.remove(&slot);
        false
    }

    /// Holders of `slot`'s gate.
    #[cfg(debug_assertions)]
    pub fn holders(&self, slot: u16) -> u32 {
        self.held.get(&slot).copied().unwrap_or(0)
    }

    /// The slots held, with their holder counts.
    #[cfg(debug_assertions)]
    pub fn held(&self) -> impl Iterator<Item = (u16, u32)> + '_ {
        self.held.iter().map(|(&slot, &n)| (slot, n))
    }

    /// The retry gates: (ring seq, slot).
    #[cfg(debug_assertions)]
    pub fn retries(&self) -> &[(u64, u16)] {
        &self.retry
    }

    /// The slots held by CLUSTERDOWN waits, one entry per wait.
    #[cfg(debug_assertions)]
    pub fn downs(&self) -> &[u16] {
        &self.down
    }

    /// What holds by construction (debug builds): every held gate has a
    /// holder, every retry gate's slot is held (once per retry gate on it,
    /// at least), a request holds at most one retry gate, and a slot at
    /// most one CLUSTERDOWN wait, which holds it.
    #[cfg(debug_assertions)]
    pub fn check_invariants(&self) {
        for (&slot, &n) in &self.held {
            assert!(n > 0, "gate of slot {slot} held with no holder");
        }
        let mut on_slot: SlotMap<u32> = SlotMap::default();
        let mut seqs = std::collections::HashSet::new();
        for &(seq, slot) in &self.retry {
            *on_slot.entry(slot).or_insert(0) += 1;
            assert!(seqs.insert(seq), "two retry gates for seq {seq}");
        }
        let mut downs = std::collections::HashSet::new();
        for &slot in &self.down {
            *on_slot.entry(slot).or_insert(0) += 1;
            assert!(downs.insert(slot), "two CLUSTERDOWN waits on slot {slot}");
        }
        for (slot, n) in on_slot {
            assert!(
                self.holders(slot) >= n,
                "{n} retry gates on slot {slot}, {} holders",
                self.holders(slot)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    /// `Args` over a multibulk frame of `parts`.
    fn with_args<R>(parts: &[&str], f: impl FnOnce(&Args) -> R) -> R {
        let mut buf = Vec::new();
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for p in parts {
            buf.extend_from_slice(p.as_bytes());
            ranges.push(buf.len() - p.len()..buf.len());
        }
        f(&Args {
            buf: &buf,
            ranges: &ranges,
        })
    }

    #[test]
    fn holders_count_and_retry_gates_come_back_by_seq() {
        let mut g = Gates::default();
        assert!(g.is_empty());
        g.hold(7);
        g.hold_retry(3, 7);
        g.release(7);
        assert!(!g.is_empty(), "one holder left");
        assert_eq!(g.take_retry(4), None);
        assert_eq!(g.take_retry(3), Some(7));
        assert_eq!(g.take_retry(3), None, "taken once");
        g.release(7);
        assert!(g.is_empty());
        g.release(7); // an extra release is ignored
        assert!(g.is_empty());
    }

    #[test]
    fn down_gates_hold_their_slot_until_released() {
        let mut g = Gates::default();
        g.hold_down(9);
        g.hold(9);
        #[cfg(debug_assertions)]
        g.check_invariants();
        g.release_down(9);
        assert!(!g.is_empty(), "the other holder");
        g.release_down(9); // not a down gate any more: ignored
        assert!(!g.is_empty());
        g.release(9);
        assert!(g.is_empty());
        #[cfg(debug_assertions)]
        g.check_invariants();
    }

    #[test]
    fn gated_requests_name_a_held_slot_or_are_cluster_wide() {
        // A cluster map places keys by slot, known or not.
        let map = crate::topology::Topology::empty();
        let unit_of = |k: &[u8]| map.unit_of(k);
        let mut g = Gates::default();
        with_args(&["GET", "a"], |a| {
            assert!(!g.gated_for(a, &map), "no gate held")
        });
        g.hold(unit_of(b"a"));
        with_args(&["GET", "a"], |a| assert!(g.gated_for(a, &map)));
        with_args(&["GET", "b"], |a| assert!(!g.gated_for(a, &map)));
        with_args(&["MGET", "b", "a"], |a| assert!(g.gated_for(a, &map)));
        with_args(&["DBSIZE"], |a| assert!(g.gated_for(a, &map)));
        with_args(&["PING"], |a| assert!(!g.gated_for(a, &map)));
    }

    #[test]
    fn taints_last_until_their_slots_owner_changes() {
        let a: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let mut g = Gates::default();
        g.taint(5, a, |_| Some(a));
        g.taint(5, a, |_| Some(a));
        assert!(g.tainted(5, || Some(a)));
        assert!(!g.tainted(6, || Some(a)));
        assert!(
            !g.tainted(6, || unreachable!("asked for a slot with no mark")),
            "the owner is asked only about a marked slot"
        );
        assert!(g.tainted(5, || Some(a)), "kept while the owner is the same");
        assert!(!g.tainted(5, || Some(b)), "its owner changed");
        assert!(!g.tainted(5, || Some(a)), "dropped for good");
        // A new mark drops the marks whose slot moved, and only those.
        g.taint(5, a, |_| Some(a));
        g.taint(6, a, |_| Some(a));
        g.taint(7, b, |s| if s == 5 { Some(b) } else { Some(a) });
        assert!(!g.tainted(5, || Some(a)), "dropped by the new mark");
        assert!(g.tainted(6, || Some(a)));
        assert!(g.tainted(7, || Some(b)));
        assert!(!g.tainted(7, || None), "a slot with no owner now");
    }
}
