//! The pools as the workers, the acceptor and the reload see them besides
//! their maps: one [`PoolRuntime`] per pool, in a [`PoolTable`] indexed
//! as the topology's pools are.
//!
//! ```text
//!   start: Config::server_pools() ──► PoolTable [0, 1, .., n-1]
//!   reload adds pool P ─────────────► push: index n (never reused)
//!   reload removes pool Q ──────────► Q.retired set; its index stays
//! ```
//!
//! Indices are stable for the life of the process: a session, a backend
//! connection and the statistics carry a pool's index, and it must name
//! the same pool until they are gone. So the table only grows, and a
//! removed pool keeps its slot, marked retired (its clients drain, and
//! the topology empties its part once they had their time). The table
//! has room for [`MAX_POOLS`] pools over the life of the process (those
//! at start, plus every pool a reload added); a reload that would pass it
//! names the pool as pending a restart. Reads are lock-free: a slot is
//! written once (`OnceLock`), before the pool's map is published and
//! before its listener accepts anyone.

use crate::config::pool::{PoolKind, PoolSpec};
use crate::config::Config;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Pools a process can have over its life: at start plus added by
/// reloads (a removed pool's index is not reused).
pub const MAX_POOLS: usize = 1024;

/// Every pool the process has served, by index.
pub struct PoolTable {
    slots: Box<[OnceLock<Box<PoolRuntime>>]>,
    len: AtomicUsize,
}

impl PoolTable {
    pub fn new(pools: Vec<PoolRuntime>) -> PoolTable {
        let t = PoolTable {
            slots: (0..MAX_POOLS.max(pools.len()))
                .map(|_| OnceLock::new())
                .collect(),
            len: AtomicUsize::new(0),
        };
        for p in pools {
            let _ = t.push(p);
        }
        t
    }

    /// Pool `i` (retired or not); None past the last.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&PoolRuntime> {
        self.slots.get(i)?.get().map(|b| &**b)
    }

    /// How many pools the table holds, retired ones included.
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every pool, by index, retired ones included.
    pub fn iter(&self) -> impl Iterator<Item = &PoolRuntime> {
        self.slots[..self.len()]
            .iter()
            .filter_map(|s| s.get().map(|b| &**b))
    }

    /// The index of the pool named `name` that is not retired.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.iter().position(|p| p.name == name && !p.is_retired())
    }

    /// Add `pool` at the next index, which it returns; None (and the
    /// pool dropped) when the table is full. Only the start and the
    /// reload (one at a time, under its lock) add pools.
    pub fn push(&self, pool: PoolRuntime) -> Option<usize> {
        let i = self.len.load(Ordering::Acquire);
        self.slots.get(i)?.set(Box::new(pool)).ok()?;
        self.len.store(i + 1, Ordering::Release);
        Some(i)
    }
}

impl std::ops::Index<usize> for PoolTable {
    type Output = PoolRuntime;

    fn index(&self, i: usize) -> &PoolRuntime {
        match self.get(i) {
            Some(p) => p,
            None => panic!("no pool {i}"),
        }
    }
}

/// What the workers need of one pool besides its map.
pub struct PoolRuntime {
    pub name: String,
    /// The pool as the configuration last put in force (at start, or by
    /// the reload that added it or changed its members or listeners):
    /// what the next reload compares the file with. Locked by the reload
    /// and by the listing of the pools' addresses.
    pub spec: Mutex<PoolSpec>,
    /// Sent first on every connection to the pool's nodes: AUTH with the
    /// pool's `password`, else with `backend-user` / `backend-password`.
    pub auth: Option<bytes::Bytes>,
    /// The pool's database (twemproxy's `redis_db`): where its sessions
    /// start, and what its connections select.
    pub db: u32,
    /// How many databases its clients may SELECT among (1: SELECT 0 only).
    pub databases: u32,
    /// The password the pool's clients AUTH with (twemproxy's
    /// `redis_auth`); None: the users of the configuration apply.
    pub client_password: Option<String>,
    /// A ring pool's servers in and out of the ring (with
    /// `auto-eject-hosts`), in twemproxy's order: replaced whole when a
    /// reload changes the servers (`reload::ring_servers`).
    pub health: Option<arc_swap::ArcSwap<crate::topology::health::RingHealth>>,
    /// How long a server may take to answer (None: no limit).
    pub timeout: Option<std::time::Duration>,
    /// Connections per node per worker.
    pub conns: usize,
    /// Connect to every node at start.
    pub preconnect: bool,
    /// A ring pool (its units are servers), not a cluster.
    pub ring: bool,
    /// A pool of master-replica groups (predixy's standalone and Sentinel
    /// pools): its errors are predixy's where they differ.
    pub groups: bool,
    /// Its open clients (the acceptor's count) and its own bound on them
    /// (`client-connections`; 0: only `maxclients`).
    pub clients: Arc<AtomicUsize>,
    pub client_connections: usize,
    /// A reload removed it: its listeners are closed, its clients drain.
    retired: AtomicBool,
}

