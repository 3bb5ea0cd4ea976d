//! Who may connect and who may do what: the users of the proxy and the
//! permission check every request passes.
//!
//! ```text
//!   Config (requirepass, user lines) ──Acl::from_config──► Acl (in AdminState)
//!                                                            │
//!   AUTH / HELLO AUTH ──authenticate──► Arc<User> on the session
//!   router::decide ── NOAUTH, OOM ──► restricted user? ──► refusal(acl, user, cmd, args)
//!                                     │ no (View::acl is None): one branch, done
//!                                     └ yes: mode of the command, then every key,
//!                                       then every channel ──► NOPERM reply
//! ```
//!
//! What it owns: [`Acl`] (the users, built once at start and never changed),
//! [`User`], the command classes of the three modes ([`required_mode`]),
//! the permission check ([`refusal`]) with Redis 7.0's NOPERM texts, and
//! the failure counters `INFO stats` shows. (The credentials mithril sends
//! to the cluster belong to the backend: `backend::auth`.)
//!
//! Invariants:
//! - Passwords exist here only as SHA-256 digests; the given password is
//!   hashed once and compared with every digest of the user in constant
//!   time (no early exit on the first differing byte or the first match).
//! - A session whose user may run everything (`User::unrestricted`) never
//!   reaches the slow path: the routed hot path pays one test of a bool in
//!   the session.
//! - Key patterns are checked against every key the command table finds
//!   (every key of a multi-key command, hence every part of a fan-out) and
//!   against each command queued in a transaction, when it is queued.
//!
//! Never: log or echo a password, allocate on the allowed path, or touch a
//! backend.

use crate::command::{self, acl as cat, flags, Args, Command};
use crate::config::sha256;
use crate::config::user::{KeyPattern, Mode, Password, UserSpec};
use crate::config::{glob_match, Config};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Reply to a command the user's mode does not include (`%s` is the
/// command's full name, `client|kill`), as Redis 7.0 words it.
const NOPERM_CMD_HEAD: &str = "-NOPERM this user has no permissions to run the '";
const NOPERM_CMD_TAIL: &str = "' command\r\n";
/// Reply to a key outside the user's patterns.
pub const ERR_NOPERM_KEY: &[u8] =
    b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n";
/// Reply to a channel outside the user's patterns.
pub const ERR_NOPERM_CHANNEL: &[u8] =
    b"-NOPERM this user has no permissions to access one of the channels used as arguments\r\n";

/// What a new session starts as, and what RESET puts it back to: the
/// `default` user's standing, fixed with the users at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionStart {
    /// May run commands before any AUTH: `default` is on and `nopass`.
    pub authenticated: bool,
    /// `default` may not run everything: the permission check runs.
    pub restricted: bool,
}

/// A user as the running proxy knows it.
#[derive(Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    digests: Vec<[u8; 32]>,
    pub mode: Mode,
    /// Patterns keys of read-only commands must match (`None`: any key).
    read_keys: Option<Vec<Vec<u8>>>,
    /// Patterns keys of other commands must match (`None`: any key).
    write_keys: Option<Vec<Vec<u8>>>,
    /// Patterns channels must match (`None`: any channel).
    channels: Option<Vec<Vec<u8>>>,
    /// Mode admin, every key, every channel: nothing to check.
    pub unrestricted: bool,
    /// The line `ACL LIST` shows (after `user `): no clear password.
    pub canonical: String,
}

impl User {
    fn from_spec(s: &UserSpec) -> User {
        let pick = |want: fn(&KeyPattern) -> bool| {
            s.keys.as_ref().map(|k| {
                k.iter()
                    .filter(|p| want(p))
                    .map(|p| p.pattern.as_bytes().to_vec())
                    .collect::<Vec<_>>()
            })
        };
        // A lone `*` among the patterns is the same as no restriction.
        let open = |v: Option<Vec<Vec<u8>>>| v.filter(|v| !v.iter().any(|p| p == b"*"));
        let read_keys = open(pick(|p| p.read));
        let write_keys = open(pick(|p| p.write));
        let channels = open(
            s.channels
                .as_ref()
                .map(|c| c.iter().map(|c| c.as_bytes().to_vec()).collect()),
        );
        User {
            name: s.name.clone(),
            enabled: s.enabled,
            nopass: s.nopass,
            digests: s.passwords.iter().map(Password::digest).collect(),
            mode: s.mode,
            unrestricted: s.mode == Mode::Admin
                && read_keys.is_none()
                && write_keys.is_none()
                && channels.is_none(),
            read_keys,
            write_keys,
            channels,
            canonical: s.canonical(),
        }
    }

