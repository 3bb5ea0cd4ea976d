//! What a request means: look the command up, check its arity, and send
//! it where its route says (a node, the proxy itself, or an error).

use super::{Outgoing, Timer, Worker};
use crate::admin::{self, Outcome};
use crate::command::{self, Args, Route};
use crate::router;
use crate::topology::key_slot;
use bytes::Bytes;
use reactor::{Context, Key};

impl Worker {
    pub(super) fn dispatch(&mut self, cx: &mut Context<'_, Timer>, key: Key, frame: Bytes) {
        let args = Args {
            buf: &frame,
            ranges: &self.args,
        };
        let Some(name) = args.get(0) else { return };
        let Some(mut cmd) = command::lookup(name) else {
            let r = command::unknown_command_reply(&args);
            return self.reply(key, Bytes::from(r));
        };
        if !command::arity_ok(cmd, args.len()) {
            let r = command::wrong_arity_reply(cmd);
            return self.reply(key, Bytes::from(r));
        }
        if !cmd.subcommands.is_empty() && args.len() >= 2 {
            let sub_name = args.get(1).unwrap_or_default();
            match command::lookup_sub(cmd, sub_name) {
                Some(sub) => cmd = sub,
                None => {
                    let r = command::unknown_subcommand_reply(cmd, sub_name);
                    return self.reply(key, Bytes::from(r));
                }
            }
            if !command::arity_ok(cmd, args.len()) {
                let r = command::wrong_arity_reply(cmd);
                return self.reply(key, Bytes::from(r));
            }
        }
        // NOAUTH gate (requirepass); also records the command for CLIENT INFO.
        if !self
            .sessions
            .get_mut(key)
            .is_some_and(|s| admin::admit(s, cmd))
        {
            return self.reply(key, Bytes::from_static(admin::ERR_NOAUTH));
        }
        match cmd.route {
            Route::Slot | Route::Fanout(_) => {
                if command::is_blocking_call(cmd, &args) {
                    return self.reply(key, Bytes::from_static(ERR_BLOCKING_NOT_YET));
                }
                match command::first_key(cmd, &args).and_then(|i| args.get(i)) {
                    Some(k) => {
                        let slot = key_slot(k);
                        self.forward_slot(cx, key, slot, frame);
                    }
                    None => self.forward_any(cx, key, frame),
                }
            }
            Route::AnyMaster => self.forward_any(cx, key, frame),
            Route::SlotArg => {
                let slot = args
                    .get(2)
                    .and_then(|s| std::str::from_utf8(s).ok())
                    .and_then(|s| s.parse::<u16>().ok())
                    .filter(|&s| s < 16384);
                match slot {
                    Some(slot) => self.forward_slot(cx, key, slot, frame),
                    None => self.reply(
                        key,
                        Bytes::from_static(b"-ERR Invalid or out of range slot\r\n"),
                    ),
                }
            }
            Route::Local => self.local(cx, key, cmd, frame),
            Route::Blocking => self.reply(key, Bytes::from_static(ERR_BLOCKING_NOT_YET)),
            Route::ClusterWide(_) | Route::Pubsub => self.reply(
                key,
                Bytes::from_static(b"-ERR mithril: this command is not supported yet\r\n"),
            ),
            Route::Unsupported => {
                let r = command::unknown_command_reply(&args);
                self.reply(key, Bytes::from(r))
            }
        }
    }

    fn forward_slot(&mut self, cx: &mut Context<'_, Timer>, key: Key, slot: u16, frame: Bytes) {
        if self.topo.is_empty() {
            return self.reply(key, Bytes::from_static(router::ERR_NO_TOPOLOGY));
        }
        match self.pools.pool_for_slot(&self.topo, slot) {
            Some(pool) => self.send_to_pool(cx, pool, Outgoing::new(key, frame)),
            None => self.reply(key, Bytes::from_static(router::ERR_SLOT_UNSERVED)),
        }
    }

    /// Keyless commands that any master can answer: rotate over masters.
    fn forward_any(&mut self, cx: &mut Context<'_, Timer>, key: Key, frame: Bytes) {
        let n = self.topo.shards.len();
        if n == 0 {
            return self.reply(key, Bytes::from_static(router::ERR_NO_TOPOLOGY));
        }
        self.any_master = self.any_master.wrapping_add(1);
        match self.pools.pool_for_shard(self.any_master % n) {
            Some(pool) => self.send_to_pool(cx, pool, Outgoing::new(key, frame)),
            None => self.reply(key, Bytes::from_static(router::ERR_NO_TOPOLOGY)),
        }
    }

    fn local(
        &mut self,
        _cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static command::Command,
        frame: Bytes,
    ) {
        let args = Args {
            buf: &frame,
            ranges: &self.args,
        };
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let outcome = admin::execute(&self.shared, s, cmd, &args);
        match outcome {
            Outcome::Reply(r) => self.reply(key, r),
            Outcome::ReplyAndClose(r) => {
                self.reply(key, r);
                if let Some(s) = self.sessions.get_mut(key) {
                    s.close_after_flush = true;
                }
            }
        }
    }
}

const ERR_BLOCKING_NOT_YET: &[u8] = b"-ERR mithril: blocking commands are not supported yet\r\n";
