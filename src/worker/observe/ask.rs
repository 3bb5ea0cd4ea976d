//! Questions to every worker: an answer that needs every worker's part
//! (INFO's snapshots, CLIENT LIST/KILL/UNBLOCK, CONFIG RESETSTAT) takes
//! one ring slot, and each worker's part (this one's answered at once)
//! comes back over the fabric and is kept there until the last is in; a
//! question about the workers' clients waits first for the acceptor to
//! hand over every connection it holds (`Shared::request_handoff`), so
//! that none a client already has is missed.
//!
//! Invariants: at most `MAX_ASKS_IN_FLIGHT` questions are out or waiting
//! per worker (past it a new one is refused with `ERR_BUSY`); a handoff
//! is waited for at most `HANDOFF_PATIENCE`; an answer a full mailbox
//! refused waits in the outbox, never dropped.
//!
//! Never: ask a question while its handoff is outstanding, or build the
//! reply before every part is in.

use crate::command::Args;
use crate::local::client::client_info_line;
use crate::session::ring::{Finish, Gathering};
use crate::shared::WorkerMsg;
use crate::stats::gather::{AnswerMsg, Ask, AskMsg, ERR_BUSY, ERR_PEER_BUSY, MAX_ASKS_IN_FLIGHT};
use crate::worker::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long a question waits for the acceptor's handoff before it is
/// asked anyway (the acceptor answers within a pass; this only bounds a
/// stalled or stopped one).
const HANDOFF_PATIENCE: Duration = Duration::from_secs(1);

/// A question about every worker's clients, not asked yet: it waits for
/// the acceptor to hand over the connections it holds (see
/// `Shared::request_handoff`).
pub(super) struct Waiting {
    session: Key,
    seq: u64,
    first: u32,
    ask: Ask,
}

impl Worker {
    /// Reserve `key`'s ring slot for an answer of `parts` parts to the
    /// request `args` (kept for the slow log).
    pub(super) fn gather_slot(
        &mut self,
        key: Key,
        args: &Args,
        parts: usize,
        finish: Finish,
    ) -> Option<u64> {
        let s = self.sessions.get_mut(key)?;
        let mut g = Gathering::new(parts, finish);
        g.request = Bytes::copy_from_slice(args.buf); // observe: slow log
        Some(s.ring.push_gather(g))
    }

    /// Room for one question to every other worker (those waiting for a
    /// handoff counted as asked)?
    pub(super) fn may_ask(&mut self, key: Key) -> bool {
        let others = self.shared.workers.len().saturating_sub(1);
        let queued = self.obs.waiting.len();
        if queued >= MAX_ASKS_IN_FLIGHT
            || self.obs.asks_out + (queued + 1) * others > MAX_ASKS_IN_FLIGHT
        {
            self.reply_static(key, ERR_BUSY);
            return false;
        }
        true
    }

    /// Ask every worker for its part (`first + worker index`) of the
    /// answer at `key`'s slot `seq`, once the acceptor has handed over
    /// every connection it holds now, so that none a client already has is
    /// missed (see `Shared::request_handoff`).
    pub(super) fn ask_workers(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        seq: u64,
        first: u32,
        ask: Ask,
    ) {
        self.obs.waiting.push_back(Waiting {
            session: key,
            seq,
            first,
            ask,
        });
        if self.obs.handoff.0 == 0 {
            self.request_handoff(cx);
        }
    }

    /// Ask the acceptor for a handoff covering every question waiting; with
    /// no acceptor to answer, ask them at once.
    fn request_handoff(&mut self, cx: &mut Context<'_, Timer>) {
        self.obs.handoff_seq += 1;
        let n = self.obs.handoff_seq;
        if self.shared.request_handoff(self.id, n) {
            self.obs.handoff = (n, self.obs.waiting.len(), cx.now);
        } else {
            self.obs.handoff.0 = 0;
            self.ask_waiting(cx, self.obs.waiting.len());
        }
    }

    /// The acceptor answered handoff request `n`: the questions it covers
    /// may be asked (the connections it handed over are ahead of them in
    /// every mailbox, this worker's included, whose are registered now).
    fn handed_over(&mut self, cx: &mut Context<'_, Timer>, n: u64) {
        let (outstanding, covers, _) = self.obs.handoff;
        if outstanding == 0 || n < outstanding {
            return; // an answer to a request given up on
        }
        self.obs.handoff.0 = 0;
        self.ask_waiting(cx, covers);
        if !self.obs.waiting.is_empty() {
            self.request_handoff(cx);
        }
    }

    /// At each tick: a handoff the acceptor has not answered in time (it
    /// stopped, or is stalled) is given up on; its questions are asked.
    pub(super) fn handoff_tick(&mut self, cx: &mut Context<'_, Timer>) {
        let (outstanding, _, since) = self.obs.handoff;
        if outstanding == 0 {
            return;
        }
        let stopping = self.shared.shutting_down.load(Ordering::Acquire);
        if stopping || cx.now.saturating_duration_since(since) >= HANDOFF_PATIENCE {
            self.obs.handoff.0 = 0;
            self.ask_waiting(cx, self.obs.waiting.len());
        }
    }

