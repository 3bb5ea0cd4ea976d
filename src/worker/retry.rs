//! TRYAGAIN and slot gates.
//!
//! A node answers TRYAGAIN to a multi-key request on a slot that is being
//! migrated when some of the keys have moved and some have not. The
//! request is first retried whole after 2, 4, 8, 16, 32 and 64 ms, which
//! carries it through an atomic migration's handoff with its atomicity
//! intact. A TRYAGAIN that outlasts the waits means the keys really are
//! split between the two nodes: a fan-out-family request (MGET, MSET, DEL,
//! UNLINK, EXISTS, TOUCH, PFCOUNT) is then re-sent key by key with the same
//! command name — PFCOUNT as a GET of each key, merged into a union as a
//! cross-slot PFCOUNT is — (each single-key request follows ASK on its own;
//! at most SPLIT_IN_FLIGHT at a time) and the replies fold like any
//! fan-out's.
//!
//! Ordering. Retries are late by design, so a later request of the same
//! session on the same slot must not overtake them. Fan-outs gate their
//! slots from dispatch until they complete; a single-slot request gates
//! its slot when its first TRYAGAIN arrives, but only if nothing was
//! dispatched after it (for CLUSTERDOWN, see below) — otherwise the
//! TRYAGAIN goes to the client as is,
//! and the slot is marked (with the owner it has then) so later multi-key
//! commands on it take the gated fan-out path until that slot's owner
//! changes. A session whose next request touches a gated slot stops
//! reading requests until the gate opens.
//!
//! A CLUSTERDOWN from a node (it refuses before running anything, for
//! instance while a failover settles) is waited out the same way and then
//! every 100 ms more, for up to `backend-timeout` in all (5 s when that is
//! 0): a failover's window is node-timeout plus an election, far longer
//! than the TRYAGAIN schedule. It is never split, and once that budget is
//! spent it reaches the client.
//!
//! A CLUSTERDOWN answered to a request with later requests of its session
//! in flight (a pipeline) is waited out too, in order (`down.rs`): a *down
//! wait* (`DownWait`, one per session and slot) gates the slot and gathers the
//! refused requests of that slot by sequence: the first, and each later
//! one refused after it (or redirected while it waits). Nothing is sent
//! again before every request that was on the refusing connection behind
//! a refused one has been answered (a *barrier*: that connection's reply
//! count), so each of those has either been refused too, and joined, or
//! has run. Then the first is sent again alone, after the usual waits;
//! once it is answered the node serves again, and the rest go together, in
//! order, on one connection (one refused again rejoins). A later request
//! of the slot answered first (it ran), or a cluster-wide command's part
//! answered by that node, means the members before it can no longer run
//! in order: they get their refusals then. So do all of them once the
//! budget is spent. Other slots are not held, but a later request of the
//! waiting slot stops the session's dispatch at its gate, as any gate
//! does, so what follows it waits too. Requests of the slot sent
//! on another connection (to a replica, or to a new owner a MOVED taught
//! between the two) are not behind the barrier: as with a redirect, one
//! of those may run first.
//!
//! A transaction whose queued command met either gets EXECABORT from the
//! node: nothing of it ran, so it is retried whole like a single-slot
//! request (`try_again_as`), and the EXECABORT reaches the client only
//! once the waits are spent.
//!
//! Replies that are not errors pay nothing for any of this.

use super::purpose::{InFlight, Purpose};
use super::{resend, Timer, Worker};
use crate::command::{self, Args, Command, Fanout, Route};
use crate::placement::{Locate, Unit};
use crate::resp::encode::{array_into, bulk_into};
use crate::resp::limits::Limits;
use crate::resp::request::{RequestScanner, Scan};
use crate::session::ring::{Fold, Merge, Split};
use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;
use std::time::Duration;

