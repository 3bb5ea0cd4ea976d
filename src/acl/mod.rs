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
//! What it owns: [`Acl`] (the users: built at start from the configuration,
//! edited by `ACL SETUSER` / `DELUSER`, replaced whole by a configuration
//! reload (`acl/replace.rs`), each change a new generation),
//! [`User`], the command classes of the three modes ([`required_mode`]),
//! the permission check ([`refusal`]) with Redis 7.0's NOPERM texts, the
//! failure counters `INFO stats` shows, and ACL LOG ([`LogEntry`]). (The credentials mithril sends
//! to the cluster belong to the backend: `backend::auth`.)
//!
//! Invariants:
//! - Passwords exist here only as SHA-256 digests; the given password is
//!   hashed once and compared with every digest of the user in constant
//!   time (no early exit on the first differing byte or the first match).
//! - A session whose user may run everything (`User::unrestricted`) never
//!   reaches the slow path: the routed hot path pays one test of a bool in
//!   the session.
//! - A session holds its user as it was when it looked; each edit bumps
//!   [`Acl::generation`], and the dispatch path (one relaxed load per
//!   command) looks again when the number moved: an edited user's sessions
//!   run under the new rules from their next command, a deleted user's
//!   sessions are closed.
//! - Key patterns are checked against every key the command table finds
//!   (every key of a multi-key command, hence every part of a fan-out) and
//!   against each command queued in a transaction, when it is queued.
//! - A script call runs on the node with the backend user's rights, so
//!   only a user that may do everything makes one; replacing a function
//!   library needs admin rights, reading libraries' code the right to
//!   load one ([`scripts`]: why, and where mithril differs from Redis).
//!
//! Never: log or echo a password, allocate on the allowed path, or touch a
//! backend.

use crate::command::{self, acl as cat, flags, Args, Command};
use crate::config::sha256;
use crate::config::user::{KeyPattern, Mode, Password, UserSpec};
use crate::config::{glob_match, Config};
use bytes::Bytes;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

mod replace;
mod scripts;
pub mod throttle;

pub use replace::user_specs;

/// At most this many users (the configuration's and `ACL SETUSER`'s).
pub const MAX_USERS: usize = 10_000;

/// ACL LOG keeps this many entries, the newest (Redis's default
/// `acllog-max-len`).
pub const LOG_MAX: usize = 128;

/// A denial like the newest entry's within this time adds to its count.
const LOG_GROUPING: Duration = Duration::from_secs(60);

/// One ACL LOG entry: a refused command, key, channel or login.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, or `multi` when refused while queued in a transaction.
    pub context: &'static str,
    /// The command's full name, the key, the channel, or `AUTH`.
    pub object: Vec<u8>,
    pub username: String,
    /// When it last happened.
    pub at: Instant,
    /// The client's CLIENT INFO line, as of that time.
    pub client_info: String,
}

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

/// What EXEC answers, in place of a queued command, for a command an ACL
/// change since it was queued refuses (Redis 7.0's text).
const NOPERM_EXEC_HEAD: &str = "-NOPERM ACLs rules changed between the moment the transaction \
was accumulated and the EXEC call. This command is no longer allowed for the following reason: ";

/// The error EXEC answers for a queued command refused by `d` since it
/// was queued.
pub fn exec_refusal(d: Denial) -> Bytes {
    let why = match d {
        Denial::Command => "no permission to execute the command or subcommand",
        Denial::Key => "no permission to touch the specified keys",
        Denial::Channel => "no permission to access one of the channels used as arguments",
    };
    Bytes::from(format!("{NOPERM_EXEC_HEAD}{why}\r\n"))
}

/// What a new session starts as, and what RESET puts it back to: the
/// `default` user's standing, fixed with the users at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionStart {
    /// May run commands before any AUTH: `default` is on and `nopass`.
    pub authenticated: bool,
    /// `default` may not run everything: the permission check runs.
    pub restricted: bool,
    /// The [`Acl::generation`] these were read at.
    pub generation: u64,
}

