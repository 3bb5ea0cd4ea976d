//! The shared pipes' mailboxes (`backend-sharding yes`).
//!
//! Each worker has one [`PipeInbox`]. Requests for a node whose pipe
//! another worker owns are appended to that owner's inbox, one batch per
//! loop turn; the owner writes them on the node's pipe and appends each
//! reply to the requesting worker's inbox, again once per turn. A sender
//! takes the lock once per batch and rings the receiver's waker only when
//! the receiver sleeps (`reactor::Notifier`), so a busy worker is never
//! woken and an idle one once per batch.
//!
//! Bound: an inbox holds only requests some session has a ring slot for,
//! and their replies, so it never holds more than the sessions' reply
//! windows (`client-reply-window`) allow in flight.
//!
//! Why this is not the fabric (`reactor::fabric`, the crossbeam channel
//! every worker's `WorkerMsg` mailbox is): the fabric is for control
//! messages, bounded, one message per send, and a full mailbox hands the
//! message back. This inbox is on the request path: a request or reply may
//! not be refused (a pipelined client's order would have to be rebuilt
//! around the refusal), a turn's frames go as one batch under one lock
//! (the receiver swaps the whole queue out), and its bound comes from the
//! reply windows, not from a capacity. MONITOR lines and the cache's
//! invalidations ride it because they too are produced per turn in
//! batches on that path (monitor lines have their own byte bound,
//! `shared::monitor::INBOX_MOST`).

use crate::backend::connset::SetKey;
use bytes::Bytes;
use reactor::{Key, Notifier};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A request crossing to the pipe's owner.
pub struct PipeReq {
    /// The requesting worker and its link (the stand-in connection whose
    /// FIFO holds the request, `Backend::link`).
    pub from: u16,
    pub link: Key,
    /// The pipe: the owner's pool of this key.
    pub pool: SetKey,
    pub req: Bytes,
    /// Replies it expects (a transaction's count, else 1).
    pub expect: u32,
}

/// What comes back to the requesting worker, in the order of its link's
/// FIFO.
pub enum PipeReply {
    /// One reply frame (a transaction's intermediate ones included).
    Frame(Key, Bytes),
    /// The pipe failed before the head request of the link was answered:
    /// this error answers it whole.
    Lost(Key, Bytes),
    /// The reply cache: a key the owner's tracker heard invalidated (a
    /// read through its pipe may have filled any worker's cache), or
    /// everything (`None`: its tracker was lost, or the node flushed).
    Invalidate(Option<Bytes>),
    /// MONITOR: a batch of feed lines for this worker's monitors (not a
    /// pipe's: the inbox carries them whatever `backend-sharding` says;
    /// bounded by `shared::monitor::INBOX_MOST`).
    Monitor(Bytes),
}

#[derive(Default)]
pub struct PipeQueue {
    pub reqs: Vec<PipeReq>,
    pub replies: Vec<PipeReply>,
}

pub struct PipeInbox {
    queue: Mutex<PipeQueue>,
    /// Something was appended since the owner last took the queue: read
    /// without the lock before every poll.
    pending: AtomicBool,
    /// Set when the worker has left its loop: nothing sent here will be
    /// answered.
    closed: AtomicBool,
    notifier: Notifier,
    /// The worker's last sample for `auto` (busy, ran and waited in
    /// thousandths, frames per write in tenths), stored at each of its
    /// ticks.
    busy: std::sync::atomic::AtomicU32,
    ran: std::sync::atomic::AtomicU32,
    waited: std::sync::atomic::AtomicU32,
    frames_per_write: std::sync::atomic::AtomicU32,
    /// Totals for INFO: frames and writes on its own node connections,
    /// and its sessions on the shared pipes now.
    pub frames: std::sync::atomic::AtomicU64,
    pub writes: std::sync::atomic::AtomicU64,
    pub sessions: std::sync::atomic::AtomicU64,
    /// Other workers' requests written on its pipes.
    pub served: std::sync::atomic::AtomicU64,
    /// Sessions that waited for their replies to move.
    pub move_waits: std::sync::atomic::AtomicU64,
}