/// Whole-request retries before splitting (2 ms doubling: 2..64 ms).
pub(super) const RETRY_WAITS: u8 = 6;
const FIRST_WAIT: Duration = Duration::from_millis(2);
/// A CLUSTERDOWN outlasting those waits is retried every 100 ms more, for
/// as long as `backend-timeout` (5 s when it is 0): a failover takes
/// about node-timeout plus an election, far longer than the TRYAGAIN
/// schedule.
const CLUSTERDOWN_STEP: Duration = Duration::from_millis(100);
const CLUSTERDOWN_BUDGET_DEFAULT: Duration = Duration::from_secs(5);

/// How many waits a CLUSTERDOWN gets under `backend_timeout`.
pub(super) fn clusterdown_waits(backend_timeout: Option<Duration>) -> u8 {
    let budget = backend_timeout.unwrap_or(CLUSTERDOWN_BUDGET_DEFAULT);
    let schedule: Duration = (0..RETRY_WAITS).map(|i| FIRST_WAIT * (1u32 << i)).sum();
    let more = budget.saturating_sub(schedule).as_millis() / CLUSTERDOWN_STEP.as_millis();
    (u128::from(RETRY_WAITS) + more).min(250) as u8
}
/// Key-by-key resends in flight at once for one request.
pub(super) const SPLIT_IN_FLIGHT: usize = 256;

/// The wait before retry number `n + 1` (`over`: a test hook's instead).
pub(super) fn wait_for(n: u8, over: Option<Duration>) -> Duration {
    let wait = if n < RETRY_WAITS {
        FIRST_WAIT * (1u32 << n)
    } else {
        CLUSTERDOWN_STEP
    };
    over.unwrap_or(wait)
}

/// TRYAGAIN, and CLUSTERDOWN (the node refused before running anything,
/// typically while the cluster fails over): both are safe to retry.
pub(super) fn is_retryable(frame: &[u8]) -> bool {
    frame.starts_with(b"-TRYAGAIN") || frame.starts_with(b"-CLUSTERDOWN")
}

/// A request frame's arguments, re-scanned (only on the retry path).
struct Parsed {
    frame: Bytes,
    ranges: Vec<std::ops::Range<usize>>,
}

impl Parsed {
    fn of(frame: &Bytes) -> Option<Parsed> {
        let mut sc = RequestScanner::new();
        let limits = Limits {
            max_bulk_len: usize::MAX / 2,
            ..Limits::default()
        };
        match sc.scan(frame, &limits, true) {
            Scan::Request { .. } => Some(Parsed {
                frame: frame.clone(),
                ranges: sc.args().to_vec(),
            }),
            _ => None,
        }
    }

    fn args(&self) -> Args<'_> {
        Args {
            buf: &self.frame,
            ranges: &self.ranges,
        }
    }

    fn command(&self) -> Option<&'static Command> {
        command::resolve(&self.args()).ok()
    }

    fn first_unit(&self, loc: &impl Locate) -> Option<Unit> {
        let args = self.args();
        let cmd = self.command()?;
        command::first_key(cmd, &args)
            .and_then(|i| args.get(i))
            .map(|k| loc.unit_of(k))
    }
}

/// The unit of the first key among the requests in `frames` (a single
/// request, or a whole MULTI ... EXEC), as `loc` places it.
pub(super) fn first_unit_in(frames: &Bytes, loc: &impl Locate) -> Option<Unit> {
    let mut at = 0;
    while at < frames.len() {
        let rest = frames.slice(at..);
        let p = Parsed::of(&rest)?;
        let len = p.ranges.last().map(|r| r.end + 2)?;
        if let Some(unit) = p.first_unit(loc) {
            return Some(unit);
        }
        at += len;
    }
    None
}

