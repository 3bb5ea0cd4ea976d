//! Overload control inside a worker: every bound whose far side is an
//! error or a disconnection, decided before any work is done for it.
//!
//! ```text
//!   read ─► dispatch? ──────────── window full / over high water ─► pause (resume at half)
//!              │ denyoom and over maxmemory ─► -OOM, nothing sent
//!              ▼
//!   reply ─► output held ── hard limit ─► marked, closed at the flush
//!   appended                              (before it writes), counted
//!   flush ─► output held ── hard / soft+seconds limit, or 17 KiB
//!                           before AUTH ─► close, counted
//!   tick  ─► publish buffered bytes + sessions' fixed cost, sum them
//!            (maxmemory's total; also as a session opens or closes);
//!            once a second: idle timeout, soft limits of silent
//!            sessions, give back idle sessions' buffers
//!   held output grew 1 MiB, or tick ─► sum every worker's share; over
//!            client-output-total-limit ─► the client holding the most
//!            is closed (here, or by its worker, asked over the fabric)
//! ```
//!
//! Output held for a session is its unsent write queue, its pushes
//! waiting for their barrier, and the replies waiting in its ring (behind
//! an earlier one still pending, or until the flush). The hard limit is
//! checked where a reply or push is appended, as Redis checks its limits
//! as each reply is added: within one turn a session may otherwise pile
//! up far more than the limit before its flush looks (replies behind a
//! slow node's, say, which cannot be written yet).
//!
//! Memory accounting: the worker keeps one plain counter of the bytes its
//! sessions buffer (input, unsent output, pushes), corrected at coarse
//! points only: after a session's input was read and dispatched, after
//! each of its flushes, and when it closes. Each session remembers what it
//! last contributed (`accounted`), so a correction is a difference, and
//! nothing is counted per request. Its backends (a few per node) are
//! summed at each tick instead: request bytes in their FIFOs and partial
//! replies. Each open session also costs a fixed
//! [`FIXED_COST`](crate::session::FIXED_COST) (its struct and its first
//! read buffer), so the figure is never 0 while a client is connected,
//! as a node's `used_memory` never is. The worker's figure is buffered
//! bytes + backend bytes + sessions x fixed cost; it publishes it to its
//! padded slot and adds up every worker's slot into the process total
//! (`used_memory`) at each tick, and at once when a session opens or
//! closes. The `maxmemory` check loads the live budget (CONFIG SET's,
//! whichever worker ran it) with one relaxed load, and the total with a
//! second only when a budget is set; INFO's `used_memory` is that total.
//!
//! The output budget (`client-output-total-limit`): the output held for
//! every client of every worker (what the hard limit counts, summed) has
//! one bound. Each session remembers the held output it last added to its
//! worker's share (`pressure.held`), corrected after each flush (what the
//! client did not take), where a reply is appended that this turn's flush
//! will not write (behind a pending one), and at close: a difference, no
//! atomic, and for a client that keeps up one compare per flush. A worker publishes its share, and the most one of its sessions
//! holds, to its padded slot when the share grew by `BUDGET_STEP` since
//! it last did, and at each tick; it then adds up every slot. Over the
//! budget, at the end of this turn's flush, it looks at its own sessions for the
//! largest holder and compares it with the others' published largest:
//! its own goes when it is the largest, as the hard limit closes a
//! client; otherwise the worker holding the largest is sent
//! `WorkerMsg::OutputBudget` (once until it has looked) and does the
//! same at its next turn. So at most `BUDGET_STEP` per worker goes
//! unseen by the sum, and the client closed first is the one holding the
//! most, as Redis's `maxmemory-clients` closes the largest client first.
//!
//! Never: block, allocate per request, or close a session in the middle
//! of another session's handling (closures happen at flush or tick time,
//! or where the session itself is being served).

use super::{Timer, Worker};
use crate::config::{Config, OutputLimit};
use crate::session::{ReadOutcome, Session};
use crate::shared::WorkerMsg;
use bytes::{Bytes, BytesMut};
use reactor::{Context, Key};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Sent, when it can be, to a client cut off at `query-buffer-limit`.
const ERR_QUERY_LIMIT: &[u8] =
    b"-ERR mithril: closing the connection, its query buffer reached query-buffer-limit\r\n";
