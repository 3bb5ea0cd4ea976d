//! The map of every pool as one immutable value.
//!
//! A [`Topology`] is built by the refresher from each pool's part (a
//! cluster's answer to CLUSTER SHARDS or CLUSTER SLOTS, a ring's servers
//! and which of them are live), then published whole; workers never see a
//! half-updated map. `epoch` increases by one each time a map that differs
//! from the previous one is published, so a worker can tell with one
//! integer compare whether its per-epoch caches are still valid.
//!
//! ```text
//!   pools:  [ default: cluster ][ alpha: ring of 3 ][ beta: cluster ]
//!   units:  0 ........... 16383 16384 .. 16386      16387 ....... 32770
//!   shards: 0   1   2           3    4    5          6   7   8
//! ```
//!
//! Each pool owns a contiguous range of units (a slot of a cluster, a
//! server of a ring) and of shards; `units[u]` names the shard serving
//! unit `u`. A ring's server `i` is its unit `i` and its shard `i`, live or
//! not: ejecting a server rebuilds the ring (no key lands on it) but
//! renumbers nothing.

use super::slot::SLOTS;
use crate::config::ReadFrom;
use crate::hashkit::{GroupHash, HashFn, Ring};
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Instant;

/// Marks a slot no shard serves.
pub const NO_SHARD: u16 = u16::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Master,
    Replica,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The 40-hex node id.
    pub id: String,
    pub addr: SocketAddr,
    pub role: Role,
    /// False when the cluster reports the node as failed or loading.
    pub healthy: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Index into `Topology::nodes`.
    pub master: usize,
    pub replicas: Vec<usize>,
    /// Inclusive slot ranges.
    pub ranges: Vec<(u16, u16)>,
}

/// How a pool places keys on its units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A Redis Cluster: a key's unit is its slot.
    Cluster,
    /// Standalone servers on a twemproxy ring, built from the live ones: a
    /// key's unit is its server (`None` from the ring: no server is live).
    Ring {
        ring: Ring,
        hash: HashFn,
        tag: Option<[u8; 2]>,
        /// Distribution `random`: each request picks its server by a
        /// random number of the caller's.
        random: bool,
    },
    /// Master-replica groups placed as predixy places them: a key's unit
    /// is its group (`crate::hashkit::group_of`).
    Groups {
        hash: GroupHash,
        tag: Option<[u8; 2]>,
        random: bool,
        /// Where reads go (from the pool's read priorities).
        reads: ReadFrom,
        /// The groups (by index) whose master a sentinel is replacing:
        /// no master now, a new one soon.
        failing_over: Vec<u16>,
    },
}

/// One pool's place in the map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolMap {
    pub name: String,
    pub layout: Layout,
    /// Its first unit.
    pub base: u16,
    /// How many units it has (16384 for a cluster, its servers for a ring).
    pub units: u32,
    /// Its shards, in the map's `shards`.
    pub shards: Range<usize>,
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub epoch: u64,
    pub nodes: Vec<Node>,
    pub shards: Vec<Shard>,
    /// unit → index into `shards`, or NO_SHARD.
    slots: Box<[u16]>,
    /// The pools, in the order the configuration names them.
    pub pools: Vec<PoolMap>,
    pub fetched_at: Instant,
    /// The address book: names the nodes announce (`cluster-announce-
    /// hostname`, a hostname endpoint) with their port, and the address
    /// each was reached at. Redirects that name a host are resolved here,
    /// without a resolver call on the worker.
    pub hosts: Vec<(String, u16, SocketAddr)>,
    /// The lowest `redis_version` among the masters, learned when this
    /// map was published (None until every master answered): the version
    /// the proxy reports, so clients that gate features on it send only
    /// what every node understands.
    pub min_version: Option<String>,
}

impl Topology {
    /// The masters that serve slots, sorted and each once (a failed master
    /// the map still lists, with no slots left, is not among them).
    pub fn serving_masters(&self) -> Vec<SocketAddr> {
        let mut masters: Vec<SocketAddr> = self
            .shards
            .iter()
            .filter(|s| !s.ranges.is_empty())
            .filter_map(|s| self.nodes.get(s.master))
            .map(|n| n.addr)
            .collect();
        masters.sort_unstable();
        masters.dedup();
        masters
    }

