//! Carrying out what the router decided for a request: build the
//! session's [`View`], ask `router::decide`, and apply the [`Decision`]
//! (one arm per variant): send it to a node, several nodes, a lease, the
//! subscriber connection, the open transaction, or answer it here.

use super::purpose::{InFlight, Purpose, Release};
use super::{Timer, Worker};
use crate::command::{flags, known, Args, Command, LocalCmd, Route};
use crate::local::{self as local, Outcome};
use crate::placement::Unit;
use crate::router::{self, Decision, Refusal, TxnOp, View};
use crate::session::Session;
use bytes::Bytes;
use reactor::{Context, Key};
use std::ops::Range;

/// Remember which master a write goes to, for the session's next WAIT
/// (`session::Written`): its slot's for one slot, every master for
/// anything wider (a fan-out, EXEC, a keyless call). A refused or queued
/// command writes nothing yet (a queued one counts at its EXEC).
#[inline]
fn note_write(s: &mut crate::session::Session, place: &crate::placement::Placement, d: &Decision) {
    let shard = match *d {
        Decision::Unit { unit, .. }
        | Decision::Lease { unit }
        | Decision::Eval {
            unit: Some(unit), ..
        } => place.shard_of(unit),
        Decision::Refuse(_)
        | Decision::Queue { .. }
        | Decision::Txn(TxnOp::Multi | TxnOp::Discard) => return,
        _ => None,
    };
    s.note_write(place.epoch(), shard);
}

impl Worker {
    pub(super) fn dispatch(&mut self, cx: &mut Context<'_, Timer>, key: Key, frame: Bytes) {
        // Borrow the argument ranges out of the worker for the duration
        // (moved back after, so the allocation is reused).
        let ranges = std::mem::take(&mut self.args);
        // Test-only commands (debug builds started with MITHRIL_TEST_HOOKS=1).
        #[cfg(debug_assertions)]
        if self.overload.test_hooks && self.test_hook(cx, key, &frame, &ranges) {
            self.args = ranges;
            return;
        }
        let first = self.sessions.get(key).map(|s| s.ring.next_seq());
        let cmd = self.dispatch_with(cx, key, frame, &ranges);
        if let (Some(first), Some(s)) = (first, self.sessions.get_mut(key)) {
            // CLIENT REPLY OFF / SKIP (a SUBSCRIBE's confirmations are
            // pushes: they always go out).
            let confirms = cmd.is_some_and(|c| c.route == Route::Pubsub);
            s.after_command(first, confirms);
        }
        self.args = ranges;
    }