impl PipeInbox {
    pub fn new(notifier: Notifier) -> PipeInbox {
        PipeInbox {
            queue: Mutex::new(PipeQueue::default()),
            pending: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            notifier,
            busy: Default::default(),
            ran: Default::default(),
            waited: Default::default(),
            frames_per_write: Default::default(),
            frames: Default::default(),
            writes: Default::default(),
            sessions: Default::default(),
            served: Default::default(),
            move_waits: Default::default(),
        }
    }

    /// Append a batch (emptying `reqs` and `replies`, which keep their
    /// capacity for the next turn). False when the worker is gone; the
    /// batch is then left where it was.
    pub fn send(&self, reqs: &mut Vec<PipeReq>, replies: &mut Vec<PipeReply>) -> bool {
        if reqs.is_empty() && replies.is_empty() {
            return true;
        }
        {
            let Ok(mut q) = self.queue.lock() else {
                return false;
            };
            if self.closed.load(Ordering::Acquire) {
                return false;
            }
            q.reqs.append(reqs);
            q.replies.append(replies);
            self.pending.store(true, Ordering::Release);
        }
        self.notifier.notify();
        true
    }

    pub fn sample(&self) -> Sample {
        Sample {
            busy: f64::from(self.busy.load(Ordering::Relaxed)) / 1000.0,
            ran: f64::from(self.ran.load(Ordering::Relaxed)) / 1000.0,
            waited: f64::from(self.waited.load(Ordering::Relaxed)) / 1000.0,
            frames_per_write: f64::from(self.frames_per_write.load(Ordering::Relaxed)) / 10.0,
        }
    }

    pub fn publish(&self, s: Sample) {
        self.busy.store((s.busy * 1000.0) as u32, Ordering::Relaxed);
        self.ran.store((s.ran * 1000.0) as u32, Ordering::Relaxed);
        self.waited
            .store((s.waited * 1000.0) as u32, Ordering::Relaxed);
        self.frames_per_write.store(
            (s.frames_per_write * 10.0).min(1e9) as u32,
            Ordering::Relaxed,
        );
    }

    pub fn count(&self, frames: u64, writes: u64, sessions: usize, served: u64) {
        self.served.fetch_add(served, Ordering::Relaxed);
        self.frames.fetch_add(frames, Ordering::Relaxed);
        self.writes.fetch_add(writes, Ordering::Relaxed);
        self.sessions.store(sessions as u64, Ordering::Relaxed);
    }