/// A user as the running proxy knows it.
#[derive(Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    digests: Vec<[u8; 32]>,
    pub mode: Mode,
    /// With command rules (`+get`, `-@admin`): the full names of the
    /// commands the mode and the rules allow (`None`: the mode decides).
    allowed: Option<HashSet<&'static str>>,
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
    /// What the user was made from, passwords as digests (what `ACL
    /// SETUSER` edits).
    pub spec: UserSpec,
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
        let allowed = (!s.commands.is_empty())
            .then(|| allowed_commands(s.mode, &s.commands))
            .filter(|set| set.len() < leaves().count());
        let every_command = match &allowed {
            Some(_) => false,
            None => s.mode == Mode::Admin || !s.commands.is_empty(),
        };
        User {
            name: s.name.clone(),
            enabled: s.enabled,
            nopass: s.nopass,
            digests: s.passwords.iter().map(Password::digest).collect(),
            mode: if every_command { Mode::Admin } else { s.mode },
            allowed,
            unrestricted: every_command
                && read_keys.is_none()
                && write_keys.is_none()
                && channels.is_none(),
            read_keys,
            write_keys,
            channels,
            canonical: s.canonical(),
            spec: s.hashed(),
        }
    }

    /// Whether the user's own rules let it run `cmd` (keys and channels
    /// aside).
    fn may_run(&self, cmd: &Command) -> bool {
        match &self.allowed {
            // As in Redis, AUTH, HELLO and the like pass any command rule.
            Some(_) if cmd.flags & flags::NO_AUTH != 0 => true,
            Some(set) => set.contains(cmd.name),
            None => required_mode(cmd) <= self.mode,
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
    users: RwLock<Vec<Arc<User>>>,
    /// Bumped (after the edit is in `users`) by every `ACL SETUSER` and
    /// `DELUSER`.
    generation: AtomicU64,
    pub denied: Counters,
    /// ACL LOG, newest first, at most [`LOG_MAX`].
    log: Mutex<VecDeque<LogEntry>>,
    /// `auth-any-user`: `AUTH <password>` alone tries every user.
    any_user: bool,
    /// `acl-pubsub-default allchannels`.
    pubsub_all: bool,
    /// `auth-max-failures` and `auth-failures-per-source`.
    pub throttle: throttle::Throttle,
}

/// What happened to a session's user since the session last looked.
pub enum Refreshed {
    /// The user as it is now (`None`: `default`, which cannot be deleted).
    User(Option<Arc<User>>, SessionStart),
    /// The user was deleted: Redis closes its connections.
    Deleted,
}

impl Acl {
    /// The users of `cfg`: its `user` lines, plus the built-in `default`
    /// (no password, everything allowed) unless a line defines it;
    /// `requirepass` gives `default` a password.
    pub fn from_config(cfg: &Config) -> Acl {
        let pubsub_all = cfg.acl_pubsub_all;
        Acl {
            users: RwLock::new(replace::built_users(cfg, pubsub_all)),
            generation: AtomicU64::new(0),
            denied: Counters::default(),
            log: Mutex::new(VecDeque::new()),
            any_user: cfg.auth_any_user,
            pubsub_all,
            throttle: throttle::Throttle::new(cfg.auth_max_failures, cfg.auth_failures_per_source),
        }
    }

    /// Records a denial in ACL LOG: one like the newest matching entry of
    /// the last minute (same reason, context, object and user) adds to its
    /// count and moves it first, as Redis groups them.
    pub fn log(&self, mut e: LogEntry) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let same = log.iter().position(|o| {
            o.reason == e.reason
                && o.context == e.context
                && o.object == e.object
                && o.username == e.username
                && e.at.saturating_duration_since(o.at) <= LOG_GROUPING
        });
        if let Some(i) = same {
            if let Some(old) = log.remove(i) {
                e.count = old.count + 1;
            }
        }
        log.push_front(e);
        log.truncate(LOG_MAX);
    }

    /// The newest `count` entries of ACL LOG.
    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.iter().take(count).cloned().collect()
    }

    /// ACL LOG RESET.
    pub fn log_reset(&self) {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The number of edits so far: a session that read its user at an
    /// older number looks again ([`Acl::refresh`]).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<User>>> {
        self.users.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The user named `name` as it is now.
    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.read()
            .iter()
            .find(|u| u.name.as_bytes() == name)
            .cloned()
    }

    /// A session that holds `user` (`None`: `default`) looks again.
    pub fn refresh(&self, user: Option<&Arc<User>>) -> Refreshed {
        let start = self.session_start();
        match user {
            None => Refreshed::User(None, start),
            Some(u) => match self.user(u.name.as_bytes()) {
                Some(now) => Refreshed::User(Some(now), start),
                None => Refreshed::Deleted,
            },
        }
    }

    /// `ACL SETUSER name rules...`: the rules are applied in order to the
    /// user (a new one starts as Redis's do); all of them or none. The
    /// error is the reply's text, without `-`.
    pub fn set_user(&self, name: &[u8], rules: &[&[u8]]) -> Result<(), String> {
        let name = std::str::from_utf8(name)
            .ok()
            .filter(|n| {
                !n.is_empty()
                    && !n
                        .bytes()
                        .any(|b| b == b' ' || b == 0 || !b.is_ascii_graphic())
            })
            .ok_or_else(|| "ERR Usernames can't contain spaces or null characters".to_string())?;
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        let at = users.iter().position(|u| u.name == name);
        let mut spec = match at {
            Some(i) => users[i].spec.clone(),
            None if users.len() >= MAX_USERS => {
                return Err(format!("ERR mithril: at most {MAX_USERS} users"));
            }
            None => UserSpec::for_setuser(name, self.pubsub_all),
        };
        for rule in rules {
            spec.apply_setuser(rule, self.pubsub_all).map_err(|e| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(rule),
                    e.text()
                )
            })?;
        }
        spec.rules = Vec::new();
        let user = Arc::new(User::from_spec(&spec));
        match at {
            Some(i) => users[i] = user,
            None => users.push(user),
        }
        drop(users);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// `ACL DELUSER names...`: how many existed. `default` cannot go.
    pub fn del_users(&self, names: &[&[u8]]) -> Result<usize, &'static str> {
        if names.iter().any(|n| *n == b"default") {
            return Err("ERR The 'default' user cannot be removed");
        }
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        let before = users.len();
        users.retain(|u| !names.contains(&u.name.as_bytes()));
        let gone = before - users.len();
        drop(users);
        if gone > 0 {
            self.generation.fetch_add(1, Ordering::Release);
        }
        Ok(gone)
    }

    /// What a new session starts as (the `default` user's standing).
    pub fn session_start(&self) -> SessionStart {
        let generation = self.generation();
        let d = self.default_user();
        SessionStart {
            authenticated: d.enabled && d.nopass,
            restricted: !d.unrestricted,
            generation,
        }
    }

    pub fn default_user(&self) -> Arc<User> {
        // `from_config` puts `default` first, and it cannot be deleted.
        self.read()[0].clone()
    }

    /// The users as they are now.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.read().clone()
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

    /// AUTH: `name` is `None` for the one-argument form, which names
    /// `default` as in Redis. Only with `auth-any-user yes`, when
    /// `default` does not take the password, any other enabled user with
    /// that password does (predixy's clients authenticate with a password
    /// alone). A failure is counted.
    pub fn authenticate(&self, name: Option<&[u8]>, pass: &[u8]) -> Result<Arc<User>, AuthError> {
        let digest = sha256::digest(pass);
        let users = self.read();
        let outcome = match name {
            Some(name) => users
                .iter()
                .find(|u| u.name.as_bytes() == name)
                .filter(|u| u.enabled && (u.nopass || u.has_digest(&digest)))
                .cloned()
                .ok_or(AuthError::WrongPass),
            None if !self.any_user => {
                let d = &users[0];
                if d.nopass {
                    Err(AuthError::NoDefaultPassword)
                } else if d.has_digest(&digest) && d.enabled {
                    Ok(d.clone())
                } else {
                    Err(AuthError::WrongPass)
                }
            }
            None => {
                // Compare with every digest of every user before deciding.
                let mut found: Option<&Arc<User>> = None;
                for u in users.iter() {
                    if u.has_digest(&digest) && u.enabled && found.is_none() {
                        found = Some(u);
                    }
                }
                let d = &users[0];
                match found {
                    Some(u) => Ok(u.clone()),
                    None if d.enabled && d.nopass => Err(AuthError::NoDefaultPassword),
                    None => Err(AuthError::WrongPass),
                }
            }
        };
        drop(users);
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
    if ADMIN_TOO.contains(&cmd.name) {
        return Mode::Admin;
    }
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

/// Commands Redis files under `@slow` alone (so a Redis user granted
/// `+@read` cannot run them either) that need admin here: CLUSTER
/// GETKEYSINSLOT and COUNTKEYSINSLOT list or count keys whatever the
/// user's key patterns (as KEYS, which is admin), MEMORY PURGE changes
/// every master.
const ADMIN_TOO: &[&str] = &[
    "cluster|getkeysinslot",
    "cluster|countkeysinslot",
    "memory|purge",
];

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

/// Every command a client can run: the top-level commands (a container
/// too: `COMMAND` alone runs), and every subcommand (`config|get`).
fn leaves() -> impl Iterator<Item = &'static Command> {
    command::all()
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
}

