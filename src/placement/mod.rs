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
//!               connection set (backend::connset) ──► a connection, a lease,
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

use crate::backend::connset::{ConnSets, SetKey};
use crate::config::ReadFrom;
use crate::resp::Proto;
use crate::topology::slot::SlotMap;
use crate::topology::snapshot::{Layout, PoolMap};
use crate::topology::{key_slot, Node, Topology};
use reactor::Key;
use std::cell::Cell;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// What must stay together: a slot of a cluster, a server of a ring (see
/// the module doc).
pub type Unit = u16;

/// The unit of a key no server can take (a ring whose servers are all
/// ejected): no shard serves it.
pub const NOWHERE: Unit = Unit::MAX;

/// A pool, by its index in the map (`Topology::pools`), which is its index
/// in the configuration's pools (`Config::server_pools`).
pub type PoolId = usize;

/// How the router learns where a key belongs: the one question routing
/// asks of a map. A pure function of the key and the map it was made from.
pub trait Locate {
    /// The unit `key` belongs to.
    fn unit_of(&self, key: &[u8]) -> Unit;
    /// Whether the map serves anything yet (while it does not, routed
    /// requests are refused with the no-topology error).
    fn is_known(&self) -> bool;
    /// Whether the keys are on a Redis Cluster, whose nodes refuse keys of
    /// another slot themselves (CROSSSLOT) and answer the CLUSTER
    /// commands; a ring's standalone servers do neither, so the router
    /// checks that a single-node command's keys share a unit, and the
    /// proxy answers CLUSTER as a server without cluster support does.
    fn is_cluster(&self) -> bool {
        true
    }
    /// The refusal of a command whose keys are on several units of a map
    /// whose nodes do not refuse it themselves.
    fn cross_unit_reply(&self) -> bytes::Bytes {
        bytes::Bytes::from_static(b"-CROSSSLOT Keys in request don't hash to the same slot\r\n")
    }
}

/// A map places keys as its first pool does (a cluster's by slot): what a
/// one-pool map, as tests build them, means.
impl Locate for Topology {
    #[inline]
    fn unit_of(&self, key: &[u8]) -> Unit {
        match self.pools.first() {
            Some(pool) => PoolLocator { pool, random: 0 }.unit_of(key),
            None => key_slot(key),
        }
    }

    #[inline]
    fn is_known(&self) -> bool {
        !self.is_empty()
    }

    fn is_cluster(&self) -> bool {
        self.pools
            .first()
            .map_or(true, |p| matches!(p.layout, Layout::Cluster))
    }
}

/// Where one pool's keys go: a cluster's by slot, a ring's by
/// twemproxy's placement. `random` is the number a ring of distribution
/// `random` picks its server with (one per request).
#[derive(Clone, Copy)]
pub struct PoolLocator<'a> {
    pool: &'a PoolMap,
    random: u32,
}

impl Locate for PoolLocator<'_> {
    #[inline]
    fn unit_of(&self, key: &[u8]) -> Unit {
        match &self.pool.layout {
            Layout::Cluster => self.pool.base.wrapping_add(key_slot(key)),
            Layout::Ring {
                ring, hash, tag, ..
            } => match ring.locate(*hash, *tag, key, self.random) {
                Some(i) => self.pool.base.wrapping_add(i as Unit),
                None => NOWHERE,
            },
            Layout::Groups {
                hash, tag, random, ..
            } => {
                let random = random.then_some(self.random);
                let i =
                    crate::hashkit::group_of(*hash, *tag, random, self.pool.units as usize, key);
                self.pool.base.wrapping_add(i as Unit)
            }
        }
    }

    #[inline]
    fn is_known(&self) -> bool {
        !self.pool.shards.is_empty()
    }

    #[inline]
    fn is_cluster(&self) -> bool {
        matches!(self.pool.layout, Layout::Cluster)
    }

    #[cold]
    fn cross_unit_reply(&self) -> bytes::Bytes {
        if let Layout::Cluster = self.pool.layout {
            // A cluster node's own words.
            return bytes::Bytes::from_static(
                b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
            );
        }
        bytes::Bytes::from(format!(
            "-CROSSSLOT Keys in request don't hash to the same server of pool {}\r\n",
            self.pool.name
        ))
    }
}

fn proto_index(p: Proto) -> usize {
    match p {
        Proto::Resp2 => 0,
        Proto::Resp3 => 1,
    }
}