    /// Whether something waits (no lock taken).
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Swap the queue with `into` (empty, with the capacity of the last
    /// turn's), so the lock is held for two pointer swaps.
    pub fn take(&self, into: &mut PipeQueue) {
        if !self.pending() {
            return;
        }
        if let Ok(mut q) = self.queue.lock() {
            std::mem::swap(&mut *q, into);
            self.pending.store(false, Ordering::Release);
        }
    }

    /// The worker leaves its loop: later sends fail; what is still queued
    /// is handed back for answering.
    pub fn close(&self, into: &mut PipeQueue) {
        if let Ok(mut q) = self.queue.lock() {
            self.closed.store(true, Ordering::Release);
            std::mem::swap(&mut *q, into);
        }
    }
}

/// What every worker shares about the pipes: who owns each node's, the
/// verdict of `auto`'s experiment, and what INFO shows of it.
pub struct Pipes {
    owners: Mutex<(std::collections::HashMap<std::net::SocketAddr, u16>, u16)>,
    workers: u16,
    /// `auto`: sessions that do not pipeline belong on the shared pipes.
    pub verdict: AtomicBool,
    /// `auto`: the experiment's state and the reason of its last decision.
    pub status: Mutex<(&'static str, String)>,
    /// Test hook (debug builds): the experiment's durations divided by
    /// this, and a forced verdict (0 none, 1 shared, 2 local).
    pub scale: std::sync::atomic::AtomicU32,
    pub force: std::sync::atomic::AtomicU8,
    /// Test hook: the CPU share that counts as busy, in thousandths
    /// (0: the usual 85%).
    pub busy_permille: std::sync::atomic::AtomicU32,
    /// The reply cache: the client id of each pipe owner's tracker for
    /// its node (the id a read through the pipe opts in for), and a
    /// generation bumped at every change, so readers copy the map only
    /// when it changed.
    pub trackers: Mutex<std::collections::HashMap<std::net::SocketAddr, u64>>,
    pub trackers_gen: std::sync::atomic::AtomicU64,
}

impl Pipes {
    pub fn new(workers: usize) -> Pipes {
        Pipes {
            owners: Mutex::new(Default::default()),
            workers: workers.clamp(1, usize::from(u16::MAX)) as u16,
            verdict: AtomicBool::new(false),
            status: Mutex::new(("local", String::from("no decision yet"))),
            scale: std::sync::atomic::AtomicU32::new(1),
            force: std::sync::atomic::AtomicU8::new(0),
            busy_permille: std::sync::atomic::AtomicU32::new(0),
            trackers: Mutex::new(Default::default()),
            trackers_gen: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The owner of `addr`'s pipe learnt (or, with 0, lost) its tracker's
    /// id.
    pub fn publish_tracker(&self, addr: std::net::SocketAddr, id: u64) {
        if let Ok(mut m) = self.trackers.lock() {
            if id == 0 {
                m.remove(&addr);
            } else {
                m.insert(addr, id);
            }
            self.trackers_gen.fetch_add(1, Ordering::Release);
        }
    }

    /// The worker owning `addr`'s pipe: the first worker to ask about a
    /// node gives it the next owner in turn, and the answer never
    /// changes, so every worker agrees without asking twice (each keeps a
    /// copy; the lock is taken once per node and worker).
    pub fn owner(&self, addr: std::net::SocketAddr) -> u16 {
        let Ok(mut m) = self.owners.lock() else {
            return 0;
        };
        let (map, next) = &mut *m;
        *map.entry(addr).or_insert_with(|| {
            let w = *next % self.workers;
            *next = next.wrapping_add(1);
            w
        })
    }
}

/// One worker's last 100 ms, as `auto`'s experiment reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    /// Share of the interval the thread wanted a core (0.0 to 1.0): `ran`
    /// plus `waited`, at most 1.
    pub busy: f64,
    /// Share of the interval it ran on a core.
    pub ran: f64,
    /// Share of the interval it waited runnable for a core (its
    /// scheduler run delay): on cores shared with the clients and the
    /// nodes, the part of a saturated worker's time it does not run.
    pub waited: f64,
    /// Frames per write on its own node connections.
    pub frames_per_write: f64,
}

/// Busy enough to count (85% of the time wanting a core).
const BUSY: f64 = 0.85;
/// Thin batches: fewer frames per write than this.
const THIN: f64 = 8.0;
/// How long the move's condition must hold, the rate be steady, and the
/// comparison run (milliseconds, before the test hook's scale).
const THIN_FOR: u64 = 300;
const STEADY_FOR: u64 = 1_000;
const MEASURE: u64 = 1_000;
const LET_GO: u64 = 3_000;
const WAIT_MIN: u64 = 60_000;
const WAIT_MAX: u64 = 480_000;
/// The gain that keeps a move (5%), and the drop that ends a wait (25%).
const GAIN: f64 = 1.05;
const SETTLED_LOWER: f64 = 0.75;

/// The samples a decision was taken on, in words: each worker's busy
/// share as ran + waited, and its frames per write.
fn measured(samples: &[Sample]) -> String {
    let mut out = String::new();
    for (i, s) in samples.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!(
            "worker {i} busy {:.2} = ran {:.2} + waited {:.2}, {:.1} frames/write",
            s.busy, s.ran, s.waited, s.frames_per_write
        ));
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Local,
    Shared,
    /// Moved to the shared pipes at `at`; `before` is the rate of the
    /// second before.
    ProbeShared {
        at: u64,
        before: f64,
    },
    ProbeLocal {
        at: u64,
        before: f64,
    },
}

/// `backend-sharding auto`'s experiment, run by worker 0 at each tick:
/// samples in, a new verdict (true: the shared pipes) out when it changes.
/// Pure: the clock and the samples are given.
pub struct Experiment {
    state: State,
    /// Commands per second at each of the last ticks, newest last.
    rates: std::collections::VecDeque<(u64, f64)>,
    thin_since: Option<u64>,
    /// What the workers measured when the last probe began (`measured`),
    /// given again with its answer.
    basis: String,
    idle_since: Option<u64>,
    wait: u64,
    wait_until: u64,
    /// The rate the last answer was measured on, and the answer.
    answer_rate: f64,
    last_answer: Option<bool>,
    pub reason: String,
}

impl Default for Experiment {
    fn default() -> Self {
        Experiment {
            state: State::Local,
            rates: Default::default(),
            thin_since: None,
            basis: String::new(),
            idle_since: None,
            wait: WAIT_MIN,
            wait_until: 0,
            answer_rate: 0.0,
            last_answer: None,
            reason: String::from("no decision yet"),
        }
    }
}

impl Experiment {
    pub fn state_name(&self) -> &'static str {
        match self.state {
            State::Local => "local",
            State::Shared => "shared",
            State::ProbeShared { .. } => "probing-shared",
            State::ProbeLocal { .. } => "probing-local",
        }
    }