    /// The map before anything was discovered: one cluster pool, named
    /// `default`, whose slots no shard serves.
    pub fn empty() -> Topology {
        Topology::unknown_cluster(crate::config::pool::DEFAULT_POOL)
    }

    /// A cluster pool named `name` whose map is not known yet.
    pub fn unknown_cluster(name: &str) -> Topology {
        let mut t = Topology::new(Vec::new(), Vec::new());
        t.pools[0].name = name.to_string();
        t
    }

    /// A pool a reload removed, once its clients drained: no nodes and no
    /// units, and a key of it is placed nowhere (an empty ring).
    pub fn retired(name: &str) -> Topology {
        use crate::hashkit::{Distribution, HashFn};
        Topology::ring(name, &[], &[], Distribution::Modula, HashFn::Md5, None)
    }

    /// One ring pool: `servers` (name, weight, address) in twemproxy's
    /// order, `live[i]` saying whether server `i` is in the ring. Each
    /// server is a master of its own shard and unit.
    pub fn ring(
        name: &str,
        servers: &[(String, u32, SocketAddr)],
        live: &[bool],
        dist: crate::hashkit::Distribution,
        hash: HashFn,
        tag: Option<[u8; 2]>,
    ) -> Topology {
        let named: Vec<(&str, u32)> = servers.iter().map(|(n, w, _)| (n.as_str(), *w)).collect();
        let ring = Ring::build(dist, &named, live);
        let nodes: Vec<Node> = servers
            .iter()
            .enumerate()
            .map(|(i, (n, _, addr))| Node {
                id: n.clone(),
                addr: *addr,
                role: Role::Master,
                healthy: live.get(i).copied().unwrap_or(false),
            })
            .collect();
        let shards: Vec<Shard> = (0..servers.len())
            .map(|i| Shard {
                master: i,
                replicas: Vec::new(),
                ranges: vec![(i as u16, i as u16)],
            })
            .collect();
        let n = servers.len();
        Topology {
            epoch: 0,
            nodes,
            shards,
            slots: (0..n as u16).collect::<Vec<u16>>().into_boxed_slice(),
            pools: vec![PoolMap {
                name: name.to_string(),
                layout: Layout::Ring {
                    ring,
                    hash,
                    tag,
                    random: dist == crate::hashkit::Distribution::Random,
                },
                base: 0,
                units: n as u32,
                shards: 0..n,
            }],
            fetched_at: Instant::now(),
            hosts: Vec::new(),
            min_version: None,
        }
    }

    /// One group pool: `groups` (name, master, replicas) in the order
    /// written. Each group with a master is a shard and its unit is the
    /// group's index; a group whose master is not known serves nothing.
    /// `failing_over` names the groups a sentinel is promoting a replica of.
    #[allow(clippy::too_many_arguments)]
    pub fn groups(
        name: &str,
        groups: &[(String, Option<SocketAddr>, Vec<SocketAddr>)],
        failing_over: Vec<u16>,
        hash: GroupHash,
        tag: Option<[u8; 2]>,
        random: bool,
        reads: ReadFrom,
    ) -> Topology {
        let mut nodes = Vec::new();
        let mut shards = Vec::new();
        let mut slots = vec![NO_SHARD; groups.len()];
        for (i, (group, master, replicas)) in groups.iter().enumerate() {
            let Some(master) = master else { continue };
            let node = |addr: SocketAddr, role| Node {
                id: format!("{group}@{addr}"),
                addr,
                role,
                healthy: true,
            };
            let m = nodes.len();
            nodes.push(node(*master, Role::Master));
            let mut reps = Vec::new();
            for r in replicas.iter().filter(|r| *r != master) {
                reps.push(nodes.len());
                nodes.push(node(*r, Role::Replica));
            }
            slots[i] = shards.len() as u16;
            shards.push(Shard {
                master: m,
                replicas: reps,
                ranges: vec![(i as u16, i as u16)],
            });
        }
        let n = shards.len();
        Topology {
            epoch: 0,
            nodes,
            shards,
            slots: slots.into_boxed_slice(),
            pools: vec![PoolMap {
                name: name.to_string(),
                layout: Layout::Groups {
                    hash,
                    tag,
                    random,
                    reads,
                    failing_over,
                },
                base: 0,
                units: groups.len() as u32,
                shards: 0..n,
            }],
            fetched_at: Instant::now(),
            hosts: Vec::new(),
            min_version: None,
        }
    }

