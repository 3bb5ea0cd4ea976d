//! The reply ring: one slot per outstanding request, in request order.
//!
//! Every request a session dispatches takes the next sequence number and a
//! slot at the back of the ring. Replies may arrive in any order (different
//! nodes, redirects, local answers); each is stored in its own slot, and
//! only the ready front of the ring moves on to the session's write queue.
//! That is the whole ordering guarantee: nothing leaves before everything
//! dispatched earlier has left.
//!
//! ```text
//!   base ─► [Ready][Ready][Pending][Merge][Pending] ◄─ base + len = next seq
//!            └ to the write queue ┘ └ stops here until its reply arrives
//! ```
//!
//! A request answered in parts holds them in its slot ([`Slot::Parts`]):
//! a fanned-out request holds a [`Merge`], which its parts' replies fold
//! into; the slot becomes ready when the last part is in. A
//! merge is three things that read apart: its [`FoldState`] (what the
//! replies have folded into so far: items, a sum, a union, the first
//! error), the gates it holds, and, once a TRYAGAIN outlasted the retry
//! waits, its [`Split`] (the key-by-key resends still to send, each with
//! its node). An answer gathered from every worker (INFO, CLIENT LIST/KILL,
//! ...), or a scripting management command's from every master (SCRIPT,
//! FUNCTION), holds a [`Gathering`] instead: each part's raw reply, and
//! the closure that builds the reply from them.
//!
//! Bound: [`MAX_OUTSTANDING`] slots (plus queued writes, see the session).
//! The session stops dispatching (and then reading) when it is reached, so
//! a client that pipelines without end costs a bounded amount of memory.

use crate::stats::NO_STAMP;
use bytes::Bytes;
use std::collections::VecDeque;
use std::mem::ManuallyDrop;

/// Most replies one session may have outstanding (dispatched, not yet
/// written to the client).
pub const MAX_OUTSTANDING: usize = 65536;

pub enum Slot {
    /// Dispatched; waiting for its reply.
    Pending,
    /// The reply frame, ready to write.
    Ready(Bytes),
    /// A request answered in parts, collecting their replies.
    Parts(Box<Parts>),
}

/// What a slot answered in parts collects.
pub enum Parts {
    /// A fanned-out request (or one split key by key): the replies fold.
    Merge(Merge),
    /// An answer gathered from every worker or master (observe; the
    /// scripting management commands): the replies are kept, and a
    /// closure builds the reply.
    Gather(Gathering),
}

/// How parts' replies fold into one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// Array items placed by key index (MGET).
    Items,
    /// Every part must answer +OK (MSET, FLUSHALL).
    AllOk,
    /// Integer replies summed (DEL, UNLINK, EXISTS, TOUCH, DBSIZE).
    Sum,
    /// HyperLogLog strings (one GET per key) merged into `hll`; an error
    /// is kept in `items` at its key's position (cross-slot PFCOUNT).
    Union,
    /// Every part's array items appended, in the order parts answer
    /// (KEYS over every master).
    Concat,
    /// Every part's non-nil reply kept; one of them, at random, is the
    /// answer, nil only when every part was nil (RANDOMKEY).
    AnyOf,
    /// A SCAN page filled over the masters (`worker/fanout/scan.rs`): `items`
    /// holds the keys so far, `sum` the COUNT asked for, and `parts_left`
    /// the node calls the page may still make. Its replies do not go
    /// through the fold of parts.
    ScanPage,
    /// `[name, count, ...]` pairs (a RESP3 map): the first part's names,
    /// each count summed over the parts (PUBSUB SHARDNUMSUB).
    PairSum,
    /// Every part must answer a status line; the first one that came is
    /// the answer (SAVE, BGSAVE, BGREWRITEAOF on every master).
    Status,
    /// Integer replies, the smallest kept in `sum` (LASTSAVE on every
    /// master).
    Min,
    /// ROLE replies of masters, the largest offset kept in `sum`.
    Role,
}