/// The single-key requests of a fan-out-family request, in key order.
fn split_keys(p: &Parsed, kind: Fanout) -> Vec<Bytes> {
    let args = p.args();
    // PFCOUNT k1 k2 counts the union: its keys are read, not counted one
    // by one (the sum of their counts overcounts what they share).
    let name = match kind {
        Fanout::Pfcount => &b"GET"[..],
        _ => args.get(0).unwrap_or_default(),
    };
    let step = if kind == Fanout::Mset { 2 } else { 1 };
    let n = (args.len() - 1) / step;
    (0..n)
        .map(|i| {
            let mut out = Vec::with_capacity(48);
            array_into(&mut out, 1 + step);
            bulk_into(&mut out, name);
            for j in 0..step {
                bulk_into(&mut out, args.get(1 + i * step + j).unwrap_or_default());
            }
            Bytes::from(out)
        })
        .collect()
}

fn fold_of(kind: Fanout) -> Fold {
    match kind {
        Fanout::Mget => Fold::Items,
        Fanout::Mset => Fold::AllOk,
        Fanout::SumIntegers => Fold::Sum,
        Fanout::Pfcount => Fold::Union,
    }
}

impl Worker {
    /// A TRYAGAIN arrived for `f` from the node at `via`, on connection
    /// `from` (when it came from one).
    pub(super) fn try_again(
        &mut self,
        cx: &mut Context<'_, Timer>,
        from: Option<Key>,
        via: SocketAddr,
        mut f: InFlight,
        frame: Bytes,
    ) {
        // A retried GET carries no opt-in: it fills nothing.
        self.unfill(&mut f);
        let cause = frame.clone();
        self.try_again_as(cx, from, via, f, &cause, frame)
    }

    /// `f` met `cause` (TRYAGAIN or CLUSTERDOWN) at the node at `via`,
    /// on connection `from`; `frame` is the reply to give if it is not
    /// retried (the error itself, or for a transaction EXEC's EXECABORT).
    pub(super) fn try_again_as(
        &mut self,
        cx: &mut Context<'_, Timer>,
        from: Option<Key>,
        via: SocketAddr,
        f: InFlight,
        cause: &[u8],
        frame: Bytes,
    ) {
        crate::debug_sampled!(
            target: "mithril::worker",
            "worker {}: {} from {via} ({:?}, wait {})",
            self.id,
            String::from_utf8_lossy(cause.split(|&b| b == b' ').next().unwrap_or_default()),
            f.purpose,
            f.retries
        );
        // CLUSTERDOWN is waited out like TRYAGAIN, but splitting a request
        // key by key cannot help with it.
        let down = cause.starts_with(b"-CLUSTERDOWN");
        // observe
        if down {
            self.obs.stats.counters.clusterdown += 1;
        } else {
            self.obs.stats.counters.tryagain += 1;
        }
        let waits = if down {
            self.clusterdown_waits
        } else {
            RETRY_WAITS
        };
        if !self.downs.is_empty() {
            if let Some(slot) = self.down_member(&f) {
                // Its slot's requests wait out a CLUSTERDOWN in order, and
                // it is one of them (or was sent before they were gated).
                return self.down_refused(cx, from, f, via, false, frame, slot);
            }
        }
        match f.purpose {
            Purpose::Part(_) => {
                // Its fan-out gates the slot already.
                if f.retries < waits {
                    return self.schedule_retry(cx, f, via);
                }
                if down || !self.split_part(cx, via, &f) {
                    self.complete_error(cx, f, frame);
                }
            }
            Purpose::Client | Purpose::Txn | Purpose::Blocking => {
                let pool = self.pool_of(f.session);
                let Some(s) = self.sessions.get_mut(f.session) else {
                    return;
                };
                if f.retries == 0 {
                    let last = s.ring.next_seq() == f.seq + 1;
                    let slot = first_unit_in(&f.req, &self.place.locator(pool));
                    match slot {
                        Some(slot) if last || f.purpose == Purpose::Blocking => {
                            s.gates.hold_retry(f.seq, slot);
                        }
                        // Later requests are in flight: the slot's
                        // requests wait it out together, in order.
                        Some(slot) if down => {
                            return self.down_refused(cx, from, f, via, false, frame, slot);
                        }
                        _ => {
                            if let Some(slot) = slot.filter(|_| !down) {
                                // Marked with the owner the slot has now: the
                                // mark holds until that changes (see
                                // `session::gate`).
                                let place = &self.place;
                                if let Some(owner) = place.owner(slot) {
                                    s.gates.taint(slot, owner, |marked| place.owner(marked));
                                }
                            }
                            return self.complete_error(cx, f, frame);
                        }
                    }
                }
                if f.retries < waits {
                    return self.schedule_retry(cx, f, via);
                }
                if !down && f.purpose == Purpose::Client && self.split_request(cx, via, &f) {
                    return;
                }
                self.complete_error(cx, f, frame);
            }
            _ => self.complete_error(cx, f, frame),
        }
    }

