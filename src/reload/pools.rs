//! The pools in a reload: each pool of the file is matched by name with
//! the running pool of that name (`Shared::pools`, which keeps the spec
//! each one runs with).
//!
//! ```text
//!   in the file, not running ──► added: runtime pushed, map published, then listeners
//!   running, not in the file ──► removed: listeners closed (clients drain),
//!                                 map kept for shutdown-timeout, then emptied
//!   in both, same shape ───────► seeds, servers, groups, listeners changed live
//!   in both, other settings ───► pending restart (the pool runs as it was)
//! ```
//!
//! The shape of a pool is its spec without its members (a cluster's
//! seeds, a ring's servers, the groups) and its listeners: the settings
//! the workers keep copies of (`PoolRuntime`: credentials, database,
//! timeouts, connections per node) or that place keys (hash,
//! distribution, tag). Changing those under clients would move their
//! data or their session's rules, so it waits for a restart; a pool can
//! still be renamed (removed and added) to change them live.
//!
//! Order matters where a client could be placed by a map that lacks its
//! pool: an added pool's runtime goes into the table first, then its map
//! is published (the reload waits for the topology thread to say so),
//! and only then are its listeners handed to the acceptor. A removed
//! pool's listeners are closed at once; its map stays until its clients
//! had `shutdown-timeout` to finish, as under SIGTERM.

use super::{Applied, T};
use crate::config::pool::{PoolKind, PoolSpec, DEFAULT_POOL};
use crate::config::Config;
use crate::shared::{ListenerChange, PoolRuntime, Shared};
use std::time::{Duration, Instant};

/// How long a reload waits for the topology thread to publish an added
/// pool's map before it opens the pool's listeners anyway (its clients
/// then get the no-topology error until the map is in).
const ADD_WAIT: Duration = Duration::from_secs(5);