/// What a locator of a pool the map lacks places by: nothing.
static EMPTY_POOL: PoolMap = PoolMap {
    name: String::new(),
    layout: Layout::Cluster,
    base: 0,
    units: 0,
    shards: 0..0,
};

/// A worker's answer to "which backend": see the module doc.
pub struct Placement {
    /// The connection sets, one per (node, protocol, replica mode).
    pub conns: ConnSets,
    map: Arc<Topology>,
    /// The epoch the tables below were built for (`u64::MAX`: none yet).
    epoch: u64,
    /// shard → master connection set, per protocol (None: the shard has
    /// no master in the map).
    shard_master: Vec<Option<[usize; 2]>>,
    /// shard → replica connection sets, per protocol (only where reads
    /// may go to replicas).
    shard_replicas: Vec<Vec<[usize; 2]>>,
    /// shard → where its reads go: `read-from-replicas` for a cluster's
    /// shards, the read priorities for a group's.
    shard_reads: Vec<ReadFrom>,
    /// Whether any shard reads from replicas (the common case, none, is
    /// one test on the read path).
    any_replica_reads: bool,
    /// Unit → master address learned from MOVED, until the next epoch.
    overrides: SlotMap<SocketAddr>,
    read_from: ReadFrom,
    /// Each pool's database (twemproxy's `redis_db`), by pool index.
    dbs: Vec<u32>,
    /// The rotation of keyless commands over the masters.
    rotation: usize,
    /// The state of the numbers a `random` ring picks servers with.
    rng: Cell<u32>,
}

impl Placement {
    /// A placement over `map`, with `conns_per_node` connections per node
    /// and protocol; `seed` varies each worker's backoff jitter and
    /// rotation start (`rotation`).
    /// A placement over `map`, with `conns_per_node[p]` connections per
    /// node and protocol for server pool `p`.
    pub fn new(
        map: Arc<Topology>,
        conns_per_node: Vec<usize>,
        dbs: Vec<u32>,
        read_from: ReadFrom,
        seed: u64,
        rotation: usize,
    ) -> Placement {
        let mut p = Placement {
            conns: ConnSets::new(conns_per_node, seed),
            map: Arc::new(Topology::empty()),
            epoch: u64::MAX,
            shard_master: Vec::new(),
            shard_replicas: Vec::new(),
            shard_reads: Vec::new(),
            any_replica_reads: false,
            overrides: SlotMap::default(),
            read_from,
            dbs,
            rotation,
            rng: Cell::new((seed as u32) | 1),
        };
        // Nothing is connected yet: nothing to retire.
        let _ = p.install(map);
        p
    }

    /// How many pools the per-pool tables (connections per node,
    /// databases) cover.
    #[inline]
    pub fn pools_known(&self) -> usize {
        self.dbs.len()
    }

    /// The per-pool tables again, with pools a reload added: `conns[p]`
    /// connections per node and database `dbs[p]` for pool `p`.
    #[cold]
    pub fn set_pools(&mut self, conns: Vec<usize>, dbs: Vec<u32>) {
        self.conns.set_pool_conns(conns);
        self.dbs = dbs;
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

    /// What the router locates keys with, for a session of pool `pool`
    /// (a pool the map lacks: one that places nothing, so its requests
    /// get the no-topology error rather than another pool's servers).
    #[inline]
    pub fn locator(&self, pool: PoolId) -> PoolLocator<'_> {
        let map = &*self.map;
        let pool = map.pools.get(pool).unwrap_or(&EMPTY_POOL);
        let random = match pool.layout {
            Layout::Ring { random: true, .. } | Layout::Groups { random: true, .. } => {
                self.next_random()
            }
            _ => 0,
        };
        PoolLocator { pool, random }
    }

    /// The next number a `random` ring picks a server with.
    #[cold]
    fn next_random(&self) -> u32 {
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng.set(x);
        x
    }

    /// The pool's place in the map.
    fn pool(&self, pool: PoolId) -> Option<&PoolMap> {
        self.map.pools.get(pool)
    }

    /// Whether pool `pool` has a map to place by (a cluster whose slots are
    /// known, a ring with servers).
    #[inline]
    pub fn known(&self, pool: PoolId) -> bool {
        self.pool(pool).is_some_and(|p| !p.shards.is_empty())
    }