/// What a merge's parts have folded into so far.
pub struct FoldState {
    pub kind: Fold,
    /// For `Items`: the positions in the final reply of each part's items.
    pub part_keys: Vec<Vec<u32>>,
    /// For `Items`: the reply items by position.
    pub items: Vec<Bytes>,
    pub sum: i64,
    /// For `Union`: the registers merged so far.
    pub hll: Option<crate::hll::Union>,
    /// The first error any part answered; it becomes the reply (`Union`
    /// keeps its errors in `items` instead: the first in key order wins).
    pub error: Option<Bytes>,
}

impl FoldState {
    pub fn new(kind: Fold) -> FoldState {
        FoldState {
            kind,
            part_keys: Vec::new(),
            items: Vec::new(),
            sum: if kind == Fold::Min { i64::MAX } else { 0 },
            hll: None,
            error: None,
        }
    }
}

/// The key-by-key resends of a request whose TRYAGAIN outlasted the
/// retry waits (its keys are split between two nodes).
#[derive(Default)]
pub struct Split {
    /// Not sent yet (at most SPLIT_IN_FLIGHT are in flight): (part index,
    /// request, node). Each goes to the node that refused the part it was
    /// split from (it follows ASK on its own): parts split from different
    /// nodes keep their own.
    pub waiting: VecDeque<(u32, Bytes, std::net::SocketAddr)>,
}

/// The merge state of one fanned-out request.
pub struct Merge {
    /// Parts not answered yet.
    pub parts_left: u32,
    pub fold: FoldState,
    /// The slots this request gates on its session until it completes.
    pub gated: Vec<u16>,
    /// Its key-by-key resends, once it was split.
    pub split: Option<Split>,
    /// observe: the client's request, for the slow log.
    pub request: Bytes,
}

impl Merge {
    pub fn new(fold: Fold, parts: u32) -> Merge {
        Merge {
            parts_left: parts,
            fold: FoldState::new(fold),
            gated: Vec::new(),
            split: None,
            request: Bytes::new(),
        }
    }
}

/// What builds a gathered answer's reply from its parts' replies, in
/// part order.
pub type Finish = Box<dyn FnOnce(Vec<Bytes>) -> Bytes>;

/// An answer gathered from every worker, or every master too (observe:
/// INFO, CLIENT LIST/KILL, ...; worker/scripts.rs: SCRIPT and FUNCTION
/// management, the kills on leases): each part's raw reply is kept by
/// part index, and `finish` builds the reply once the last is in.
pub struct Gathering {
    /// Parts not answered yet.
    pub parts_left: u32,
    /// The replies by part index (empty until answered).
    pub parts: Vec<Bytes>,
    /// Taken when the last part is in.
    pub finish: Option<Finish>,
    /// The client's request, for the slow log (empty: not logged).
    pub request: Bytes,
}

impl Gathering {
    pub fn new(parts: usize, finish: Finish) -> Gathering {
        Gathering {
            parts_left: parts as u32,
            parts: vec![Bytes::new(); parts],
            finish: Some(finish),
            request: Bytes::new(),
        }
    }
}

/// One slot and (observe) its statistics stamp: the request's start time
/// and command id (see `crate::stats`), kept in the slot's entry so reading
/// it costs no second lookup.
struct Entry {
    slot: Slot,
    stamp: u64,
}

pub struct ReplyRing {
    /// Sequence number of `slots[0]`.
    base: u64,
    slots: VecDeque<Entry>,
    /// Bytes of the replies in ready slots (held for the client, in order
    /// or behind a pending slot).
    ready_bytes: usize,
    /// Ready slots (in order or behind a pending one).
    ready: usize,
    /// observe: the stamp the next pushed slot takes (then `NO_STAMP`
    /// again, so a request's further slots are not counted twice).
    pub stamp: u64,
}