    /// Whether the verdict is the shared pipes.
    pub fn shared(&self) -> bool {
        matches!(self.state, State::Shared | State::ProbeShared { .. })
    }

    /// The rates sampled after `from` (ms).
    fn rates_since(&self, from: u64) -> impl Iterator<Item = f64> + '_ {
        self.rates.iter().filter(move |r| r.0 > from).map(|r| r.1)
    }

    /// The mean rate since `from` (ms), if the samples cover it.
    fn mean_since(&self, from: u64) -> Option<f64> {
        let (sum, n) = self
            .rates_since(from)
            .fold((0.0, 0usize), |(s, n), r| (s + r, n + 1));
        (n > 0).then(|| sum / n as f64)
    }

    /// The mean rate over the last `span`, when it was steady (every
    /// sample within 15% of the mean) and not idle.
    fn steady(&self, now: u64, span: u64) -> Option<f64> {
        let oldest = self.rates.front()?.0;
        if now.saturating_sub(oldest) + 1 < span {
            return None;
        }
        let from = now.saturating_sub(span);
        let mean = self.mean_since(from)?;
        let steady = self
            .rates_since(from)
            .all(|r| (r - mean).abs() <= 0.15 * mean);
        (mean > 0.0 && steady).then_some(mean)
    }

    fn answered(&mut self, now: u64, shared_better: bool, rate: f64) {
        self.wait = match self.last_answer {
            Some(a) if a == shared_better => (self.wait * 2).min(WAIT_MAX),
            _ => WAIT_MIN,
        };
        self.last_answer = Some(shared_better);
        self.answer_rate = rate;
        self.wait_until = now + self.wait;
    }

    /// One tick: the time (ms, already divided by the test scale), the
    /// proxy's command rate, every worker's sample. `Some(v)`: the
    /// verdict is now `v`.
    pub fn step(&mut self, now: u64, rate: f64, samples: &[Sample], scale: u64) -> Option<bool> {
        self.step_with(now, rate, samples, scale, BUSY)
    }

    /// `step` with another threshold of busyness (the test hook's).
    pub fn step_with(
        &mut self,
        now: u64,
        rate: f64,
        samples: &[Sample],
        scale: u64,
        busy_at: f64,
    ) -> Option<bool> {
        let scale = scale.max(1);
        let d = |ms: u64| (ms / scale).max(1);
        self.rates.push_back((now, rate));
        while self
            .rates
            .front()
            .is_some_and(|r| now.saturating_sub(r.0) > d(STEADY_FOR.max(MEASURE)) * 2)
        {
            self.rates.pop_front();
        }
        let half = samples.len().div_ceil(2).max(1);
        let busy = samples.iter().filter(|s| s.busy >= busy_at).count();
        let thin = samples
            .iter()
            .filter(|s| s.busy >= busy_at && s.frames_per_write < THIN)
            .count();
        let steady = self.steady(now, d(STEADY_FOR));
        // A rate settled a quarter under the answer's ends the wait; a
        // pause that returns to the same rate does not.
        if let Some(mean) = steady {
            if now < self.wait_until && mean <= SETTLED_LOWER * self.answer_rate {
                self.wait_until = now;
                self.reason = format!(
                    "rate settled at {mean:.0}/s, under the {:.0}/s the last answer was measured on: may probe again",
                    self.answer_rate
                );
            }
        }
        match self.state {
            State::Local => {
                if thin >= half {
                    self.thin_since.get_or_insert(now);
                } else {
                    self.thin_since = None;
                }
                let thin_long = self.thin_since.is_some_and(|t| now - t >= d(THIN_FOR));
                if let (true, true, Some(before)) = (thin_long, now >= self.wait_until, steady) {
                    self.state = State::ProbeShared { at: now, before };
                    self.basis = measured(samples);
                    self.reason = format!(
                        "{thin} of {} workers busy with thin batches at {before:.0}/s ({}): trying the shared pipes",
                        samples.len(),
                        self.basis
                    );
                    return Some(true);
                }
                None
            }
            State::ProbeShared { at, before } => self.judge(now, at, before, true, d(MEASURE)),
            State::Shared => {
                if busy < half {
                    self.idle_since.get_or_insert(now);
                } else {
                    self.idle_since = None;
                }
                if self.idle_since.is_some_and(|t| now - t >= d(LET_GO)) {
                    self.state = State::Local;
                    self.thin_since = None;
                    self.wait_until = now;
                    self.reason = format!(
                        "let go of the shared pipes: fewer than half the workers busy for {} s",
                        LET_GO / 1000
                    );
                    return Some(false);
                }
                if let (true, Some(before)) = (now >= self.wait_until, steady) {
                    self.state = State::ProbeLocal { at: now, before };
                    self.basis = measured(samples);
                    self.reason =
                        format!("trying the workers' own connections again at {before:.0}/s");
                    return Some(false);
                }
                None
            }
            State::ProbeLocal { at, before } => self.judge(now, at, before, false, d(MEASURE)),
        }
    }