/// Sent, when it can be, to a client whose request cannot fit it.
const ERR_REQUEST_TOO_LARGE: &[u8] =
    b"-ERR mithril: closing the connection, its request is larger than query-buffer-limit\r\n";

/// Unsent output at which a client that has not authenticated (while
/// `requirepass` is set) is closed. Redis 7 closes such a client once the
/// reply list behind its 16 KiB reply buffer holds more than 1 KiB; this is
/// the same amount counted as one figure.
pub const UNAUTH_OUTPUT_LIMIT: usize = 17 * 1024;

/// Growth of a worker's held output (its share of
/// `client-output-total-limit`) at which it publishes its share and adds
/// up every worker's: what one worker holds may go unseen by the others by
/// at most this much.
const BUDGET_STEP: usize = 1024 * 1024;

/// Ticks (100 ms) between sweeps over every session (about once a second,
/// as Redis's clients cron visits each client).
const SWEEP_TICKS: u32 = 10;

/// A session idle this long gives back its grown buffers (Redis frees an
/// idle client's query buffer after 2 seconds).
const SHRINK_AFTER: Duration = Duration::from_secs(2);

/// Bytes released by one sweep past which the allocator is asked to give
/// its free pages back to the system.
const TRIM_AFTER: usize = 1024 * 1024;

/// A burst: the worker's buffered bytes fell by this much from their peak
/// since the last sweep. The allocator is asked to give back what the
/// burst left in its heaps, as after a sweep that freed buffers.
const TRIM_AFTER_BURST: usize = 32 * 1024 * 1024;

/// A read buffer this large and three quarters empty is given back at the
/// sweep, idle or not: left by a large request, it would otherwise stay
/// the buffer of a client that keeps sending small ones.
const LARGE_BUFFER: usize = 1024 * 1024;

/// glibc keeps freed memory in its heaps: thousands of idle sessions'
/// read buffers freed by a sweep would stay in the process's RSS. Asking it
/// to trim returns the free pages (about a millisecond; at most once a
/// second, and only after a sweep freed a megabyte or more).
fn give_back_to_the_os() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The worker's overload settings and counters.
pub struct OverloadState {
    /// Bytes buffered by this worker's sessions (see the module doc).
    pub buffered: usize,
    /// Bytes buffered by its backends, as of the last tick.
    pub backend_bytes: usize,
    /// The most `buffered` (plus `backend_bytes`) seen since the last
    /// sweep, at the accounting points and ticks.
    peak: usize,
    /// `client-output-high-water`.
    pub high_water: usize,
    pub normal: OutputLimit,
    pub pubsub: OutputLimit,
    /// A replication feed's (SYNC, replfeed/).
    pub replica: OutputLimit,
    /// `client-output-total-limit` (0: none).
    pub total_limit: u64,
    /// Output held for this worker's sessions: the sum of their
    /// `pressure.held`.
    pub held: usize,
    /// `held` when it was last published.
    held_seen: usize,
    /// The most one session held as last counted: exact after a look at
    /// every session, an upper bound in between.
    largest: usize,
    /// The budget is looked at during this turn's flush.
    pub budget_due: bool,
    /// `timeout` (None: never).
    pub idle_timeout: Option<Duration>,
    ticks: u32,
    /// Limit closures not logged since the last logged one (sampling).
    quiet: u64,
    last_log: Option<Instant>,
    /// Test-only commands are accepted (debug builds, with
    /// `MITHRIL_TEST_HOOKS=1` in the environment at start).
    #[cfg(debug_assertions)]
    pub test_hooks: bool,
}

impl OverloadState {
    pub fn new(cfg: &Config) -> OverloadState {
        OverloadState {
            buffered: 0,
            backend_bytes: 0,
            peak: 0,
            high_water: cfg.client_output_high_water.min(usize::MAX as u64) as usize,
            normal: cfg.output_limit_normal,
            pubsub: cfg.output_limit_pubsub,
            replica: cfg.output_limit_replica,
            total_limit: cfg.client_output_total_limit,
            held: 0,
            held_seen: 0,
            largest: 0,
            budget_due: false,
            idle_timeout: (cfg.timeout_secs > 0).then(|| Duration::from_secs(cfg.timeout_secs)),
            ticks: 0,
            quiet: 0,
            last_log: None,
            #[cfg(debug_assertions)]
            test_hooks: std::env::var_os("MITHRIL_TEST_HOOKS").is_some_and(|v| v == "1"),
        }
    }

