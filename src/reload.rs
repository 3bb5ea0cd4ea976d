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
//! Seeds and listeners: `cluster-nodes`, a pool's `cluster-nodes`, `bind`,
//! `port`, a pool's `listen` and (when a TLS configuration runs, from a
//! `tls-port` or a `tls-listen` at start) its `tls-listen` change live
//! when the pools are otherwise
//! the ones that run: the topology thread tries the new seeds after the
//! nodes it knows, and refreshes at once; a new listener is bound here
//! and handed to the acceptor, a removed one closed and its clients
//! drained (they read nothing more, get their replies and are closed).
//! The default pool listens on each `bind` address at `port` and, with a
//! TLS listener, at `tls-port`: an address added or removed adds or
//! removes both.
//!
//! A pool of servers' servers (`pool NAME server` lines, a nutcracker.yml
//! pool's `servers`) change live the same way: the topology thread
//! rebuilds the ring from the new list and publishes it with the next
//! epoch, so each worker places the requests it reads after that by the
//! new ring, and retires (drains) its connections to a server the ring no
//! longer has, as when a cluster node leaves. The ring's health record
//! (`Shared::pools`, indexed by the list in twemproxy's order) starts
//! afresh for the new list; a failure a worker counts between that swap
//! and its next turn (when it takes the new map and renumbers its
//! connections, `worker/live.rs`) may land on the server the new list
//! has at the old index: one count toward an ejection, at most. A pool of
//! groups' groups (`pool NAME group` lines) change the same way when the
//! pool has no sentinels (its whole truth is the file). Any other change
//! to the pools is pending: a pool added or removed, its other settings,
//! and a Sentinel pool's groups (its watchers and the sentinels it learnt
//! belong to the running source).
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
//! after the reload use them; `tls-cluster` and `tls-server-name` wait
//! for a restart.
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

use crate::config::{Config, ConfigError, DIRECTIVES};
use crate::shared::Shared;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Reads the configuration again as it was read at start; the result is
/// validated.
pub type ReadConfig = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// The directives that make up the users: compared and applied together.
const USER_DIRECTIVES: &[&str] = &["user", "requirepass"];

/// The directives that say where the pools are (`seeds`): their seeds
/// change live, the rest of them needs a restart.
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
        let nodes = match shared.node_tls.as_ref() {
            Some(_) if cfg.tls.cluster => match crate::tls::nodes::NodeTls::rebuild(&cfg.tls) {
                Ok(c) => Some(c),
                Err(e) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    log::warn!(target: T, "{why}: configuration reload failed: {e}; nothing changed");
                    return Err(ReloadError::Tls(e));
                }
            },
            _ => None,
        };
        let mut applied = Applied::default();
        seeds(shared, &last.config, &cfg, &mut applied);
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
        if let (Some(cfg), Some(node_tls)) = (nodes, shared.node_tls.as_ref()) {
            node_tls.install(cfg);
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

/// The pools `cfg` serves with their cluster seeds, listeners, ring
/// servers and fixed groups left out: what must stay as it runs for
/// those to change live.
/// A pool's `tls-listen` addresses count among its listeners when a TLS
/// configuration runs (`tls_live`); without one they wait for a restart.
fn shape(cfg: &Config, tls_live: bool) -> Vec<crate::config::pool::PoolSpec> {
    use crate::config::pool::PoolKind;
    let mut pools = cfg.server_pools();
    for p in &mut pools {
        match &mut p.kind {
            PoolKind::Cluster { seeds } => seeds.clear(),
            PoolKind::Ring { servers, .. } => servers.clear(),
            // A Sentinel pool's groups stay as they are: its watchers and
            // the sentinels it learnt belong to the running source.
            PoolKind::Groups(g) if !g.uses_sentinel() => g.groups.clear(),
            PoolKind::Groups(_) => {}
        }
        p.listen.clear();
        if tls_live {
            p.tls_listen.clear();
        }
    }
    pools
}

/// Pools whose members the file changed since it was last read (a ring's
/// servers, a pool of groups' groups): the new list goes to the topology
/// thread, which rebuilds the pool's part and publishes it with the next
/// epoch (workers then place by it, and retire the connections to a node
/// it no longer has as when a cluster node leaves); a ring gets a fresh
/// health record in place of the old one.
fn pool_members(shared: &Shared, last: &Config, cfg: &Config, applied: &mut Applied) {
    use crate::config::pool::PoolKind;
    let (before, after) = (last.server_pools(), cfg.server_pools());
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        match (&a.kind, &b.kind) {
            (PoolKind::Ring { servers: old, .. }, PoolKind::Ring { servers: new, .. })
                if old != new =>
            {
                let (Some(health), Some(rt)) = (crate::shared::ring_health(b), shared.pools.get(i))
                else {
                    continue;
                };
                if let Some(h) = &rt.health {
                    h.store(health.clone());
                }
                let servers = crate::server::ring_order(new);
                shared.topology.set_ring(i, (servers, health));
            }
            (PoolKind::Groups(old), PoolKind::Groups(new)) if old.groups != new.groups => {
                let groups = crate::server::groups_source(&b.name, new);
                shared.topology.set_groups(i, groups);
            }
            _ => continue,
        }
        if !applied.live.contains(&"pool") {
            applied.live.push("pool");
        }
    }
}

