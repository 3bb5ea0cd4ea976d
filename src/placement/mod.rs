//! Placement: which backend serves a request, once the router has said
//! what the request is.
//!
//! ```text
//!   router::decide(view, args, &Locate) ──► Decision { unit, read, ... }
//!                                                │
//!   worker ──► Placement (one per worker) ───────┘
//!                master(unit) · reader(unit) · shard_master(shard)
//!                masters(pool) · any_master(pool) · home(pool)
//!                     │
//!                     ▼
//!               connection set (backend::pool) ──► a connection, a lease,
//!                                                  or a link to a pipe
//! ```
//!
//! Two words carry the whole seam:
//!
//! - A **unit** is what must stay together: every request that names
//!   keys of one unit may go to one node in one command (a transaction, a
//!   WATCH, a fan-out part), and a session's gates, pins and retry marks
//!   are kept per unit. For a Redis Cluster a unit is a slot (16,384 of
//!   them); for a ring of standalone servers it is a server. The router
//!   learns a key's unit through [`Locate`], the worker never computes one.
//! - A **shard** is one master (with its replicas) of the current map,
//!   numbered in the map's stable order; "every master" means every shard.
//!
//! [`Placement`] owns the map a worker routes by (`Arc<Topology>`), the
//! per-epoch tables from shard to connection set, the addresses MOVED
//! taught until the next epoch, the replica rule of `read-from-replicas`
//! and the rotation of keyless commands over the masters. Everything in
//! `src/worker/` that needs a backend for a unit or a shard asks here;
//! nothing else looks a connection set up by slot or shard
//! (`tools/check-seams` keeps it so).
//!
//! Invariants: the tables are rebuilt whole at each epoch
//! ([`Placement::install`]), so a shard index is only ever read against
//! the map it was made for; a MOVED override lives until the next epoch.
//! Never: block, allocate on the single-unit path, or answer a client.

#[cfg(test)]
mod tests;

use crate::backend::pool::{PoolKey, Pools};
use crate::config::ReadFrom;
use crate::resp::Proto;
use crate::topology::slot::SlotMap;
use crate::topology::{key_slot, Node, Topology};
use reactor::Key;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// What must stay together: a slot of a cluster, a server of a ring (see
/// the module doc).
pub type Unit = u16;

/// How the router learns where a key belongs: the one question routing
/// asks of a map. A pure function of the key and the map it was made from.
pub trait Locate {
    /// The unit `key` belongs to.
    fn unit_of(&self, key: &[u8]) -> Unit;
    /// Whether the map serves anything yet (while it does not, routed
    /// requests are refused with the no-topology error).
    fn is_known(&self) -> bool;
}

/// A cluster map places keys by slot.
impl Locate for Topology {
    #[inline]
    fn unit_of(&self, key: &[u8]) -> Unit {
        key_slot(key)
    }

    #[inline]
    fn is_known(&self) -> bool {
        !self.is_empty()
    }
}

fn proto_index(p: Proto) -> usize {
    match p {
        Proto::Resp2 => 0,
        Proto::Resp3 => 1,
    }
}

/// A worker's answer to "which backend": see the module doc.
pub struct Placement {
    /// The connection sets, one per (node, protocol, replica mode).
    pub conns: Pools,
    map: Arc<Topology>,
    /// The epoch the tables below were built for (`u64::MAX`: none yet).
    epoch: u64,
    /// shard → master connection set, per protocol (None: the shard has
    /// no master in the map).
    shard_master: Vec<Option<[usize; 2]>>,
    /// shard → replica connection sets, per protocol (only with
    /// `read-from-replicas`).
    shard_replicas: Vec<Vec<[usize; 2]>>,
    /// Unit → master address learned from MOVED, until the next epoch.
    overrides: SlotMap<SocketAddr>,
    read_from: ReadFrom,
    /// The rotation of keyless commands over the masters.
    rotation: usize,
}

