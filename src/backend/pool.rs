//! Per-worker connection pools: one per (node address, protocol, replica
//! mode), `backend-conns` connections each, plus the per-epoch map from
//! shard to pool.
//!
//! A pool that failed to connect is "down" for a backoff period (50 ms
//! doubling to 2 s, with jitter); requests for it during that time are
//! answered with an error at once instead of queueing behind a dead node.
//!
//! A new epoch retires the pools its map no longer names (a node that left
//! the cluster, a master that became a replica): they leave the address
//! table, [`Pools::remap`] hands their connections back to be closed once
//! nothing is in flight on them, and their slots are reused by the next
//! pools made. A MOVED to such an address makes a pool again, until the
//! next epoch.

use crate::resp::Proto;
use crate::topology::Topology;
use reactor::Key;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// What distinguishes one pool from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub addr: SocketAddr,
    pub proto: Proto,
    /// Connections to a replica, put in READONLY mode.
    pub readonly: bool,
}

pub struct Pool {
    pub key: PoolKey,
    /// One slot per `backend-conns`; a stale key means no live connection
    /// in that slot.
    pub conns: Vec<Key>,
    pub failures: u32,
    pub down_until: Option<Instant>,
    pub last_error: String,
    pub reconnects: u64,
    /// No longer in the map: its slot waits to be reused (see the module
    /// doc), and it is not shown.
    pub retired: bool,
    /// `backend-sharding`: the worker owning this node's pipe, once asked,
    /// and this worker's link to it when that is another worker.
    pub owner: Option<u16>,
    pub link: Key,
}

fn proto_index(p: Proto) -> usize {
    match p {
        Proto::Resp2 => 0,
        Proto::Resp3 => 1,
    }
}

pub struct Pools {
    pub pools: Vec<Pool>,
    by_key: HashMap<PoolKey, usize>,
    /// shard (current topology) → master pool, per protocol (None: the
    /// shard has no master in the map).
    shard_master: Vec<Option<[usize; 2]>>,
    /// shard → replica pools, per protocol (only with read splitting).
    shard_replicas: Vec<Vec<[usize; 2]>>,
    pub epoch: u64,
    /// Slot → master address learned from MOVED, until the next epoch.
    overrides: crate::topology::slot::SlotMap<SocketAddr>,
    conns_per_node: usize,
    replicas: bool,
    rng: u64,
    /// Retired pools' slots, reused before the vector grows.
    free: Vec<usize>,
}

impl Pools {
    pub fn new(conns_per_node: usize, replicas: bool, seed: u64) -> Pools {
        Pools {
            pools: Vec::new(),
            by_key: HashMap::new(),
            shard_master: Vec::new(),
            shard_replicas: Vec::new(),
            epoch: u64::MAX,
            overrides: Default::default(),
            conns_per_node: conns_per_node.max(1),
            replicas,
            rng: seed | 1,
            free: Vec::new(),
        }
    }

