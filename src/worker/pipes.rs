//! Shared pipes (`backend-sharding yes`): one connection per node for the
//! whole process, on the worker that owns it (`shared::pipe::Pipes`).
//!
//! ```text
//!   worker A (requester)                      worker B (owner of node N)
//!   session ─► link to N (FIFO) ─take_unsent─► B's inbox ─► pipe to N ─► N
//!   session ◄── link's FIFO pairs ◄── feed ◄── A's inbox ◄── Remote entry
//! ```
//!
//! A requesting worker keeps, per node pipe it does not own, a *link*: a
//! `Backend` without a socket whose FIFO holds its sessions' requests
//! exactly as a connection's would. At the end of each turn the link's
//! unsent requests cross to the owner in one batch; the owner queues them
//! on its pipe as `Purpose::Remote` entries (the requester and the link's
//! key) behind its own sessions' and sends each reply back, again in one
//! batch per turn. The link is fed the replies in the order the node
//! answered them, which is its FIFO's order, so pairing, redirects,
//! retries, transactions and ordering per session are the connection
//! code's, unchanged. When the pipe fails, the owner answers each remote
//! request it held with the error a connection's own requests get.
use super::*;
use crate::config::Sharding;
use crate::session::Session;
use crate::shared::pipe::{Experiment, PipeQueue, PipeReply, PipeReq, Sample};

/// Invalidations sent to each other worker per loop turn; past it, one
/// flush of their caches instead.
const INVALIDATIONS_MOST: usize = 65_536;

/// The error for requests sent to a worker that has stopped.
const ERR_STOPPED: &[u8] = b"-ERR mithril: shutting down\r\n";

pub(super) struct PipeState {
    pub mode: Sharding,
    /// `yes` or `auto`: links and remote requests may exist.
    pub on: bool,
    /// `auto`'s verdict, as read at the last tick.
    pub verdict: bool,
    /// Sessions waiting for their replies to move (checked at each tick
    /// too, in case their last reply came another way than `deliver`).
    moving: Vec<Key>,
    /// Sessions on the shared pipes (for INFO).
    pub sessions: usize,
    /// The sample's counters: frames and writes on this worker's own node
    /// connections since the last tick, and the thread's CPU clock then.
    pub frames: u64,
    pub writes: u64,
    served: u64,
    /// The thread's time running and waiting for a core at the last tick
    /// (`WantClock`).
    clock: WantClock,
    ran_us: u64,
    waited_us: u64,
    at_us: u64,
    commands: u64,
    /// Worker 0 under `auto`: the experiment.
    experiment: Option<Box<Experiment>>,
    forced: u8,
    /// Pipe owners by node, for the trackers (pools keep their own).
    owners: HashMap<SocketAddr, u16>,
    /// The owners' tracker ids (`Pipes::trackers`) as of generation
    /// `trackers_gen`.
    trackers: HashMap<SocketAddr, u64>,
    trackers_gen: u64,
    /// Invalidations queued to other workers this turn (bounded: past
    /// `INVALIDATIONS_MOST` a flush goes instead).
    invalidations: usize,
    /// What this worker's inbox held, taken once per turn (reused).
    inbox: PipeQueue,
    /// Per worker: what goes to it at the end of this turn.
    out: Vec<PipeQueue>,
    /// Workers with something in `out`.
    out_dirty: Vec<usize>,
    /// Remote requests on this worker's pipes, not answered yet.
    pub remote: usize,
}

impl PipeState {
    pub fn new(shared: &Shared) -> PipeState {
        let n = shared.workers.len();
        let mode = shared.config.backend_sharding;
        PipeState {
            mode,
            on: mode != Sharding::No,
            verdict: false,
            moving: Vec::new(),
            sessions: 0,
            frames: 0,
            writes: 0,
            served: 0,
            clock: WantClock::new(),
            ran_us: 0,
            waited_us: 0,
            at_us: 0,
            commands: 0,
            experiment: None,
            forced: 0,
            owners: HashMap::new(),
            trackers: HashMap::new(),
            trackers_gen: u64::MAX,
            invalidations: 0,
            inbox: PipeQueue::default(),
            out: (0..n).map(|_| PipeQueue::default()).collect(),
            out_dirty: Vec::new(),
            remote: 0,
        }
    }

