//! A subscribed session's state: the mirror of its subscriptions, its
//! subscriber connections (one per node it subscribes on) and the
//! confirmations each of them owes, and its bounds
//! ([`MAX_SUBSCRIPTIONS`], [`PUSH_WINDOW`]). The worker fills and reads
//! it (`worker/pubsub/`); the session only carries it (`Session::sub`).
//!
//! Invariants: the first connection is home's, which holds every channel
//! and pattern; a connection's owed confirmations are in the order the
//! node will send them.
//!
//! Never: do socket work (the connections are the worker's backends).

use bytes::Bytes;
use reactor::Key;
use std::collections::VecDeque;

/// Most channels plus patterns one session may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 32768;
/// Most published messages queued toward one slow subscriber before the
/// proxy stops reading its subscriber connection.
pub const PUSH_WINDOW: usize = 4096;

/// A subscribed session's state: the mirror of its subscription set, its
/// subscriber connections (one per node it subscribes on) and the ring
/// slots reserved for the confirmations still to come.
pub struct Subscriptions {
    /// The subscriber connections (backends with `Role::Pubsub`): the
    /// first is the home node's, which holds every channel and pattern;
    /// others hold shard channels and the keyspace subscriptions.
    pub conns: Vec<SubConn>,
    pub channels: std::collections::HashSet<Vec<u8>>,
    pub patterns: std::collections::HashSet<Vec<u8>>,
    /// Shard channels, each with the node it is subscribed on (`None`:
    /// to be placed again, after a slot move or a lost node).
    pub shard: std::collections::HashMap<Vec<u8>, Option<std::net::SocketAddr>>,
    /// The keyspace subscriptions are kept on every master (set once one
    /// was made).
    pub everywhere: bool,
    /// In the worker's list of subscribers to try again (a subscription
    /// could not be made where the map says: a lost node, a refusal).
    pub retry_queued: bool,
    /// The last confirmation's slot: pushes received after it may not
    /// overtake it.
    pub barrier: u64,
    /// Reading the subscriber connections is paused (push window full).
    pub throttled: bool,
    /// Confirmations owed by more than one connection (a keyspace channel
    /// or pattern sent to every master): how many are still due per ring
    /// slot, and the first refusal among those in. The slot is filled
    /// when the last one comes, so the client, once confirmed, hears
    /// every master's events (issue 32). At most one entry per reserved
    /// slot: bounded by the session's reply window.
    pub owed: std::collections::HashMap<u64, Owed>,
}

/// The confirmations still due for one ring slot (`Subscriptions::owed`).
pub struct Owed {
    pub left: u16,
    pub refusal: Option<Bytes>,
}

/// One subscriber connection of a session.
pub struct SubConn {
    pub addr: std::net::SocketAddr,
    pub conn: Key,
    /// The confirmations the node will send on it, in order.
    pub expect: VecDeque<Expect>,
    /// It holds the keyspace subscriptions (its node was a master when the
    /// session last looked).
    pub everywhere: bool,
}

/// A confirmation a subscriber connection owes.
pub struct Expect {
    /// The client's ring slot it stands for; `None` for the proxy's own
    /// (re)subscriptions, which the client never sees.
    pub seq: Option<u64>,
    /// What fills the slot when it comes, on every connection that
    /// answers for the slot (a keyspace subscription is confirmed by
    /// every master: the last of them fills it, `Subscriptions::owed`).
    pub reply: Option<Bytes>,
    /// A shard channel's SSUBSCRIBE (`false`) or SUNSUBSCRIBE (`true`):
    /// tells the node's own SUNSUBSCRIBE (a slot moved away) from the
    /// answer to ours, and where a MOVED applies.
    pub shard: Option<(bool, Box<[u8]>)>,
    /// MOVED answers followed for this shard channel so far.
    pub hops: u8,
    /// The first channel of its command: a node refuses a command with
    /// one error, which answers every channel from here to the next first.
    pub first: bool,
}

impl Subscriptions {
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }

    /// The count a node puts in (P)(UN)SUBSCRIBE confirmations.
    pub fn plain_count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// The index of subscriber connection `conn`.
    pub fn conn_index(&self, conn: Key) -> Option<usize> {
        self.conns.iter().position(|c| c.conn == conn)
    }

    /// Slot `seq` awaits `n` confirmations (from as many connections).
    pub fn owe(&mut self, seq: u64, n: usize) {
        if n > 1 {
            let left = u16::try_from(n).unwrap_or(u16::MAX);
            self.owed.insert(
                seq,
                Owed {
                    left,
                    refusal: None,
                },
            );
        }
    }

    /// One confirmation for slot `seq` came (`answer`; `refused`: an
    /// error, which answers the slot whatever the others say): what fills
    /// the slot if it was the last one due, else `None`.
    pub fn confirmed(&mut self, seq: u64, answer: Bytes, refused: bool) -> Option<Bytes> {
        let Some(o) = self.owed.get_mut(&seq) else {
            return Some(answer);
        };
        o.left = o.left.saturating_sub(1);
        if refused && o.refusal.is_none() {
            o.refusal = Some(answer.clone());
        }
        if o.left > 0 {
            return None;
        }
        let o = self.owed.remove(&seq)?;
        Some(o.refusal.unwrap_or(answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs() -> Subscriptions {
        Subscriptions {
            conns: Vec::new(),
            channels: Default::default(),
            patterns: Default::default(),
            shard: Default::default(),
            everywhere: false,
            retry_queued: false,
            barrier: 0,
            throttled: false,
            owed: Default::default(),
        }
    }

    #[test]
    fn a_slot_owed_by_every_master_is_filled_by_the_last() {
        let ok = Bytes::from_static(b"ok");
        let no = Bytes::from_static(b"-ERR no");
        let mut s = subs();
        // One connection: at once.
        s.owe(1, 1);
        assert_eq!(s.confirmed(1, ok.clone(), false), Some(ok.clone()));
        // Three: the third fills it; a refusal among them answers it.
        s.owe(2, 3);
        assert_eq!(s.confirmed(2, ok.clone(), false), None);
        assert_eq!(s.confirmed(2, no.clone(), true), None);
        assert_eq!(s.confirmed(2, ok.clone(), false), Some(no));
        s.owe(3, 2);
        assert_eq!(s.confirmed(3, ok.clone(), false), None);
        assert_eq!(s.confirmed(3, ok.clone(), false), Some(ok));
        assert!(s.owed.is_empty());
    }
}
