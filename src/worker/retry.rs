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
//! in flight (a pipeline) is waited out too, in order: a *down wait*
//! (`DownWait`, one per session and slot) gates the slot and gathers the
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
//! budget is spent. Other slots are not held. Requests of the slot sent
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

use super::{resend, Timer, Worker};
use crate::backend::{InFlight, Purpose};
use crate::command::{self, Args, Command, Fanout, Route};
use crate::resp::encode::{array_into, bulk_into};
use crate::resp::limits::Limits;
use crate::resp::request::{RequestScanner, Scan};
use crate::session::ring::{Fold, Merge, Split};
use crate::topology::key_slot;
use bytes::Bytes;
use reactor::{Context, Key, TimerId};
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
/// What a request redirected while earlier requests of its slot waited
/// out a CLUSTERDOWN gets if it cannot be sent after them.
pub(super) const ERR_BEHIND_DOWN: &[u8] =
    b"-TRYAGAIN mithril: redirected while an earlier request of its slot was retried\r\n";

/// Requests of one session and slot waiting out a CLUSTERDOWN together,
/// in order (see the module doc). Exists from the first refusal until
/// the last of them is answered; its slot's gate is held meanwhile.
pub(super) struct DownWait {
    slot: u16,
    /// Refused requests (or redirected ones behind them) not sent again
    /// yet, by sequence.
    waiting: Vec<Member>,
    /// Sequences sent again and not answered yet.
    sent: Vec<u64>,
    /// Connections whose FIFO held requests sent after a member when it
    /// was refused, each with the reply count at which all of those are
    /// answered: nothing is sent again before then.
    barriers: Vec<(Key, u64)>,
    /// Waits spent, against the CLUSTERDOWN budget.
    waits: u8,
    /// Its timer, when set (one that fires after another was set is
    /// stale).
    timer: Option<TimerId>,
}

struct Member {
    f: InFlight,
    /// The node to send it to, after ASKING when `asking`.
    via: SocketAddr,
    asking: bool,
    /// Its answer if it cannot be sent again (the node's refusal).
    frame: Bytes,
}

/// The wait before retry number `n + 1` (`over`: a test hook's instead).
fn wait_for(n: u8, over: Option<Duration>) -> Duration {
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

    fn first_slot(&self) -> Option<u16> {
        let args = self.args();
        let cmd = self.command()?;
        command::first_key(cmd, &args)
            .and_then(|i| args.get(i))
            .map(key_slot)
    }
}

