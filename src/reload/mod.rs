//! Configuration reload: read the file mithril was started with again and
//! put in force what may change while it runs (SIGHUP, `CONFIG RELOAD`).
//!
//! ```text
//!   SIGHUP (signal thread) ─┐                    ┌─► parse or validation error: nothing
//!   CONFIG RELOAD (worker) ─┴─► lock ─► read ────┤     changes; logged, and the reply
//!                               (one at a time)  │
//!                                                └─► for every directive of the table:
//!        live (CONFIG SET's), changed since the file was last read ─► applied
//!        `user` lines / `requirepass`, changed since last read ──────► users replaced
//!        `tls-*` files and settings, with a TLS listener ─────────────► TLS rebuilt
//!        anything else that differs from what runs ──────────────────► pending restart
//! ```
//!
//! The read is the one the process started with (`ReadConfig`): the same
//! file (native, nutcracker.yml or predixy.conf), its includes, the same
//! command-line flags over it, then `config::validate`. A file that fails
//! any of it changes nothing.
//!
//! What a reload changes is what the *file* changed since it was last
//! read (at start, or by the last good reload): a live directive the file
//! leaves as it was keeps what `CONFIG SET` gave it, and the users stay
//! as `ACL SETUSER` / `DELUSER` left them while the file's `user` lines
//! and `requirepass` are unchanged. So a SIGHUP from logrotate, which
//! re-reads an unchanged file, changes nothing. When the users did change
//! in the file, the file's users replace all of them, those made by `ACL
//! SETUSER` included (Redis's `ACL LOAD`), and the sessions of a removed
//! or changed user are handled exactly as after `ACL DELUSER` / `ACL
//! SETUSER` (`acl::replace`, `worker/revoke.rs`).
//!
//! Pools (`pools.rs`): each pool of the file is matched by name with the
//! running one. A pool's seeds (`cluster-nodes`, a pool's
//! `cluster-nodes`), servers (`pool NAME server`, a nutcracker.yml
//! pool's `servers`), groups and sentinels, and listeners (`bind`,
//! `port`, a pool's `listen` and, when a TLS configuration runs, its
//! `tls-listen`) change live: the topology thread tries new seeds after
//! the nodes it knows and refreshes at once, or rebuilds a ring or a
//! pool of groups from the new list and publishes it with the next epoch
//! (each worker places what it reads after that by it, and retires its
//! connections to a node the map no longer has); a new listener is bound
//! here and handed to the acceptor, a removed one closed and its clients
//! drained (they read nothing more, get their replies and are closed).
//! The default pool listens on each `bind` address at `port` and, with a
//! TLS listener, at `tls-port`: an address added or removed adds or
//! removes both. A ring's health record (`Shared::pools`, indexed by the
//! list in twemproxy's order) starts afresh for a new list; a failure a
//! worker counts between that swap and its next turn (when it takes the
//! new map and renumbers its connections, `worker/live.rs`) may land on
//! the server the new list has at the old index: one count toward an
//! ejection, at most. Pools are added and removed live too (`pools.rs`
//! says in what order); a pool's other settings (hash, database,
//! password, timeouts) are pending.
//!
//! TLS (with a `tls-port` at start and in the file): every reload builds
//! the rustls configuration again from the file's `tls-*` directives and
//! the files they name, changed or not, since a renewed certificate is
//! usually the same path with new content; the next handshakes use it,
//! open sessions keep theirs. A certificate or key that does not load
//! fails the reload like a file that does not parse: nothing changes.
//! `tls-port` and `tls-handshake-timeout` wait for a restart. Toward the
//! nodes (`tls-cluster yes` at start and in the file) likewise: the CAs
//! and the client certificate are read again, and the connections opened
//! after the reload use them, verified against the name the file gives
//! (`tls-server-name`, else its first host-name seed or server: a ring
//! server added under a new host name is verified by it);
//! `tls-cluster` and `tls-sentinel` wait for a restart.
//!
//! Pending: every other directive is compared, through the directive
//! table (so a new directive is covered without a list here), with the
//! configuration the process started with; each that differs is named in
//! a warning and in INFO's `config_pending_restart`, and takes effect at
//! the next start. Changing it back in the file clears it.
//!
//! Cost and bounds: a reload reads one local file (and its includes) and
//! rebuilds the users, on the thread that asked: the signal thread, or
//! for `CONFIG RELOAD` the worker that runs the command (as long as a
//! CONFIG SET plus a file read; the worker's other clients wait that
//! long). Reloads are serialised by a mutex. Never: panic on any file
//! content (the parser returns errors), log a password, or apply half a
//! file.

