//! Revocation at once: what an ACL change (`ACL SETUSER`, `ACL DELUSER`)
//! takes away stops now, not at the session's next command.
//!
//! ```text
//!   ACL SETUSER / DELUSER ──► Acl::generation bumped
//!     dispatch of a session's next command ──┐
//!     a message / MONITOR line / replication │ refresh_rights(session)
//!       frame about to reach a session ──────┤   user as it is now; then
//!     every tick: sessions not yet looked at ┘   rights lost? ──► close
//! ```
//!
//! A session takes its user as it is now (`refresh_user`), then is
//! closed, as Redis 7 closes them, when:
//! - its user was deleted;
//! - it is subscribed and its user may no longer hear one of its channels
//!   or patterns, or run the command that subscribed it (Redis 7 checks
//!   the channels only: mithril checks both);
//! - it is a MONITOR whose user may no longer run MONITOR, or a
//!   replication feed whose user may no longer run SYNC / PSYNC (Redis
//!   leaves both running: mithril does not).
//!
//! A message or line is never delivered to a session before this look
//! at it (`revoked` at the delivery points: `pubsub_frame`,
//! `monitor_deliver`, `feed_push`), so nothing published after the ACL
//! change's OK reaches a client that lost the right. A queued transaction
//! is checked again at EXEC instead (`txn.rs`). Cost when no ACL change
//! happened: one atomic load per delivered frame and per tick.

use super::{Timer, Worker};
use crate::acl::{self, Acl, Refreshed};
use crate::session::Session;
use reactor::{Context, Key};

/// A session whose user was edited or deleted since it looked takes the
/// user as it is now; `true` when it must be closed: the user is gone
/// (the session is then logged out) or, for a subscriber, a monitor or a
/// replication feed (`feed`), the right it holds was taken away.
#[cold]
#[inline(never)]
pub(super) fn refresh_rights(s: &mut Session, acl: &Acl, feed: bool) -> bool {
    match acl.refresh(s.user()) {
        Refreshed::User(user, start) => {
            s.refresh_user(user, start);
            if !s.restricted() {
                return false;
            }
            let user = s.user().cloned().unwrap_or_else(|| acl.default_user());
            lost_rights(s, &user, feed)
        }
        Refreshed::Deleted => {
            // Logged out, and not let in again without an AUTH.
            let start = acl.session_start();
            s.log_out(crate::acl::SessionStart {
                authenticated: false,
                ..start
            });
            true
        }
    }
}

/// Whether `user` may no longer hold what `s` holds: its subscriptions,
/// its MONITOR, its replication feed.
fn lost_rights(s: &Session, user: &acl::User, feed: bool) -> bool {
    if s.is_monitor() && !acl::may_run_command(user, "monitor") {
        return true;
    }
    if feed && !(acl::may_run_command(user, "psync") || acl::may_run_command(user, "sync")) {
        return true;
    }
    let Some(sub) = s.sub.as_ref() else {
        return false;
    };
    (!sub.channels.is_empty() && !acl::may_run_command(user, "subscribe"))
        || (!sub.patterns.is_empty() && !acl::may_run_command(user, "psubscribe"))
        || (!sub.shard.is_empty() && !acl::may_run_command(user, "ssubscribe"))
        || sub.channels.iter().any(|c| !acl::may_hear_channel(user, c))
        || sub.shard.keys().any(|c| !acl::may_hear_channel(user, c))
        || sub.patterns.iter().any(|p| !acl::may_hear_pattern(user, p))
}

impl Worker {
    /// Before something reaches session `key` out of band (a message, a
    /// MONITOR line, a replication frame): `true` when an ACL change since
    /// it last looked took its right away; it is then closing (its output
    /// so far flushed, nothing more added) and the frame must be dropped.
    #[inline]
    pub(super) fn revoked(&mut self, key: Key) -> bool {
        let acl = &self.shared.admin.acl;
        let generation = acl.generation();
        let Some(s) = self.sessions.get_mut(key) else {
            return false;
        };
        if s.closing() {
            return true;
        }
        if s.acl_gen() == generation {
            return false;
        }
        let feed = s.input().is_feed();
        if !refresh_rights(s, acl, feed) {
            return false;
        }
        s.close_after_flush();
        if s.mark_dirty() {
            self.dirty_sessions.push(key);
        }
        true
    }

    /// Every tick: after an ACL change, each session not looked at since
    /// (an idle subscriber, monitor or feed, a deleted user's idle
    /// client) is looked at now, and closed when it lost its right.
    pub(super) fn revoke_tick(&mut self, cx: &mut Context<'_, Timer>) {
        let generation = self.shared.admin.acl.generation();
        if generation == self.acl_seen {
            return;
        }
        self.acl_seen = generation;
        for key in self.sessions.keys() {
            let stale = self.sessions.get(key).is_some_and(|s| {
                s.acl_gen() != generation && !s.closing() && !s.input().is_blocked()
            });
            if stale && self.revoked(key) {
                let id = self.sessions.get(key).map_or(0, |s| s.id);
                log::info!(target: "mithril::acl", "worker {}: client {id} closed: its user's rights changed", self.id);
                self.close_session(cx, key);
            }
        }
    }
}
