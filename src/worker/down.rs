//! CLUSTERDOWN waited out in order for a pipelining session: the down
//! waits of `retry.rs`'s module doc ("A CLUSTERDOWN answered to a request
//! with later requests of its session in flight"). A `DownWait` per
//! session and slot gathers the refused requests by sequence, holds the
//! slot's gate, waits for the refusing connections' barriers, sends the
//! first again alone after the usual waits, then the rest in order.

use super::purpose::{InFlight, Purpose};
use super::retry::{first_unit_in, wait_for};
use super::{Timer, Worker};
use crate::session::Session;
use bytes::Bytes;
use reactor::{Context, Key, TimerId};
use std::net::SocketAddr;

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

impl Worker {
    // ----- CLUSTERDOWN waits in order ---------------------------------

    /// The CLUSTERDOWN wait `f` belongs to (its slot), if any: one of its
    /// session on `f`'s slot exists, and `f` is one of its members sent
    /// again, or a request not retried before (sent before the slot was
    /// gated: it must not run ahead of the members).
    pub(super) fn down_member(&self, f: &InFlight) -> Option<u16> {
        let list = self.downs.get(&f.session)?;
        let slot = first_unit_in(&f.req, &self.place.locator(self.pool_of(f.session)))?;
        let w = list.iter().find(|w| w.slot == slot)?;
        (w.sent.contains(&f.seq) || f.retries == 0).then_some(slot)
    }

    /// Like `down_member`, for a redirected request: only one not sent
    /// again by the wait (a member follows its redirect as it is).
    pub(super) fn down_follower(&self, f: &InFlight) -> Option<u16> {
        let list = self.downs.get(&f.session)?;
        let slot = first_unit_in(&f.req, &self.place.locator(self.pool_of(f.session)))?;
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
        let Some(w) = wait_of(&mut self.downs, session, slot) else {
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
        let Some(w) = wait_of(&mut self.downs, session, slot) else {
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
            if let Some(slot) = first_unit_in(&f.req, &self.place.locator(self.pool_of(f.session)))
            {
                if let Some(w) = wait_of(&mut self.downs, session, slot) {
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
            Some(list) => first_unit_in(&f.req, &self.place.locator(self.pool_of(f.session)))
                .filter(|&x| list.iter().any(|w| w.slot == x)),
            None => None,
        };
        self.finish(cx, f, frame);
        let Some(slot) = slot else {
            return;
        };
        let Some(w) = wait_of(&mut self.downs, session, slot) else {
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
        if first_unit_in(&f.req, &self.place.locator(self.pool_of(f.session))).is_some() {
            return;
        }
        let Some(list) = self.downs.get_mut(&f.session) else {
            return;
        };
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
}

/// The down wait of `session` on `slot`, if there is one.
fn wait_of(
    downs: &mut std::collections::HashMap<Key, Vec<DownWait>>,
    session: Key,
    slot: u16,
) -> Option<&mut DownWait> {
    downs.get_mut(&session)?.iter_mut().find(|w| w.slot == slot)
}

/// Session hook: its CLUSTERDOWN waits are forgotten.
#[inline]
pub(super) fn session_closed(w: &mut Worker, _cx: &mut Context<'_, Timer>, s: &mut Session) {
    if !w.downs.is_empty() {
        w.downs.remove(&s.key);
    }
}