    /// Whether pool `pool` is a Redis Cluster (its units are slots, and
    /// its nodes redirect).
    #[inline]
    pub fn is_cluster(&self, pool: PoolId) -> bool {
        self.pool(pool)
            .is_some_and(|p| matches!(p.layout, Layout::Cluster))
    }

    /// The pool's name, for messages.
    pub fn pool_name(&self, pool: PoolId) -> &str {
        self.pool(pool).map_or("", |p| p.name.as_str())
    }

    /// The index among ring pool `pool`'s servers (twemproxy's order) of
    /// the one at `addr`: what its health is counted under. None for a
    /// cluster pool.
    pub fn ring_server(&self, pool: PoolId, addr: SocketAddr) -> Option<usize> {
        let p = self.pool(pool)?;
        if !matches!(p.layout, Layout::Ring { .. }) {
            return None;
        }
        let map = &self.map;
        map.shards[p.shards.clone()]
            .iter()
            .position(|sh| map.nodes.get(sh.master).is_some_and(|n| n.addr == addr))
    }

    /// The unit of slot `slot` of cluster pool `pool` (a redirect names
    /// slots).
    #[inline]
    pub fn unit_of_slot(&self, pool: PoolId, slot: u16) -> Unit {
        self.pool(pool).map_or(slot, |p| p.base.wrapping_add(slot))
    }

    /// `read-from-replicas` changed live (CONFIG SET, a reload): the
    /// tables are built again over the same map with it. `None` when it is
    /// the one in force; else the connections of the sets no longer
    /// named (a cluster's replicas, when reads go back to the masters), as
    /// [`Placement::install`] gives them.
    pub fn set_read_from(&mut self, read_from: ReadFrom) -> Option<Vec<Key>> {
        if read_from == self.read_from {
            return None;
        }
        self.read_from = read_from;
        Some(self.install(self.map.clone()))
    }

