//! Per-worker connection pools: one per node address, `backend-conns`
//! connections each, plus the per-epoch map from shard to pool.
//!
//! A pool that failed to connect is "down" for a backoff period (50 ms
//! doubling to 2 s, with jitter); requests for it during that time are
//! answered with an error at once instead of queueing behind a dead node.

use crate::topology::Topology;
use reactor::Key;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

pub struct Pool {
    pub addr: SocketAddr,
    /// One slot per `backend-conns`; `Key::NONE` (or a stale key) means no
    /// live connection in that slot.
    pub conns: Vec<Key>,
    pub failures: u32,
    pub down_until: Option<Instant>,
    pub last_error: String,
    pub reconnects: u64,
}

pub struct Pools {
    pub pools: Vec<Pool>,
    by_addr: HashMap<SocketAddr, usize>,
    /// shard index (current topology) → pool index.
    shard_pool: Vec<usize>,
    pub epoch: u64,
    /// Slot → pool learned from MOVED, until the next topology epoch.
    overrides: HashMap<u16, usize>,
    conns_per_node: usize,
    rng: u64,
}

impl Pools {
    pub fn new(conns_per_node: usize, seed: u64) -> Pools {
        Pools {
            pools: Vec::new(),
            by_addr: HashMap::new(),
            shard_pool: Vec::new(),
            epoch: u64::MAX,
            overrides: HashMap::new(),
            conns_per_node: conns_per_node.max(1),
            rng: seed | 1,
        }
    }

    pub fn pool_for_addr(&mut self, addr: SocketAddr) -> usize {
        if let Some(&i) = self.by_addr.get(&addr) {
            return i;
        }
        self.pools.push(Pool {
            addr,
            conns: vec![Key::NONE; self.conns_per_node],
            failures: 0,
            down_until: None,
            last_error: String::new(),
            reconnects: 0,
        });
        let i = self.pools.len() - 1;
        self.by_addr.insert(addr, i);
        i
    }

    /// Rebuild the shard → pool map for a new topology epoch.
    pub fn remap(&mut self, topo: &Topology) {
        self.shard_pool.clear();
        for shard in 0..topo.shards.len() {
            let pool = match topo.master_of(shard) {
                Some(n) => self.pool_for_addr(n.addr),
                None => usize::MAX,
            };
            self.shard_pool.push(pool);
        }
        self.overrides.clear();
        self.epoch = topo.epoch;
    }

    /// The pool serving `slot`, as far as this worker knows.
    #[inline]
    pub fn pool_for_slot(&self, topo: &Topology, slot: u16) -> Option<usize> {
        if !self.overrides.is_empty() {
            if let Some(&p) = self.overrides.get(&slot) {
                return Some(p);
            }
        }
        let shard = topo.shard_of(slot)?;
        self.shard_pool
            .get(shard)
            .copied()
            .filter(|&p| p != usize::MAX)
    }

    /// The pool of the `n`-th master (for keyless commands).
    pub fn pool_for_shard(&self, shard: usize) -> Option<usize> {
        self.shard_pool
            .get(shard)
            .copied()
            .filter(|&p| p != usize::MAX)
    }

    pub fn set_override(&mut self, slot: u16, pool: usize) {
        // Bounded by the number of slots.
        self.overrides.insert(slot, pool);
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
        let exp = p.failures.min(16) - 1;
        let base = (BACKOFF_MIN * 2u32.pow(exp.min(6))).min(BACKOFF_MAX);
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
}