    /// A session moved onto the pipes (`true`) or off them.
    pub fn moved(&mut self, onto: bool) {
        self.sessions = if onto {
            self.sessions + 1
        } else {
            self.sessions.saturating_sub(1)
        };
    }

    pub(super) fn out(&mut self, to: usize) -> &mut PipeQueue {
        let q = &mut self.out[to];
        if q.reqs.is_empty() && q.replies.is_empty() {
            self.out_dirty.push(to);
        }
        &mut self.out[to]
    }
}

/// The time this thread wanted a CPU, in microseconds: the time it ran
/// plus the time it waited runnable for a core (`run_delay`), from
/// `/proc/thread-self/schedstat`. On cores shared with the clients and
/// the nodes, a worker that is behind spends much of its time waiting for
/// a core rather than running; counting only the CPU it got would make a
/// saturated worker look a third busy. Without schedstat (a kernel built
/// without it), the thread's CPU clock alone.
pub(super) struct WantClock {
    /// Opened when the worker is made, on its own thread (`thread-self`
    /// names the thread that opens it; before the proxy answers, so the
    /// descriptor is there from the start); `None` when it failed.
    file: Option<std::fs::File>,
}

impl WantClock {
    /// To be called on the thread it measures.
    pub(super) fn new() -> WantClock {
        WantClock {
            file: std::fs::File::open("/proc/thread-self/schedstat").ok(),
        }
    }

    /// (ran, waited) in microseconds since the thread began; `waited` is 0
    /// without schedstat.
    pub(super) fn read(&mut self) -> (u64, u64) {
        if let Some(f) = &self.file {
            if let Some(t) = read_schedstat(f) {
                return t;
            }
            self.file = None;
        }
        (thread_cpu_us(), 0)
    }
}

/// Over `wall` microseconds in which a worker ran `ran` and waited
/// runnable `waited`: (busy, ran, waited) as shares of it, busy being the
/// time it wanted a core (at most 1).
fn shares(ran: u64, waited: u64, wall: u64) -> (f64, f64, f64) {
    let wall = wall.max(1) as f64;
    let (r, w) = (ran as f64 / wall, waited as f64 / wall);
    ((r + w).min(1.0), r.min(1.0), w.min(1.0))
}

/// `/proc/thread-self/schedstat`'s first two fields (nanoseconds on a CPU,
/// nanoseconds waiting on a run queue), in microseconds.
fn read_schedstat(f: &std::fs::File) -> Option<(u64, u64)> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 96];
    let n = f.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let mut it = text.split_ascii_whitespace();
    let ran: u64 = it.next()?.parse().ok()?;
    let waited: u64 = it.next()?.parse().ok()?;
    Some((ran / 1_000, waited / 1_000))
}

/// This thread's CPU time (user and system), in microseconds.
fn thread_cpu_us() -> u64 {
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe {
        let mut t: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) != 0 {
            return 0;
        }
        t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
    }
}

impl Worker {
    /// A session's next request waits for its replies to move
    /// (`Steer::Wait`): counted, and looked at again at each tick.
    #[cold]
    pub(super) fn pipe_wait_move(&mut self, key: Key) {
        self.shared.workers[self.id]
            .pipe
            .move_waits
            .fetch_add(1, Ordering::Relaxed);
        self.pipes.moving.push(key);
    }

    /// A session waiting to move has all its replies: it moves and its
    /// input is looked at again.
    #[cold]
    pub(super) fn pipe_moved(&mut self, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let Some(onto) = s.finish_move() else {
            return;
        };
        self.pipes.moved(onto);
        self.ready_sessions.push(key);
        self.pipes.moving.retain(|&k| k != key);
    }

    /// A closing session leaves the count.
    pub(super) fn pipe_session_closed(&mut self, s: &Session) {
        if s.on_pipe() {
            self.pipes.moved(false);
        }
        if s.moving() {
            self.pipes.moving.retain(|&k| k != s.key);
        }
    }