    /// Correct the counter for session `s` (a coarse accounting point).
    #[inline]
    pub fn account(&mut self, s: &mut Session) {
        let now = s.buffered();
        if now != s.pressure.accounted {
            self.buffered = (self.buffered + now).saturating_sub(s.pressure.accounted);
            s.pressure.accounted = now;
            self.peak = self.peak.max(self.buffered);
        }
    }
}

/// Why a session's output got it closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    Unauthenticated,
    Hard,
    Soft,
    /// It held the most output when every client's together passed
    /// `client-output-total-limit`.
    Total,
}

/// Where `s`'s held output may have changed (a flush, a reply appended
/// that the flush will not write):
/// correct the worker's share by the difference, and ask for a look at
/// the process sum when the share grew by `BUDGET_STEP` since the last.
/// A few loads and compares; no atomic.
#[inline]
pub(super) fn count_held(o: &mut OverloadState, s: &mut Session) {
    let now = s.output_held();
    let was = s.pressure.held;
    if now == was {
        return;
    }
    s.pressure.held = now;
    o.held = (o.held + now).saturating_sub(was);
    o.largest = o.largest.max(now);
    if o.total_limit != 0 && o.held >= o.held_seen + BUDGET_STEP {
        o.budget_due = true;
    }
}

/// The limits of `s`'s class.
#[inline]
fn limit_of(s: &Session, o: &OverloadState) -> OutputLimit {
    // A monitor's feed is pushed at it like published messages: the
    // pubsub class bounds it (a node counts monitors as normal clients).
    if s.is_monitor() || s.sub.as_ref().is_some_and(|x| x.count() > 0) {
        o.pubsub
    } else if s.input().is_feed() {
        o.replica
    } else {
        o.normal
    }
}

/// Where a reply or push was just appended to `s`: when its held output
/// reaches the hard limit, mark it (`over_hard`) to be closed at this
/// turn's flush, before it writes anything more. Not closed here: this may
/// be in the middle of a backend's replies or another session's handling.
/// True when it was marked now (the caller puts it on the flush list).
/// Costs a session whose class has no hard limit one compare.
#[inline]
pub(super) fn mark_over_hard(o: &OverloadState, s: &mut Session) -> bool {
    let hard = limit_of(s, o).hard;
    if hard == 0 || s.pressure.over_hard || (s.output_held() as u64) < hard {
        return false;
    }
    s.pressure.over_hard = true;
    true
}

/// The output verdict for `s` at `now` (also runs the soft-limit clock).
fn output_verdict(s: &mut Session, now: Instant, o: &OverloadState) -> Option<Cut> {
    let held = s.output_held();
    if !s.authenticated() && held > UNAUTH_OUTPUT_LIMIT {
        return Some(Cut::Unauthenticated);
    }
    let limit = limit_of(s, o);
    if s.pressure.over_hard || (limit.hard != 0 && held as u64 >= limit.hard) {
        return Some(Cut::Hard);
    }
    if limit.soft != 0 && held as u64 >= limit.soft {
        match s.pressure.soft_since {
            None => s.pressure.soft_since = Some(now),
            Some(t) if now.saturating_duration_since(t) > Duration::from_secs(limit.soft_secs) => {
                return Some(Cut::Soft)
            }
            Some(_) => {}
        }
    } else {
        s.pressure.soft_since = None;
    }
    None
}

/// What the worker does with a session after its flush.
pub(super) enum AfterFlush {
    Go,
    /// It was paused and may dispatch again.
    Resume,
    /// Its output passed a limit: close it (see `output_limit_close`).
    Close(Cut),
}

/// After session `s` flushed: learn its reply size and set its window,
/// apply the output limits, decide whether a paused session resumes, and
/// account its bytes. Cheap when the client keeps up (nothing unsent).
#[inline]
pub(super) fn after_flush(o: &mut OverloadState, s: &mut Session, now: Instant) -> AfterFlush {
    if s.pressure.wrote {
        s.pressure.wrote = false;
        s.active(now);
    }
    let unsent = s.unsent();
    s.pressure.update(unsent, o.high_water);
    count_held(o, s);
    if unsent > 0 || s.pressure.soft_since.is_some() || s.ring.ready_bytes() > 0 {
        if let Some(cut) = output_verdict(s, now, o) {
            return AfterFlush::Close(cut);
        }
    }
    o.account(s);
    if s.input().is_paused() && s.pressure.may_resume(s.outstanding(), unsent, o.high_water) {
        s.resume();
        return AfterFlush::Resume;
    }
    AfterFlush::Go
}