    /// Whether `digest` is one of this user's passwords: every stored
    /// digest is compared, whatever the outcome of the others.
    fn has_digest(&self, digest: &[u8; 32]) -> bool {
        let mut found = false;
        for d in &self.digests {
            found |= sha256::digests_equal(d, digest);
        }
        found
    }

    /// Whether the user's keys are limited (then scripts, which may touch
    /// keys they do not declare, are refused).
    fn keys_limited(&self) -> bool {
        self.read_keys.is_some() || self.write_keys.is_some()
    }
}

/// Why AUTH failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// Unknown user, wrong password or a disabled user: `-WRONGPASS`.
    WrongPass,
    /// `AUTH password` while `default` needs none and no other user has
    /// that password: Redis's "called without any password configured".
    NoDefaultPassword,
}

/// What the permission check refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    Command,
    Key,
    Channel,
}

/// Denials and failed authentications since start (`INFO stats`).
#[derive(Debug, Default)]
pub struct Counters {
    pub auth: AtomicU64,
    pub cmd: AtomicU64,
    pub key: AtomicU64,
    pub channel: AtomicU64,
}

/// Every user of this proxy; `default` first.
#[derive(Debug)]
pub struct Acl {
    users: Vec<Arc<User>>,
    pub denied: Counters,
}

impl Acl {
    /// The users of `cfg`: its `user` lines, plus the built-in `default`
    /// (no password, everything allowed) unless a line defines it;
    /// `requirepass` gives `default` a password.
    pub fn from_config(cfg: &Config) -> Acl {
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
        let mut users = vec![Arc::new(User::from_spec(&default))];
        users.extend(
            cfg.users
                .iter()
                .filter(|u| u.name != "default")
                .map(|u| Arc::new(User::from_spec(u))),
        );
        Acl {
            users,
            denied: Counters::default(),
        }
    }

    /// What a new session starts as (the `default` user's standing).
    pub fn session_start(&self) -> SessionStart {
        SessionStart {
            authenticated: !self.password_required(),
            restricted: !self.default_user().unrestricted,
        }
    }

    pub fn default_user(&self) -> &Arc<User> {
        // `from_config` always puts `default` first.
        &self.users[0]
    }

    pub fn users(&self) -> &[Arc<User>] {
        &self.users
    }

    /// Whether a new session must authenticate before running commands:
    /// `default` is off, or has no `nopass`.
    pub fn password_required(&self) -> bool {
        let d = self.default_user();
        !(d.enabled && d.nopass)
    }

    /// Whether `default` has a password (what `CONFIG GET requirepass`
    /// hides).
    pub fn default_has_password(&self) -> bool {
        !self.default_user().digests.is_empty()
    }

