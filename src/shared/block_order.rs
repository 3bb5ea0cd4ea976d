//! The order of blocking commands across workers (issue 32).
//!
//! A single Redis serves clients blocked on a key in the order their
//! commands arrived. Through mithril each worker reads its own clients and
//! sends their blocking commands on leases of its own: two clients on two
//! workers, the first to send may be read last (its worker woken first,
//! scheduled last), or its command may go on a lease just opened, which
//! the node accepts after it has read a lease already open. The node then
//! blocks them the other way round: a client that a direct Redis would
//! have served first waits, for ever with timeout 0 (the suite's
//! "BRPOPLPUSH with multiple blocked clients").
//!
//! The order kept here is arrival at mithril, as the kernel stamped it
//! (`reactor::stamp`). A blocking command for a node goes to that node
//! only when
//!
//! - every other worker has read everything that arrived before it (each
//!   worker publishes, at the end of each loop turn, the instant its poll
//!   started: whatever arrived before it has been read and dispatched,
//!   save what a client sent past one read budget; but never past what
//!   the acceptor had handed over when the worker last emptied its
//!   mailbox: a connection still on its way to a worker may already hold
//!   a command, and the acceptor publishes, after each pass, the instant
//!   that pass began), and
//! - no blocking command for the same node that arrived earlier is still
//!   on its way (an entry leaves once its bytes, written to a lease the
//!   node has already accepted and answered on, were read by the node: a
//!   PING sent after them on another connection to it was answered).
//!
//! A worker whose command must wait wakes the workers it waits for and
//! the acceptor; they publish at the end of their turn (pass), and a
//! worker or acceptor that publishes, or a worker that lets a command go,
//! wakes the waiting ones. Only with more than one worker.
//!
//! Bounds: one entry per blocking command a session has in flight (a
//! blocked session dispatches nothing more), so at most the process's
//! clients; the lock is taken when a blocking command is dispatched, when
//! a waiting worker looks again and when one goes, never per request.

use super::Padded;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

struct Entry {
    node: SocketAddr,
    /// (arrival stamp, worker, the worker's own number): the order.
    at: (u64, u16, u64),
}

pub struct BlockOrder {
    /// Per worker: everything its clients sent before this instant (ns,
    /// the stamps' clock) has been read and dispatched.
    seen: Box<[Padded<AtomicU64>]>,
    entries: Mutex<Vec<Entry>>,
    /// Workers with a command waiting (bit `worker % 64`).
    waiting: Padded<AtomicU64>,
    /// The acceptor has handed every connection established before this
    /// instant to some worker's mailbox.
    accepted: Padded<AtomicU64>,
}

/// Why a command may not go yet.
#[derive(Debug, PartialEq, Eq)]
pub enum Wait {
    /// These workers (bits) have not read up to its arrival yet.
    Behind(u64),
    /// An earlier command for the same node is still on its way.
    Earlier,
}

fn bit(worker: usize) -> u64 {
    1u64 << (worker % 64)
}

impl BlockOrder {
    pub fn new(workers: usize) -> BlockOrder {
        BlockOrder {
            seen: (0..workers).map(|_| Padded(AtomicU64::new(0))).collect(),
            entries: Mutex::new(Vec::new()),
            waiting: Padded(AtomicU64::new(0)),
            accepted: Padded(AtomicU64::new(0)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `worker` has read everything that arrived before `seen`. Returns the
    /// workers waiting for a command to go (to wake).
    #[inline]
    pub fn publish(&self, worker: usize, seen: u64) -> u64 {
        if let Some(s) = self.seen.get(worker) {
            s.fetch_max(seen, Ordering::SeqCst);
        }
        self.waiting.load(Ordering::SeqCst)
    }

    /// The acceptor handed over every connection established before
    /// `until`. Returns the workers waiting (to wake).
    pub fn accepted_until(&self, until: u64) -> u64 {
        self.accepted.fetch_max(until, Ordering::SeqCst);
        self.waiting.load(Ordering::SeqCst)
    }

    /// What the acceptor has handed over (see `accepted_until`).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// A blocking command for `node` that arrived at `stamp`, numbered `id`
    /// by `worker`, is on its way.
    pub fn enter(&self, node: SocketAddr, stamp: u64, worker: usize, id: u64) {
        self.lock().push(Entry {
            node,
            at: (stamp, worker as u16, id),
        });
    }

    /// The node has read it (or it was dropped). Returns the workers
    /// waiting (to wake).
    pub fn leave(&self, worker: usize, id: u64) -> u64 {
        self.lock()
            .retain(|e| !(e.at.1 == worker as u16 && e.at.2 == id));
        self.waiting.load(Ordering::SeqCst)
    }

    /// Whether `worker`'s command `id` may be written now.
    pub fn may_go(&self, worker: usize, id: u64) -> Result<(), Wait> {
        let entries = self.lock();
        let Some(me) = entries
            .iter()
            .find(|e| e.at.1 == worker as u16 && e.at.2 == id)
        else {
            return Ok(());
        };
        let behind = self
            .seen
            .iter()
            .enumerate()
            .filter(|&(w, s)| w != worker && s.load(Ordering::SeqCst) < me.at.0)
            .fold(0, |bits, (w, _)| bits | bit(w));
        if behind != 0 {
            return Err(Wait::Behind(behind));
        }
        if entries.iter().any(|e| e.node == me.node && e.at < me.at) {
            return Err(Wait::Earlier);
        }
        Ok(())
    }

    /// `worker` has (`true`) or no longer has a command waiting.
    pub fn set_waiting(&self, worker: usize, waiting: bool) {
        match waiting {
            true => self.waiting.fetch_or(bit(worker), Ordering::SeqCst),
            false => self.waiting.fetch_and(!bit(worker), Ordering::SeqCst),
        };
    }

    /// Entries on their way (INFO, tests).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_go_in_arrival_order_once_every_worker_has_read_that_far() {
        let o = BlockOrder::new(3);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        // Worker 1 read a command that arrived at 100; worker 0 has not
        // read up to 100 yet (worker 2 has).
        o.publish(2, 150);
        o.enter(a, 100, 1, 7);
        assert_eq!(o.may_go(1, 7), Err(Wait::Behind(0b001)));
        // Worker 0 catches up and finds one that arrived earlier (90).
        o.enter(a, 90, 0, 1);
        o.publish(0, 120);
        o.publish(1, 120);
        assert_eq!(o.may_go(1, 7), Err(Wait::Earlier));
        assert_eq!(o.may_go(0, 1), Ok(()));
        // Another node is not held up by node a's.
        o.enter(b, 110, 2, 3);
        assert_eq!(o.may_go(2, 3), Ok(()));
        o.leave(0, 1);
        assert_eq!(o.may_go(1, 7), Ok(()));
        o.set_waiting(1, true);
        assert_eq!(o.leave(1, 7), 0b010);
        o.set_waiting(1, false);
        o.leave(2, 3);
        assert!(o.is_empty());
        // Not entered (or gone): free to go.
        assert_eq!(o.may_go(1, 99), Ok(()));
    }
}
