//! The cluster map as one immutable value.
//!
//! A [`Topology`] is built by the refresher from one node's answer to
//! CLUSTER SHARDS (or CLUSTER SLOTS), then published whole; workers never
//! see a half-updated map. `epoch` increases by one each time a map that
//! differs from the previous one is published, so a worker can tell with
//! one integer compare whether its per-epoch caches are still valid.

use super::slot::SLOTS;
use std::net::SocketAddr;
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

#[derive(Clone, Debug)]
pub struct Topology {
    pub epoch: u64,
    pub nodes: Vec<Node>,
    pub shards: Vec<Shard>,
    /// slot → index into `shards`, or NO_SHARD.
    slots: Box<[u16]>,
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

    /// The map before anything was discovered: no slot is served.
    pub fn empty() -> Topology {
        Topology {
            epoch: 0,
            nodes: Vec::new(),
            shards: Vec::new(),
            slots: vec![NO_SHARD; SLOTS].into_boxed_slice(),
            fetched_at: Instant::now(),
            hosts: Vec::new(),
            min_version: None,
        }
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
        Topology {
            epoch: 0,
            nodes,
            shards,
            slots,
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

    /// Index of the shard serving `slot`.
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

    /// Number of slots some shard serves.
    pub fn covered_slots(&self) -> usize {
        self.slots.iter().filter(|&&s| s != NO_SHARD).count()
    }

    /// Same nodes, roles, health and slot map (epoch and time ignored).
    pub fn same_layout(&self, other: &Topology) -> bool {
        self.nodes == other.nodes
            && self.shards == other.shards
            && self.slots == other.slots
            && self.hosts == other.hosts
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