/// The slot of the first key among the requests in `frames` (a single
/// request, or a whole MULTI ... EXEC).
fn first_slot_in(frames: &Bytes) -> Option<u16> {
    let mut at = 0;
    while at < frames.len() {
        let rest = frames.slice(at..);
        let p = Parsed::of(&rest)?;
        let len = p.ranges.last().map(|r| r.end + 2)?;
        if let Some(slot) = p.first_slot() {
            return Some(slot);
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
        log::debug!(
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
                let Some(s) = self.sessions.get_mut(f.session) else {
                    return;
                };
                if f.retries == 0 {
                    let last = s.ring.next_seq() == f.seq + 1;
                    let slot = first_slot_in(&f.req);
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
                                let (pools, topo) = (&self.pools, &self.topo);
                                if let Some(owner) = pools.master_addr_for_slot(topo, slot) {
                                    s.gates.taint(slot, owner, |marked| {
                                        pools.master_addr_for_slot(topo, marked)
                                    });
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
    fn wait_override(&self) -> Option<Duration> {
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
    fn send_again(
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
        let pool = self.pools.master_pool(via, proto);
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
            let pool = self.pools.master_pool(addr, proto);
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

    // ----- CLUSTERDOWN waits in order ---------------------------------

    /// The CLUSTERDOWN wait `f` belongs to (its slot), if any: one of its
    /// session on `f`'s slot exists, and `f` is one of its members sent
    /// again, or a request not retried before (sent before the slot was
    /// gated: it must not run ahead of the members).
    pub(super) fn down_member(&self, f: &InFlight) -> Option<u16> {
        let list = self.downs.get(&f.session)?;
        let slot = first_slot_in(&f.req)?;
        let w = list.iter().find(|w| w.slot == slot)?;
        (w.sent.contains(&f.seq) || f.retries == 0).then_some(slot)
    }

    /// Like `down_member`, for a redirected request: only one not sent
    /// again by the wait (a member follows its redirect as it is).
    pub(super) fn down_follower(&self, f: &InFlight) -> Option<u16> {
        let list = self.downs.get(&f.session)?;
        let slot = first_slot_in(&f.req)?;
        let w = list.iter().find(|w| w.slot == slot)?;
        (!w.sent.contains(&f.seq) && f.retries == 0).then_some(slot)
    }

    /// `f` (of `slot`) was refused by the node at `via`, answered on
    /// connection `from` (or redirected there, `from` None): it waits
    /// with the other refused requests of its session and slot, in
    /// sequence order, starting the wait (and gating the slot) if it is
    /// the first.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn down_refused(
        &mut self,
        cx: &mut Context<'_, Timer>,
        from: Option<Key>,
        f: InFlight,
        via: SocketAddr,
        asking: bool,
        frame: Bytes,
        slot: u16,
    ) {
        let session = f.session;
        let over = self.wait_override();
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let list = self.downs.entry(session).or_default();
        let at = match list.iter().position(|w| w.slot == slot) {
            Some(at) => at,
            None => {
                s.gates.hold_down(slot);
                list.push(DownWait {
                    slot,
                    waiting: Vec::new(),
                    sent: Vec::new(),
                    barriers: Vec::new(),
                    waits: 0,
                    timer: None,
                });
                list.len() - 1
            }
        };
        let w = &mut list[at];
        w.sent.retain(|&q| q != f.seq);
        // What that connection still carries was sent after `f`: all of
        // it is answered before `f` goes again.
        if let Some(b) = from.and_then(|k| self.backends.get(k)) {
            let target = b.replies + b.in_flight() as u64;
            match w.barriers.iter_mut().find(|x| x.0 == b.key) {
                Some(x) => x.1 = x.1.max(target),
                None => w.barriers.push((b.key, target)),
            }
        }
        let i = w.waiting.partition_point(|m| m.f.seq < f.seq);
        w.waiting.insert(
            i,
            Member {
                f,
                via,
                asking,
                frame,
            },
        );
        if w.waits >= self.clusterdown_waits && w.sent.is_empty() {
            // Its last wait is spent: every refusal goes to its client.
            return self.down_give_up(cx, session, slot);
        }
        if w.timer.is_none() {
            w.timer = Some(cx.schedule_in(wait_for(w.waits, over), Timer::Down(session, slot)));
        }
    }

    /// A CLUSTERDOWN wait spent its budget: its members waiting get their
    /// refusals (those sent again are answered as they come).
    fn down_give_up(&mut self, cx: &mut Context<'_, Timer>, session: Key, slot: u16) {
        let Some(w) = self
            .downs
            .get_mut(&session)
            .and_then(|l| l.iter_mut().find(|w| w.slot == slot))
        else {
            return;
        };
        let given_up = std::mem::take(&mut w.waiting);
        for m in given_up {
            self.finish(cx, m.f, m.frame);
        }
        self.down_settle(session, slot);
    }

    /// A CLUSTERDOWN wait's timer: once every request sent after its
    /// members is answered, the first of them goes again (alone: the
    /// others follow once it is answered); when the budget is spent, the
    /// members get their refusals.
    pub(super) fn down_timer(
        &mut self,
        cx: &mut Context<'_, Timer>,
        id: TimerId,
        session: Key,
        slot: u16,
    ) {
        let budget = self.clusterdown_waits;
        let over = self.wait_override();
        let Some(w) = self
            .downs
            .get_mut(&session)
            .and_then(|l| l.iter_mut().find(|w| w.slot == slot))
        else {
            return;
        };
        if w.timer != Some(id) {
            return; // set for a wait that is over
        }
        w.timer = None;
        if w.waiting.is_empty() {
            return;
        }
        if w.waits >= budget {
            return self.down_give_up(cx, session, slot);
        }
        w.waits += 1;
        let backends = &self.backends;
        w.barriers
            .retain(|&(k, target)| backends.get(k).is_some_and(|b| b.replies < target));
        if !w.barriers.is_empty() {
            // Not all answered yet: this counts as one more wait.
            w.timer = Some(cx.schedule_in(wait_for(w.waits, over), Timer::Down(session, slot)));
            return;
        }
        let m = w.waiting.remove(0);
        w.sent.push(m.f.seq);
        self.down_send(cx, m);
    }

    /// Send a member of a CLUSTERDOWN wait again.
    fn down_send(&mut self, cx: &mut Context<'_, Timer>, m: Member) {
        let Member { f, via, asking, .. } = m;
        if f.purpose == Purpose::Blocking && !self.still_blocked(f.session, f.seq) {
            // Its client left while it waited: nothing to send.
            let (session, seq) = (f.session, f.seq);
            if let Some(slot) = first_slot_in(&f.req) {
                if let Some(w) = self
                    .downs
                    .get_mut(&session)
                    .and_then(|l| l.iter_mut().find(|w| w.slot == slot))
                {
                    w.sent.retain(|&q| q != seq);
                }
                self.down_settle(session, slot);
            }
            return;
        }
        self.send_again(cx, f, via, asking);
    }

    /// `f`'s final reply, while some session waits out a CLUSTERDOWN. If
    /// `f` is of a session and slot that does: a member answered lets the
    /// others go (in order, on the connection it went to; after the
    /// timer's wait if a barrier is still up), and a later
    /// request of that slot answered first means the members before it
    /// cannot run any more without running after it: they get their
    /// refusals now.
    pub(super) fn down_answered(&mut self, cx: &mut Context<'_, Timer>, f: InFlight, frame: Bytes) {
        let (session, seq) = (f.session, f.seq);
        let over = self.wait_override();
        let slot = match self.downs.get(&session) {
            Some(list) => first_slot_in(&f.req).filter(|&x| list.iter().any(|w| w.slot == x)),
            None => None,
        };
        self.finish(cx, f, frame);
        let Some(slot) = slot else {
            return;
        };
        let Some(w) = self
            .downs
            .get_mut(&session)
            .and_then(|l| l.iter_mut().find(|w| w.slot == slot))
        else {
            return;
        };
        let before = w.sent.len();
        w.sent.retain(|&q| q != seq);
        let member = w.sent.len() < before;
        let overtaken = w.waiting.partition_point(|m| m.f.seq < seq);
        let late: Vec<Member> = w.waiting.drain(..overtaken).collect();
        let backends = &self.backends;
        w.barriers
            .retain(|&(k, target)| backends.get(k).is_some_and(|b| b.replies < target));
        let next: Vec<Member> = if member && w.barriers.is_empty() {
            // It went through: the node serves the slot again.
            let next = std::mem::take(&mut w.waiting);
            w.sent.extend(next.iter().map(|m| m.f.seq));
            next
        } else {
            if member && !w.waiting.is_empty() && w.timer.is_none() {
                // A member refused meanwhile left requests behind it to
                // be answered first: the timer sends the rest then.
                let wait = wait_for(w.waits, over);
                w.timer = Some(cx.schedule_in(wait, Timer::Down(session, slot)));
            }
            Vec::new()
        };
        for m in late {
            self.finish(cx, m.f, m.frame);
        }
        for m in next {
            self.down_send(cx, m);
        }
        self.down_settle(session, slot);
    }

    /// A part of a cluster-wide command of `f`'s session (no key: DBSIZE,
    /// FLUSHALL, SCAN, ...) was answered by the node at `via`: members of
    /// that session's CLUSTERDOWN waits for that node from before it get
    /// their refusals (they would run after it). Keyed parts are
    /// `down_answered`'s.
    pub(super) fn down_wide_answered(
        &mut self,
        cx: &mut Context<'_, Timer>,
        via: SocketAddr,
        f: &InFlight,
    ) {
        let Some(list) = self.downs.get_mut(&f.session) else {
            return;
        };
        if first_slot_in(&f.req).is_some() {
            return;
        }
        let mut late = Vec::new();
        let mut slots = Vec::new();
        for w in list.iter_mut() {
            let before = late.len();
            let mut i = 0;
            while i < w.waiting.len() {
                if w.waiting[i].f.seq < f.seq && w.waiting[i].via == via {
                    late.push(w.waiting.remove(i));
                } else {
                    i += 1;
                }
            }
            if late.len() > before {
                slots.push(w.slot);
            }
        }
        let session = f.session;
        for m in late {
            self.finish(cx, m.f, m.frame);
        }
        for slot in slots {
            self.down_settle(session, slot);
        }
    }

    /// A CLUSTERDOWN wait with nothing left waiting or sent is over: its
    /// gate opens.
    fn down_settle(&mut self, session: Key, slot: u16) {
        let Some(list) = self.downs.get_mut(&session) else {
            return;
        };
        let Some(at) = list.iter().position(|w| w.slot == slot) else {
            return;
        };
        if !list[at].waiting.is_empty() || !list[at].sent.is_empty() {
            return;
        }
        list.swap_remove(at);
        if list.is_empty() {
            self.downs.remove(&session);
        }
        if let Some(s) = self.sessions.get_mut(session) {
            s.gates.release_down(slot);
            if s.gate_opened() {
                self.ready_sessions.push(session);
            }
        }
    }

    /// A multi-key request on a slot that passed a TRYAGAIN to the client
    /// goes through the (gated) fan-out path even when it is one slot,
    /// until the slot's owner changes (its migration is over); other
    /// topology changes leave the mark alone.
    pub(super) fn tainted(&mut self, key: Key, slot: u16) -> bool {
        let (pools, topo) = (&self.pools, &self.topo);
        self.sessions.get_mut(key).is_some_and(|s| {
            s.gates
                .tainted(slot, || pools.master_addr_for_slot(topo, slot))
        })
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
