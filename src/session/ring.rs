//! The reply ring: one slot per outstanding request, in request order.
//!
//! Every request a session dispatches takes the next sequence number and a
//! slot at the back of the ring. Replies may arrive in any order (different
//! nodes, redirects, local answers); each is stored in its own slot, and
//! the session writes only from the front, only while the front slot is
//! ready. That is the whole ordering guarantee: nothing leaves before
//! everything dispatched earlier has left.
//!
//! ```text
//!   base ─► [Ready][Ready][Pending][Ready][Pending] ◄─ base + len = next seq
//!            └─ flushed ─┘   └ stops here until its reply arrives
//! ```
//!
//! Bound: [`MAX_OUTSTANDING`] slots. The session stops dispatching (and then
//! reading) when the ring is full, so a client that pipelines without end
//! costs a bounded amount of proxy memory.

use bytes::Bytes;
use std::collections::VecDeque;

/// Most replies one session may have outstanding (dispatched, not yet
/// written to the client).
pub const MAX_OUTSTANDING: usize = 65536;

pub enum Slot {
    /// Dispatched; waiting for its reply.
    Pending,
    /// The reply frame, ready to write.
    Ready(Bytes),
}

pub struct ReplyRing {
    /// Sequence number of `slots[0]`.
    base: u64,
    slots: VecDeque<Slot>,
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

    #[inline]
    pub fn is_full(&self) -> bool {
        self.slots.len() >= MAX_OUTSTANDING
    }

    /// The sequence number the next push gets.
    #[inline]
    pub fn next_seq(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// Reserve a slot for a dispatched request.
    #[inline]
    pub fn push_pending(&mut self) -> u64 {
        let seq = self.next_seq();
        self.slots.push_back(Slot::Pending);
        seq
    }

    /// Append a reply that is already known (local answers, errors).
    #[inline]
    pub fn push_ready(&mut self, reply: Bytes) -> u64 {
        let seq = self.next_seq();
        self.slots.push_back(Slot::Ready(reply));
        seq
    }

    /// Store the reply for `seq`. Returns true when that made the front of
    /// the ring ready (the session has something to write). A reply for a
    /// sequence that is not pending is ignored.
    #[inline]
    pub fn fill(&mut self, seq: u64, reply: Bytes) -> bool {
        let Some(idx) = seq.checked_sub(self.base) else {
            return false;
        };
        match self.slots.get_mut(idx as usize) {
            Some(slot @ Slot::Pending) => {
                *slot = Slot::Ready(reply);
                idx == 0
            }
            _ => false,
        }
    }

    #[inline]
    pub fn front_ready(&self) -> bool {
        matches!(self.slots.front(), Some(Slot::Ready(_)))
    }

    /// The ready replies at the front, in order.
    pub fn ready_front(&self) -> impl Iterator<Item = &Bytes> {
        self.slots.iter().map_while(|s| match s {
            Slot::Ready(b) => Some(b),
            Slot::Pending => None,
        })
    }

    /// Drop the front slot (its reply was written).
    #[inline]
    pub fn pop_front(&mut self) {
        if self.slots.pop_front().is_some() {
            self.base += 1;
        }
    }

    /// Length of the front reply, if ready.
    #[inline]
    pub fn front_len(&self) -> Option<usize> {
        match self.slots.front() {
            Some(Slot::Ready(b)) => Some(b.len()),
            _ => None,
        }
    }

    /// Number of slots still waiting for a reply.
    pub fn pending(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Pending))
            .count()
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
        assert_eq!(r.ready_front().count(), 0);
        assert!(r.fill(s0, b("a")), "front became ready");
        let got: Vec<&[u8]> = r.ready_front().map(|x| &x[..]).collect();
        assert_eq!(got, vec![&b"a"[..], b"b", b"c"]);
        r.pop_front();
        r.pop_front();
        assert_eq!(r.next_seq(), 3);
        let s3 = r.push_pending();
        assert_eq!(s3, 3);
        assert_eq!(r.pending(), 1);
        assert!(!r.fill(99, b("x")), "unknown sequence ignored");
        assert!(!r.fill(0, b("x")), "already written sequence ignored");
        assert!(!r.fill(2, b("x")), "a ready slot is not overwritten");
        assert_eq!(r.front_len(), Some(1));
    }
}
