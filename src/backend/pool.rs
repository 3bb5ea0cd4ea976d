//! Per-worker connection pools: one per (node address, protocol, replica
//! mode), `backend-conns` connections each. Which pool a request takes is
//! `crate::placement`'s answer; this module only keeps them.
//!
//! A pool that failed to connect is "down" for a backoff period (50 ms
//! doubling to 2 s, with jitter); requests for it during that time are
//! answered with an error at once instead of queueing behind a dead node.
//!
//! A new map retires the pools it no longer names (a node that left the
//! cluster, a master that became a replica): they leave the address
//! table, [`Pools::retire_unnamed`] hands their connections back to be
//! closed once nothing is in flight on them, and their entries are reused
//! by the next pools made. A MOVED to such an address makes a pool again,
//! until the next epoch.

use crate::resp::Proto;
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
    /// The server pool the node is reached for (its credentials): a node
    /// two pools name has a set for each.
    pub pool: u16,
    /// The database its connections select (a session's after SELECT,
    /// else its pool's): one set per database in use.
    pub db: u32,
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

pub struct Pools {
    pub pools: Vec<Pool>,
    by_key: HashMap<PoolKey, usize>,
    /// Connections per node, by server pool (the last for any other).
    conns_per_node: Vec<usize>,
    rng: u64,
    /// Retired pools' slots, reused before the vector grows.
    free: Vec<usize>,
}

impl Pools {
    /// Pools with `conns_per_node[p]` connections per node of server
    /// pool `p`.
    pub fn new(conns_per_node: Vec<usize>, seed: u64) -> Pools {
        Pools {
            pools: Vec::new(),
            by_key: HashMap::new(),
            conns_per_node,
            rng: seed | 1,
            free: Vec::new(),
        }
    }

    pub fn pool_for(&mut self, key: PoolKey) -> usize {
        if let Some(&i) = self.by_key.get(&key) {
            return i;
        }
        let n = self
            .conns_per_node
            .get(key.pool as usize)
            .or(self.conns_per_node.last())
            .copied()
            .unwrap_or(1)
            .max(1);
        let pool = Pool {
            key,
            conns: vec![Key::NONE; n],
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

    /// The master connection set to `addr` for server pool `pool`, in
    /// database `db`.
    pub fn master_pool(&mut self, addr: SocketAddr, proto: Proto, pool: u16, db: u32) -> usize {
        self.pool_for(PoolKey {
            addr,
            proto,
            readonly: false,
            pool,
            db,
        })
    }

    /// Retire every pool not in `named` (the ones a new map's tables
    /// use). Returns their connections: the caller closes each once
    /// nothing is in flight on it.
    pub fn retire_unnamed(&mut self, named: impl Iterator<Item = usize>) -> Vec<Key> {
        let mut keep = vec![false; self.pools.len()];
        for i in named {
            if let Some(n) = keep.get_mut(i) {
                *n = true;
            }
        }
        let mut conns = Vec::new();
        for (i, p) in self.pools.iter_mut().enumerate() {
            if keep[i] || p.retired {
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

    #[test]
    fn backoff_grows_and_is_bounded() {
        let t0 = Instant::now();
        let mut p = Pools::new(vec![1], 1);
        let a = p.master_pool(SocketAddr::from(([127, 0, 0, 1], 1)), Proto::Resp2, 0, 0);
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
