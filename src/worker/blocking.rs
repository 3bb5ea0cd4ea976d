//! Blocking commands on leased connections.
//!
//! A blocking command (BLPOP, BRPOP, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, XREAD
//! and XREADGROUP with BLOCK) may hold its connection for as long as its
//! timeout: it never goes on a shared pipelined connection. It takes a
//! lease — an idle dedicated connection to the slot's master from this
//! worker's idle list, or a new one, at most 512 per node across the
//! process — and gives it back when answered. A client that leaves while
//! blocked has its lease closed instead, so the node cancels the block.
//!
//! A lease has one holder at a time. The session's handle (the lease of
//! its `Input::Blocked` mode) is cleared when the lease goes back to the
//! idle list, even when the
//! session stays blocked (a TRYAGAIN or CLUSTERDOWN answer is waited out
//! and re-sent on whatever lease is free then): another session may take
//! that lease meanwhile, and a client leaving during the wait must not
//! close it under that session's command. Closing a lease for a session
//! also checks that the lease carries that session's request.
//!
//! While the command is outstanding the session dispatches nothing more,
//! as a blocked Redis client's later input waits: a pipelined LPUSH behind
//! a BLPOP on the same list must not run first and unblock it.
//!
//! A client that half-closes (EOF) while blocked is treated as Redis
//! treats it when it reads that EOF: the block is cancelled (its lease
//! closed) and what it sent after the blocking command is not run, but
//! every reply it earned before it is still written, then the session
//! closes.
//!
//! Arrival order (more than one worker): clients blocked on one node are
//! served by it in the order their commands reached mithril, as on a
//! single server. A blocking command waits (an in-order wait), its
//! session blocked and its lease taken, until `shared::block_order` lets it go (every worker has
//! read what arrived before it, no earlier one for that node is on its
//! way, its lease has been answered on); it is looked at again at the end
//! of every turn and leaves the order once the node has read it: once a
//! PING written after it on the worker's shared connection to that node
//! is answered (`blocking_read_checks`). A waiting command
//! whose client left gives its lease back; one whose lease failed is
//! answered as a request that could not be sent. Nothing waits so with
//! one worker.

use super::purpose::{InFlight, Purpose};
use super::{Timer, Worker};
use crate::backend::{Role, State};
use crate::session::Session;
use crate::shared::block_order::Wait;

use crate::router;

use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;

/// The read check after a blocking command sent in arrival order.
const READ_CHECK: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// Most idle leased connections a worker keeps per node.
const IDLE_LEASES: usize = 16;

/// Readiness events a worker's poll takes at most (`server.rs`): a poll
/// that filled them may have left some for the next.
const EVENTS_PER_POLL: usize = 1024;

/// A blocking command waiting until it may go in arrival order.
pub(super) struct InOrderWait {
    id: u64,
    addr: SocketAddr,
    lease: Key,
    f: InFlight,
}

/// This worker's part of `shared::block_order`.
#[derive(Default)]
pub(super) struct InOrder {
    /// Blocking commands waiting, oldest first (one per blocked session).
    pub waiting: Vec<InOrderWait>,
    /// Those queued on their lease this turn (id, lease): once written,
    /// each is followed by its read check (`blocking_read_checks`).
    went: Vec<(u64, Key)>,
    next_id: u64,
    /// When the current turn's poll started (CLOCK_REALTIME ns).
    pub poll_ns: u64,
    published: u64,
    /// Readiness events of the current turn.
    pub events: usize,
    /// Turn once more without sleeping (another worker waits on this one).
    pub again: bool,
    /// What the acceptor had handed over when the mailbox was last found
    /// empty: the connections established before it are registered.
    pub handed: u64,
    /// `handed` as of the previous turn: their first bytes were in this
    /// turn's poll.
    handed_before: u64,
}