    /// Every 100 ms: this worker's sample (in every mode: INFO shows the
    /// frames per write), and on worker 0 under `auto` the experiment's
    /// step.
    pub(super) fn pipes_tick(&mut self, cx: &mut Context<'_, Timer>) {
        // (pipe_moved takes a session that moved off the list.)
        if !self.pipes.moving.is_empty() {
            for key in self.pipes.moving.clone() {
                self.pipe_moved(key);
            }
        }
        let (ran, waited) = self.pipes.clock.read();
        let wall = cx.now_us.saturating_sub(self.pipes.at_us).max(1);
        // The first tick measures from the thread's start: no sample yet.
        let (busy, ran_share, waited_share) = if self.pipes.at_us == 0 {
            (0.0, 0.0, 0.0)
        } else {
            shares(
                ran.saturating_sub(self.pipes.ran_us),
                waited.saturating_sub(self.pipes.waited_us),
                wall,
            )
        };
        let frames_per_write = if self.pipes.writes > 0 {
            self.pipes.frames as f64 / self.pipes.writes as f64
        } else {
            // No local traffic: the requests in flight per master stand
            // in for the batch they would make.
            let inflight: usize = self
                .backends
                .iter()
                .filter(|(_, b)| matches!(b.role, Role::Shared(_)))
                .map(|(_, b)| b.in_flight())
                .sum();
            inflight as f64 / self.place.map().shards.len().max(1) as f64
        };
        let inbox = &self.shared.workers[self.id].pipe;
        inbox.publish(Sample {
            busy,
            ran: ran_share,
            waited: waited_share,
            frames_per_write,
        });
        inbox.count(
            self.pipes.frames,
            self.pipes.writes,
            self.pipes.sessions,
            std::mem::take(&mut self.pipes.served),
        );
        self.pipes.ran_us = ran;
        self.pipes.waited_us = waited;
        self.pipes.at_us = cx.now_us;
        self.pipes.frames = 0;
        self.pipes.writes = 0;
        if self.pipes.mode != Sharding::Auto {
            return;
        }
        let pipes = &self.shared.pipes;
        if self.id == 0 {
            let exp = self.pipes.experiment.get_or_insert_with(Default::default);
            let commands: u64 = self
                .shared
                .workers
                .iter()
                .map(|w| w.commands.load(Ordering::Relaxed))
                .sum();
            let rate = commands.saturating_sub(self.pipes.commands) as f64 * 1e6 / wall as f64;
            self.pipes.commands = commands;
            let now_ms = cx.now_us / 1000;
            let force = pipes.force.load(Ordering::Relaxed);
            let changed = if force != 0 {
                if force != self.pipes.forced {
                    exp.force(force == 1, now_ms);
                }
                Some(force == 1)
            } else {
                let samples: Vec<Sample> = self
                    .shared
                    .workers
                    .iter()
                    .map(|w| w.pipe.sample())
                    .collect();
                let scale = u64::from(pipes.scale.load(Ordering::Relaxed));
                match pipes.busy_permille.load(Ordering::Relaxed) {
                    0 => exp.step(now_ms, rate, &samples, scale),
                    b => exp.step_with(now_ms, rate, &samples, scale, f64::from(b) / 1000.0),
                }
            };
            self.pipes.forced = force;
            if let Some(v) = changed {
                pipes.verdict.store(v, Ordering::Relaxed);
            }
            if let Ok(mut st) = pipes.status.lock() {
                if st.0 != exp.state_name() || st.1 != exp.reason {
                    *st = (exp.state_name(), exp.reason.clone());
                }
            }
        }
        self.pipes.verdict = pipes.verdict.load(Ordering::Relaxed);
    }

    /// The worker owning the pipe of `pool`'s node.
    #[inline]
    pub(super) fn pipe_owner(&mut self, pool: usize) -> usize {
        let p = &mut self.place.conns.sets[pool];
        let owner = match p.owner {
            Some(o) => o,
            None => *p.owner.insert(self.shared.pipes.owner(p.key.addr)),
        };
        usize::from(owner)
    }