impl Placement {
    /// A placement over `map`, with `conns_per_node` connections per node
    /// and protocol; `seed` varies each worker's backoff jitter and
    /// rotation start (`rotation`).
    pub fn new(
        map: Arc<Topology>,
        conns_per_node: usize,
        read_from: ReadFrom,
        seed: u64,
        rotation: usize,
    ) -> Placement {
        let mut p = Placement {
            conns: Pools::new(conns_per_node, seed),
            map: Arc::new(Topology::empty()),
            epoch: u64::MAX,
            shard_master: Vec::new(),
            shard_replicas: Vec::new(),
            overrides: SlotMap::default(),
            read_from,
            rotation,
        };
        // Nothing is connected yet: nothing to retire.
        let _ = p.install(map);
        p
    }

    /// The map requests are placed by.
    #[inline]
    pub fn map(&self) -> &Arc<Topology> {
        &self.map
    }

    /// The epoch of the installed map.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What the router locates keys with, for a session of pool `pool`.
    #[inline]
    pub fn locator(&self) -> &Topology {
        &self.map
    }

    /// Install a new map: rebuild the shard tables, forget MOVED's
    /// overrides, and retire the connection sets the map no longer names.
    /// Returns their connections: the caller closes each once nothing is
    /// in flight on it.
    pub fn install(&mut self, map: Arc<Topology>) -> Vec<Key> {
        self.shard_master.clear();
        self.shard_replicas.clear();
        let replicas = self.read_from != ReadFrom::No;
        for (i, shard) in map.shards.iter().enumerate() {
            let pair = map.master_of(i).map(|n| {
                [
                    self.conns.master_pool(n.addr, Proto::Resp2),
                    self.conns.master_pool(n.addr, Proto::Resp3),
                ]
            });
            self.shard_master.push(pair);
            let mut reps = Vec::new();
            if replicas {
                for &r in &shard.replicas {
                    let Some(n) = map.nodes.get(r) else { continue };
                    if !n.healthy {
                        continue;
                    }
                    let mut set = |proto| {
                        self.conns.pool_for(PoolKey {
                            addr: n.addr,
                            proto,
                            readonly: true,
                        })
                    };
                    reps.push([set(Proto::Resp2), set(Proto::Resp3)]);
                }
            }
            self.shard_replicas.push(reps);
        }
        self.overrides.clear();
        self.epoch = map.epoch;
        self.map = map;
        let named = self
            .shard_master
            .iter()
            .flatten()
            .chain(self.shard_replicas.iter().flatten())
            .flatten()
            .copied();
        self.conns.retire_unnamed(named)
    }

    // ----- units --------------------------------------------------------

    /// The unit of `key` in the installed map.
    #[inline]
    pub fn unit_of(&self, key: &[u8]) -> Unit {
        self.locator().unit_of(key)
    }

    /// The master connection set serving `unit`, as far as this worker
    /// knows (an address MOVED taught first, then the map).
    #[inline]
    pub fn master(&mut self, unit: Unit, proto: Proto) -> Option<usize> {
        if !self.overrides.is_empty() {
            if let Some(&addr) = self.overrides.get(&unit) {
                return Some(self.conns.master_pool(addr, proto));
            }
        }
        self.shard_master(self.map.shard_of(unit)?, proto)
    }

    /// Where a request of `unit` goes: its master, or for a read
    /// (`read`) one of the shard's replicas when `read-from-replicas`
    /// allows: `yes` spreads reads over the master and its replicas by the
    /// session's `sticky` number, `prefer-replica` sends them all to a
    /// replica that is not backing off.
    #[inline]
    pub fn reader(
        &mut self,
        unit: Unit,
        read: bool,
        proto: Proto,
        sticky: usize,
        now: Instant,
    ) -> Option<usize> {
        if read && self.read_from != ReadFrom::No {
            if let Some(set) = self.replica(unit, proto, sticky, now) {
                let use_replica = match self.read_from {
                    ReadFrom::PreferReplica => true,
                    _ => sticky % 2 == 1,
                };
                if use_replica {
                    return Some(set);
                }
            }
        }
        self.master(unit, proto)
    }

    /// Whether reads of a unit may be sent to a replica at all (a read
    /// that must see the master, such as a cache fill, asks first).
    #[inline]
    pub fn reads_replicas(&self) -> bool {
        self.read_from != ReadFrom::No
    }