impl Worker {
    pub(super) fn blocking(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        slot: u16,
        frame: Bytes,
    ) {
        if self.place.map().is_empty() {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        let Some(pool) = self.place.master(slot, proto) else {
            return self.reply_static(key, router::ERR_SLOT_UNSERVED);
        };
        let addr = self.place.addr_of(pool);
        let lease = match self.lease_for(cx, addr, key) {
            Some(Ok(lease)) => lease,
            Some(Err(e)) => return self.fail_new(key, e),
            None => return,
        };
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let seq = s.ring.push_pending();
        s.block(lease, seq);
        let arrived = s.arrived();
        let f = InFlight::new(key, seq, frame, Purpose::Blocking);
        if self.shared.workers.len() > 1 {
            return self.wait_in_order(addr, lease, arrived, f);
        }
        self.send_on(lease, f);
    }

    /// Keep a blocking command waiting until it may go in arrival order
    /// (`shared::block_order`): looked at again at the end of every turn.
    fn wait_in_order(&mut self, addr: SocketAddr, lease: Key, arrived: u64, f: InFlight) {
        // A read without a stamp: its own time stands in.
        let stamp = if arrived == 0 {
            reactor::stamp::now_ns()
        } else {
            arrived
        };
        self.in_order.next_id += 1;
        let id = self.in_order.next_id;
        self.shared.block_order.enter(addr, stamp, self.id, id);
        self.in_order
            .waiting
            .push(InOrderWait { id, addr, lease, f });
    }

    /// End of turn, before the writes: every waiting blocking command that
    /// may go now is queued on its lease (written by this turn's flush);
    /// one whose client left is dropped, one whose lease failed answered
    /// as a request that could not be sent.
    pub(super) fn blocking_in_order(&mut self, cx: &mut Context<'_, Timer>) {
        let order = self.shared.clone();
        let order = &order.block_order;
        let mut kept = Vec::new();
        let mut behind = 0u64;
        for h in std::mem::take(&mut self.in_order.waiting) {
            let (session, seq) = (h.f.session, h.f.seq);
            if !self.still_blocked(session, seq) {
                // Left while waiting: the lease carries nothing of it.
                order.leave(self.id, h.id);
                if self
                    .backends
                    .get(h.lease)
                    .is_some_and(|b| b.in_flight() == 0)
                {
                    self.lease_answered(h.lease, session);
                }
                continue;
            }
            let Some(b) = self.backends.get(h.lease) else {
                order.leave(self.id, h.id);
                let e = Bytes::from(format!(
                    "-CLUSTERDOWN mithril: cannot reach {} (connection lost)\r\n",
                    h.addr
                ));
                self.fail(cx, h.f, e);
                continue;
            };
            // A lease the node has not answered on yet may not even be
            // accepted: what is written on it could be read after a
            // later command on a lease already open.
            if b.state != State::Connected || b.in_flight() > 0 {
                kept.push(h);
                continue;
            }
            match order.may_go(self.id, h.id) {
                Ok(()) => {
                    self.in_order.went.push((h.id, h.lease));
                    self.send_on(h.lease, h.f);
                }
                Err(Wait::Behind(bits)) => {
                    behind |= bits;
                    kept.push(h);
                }
                Err(Wait::Earlier) => kept.push(h),
            }
        }
        self.in_order.waiting = kept;
        order.set_waiting(self.id, !self.in_order.waiting.is_empty());
        if behind != 0 {
            self.wake_workers(behind);
            // A worker's reading is bounded by the acceptor's handing over.
            if let Some(acceptor) = self.shared.acceptor.get() {
                let _ = acceptor.wake();
            }
        }
    }

    /// End of turn, after the writes: each command written on its lease
    /// this turn is followed by a read check, a PING on this worker's shared
    /// connection to the same node; the command leaves the order when the
    /// check is answered (`read_check_answered`), not when written. Written is
    /// not yet read: the node reads its clients in the order its poll
    /// reports them, which around a lease it has only just answered (a new
    /// lease's CLIENT ID) need not be the order the bytes were written in:
    /// a later command written on another lease right after ours was seen
    /// blocked first, ours then waiting for ever. The PING's bytes go after
    /// the lease's, so the node's poll reports the lease in the same turn
    /// of its loop as the PING's connection or an earlier one, and the PING
    /// is answered only after that whole turn. Returns the workers to wake
    /// (commands that left at once: their lease or the node's connection
    /// gone).
    pub(super) fn blocking_read_checks(&mut self, cx: &mut Context<'_, Timer>) -> u64 {
        if self.in_order.went.is_empty() {
            return 0;
        }
        let mut wake = 0;
        let mut checks = false;
        for (id, lease) in std::mem::take(&mut self.in_order.went) {
            let Some(b) = self.backends.get(lease) else {
                wake |= self.shared.block_order.leave(self.id, id);
                continue;
            };
            if b.has_unsent() || b.tls_wants_flush() {
                // The rest goes when the socket takes it (its writable
                // event is a turn of its own).
                self.in_order.went.push((id, lease));
                continue;
            }
            let (addr, proto, pool) = (b.addr, b.proto, b.server_pool);
            let pool = self.place.at(addr, proto, pool);
            match self.backend_for(cx, pool, 0) {
                Ok(conn) => {
                    let ping = Bytes::from_static(READ_CHECK);
                    self.send_on(conn, InFlight::new(Key::NONE, id, ping, Purpose::ReadCheck));
                    checks = true;
                }
                Err(_) => wake |= self.shared.block_order.leave(self.id, id),
            }
        }
        if checks {
            self.flush_backends(cx);
        }
        wake
    }

    /// The read check after this worker's command `id` was answered (or its
    /// connection lost): the command leaves the order, and the workers
    /// waiting are woken (this one looks again at the end of this turn).
    pub(super) fn read_check_answered(&mut self, id: u64) {
        let wake = self.shared.block_order.leave(self.id, id);
        self.wake_workers(wake & !(1u64 << (self.id % 64)));
    }

    /// End of turn, after the writes and read checks: this worker has read
    /// everything that arrived before its poll started (unless that poll
    /// filled its event buffer); the workers waiting on that, or on
    /// commands that left (`wake`), are woken. A worker woken while another
    /// waits turns once more at once, so what it publishes next is newer
    /// than the command waiting.
    pub(super) fn blocking_turn_done(&mut self, woken: bool, mut wake: u64) {
        let order = &self.shared.block_order;
        if self.in_order.events < EVENTS_PER_POLL {
            // A connection registered this turn may hold bytes older than
            // this poll, read only next turn.
            let seen = self.in_order.poll_ns.min(self.in_order.handed_before);
            if seen > self.in_order.published {
                self.in_order.published = seen;
                wake |= order.publish(self.id, seen);
            }
        }
        self.in_order.events = 0;
        self.in_order.handed_before = self.in_order.handed;
        let others = wake & !(1u64 << (self.id % 64));
        self.in_order.again = woken && others != 0;
        self.wake_workers(others);
    }

    /// Whether `session`'s blocking command waits in order for `lease`
    /// (debug checks: the lease then carries nothing of it yet).
    #[cfg(debug_assertions)]
    pub(super) fn waits_in_order_on(&self, lease: Key, session: Key) -> bool {
        self.in_order
            .waiting
            .iter()
            .any(|h| h.lease == lease && h.f.session == session)
    }

    /// Wake the workers whose bits are set (not this one).
    fn wake_workers(&self, bits: u64) {
        if bits == 0 {
            return;
        }
        for (w, slot) in self.shared.workers.iter().enumerate() {
            if w != self.id && bits & (1u64 << (w % 64)) != 0 {
                slot.tx.wake();
            }
        }
    }

    /// Take a lease on `addr` and send `f`, a blocking command that has
    /// its ring slot (redirected, or waiting out a TRYAGAIN), on it.
    pub(super) fn resend_on_lease(
        &mut self,
        cx: &mut Context<'_, Timer>,
        addr: SocketAddr,
        f: InFlight,
    ) {
        let lease = match self.lease_for(cx, addr, f.session) {
            Some(Ok(lease)) => lease,
            Some(Err(e)) => return self.fail(cx, f, e),
            None => return,
        };
        let Some(s) = self.sessions.get_mut(f.session) else {
            return;
        };
        s.block(lease, f.seq);
        self.send_on(lease, f);
    }

    /// A lease on `addr` for a blocking command of `session`, or the error
    /// to answer it with. None: the session is gone, or left mid-block
    /// (its slot is answered, nobody waits for this one: abandon_block
    /// closed the lease it was on).
    fn lease_for(
        &mut self,
        cx: &mut Context<'_, Timer>,
        addr: SocketAddr,
        session: Key,
    ) -> Option<Result<Key, Bytes>> {
        let s = self.sessions.get(session)?;
        if s.closing() {
            return None;
        }
        let proto = s.proto;
        let at = (s.pool(), s.db());
        Some(self.take_lease(cx, addr, proto, at))
    }

    /// Whether `session` still waits for the blocking command at `seq` (a
    /// retry of one that was abandoned is not sent again).
    pub(super) fn still_blocked(&self, session: Key, seq: u64) -> bool {
        self.sessions
            .get(session)
            .is_some_and(|s| s.blocked_at(seq))
    }

    /// Close the lease `session` holds, if it still carries that session's
    /// request (the node cancels the block).
    pub(super) fn close_lease_of(&mut self, cx: &mut Context<'_, Timer>, session: Key, lease: Key) {
        let holds = self
            .backends
            .get(lease)
            .is_some_and(|b| b.role == Role::Lease && b.carries(session));
        if holds {
            self.drop_backend(cx, lease);
        }
    }

    /// The client left while blocked (EOF): close the lease so the node
    /// cancels the block, answer the blocking command's slot with nothing,
    /// and let the session close once every earlier reply is written.
    /// Input after the blocking command is dropped unread, as Redis never
    /// runs what a client sent after a command it was blocked in when it
    /// goes.
    pub(super) fn abandon_block(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some((lease, seq)) = self.sessions.get_mut(key).and_then(|s| s.abandon_block()) else {
            return;
        };
        self.deliver(key, seq, Bytes::new(), &[]);
        if let Some(lease) = lease {
            self.close_lease_of(cx, key, lease);
        }
    }

    pub(super) fn take_lease(
        &mut self,
        cx: &mut Context<'_, Timer>,
        addr: SocketAddr,
        proto: crate::resp::Proto,
        at: (usize, u32),
    ) -> Result<Key, Bytes> {
        self.try_lease(cx, addr, proto, at).map_err(|e| {
            e.unwrap_or_else(|| {
                Bytes::from(format!(
                    "-ERR mithril: too many blocked clients on {addr} (at most {} per node)\r\n",
                    crate::shared::MAX_LEASES_PER_NODE
                ))
            })
        })
    }

    /// An idle lease on `addr` for server pool and database `at`, or a new
    /// one. The error: `None` at the per-node cap (the caller says what
    /// for), else the reply to give.
    pub(super) fn try_lease(
        &mut self,
        cx: &mut Context<'_, Timer>,
        addr: SocketAddr,
        proto: crate::resp::Proto,
        at: (usize, u32),
    ) -> Result<Key, Option<Bytes>> {
        if let Some(idle) = self.idle_leases.get_mut(&(addr, proto, at)) {
            while let Some(k) = idle.pop() {
                if self.backends.contains(k) {
                    return Ok(k);
                }
            }
        }
        if !self.shared.lease_opened(addr) {
            return Err(None);
        }
        match self.open_backend(cx, addr, at, Role::Lease, proto, false) {
            Ok(k) => Ok(k),
            Err(e) => {
                self.shared.lease_closed(addr);
                Err(Some(e))
            }
        }
    }

    /// `session`'s command on `lease` was answered (its reply, whatever it
    /// says, is looked at next): the connection goes back to the idle list
    /// (or is closed when the list is full), and the session no longer
    /// holds it.
    pub(super) fn lease_answered(&mut self, lease: Key, session: Key) {
        let Some(b) = self.backends.get(lease) else {
            return;
        };
        if b.in_flight() > 0 {
            return; // ASKING leftovers or a retry already queued on it
        }
        if let Some(s) = self.sessions.get_mut(session) {
            s.lease_returned(lease);
        }
        let slot = (b.addr, b.proto, (b.server_pool, b.db));
        // A node that left the map keeps no idle lease.
        let known = self.place.map().nodes.iter().any(|n| n.addr == b.addr);
        let idle = if known {
            let idle = self.idle_leases.entry(slot).or_default();
            idle.retain(|k| self.backends.contains(*k));
            (idle.len() < IDLE_LEASES).then_some(idle)
        } else {
            None
        };
        if let Some(idle) = idle {
            idle.push(lease);
        } else if let Some(b) = self.backends.remove(lease) {
            // Dropping the stream closes the socket, which also takes it
            // out of the poll set.
            self.shared.lease_closed(b.addr);
        }
    }

    /// A lease's CLIENT ID was answered: what CLIENT UNBLOCK names.
    pub(super) fn lease_id(&mut self, lease: Key, frame: &[u8]) {
        let id = crate::resp::int_reply(frame).and_then(|n| u64::try_from(n).ok());
        if let Some(b) = self.backends.get_mut(lease) {
            b.node_id = id;
        }
    }

    /// CLIENT UNBLOCK for the session with client id `id`, if it lives on
    /// this worker: when its blocking command waits on a lease whose node
    /// id is known, that node is sent `CLIENT UNBLOCK <lease id>
    /// TIMEOUT|ERROR` on this worker's own connection to it, and the node
    /// answers the blocked command (nil as at its timeout, or the UNBLOCKED
    /// error). Whether a block was there to cancel is the proxy's view:
    /// a reply already on its way when the node reads the UNBLOCK is
    /// delivered as it is. The node's own 1 or 0 is not waited for.
    pub(super) fn unblock_by_id(
        &mut self,
        cx: &mut Context<'_, Timer>,
        id: u64,
        error: bool,
    ) -> bool {
        let Some((session, lease)) = self
            .sessions
            .iter()
            .find(|(_, s)| s.id == id)
            .and_then(|(k, s)| Some((k, s.input().lease()?)))
        else {
            return false;
        };
        let Some(b) = self.backends.get(lease) else {
            return false;
        };
        let (Some(node_id), true) = (b.node_id, b.carries(session)) else {
            return false;
        };
        let (addr, proto, pool) = (b.addr, b.proto, b.server_pool);
        let (id, why) = (node_id.to_string(), if error { "ERROR" } else { "TIMEOUT" });
        let frame = Bytes::from(format!(
            "*4\r\n$6\r\nCLIENT\r\n$7\r\nUNBLOCK\r\n${}\r\n{id}\r\n${}\r\n{why}\r\n",
            id.len(),
            why.len()
        ));
        let pool = self.place.at(addr, proto, pool);
        match self.backend_for(cx, pool, 0) {
            Ok(conn) => {
                self.send_on(conn, InFlight::new(Key::NONE, 0, frame, Purpose::Reload));
                true
            }
            Err(_) => false,
        }
    }

    /// The blocking command was answered: the session reads on.
    pub(super) fn unblock(&mut self, session: Key) {
        if let Some(s) = self.sessions.get_mut(session) {
            s.unblock();
            self.ready_sessions.push(session);
        }
    }
}

/// Session hook: a client that leaves mid-block has its lease closed, so
/// the node cancels the block.
#[inline]
pub(super) fn session_closed(w: &mut Worker, cx: &mut Context<'_, Timer>, s: &mut Session) {
    if let Some(lease) = s.input().lease() {
        w.close_lease_of(cx, s.key, lease);
    }
}
