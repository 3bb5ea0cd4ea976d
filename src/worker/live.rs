//! What a reload (or CONFIG SET) changes in a running worker besides the
//! atomics it reads at each use: the limits and timeouts it keeps copies
//! of and `read-from-replicas` (taken at the tick after `Live::limits_gen`
//! moved; the placement's tables are built again for the latter), the clients
//! of a listener the reload removed (drained), and the health index of
//! each connection to a ring's server once a new map renumbered them (a
//! reload changed the ring's servers).

use super::{Timer, Worker};
use reactor::Context;
use std::net::SocketAddr;
use std::time::Duration;

impl Worker {
    /// The limits and timeouts CONFIG SET or a reload changed
    /// (`shared::LIVE_LIMITS`), in force from this tick on: requests
    /// parsed, outputs checked and connections opened from now on use
    /// them; what already runs keeps what it had.
    #[cold]
    pub(super) fn take_limits(&mut self, cx: &mut Context<'_, Timer>, gen: u64) {
        self.limits_gen = gen;
        let shared = self.shared.clone();
        let c = shared.live.limits.lock().unwrap_or_else(|p| p.into_inner());
        // Reads placed from now on follow the new rule; those on their way
        // finish where they went.
        if let Some(retired) = self.place.set_read_from(c.read_from_replicas) {
            self.retire_connections(cx, retired);
        }
        self.limits.max_bulk_len = c.proto_max_bulk_len.min(usize::MAX as u64) as usize;
        self.query_limit = c.query_buffer_limit.min(usize::MAX as u64) as usize;
        self.connect_timeout = Duration::from_millis(c.connect_timeout_ms);
        self.backend_timeout =
            (c.backend_timeout_ms > 0).then(|| Duration::from_millis(c.backend_timeout_ms));
        let o = &mut self.overload;
        o.high_water = c.client_output_high_water.min(usize::MAX as u64) as usize;
        o.normal = c.output_limit_normal;
        o.pubsub = c.output_limit_pubsub;
        o.replica = c.output_limit_replica;
        o.total_limit = c.client_output_total_limit;
    }

    /// A new map is installed: each connection to a ring pool's server
    /// takes that server's index in it, the one its health is counted
    /// under (a reload that changed the servers renumbers them; a server
    /// the map no longer has gives none, and its connections are retired).
    #[cold]
    pub(super) fn ring_servers_follow(&mut self) {
        let place = &self.place;
        for (_, b) in self.backends.iter_mut() {
            if b.ring_server.is_some() {
                b.ring_server = place.ring_server(b.server_pool, b.addr).map(|i| i as u16);
            }
        }
    }

    /// Pools with `preconnect yes`: a connection to each of their masters
    /// for each connection slot (`server-connections`), opened at the
    /// first tick and after each new map, as twemproxy connects to every
    /// server at start. Connections already open are kept; a server that
    /// refuses is left to the usual backoff.
    #[cold]
    pub(super) fn preconnect(&mut self, cx: &mut Context<'_, Timer>) {
        self.preconnected = self.place.epoch();
        let (map, shared) = (self.place.map().clone(), self.shared.clone());
        for (i, pool) in map.pools.iter().enumerate() {
            let Some(rt) = shared.pools.get(i) else {
                continue;
            };
            if !rt.preconnect || rt.is_retired() {
                continue;
            }
            for shard in pool.shards.clone() {
                let Some(set) = self.place.shard_master(shard, crate::resp::Proto::Resp2) else {
                    continue;
                };
                for slot in 0..rt.conns {
                    let _ = self.backend_for(cx, set, slot);
                }
            }
        }
    }

    /// Pools a reload added: the placement's per-pool tables and the
    /// statistics' per-pool counters grow to cover them.
    #[cold]
    pub(super) fn pools_added(&mut self) {
        let pools = &self.shared.pools;
        self.place.set_pools(
            pools.iter().map(|p| p.conns).collect(),
            pools.iter().map(|p| p.db).collect(),
        );
        self.obs.stats.pools_grow(pools.len()); // observe
    }

    /// A pool a reload removed had its drain time: once its part of the
    /// map is emptied, the clients it still has (a blocked one, say) are
    /// closed, as SIGTERM's `shutdown-timeout` closes them.
    pub(super) fn close_retired_pools(
        &mut self,
        cx: &mut Context<'_, Timer>,
        old: &crate::topology::Topology,
    ) {
        let new = self.place.map().clone();
        let emptied = |i: usize| {
            new.pools.get(i).is_some_and(|p| p.units == 0)
                && old.pools.get(i).is_some_and(|p| p.units > 0)
                && self.shared.pools.get(i).is_some_and(|p| p.is_retired())
        };
        if !(0..new.pools.len()).any(emptied) {
            return;
        }
        let gone: Vec<_> = self
            .sessions
            .iter()
            .filter(|(_, s)| emptied(s.pool()))
            .map(|(k, _)| k)
            .collect();
        for key in gone {
            self.close_session(cx, key);
        }
    }

    /// A reload removed the listener at `addr`: the sessions that came
    /// through it read nothing more and close once their replies are
    /// written (a blocked one when its block ends). A wildcard listener
    /// owns every local address of its port.
    #[cold]
    pub(super) fn listener_gone(&mut self, cx: &mut Context<'_, Timer>, addr: SocketAddr) {
        let came = |local: Option<SocketAddr>| {
            local.is_some_and(|l| {
                l.port() == addr.port() && (addr.ip().is_unspecified() || l.ip() == addr.ip())
            })
        };
        for key in self.sessions.keys() {
            let Some(s) = self.sessions.get_mut(key) else {
                continue;
            };
            if !came(s.local_addr()) || s.input().is_blocked() || s.closing() {
                continue;
            }
            s.close_after_flush();
            if s.idle() {
                self.close_session(cx, key);
            } else {
                self.mark_session_dirty(key);
            }
        }
    }
}