    /// The wait before retry number `n + 1`.
    fn wait_before(&self, n: u8) -> Duration {
        wait_for(n, self.wait_override())
    }

    /// Test hook: every wait lasts this long (debug builds).
    pub(super) fn wait_override(&self) -> Option<Duration> {
        #[cfg(debug_assertions)]
        return self.test_retry_wait;
        #[cfg(not(debug_assertions))]
        None
    }

    fn schedule_retry(&mut self, cx: &mut Context<'_, Timer>, f: InFlight, via: SocketAddr) {
        let wait = self.wait_before(f.retries);
        let key = self.retrying.insert((f, via));
        cx.schedule_in(wait, Timer::Retry(key));
    }

    /// A retry's wait is over: send it again to the node that asked for it.
    pub(super) fn retry_now(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some((f, via)) = self.retrying.remove(key) else {
            return;
        };
        self.send_again(cx, f, via, false);
    }

    /// Send `f` again to the node at `via` (after ASKING when `asking`).
    pub(super) fn send_again(
        &mut self,
        cx: &mut Context<'_, Timer>,
        mut f: InFlight,
        via: SocketAddr,
        asking: bool,
    ) {
        f.retries = f.retries.saturating_add(1);
        let Some(proto) = self.sessions.get(f.session).map(|s| s.proto) else {
            return;
        };
        let f = resend(f, asking);
        if f.purpose == Purpose::Blocking {
            if !self.still_blocked(f.session, f.seq) {
                return; // its client left while it waited
            }
            return self.resend_on_lease(cx, via, f);
        }
        let pool = self.place.at(via, proto, self.pool_of(f.session));
        self.send_to_pool(cx, pool, f);
    }

    /// Split a fan-out part key by key, inside its merge.
    fn split_part(&mut self, cx: &mut Context<'_, Timer>, via: SocketAddr, f: &InFlight) -> bool {
        let Purpose::Part(part) = f.purpose else {
            return false;
        };
        let Some(p) = Parsed::of(&f.req) else {
            return false;
        };
        let Some(Route::Fanout(kind)) = p.command().map(|c| c.route) else {
            return false;
        };
        let reqs = split_keys(&p, kind);
        if reqs.is_empty() {
            return false;
        }
        self.obs.stats.counters.splits += 1; // observe
        let Some(s) = self.sessions.get_mut(f.session) else {
            return true;
        };
        let Some(m) = s.ring.merge_mut(f.seq) else {
            return true;
        };
        let part_keys = &m.fold.part_keys;
        let positions: Vec<u32> = part_keys.get(part as usize).cloned().unwrap_or_default();
        if m.fold.kind == Fold::Items && positions.len() != reqs.len() {
            return false;
        }
        m.parts_left += reqs.len() as u32 - 1;
        let fold = &mut m.fold;
        let split = m.split.get_or_insert_with(Split::default);
        for (i, r) in reqs.into_iter().enumerate() {
            let idx = fold.part_keys.len() as u32;
            fold.part_keys
                .push(positions.get(i).map(|&p| vec![p]).unwrap_or_default());
            split.waiting.push_back((idx, r, via));
        }
        self.send_waiting(cx, f.session, f.seq);
        true
    }