/// The commands `mode` and then `rules` (checked when they were parsed:
/// see `config::user`) allow.
fn allowed_commands(mode: Mode, rules: &[String]) -> HashSet<&'static str> {
    let mut set: HashSet<&'static str> = leaves()
        .filter(|c| required_mode(c) <= mode)
        .map(|c| c.name)
        .collect();
    for rule in rules {
        let (sign, what) = rule.split_at(1.min(rule.len()));
        let add = sign == "+";
        let mut apply = |c: &'static Command| {
            if add {
                set.insert(c.name);
            } else {
                set.remove(c.name);
            }
        };
        if what == "@all" {
            leaves().for_each(&mut apply);
        } else if let Some(cat) = what.strip_prefix('@') {
            let bit = command::acl::bit(cat).unwrap_or(0);
            leaves().filter(|c| c.acl & bit != 0).for_each(&mut apply);
        } else if let Some(c) = command::lookup_full(what.as_bytes()) {
            // A container stands for itself and all its subcommands.
            apply(c);
            c.subcommands.iter().for_each(&mut apply);
        }
    }
    set
}

fn matches_any(patterns: &[Vec<u8>], subject: &[u8]) -> bool {
    patterns
        .iter()
        .any(|p| p.as_slice() == b"*" || glob_match(p, subject, false))
}