    /// One map of several pools' parts, each a one-pool map, in order:
    /// units, shards and nodes renumbered after those of the parts before.
    /// The caller keeps the units within 16 bits
    /// (`config::pool::MAX_UNITS`).
    pub fn compose(parts: &[std::sync::Arc<Topology>]) -> Topology {
        let mut out = Topology {
            epoch: 0,
            nodes: Vec::new(),
            shards: Vec::new(),
            slots: Box::new([]),
            pools: Vec::new(),
            fetched_at: Instant::now(),
            hosts: Vec::new(),
            min_version: None,
        };
        let mut units: Vec<u16> = Vec::new();
        for part in parts {
            let (node_off, shard_off) = (out.nodes.len(), out.shards.len());
            out.nodes.extend(part.nodes.iter().cloned());
            for sh in &part.shards {
                out.shards.push(Shard {
                    master: sh.master + node_off,
                    replicas: sh.replicas.iter().map(|r| r + node_off).collect(),
                    ranges: sh.ranges.clone(),
                });
            }
            for pool in &part.pools {
                let base = units.len();
                for u in 0..pool.units as usize {
                    let s = part.slots.get(pool.base as usize + u).copied();
                    units.push(match s {
                        Some(s) if s != NO_SHARD => (s as usize + shard_off) as u16,
                        _ => NO_SHARD,
                    });
                }
                out.pools.push(PoolMap {
                    name: pool.name.clone(),
                    layout: pool.layout.clone(),
                    base: base as u16,
                    units: pool.units,
                    shards: pool.shards.start + shard_off..pool.shards.end + shard_off,
                });
            }
            out.hosts.extend(part.hosts.iter().cloned());
            out.min_version = match (out.min_version.take(), &part.min_version) {
                (None, v) => v.clone(),
                (Some(a), Some(b)) => Some(Topology::lower_version(&a, b).to_string()),
                (a, None) => a,
            };
        }
        out.slots = units.into_boxed_slice();
        out
    }

    /// The pool a node belongs to (the first, if several name it).
    pub fn pool_of_addr(&self, addr: SocketAddr) -> Option<usize> {
        let node = self.nodes.iter().position(|n| n.addr == addr)?;
        self.pools.iter().position(|p| {
            self.shards[p.shards.clone()]
                .iter()
                .any(|s| s.master == node || s.replicas.contains(&node))
        })
    }

    /// Build from nodes and shards; slot ownership comes from the shards'
    /// ranges (a later shard wins a slot claimed twice).
    pub fn new(nodes: Vec<Node>, mut shards: Vec<Shard>) -> Topology {
        // A stable order (by lowest slot, slotless shards last by master
        // id), whichever node described the cluster: cluster-wide cursors
        // (SCAN) number the masters in this order.
        for s in &mut shards {
            s.ranges.sort_unstable();
        }
        shards.sort_by(|a, b| {
            let ka = a.ranges.first().map(|r| r.0).unwrap_or(u16::MAX);
            let kb = b.ranges.first().map(|r| r.0).unwrap_or(u16::MAX);
            let ida = nodes.get(a.master).map(|n| n.id.as_str()).unwrap_or("");
            let idb = nodes.get(b.master).map(|n| n.id.as_str()).unwrap_or("");
            ka.cmp(&kb).then_with(|| ida.cmp(idb))
        });
        let mut slots = vec![NO_SHARD; SLOTS].into_boxed_slice();
        for (i, shard) in shards.iter().enumerate() {
            for &(lo, hi) in &shard.ranges {
                let hi = (hi as usize).min(SLOTS - 1);
                for s in lo as usize..=hi {
                    slots[s] = i as u16;
                }
            }
        }
        let n = shards.len();
        Topology {
            epoch: 0,
            nodes,
            shards,
            slots,
            pools: vec![PoolMap {
                name: crate::config::pool::DEFAULT_POOL.to_string(),
                layout: Layout::Cluster,
                base: 0,
                units: SLOTS as u32,
                shards: 0..n,
            }],
            fetched_at: Instant::now(),
            hosts: Vec::new(),
            min_version: None,
        }
    }