    /// Turn a single-slot fan-out-family request into a key-by-key merge.
    fn split_request(
        &mut self,
        cx: &mut Context<'_, Timer>,
        via: SocketAddr,
        f: &InFlight,
    ) -> bool {
        let Some(p) = Parsed::of(&f.req) else {
            return false;
        };
        let Some(Route::Fanout(kind)) = p.command().map(|c| c.route) else {
            return false;
        };
        let reqs = split_keys(&p, kind);
        if reqs.is_empty() {
            return false;
        }
        self.obs.stats.counters.splits += 1; // observe
        let mut m = match fold_of(kind) {
            Fold::Union => super::fanout::union_merge(reqs.len()),
            fold => Merge::new(fold, reqs.len() as u32),
        };
        m.request = f.req.clone(); // observe: slow log
        if m.fold.kind == Fold::Items {
            m.fold.items = vec![Bytes::new(); reqs.len()];
        }
        let mut split = Split::default();
        for (i, r) in reqs.into_iter().enumerate() {
            m.fold.part_keys.push(vec![i as u32]);
            split.waiting.push_back((i as u32, r, via));
        }
        m.split = Some(split);
        let Some(s) = self.sessions.get_mut(f.session) else {
            return true;
        };
        // The retry gate moves to the merge: released when it completes.
        if let Some(slot) = s.gates.take_retry(f.seq) {
            m.gated.push(slot);
        }
        if !s.ring.start_merge(f.seq, m) {
            return false;
        }
        self.send_waiting(cx, f.session, f.seq);
        true
    }

    /// Send key-by-key resends until SPLIT_IN_FLIGHT are out.
    pub(super) fn send_waiting(&mut self, cx: &mut Context<'_, Timer>, session: Key, seq: u64) {
        loop {
            let Some(s) = self.sessions.get_mut(session) else {
                return;
            };
            let proto = s.proto;
            let Some(m) = s.ring.merge_mut(seq) else {
                return;
            };
            let Some(split) = m.split.as_mut() else {
                return;
            };
            let in_flight = m.parts_left as usize - split.waiting.len();
            if in_flight >= SPLIT_IN_FLIGHT {
                return;
            }
            let Some((part, req, addr)) = split.waiting.pop_front() else {
                return;
            };
            let out = InFlight {
                // Single keys never get TRYAGAIN; never split them again.
                retries: RETRY_WAITS,
                ..InFlight::new(session, seq, req, Purpose::Part(part))
            };
            let pool = self.place.at(addr, proto, self.pool_of(session));
            self.send_to_pool(cx, pool, out);
        }
    }

    /// Release the gates a finished request held; wake the session if its
    /// input was waiting on one.
    pub(super) fn release_gates(&mut self, session: Key, slots: &[u16]) {
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        for &slot in slots {
            s.gates.release(slot);
        }
        if s.gate_opened() {
            self.ready_sessions.push(session);
        }
    }

    /// A multi-key request on a slot that passed a TRYAGAIN to the client
    /// goes through the (gated) fan-out path even when it is one slot,
    /// until the slot's owner changes (its migration is over); other
    /// topology changes leave the mark alone.
    pub(super) fn tainted(&mut self, key: Key, slot: u16) -> bool {
        let place = &self.place;
        self.sessions
            .get_mut(key)
            .is_some_and(|s| s.gates.tainted(slot, || place.owner(slot)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusterdown_waits_fill_the_backend_timeout() {
        // 126 ms of TRYAGAIN waits, then one per 100 ms.
        assert_eq!(clusterdown_waits(Some(Duration::from_millis(5000))), 6 + 48);
        assert_eq!(clusterdown_waits(None), 6 + 48);
        assert_eq!(clusterdown_waits(Some(Duration::from_millis(100))), 6);
        assert_eq!(clusterdown_waits(Some(Duration::from_secs(3600))), 250);
    }
}