    /// Ask the first `n` waiting questions.
    fn ask_waiting(&mut self, cx: &mut Context<'_, Timer>, n: usize) {
        for _ in 0..n {
            let Some(w) = self.obs.waiting.pop_front() else {
                return;
            };
            self.ask_now(cx, w);
        }
    }

    /// Send a question to every other worker; this worker answers its own
    /// part at once.
    fn ask_now(&mut self, cx: &mut Context<'_, Timer>, w: Waiting) {
        let Waiting {
            session: key,
            seq,
            first,
            ask,
        } = w;
        let ask = Arc::new(ask);
        for w in 0..self.shared.workers.len() {
            if w == self.id {
                continue;
            }
            let part = first + w as u32;
            let msg = WorkerMsg::Ask(AskMsg {
                from: self.id,
                session: key,
                seq,
                part,
                ask: ask.clone(),
            });
            match self.shared.workers[w].tx.send(msg) {
                Ok(()) => self.obs.asks_out += 1,
                Err(_) => self.fold_part(cx, key, seq, part, Bytes::from_static(ERR_PEER_BUSY)),
            }
        }
        // Last: this part may complete the answer.
        let own = self.answer(cx, &ask, Some(key));
        self.fold_part(cx, key, seq, first + self.id as u32, own);
    }

    /// This worker's part of the answer to `ask`. `asker`: the asking
    /// session, when it lives here.
    fn answer(&mut self, cx: &mut Context<'_, Timer>, ask: &Ask, asker: Option<Key>) -> Bytes {
        match ask {
            Ask::Publish => {
                self.publish_stats(false);
                Bytes::new()
            }
            Ask::Reset => {
                let (commands, net_in, net_out) = self.live_totals();
                self.obs.stats.reset();
                self.obs.reset_base = (commands, net_in, net_out);
                self.publish_stats(false);
                Bytes::new()
            }
            Ask::List(filter) => {
                let now = self.obs.stats.now();
                let mut text = String::new();
                for (_, s) in self.sessions.iter() {
                    if filter.matches(s) {
                        text.push_str(&client_info_line(s, self.id, now));
                        text.push('\n');
                    }
                }
                Bytes::from(text)
            }
            Ask::Kill(filter) => {
                let victims: Vec<Key> = self
                    .sessions
                    .iter()
                    .filter(|(_, s)| filter.matches(s))
                    .map(|(k, _)| k)
                    .collect();
                let n = victims.len();
                for k in victims {
                    if Some(k) == asker {
                        // It killed itself: the reply goes out first.
                        if let Some(s) = self.sessions.get_mut(k) {
                            s.close_after_flush();
                        }
                        continue;
                    }
                    if let Some(s) = self.sessions.get(k) {
                        log::debug!(
                            target: "mithril::worker",
                            "worker {}: client {} ({}) killed by CLIENT KILL",
                            self.id,
                            s.id,
                            s.peer()
                        );
                    }
                    self.close_session(cx, k);
                }
                Bytes::from(format!(":{n}\r\n"))
            }
            &Ask::Unblock { id, error } => {
                let found = self.unblock_by_id(cx, id, error);
                Bytes::from_static(if found { b":1\r\n" } else { b":0\r\n" })
            }
        }
    }

    /// A fabric message for observability.
    pub(in crate::worker) fn observe_msg(&mut self, cx: &mut Context<'_, Timer>, msg: WorkerMsg) {
        match msg {
            WorkerMsg::Ask(a) => {
                let frame = self.answer(cx, &a.ask, None);
                let reply = WorkerMsg::Answer(AnswerMsg {
                    session: a.session,
                    seq: a.seq,
                    part: a.part,
                    frame,
                });
                if let Some(w) = self.shared.workers.get(a.from) {
                    if let Err(back) = w.tx.send(reply) {
                        self.obs.outbox.push((a.from, back));
                    }
                }
            }
            WorkerMsg::Answer(a) => {
                self.obs.asks_out = self.obs.asks_out.saturating_sub(1);
                self.fold_part(cx, a.session, a.seq, a.part, a.frame);
            }
            WorkerMsg::HandedOver(n) => self.handed_over(cx, n),
            WorkerMsg::Accept(_)
            | WorkerMsg::ListenerGone(_)
            | WorkerMsg::Shutdown
            | WorkerMsg::Invalidate(_)
            | WorkerMsg::OutputBudget => {}
        }
    }

    /// Keep one part of a gathered answer (called by `fold_part` when the
    /// slot at `seq` is a gather, not a merge); the last builds the reply.
    pub(in crate::worker) fn collect_part(
        &mut self,
        session: Key,
        seq: u64,
        part: u32,
        frame: Bytes,
    ) {
        let Some(g) = self
            .sessions
            .get_mut(session)
            .and_then(|s| s.ring.gather_mut(seq))
        else {
            return;
        };
        if let Some(slot) = g.parts.get_mut(part as usize) {
            *slot = frame;
        }
        g.parts_left = g.parts_left.saturating_sub(1);
        if g.parts_left > 0 {
            return;
        }
        let parts = std::mem::take(&mut g.parts);
        let request = std::mem::take(&mut g.request);
        let Some(finish) = g.finish.take() else {
            return;
        };
        let reply = finish(parts);
        if reply.first() == Some(&b'-') {
            self.obs.stats.error_reply(&reply); // observe
        }
        self.deliver(session, seq, reply, &request);
    }
}
