//! What readers make of the workers' snapshots: [`totals`] adds every
//! worker's latest one up (counters, pools, clients, commands, nodes,
//! errors, the reply caches) and derives the rates from each worker's
//! sample a second back. INFO, the metrics endpoints and the twemproxy
//! stats read [`Totals`].
//!
//! Invariants: pools are summed pool by pool, nodes by (pool, address);
//! commands come out sorted by name, nodes by pool then address, errors
//! by code (as Redis lists them).
//!
//! Never: read a worker's live counters (only published snapshots).

use super::hist::Hist;
use super::{ClientsSnap, CmdSnap, Counters, NodeSnap, PoolCounters, Snapshot};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

/// Sums over a set of snapshots.
pub struct Totals {
    pub commands: u64,
    pub counters: Counters,
    /// By server pool (`Shared::pools`' index), summed over workers.
    pub pools: Vec<PoolCounters>,
    pub clients: ClientsSnap,
    pub net_in: u64,
    pub net_out: u64,
    /// Per second over about the last second.
    pub ops_per_sec: f64,
    pub in_kbps: f64,
    pub out_kbps: f64,
    /// By command id, merged.
    pub cmds: Vec<CmdSnap>,
    /// By server pool and node address, merged, sorted by pool then
    /// address.
    pub nodes: Vec<NodeSnap>,
    /// The reply caches, summed.
    pub cache: crate::cache::CacheStats,
    /// Error replies by code, merged, sorted by code (as Redis lists them).
    pub errors: Vec<(Vec<u8>, u64)>,
}

impl Totals {
    /// Server pool `pool`'s counters (zero for a pool no worker counted).
    pub fn pool(&self, pool: usize) -> PoolCounters {
        self.pools.get(pool).copied().unwrap_or_default()
    }

    /// Every pool's counters added up: the process's.
    pub fn all_pools(&self) -> PoolCounters {
        let mut sum = PoolCounters::default();
        for p in &self.pools {
            sum.add(p);
        }
        sum
    }
}

/// Add up the workers' snapshots.
pub fn totals(snaps: &[Arc<Snapshot>]) -> Totals {
    let mut t = Totals {
        commands: 0,
        counters: Counters::default(),
        pools: Vec::new(),
        clients: ClientsSnap::default(),
        net_in: 0,
        net_out: 0,
        ops_per_sec: 0.0,
        in_kbps: 0.0,
        out_kbps: 0.0,
        cmds: Vec::new(),
        nodes: Vec::new(),
        cache: Default::default(),
        errors: Vec::new(),
    };
    let mut errors: BTreeMap<&[u8], u64> = BTreeMap::new();
    let mut cmds: HashMap<u16, CmdSnap> = HashMap::new();
    let mut nodes: HashMap<(usize, SocketAddr), NodeSnap> = HashMap::new();
    for s in snaps {
        t.commands += s.now.commands;
        t.net_in += s.now.net_in;
        t.net_out += s.now.net_out;
        let secs = s
            .now
            .at
            .saturating_duration_since(s.before.at)
            .as_secs_f64();
        if secs > 0.0 {
            t.ops_per_sec += s.now.commands.saturating_sub(s.before.commands) as f64 / secs;
            t.in_kbps += s.now.net_in.saturating_sub(s.before.net_in) as f64 / secs / 1024.0;
            t.out_kbps += s.now.net_out.saturating_sub(s.before.net_out) as f64 / secs / 1024.0;
        }
        add_counters(&mut t.counters, &s.counters);
        if t.pools.len() < s.pools.len() {
            t.pools.resize(s.pools.len(), PoolCounters::default());
        }
        for (sum, p) in t.pools.iter_mut().zip(&s.pools) {
            sum.add(p);
        }
        t.cache.add(&s.cache);
        let c = &mut t.clients;
        c.connected += s.clients.connected;
        c.blocked += s.clients.blocked;
        c.watching += s.clients.watching;
        c.pubsub += s.clients.pubsub;
        c.tracking += s.clients.tracking;
        c.tracking_keys += s.clients.tracking_keys;
        c.tracking_items += s.clients.tracking_items;
        c.tracking_prefixes += s.clients.tracking_prefixes;
        c.qbuf += s.clients.qbuf;
        c.qbuf_max = c.qbuf_max.max(s.clients.qbuf_max);
        c.out += s.clients.out;
        c.out_max = c.out_max.max(s.clients.out_max);
        c.outstanding += s.clients.outstanding;
        for x in &s.cmds {
            let e = cmds.entry(x.id).or_insert_with(|| CmdSnap {
                id: x.id,
                calls: 0,
                usec: 0,
                rejected: 0,
                failed: 0,
                hist: None,
            });
            e.calls += x.calls;
            e.usec += x.usec;
            e.rejected += x.rejected;
            e.failed += x.failed;
            if let Some(h) = &x.hist {
                e.hist.get_or_insert_with(Hist::new).merge(h);
            }
        }
        for (code, n) in s.errors.iter() {
            *errors.entry(code).or_default() += n;
        }
        for n in &s.nodes {
            let e = nodes
                .entry((n.pool, n.addr))
                .or_insert_with(|| NodeSnap::blank(n.pool, n.addr));
            e.connections += n.connections;
            e.in_flight += n.in_flight;
            e.unsent += n.unsent;
            e.unsent_bytes += n.unsent_bytes;
            e.awaiting_bytes += n.awaiting_bytes;
            e.reconnects += n.reconnects;
            e.down |= n.down;
            e.totals.add(&n.totals);
        }
    }
    t.cmds = cmds.into_values().collect();
    t.cmds
        .sort_by_key(|c| c.command().map(|c| c.name).unwrap_or(""));
    t.nodes = nodes.into_values().collect();
    t.nodes.sort_by_key(|n| (n.pool, n.addr));
    t.errors = errors.into_iter().map(|(c, n)| (c.to_vec(), n)).collect();
    t
}