    /// The lower of two dotted versions (`7.0.15` < `7.2.0`), compared
    /// number by number.
    pub fn lower_version<'a>(a: &'a str, b: &'a str) -> &'a str {
        let key = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
        if key(b) < key(a) {
            b
        } else {
            a
        }
    }

    /// The address of the node announced as `host:port`, if the book
    /// knows that name (case-insensitive, as host names are).
    pub fn lookup_host(&self, host: &str, port: u16) -> Option<SocketAddr> {
        self.hosts
            .iter()
            .find(|(h, p, _)| *p == port && h.eq_ignore_ascii_case(host))
            .map(|&(_, _, a)| a)
    }

    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// Index of the shard serving unit `slot` (a slot of the first
    /// cluster, which is unit `slot`, or any other pool's unit).
    #[inline]
    pub fn shard_of(&self, slot: u16) -> Option<usize> {
        match self.slots.get(slot as usize) {
            Some(&s) if s != NO_SHARD => Some(s as usize),
            _ => None,
        }
    }

    pub fn master_of(&self, shard: usize) -> Option<&Node> {
        self.shards
            .get(shard)
            .and_then(|s| self.nodes.get(s.master))
    }

    /// Number of units some shard serves.
    pub fn covered_slots(&self) -> usize {
        self.slots.iter().filter(|&&s| s != NO_SHARD).count()
    }

    /// Same nodes, roles, health, pools and unit map (epoch and time
    /// ignored).
    pub fn same_layout(&self, other: &Topology) -> bool {
        self.nodes == other.nodes
            && self.shards == other.shards
            && self.slots == other.slots
            && self.hosts == other.hosts
            && self.pools == other.pools
    }

    pub fn masters(&self) -> impl Iterator<Item = &Node> {
        self.shards.iter().filter_map(|s| self.nodes.get(s.master))
    }

    pub fn node_by_addr(&self, addr: SocketAddr) -> Option<&Node> {
        self.nodes.iter().find(|n| n.addr == addr)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn versions_compare_number_by_number() {
        assert_eq!(Topology::lower_version("7.2.0", "7.0.15"), "7.0.15");
        assert_eq!(Topology::lower_version("7.0.9", "7.0.15"), "7.0.9");
        assert_eq!(Topology::lower_version("7.0.15", "7.0.15"), "7.0.15");
        assert_eq!(Topology::lower_version("6.2.14", "7.0.0"), "6.2.14");
    }

    use super::*;

    fn node(port: u16, role: Role) -> Node {
        Node {
            id: format!("{port:040}"),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            role,
            healthy: true,
        }
    }

    #[test]
    fn slot_lookup_and_layout_compare() {
        let nodes = vec![
            node(7000, Role::Master),
            node(7001, Role::Master),
            node(7002, Role::Replica),
        ];
        let shards = vec![
            Shard {
                master: 0,
                replicas: vec![2],
                ranges: vec![(0, 8191)],
            },
            Shard {
                master: 1,
                replicas: vec![],
                ranges: vec![(8192, 16383)],
            },
        ];
        let t = Topology::new(nodes.clone(), shards.clone());
        assert_eq!(t.shard_of(0), Some(0));
        assert_eq!(t.shard_of(8191), Some(0));
        assert_eq!(t.shard_of(8192), Some(1));
        assert_eq!(t.shard_of(16383), Some(1));
        assert_eq!(t.master_of(1).map(|n| n.addr.port()), Some(7001));
        assert_eq!(t.covered_slots(), SLOTS);
        assert!(t.same_layout(&Topology::new(nodes.clone(), shards.clone())));
        let mut moved = shards.clone();
        moved[0].ranges = vec![(0, 100)];
        let t2 = Topology::new(nodes, moved);
        assert!(!t.same_layout(&t2));
        assert_eq!(t2.shard_of(101), None);
        assert!(Topology::empty().is_empty());
        assert_eq!(Topology::empty().shard_of(5), None);
    }
}