    /// The shared pipe of `pool` for a session on the pipes: the
    /// connection itself when this worker owns it, else the link to it.
    #[inline]
    pub(super) fn pipe_for(
        &mut self,
        cx: &mut Context<'_, Timer>,
        pool: usize,
    ) -> Result<Key, Bytes> {
        let owner = self.pipe_owner(pool);
        if owner == self.id {
            return self.backend_for(cx, pool, 0);
        }
        let k = self.place.conns.sets[pool].link;
        if self.backends.contains(k) {
            return Ok(k);
        }
        let SetKey {
            addr,
            proto,
            readonly,
            pool: server_pool,
            db,
        } = self.place.conns.sets[pool].key;
        let now = cx.now;
        let link = crate::backend::Link {
            owner: owner as u16,
            readonly,
        };
        let key = self
            .backends
            .insert_with(|k| Backend::new_link(k, addr, Role::Shared(pool), proto, link, now));
        if let Some(b) = self.backends.get_mut(key) {
            b.server_pool = usize::from(server_pool);
            b.db = db;
        }
        self.place.conns.sets[pool].link = key;
        log::debug!(target: "mithril::worker", "worker {}: linked to worker {owner}'s pipe to {addr}", self.id);
        Ok(key)
    }

    /// Whether a request of `session` for `pool` goes to another worker's
    /// pipe (it then fills no cache here: that pipe's tracking is its
    /// owner's).
    pub(super) fn goes_remote(&mut self, session: Key, pool: usize) -> bool {
        self.sessions.get(session).is_some_and(Session::on_pipe) && self.pipe_owner(pool) != self.id
    }

    /// A link's unsent requests, on their way to its owner (at the flush).
    pub(super) fn pipe_take(&mut self, bkey: Key) {
        let Some(b) = self.backends.get_mut(bkey) else {
            return;
        };
        let Some(link) = b.link else {
            return;
        };
        let pool = SetKey {
            addr: b.addr,
            proto: b.proto,
            readonly: link.readonly,
            pool: b.server_pool as u16,
            db: b.db,
        };
        let owner = link.owner;
        let from = self.id as u16;
        let out = self.pipes.out(usize::from(owner));
        b.take_unsent(|f| {
            out.reqs.push(PipeReq {
                from,
                link: bkey,
                pool,
                req: f.req.clone(),
                expect: f.expect,
            })
        });
    }

    /// Hand this turn's batches to their workers (end of the turn).
    #[inline]
    pub(super) fn pipe_send(&mut self) {
        self.pipes.invalidations = 0;
        if !self.pipes.out_dirty.is_empty() {
            self.pipe_send_batches();
        }
    }

    fn pipe_send_batches(&mut self) {
        while let Some(to) = self.pipes.out_dirty.pop() {
            let q = &mut self.pipes.out[to];
            if self.shared.workers[to]
                .pipe
                .send(&mut q.reqs, &mut q.replies)
            {
                continue;
            }
            // That worker has stopped: its requests are answered here,
            // after whatever it answered before it stopped.
            let mut lost: Vec<PipeReply> = q
                .reqs
                .drain(..)
                .map(|r| PipeReply::Lost(r.link, Bytes::from_static(ERR_STOPPED)))
                .collect();
            q.replies.clear();
            let _ = self.shared.workers[self.id]
                .pipe
                .send(&mut Vec::new(), &mut lost);
        }
    }

    /// Take this worker's inbox: queue other workers' requests on the
    /// pipes, feed the replies to the links (every turn).
    pub(super) fn pipe_receive(&mut self, cx: &mut Context<'_, Timer>) {
        if !self.shared.workers[self.id].pipe.pending() {
            return;
        }
        let mut q = std::mem::take(&mut self.pipes.inbox);
        self.shared.workers[self.id].pipe.take(&mut q);
        for r in q.reqs.drain(..) {
            self.pipe_enqueue(cx, r);
        }
        // Consecutive frames for one link are fed together, then paired.
        let mut fed = Key::NONE;
        for r in q.replies.drain(..) {
            match r {
                PipeReply::Frame(link, frame) => {
                    if link != fed && fed != Key::NONE {
                        self.backend_read(cx, fed);
                    }
                    fed = Key::NONE;
                    if let Some(b) = self.backends.get_mut(link) {
                        if b.link.is_some() {
                            b.feed(&frame);
                            fed = link;
                        }
                    }
                }
                PipeReply::Monitor(lines) => self.monitor_received(lines),
                PipeReply::Invalidate(key) => match key {
                    Some(k) => {
                        self.cache.cache.invalidate(&k);
                        self.cache.cache.stats.invalidations += 1;
                    }
                    None => self.cache.cache.flush(),
                },
                PipeReply::Lost(link, err) => {
                    if fed != Key::NONE {
                        self.backend_read(cx, fed);
                        fed = Key::NONE;
                    }
                    let head = self
                        .backends
                        .get_mut(link)
                        .filter(|b| b.link.is_some())
                        .and_then(Backend::take_head);
                    if let Some(f) = head {
                        self.complete_error(cx, f, err);
                    }
                    self.drop_if_retired(cx, link);
                }
            }
        }
        if fed != Key::NONE {
            self.backend_read(cx, fed);
        }
        self.pipes.inbox = q;
    }