mod pools;

use crate::config::{Config, ConfigError, DIRECTIVES};
use crate::shared::Shared;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Reads the configuration again as it was read at start; the result is
/// validated.
pub type ReadConfig = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// The directives that make up the users: compared and applied together.
const USER_DIRECTIVES: &[&str] = &["user", "requirepass"];

/// The directives that say where the pools are: compared pool by pool
/// (`pools::apply`), not as whole directives.
const POOL_DIRECTIVES: &[&str] = &["cluster-nodes", "pool", "bind", "port"];

const T: &str = "mithril::reload";

/// Why a reload changed nothing.
#[derive(Debug)]
pub enum ReloadError {
    /// The process was started without a configuration file.
    NoFile,
    /// The file does not parse or does not validate.
    Config(ConfigError),
    /// A `tls-*` file does not load (`crate::tls`).
    Tls(String),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::NoFile => {
                f.write_str("reload failed: mithril was started without a configuration file")
            }
            ReloadError::Config(e) => write!(f, "reload failed: {e}"),
            ReloadError::Tls(e) => write!(f, "reload failed: {e}"),
        }
    }
}

/// What a reload did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The live directives put in force.
    pub live: Vec<&'static str>,
    /// Whether the users were replaced (and how many there are now).
    pub users: Option<usize>,
    /// The directives that differ from what runs and wait for a restart.
    pub pending: Vec<&'static str>,
    /// The TLS configuration was built again from the file.
    pub tls: bool,
}

/// The file as last read.
struct Last {
    /// With client passwords forgotten (`Config::forget_client_passwords`).
    config: Config,
    /// The users it defines, each as `ACL LIST` writes it (digests only).
    users: Vec<String>,
}

/// The users `cfg` defines, as `ACL LIST` writes them: what tells whether
/// a reload changed them.
fn user_lines(cfg: &Config) -> Vec<String> {
    crate::acl::user_specs(cfg)
        .iter()
        .map(|u| u.canonical())
        .collect()
}

impl Last {
    fn of(mut cfg: Config) -> Last {
        let users = user_lines(&cfg);
        cfg.forget_client_passwords();
        Last { config: cfg, users }
    }
}

/// The reload state of one process (in `Shared`).
pub struct Reload {
    read: Option<ReadConfig>,
    /// Held for a whole reload: reloads run one at a time.
    last: Mutex<Last>,
    /// The pending directives, comma-separated (INFO).
    pending: Mutex<String>,
    /// Reloads that applied, and reloads refused for a bad file (INFO).
    pub done: AtomicU64,
    pub failed: AtomicU64,
}