fn add_counters(a: &mut Counters, b: &Counters) {
    a.evicted_qbuf += b.evicted_qbuf;
    a.moved += b.moved;
    a.ask += b.ask;
    a.tryagain += b.tryagain;
    a.clusterdown += b.clusterdown;
    a.splits += b.splits;
    a.rejected += b.rejected;
    a.backend_errors += b.backend_errors;
    a.backend_timeouts += b.backend_timeouts;
    a.slow_entries += b.slow_entries;
    a.slow_skipped += b.slow_skipped;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command;
    use crate::stats::{cmdid, Sample};
    use std::time::{Duration, Instant};

    #[test]
    fn totals_add_workers_up() {
        let t0 = Instant::now();
        let mut a = Snapshot::empty(0, t0);
        let mut b = Snapshot::empty(1, t0);
        a.before.at = t0;
        a.now = Sample {
            at: t0 + Duration::from_secs(1),
            commands: 100,
            net_in: 2048,
            net_out: 0,
        };
        b.now = Sample {
            at: t0 + Duration::from_secs(2),
            commands: 50,
            net_in: 0,
            net_out: 0,
        };
        a.counters.moved = 2;
        b.counters.moved = 3;
        let get = cmdid::of(command::lookup(b"get").unwrap());
        let mut h = Hist::new();
        h.record(10);
        a.cmds.push(Arc::new(CmdSnap {
            id: get,
            calls: 1,
            usec: 10,
            rejected: 0,
            failed: 0,
            hist: Some(h.clone()),
        }));
        b.cmds.push(Arc::new(CmdSnap {
            id: get,
            calls: 1,
            usec: 30,
            rejected: 1,
            failed: 0,
            hist: Some(h),
        }));
        let t = totals(&[Arc::new(a), Arc::new(b)]);
        assert_eq!(t.commands, 150);
        assert_eq!(t.counters.moved, 5);
        assert!((t.ops_per_sec - 125.0).abs() < 1e-9, "{}", t.ops_per_sec);
        assert!((t.in_kbps - 2.0).abs() < 1e-9);
        assert_eq!(t.cmds.len(), 1);
        assert_eq!(
            (t.cmds[0].calls, t.cmds[0].usec, t.cmds[0].rejected),
            (2, 40, 1)
        );
        assert_eq!(t.cmds[0].hist.as_ref().unwrap().count(), 2);
    }
}