    /// Decide what the request does (`router::decide`, pure), then carry
    /// the decision out: one arm per [`Decision`] variant. Returns the
    /// command, when it is one of the table's. Its one caller is the
    /// dispatch of every request: inlined there.
    #[inline(always)]
    fn dispatch_with(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        ranges: &[Range<usize>],
    ) -> Option<&'static Command> {
        let args = Args {
            buf: &frame,
            ranges,
        };
        let over_memory = self.over_memory();
        // router::decide in its two halves, so the command is stamped
        // before anything is done for it.
        let (cmd, decision) = match router::resolve(&args) {
            Ok(cmd) => {
                let s = self.sessions.get_mut(key)?;
                // observe: the reply slot this request takes carries its
                // start time and command (see crate::stats); CLIENT INFO
                // shows it.
                s.ring.stamp = self.obs.stats.stamp(cmd);
                s.ran(cmd.name);
                let acl = &self.shared.admin.acl;
                let generation = acl.generation();
                if s.acl_gen() != generation && super::revoke::refresh_rights(s, acl, false) {
                    // Its user was deleted, or it lost the right to what
                    // it holds (a subscription, MONITOR): Redis closes
                    // the connection.
                    s.close_after_flush();
                }
                // A plain session's keyed command: the router's hot path,
                // without building the whole view.
                let plain = s.authenticated()
                    && !s.restricted()
                    && !over_memory
                    && s.txn.is_none()
                    && s.sub.is_none()
                    && s.pin.is_none()
                    && !s.is_monitor();
                let loc = self.place.locator(s.pool());
                let fast = if plain {
                    router::decide_plain(cmd, &args, &loc)
                } else {
                    None
                };
                let decision = match fast {
                    Some(d) => d,
                    None => decide_full(
                        &self.shared,
                        &self.backends,
                        self.id,
                        cx.now,
                        s,
                        cmd,
                        &args,
                        over_memory,
                        &loc,
                    ),
                };
                if cmd.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0
                    || matches!(decision, Decision::Txn(TxnOp::Exec))
                {
                    note_write(s, &self.place, &decision);
                }
                (Some(cmd), decision)
            }
            Err(refused) => (None, refused),
        };
        if let Some(cmd) = cmd {
            if self.shared.monitors.on() {
                self.monitor_dispatch(key, cmd, &args, &decision);
            }
            if crate::command::known::script_call(cmd).is_some() {
                self.arm_script_watch(cx);
            }
        }
        if self.cache_hooked() {
            if let Some(cmd) = cmd {
                self.dispatch_cached(cx, key, cmd, decision, frame, ranges);
                return Some(cmd);
            }
        }
        match decision {
            Decision::Unit { unit, read } => self.forward_unit(cx, key, unit, read, frame),
            Decision::Refuse(r) => self.refuse(key, cmd, *r),
            Decision::AnyMaster => self.forward_keyless(cx, key, cmd, ranges, frame),
            Decision::PubsubHome => self.forward_pubsub_home(cx, key, frame),
            Decision::Lease { unit } => self.blocking(cx, key, unit, frame),
            d => {
                let cmd = cmd?; // every other decision names a command
                                // These look at the arguments while handing the frame on:
                                // through a second handle.
                let held = frame.clone();
                let args = Args { buf: &held, ranges };
                self.apply_command(cx, key, cmd, d, frame, &args)
            }
        }
        cmd
    }

    /// Dispatch with the reply cache on, or client tracking on some
    /// session: GET looks the cache up; a write forgets and holds its keys
    /// before it is sent (and tells the tracking clients that read them),
    /// and gives the holds back at once if it was answered without a node;
    /// a tracking client's read is remembered and sent with the opt-in
    /// (`tracking.rs`).
    fn dispatch_cached(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        decision: Decision,
        frame: Bytes,
        ranges: &[Range<usize>],
    ) {
        let Some((seq, tracking)) = self
            .sessions
            .get(key)
            .map(|s| (s.ring.next_seq(), s.tracking().is_some()))
        else {
            return;
        };
        if tracking {
            return self.dispatch_tracking(cx, key, cmd, decision, frame, ranges, seq);
        }
        self.dispatch_cached_as(cx, key, cmd, decision, frame, ranges, seq);
    }

    /// A tracking session's command: its read remembered before, and
    /// what follows it done after (`tracking.rs`).
    #[allow(clippy::too_many_arguments)]
    fn dispatch_tracking(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        decision: Decision,
        frame: Bytes,
        ranges: &[Range<usize>],
        seq: u64,
    ) {
        let held = frame.clone();
        let args = Args { buf: &held, ranges };
        let read = self.tracking_read(key, cmd, &decision, &args);
        let exec = self.tracking_exec(key, &decision);
        self.cache.tracked_read = exec || matches!(read, super::tracking::Read::OptIn);
        match decision {
            // A tracking client's script (a write too): with the opt-in, to
            // the slot's master as it would go otherwise.
            Decision::Unit { unit, .. }
            | Decision::Eval {
                unit: Some(unit), ..
            } if self.cache.tracked_read && crate::cache::tracking::is_script(cmd.name) => {
                let holds = self.cache_write(key, cmd, &args, (false, Some(unit)));
                if cmd.route == crate::command::Route::Eval {
                    self.note_eval(&args);
                }
                self.tracked_unit(cx, key, unit, frame);
                if holds {
                    self.cache_settle(key, seq);
                }
            }
            Decision::Unit { unit, .. }
                if self.cache.tracked_read && !(self.cache_on() && known::is_cached_read(cmd)) =>
            {
                self.tracked_unit(cx, key, unit, frame)
            }
            Decision::Unit { unit, .. } if self.cache.tracked_read => {
                self.cached_read(cx, key, unit, false, frame, ranges)
            }
            d => self.dispatch_cached_as(cx, key, cmd, d, frame, ranges, seq),
        }
        self.cache.tracked_read = false;
        self.tracking_after(key, cmd, &args, read, seq);
    }

    #[allow(clippy::too_many_arguments)]
    fn dispatch_cached_as(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        decision: Decision,
        frame: Bytes,
        ranges: &[Range<usize>],
        seq: u64,
    ) {
        if let Decision::Unit { unit, read } = decision {
            if known::is_cached_read(cmd) && self.cache_on() {
                return self.cached_read(cx, key, unit, read, frame, ranges);
            }
        }
        // The rest look at the arguments while handing the frame on.
        let held = frame.clone();
        let args = &Args { buf: &held, ranges };
        let unit = match decision {
            Decision::Unit { unit, .. } => Some(unit),
            Decision::Eval { unit, .. } => unit,
            _ => None,
        };
        let holds = match &decision {
            Decision::Unit { .. }
            | Decision::Fanout(_)
            | Decision::Eval { .. }
            | Decision::Lease { .. }
            | Decision::Pinned
            | Decision::Wide(_) => self.cache_write(key, cmd, args, (false, unit)),
            Decision::Queue { .. } => {
                self.cache_write(key, cmd, args, (true, unit));
                false
            }
            Decision::Txn(TxnOp::Exec) => {
                self.cache_txn_end(key, Some(seq));
                self.tracking_txn_end(key, seq);
                let flushes = self
                    .sessions
                    .get(key)
                    .and_then(|s| s.txn.as_ref())
                    .is_some_and(|t| t.flushes && !t.failed);
                if flushes {
                    // FLUSHALL/FLUSHDB queued: what was filled since goes
                    // too, and tracking clients hear of it after EXEC.
                    self.cache.cache.flush();
                    self.tracking_flush(Some((key, seq)));
                }
                true
            }
            Decision::Txn(TxnOp::Discard) | Decision::Reset => {
                self.cache_txn_end(key, None);
                self.tracking_txn_end(key, seq);
                false
            }
            _ => false,
        };
        self.apply_command(cx, key, cmd, decision, frame, args);
        if holds {
            self.cache_settle(key, seq);
        }
    }

    /// The decisions that need the command and its arguments.
    fn apply_command(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        decision: Decision,
        frame: Bytes,
        args: &Args,
    ) {
        match decision {
            Decision::Fanout(kind) => self.fanout(cx, key, cmd, kind, frame, args),
            Decision::Wide(wide) => self.wide(cx, key, wide, frame, args),
            Decision::Subscribe => self.subscribe(cx, key, cmd, frame, args),
            Decision::Queue { unit } => {
                if cmd.route == Route::Eval {
                    self.note_eval(args);
                }
                self.txn_queue(key, cmd, unit, frame, args)
            }
            Decision::Eval { unit, read } => self.eval(cx, key, unit, read, frame, args),
            Decision::Watch { unit } => self.watch(cx, key, unit, frame),
            Decision::Unwatch => {
                self.unwatch(key);
                self.slow_local(key, cmd, args); // observe
            }
            Decision::Pinned => {
                if cmd.route == Route::Eval {
                    self.note_eval(args);
                }
                self.pinned(key, cmd, frame, args)
            }
            Decision::Gather(g) => self.gather(cx, key, g, cmd, args),
            // observe: a command answered here enters the slow log after it
            // ran, as on a node (CONFIG SET slowlog-log-slower-than 0 logs
            // itself).
            Decision::Txn(op) => {
                match op {
                    TxnOp::Multi => self.txn_multi(key),
                    TxnOp::Exec => self.txn_exec(cx, key),
                    TxnOp::Discard => self.txn_discard(key),
                }
                self.slow_local(key, cmd, args); // observe
            }
            Decision::SubscribedPing => {
                let r = super::pubsub::subscribed_ping(args.get(1));
                self.reply(key, r);
                self.slow_local(key, cmd, args); // observe
            }
            Decision::Reset => {
                self.reset_state(cx, key);
                if self.release_pin(key, Release::Reset) {
                    // +RESET comes with the pin's release (watch.rs): the
                    // handler only resets the session here.
                    if let Some(s) = self.sessions.get_mut(key) {
                        let _ = local::execute(&self.shared, s, LocalCmd::Reset, cmd, args);
                    }
                } else {
                    self.local(key, LocalCmd::Reset, cmd, args);
                }
                self.slow_local(key, cmd, args); // observe
            }
            Decision::Local(LocalCmd::Monitor) => {
                self.monitor_start(key);
                self.slow_local(key, cmd, args); // observe
            }
            Decision::Local(LocalCmd::ClientTracking) => {
                self.client_tracking(cx, key, args);
                self.slow_local(key, cmd, args); // observe
            }
            Decision::Local(LocalCmd::Ping) if self.ping_while_busy(cx, key, &frame) => {}
            // SYNC / PSYNC: the session becomes a replication feed
            // (replfeed/).
            Decision::Local(LocalCmd::Sync) => self.feed_start(cx, key, cmd, args),
            Decision::Local(which) => {
                if matches!(which, LocalCmd::ClientId | LocalCmd::Hello) {
                    self.tracking_named(key);
                }
                self.local(key, which, cmd, args);
                if which == LocalCmd::Hello {
                    self.pin_protocol(key);
                }
                self.slow_local(key, cmd, args); // observe
            }
            Decision::Refuse(r) => self.refuse(key, Some(cmd), *r),
            Decision::Unit { unit, read } => self.forward_unit(cx, key, unit, read, frame),
            Decision::AnyMaster => self.forward_keyless(cx, key, Some(cmd), args.ranges, frame),
            Decision::PubsubHome => self.forward_pubsub_home(cx, key, frame),
            Decision::Lease { unit } => self.blocking(cx, key, unit, frame),
        }
    }

    /// An error answer before the request ran. An EXEC refused so (NOAUTH,
    /// OOM, NOPERM, BUSY) ends its transaction, as in Redis: EXECABORT with
    /// the reason (a watching session's pin is left, its answer Redis's
    /// plain EXECABORT).
    fn refuse(&mut self, key: Key, cmd: Option<&Command>, r: Refusal) {
        if let Some(known) = r.rejected {
            // observe: refused before running; the error is no call.
            self.observe_rejected(key, known);
        }
        let exec = cmd.is_some_and(|c| c.route == Route::Local(LocalCmd::Exec));
        if exec
            && self
                .sessions
                .get_mut(key)
                .and_then(|s| s.txn.take())
                .is_some()
        {
            if self.release_pin(key, Release::ExecAbort) {
                return;
            }
            let why = r.reply.strip_prefix(b"-").unwrap_or(&r.reply);
            let mut reply = b"-EXECABORT Transaction discarded because of: ".to_vec();
            reply.extend_from_slice(why);
            return self.reply(key, Bytes::from(reply));
        }
        if r.dooms_txn {
            self.txn_flag(key);
        }
        self.reply(key, r.reply)
    }

    /// Send a single-unit request to the node serving `unit` (a replica
    /// for reads when read splitting applies). The hot path's last step.
    #[inline]
    pub(super) fn forward_unit(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        unit: Unit,
        read: bool,
        frame: Bytes,
    ) {
        // No topology check here: the router refused the request already
        // when none is known (every caller acts on a decision).
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        let (proto, sticky) = (s.proto, s.sticky());
        match self.place.reader(unit, read, proto, sticky, cx.now) {
            Some(pool) => self.send_new(cx, pool, key, |seq| {
                InFlight::new(key, seq, frame, Purpose::Client)
            }),
            None => self.park_or_refuse(cx, key, unit, read, frame),
        }
    }

    /// Keyless commands that any master can answer: rotate over masters.
    pub(super) fn forward_any(&mut self, cx: &mut Context<'_, Timer>, key: Key, frame: Bytes) {
        match self.place.any_master(self.pool_of(key)) {
            Some(shard) => self.forward_shard(cx, key, shard, frame),
            None => self.reply_static(key, router::ERR_NO_TOPOLOGY),
        }
    }

    pub(super) fn forward_shard(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        shard: usize,
        frame: Bytes,
    ) {
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        match self.place.shard_master(shard, proto) {
            Some(pool) => self.send_new(cx, pool, key, |seq| {
                InFlight::new(key, seq, frame, Purpose::Client)
            }),
            None => self.reply_static(key, router::ERR_NO_TOPOLOGY),
        }
    }

    /// A command `crate::local` answers from the session and shared state.
    fn local(&mut self, key: Key, which: LocalCmd, cmd: &'static Command, args: &Args) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let outcome = local::execute(&self.shared, s, which, cmd, args);
        if matches!(which, LocalCmd::Auth | LocalCmd::Hello)
            && matches!(&outcome, Outcome::Reply(r) | Outcome::ReplyAndClose(r) if r.starts_with(b"-WRONGPASS"))
        {
            log_failed_login(&self.shared.admin.acl, s, args, self.id);
        }
        match outcome {
            Outcome::Reply(r) => self.reply(key, r),
            Outcome::ReplyAndClose(r) => {
                self.reply(key, r);
                if let Some(s) = self.sessions.get_mut(key) {
                    s.close_after_flush();
                }
            }
        }
    }

    /// RESET: leave any transaction and every subscription (the WATCH is
    /// left by the caller, the admin handler resets the rest).
    fn reset_state(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        self.tracking_off(key);
        self.monitor_stop(key);
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        s.txn = None;
        // Confirmations that will never come now: answer their slots.
        self.drop_subscriptions(
            cx,
            key,
            Some(b"-ERR mithril: subscription cancelled by RESET\r\n"),
        );
    }
}