impl Reload {
    /// `read` reads the configuration again (`None`: started without a
    /// file); `loaded` is the configuration as read at start, before
    /// anything adjusted it or forgot its passwords.
    pub fn new(read: Option<ReadConfig>, loaded: Config) -> Reload {
        Reload {
            read,
            last: Mutex::new(Last::of(loaded)),
            pending: Mutex::new(String::new()),
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// The directives waiting for a restart, comma-separated ("" when
    /// none).
    pub fn pending(&self) -> String {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reads the configuration again and applies it to `shared` (see the
    /// module doc). `why` names the trigger in the log.
    pub fn run(&self, shared: &Shared, why: &str) -> Result<Applied, ReloadError> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let read = match &self.read {
            None => Err(ReloadError::NoFile),
            Some(read) => read().map_err(ReloadError::Config),
        };
        let mut cfg = match read {
            Ok(cfg) => cfg,
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                log::warn!(target: T, "{why}: configuration {e}; nothing changed");
                return Err(e);
            }
        };
        // Before anything changes: a TLS file that does not load fails the
        // whole reload.
        let tls = match crate::tls::reload(shared.tls.as_ref(), &cfg) {
            Ok(tls) => tls,
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                log::warn!(target: T, "{why}: configuration reload failed: {e}; nothing changed");
                return Err(ReloadError::Tls(e));
            }
        };
        let toward = shared.node_tls.as_ref().or(shared.sentinel_tls.as_ref());
        let nodes = match toward {
            Some(_) if cfg.tls.cluster || cfg.tls.sentinel => {
                match crate::tls::nodes::NodeTls::rebuild(
                    &cfg.tls,
                    &crate::server::pool_seeds(&cfg.server_pools()),
                ) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        self.failed.fetch_add(1, Ordering::Relaxed);
                        log::warn!(target: T, "{why}: configuration reload failed: {e}; nothing changed");
                        return Err(ReloadError::Tls(e));
                    }
                }
            }
            _ => None,
        };
        let mut applied = Applied::default();
        pools::apply(shared, &cfg, &mut applied);
        for d in DIRECTIVES {
            if USER_DIRECTIVES.contains(&d.name)
                || POOL_DIRECTIVES.contains(&d.name)
                || (tls.is_some() && crate::tls::RELOADED.contains(&d.name))
                || (nodes.is_some() && crate::tls::NODES_RELOADED.contains(&d.name))
            {
                continue;
            }
            if d.runtime_settable {
                if !d.same_in(&last.config, &cfg) && crate::local::apply_live(shared, d, &cfg) {
                    applied.live.push(d.name);
                }
            } else if !d.same_in(&shared.config, &cfg) {
                applied.pending.push(d.name);
            }
        }
        if let Some(tls) = tls {
            crate::tls::install(shared.tls.as_ref(), tls);
            applied.tls = true;
        }
        if let Some(cfg) = nodes {
            // One object when both are on: installing twice is harmless.
            for t in [&shared.node_tls, &shared.sentinel_tls]
                .into_iter()
                .flatten()
            {
                t.install(&cfg);
            }
            applied.tls = true;
        }
        let users = user_lines(&cfg);
        if users != last.users {
            applied.users = Some(shared.admin.acl.replace_users(&cfg));
        }
        cfg.forget_client_passwords();
        *last = Last { config: cfg, users };
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = applied.pending.join(",");
        self.done.fetch_add(1, Ordering::Relaxed);
        log_outcome(why, &applied);
        Ok(applied)
    }
}

impl Reload {
    /// CONFIG REWRITE: writes `running`'s values of the directives that
    /// change at run time into the file mithril was started with
    /// (`config::rewrite`), and counts them as the file's last read, so a
    /// reload of the rewritten file finds nothing to apply. Holds the
    /// reload lock: a rewrite and a reload never interleave. The error is
    /// the reply's text, Redis's where Redis has one.
    pub fn rewrite(&self, shared: &Shared, running: &Config) -> Result<(), String> {
        use crate::config::{compat, rewrite};
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let Some(path) = &shared.config.config_file else {
            return Err("The server is running without a config file".to_string());
        };
        let fail = |why: String| format!("Rewriting config file: {why}");
        let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
        let format = compat::detect(&bytes);
        if format != compat::Format::Native {
            return Err(fail(format!(
                "mithril was started from a {}, and CONFIG REWRITE writes only mithril's own \
                 format; `mithril -t --print-config {}` prints the running file's translation",
                format.describe(),
                path.display()
            )));
        }
        let old = String::from_utf8(bytes).map_err(|_| fail("the file is not UTF-8".into()))?;
        let managed: Vec<_> = DIRECTIVES.iter().filter(|d| d.runtime_settable).collect();
        let new = rewrite::rewrite_text(&old, running, &managed);
        rewrite::write_atomically(path, &new).map_err(|e| fail(e.to_string()))?;
        for d in &managed {
            let _ = d.copy(running, &mut last.config);
        }
        log::info!(target: T, "CONFIG REWRITE: {} written", path.display());
        Ok(())
    }
}

/// One line for what was applied; a warning naming what waits for a
/// restart.
fn log_outcome(why: &str, a: &Applied) {
    let mut done: Vec<String> = a.live.iter().map(|n| n.to_string()).collect();
    if let Some(n) = a.users {
        done.push(format!("the users ({n} now)"));
    }
    if a.tls {
        done.push("TLS (certificates and settings, for new handshakes)".to_string());
    }
    if done.is_empty() {
        log::info!(target: T, "{why}: configuration reloaded, nothing to change");
    } else {
        log::info!(target: T, "{why}: configuration reloaded, applied: {}", done.join(", "));
    }
    if !a.pending.is_empty() {
        log::warn!(
            target: T,
            "{why}: configuration reload: pending restart: {} (differ from the running configuration; applied at the next start)",
            a.pending.join(", ")
        );
    }
}