fn check(user: &User, cmd: &'static Command, args: &Args) -> Result<(), Denial> {
    check_at(user, cmd, args).map_err(|(d, _)| d)
}

/// [`check`], with the argument that was refused (the key or channel;
/// `None` for the command itself).
fn check_at(
    user: &User,
    cmd: &'static Command,
    args: &Args,
) -> Result<(), (Denial, Option<usize>)> {
    let mode = required_mode(cmd);
    if !user.may_run(cmd) {
        return Err((Denial::Command, None));
    }
    // Scripts run on the node with the backend user's rights, and
    // function management has an admin gate (`scripts`).
    if scripts::refused(user, cmd, args) {
        return Err((Denial::Command, None));
    }
    let patterns = if mode == Mode::Read {
        &user.read_keys
    } else {
        &user.write_keys
    };
    if let Some(p) = patterns {
        for i in command::keys(cmd, args) {
            if !args.get(i).is_some_and(|k| matches_any(p, k)) {
                return Err((Denial::Key, Some(i)));
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
                        return Err((Denial::Channel, Some(i)));
                    }
                }
                0..0
            }
            _ => 0..0,
        };
        for i in channels {
            if !args.get(i).is_some_and(|c| matches_any(p, c)) {
                return Err((Denial::Channel, Some(i)));
            }
        }
    }
    Ok(())
}

/// Whether `user` may run the command named `name` (a full name:
/// `monitor`, `psync`): what an ACL change re-checks for a session that
/// became a monitor or a replication feed.
pub fn may_run_command(user: &User, name: &str) -> bool {
    command::lookup_full(name.as_bytes()).is_some_and(|c| user.may_run(c))
}

/// The commands `user` may run, as Redis's rules would grant them (what
/// ACL GETUSER shows): `+@all`, or `-@all` then each command allowed
/// (`+config|get` for a subcommand of a command not wholly allowed).
pub fn command_rules(user: &User) -> String {
    let all = command::all();
    if all
        .iter()
        .all(|c| user.may_run(c) && c.subcommands.iter().all(|x| user.may_run(x)))
    {
        return "+@all".to_string();
    }
    let mut out = String::from("-@all");
    for c in all {
        let subs_ok = c.subcommands.iter().all(|x| user.may_run(x));
        if user.may_run(c) && subs_ok {
            out.push_str(" +");
            out.push_str(c.name);
            continue;
        }
        for x in c.subcommands.iter().filter(|x| user.may_run(x)) {
            out.push_str(" +");
            out.push_str(x.name);
        }
    }
    out
}

/// Whether `user` may go on hearing a channel it subscribed to (its
/// channel patterns, as SUBSCRIBE / SSUBSCRIBE are checked).
pub fn may_hear_channel(user: &User, channel: &[u8]) -> bool {
    user.channels
        .as_ref()
        .map_or(true, |p| matches_any(p, channel))
}

/// Whether `user` may keep a pattern subscription: the pattern must be one
/// of its channel patterns exactly, as PSUBSCRIBE is checked.
pub fn may_hear_pattern(user: &User, pattern: &[u8]) -> bool {
    user.channels.as_ref().map_or(true, |p| {
        p.iter().any(|q| q.as_slice() == pattern || q == b"*")
    })
}

/// What a refusal refused, for ACL LOG: the reason and the object (the
/// command's full name, or the key or channel refused). `None` when
/// `user` may run the command.
#[cold]
pub fn explain(user: &User, cmd: &'static Command, args: &Args) -> Option<(&'static str, Vec<u8>)> {
    let (d, at) = check_at(user, cmd, args).err()?;
    let object = match at.and_then(|i| args.get(i)) {
        Some(arg) => arg.to_vec(),
        None => cmd.name.as_bytes().to_vec(),
    };
    let reason = match d {
        Denial::Command => "command",
        Denial::Key => "key",
        Denial::Channel => "channel",
    };
    Some((reason, object))
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
