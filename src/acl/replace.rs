//! The user set as a configuration gives it, and its replacement by a
//! configuration reload (`crate::reload`).
//!
//! A reload puts the file's users in place of every user the proxy has,
//! those `ACL SETUSER` made included (as Redis's `ACL LOAD` does), then
//! bumps [`Acl::generation`] once: from there on a session whose user is
//! gone, or lost a right it holds, is treated exactly as after `ACL
//! DELUSER` / `ACL SETUSER` (`worker/revoke.rs`), on every worker.
//!
//! Never: keep a clear password (users hold digests, see [`User`]).

use super::{Acl, User};
use crate::config::user::{Password, UserSpec};
use crate::config::Config;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The users `cfg` defines, `default` first: its `user` lines, plus the
/// built-in `default` (no password, everything allowed) unless a line
/// defines it; `requirepass` gives `default` a password. Passwords as
/// written (clear or digests): hash them before keeping them.
pub fn user_specs(cfg: &Config) -> Vec<UserSpec> {
    let mut default = cfg
        .users
        .iter()
        .find(|u| u.name == "default")
        .cloned()
        .unwrap_or_else(UserSpec::builtin_default);
    if !cfg.requirepass.is_empty() {
        default.nopass = false;
        default
            .passwords
            .push(Password::Plain(cfg.requirepass.clone()));
    }
    std::iter::once(default)
        .chain(cfg.users.iter().filter(|u| u.name != "default").cloned())
        .collect()
}

/// The running users `cfg` defines, channels as `pubsub_all` (the
/// `acl-pubsub-default` in force) gives them to users without a rule.
pub(super) fn built_users(cfg: &Config, pubsub_all: bool) -> Vec<Arc<User>> {
    user_specs(cfg)
        .iter()
        .map(|u| Arc::new(User::from_spec(&u.with_channels(pubsub_all))))
        .collect()
}

impl Acl {
    /// A reload: the users become exactly those of `cfg` (its `user`
    /// lines and `requirepass`); every user made since start by `ACL
    /// SETUSER` and not named by `cfg` is gone. `acl-pubsub-default` stays
    /// as it was at start. One generation bump, after the new set is in
    /// place. Returns how many users there are now.
    pub fn replace_users(&self, cfg: &Config) -> usize {
        let fresh = built_users(cfg, self.pubsub_all);
        let n = fresh.len();
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        *users = fresh;
        drop(users);
        self.generation.fetch_add(1, Ordering::Release);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        crate::config::parse_str(text, "test").expect("parses")
    }

    #[test]
    fn a_replacement_drops_setuser_users_and_moves_the_generation() {
        let acl = Acl::from_config(&cfg("user app on >one ~* +@all\n"));
        acl.set_user(b"extra", &[b"on", b">x"]).expect("setuser");
        let before = acl.generation();
        let n = acl.replace_users(&cfg("user other on >two ~* +@all\nrequirepass pw\n"));
        assert_eq!(n, 2);
        assert!(acl.generation() > before);
        assert!(acl.user(b"extra").is_none());
        assert!(acl.user(b"app").is_none());
        assert!(acl.authenticate(Some(b"other"), b"two").is_ok());
        assert!(acl.authenticate(None, b"pw").is_ok());
        assert!(acl.password_required());
    }

    #[test]
    fn the_specs_put_default_first_with_requirepass() {
        let specs = user_specs(&cfg("user a on nopass\nrequirepass secret\n"));
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].name, "default");
        assert!(!specs[0].nopass);
        assert_eq!(specs[1].name, "a");
    }
}