    /// Install a new map: rebuild the shard tables, forget MOVED's
    /// overrides, and retire the connection sets the map no longer names.
    /// Returns their connections: the caller closes each once nothing is
    /// in flight on it.
    pub fn install(&mut self, map: Arc<Topology>) -> Vec<Key> {
        self.shard_master.clear();
        self.shard_replicas.clear();
        self.shard_reads.clear();
        for (i, shard) in map.shards.iter().enumerate() {
            let pool = map
                .pools
                .iter()
                .position(|p| p.shards.contains(&i))
                .unwrap_or(0) as u16;
            let reads = match map.pools.get(usize::from(pool)).map(|p| &p.layout) {
                Some(Layout::Groups { reads, .. }) => *reads,
                _ => self.read_from,
            };
            self.shard_reads.push(reads);
            let replicas = reads != ReadFrom::No;
            let db = self.dbs.get(usize::from(pool)).copied().unwrap_or(0);
            let pair = map.master_of(i).map(|n| {
                [
                    self.conns.master_set(n.addr, Proto::Resp2, pool, db),
                    self.conns.master_set(n.addr, Proto::Resp3, pool, db),
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
                        self.conns.set_for(SetKey {
                            addr: n.addr,
                            proto,
                            readonly: true,
                            pool,
                            db,
                        })
                    };
                    reps.push([set(Proto::Resp2), set(Proto::Resp3)]);
                }
            }
            self.shard_replicas.push(reps);
        }
        self.any_replica_reads = self.shard_reads.iter().any(|r| *r != ReadFrom::No);
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

    /// The unit of `key` in pool `pool` of the installed map.
    #[inline]
    pub fn unit_of(&self, pool: PoolId, key: &[u8]) -> Unit {
        self.locator(pool).unit_of(key)
    }

    /// The master connection set serving `unit`, as far as this worker
    /// knows (an address MOVED taught first, then the map).
    #[inline(always)]
    pub fn master(&mut self, unit: Unit, proto: Proto) -> Option<usize> {
        if !self.overrides.is_empty() {
            if let Some(&addr) = self.overrides.get(&unit) {
                let pool = self.pool_of_unit(unit);
                let db = self.dbs.get(usize::from(pool)).copied().unwrap_or(0);
                return Some(self.conns.master_set(addr, proto, pool, db));
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
        if read && self.any_replica_reads {
            if let Some((set, mode)) = self.replica(unit, proto, sticky, now) {
                let use_replica = match mode {
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
        self.any_replica_reads
    }

    /// A replica connection set of the shard serving `unit` that is not
    /// backing off, chosen by `sticky`; None when there is none.
    fn replica(
        &self,
        unit: Unit,
        proto: Proto,
        sticky: usize,
        now: Instant,
    ) -> Option<(usize, ReadFrom)> {
        if !self.overrides.is_empty() && self.overrides.contains_key(&unit) {
            return None; // the map is stale for this unit: go to the master
        }
        let shard = self.map.shard_of(unit)?;
        let mode = *self.shard_reads.get(shard)?;
        let reps = self.shard_replicas.get(shard)?;
        let n = reps.len();
        (0..n)
            .map(|i| reps[(sticky + i) % n][proto_index(proto)])
            .find(|&p| !self.conns.is_down(p, now))
            .map(|set| (set, mode))
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

    /// The healthy masters of pool `pool` that serve units: where a
    /// node-local event (a keyspace notification) may be published.
    pub fn serving_masters(&self, pool: PoolId) -> impl Iterator<Item = SocketAddr> + '_ {
        let map = &self.map;
        map.shards[self.masters(pool)]
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
    pub fn set_for(&mut self, key: SetKey) -> usize {
        self.conns.set_for(key)
    }

    /// The master connection set at `addr` (a redirect's target) for a
    /// session of pool `pool`.
    pub fn at(&mut self, addr: SocketAddr, proto: Proto, pool: PoolId) -> usize {
        let db = self.dbs.get(pool).copied().unwrap_or(0);
        self.conns.master_set(addr, proto, pool as u16, db)
    }

    /// The set of the same node, protocol and mode as `set`, in database
    /// `db` (`set` itself when it is already there: the common case, one
    /// compare). The tables name the pools' own databases; a set of
    /// another database is made on first use, and retired with the next
    /// map (its connections close once idle, and it is made again).
    #[inline]
    pub fn in_db(&mut self, set: usize, db: u32) -> usize {
        let key = self.conns.sets[set].key;
        if key.db == db {
            return set;
        }
        self.conns.set_for(SetKey { db, ..key })
    }

    /// Whether `unit` is a group whose master a sentinel is replacing:
    /// its requests may wait for the new one (cold: asked only when the
    /// unit has no master).
    #[cold]
    pub fn failing_over(&self, unit: Unit) -> bool {
        let pool = self.pool_of_unit(unit);
        match self.map.pools.get(usize::from(pool)) {
            Some(PoolMap {
                layout: Layout::Groups { failing_over, .. },
                base,
                ..
            }) => failing_over.contains(&unit.wrapping_sub(*base)),
            _ => false,
        }
    }

    /// The pool whose range holds `unit`.
    fn pool_of_unit(&self, unit: Unit) -> u16 {
        self.map
            .pools
            .iter()
            .position(|p| (p.base as u32..p.base as u32 + p.units).contains(&(unit as u32)))
            .unwrap_or(0) as u16
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

    /// The shards "every master" means to a session of pool `pool`.
    #[inline]
    pub fn masters(&self, pool: PoolId) -> Range<usize> {
        self.pool(pool).map_or(0..0, |p| p.shards.clone())
    }

    /// How many masters [`masters`](Self::masters) names.
    #[inline]
    pub fn master_count(&self, pool: PoolId) -> usize {
        self.masters(pool).len()
    }

    /// One master of pool `pool` for a command any master can answer, in
    /// rotation (None while the pool has none).
    pub fn any_master(&mut self, pool: PoolId) -> Option<usize> {
        let masters = self.masters(pool);
        if masters.is_empty() {
            return None;
        }
        self.rotation = self.rotation.wrapping_add(1);
        Some(masters.start + self.rotation % masters.len())
    }

    /// The master every subscriber connection of pool `pool` goes to
    /// first, and where its PUBLISH and PUBSUB are sent: its first shard.
    #[inline]
    pub fn home(&self, pool: PoolId) -> Option<usize> {
        let masters = self.masters(pool);
        (!masters.is_empty()).then_some(masters.start)
    }

    /// The address of the master connection set `set` talks to.
    #[inline]
    pub fn addr_of(&self, set: usize) -> SocketAddr {
        self.conns.sets[set].key.addr
    }

    /// A pseudo-random number (RANDOMKEY's choice among answers).
    pub fn random(&mut self) -> u64 {
        self.conns.random()
    }
}
