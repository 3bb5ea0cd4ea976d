//! What a request means: resolve the command, apply the session's state
//! (transaction, subscribed context), and send it where its route says:
//! a node, several nodes, a lease, the subscriber connection, or the proxy
//! itself.

use super::{Outgoing, Timer, Worker};
use crate::admin::{self, Outcome};
use crate::command::{self, flags, Args, Command, Route};
use crate::config::ReadFrom;
use crate::resp::Proto;
use crate::router;
use crate::topology::key_slot;
use bytes::Bytes;
use reactor::{Context, Key};
use std::ops::Range;

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
        self.dispatch_with(cx, key, frame, &ranges);
        self.args = ranges;
    }

    fn dispatch_with(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        ranges: &[Range<usize>],
    ) {
        let args = Args {
            buf: &frame,
            ranges,
        };
        let cmd = match command::resolve(&args) {
            Ok(c) => c,
            Err(rejection) => {
                // observe: refused before running; the error is no call.
                let known = match rejection {
                    command::Rejection::WrongArity(c) => Some(c),
                    _ => None,
                };
                self.observe_rejected(key, known);
                let r = rejection.reply(&args);
                self.txn_flag(key);
                return self.reply(key, Bytes::from(r));
            }
        };
        // observe: the reply slot this request takes carries its start
        // time and command (see crate::stats).
        let stamp = self.obs.stats.stamp(cmd);
        // NOAUTH gate (requirepass); also records the command for CLIENT INFO.
        if !self.sessions.get_mut(key).is_some_and(|s| {
            s.ring.stamp = stamp;
            admin::admit(s, cmd)
        }) {
            self.observe_rejected(key, Some(cmd)); // observe
            return self.reply(key, Bytes::from_static(admin::ERR_NOAUTH));
        }
        // maxmemory: one compare unless a budget is set (overload.rs).
        if self.oom_refuses(key, cmd) {
            self.txn_flag(key);
            return self.reply_static(key, super::overload::ERR_OOM);
        }
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        // ACL (user lines): one bool test unless the user is restricted.
        if let Some(denied) = crate::acl::denied(&self.shared, s, cmd, &args) {
            self.txn_flag(key);
            return self.reply(key, denied);
        }
        let plain = s.txn.is_none() && s.sub.is_none();
        if plain && cmd.route == Route::Slot && !command::is_blocking_call(cmd, &args) {
            // The hot path: one key, one slot, one node.
            let slot = command::first_key(cmd, &args)
                .and_then(|i| args.get(i))
                .map(key_slot);
            let read = cmd.flags & flags::READONLY != 0;
            return match slot {
                Some(slot) => self.forward_slot(cx, key, slot, read, frame),
                None => self.forward_any(cx, key, frame),
            };
        }
        // Everything else may hand the frame on while still reading its
        // arguments: look at them through a second handle.
        let held = frame.clone();
        let args = Args { buf: &held, ranges };
        if s.proto == Proto::Resp2
            && s.sub.as_ref().is_some_and(|x| x.count() > 0)
            && !super::pubsub::allowed_when_subscribed(cmd)
        {
            let r = super::pubsub::not_allowed_reply(cmd);
            return self.reply(key, r);
        }
        if s.txn.is_some() && !super::txn::runs_immediately(cmd) {
            return self.txn_queue(key, cmd, frame, &args);
        }
        match cmd.route {
            Route::Slot => {
                if command::is_blocking_call(cmd, &args) {
                    return self.blocking(cx, key, cmd, frame, &args);
                }
                match command::first_key(cmd, &args).and_then(|i| args.get(i)) {
                    Some(k) => {
                        let slot = key_slot(k);
                        let read = cmd.flags & flags::READONLY != 0;
                        self.forward_slot(cx, key, slot, read, frame);
                    }
                    None => self.forward_any(cx, key, frame),
                }
            }
            Route::Fanout(kind) => self.fanout(cx, key, cmd, kind, frame, &args),
            Route::ClusterWide(wide) => self.wide(cx, key, wide, frame, &args),
            Route::AnyMaster => {
                if cmd.name == "publish" || cmd.name.starts_with("pubsub|") {
                    // Subscribers all live on the pub/sub home node: publish
                    // there (the cluster forwards to every node, and the
                    // count returned is mithril's subscribers) and ask it.
                    self.forward_pubsub_home(cx, key, frame)
                } else {
                    self.forward_any(cx, key, frame)
                }
            }
            Route::Pubsub => self.subscribe(cx, key, cmd, frame, &args),
            Route::Blocking => self.blocking(cx, key, cmd, frame, &args),
            Route::SlotArg => {
                let slot = args
                    .get(2)
                    .and_then(|s| std::str::from_utf8(s).ok())
                    .and_then(|s| s.parse::<u16>().ok())
                    .filter(|&s| s < 16384);
                match slot {
                    Some(slot) => self.forward_slot(cx, key, slot, false, frame),
                    None => self.reply_static(key, b"-ERR Invalid or out of range slot\r\n"),
                }
            }
            Route::Local => self.local(cx, key, cmd, frame, &args),
            Route::Unsupported => {
                let r = command::unknown_command_reply(&args);
                self.reply(key, Bytes::from(r))
            }
        }
    }

    /// Send a single-slot request to the node serving `slot` (a replica
    /// for reads when read splitting applies).
    pub(super) fn forward_slot(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        slot: u16,
        read: bool,
        frame: Bytes,
    ) {
        if self.topo.is_empty() {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        let (proto, sticky) = (s.proto, s.sticky);
        if read && self.read_from != ReadFrom::No {
            if let Some(pool) = self
                .pools
                .replica_for_slot(&self.topo, slot, proto, sticky, cx.now)
            {
                // `yes` spreads reads over the master and its replicas;
                // `prefer-replica` sends them all to replicas.
                let use_replica = match self.read_from {
                    ReadFrom::PreferReplica => true,
                    _ => sticky % 2 == 1,
                };
                if use_replica {
                    return self.send_to_pool(cx, pool, Outgoing::new(key, frame));
                }
            }
        }
        match self.pools.pool_for_slot(&self.topo, slot, proto) {
            Some(pool) => self.send_to_pool(cx, pool, Outgoing::new(key, frame)),
            None => self.reply_static(key, router::ERR_SLOT_UNSERVED),
        }
    }

    /// Keyless commands that any master can answer: rotate over masters.
    pub(super) fn forward_any(&mut self, cx: &mut Context<'_, Timer>, key: Key, frame: Bytes) {
        let n = self.topo.shards.len();
        if n == 0 {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        self.any_master = self.any_master.wrapping_add(1);
        let shard = self.any_master % n;
        self.forward_shard(cx, key, shard, frame);
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
        match self.pools.pool_for_shard(shard, proto) {
            Some(pool) => self.send_to_pool(cx, pool, Outgoing::new(key, frame)),
            None => self.reply_static(key, router::ERR_NO_TOPOLOGY),
        }
    }

    fn local(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        frame: Bytes,
        args: &Args,
    ) {
        // observe: INFO, CLIENT LIST/KILL, SLOWLOG, CONFIG RESETSTAT
        // (worker/observe.rs: they need every worker, or the masters).
        if self.observe_local(cx, key, cmd, args) {
            return;
        }
        self.slow_local(key, args); // observe: slowlog-log-slower-than 0
        match cmd.name {
            "multi" => return self.txn_multi(key),
            "exec" => return self.txn_exec(cx, key),
            "discard" => return self.txn_discard(key),
            "ping"
                if self.sessions.get(key).is_some_and(|s| {
                    s.proto == Proto::Resp2
                        && s.sub.as_ref().is_some_and(|x| x.count() > 0)
                        && args.len() <= 2
                }) =>
            {
                let r = super::pubsub::subscribed_ping(args.get(1));
                return self.reply(key, r);
            }
            "reset" => self.reset_state(cx, key),
            _ => {}
        }
        let _ = frame;
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        match admin::execute(&self.shared, s, cmd, args) {
            Outcome::Reply(r) => self.reply(key, r),
            Outcome::ReplyAndClose(r) => {
                self.reply(key, r);
                if let Some(s) = self.sessions.get_mut(key) {
                    s.close_after_flush = true;
                }
            }
        }
    }

    /// RESET: leave any transaction and every subscription (the admin
    /// handler resets the rest).
    fn reset_state(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        s.txn = None;
        if let Some(sub) = s.sub.take() {
            // Confirmations that will never come now: answer their slots.
            for seq in sub.expect {
                s.ring.fill(
                    seq,
                    Bytes::from_static(b"-ERR mithril: subscription cancelled by RESET\r\n"),
                );
            }
            self.drop_backend(cx, sub.conn);
        }
    }
}