/// Put the file's pools in force (see the module doc).
pub(super) fn apply(shared: &Shared, cfg: &Config, applied: &mut Applied) {
    let file = cfg.server_pools();
    let mut changes = Vec::new();
    for (i, rt) in shared.pools.iter().enumerate() {
        if !rt.is_retired() && !file.iter().any(|p| p.name == rt.name) {
            remove(shared, cfg, i, rt, &mut changes);
            note(applied, "pool");
        }
    }
    for pool in &file {
        match shared.pools.index_of(&pool.name) {
            Some(i) => change(shared, cfg, i, pool, &mut changes, applied),
            None => add(shared, cfg, pool, &mut changes, applied),
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
    note(applied, "listeners");
}

fn note(applied: &mut Applied, name: &'static str) {
    if !applied.live.contains(&name) {
        applied.live.push(name);
    }
}

/// The directive a pool is declared by, as the log and INFO name it.
fn directive(cfg: &Config, pool: &PoolSpec) -> &'static str {
    if pool.name == DEFAULT_POOL && !cfg.cluster_nodes.is_empty() {
        "cluster-nodes"
    } else {
        "pool"
    }
}

/// `pool` with its members and listeners left out: what must stay as it
/// runs for those to change live. A pool's `tls-listen` addresses count
/// among its listeners when a TLS configuration runs (`tls_live`);
/// without one they wait for a restart.
fn shape(pool: &PoolSpec, tls_live: bool) -> PoolSpec {
    let mut p = pool.clone();
    match &mut p.kind {
        PoolKind::Cluster { seeds } => seeds.clear(),
        PoolKind::Ring { servers, .. } => servers.clear(),
        PoolKind::Groups(g) => {
            g.groups.clear();
            g.sentinels.clear();
        }
    }
    p.listen.clear();
    if tls_live {
        p.tls_listen.clear();
    }
    p
}

/// The listener sets of `pool`: (addresses, TLS). The default pool
/// listens on each `bind` address at `port` and, with a TLS listener, at
/// `tls-port` too.
fn listener_sets(shared: &Shared, cfg: &Config, pool: &PoolSpec) -> Vec<(Vec<String>, bool)> {
    let mut sets = vec![(pool.listen.clone(), false)];
    if shared.tls.is_some() {
        sets.push((pool.tls_listen.clone(), true));
        let tls_port = shared.config.tls.port;
        if directive(cfg, pool) == "cluster-nodes" && tls_port != 0 {
            let twin = pool
                .listen
                .iter()
                .filter_map(|l| Some(format!("{}:{tls_port}", l.rsplit_once(':')?.0)))
                .collect();
            sets.push((twin, true));
        }
    }
    sets
}

/// A listener for pool `i` at `l`, bound here so that a failure is logged
/// with the reload.
fn bind(cfg: &Config, pool: &PoolSpec, i: usize, l: &str, tls: bool) -> Option<ListenerChange> {
    let backlog = if pool.backlog > 0 {
        pool.backlog as i32
    } else {
        cfg.tcp_backlog
    };
    let bound = match crate::server::listen_addr(l) {
        // `port 0`: no plain listener, as at start.
        Some(addr) if addr.port() == 0 => return None,
        Some(addr) => crate::upgrade::listen(addr, backlog)
            .map(|s| (s, addr))
            .map_err(|e| format!("cannot listen on {addr}: {e}")),
        None => Err(format!("cannot resolve {l}")),
    };
    match bound {
        Ok((s, addr)) => Some(ListenerChange::Add(s, addr, i, tls)),
        Err(e) => {
            log::warn!(target: T, "pool {}: {e}; the rest of the reload applies", pool.name);
            None
        }
    }
}

fn unbind(l: &str) -> Option<ListenerChange> {
    crate::server::listen_addr(l)
        .filter(|a| a.port() != 0)
        .map(ListenerChange::Remove)
}

/// A pool the file no longer has: retired, its listeners closed, its map
/// kept while its clients drain.
fn remove(
    shared: &Shared,
    cfg: &Config,
    i: usize,
    rt: &PoolRuntime,
    changes: &mut Vec<ListenerChange>,
) {
    let spec = rt.spec.lock().unwrap_or_else(|p| p.into_inner()).clone();
    rt.retire();
    for (set, _) in listener_sets(shared, cfg, &spec) {
        changes.extend(set.iter().filter_map(|l| unbind(l)));
    }
    let drain = Duration::from_secs(cfg.shutdown_timeout_secs.max(1));
    shared.topology.retire_pool(i, Instant::now() + drain);
    log::info!(target: T, "pool {}: removed; its clients drain (at most {}s)", rt.name, drain.as_secs());
}

/// A pool the file adds: its runtime, then its map, then its listeners.
fn add(
    shared: &Shared,
    cfg: &Config,
    pool: &PoolSpec,
    changes: &mut Vec<ListenerChange>,
    applied: &mut Applied,
) {
    if shared.tls.is_none() && !pool.tls_listen.is_empty() {
        log::warn!(target: T, "pool {}: tls-listen needs a TLS listener at start; the pool waits for a restart", pool.name);
        applied.pending.push(directive(cfg, pool));
        return;
    }
    let rt = PoolRuntime::new(cfg, pool);
    let source = crate::server::pool_source(pool, &rt);
    let i = match shared.pools.push(rt) {
        Some(i) => i,
        None => {
            log::warn!(
                target: T,
                "pool {}: the process has had {} pools, its most; the pool waits for a restart",
                pool.name,
                crate::shared::pools::MAX_POOLS
            );
            applied.pending.push(directive(cfg, pool));
            return;
        }
    };
    if !shared.topology.add_pool(i, source, ADD_WAIT) {
        log::warn!(target: T, "pool {}: its map is not published yet; its clients get errors until it is", pool.name);
    }
    for (set, tls) in listener_sets(shared, cfg, pool) {
        for l in &set {
            // An address a pool this reload removed listened on (a pool
            // renamed): the listener is handed over, not bound again.
            let addr = crate::server::listen_addr(l);
            let freed = changes
                .iter()
                .position(|c| matches!(c, ListenerChange::Remove(a) if Some(*a) == addr));
            match (freed, addr) {
                (Some(at), Some(addr)) => changes[at] = ListenerChange::Move(addr, i, tls),
                _ => changes.extend(bind(cfg, pool, i, l, tls)),
            }
        }
    }
    log::info!(target: T, "pool {}: added", pool.name);
    note(applied, directive(cfg, pool));
}

/// A pool in the file and running: its members and listeners change when
/// nothing else of it did; otherwise it is pending.
fn change(
    shared: &Shared,
    cfg: &Config,
    i: usize,
    new: &PoolSpec,
    changes: &mut Vec<ListenerChange>,
    applied: &mut Applied,
) {
    let rt = &shared.pools[i];
    let mut spec = rt.spec.lock().unwrap_or_else(|p| p.into_inner());
    if *spec == *new {
        return;
    }
    let tls_live = shared.tls.is_some();
    if shape(&spec, tls_live) != shape(new, tls_live) {
        log::warn!(target: T, "pool {}: settings besides its servers and listeners changed; they wait for a restart", new.name);
        applied.pending.push(directive(cfg, new));
        return;
    }
    let (before, after) = (
        listener_sets(shared, cfg, &spec),
        listener_sets(shared, cfg, new),
    );
    for ((old, _), (now, tls)) in before.iter().zip(&after) {
        changes.extend(
            now.iter()
                .filter(|l| !old.contains(l))
                .filter_map(|l| bind(cfg, new, i, l, *tls)),
        );
        changes.extend(
            old.iter()
                .filter(|l| !now.contains(l))
                .filter_map(|l| unbind(l)),
        );
    }
    if members(shared, rt, i, &spec, new) {
        note(applied, directive(cfg, new));
    }
    *spec = new.clone();
}

/// The members of running pool `i` from `old` to `new`: a cluster's
/// seeds (tried after the nodes it knows, with a refresh at once), a
/// ring's servers (the ring rebuilt with a fresh health record), a pool
/// of groups' groups and sentinels (its part rebuilt; the watchers follow
/// the new sentinels). True when one changed.
fn members(shared: &Shared, rt: &PoolRuntime, i: usize, old: &PoolSpec, new: &PoolSpec) -> bool {
    match (&old.kind, &new.kind) {
        (PoolKind::Cluster { seeds: a }, PoolKind::Cluster { seeds: b }) if a != b => {
            shared.topology.set_seeds(i, b.clone());
        }
        (PoolKind::Ring { servers: a, .. }, PoolKind::Ring { servers: b, .. }) if a != b => {
            let Some(health) = crate::shared::ring_health(new) else {
                return false;
            };
            if let Some(h) = &rt.health {
                h.store(health.clone());
            }
            let servers = crate::server::ring_order(b);
            shared.topology.set_ring(i, (servers, health));
        }
        (PoolKind::Groups(a), PoolKind::Groups(b))
            if a.groups != b.groups || a.sentinels != b.sentinels =>
        {
            shared
                .topology
                .set_groups(i, crate::server::groups_source(&new.name, b));
        }
        _ => return false,
    }
    true
}