    pub fn pool_for(&mut self, key: PoolKey) -> usize {
        if let Some(&i) = self.by_key.get(&key) {
            return i;
        }
        let pool = Pool {
            key,
            conns: vec![Key::NONE; self.conns_per_node],
            failures: 0,
            down_until: None,
            last_error: String::new(),
            reconnects: 0,
            retired: false,
            owner: None,
            link: Key::NONE,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.pools[i] = pool;
                i
            }
            None => {
                self.pools.push(pool);
                self.pools.len() - 1
            }
        };
        self.by_key.insert(key, i);
        i
    }

    pub fn master_pool(&mut self, addr: SocketAddr, proto: Proto) -> usize {
        self.pool_for(PoolKey {
            addr,
            proto,
            readonly: false,
        })
    }

    /// Rebuild the shard → pool maps for a new topology epoch, and retire
    /// the pools the new map does not name. Returns their connections: the
    /// caller closes each once nothing is in flight on it.
    pub fn remap(&mut self, topo: &Topology) -> Vec<Key> {
        self.shard_master.clear();
        self.shard_replicas.clear();
        for (i, shard) in topo.shards.iter().enumerate() {
            let pair = topo.master_of(i).map(|n| {
                [
                    self.master_pool(n.addr, Proto::Resp2),
                    self.master_pool(n.addr, Proto::Resp3),
                ]
            });
            self.shard_master.push(pair);
            let mut reps = Vec::new();
            if self.replicas {
                for &r in &shard.replicas {
                    let Some(n) = topo.nodes.get(r) else { continue };
                    if !n.healthy {
                        continue;
                    }
                    reps.push([
                        self.pool_for(PoolKey {
                            addr: n.addr,
                            proto: Proto::Resp2,
                            readonly: true,
                        }),
                        self.pool_for(PoolKey {
                            addr: n.addr,
                            proto: Proto::Resp3,
                            readonly: true,
                        }),
                    ]);
                }
            }
            self.shard_replicas.push(reps);
        }
        self.overrides.clear();
        self.epoch = topo.epoch;
        let mut named = vec![false; self.pools.len()];
        let tables = self
            .shard_master
            .iter()
            .flatten()
            .chain(self.shard_replicas.iter().flatten());
        for &i in tables.flatten() {
            if let Some(n) = named.get_mut(i) {
                *n = true;
            }
        }
        let mut conns = Vec::new();
        for (i, p) in self.pools.iter_mut().enumerate() {
            if named[i] || p.retired {
                continue;
            }
            self.by_key.remove(&p.key);
            conns.extend(p.conns.iter().copied().filter(|&k| k != Key::NONE));
            p.conns.fill(Key::NONE);
            if p.link != Key::NONE {
                conns.push(std::mem::replace(&mut p.link, Key::NONE));
            }
            p.retired = true;
            self.free.push(i);
        }
        conns
    }

    /// The master pool serving `slot`, as far as this worker knows.
    #[inline]
    pub fn pool_for_slot(&mut self, topo: &Topology, slot: u16, proto: Proto) -> Option<usize> {
        if !self.overrides.is_empty() {
            if let Some(&addr) = self.overrides.get(&slot) {
                return Some(self.master_pool(addr, proto));
            }
        }
        self.pool_for_shard(topo.shard_of(slot)?, proto)
    }

    /// The master address serving `slot`, as far as this worker knows (an
    /// address MOVED taught first, then the map).
    pub fn master_addr_for_slot(&self, topo: &Topology, slot: u16) -> Option<SocketAddr> {
        if let Some(&addr) = self.overrides.get(&slot) {
            return Some(addr);
        }
        topo.master_of(topo.shard_of(slot)?).map(|n| n.addr)
    }

    /// The master pool of shard `shard`.
    #[inline]
    pub fn pool_for_shard(&self, shard: usize, proto: Proto) -> Option<usize> {
        self.shard_master
            .get(shard)
            .copied()
            .flatten()
            .map(|p| p[proto_index(proto)])
    }

    /// A replica pool of the shard serving `slot` that is not backing off,
    /// chosen by `sticky`; None when there is none (use the master).
    pub fn replica_for_slot(
        &self,
        topo: &Topology,
        slot: u16,
        proto: Proto,
        sticky: usize,
        now: Instant,
    ) -> Option<usize> {
        if !self.overrides.is_empty() && self.overrides.contains_key(&slot) {
            return None; // the map is stale for this slot: go to the master
        }
        let reps = self.shard_replicas.get(topo.shard_of(slot)?)?;
        let n = reps.len();
        (0..n)
            .map(|i| reps[(sticky + i) % n][proto_index(proto)])
            .find(|&p| !self.is_down(p, now))
    }

    pub fn set_override(&mut self, slot: u16, addr: SocketAddr) {
        // Bounded by the number of slots.
        self.overrides.insert(slot, addr);
    }

    #[inline]
    pub fn slot_key(&self, pool: usize, sticky: usize) -> Key {
        let p = &self.pools[pool];
        p.conns[sticky % p.conns.len()]
    }

    pub fn set_conn(&mut self, pool: usize, sticky: usize, key: Key) {
        let p = &mut self.pools[pool];
        let n = p.conns.len();
        p.conns[sticky % n] = key;
    }

    /// Whether connecting to `pool` should wait (backoff after failures).
    pub fn is_down(&self, pool: usize, now: Instant) -> bool {
        matches!(self.pools[pool].down_until, Some(t) if now < t)
    }

    pub fn mark_failed(&mut self, pool: usize, now: Instant, error: String) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let p = &mut self.pools[pool];
        p.failures = p.failures.saturating_add(1);
        let exp = p.failures.clamp(1, 7) - 1;
        let base = (BACKOFF_MIN * 2u32.pow(exp)).min(BACKOFF_MAX);
        // Jitter: 75% to 125% of the base.
        let jitter = base.mul_f64(0.75 + (self.rng % 1000) as f64 / 2000.0);
        p.down_until = Some(now + jitter);
        p.last_error = error;
    }

    pub fn mark_ok(&mut self, pool: usize) {
        let p = &mut self.pools[pool];
        if p.failures > 0 {
            p.reconnects += 1;
        }
        p.failures = 0;
        p.down_until = None;
    }

    /// A pseudo-random number (for RANDOMKEY's master choice).
    pub fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{Node, Role, Shard};

    fn topo() -> Topology {
        let node = |port: u16, role| Node {
            id: port.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            role,
            healthy: true,
        };
        Topology::new(
            vec![
                node(7000, Role::Master),
                node(7001, Role::Master),
                node(7002, Role::Replica),
            ],
            vec![
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
            ],
        )
    }

    #[test]
    fn maps_slots_overrides_and_replicas() {
        let t = topo();
        let mut p = Pools::new(2, true, 7);
        p.remap(&t);
        let a = p.pool_for_slot(&t, 5, Proto::Resp2).unwrap();
        assert_eq!(p.pools[a].key.addr.port(), 7000);
        let a3 = p.pool_for_slot(&t, 5, Proto::Resp3).unwrap();
        assert_ne!(a, a3);
        assert_eq!(p.pools[a3].key.proto, Proto::Resp3);
        let now = Instant::now();
        let r = p.replica_for_slot(&t, 5, Proto::Resp2, 0, now).unwrap();
        assert!(p.pools[r].key.readonly);
        assert_eq!(p.replica_for_slot(&t, 9000, Proto::Resp2, 0, now), None);
        p.mark_failed(r, now, "down".into());
        assert!(p.is_down(r, now));
        assert_eq!(p.replica_for_slot(&t, 5, Proto::Resp2, 0, now), None);
        p.set_override(5, SocketAddr::from(([127, 0, 0, 1], 7001)));
        let moved = p.pool_for_slot(&t, 5, Proto::Resp2).unwrap();
        assert_eq!(p.pools[moved].key.addr.port(), 7001);
        p.remap(&t);
        assert_eq!(
            p.pool_for_slot(&t, 5, Proto::Resp2),
            Some(a),
            "a new epoch clears overrides"
        );
        assert_eq!(p.pools[a].conns.len(), 2);
    }

    #[test]
    fn pools_the_map_no_longer_names_are_retired_and_their_slots_reused() {
        let t = topo();
        let mut p = Pools::new(1, false, 7);
        assert!(p.remap(&t).is_empty());
        let gone = p.pool_for_slot(&t, 9000, Proto::Resp2).unwrap();
        assert_eq!(p.pools[gone].key.addr.port(), 7001);
        let conn = Key { index: 5, gen: 1 };
        p.set_conn(gone, 0, conn);
        // 7001 leaves: shard 0 takes every slot.
        let mut shrunk = topo();
        shrunk.shards.truncate(1);
        shrunk.shards[0].ranges = vec![(0, 16383)];
        let t2 = Topology::new(shrunk.nodes.clone(), shrunk.shards.clone());
        let closed = p.remap(&t2);
        assert_eq!(closed, [conn], "its connection is handed back");
        assert!(p.pools[gone].retired);
        assert_eq!(p.slot_key(gone, 0), Key::NONE);
        assert_eq!(
            p.pool_for_slot(&t2, 9000, Proto::Resp2)
                .map(|i| p.pools[i].key.addr.port()),
            Some(7000)
        );
        // Retired once only; its slot goes to the next pool made (a MOVED
        // to 7001 again, say), fresh.
        assert!(p.remap(&t2).is_empty());
        let again = p.master_pool(SocketAddr::from(([127, 0, 0, 1], 7001)), Proto::Resp3);
        assert!(again == gone || p.pools[gone].retired);
        assert!(!p.pools[again].retired);
        assert_eq!(p.pools[again].key.proto, Proto::Resp3);
        assert_eq!(p.pools.iter().filter(|x| !x.retired).count(), 3);
    }

    #[test]
    fn backoff_grows_and_is_bounded() {
        let t0 = Instant::now();
        let mut p = Pools::new(1, false, 1);
        let a = p.master_pool(SocketAddr::from(([127, 0, 0, 1], 1)), Proto::Resp2);
        let mut last = Duration::ZERO;
        for _ in 0..20 {
            p.mark_failed(a, t0, "x".into());
            let d = p.pools[a].down_until.unwrap() - t0;
            assert!(d <= BACKOFF_MAX.mul_f64(1.25));
            last = d;
        }
        assert!(last >= BACKOFF_MAX.mul_f64(0.75));
        p.mark_ok(a);
        assert!(!p.is_down(a, t0));
        assert_eq!(p.pools[a].reconnects, 1);
    }
}