    /// Another worker's request, queued on this worker's pipe to its node.
    fn pipe_enqueue(&mut self, cx: &mut Context<'_, Timer>, r: PipeReq) {
        let pool = self.place.set_for(r.pool);
        match self.backend_for(cx, pool, 0) {
            Ok(bkey) => {
                let Some(b) = self.backends.get_mut(bkey) else {
                    return;
                };
                b.enqueue(InFlight {
                    expect: r.expect,
                    ..InFlight::new(Key::NONE, r.link.to_u64(), r.req, Purpose::Remote(r.from))
                });
                self.pipes.remote += 1;
                self.pipes.served += 1;
                self.mark_backend_dirty(bkey);
            }
            Err(err) => {
                self.pipes
                    .out(usize::from(r.from))
                    .replies
                    .push(PipeReply::Lost(r.link, err));
            }
        }
    }

    /// A reply for a remote request (its last unless `more`), sent back.
    pub(super) fn pipe_answer(&mut self, from: u16, link: u64, frame: Bytes, more: bool) {
        if !more {
            self.pipes.remote = self.pipes.remote.saturating_sub(1);
        }
        self.pipes
            .out(usize::from(from))
            .replies
            .push(PipeReply::Frame(Key::from_u64(link), frame));
    }

    /// A remote request the pipe could not answer: `err` answers it.
    pub(super) fn pipe_lost(&mut self, from: u16, link: u64, err: Bytes) {
        self.pipes.remote = self.pipes.remote.saturating_sub(1);
        self.pipes
            .out(usize::from(from))
            .replies
            .push(PipeReply::Lost(Key::from_u64(link), err));
    }

    /// The tracker id a read sent to `pool`'s pipe on another worker
    /// opts in for: that owner's tracker for the node (0: none known).
    pub(super) fn owner_tracker(&mut self, pool: usize) -> u64 {
        let p = &self.shared.pipes;
        let gen = p.trackers_gen.load(Ordering::Acquire);
        if gen != self.pipes.trackers_gen {
            if let Ok(m) = p.trackers.lock() {
                self.pipes.trackers = m.clone();
                self.pipes.trackers_gen = gen;
            }
        }
        let addr = self.place.conns.sets[pool].key.addr;
        self.pipes.trackers.get(&addr).copied().unwrap_or(0)
    }

    /// A tracker of this worker's learnt or lost its id: published when
    /// this worker owns the node's pipe (other workers' reads through it
    /// opt in for it).
    pub(super) fn pipe_tracker(&mut self, addr: SocketAddr, id: u64) {
        if !self.pipes.on || !self.owns_pipe(addr) {
            return;
        }
        self.shared.pipes.publish_tracker(addr, id);
        if id == 0 {
            // What other workers filled through this pipe is no longer
            // watched.
            self.pipe_invalidate(None);
        }
    }

    /// An invalidation heard by the tracker of a pipe this worker owns,
    /// passed to every other worker (any of them may have filled the key
    /// through the pipe). `None`: flush everything.
    pub(super) fn pipe_invalidate(&mut self, key: Option<&[u8]>) {
        if self.pipes.invalidations > INVALIDATIONS_MOST {
            return; // this turn's flush already went
        }
        self.pipes.invalidations += 1;
        let key = if self.pipes.invalidations > INVALIDATIONS_MOST {
            None
        } else {
            key.map(Bytes::copy_from_slice)
        };
        for w in 0..self.shared.workers.len() {
            if w != self.id {
                self.pipes
                    .out(w)
                    .replies
                    .push(PipeReply::Invalidate(key.clone()));
            }
        }
    }

