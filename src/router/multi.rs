//! Inside MULTI: what may be queued, and where (outcome 7 of
//! [`decide`](super::decide)), and what acts at once even there
//! ([`runs_immediately`]).
//!
//! Invariants: every key of a transaction belongs to one unit, as a node
//! requires of its keys in one slot; a refusal here dooms the transaction
//! (EXEC answers EXECABORT), as a node's does.
//!
//! Never: queue what a node would refuse inside a transaction, or what the
//! proxy cannot carry into one (`ERR_IN_MULTI`).

use super::{debug_refused, refusal, unsupported_reply, Decision, View, ERR_IN_MULTI};
use crate::command::{self, flags, Args, Command, LocalCmd, Route, Wide};
use crate::placement::Locate;
use bytes::Bytes;

const ERR_NO_MULTI: &[u8] = b"-ERR Command not allowed inside a transaction\r\n";

/// Inside MULTI: what may be queued. Keyed commands (one slot, checked as
/// they queue), keyless ones any master runs, and PING/ECHO/TIME, which a
/// node answers in the transaction like Redis does.
pub(super) fn queue_in_txn(
    v: &View<'_>,
    cmd: &'static Command,
    args: &Args<'_>,
    loc: &impl Locate,
) -> Decision {
    if cmd.flags & flags::NO_MULTI != 0 {
        // SAVE, SHUTDOWN, SYNC, PSYNC: Redis's own refusal.
        return Decision::Refuse(Box::new(refusal(Bytes::from_static(ERR_NO_MULTI), true)));
    }
    let d = queueable(cmd, args);
    if !matches!(d, Decision::Queue { .. }) {
        return d;
    }
    // Every key of the transaction in one unit, as a node requires of its
    // keys in one slot.
    let mut unit = v.txn_unit;
    for i in command::keys(cmd, args) {
        let u = loc.unit_of(args.get(i).unwrap_or_default());
        match unit {
            None => unit = Some(u),
            Some(t) if t == u => {}
            Some(_) => return Decision::Refuse(Box::new(refusal(loc.cross_unit_reply(), true))),
        }
    }
    Decision::Queue { unit }
}

/// What may be queued inside MULTI, by route.
fn queueable(cmd: &'static Command, args: &Args<'_>) -> Decision {
    const QUEUE: Decision = Decision::Queue { unit: None };
    match cmd.route {
        Route::Slot
        | Route::SlotPairs
        | Route::Eval
        | Route::Fanout(_)
        | Route::AnyMaster
        | Route::Blocking => QUEUE,
        // UNWATCH too, as on a node (where it does nothing inside EXEC).
        Route::Local(LocalCmd::Ping | LocalCmd::Echo | LocalCmd::Time | LocalCmd::Unwatch) => QUEUE,
        // MONITOR too: the node's EXEC answers it Redis's "MONITOR isn't
        // allowed for DENY BLOCKING client" in the transaction's reply.
        Route::Local(LocalCmd::Monitor) => QUEUE,
        // Inside a transaction a node answers WAIT at once, with what it
        // has: it runs there with the rest.
        Route::ClusterWide(Wide::Wait) => QUEUE,
        // FLUSHALL / FLUSHDB, SCRIPT LOAD / FLUSH: in the transaction on its node,
        // and on the other masters just before EXEC is sent (worker/txn.rs).
        Route::ClusterWide(Wide::Flushall | Wide::ScriptLoad | Wide::ScriptFlush) => QUEUE,
        // DEBUG too (the suite's DEBUG SLEEP, DEBUG SET-ACTIVE-EXPIRE): it
        // runs on the transaction's node, as in a transaction on a node.
        Route::ClusterWide(Wide::Debug) if !debug_refused(args) => QUEUE,
        Route::Unsupported => {
            let r = unsupported_reply(cmd, args);
            Decision::Refuse(Box::new(refusal(r, true)))
        }
        _ => Decision::Refuse(Box::new(refusal(Bytes::from_static(ERR_IN_MULTI), true))),
    }
}

/// Commands that act at once even inside MULTI.
pub fn runs_immediately(cmd: &Command) -> bool {
    matches!(
        cmd.route,
        Route::Local(
            LocalCmd::Exec
                | LocalCmd::Discard
                | LocalCmd::Multi
                | LocalCmd::Quit
                | LocalCmd::Reset
                | LocalCmd::Watch
        )
    )
}