/// The cluster seeds of each pool of `cfg`, in the pools' order (empty for
/// a pool that is not a cluster).
fn seed_lists(cfg: &Config) -> Vec<Vec<String>> {
    use crate::config::pool::PoolKind;
    cfg.server_pools()
        .into_iter()
        .map(|p| match p.kind {
            PoolKind::Cluster { seeds } => seeds,
            _ => Vec::new(),
        })
        .collect()
}

/// `cluster-nodes` and the `pool` lines: when the pools are the ones that
/// run but for their seeds, the seeds the file changed since it was last
/// read go to the topology thread (tried after the nodes it knows); any
/// other change is pending.
fn seeds(shared: &Shared, last: &Config, cfg: &Config, applied: &mut Applied) {
    let tls_live = shared.tls.is_some();
    if shape(cfg, tls_live) != shape(&shared.config, tls_live) {
        for name in POOL_DIRECTIVES {
            if let Some(d) = DIRECTIVES.iter().find(|d| d.name == *name) {
                if !d.same_in(&shared.config, cfg) {
                    applied.pending.push(d.name);
                }
            }
        }
        return;
    }
    listeners(shared, last, cfg, applied);
    pool_members(shared, last, cfg, applied);
    let (before, after) = (seed_lists(last), seed_lists(cfg));
    let declared_from = usize::from(!cfg.cluster_nodes.is_empty());
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        if a != b {
            shared.topology.set_seeds(i, b.clone());
            let name = if i < declared_from {
                "cluster-nodes"
            } else {
                "pool"
            };
            if !applied.live.contains(&name) {
                applied.live.push(name);
            }
        }
    }
}

/// Listeners the file added (bound here, so that a failure is logged
/// with the reload) or removed, per pool, handed to the acceptor; the
/// clients of a removed one drain. The default pool's are its `bind`
/// addresses at `port` and, when a TLS listener runs, at `tls-port` too.
fn listeners(shared: &Shared, last: &Config, cfg: &Config, applied: &mut Applied) {
    use crate::shared::ListenerChange;
    let (before, after) = (last.server_pools(), cfg.server_pools());
    let tls_port = match &shared.tls {
        Some(_) => shared.config.tls.port,
        None => 0,
    };
    let mut changes = Vec::new();
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        let backlog = if b.backlog > 0 {
            b.backlog as i32
        } else {
            cfg.tcp_backlog
        };
        let mut sets = vec![(a.listen.clone(), b.listen.clone(), false)];
        if shared.tls.is_some() {
            sets.push((a.tls_listen.clone(), b.tls_listen.clone(), true));
        }
        if i == 0 && !cfg.cluster_nodes.is_empty() && tls_port != 0 {
            sets.push((last.bind_addrs(tls_port), cfg.bind_addrs(tls_port), true));
        }
        for (old, new, tls) in sets {
            for l in new.iter().filter(|l| !old.contains(l)) {
                let bound = match crate::server::listen_addr(l) {
                    // `port 0`: no plain listener, as at start.
                    Some(addr) if addr.port() == 0 => continue,
                    Some(addr) => crate::upgrade::listen(addr, backlog)
                        .map(|s| (s, addr))
                        .map_err(|e| format!("cannot listen on {addr}: {e}")),
                    None => Err(format!("cannot resolve {l}")),
                };
                match bound {
                    Ok((s, addr)) => changes.push(ListenerChange::Add(s, addr, i, tls)),
                    Err(e) => {
                        log::warn!(target: T, "pool {}: {e}; the rest of the reload applies", b.name)
                    }
                }
            }
            for l in old.iter().filter(|l| !new.contains(l)) {
                if let Some(addr) = crate::server::listen_addr(l).filter(|a| a.port() != 0) {
                    changes.push(ListenerChange::Remove(addr));
                }
            }
        }
    }
    if changes.is_empty() {
        return;
    }
    shared
        .listener_changes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(changes);
    if let Some(w) = shared.acceptor.get() {
        let _ = w.wake();
    }
    applied.live.push("listeners");
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