impl Worker {
    /// Correct the buffered-bytes counter for session `key`.
    pub(super) fn account_session(&mut self, key: Key) {
        if let Some(s) = self.sessions.get_mut(key) {
            self.overload.account(s);
        }
    }

    /// A session that held `accounted` bytes is gone.
    pub(super) fn unaccount(&mut self, accounted: usize) {
        self.overload.buffered = self.overload.buffered.saturating_sub(accounted);
    }

    /// The `maxmemory` gate's input: the process-wide total is over the
    /// budget. The budget is read live at each command, not copied at
    /// ticks, so a CONFIG SET on another worker holds from the next
    /// command on (one relaxed load while no budget is set). The router
    /// refuses commands that may grow memory, and EXEC of a transaction
    /// holding one, while this holds.
    #[inline]
    pub(super) fn over_memory(&self) -> bool {
        let budget = self.shared.live.maxmemory.load(Ordering::Relaxed);
        budget != 0 && self.shared.overload.used_memory.load(Ordering::Relaxed) > budget
    }

    /// This worker's part of `used_memory`: what its sessions buffer (as
    /// accounted), what its backends buffered at the last tick, and each
    /// open session's fixed cost.
    fn memory_figure(&self) -> u64 {
        let fixed = self.sessions.len() * crate::session::FIXED_COST;
        (self.overload.buffered + self.overload.backend_bytes + fixed) as u64
    }

    /// At each tick: publish this worker's figure (its backends summed
    /// now, its sessions as accounted).
    pub(super) fn publish_buffered(&mut self) {
        self.overload.backend_bytes = self.backends.iter().map(|(_, b)| b.buffered()).sum();
        let buffered = self.overload.buffered + self.overload.backend_bytes;
        self.overload.peak = self.overload.peak.max(buffered);
        self.store_figure();
    }

    /// A session opened or closed: its fixed cost counts in the process
    /// total at once, not from the next tick (a client that connects and
    /// writes at once meets the budget as a node's client would).
    pub(super) fn publish_sessions(&self) {
        self.store_figure();
        self.shared.overload.sum(&self.shared.workers);
    }

    fn store_figure(&self) {
        self.shared.workers[self.id]
            .buffered
            .store(self.memory_figure(), Ordering::Relaxed);
    }

    pub(super) fn output_limit_close(&mut self, cx: &mut Context<'_, Timer>, key: Key, cut: Cut) {
        self.shared
            .overload
            .output_limit_disconnections
            .fetch_add(1, Ordering::Relaxed);
        if let Some(s) = self.sessions.get(key) {
            let why = match cut {
                Cut::Unauthenticated => "output limit of an unauthenticated client",
                Cut::Hard => "client-output-buffer-limit (hard)",
                Cut::Soft => "client-output-buffer-limit (soft)",
                Cut::Total => "",
            };
            let line = if cut == Cut::Total {
                format!(
                    "closing client {} ({}): it held the most output ({} bytes) when the output \
                     held for all clients passed client-output-total-limit ({} bytes)",
                    s.id,
                    s.peer(),
                    s.output_held(),
                    self.overload.total_limit
                )
            } else {
                format!(
                    "closing client {} ({}): {} bytes of output held passed the {why}",
                    s.id,
                    s.peer(),
                    s.output_held()
                )
            };
            self.log_sampled(cx.now, &line);
        }
        self.close_session(cx, key);
    }

    /// Store this worker's share of the held output and its largest
    /// holder in its slot.
    fn publish_output(&mut self) {
        let o = &mut self.overload;
        o.held_seen = o.held;
        let slot = &self.shared.workers[self.id].output;
        slot.held.store(o.held as u64, Ordering::Relaxed);
        slot.largest.store(o.largest as u64, Ordering::Relaxed);
    }