    /// Whether this worker owns the pipe to `addr` (asked once per node).
    pub(super) fn owns_pipe(&mut self, addr: SocketAddr) -> bool {
        let shared = &self.shared;
        let owner = *self
            .pipes
            .owners
            .entry(addr)
            .or_insert_with(|| shared.pipes.owner(addr));
        usize::from(owner) == self.id
    }

    /// Whether the inbox holds something (before the poll).
    #[inline]
    pub(super) fn pipe_pending(&self) -> bool {
        self.shared.workers[self.id].pipe.pending()
    }

    /// Nothing of another worker's waits on this worker's pipes: it may
    /// stop.
    /// While draining, another worker's sessions may still queue requests
    /// on a link to one of this worker's pipes (sent at the end of their
    /// turn), so it also waits until no other worker has a session left.
    pub(super) fn pipes_idle(&self) -> bool {
        !self.pipes.on
            || (self.pipes.remote == 0
                && !self.pipe_pending()
                && self
                    .shared
                    .workers
                    .iter()
                    .enumerate()
                    .all(|(w, slot)| w == self.id || slot.sessions.load(Ordering::Acquire) == 0))
    }

    /// The worker stops: requests still sent to it are answered with an
    /// error, and so are the remote ones its pipes still carry.
    pub(super) fn pipes_close(&mut self) {
        if !self.pipes.on {
            return;
        }
        let mut q = PipeQueue::default();
        self.shared.workers[self.id].pipe.close(&mut q);
        for r in q.reqs {
            self.pipes
                .out(usize::from(r.from))
                .replies
                .push(PipeReply::Lost(r.link, Bytes::from_static(ERR_STOPPED)));
        }
        let keys = self.backends.keys();
        for k in keys {
            let Some(b) = self.backends.get_mut(k) else {
                continue;
            };
            if b.in_flight() == 0 {
                continue;
            }
            let remote: Vec<(u16, u64)> = b
                .drain()
                .filter_map(|(f, _)| match f.purpose {
                    Purpose::Remote(from) => Some((from, f.seq)),
                    _ => None,
                })
                .collect();
            for (from, link) in remote {
                self.pipe_lost(from, link, Bytes::from_static(ERR_STOPPED));
            }
        }
        self.pipe_send();
    }
}

/// Session hook: it leaves the shared pipes' counts.
#[inline]
pub(super) fn session_closed(w: &mut Worker, _cx: &mut Context<'_, Timer>, s: &mut Session) {
    if w.pipes.on {
        w.pipe_session_closed(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 32 item 8: under `GET -P 1 -c 50` on two cores shared with
    /// the client and the nodes, the workers ran about 0.3 of the time and
    /// were never counted busy, so `auto` never decided. The time they
    /// waited runnable for a core counts now.
    #[test]
    fn a_worker_that_waits_for_a_core_counts_as_busy() {
        let (busy, ran, waited) = shares(31_000, 60_000, 100_000);
        assert!(busy >= 0.85, "busy {busy}");
        assert!((ran - 0.31).abs() < 1e-9 && (waited - 0.60).abs() < 1e-9);
        // Idle (sleeping in the poll) is neither.
        assert_eq!(shares(0, 0, 100_000).0, 0.0);
        // Never over the whole interval.
        assert_eq!(shares(80_000, 50_000, 100_000).0, 1.0);
    }

    #[test]
    fn the_want_clock_counts_the_time_this_thread_ran() {
        let mut c = WantClock::new();
        let (ran0, waited0) = c.read();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (ran1, waited1) = c.read();
        // Ran at least part of the spin; never went back.
        assert!(ran1 > ran0, "{ran0} -> {ran1}");
        assert!(waited1 >= waited0);
        // Ran plus waited covers the spin (the thread was runnable all
        // along): within the clocks' rounding.
        assert!(
            (ran1 - ran0) + (waited1 - waited0) >= 25_000,
            "ran {} waited {}",
            ran1 - ran0,
            waited1 - waited0
        );
    }
}
