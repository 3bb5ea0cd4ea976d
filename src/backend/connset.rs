//! Per-worker connection sets: one per (node address, protocol, replica
//! mode, server pool, database), `backend-conns` connections each (a
//! server pool's `server-connections`). Which set a request takes is
//! `crate::placement`'s answer; this module only keeps them. ("Pool" is
//! the configuration's server pool: see doc/lexicon.md.)
//!
//! A set that failed to connect is "down" for a backoff period (50 ms
//! doubling to 2 s, with jitter); requests for it during that time are
//! answered with an error at once instead of queueing behind a dead node.
//!
//! A new map retires the sets it no longer names (a node that left the
//! cluster, a master that became a replica): they leave the address
//! table, [`ConnSets::retire_unnamed`] hands their connections back to be
//! closed once nothing is in flight on them, and their entries are reused
//! by the next sets made. A MOVED to such an address makes a set again,
//! until the next epoch.

use crate::resp::Proto;
use reactor::Key;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// What distinguishes one connection set from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SetKey {
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

pub struct ConnSet {
    pub key: SetKey,
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

pub struct ConnSets {
    pub sets: Vec<ConnSet>,
    by_key: HashMap<SetKey, usize>,
    /// Connections per node, by server pool (the last for any other).
    conns_per_node: Vec<usize>,
    rng: u64,
    /// Retired sets' slots, reused before the vector grows.
    free: Vec<usize>,
}

impl ConnSets {
    /// ConnSets with `conns_per_node[p]` connections per node of server
    /// pool `p`.
    pub fn new(conns_per_node: Vec<usize>, seed: u64) -> ConnSets {
        ConnSets {
            sets: Vec::new(),
            by_key: HashMap::new(),
            conns_per_node,
            rng: seed | 1,
            free: Vec::new(),
        }
    }

    /// Pools a reload added get their own figure: `conns[p]` for pool `p`.
    pub fn set_pool_conns(&mut self, conns: Vec<usize>) {
        self.conns_per_node = conns;
    }

    pub fn set_for(&mut self, key: SetKey) -> usize {
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
        let made = ConnSet {
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
                self.sets[i] = made;
                i
            }
            None => {
                self.sets.push(made);
                self.sets.len() - 1
            }
        };
        self.by_key.insert(key, i);
        i
    }

    /// The master connection set to `addr` for server pool `pool`, in
    /// database `db`.
    pub fn master_set(&mut self, addr: SocketAddr, proto: Proto, pool: u16, db: u32) -> usize {
        self.set_for(SetKey {
            addr,
            proto,
            readonly: false,
            pool,
            db,
        })
    }

    /// Retire every set not in `named` (the ones a new map's tables
    /// use). Returns their connections: the caller closes each once
    /// nothing is in flight on it.
    pub fn retire_unnamed(&mut self, named: impl Iterator<Item = usize>) -> Vec<Key> {
        let mut keep = vec![false; self.sets.len()];
        for i in named {
            if let Some(n) = keep.get_mut(i) {
                *n = true;
            }
        }
        let mut conns = Vec::new();
        for (i, p) in self.sets.iter_mut().enumerate() {
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
    pub fn slot_key(&self, set: usize, sticky: usize) -> Key {
        let p = &self.sets[set];
        p.conns[sticky % p.conns.len()]
    }

    pub fn set_conn(&mut self, set: usize, sticky: usize, key: Key) {
        let p = &mut self.sets[set];
        let n = p.conns.len();
        p.conns[sticky % n] = key;
    }

    /// Whether connecting to set `set` should wait (backoff after failures).
    pub fn is_down(&self, set: usize, now: Instant) -> bool {
        matches!(self.sets[set].down_until, Some(t) if now < t)
    }

    pub fn mark_failed(&mut self, set: usize, now: Instant, error: String) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let p = &mut self.sets[set];
        p.failures = p.failures.saturating_add(1);
        let exp = p.failures.clamp(1, 7) - 1;
        let base = (BACKOFF_MIN * 2u32.pow(exp)).min(BACKOFF_MAX);
        // Jitter: 75% to 125% of the base.
        let jitter = base.mul_f64(0.75 + (self.rng % 1000) as f64 / 2000.0);
        p.down_until = Some(now + jitter);
        p.last_error = error;
    }

    pub fn mark_ok(&mut self, set: usize) {
        let p = &mut self.sets[set];
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
        let mut p = ConnSets::new(vec![1], 1);
        let a = p.master_set(SocketAddr::from(([127, 0, 0, 1], 1)), Proto::Resp2, 0, 0);
        let mut last = Duration::ZERO;
        for _ in 0..20 {
            p.mark_failed(a, t0, "x".into());
            let d = p.sets[a].down_until.unwrap() - t0;
            assert!(d <= BACKOFF_MAX.mul_f64(1.25));
            last = d;
        }
        assert!(last >= BACKOFF_MAX.mul_f64(0.75));
        p.mark_ok(a);
        assert!(!p.is_down(a, t0));
        assert_eq!(p.sets[a].reconnects, 1);
    }
}