impl PoolRuntime {
    pub fn new(cfg: &Config, pool: &PoolSpec) -> PoolRuntime {
        let auth = if pool.password.is_empty() {
            crate::backend::auth::frame(cfg)
        } else {
            let mut out = Vec::with_capacity(32 + pool.password.len());
            crate::resp::encode::request(&mut out, &[b"AUTH", pool.password.as_bytes()]);
            Some(bytes::Bytes::from(out))
        };
        let health = ring_health(pool).map(arc_swap::ArcSwap::new);
        let timeout_ms = if pool.timeout_ms > 0 {
            pool.timeout_ms
        } else {
            cfg.backend_timeout_ms
        };
        PoolRuntime {
            name: pool.name.clone(),
            spec: Mutex::new(pool.clone()),
            auth,
            db: pool.db,
            databases: pool.databases(),
            client_password: (!pool.password.is_empty()).then(|| pool.password.clone()),
            health,
            timeout: (timeout_ms > 0).then(|| std::time::Duration::from_millis(timeout_ms)),
            conns: if pool.server_connections > 0 {
                pool.server_connections
            } else {
                cfg.backend_conns
            },
            preconnect: pool.preconnect,
            ring: !pool.is_cluster(),
            groups: matches!(pool.kind, PoolKind::Groups(_)),
            clients: Arc::new(AtomicUsize::new(0)),
            client_connections: pool.client_connections,
            retired: AtomicBool::new(false),
        }
    }

    /// The ring's health as it is now (None: not a ring pool).
    #[inline]
    pub fn ring_health(&self) -> Option<arc_swap::Guard<Arc<crate::topology::health::RingHealth>>> {
        self.health.as_ref().map(|h| h.load())
    }

    /// What the topology thread's probe sends first, and how it words a
    /// refusal.
    pub fn probe_auth(&self) -> Option<crate::topology::probe::Auth> {
        self.auth.clone().map(|frame| crate::topology::probe::Auth {
            frame,
            refused: crate::backend::auth::setup_failure,
        })
    }

    /// A reload removed the pool.
    #[inline]
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    /// The addresses its clients connect to (`listen`), as the
    /// configuration in force names them.
    pub fn listen(&self) -> Vec<String> {
        let spec = self.spec.lock().unwrap_or_else(|p| p.into_inner());
        spec.listen.clone()
    }
}

/// A fresh health record for ring pool `pool`'s servers (None: not a
/// ring pool): at start, and when a reload changes its servers.
pub fn ring_health(pool: &PoolSpec) -> Option<Arc<crate::topology::health::RingHealth>> {
    match &pool.kind {
        PoolKind::Ring {
            servers,
            auto_eject_hosts,
            server_retry_timeout_ms,
            server_failure_limit,
            ..
        } => Some(Arc::new(crate::topology::health::RingHealth::new(
            servers.len(),
            *auto_eject_hosts,
            *server_failure_limit,
            *server_retry_timeout_ms,
        ))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> PoolRuntime {
        let cfg = Config::default();
        let spec = PoolSpec::new(
            name,
            PoolKind::Cluster {
                seeds: vec!["127.0.0.1:7000".into()],
            },
        );
        PoolRuntime::new(&cfg, &spec)
    }

    #[test]
    fn indices_stay_and_a_retired_pool_is_not_found_by_name() {
        let t = PoolTable::new(vec![pool("a"), pool("b")]);
        assert_eq!(t.len(), 2);
        t[1].retire();
        assert_eq!(t.index_of("b"), None);
        assert_eq!(t.push(pool("b")), Some(2));
        assert_eq!(t.index_of("b"), Some(2));
        assert_eq!(t.get(1).map(|p| p.is_retired()), Some(true));
        assert!(t.get(3).is_none());
        assert_eq!(t.iter().count(), 3);
    }

    #[test]
    fn a_full_table_gives_the_pool_back() {
        let t = PoolTable::new(Vec::new());
        for i in 0..MAX_POOLS {
            assert_eq!(t.push(pool("p")), Some(i));
        }
        assert!(t.push(pool("q")).is_none());
        assert_eq!(t.len(), MAX_POOLS);
    }
}