    /// The output held for every client (each worker's share as it last
    /// published it, this one's fresh), and the other worker whose
    /// largest holder holds the most, with that figure.
    pub(super) fn output_sum(&self) -> (u64, usize, u64) {
        let mut total = 0u64;
        let (mut who, mut most) = (self.id, 0u64);
        for (w, slot) in self.shared.workers.iter().enumerate() {
            if w == self.id {
                total += self.overload.held as u64;
                continue;
            }
            total += slot.output.held.load(Ordering::Relaxed);
            let largest = slot.output.largest.load(Ordering::Relaxed);
            if largest > most {
                (who, most) = (w, largest);
            }
        }
        (total, who, most)
    }

    /// This worker's session holding the most output, and how much (each
    /// session's count corrected on the way).
    fn largest_holder(&mut self) -> Option<(Key, usize)> {
        let mut best: Option<(Key, usize)> = None;
        for key in self.sessions.keys() {
            let Some(s) = self.sessions.get_mut(key) else {
                continue;
            };
            count_held(&mut self.overload, s);
            let held = s.pressure.held;
            if held > best.map_or(0, |b| b.1) {
                best = Some((key, held));
            }
        }
        self.overload.largest = best.map_or(0, |b| b.1);
        best
    }

    /// At the end of the flush, when the held output grew by a step, a tick found the
    /// sum over `client-output-total-limit`, or another worker asked:
    /// while every client's held output is over the budget, close the
    /// client holding the most if it is this worker's; if another
    /// worker's is larger, ask that worker (once until it has looked).
    pub(super) fn output_budget(&mut self, cx: &mut Context<'_, Timer>) {
        self.overload.budget_due = false;
        let slot = &self.shared.workers[self.id].output;
        slot.nudged.store(false, Ordering::Relaxed);
        let limit = self.overload.total_limit;
        if limit == 0 {
            return;
        }
        self.publish_output();
        if self.output_sum().0 <= limit {
            return;
        }
        // Each pass closes one session; at most every session once.
        for _ in 0..=self.sessions.len() {
            let mine = self.largest_holder();
            self.publish_output();
            // Published: the counting on the way asks for no other look.
            self.overload.budget_due = false;
            let (total, other, theirs) = self.output_sum();
            if total <= limit {
                return;
            }
            match mine {
                Some((key, held)) if held as u64 >= theirs => {
                    self.output_limit_close(cx, key, Cut::Total);
                }
                _ if theirs > 0 => {
                    let their = &self.shared.workers[other];
                    if !their.output.nudged.swap(true, Ordering::AcqRel)
                        && their.tx.send(WorkerMsg::OutputBudget).is_err()
                    {
                        // A full mailbox: asked again at the next step or tick.
                        their.output.nudged.store(false, Ordering::Relaxed);
                    }
                    return;
                }
                _ => return,
            }
        }
    }

    /// At SIGTERM: a paused session has not read what the kernel holds
    /// for it; those requests were sent before the signal, so take them
    /// now (one read's worth), to be dispatched as its window allows.
    pub(super) fn drain_take_input(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let limit = self.query_limit;
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if !s.input().is_paused() || s.eof() {
            return;
        }
        match s.read(super::SESSION_READ_BUDGET, limit, true) {
            ReadOutcome::Overflow => return self.query_limit_close(cx, key),
            ReadOutcome::Error(_) => return self.close_session(cx, key),
            _ => {}
        }
        // Still paused; its backlog is what it holds now.
        s.pause();
    }

    /// A session's read buffer reached `query-buffer-limit`: count it, tell
    /// the client when its output is in order for it, and close.
    pub(super) fn query_limit_close(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        self.input_limit_close(cx, key, None);
    }

    /// The request being read needs at least `need` bytes, more than
    /// `query-buffer-limit`: refuse it before the rest is read, as for a
    /// buffer that reached the limit.
    pub(super) fn request_too_large(&mut self, cx: &mut Context<'_, Timer>, key: Key, need: usize) {
        self.input_limit_close(cx, key, Some(need));
    }