impl Default for ReplyRing {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplyRing {
    pub fn new() -> Self {
        ReplyRing {
            base: 0,
            slots: VecDeque::new(),
            ready_bytes: 0,
            ready: 0,
            stamp: NO_STAMP,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes of the replies ready in the ring (the front's and those
    /// waiting behind a pending slot).
    #[inline]
    pub fn ready_bytes(&self) -> usize {
        self.ready_bytes
    }

    /// Every slot holds its reply (none pending, no merge unfinished).
    #[inline]
    pub fn all_ready(&self) -> bool {
        self.ready == self.slots.len()
    }

    /// The sequence number the next push gets.
    #[inline]
    pub fn next_seq(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// Sequence number of the front slot (the next reply to leave).
    #[inline]
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Reserve a slot for a dispatched request.
    #[inline]
    pub fn push_pending(&mut self) -> u64 {
        let seq = self.next_seq();
        self.push(Slot::Pending);
        seq
    }

    /// Append a reply that is already known (local answers, errors).
    #[inline]
    pub fn push_ready(&mut self, reply: Bytes) -> u64 {
        let seq = self.next_seq();
        self.push(Slot::Ready(reply));
        seq
    }

    /// Reserve a slot that merges several parts' replies.
    pub fn push_merge(&mut self, merge: Merge) -> u64 {
        let seq = self.next_seq();
        self.push(Slot::Parts(Box::new(Parts::Merge(merge))));
        seq
    }

    /// observe: reserve a slot for an answer gathered in parts.
    pub fn push_gather(&mut self, gather: Gathering) -> u64 {
        let seq = self.next_seq();
        self.push(Slot::Parts(Box::new(Parts::Gather(gather))));
        seq
    }

    /// Store the reply for `seq` (ending a merge or a gather, if it was
    /// one). Returns true when that made the front of the ring ready. A
    /// reply for a slot that is already ready, or gone, is ignored.
    #[inline]
    pub fn fill(&mut self, seq: u64, reply: Bytes) -> bool {
        self.fill_stamped(seq, reply).0
    }

    /// Turn the pending slot at `seq` into a merge (a request split after
    /// it was sent). False if the slot is not pending.
    pub fn start_merge(&mut self, seq: u64, merge: Merge) -> bool {
        let Some(idx) = seq.checked_sub(self.base) else {
            return false;
        };
        match self.slots.get_mut(idx as usize).map(|e| &mut e.slot) {
            Some(slot @ Slot::Pending) => {
                *slot = Slot::Parts(Box::new(Parts::Merge(merge)));
                true
            }
            _ => false,
        }
    }

    /// The merge state at `seq`, if that slot is still merging.
    pub fn merge_mut(&mut self, seq: u64) -> Option<&mut Merge> {
        let idx = seq.checked_sub(self.base)?;
        match self.slots.get_mut(idx as usize).map(|e| &mut e.slot) {
            Some(Slot::Parts(p)) => match &mut **p {
                Parts::Merge(m) => Some(m),
                Parts::Gather(_) => None,
            },
            _ => None,
        }
    }

    /// observe: the gathered answer at `seq`, if its parts are still
    /// coming.
    pub fn gather_mut(&mut self, seq: u64) -> Option<&mut Gathering> {
        let idx = seq.checked_sub(self.base)?;
        match self.slots.get_mut(idx as usize).map(|e| &mut e.slot) {
            Some(Slot::Parts(p)) => match &mut **p {
                Parts::Gather(g) => Some(g),
                Parts::Merge(_) => None,
            },
            _ => None,
        }
    }

    #[inline]
    pub fn front_ready(&self) -> bool {
        matches!(
            self.slots.front(),
            Some(Entry {
                slot: Slot::Ready(_),
                ..
            })
        )
    }

    /// Take the front reply if it is ready.
    #[inline]
    pub fn pop_ready(&mut self) -> Option<Bytes> {
        self.pop_ready_stamped().map(|(b, _)| b)
    }

    /// Append a slot; it takes the pending stamp (observe).
    #[inline]
    fn push(&mut self, slot: Slot) {
        if let Slot::Ready(r) = &slot {
            self.ready_bytes += r.len();
            self.ready += 1;
        }
        let stamp = std::mem::replace(&mut self.stamp, NO_STAMP);
        self.slots.push_back(Entry { slot, stamp });
    }

    /// observe: the stamp of slot `seq` (`NO_STAMP` if there is none).
    #[inline]
    pub fn stamp_at(&self, seq: u64) -> u64 {
        seq.checked_sub(self.base)
            .and_then(|i| self.slots.get(i as usize))
            .map_or(NO_STAMP, |e| e.stamp)
    }

    /// [`fill`](Self::fill), also returning the slot's stamp (observe).
    /// Always inlined: it is on every reply's path.
    #[inline(always)]
    pub fn fill_stamped(&mut self, seq: u64, reply: Bytes) -> (bool, u64) {
        let Some(idx) = seq.checked_sub(self.base) else {
            return (false, NO_STAMP);
        };
        match self.slots.get_mut(idx as usize) {
            Some(e) => match &mut e.slot {
                Slot::Ready(_) => (false, e.stamp),
                slot => {
                    self.ready_bytes += reply.len();
                    self.ready += 1;
                    // A pending slot holds nothing to drop: the reply path
                    // skips the drop glue of the slot it overwrites (which
                    // is not inlined), and only the end of a merge or a
                    // gathering drops what it held.
                    let was = ManuallyDrop::new(std::mem::replace(slot, Slot::Ready(reply)));
                    if let Slot::Parts(_) = &*was {
                        drop(ManuallyDrop::into_inner(was));
                    }
                    (idx == 0, e.stamp)
                }
            },
            None => (false, NO_STAMP),
        }
    }

    /// Take the front reply, with its stamp, if it is ready.
    #[inline]
    pub fn pop_ready_stamped(&mut self) -> Option<(Bytes, u64)> {
        if !self.front_ready() {
            return None;
        }
        self.base += 1;
        match self.slots.pop_front() {
            Some(Entry {
                slot: Slot::Ready(b),
                stamp,
            }) => {
                self.ready_bytes -= b.len().min(self.ready_bytes);
                self.ready -= 1;
                Some((b, stamp))
            }
            _ => None,
        }
    }

    /// Free the slot storage of an empty ring (a deep pipeline can leave
    /// it large); it regrows on demand.
    pub fn shrink(&mut self) {
        if self.slots.is_empty() {
            self.slots = VecDeque::new();
        }
    }

    /// Number of slots still waiting for a reply.
    pub fn pending(&self) -> usize {
        self.slots
            .iter()
            .filter(|e| !matches!(e.slot, Slot::Ready(_)))
            .count()
    }

    /// The reply at `seq` is in (ready, or written already), or `seq` was
    /// never reserved.
    pub fn is_answered(&self, seq: u64) -> bool {
        match seq.checked_sub(self.base) {
            None => true,
            Some(i) => self
                .slots
                .get(i as usize)
                .map_or(true, |e| matches!(e.slot, Slot::Ready(_))),
        }
    }

    /// The slot at `seq` is waiting for its reply (not a merge).
    #[cfg(debug_assertions)]
    pub fn is_pending(&self, seq: u64) -> bool {
        seq.checked_sub(self.base)
            .and_then(|i| self.slots.get(i as usize))
            .is_some_and(|e| matches!(e.slot, Slot::Pending))
    }

    /// The merges in the ring (a walk: for the invariant checks).
    #[cfg(debug_assertions)]
    pub fn merges(&self) -> impl Iterator<Item = &Merge> + '_ {
        self.slots.iter().filter_map(|e| match &e.slot {
            Slot::Parts(p) => match &**p {
                Parts::Merge(m) => Some(m),
                Parts::Gather(_) => None,
            },
            _ => None,
        })
    }

    /// What must hold between two of the worker's steps (debug builds:
    /// the worker calls it after dispatch and after each flush; a failure
    /// is a bug, and panics). The walk over the slots (ready bytes, merge
    /// states) runs while the ring holds at most [`CHECK_WALK`] slots, so
    /// a deep pipeline does not make every check cost its depth.
    #[cfg(any(test, debug_assertions))]
    pub fn check_invariants(&self) {
        assert!(
            self.base.checked_add(self.slots.len() as u64).is_some(),
            "ring sequence overflow: base {} + {} slots",
            self.base,
            self.slots.len()
        );
        if self.slots.len() > CHECK_WALK {
            return;
        }
        let (mut ready, mut count) = (0, 0);
        for (i, e) in self.slots.iter().enumerate() {
            let seq = self.base + i as u64;
            match &e.slot {
                Slot::Pending => {}
                Slot::Ready(r) => {
                    ready += r.len();
                    count += 1;
                }
                Slot::Parts(p) => match &**p {
                    Parts::Merge(m) => m.check_invariants(seq),
                    Parts::Gather(g) => {
                        assert!(g.parts_left > 0, "gathering at {seq} with no part left");
                        assert!(g.finish.is_some(), "gathering at {seq} lost its finish");
                        assert!(
                            g.parts_left as usize <= g.parts.len(),
                            "gathering at {seq}: {} parts left of {}",
                            g.parts_left,
                            g.parts.len()
                        );
                    }
                },
            }
        }
        assert_eq!(
            ready, self.ready_bytes,
            "ring: ready bytes counted {} but the ready slots hold {ready}",
            self.ready_bytes
        );
        assert_eq!(count, self.ready, "ring: ready slots counted wrong");
    }
}

/// The most slots, FIFO entries or queued frames an invariant check walks
/// (debug builds; see [`ReplyRing::check_invariants`]).
#[cfg(any(test, debug_assertions))]
pub const CHECK_WALK: usize = 1024;

impl Merge {
    /// What holds of a merge still in the ring at `seq` (debug builds).
    #[cfg(any(test, debug_assertions))]
    fn check_invariants(&self, seq: u64) {
        assert!(self.parts_left > 0, "merge at {seq} with no part left");
        if let Some(split) = &self.split {
            assert!(
                split.waiting.len() <= self.parts_left as usize,
                "merge at {seq}: {} resends waiting, {} parts left",
                split.waiting.len(),
                self.parts_left
            );
        }
        let f = &self.fold;
        match f.kind {
            Fold::Items => {
                let n = f.items.len() as u32;
                assert!(
                    f.part_keys.iter().flatten().all(|&p| p < n),
                    "merge at {seq}: an item position past its {n} items"
                );
            }
            Fold::Union => assert!(f.hll.is_some(), "union merge at {seq} without registers"),
            Fold::PairSum => assert!(
                f.items.len() % 2 == 0,
                "merge at {seq}: an odd number of pair items"
            ),
            Fold::AllOk
            | Fold::Sum
            | Fold::Concat
            | Fold::AnyOf
            | Fold::ScanPage
            | Fold::Status
            | Fold::Min
            | Fold::Role => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn out_of_order_fills_leave_in_order() {
        let mut r = ReplyRing::new();
        let s0 = r.push_pending();
        let s1 = r.push_pending();
        let s2 = r.push_ready(b("c"));
        assert_eq!((s0, s1, s2), (0, 1, 2));
        assert!(!r.fill(s1, b("b")), "not the front");
        assert!(!r.front_ready());
        assert_eq!(r.pop_ready(), None);
        assert!(r.fill(s0, b("a")), "front became ready");
        assert_eq!(r.pop_ready(), Some(b("a")));
        assert_eq!(r.pop_ready(), Some(b("b")));
        assert_eq!(r.base(), 2);
        assert_eq!(r.next_seq(), 3);
        let s3 = r.push_pending();
        assert_eq!(s3, 3);
        assert_eq!(r.pending(), 1);
        assert!(!r.fill(99, b("x")), "unknown sequence ignored");
        assert!(!r.fill(0, b("x")), "already written sequence ignored");
        assert!(!r.fill(2, b("x")), "a ready slot is not overwritten");
        assert_eq!(r.pop_ready(), Some(b("c")));
        assert_eq!(r.pop_ready(), None, "the front is pending");
    }

    #[test]
    fn stamps_follow_their_slots() {
        let mut r = ReplyRing::new();
        r.stamp = 7;
        let a = r.push_pending();
        let second = r.push_pending(); // the same request's second slot
        r.stamp = 9;
        let c = r.push_ready(b("c"));
        assert_eq!(r.stamp, NO_STAMP);
        assert_eq!(
            (r.stamp_at(a), r.stamp_at(second), r.stamp_at(c)),
            (7, NO_STAMP, 9)
        );
        assert_eq!(r.fill_stamped(second, b("b")), (false, NO_STAMP));
        assert_eq!(r.fill_stamped(a, b("a")), (true, 7));
        assert_eq!(r.pop_ready_stamped(), Some((b("a"), 7)));
        assert_eq!(r.pop_ready_stamped(), Some((b("b"), NO_STAMP)));
        assert_eq!(r.pop_ready(), Some(b("c")));
        assert_eq!(r.stamp_at(c), NO_STAMP, "gone");
    }

    #[test]
    fn ready_bytes_count_replies_held_in_or_out_of_order() {
        let mut r = ReplyRing::new();
        let s0 = r.push_pending();
        r.push_ready(b("abc"));
        let s2 = r.push_pending();
        assert_eq!(r.ready_bytes(), 3);
        r.fill(s2, b("de"));
        assert!(!r.fill(s2, b("xxxx")), "a second fill is ignored");
        assert_eq!(r.ready_bytes(), 5, "behind a pending slot, still held");
        r.fill(s0, b("f"));
        assert_eq!(r.pop_ready(), Some(b("f")));
        assert_eq!(r.ready_bytes(), 5);
        while r.pop_ready().is_some() {}
        assert_eq!(r.ready_bytes(), 0);
    }

    #[test]
    fn all_ready_once_no_slot_waits() {
        let mut r = ReplyRing::new();
        assert!(r.all_ready(), "an empty ring");
        let s0 = r.push_pending();
        r.push_ready(b("a"));
        let m = r.push_merge(Merge::new(Fold::Sum, 2));
        assert!(!r.all_ready());
        r.fill(s0, b("b"));
        assert!(!r.all_ready(), "a merge still waits");
        assert!(!r.fill(s0, b("c")), "a second fill is not counted");
        assert_eq!(r.pop_ready(), Some(b("b")));
        assert_eq!(r.pop_ready(), Some(b("a")));
        assert!(!r.all_ready());
        r.fill(m, b(":3\r\n"));
        assert!(r.all_ready());
        assert!(r.pop_ready().is_some());
        assert!(r.all_ready() && r.is_empty());
        r.check_invariants();
    }

    #[test]
    fn merges_complete_in_place() {
        let mut r = ReplyRing::new();
        let m = r.push_merge(Merge::new(Fold::Sum, 2));
        let p = r.push_pending();
        r.merge_mut(m).unwrap().fold.sum += 3;
        assert!(r.merge_mut(p).is_none());
        assert!(r.gather_mut(m).is_none(), "a merge is no gather");
        assert!(!r.front_ready());
        assert!(r.fill(m, b(":3\r\n")));
        assert!(r.merge_mut(m).is_none());
        assert_eq!(r.pop_ready(), Some(b(":3\r\n")));
    }
}