/// Every outcome of `router::decide` for a session that is not plain
/// (or a command off the hot path): the session's whole view built,
/// and a NOPERM logged in the ACL LOG.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn decide_full(
    shared: &crate::shared::Shared,
    backends: &reactor::GenSlab<super::purpose::Backend>,
    worker: usize,
    now: std::time::Instant,
    s: &Session,
    cmd: &'static Command,
    args: &Args,
    over_memory: bool,
    loc: &crate::placement::PoolLocator<'_>,
) -> Decision {
    let acl = &shared.admin.acl;
    let default_user = (s.restricted() && s.user().is_none()).then(|| acl.default_user());
    // A pin whose connection was lost routes nothing more
    // (its EXEC answers nil: watch.rs).
    let pin = match s.pin {
        Some(p) if backends.contains(p.conn) => Some(p.slot),
        _ => None,
    };
    let view = View {
        proto: s.proto,
        authenticated: s.authenticated(),
        in_txn: s.txn.is_some(),
        txn_denyoom: s.txn.as_ref().is_some_and(|t| t.denyoom),
        subscribed: s.sub.as_ref().map_or(0, |x| x.count()),
        over_memory,
        scripts_busy: s.txn.is_some() && shared.scripts.scripts_stalled(),
        script_writes: over_memory
            && known::script_may_write(cmd)
            && known::script_call(cmd) != Some(known::ScriptCall::Eval)
            && script_writes(shared, cmd, args),
        acl: if s.restricted() {
            s.user()
                .map(|u| &**u)
                .or(default_user.as_deref())
                .map(|u| (acl, u))
        } else {
            None
        },
        pin,
        txn_unit: s.txn.as_ref().and_then(|t| t.slot),
        monitor: s.is_monitor(),
    };
    let decision = router::decide_command(&view, cmd, args, loc);
    if s.restricted() && matches!(&decision, Decision::Refuse(r) if r.reply.starts_with(b"-NOPERM"))
    {
        log_denial(acl, s, cmd, args, worker, now);
    }
    decision
}