    /// A replica connection set of the shard serving `unit` that is not
    /// backing off, chosen by `sticky`; None when there is none.
    fn replica(&self, unit: Unit, proto: Proto, sticky: usize, now: Instant) -> Option<usize> {
        if !self.overrides.is_empty() && self.overrides.contains_key(&unit) {
            return None; // the map is stale for this unit: go to the master
        }
        let reps = self.shard_replicas.get(self.map.shard_of(unit)?)?;
        let n = reps.len();
        (0..n)
            .map(|i| reps[(sticky + i) % n][proto_index(proto)])
            .find(|&p| !self.conns.is_down(p, now))
    }

    /// The master address serving `unit`, as far as this worker knows.
    pub fn owner(&self, unit: Unit) -> Option<SocketAddr> {
        if let Some(&addr) = self.overrides.get(&unit) {
            return Some(addr);
        }
        self.map.master_of(self.map.shard_of(unit)?).map(|n| n.addr)
    }

    /// The shard serving `unit` in the installed map.
    #[inline]
    pub fn shard_of(&self, unit: Unit) -> Option<usize> {
        self.map.shard_of(unit)
    }

    /// The master node the map gives `unit` (MOVED's overrides aside: a
    /// subscription follows the map, and its own redirects).
    pub fn master_node(&self, unit: Unit) -> Option<&Node> {
        self.map.master_of(self.map.shard_of(unit)?)
    }

    /// The healthy masters that serve units: where a node-local event
    /// (a keyspace notification) may be published.
    pub fn serving_masters(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        let map = &self.map;
        map.shards[self.masters()]
            .iter()
            .filter(|sh| !sh.ranges.is_empty())
            .filter_map(|sh| map.nodes.get(sh.master))
            .filter(|node| node.healthy)
            .map(|node| node.addr)
    }

    /// A MOVED said `unit` is served at `addr`: believed until the next
    /// epoch (bounded by the number of units).
    pub fn learn_moved(&mut self, unit: Unit, addr: SocketAddr) {
        self.overrides.insert(unit, addr);
    }

    /// The connection set another worker's request names (a pipe's
    /// owner serving a link).
    pub fn set_for(&mut self, key: PoolKey) -> usize {
        self.conns.pool_for(key)
    }

    /// The master connection set at `addr` (a redirect's target).
    pub fn at(&mut self, addr: SocketAddr, proto: Proto) -> usize {
        self.conns.master_pool(addr, proto)
    }

    // ----- shards -------------------------------------------------------

    /// The master connection set of `shard`.
    #[inline]
    pub fn shard_master(&self, shard: usize, proto: Proto) -> Option<usize> {
        self.shard_master
            .get(shard)
            .copied()
            .flatten()
            .map(|p| p[proto_index(proto)])
    }

    /// The shards a session's "every master" means.
    #[inline]
    pub fn masters(&self) -> Range<usize> {
        0..self.map.shards.len()
    }

    /// How many masters [`masters`](Self::masters) names.
    #[inline]
    pub fn master_count(&self) -> usize {
        self.masters().len()
    }

    /// One master for a command any master can answer, in rotation (None
    /// while the map has none).
    pub fn any_master(&mut self) -> Option<usize> {
        let masters = self.masters();
        if masters.is_empty() {
            return None;
        }
        self.rotation = self.rotation.wrapping_add(1);
        Some(masters.start + self.rotation % masters.len())
    }

    /// The master every subscriber connection goes to first, and where
    /// PUBLISH and PUBSUB are sent: the first shard of the map.
    #[inline]
    pub fn home(&self) -> Option<usize> {
        let masters = self.masters();
        (!masters.is_empty()).then_some(masters.start)
    }

    /// The address of the master connection set `set` talks to.
    #[inline]
    pub fn addr_of(&self, set: usize) -> SocketAddr {
        self.conns.pools[set].key.addr
    }

    /// A pseudo-random number (RANDOMKEY's choice among answers).
    pub fn random(&mut self) -> u64 {
        self.conns.random()
    }
}
