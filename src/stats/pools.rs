//! The statistics per server pool and per server: the workers' summed
//! figures ([`Totals`]) grouped by pool through the map every reader
//! already loads (`Topology::pools`), with each ring's health
//! (`topology::health`). What twemproxy's stats JSON, the Prometheus
//! labels and INFO's pool lines are made of, so the three agree.
//!
//! ```text
//!   Totals.pools[i] ──────────────┐
//!   Totals.nodes (pool, addr) ────┼──► PoolView i ── ServerView per server
//!   Topology.pools[i].shards ─────┤      (named as twemproxy names it)
//!   Shared.pools[i].health ───────┘
//! ```
//!
//! A ring pool's servers are its map's shards in twemproxy's order, each
//! named by its twemproxy name (`Node::id`), listed whether or not a
//! worker ever connected. A cluster pool's servers are its map's nodes
//! (masters and replicas) and any other node a worker counted for the
//! pool (one the map no longer names), named `host:port`, sorted by
//! address.
//!
//! Never: touch a worker's live counters (readers only get snapshots), or
//! take a lock.

use super::{NodeSnap, PoolCounters, Totals};
use crate::shared::Shared;
use crate::topology::snapshot::Layout;
use crate::topology::{Role, Topology};
use std::net::SocketAddr;

/// One pool as readers show it.
pub struct PoolView<'a> {
    /// Its index (`Shared::pools`, `Topology::pools`).
    pub index: usize,
    pub name: &'a str,
    /// A ring of standalone servers (else a Redis Cluster or groups).
    pub ring: bool,
    /// Master-replica groups (predixy's standalone and Sentinel pools).
    pub groups: bool,
    /// The addresses its clients connect to.
    pub listen: Vec<String>,
    pub counters: PoolCounters,
    /// twemproxy's `server_ejects`: for a ring, the ejections of its
    /// servers since start (`RingHealth::ejections`, summed); for a
    /// cluster, its nodes whose connection sets back off after failed
    /// connects now.
    pub server_ejects: u64,
    pub servers: Vec<ServerView<'a>>,
}

impl PoolView<'_> {
    pub fn kind(&self) -> &'static str {
        if self.ring {
            "ring"
        } else if self.groups {
            "groups"
        } else {
            "cluster"
        }
    }

    /// Servers that serve now: a ring's servers in the ring, a cluster's
    /// nodes the cluster reports healthy that no worker backs off from.
    pub fn live(&self) -> usize {
        self.servers.iter().filter(|s| s.live).count()
    }
}

/// One server of a pool.
pub struct ServerView<'a> {
    /// As twemproxy names it: a ring server's name, a cluster node's
    /// `host:port`.
    pub name: String,
    pub addr: SocketAddr,
    /// Its role in the map (None: a node the map no longer names).
    pub role: Option<Role>,
    /// What the workers counted for it in this pool (None: nothing yet).
    pub node: Option<&'a NodeSnap>,
    /// Times it was ejected, and the Unix microseconds of the last
    /// ejection (0: never); always 0 for a cluster's node.
    pub ejects: u64,
    pub ejected_at_us: u64,
    pub live: bool,
}

impl ServerView<'_> {
    pub fn role_name(&self) -> &'static str {
        match self.role {
            Some(Role::Master) => "master",
            Some(Role::Replica) => "replica",
            None => "unknown",
        }
    }
}

/// The figures of `pool`'s node at `addr` in `t` (its nodes are sorted by
/// pool, then address).
fn node_of(t: &Totals, pool: usize, addr: SocketAddr) -> Option<&NodeSnap> {
    t.nodes
        .binary_search_by_key(&(pool, addr), |n| (n.pool, n.addr))
        .ok()
        .map(|i| &t.nodes[i])
}

/// Every pool of `topo`, in order, with its servers (not those a reload
/// removed).
pub fn pools<'a>(shared: &'a Shared, topo: &'a Topology, t: &'a Totals) -> Vec<PoolView<'a>> {
    topo.pools
        .iter()
        .enumerate()
        .filter(|(index, _)| !shared.pools.get(*index).is_some_and(|r| r.is_retired()))
        .map(|(index, map)| {
            let runtime = shared.pools.get(index);
            let health = runtime.and_then(|r| r.ring_health());
            let health = health.as_deref().map(|h| &**h);
            let shards = topo.shards.get(map.shards.clone()).unwrap_or_default();
            let mut servers: Vec<ServerView<'a>> = Vec::new();
            if let Layout::Ring { .. } = map.layout {
                let live = health.map(|h| h.live()).unwrap_or_default();
                for (j, shard) in shards.iter().enumerate() {
                    let Some(n) = topo.nodes.get(shard.master) else {
                        continue;
                    };
                    let (ejects, ejected_at_us) = health.map_or((0, 0), |h| h.ejections(j));
                    servers.push(ServerView {
                        name: n.id.clone(),
                        addr: n.addr,
                        role: Some(n.role),
                        node: node_of(t, index, n.addr),
                        ejects,
                        ejected_at_us,
                        live: live.get(j).copied().unwrap_or(n.healthy),
                    });
                }
            } else {
                let members = shards
                    .iter()
                    .flat_map(|s| std::iter::once(s.master).chain(s.replicas.iter().copied()))
                    .filter_map(|i| topo.nodes.get(i));
                let mut seen = std::collections::HashSet::new();
                for n in members {
                    if !seen.insert(n.addr) {
                        continue;
                    }
                    let node = node_of(t, index, n.addr);
                    servers.push(ServerView {
                        name: n.addr.to_string(),
                        addr: n.addr,
                        role: Some(n.role),
                        node,
                        ejects: 0,
                        ejected_at_us: 0,
                        live: n.healthy && !node.is_some_and(|x| x.down),
                    });
                }
                for n in t.nodes.iter().filter(|n| n.pool == index) {
                    if !seen.insert(n.addr) {
                        continue;
                    }
                    servers.push(ServerView {
                        name: n.addr.to_string(),
                        addr: n.addr,
                        role: None,
                        node: Some(n),
                        ejects: 0,
                        ejected_at_us: 0,
                        live: !n.down,
                    });
                }
                servers.sort_by_key(|s| s.addr);
            }
            let server_ejects = match (&map.layout, health) {
                (Layout::Ring { .. }, Some(_)) => servers.iter().map(|s| s.ejects).sum(),
                _ => servers
                    .iter()
                    .filter(|s| s.node.is_some_and(|n| n.down))
                    .count() as u64,
            };
            PoolView {
                index,
                name: &map.name,
                ring: matches!(map.layout, Layout::Ring { .. }),
                groups: matches!(map.layout, Layout::Groups { .. }),
                listen: runtime.map(|r| r.listen()).unwrap_or_default(),
                counters: t.pool(index),
                server_ejects,
                servers,
            }
        })
        .collect()
}

/// Pool `pool`'s part of `topo`: its masters, its replicas, and its units
/// some shard serves (a cluster's slots, a ring's servers).
pub fn map_counts(topo: &Topology, pool: usize) -> (usize, usize, usize) {
    let Some(map) = topo.pools.get(pool) else {
        return (0, 0, 0);
    };
    let shards = topo.shards.get(map.shards.clone()).unwrap_or_default();
    let replicas = shards.iter().map(|s| s.replicas.len()).sum();
    let served = (0..map.units)
        .filter(|&u| topo.shard_of(map.base.wrapping_add(u as u16)).is_some())
        .count();
    (shards.len(), replicas, served)
}