    /// A second after a move to the shared pipes (`to_shared`) or back:
    /// kept on a 5% gain over the rate before it, else undone.
    fn judge(
        &mut self,
        now: u64,
        at: u64,
        before: f64,
        to_shared: bool,
        measure: u64,
    ) -> Option<bool> {
        if now - at < measure {
            return None;
        }
        let after = self.mean_since(at).unwrap_or(0.0);
        let pct = (after / before.max(1.0) - 1.0) * 100.0;
        let (tried, other) = if to_shared {
            ("the shared pipes", "the workers' own connections")
        } else {
            ("the workers' own connections", "the shared pipes")
        };
        let kept = after >= GAIN * before;
        // The answer: which side is faster, and the rate it ran at.
        let shared_better = kept == to_shared;
        self.answered(now, shared_better, if kept { after } else { before });
        self.state = if shared_better {
            State::Shared
        } else {
            State::Local
        };
        self.thin_since = None;
        self.idle_since = None;
        if kept {
            self.reason =
                format!("kept {tried}: {after:.0}/s against {before:.0}/s on {other} ({pct:+.1}%); tried when {}", self.basis);
            None
        } else {
            self.reason = format!(
                "went back to {other}: {tried} ran {after:.0}/s against {before:.0}/s ({pct:+.1}%); tried when {}",
                self.basis
            );
            Some(!to_shared)
        }
    }

