//! A session's login: whether it may run commands, as which user, and
//! whether the permission check runs for it.
//!
//! Invariant: `restricted` is the user's standing (`!User::unrestricted`),
//! or the `default` user's (`SessionStart::restricted`) while none is
//! named, read at ACL generation `acl_gen`; it changes only with the
//! user, through the methods here.

use super::Session;
use crate::acl::{SessionStart, User};
use std::sync::Arc;

impl Session {
    /// May run commands (AUTH / HELLO AUTH succeeded, or no password is
    /// asked).
    #[inline]
    pub fn authenticated(&self) -> bool {
        self.authenticated
    }

    /// Its user may not run everything: the permission check runs (the
    /// hot path tests only this).
    #[inline]
    pub fn restricted(&self) -> bool {
        self.restricted
    }

    /// The user AUTH named; `None` until then (the `default` user).
    #[inline]
    pub fn user(&self) -> Option<&Arc<User>> {
        self.user.as_ref()
    }

    /// The `Acl::generation` its user and standing were read at.
    #[inline]
    pub fn acl_gen(&self) -> u64 {
        self.acl_gen
    }

    /// Logged in as `u` (AUTH, HELLO AUTH, a client certificate).
    pub fn log_in(&mut self, u: Arc<User>) {
        self.restricted = !u.unrestricted;
        self.user = Some(u);
        self.authenticated = true;
    }

    /// Back to the `default` user as `start` has it (RESET; a deleted
    /// user, with `start.authenticated` false).
    pub fn log_out(&mut self, start: SessionStart) {
        self.authenticated = start.authenticated;
        self.user = None;
        self.restricted = start.restricted;
        self.acl_gen = start.generation;
    }

    /// Its user as the ACL has it now (`None`: `default`), read at
    /// `start.generation`.
    pub fn refresh_user(&mut self, user: Option<Arc<User>>, start: SessionStart) {
        self.restricted = match &user {
            Some(u) => !u.unrestricted,
            None => start.restricted,
        };
        self.user = user;
        self.acl_gen = start.generation;
    }

    /// One more failed AUTH / HELLO AUTH: how many so far
    /// (`auth-max-failures`).
    pub fn auth_failed(&mut self) -> u64 {
        self.auth_failures += 1;
        self.auth_failures
    }
}