/// ACL LOG: a restricted user's command refused with NOPERM.
#[cold]
#[inline(never)]
fn log_denial(
    acl: &crate::acl::Acl,
    s: &Session,
    cmd: &'static Command,
    args: &Args,
    worker: usize,
    now: std::time::Instant,
) {
    let user = s.user().cloned().unwrap_or_else(|| acl.default_user());
    let Some((reason, object)) = crate::acl::explain(&user, cmd, args) else {
        return;
    };
    acl.log(crate::acl::LogEntry {
        count: 1,
        reason,
        context: if s.txn.is_some() { "multi" } else { "toplevel" },
        object,
        username: user.name.clone(),
        at: now,
        client_info: local::client::client_info_line(s, worker, now),
    });
}

/// ACL LOG: an AUTH (or HELLO ... AUTH) that named a wrong user or
/// password; the object is the command's name as sent, as in Redis.
#[cold]
#[inline(never)]
fn log_failed_login(acl: &crate::acl::Acl, s: &Session, args: &Args, worker: usize) {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    let name = arg(0);
    let user: &[u8] = if name.eq_ignore_ascii_case(b"auth") {
        if args.len() >= 3 {
            arg(1)
        } else {
            b"default"
        }
    } else {
        // HELLO protover AUTH user pass [...]
        (2..args.len())
            .find(|&i| arg(i).eq_ignore_ascii_case(b"auth"))
            .map_or(&b"default"[..], |i| arg(i + 1))
    };
    let now = std::time::Instant::now();
    acl.log(crate::acl::LogEntry {
        count: 1,
        reason: "auth",
        context: if s.txn.is_some() { "multi" } else { "toplevel" },
        object: name.to_vec(),
        username: String::from_utf8_lossy(user).into_owned(),
        at: now,
        client_info: local::client::client_info_line(s, worker, now),
    });
}

/// Over `maxmemory`: whether the EVALSHA or FCALL in `args` runs a
/// script the registry knows and that may write (an EVALSHA's body as
/// `script::over_memory` reads it; a function its library registers
/// without `no-writes` or `allow-oom`), as a node would refuse it.
#[cold]
#[inline(never)]
fn script_writes(shared: &crate::shared::Shared, cmd: &Command, args: &Args) -> bool {
    let Some(name) = args.get(1) else {
        return false;
    };
    let scripts = &shared.scripts;
    if known::script_call(cmd) == Some(known::ScriptCall::Sha) {
        return crate::script::sha1::parse_hex(name)
            .and_then(|sha| scripts.script(&sha))
            .is_some_and(|body| {
                crate::script::over_memory(&body) == crate::script::OverMemory::Refused
            });
    }
    scripts
        .library_of(name)
        .and_then(|(_, code)| crate::script::runs_over_memory(&code, name))
        == Some(false)
}