    /// The test hook's forced verdict: the state follows it, with no wait.
    pub fn force(&mut self, shared: bool, now: u64) {
        self.state = if shared { State::Shared } else { State::Local };
        self.thin_since = None;
        self.idle_since = None;
        self.wait_until = now;
        self.reason = format!(
            "forced {} by the test hook",
            if shared { "shared" } else { "local" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOT: Sample = Sample {
        busy: 0.95,
        ran: 0.5,
        waited: 0.45,
        frames_per_write: 2.0,
    };
    const COOL: Sample = Sample {
        busy: 0.2,
        ran: 0.2,
        waited: 0.0,
        frames_per_write: 2.0,
    };

    /// Steps every 100 ms from `t` for `ms`, at `rate`, with `samples`;
    /// the verdicts it gave, with their times.
    fn run(
        e: &mut Experiment,
        t: &mut u64,
        ms: u64,
        rate: f64,
        samples: &[Sample],
    ) -> Vec<(u64, bool)> {
        let mut out = Vec::new();
        let end = *t + ms;
        while *t < end {
            *t += 100;
            if let Some(v) = e.step(*t, rate, samples, 1) {
                out.push((*t, v));
            }
        }
        out
    }

    #[test]
    fn an_idle_or_lightly_loaded_proxy_never_probes() {
        let mut e = Experiment::default();
        let mut t = 0;
        assert!(run(&mut e, &mut t, 600_000, 0.0, &[HOT, HOT]).is_empty());
        assert!(run(&mut e, &mut t, 600_000, 50_000.0, &[COOL, COOL]).is_empty());
        // Busy, but with deep batches: the local connections batch well.
        let deep = Sample {
            busy: 0.95,
            ran: 0.95,
            waited: 0.0,
            frames_per_write: 30.0,
        };
        assert!(run(&mut e, &mut t, 600_000, 50_000.0, &[deep, deep]).is_empty());
        assert_eq!(e.state_name(), "local");
    }

    fn verdicts(v: Vec<(u64, bool)>) -> Vec<bool> {
        v.into_iter().map(|x| x.1).collect()
    }

    #[test]
    fn a_gain_keeps_the_shared_pipes_and_no_gain_takes_them_back_with_a_doubling_wait() {
        let mut e = Experiment::default();
        let mut t = 0;
        // A second of steady rate, half the workers busy with thin
        // batches for 300 ms: the move (at 1.1 s, once a second is seen).
        let v = run(&mut e, &mut t, 1_200, 50_000.0, &[HOT, COOL]);
        assert_eq!(v, vec![(1_100, true)], "half the workers hot");
        // 4% more a second later: not enough, back, a minute's wait.
        let v = run(&mut e, &mut t, 1_000, 52_000.0, &[HOT, COOL]);
        assert_eq!(v, vec![(2_100, false)]);
        assert!(e.reason.starts_with("went back"), "{}", e.reason);
        assert!(run(&mut e, &mut t, 59_000, 50_000.0, &[HOT, COOL]).is_empty());
        let v = run(&mut e, &mut t, 1_000, 50_000.0, &[HOT, COOL]);
        assert_eq!(v, vec![(62_100, true)], "probes again after the minute");
        // The same answer again: the wait doubles to two minutes.
        let v = run(&mut e, &mut t, 1_000, 50_000.0, &[HOT, COOL]);
        assert_eq!(verdicts(v), vec![false]);
        assert!(run(&mut e, &mut t, 119_000, 50_000.0, &[HOT, COOL]).is_empty());
        let v = run(&mut e, &mut t, 1_000, 50_000.0, &[HOT, COOL]);
        assert_eq!(v, vec![(183_100, true)]);
        // This time it gains 10%: kept.
        assert!(run(&mut e, &mut t, 1_000, 55_000.0, &[HOT, COOL]).is_empty());
        assert_eq!(e.state_name(), "shared");
        assert!(
            e.reason.starts_with("kept the shared pipes"),
            "{}",
            e.reason
        );
    }

    #[test]
    fn the_shared_pipes_are_let_go_when_the_workers_cool_and_a_lower_rate_ends_the_wait() {
        let mut e = Experiment::default();
        let mut t = 0;
        assert_eq!(
            verdicts(run(&mut e, &mut t, 1_200, 50_000.0, &[HOT, HOT])),
            vec![true]
        );
        assert!(run(&mut e, &mut t, 1_000, 60_000.0, &[HOT, HOT]).is_empty());
        assert_eq!(e.state_name(), "shared");
        // Cool for three seconds: let go, unmeasured.
        let v = run(&mut e, &mut t, 3_100, 60_000.0, &[COOL, COOL]);
        assert_eq!(verdicts(v), vec![false]);
        assert!(e.reason.starts_with("let go"), "{}", e.reason);
        // Hot again: moves again at once (no wait after letting go).
        let v = run(&mut e, &mut t, 400, 60_000.0, &[HOT, HOT]);
        assert_eq!(verdicts(v), vec![true]);
        // Kept; then a rate settling a quarter lower ends the wait, so the
        // other way is tried long before the minute.
        assert!(run(&mut e, &mut t, 1_000, 70_000.0, &[HOT, HOT]).is_empty());
        assert_eq!(e.state_name(), "shared");
        // (and at the same rate on them, back to the shared pipes).
        let v = run(&mut e, &mut t, 3_000, 40_000.0, &[HOT, HOT]);
        assert_eq!(verdicts(v), vec![false, true], "{}", e.reason);
        assert!(
            e.reason.starts_with("went back to the shared pipes"),
            "{}",
            e.reason
        );
    }
}