    /// AUTH: `name` is `None` for the one-argument form. That form is
    /// Redis's `default` first; unlike Redis, when `default` does not take
    /// the password, any other enabled user with that password does (so a
    /// predixy client, which authenticates with a password alone, keeps
    /// working). A failure is counted.
    pub fn authenticate(&self, name: Option<&[u8]>, pass: &[u8]) -> Result<Arc<User>, AuthError> {
        let digest = sha256::digest(pass);
        let outcome = match name {
            Some(name) => self
                .users
                .iter()
                .find(|u| u.name.as_bytes() == name)
                .filter(|u| u.enabled && (u.nopass || u.has_digest(&digest)))
                .cloned()
                .ok_or(AuthError::WrongPass),
            None => {
                // Compare with every digest of every user before deciding.
                let mut found: Option<&Arc<User>> = None;
                for u in &self.users {
                    if u.has_digest(&digest) && u.enabled && found.is_none() {
                        found = Some(u);
                    }
                }
                let d = self.default_user();
                match found {
                    Some(u) => Ok(u.clone()),
                    None if d.enabled && d.nopass => Err(AuthError::NoDefaultPassword),
                    None => Err(AuthError::WrongPass),
                }
            }
        };
        if matches!(outcome, Err(AuthError::WrongPass)) {
            self.denied.auth.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }

    /// Whether `user` may run `cmd` with these arguments: the command's
    /// mode, then every key, then every channel (Redis's order). A denial
    /// is counted.
    pub fn check(&self, user: &User, cmd: &'static Command, args: &Args) -> Result<(), Denial> {
        let r = check(user, cmd, args);
        if let Err(d) = r {
            let c = match d {
                Denial::Command => &self.denied.cmd,
                Denial::Key => &self.denied.key,
                Denial::Channel => &self.denied.channel,
            };
            c.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

/// The least mode that may run `cmd`.
///
/// - admin: commands flagged `admin`, or in the `@admin` or `@dangerous`
///   categories (FLUSHALL, CONFIG, CLIENT KILL / LIST, KEYS, SORT, ACL
///   LIST, DEBUG, ...), except INFO, which shows the proxy's own counters;
/// - write: commands flagged `write` or in `@write`, scripts and functions
///   that are not read-only, and PUBLISH / SPUBLISH;
/// - read: everything else: read-only commands, connection, transaction,
///   subscription and cluster-introspection commands.
///
/// The scripting management commands by what they do to others (see
/// [`scripting_mode`]).
pub fn required_mode(cmd: &Command) -> Mode {
    if cmd.acl & cat::SCRIPTING != 0 {
        if let Some(mode) = scripting_mode(cmd.name) {
            return mode;
        }
    }
    if (cmd.flags & flags::ADMIN != 0 || cmd.acl & (cat::ADMIN | cat::DANGEROUS) != 0)
        && cmd.name != "info"
    {
        Mode::Admin
    } else if cmd.flags & flags::WRITE != 0
        || cmd.acl & cat::WRITE != 0
        || (cmd.acl & cat::SCRIPTING != 0 && cmd.flags & flags::READONLY == 0)
        || matches!(cmd.name, "publish" | "spublish")
    {
        Mode::Write
    } else {
        Mode::Read
    }
}

/// SCRIPT and FUNCTION subcommands: what affects every client's scripts
/// (flushing, deleting or replacing libraries wholesale, killing a running
/// script) needs admin; loading one needs write (redis-py's
/// `register_script` loads a script when a node answers NOSCRIPT, so an
/// application's user must be able to); looking needs read. `None` for
/// the script calls, which follow their flags.
fn scripting_mode(name: &str) -> Option<Mode> {
    Some(match name {
        "script|flush" | "script|kill" | "function|delete" | "function|flush"
        | "function|restore" | "function|kill" => Mode::Admin,
        "script|load" | "function|load" => Mode::Write,
        "script|exists" | "script|help" | "script|show" | "function|list" | "function|dump"
        | "function|stats" | "function|help" => Mode::Read,
        _ => return None,
    })
}

fn matches_any(patterns: &[Vec<u8>], subject: &[u8]) -> bool {
    patterns
        .iter()
        .any(|p| p.as_slice() == b"*" || glob_match(p, subject, false))
}

fn check(user: &User, cmd: &'static Command, args: &Args) -> Result<(), Denial> {
    let mode = required_mode(cmd);
    if mode > user.mode {
        return Err(Denial::Command);
    }
    // A script may reach keys it does not declare: with limited keys, the
    // proxy cannot vouch for it.
    if user.keys_limited() && is_script_call(cmd) {
        return Err(Denial::Command);
    }
    let patterns = if mode == Mode::Read {
        &user.read_keys
    } else {
        &user.write_keys
    };
    if let Some(p) = patterns {
        for i in command::keys(cmd, args) {
            if !args.get(i).is_some_and(|k| matches_any(p, k)) {
                return Err(Denial::Key);
            }
        }
    }
    if let Some(p) = &user.channels {
        let channels = match cmd.name {
            "subscribe" | "ssubscribe" => 1..args.len(),
            "publish" | "spublish" => 1..2.min(args.len()),
            "psubscribe" => {
                // A pattern subscription must name one of the user's
                // channel patterns exactly, as Redis requires.
                for i in 1..args.len() {
                    if !args
                        .get(i)
                        .is_some_and(|c| p.iter().any(|q| q.as_slice() == c || q == b"*"))
                    {
                        return Err(Denial::Channel);
                    }
                }
                0..0
            }
            _ => 0..0,
        };
        for i in channels {
            if !args.get(i).is_some_and(|c| matches_any(p, c)) {
                return Err(Denial::Channel);
            }
        }
    }
    Ok(())
}

/// EVAL, EVALSHA, FCALL and their read-only variants.
fn is_script_call(cmd: &Command) -> bool {
    matches!(
        cmd.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// The permission check of the dispatch path, for a restricted user
/// (the router asks only then): `None` when `user` may run the command,
/// else the NOPERM reply.
#[cold]
#[inline(never)]
pub fn refusal(acl: &Acl, user: &User, cmd: &'static Command, args: &Args) -> Option<Bytes> {
    match acl.check(user, cmd, args) {
        Ok(()) => None,
        Err(Denial::Command) => Some(Bytes::from(format!(
            "{NOPERM_CMD_HEAD}{}{NOPERM_CMD_TAIL}",
            cmd.name
        ))),
        Err(Denial::Key) => Some(Bytes::from_static(ERR_NOPERM_KEY)),
        Err(Denial::Channel) => Some(Bytes::from_static(ERR_NOPERM_CHANNEL)),
    }
}

#[cfg(test)]
mod tests;