    fn input_limit_close(&mut self, cx: &mut Context<'_, Timer>, key: Key, need: Option<usize>) {
        self.shared
            .overload
            .query_limit_disconnections
            .fetch_add(1, Ordering::Relaxed);
        let limit = self.query_limit;
        if let Some(s) = self.sessions.get_mut(key) {
            let (line, reply) = match need {
                None => (
                    format!(
                        "closing client {} ({}): query buffer reached query-buffer-limit ({} bytes)",
                        s.id,
                        s.peer(),
                        s.rbuf.len()
                    ),
                    ERR_QUERY_LIMIT,
                ),
                Some(need) => (
                    format!(
                        "closing client {} ({}): a request of at least {need} bytes is larger \
                         than query-buffer-limit ({limit} bytes), refused after {} bytes of it",
                        s.id,
                        s.peer(),
                        s.rbuf.len()
                    ),
                    ERR_REQUEST_TOO_LARGE,
                ),
            };
            if s.idle() {
                // Nothing else is owed to the client: the error is in order.
                // Best effort; a full socket just loses it.
                s.rbuf.clear();
                s.ring.push_ready(Bytes::from_static(reply));
                let _ = s.flush(&mut self.obs.stats);
            }
            self.log_sampled(cx.now, &line);
        }
        self.close_session(cx, key);
    }

    /// Warn at most once a second per worker; the lines in between are
    /// counted and the count is given with the next one.
    fn log_sampled(&mut self, now: Instant, line: &str) {
        let o = &mut self.overload;
        if o.last_log
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(1))
        {
            o.quiet += 1;
            return;
        }
        o.last_log = Some(now);
        let quiet = std::mem::take(&mut o.quiet);
        if quiet > 0 {
            log::warn!(target: "mithril::worker", "worker {}: {line} ({quiet} more closed by limits since the last message)", self.id);
        } else {
            log::warn!(target: "mithril::worker", "worker {}: {line}", self.id);
        }
    }

    /// At each tick: sum the process total; about once a second, sweep the
    /// sessions (idle timeout, soft limits of sessions that stopped
    /// flushing, buffers of idle sessions).
    pub(super) fn overload_tick(&mut self, cx: &mut Context<'_, Timer>) {
        // The settings as CONFIG SET last left them (maxmemory is read
        // live by the gate).
        let secs = self.shared.live.timeout_secs.load(Ordering::Relaxed);
        self.overload.idle_timeout = (secs > 0).then(|| Duration::from_secs(secs));
        self.publish_buffered();
        self.shared.overload.sum(&self.shared.workers);
        if self.overload.total_limit != 0 {
            self.publish_output();
            if self.output_sum().0 > self.overload.total_limit {
                self.overload.budget_due = true;
            }
        }
        self.overload.ticks += 1;
        if self.overload.ticks < SWEEP_TICKS {
            return;
        }
        self.overload.ticks = 0;
        let now = cx.now;
        let mut released = 0;
        let mut largest = 0;
        for key in self.sessions.keys() {
            let Some(s) = self.sessions.get_mut(key) else {
                continue;
            };
            largest = largest.max(s.pressure.held);
            let idle_for = now.saturating_duration_since(s.last_active());
            let exempt = s.input().is_blocked() || s.sub.is_some() || s.input().is_feed();
            if let Some(limit) = self.overload.idle_timeout {
                if !exempt && idle_for > limit {
                    log::debug!(target: "mithril::worker", "worker {}: closing client {}, idle for {}s (timeout)", self.id, s.id, idle_for.as_secs());
                    self.shared
                        .overload
                        .idle_disconnections
                        .fetch_add(1, Ordering::Relaxed);
                    self.close_session(cx, key);
                    continue;
                }
            }
            if s.output_held() > 0 {
                if let Some(cut) = output_verdict(s, now, &self.overload) {
                    self.output_limit_close(cx, key, cut);
                    continue;
                }
            } else if idle_for >= SHRINK_AFTER {
                released += s.shrink_idle();
                self.account_session(key);
                continue;
            }
            let cap = s.rbuf.capacity();
            if cap >= LARGE_BUFFER && s.rbuf.len() < cap / 4 {
                // Same bytes at the same offsets: the scanner's place in
                // a partial request stays valid.
                s.rbuf = BytesMut::from(&s.rbuf[..]);
                released += cap;
            }
        }
        self.overload.largest = largest;
        let total = self.overload.buffered + self.overload.backend_bytes;
        let burst = self.overload.peak.saturating_sub(total) >= TRIM_AFTER_BURST;
        self.overload.peak = total;
        if released >= TRIM_AFTER || burst {
            give_back_to_the_os();
        }
    }
}
