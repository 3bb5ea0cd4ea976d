//! A backend connection's end: closed quietly when nothing is owed on it
//! (idle, retired after a map change, or its clients gone), or failed with
//! every request queued on it answered, the failure counted toward a ring
//! server's ejection and a new map asked for.

use super::purpose::InFlight;
use super::{Timer, Worker};
use crate::backend::{Role, State};
use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;

impl Worker {
    /// Close a connection without answering anything (its requests'
    /// clients are gone, or it was idle).
    pub(super) fn drop_backend(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        if let Some(mut b) = self.backends.remove(key) {
            if let Some(stream) = b.stream_mut() {
                let _ = cx.registry.deregister(stream);
            }
            self.obs.retire_backend(&b); // observe
            if b.role == Role::Lease {
                self.shared.lease_closed(b.addr);
            }
            if b.role == Role::Tracker {
                self.tracker_lost(key);
            } else if b.tracking != 0 {
                self.tracked_conn_lost();
            }
        }
    }

    /// A connection (or link) to a node that left the map is closed once
    /// its last reply is in.
    pub(super) fn drop_if_retired(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        if self
            .backends
            .get(key)
            .is_some_and(|b| b.role == Role::Retired && b.in_flight() == 0)
        {
            self.drop_backend(cx, key);
        }
    }

    /// Drop a backend connection and answer everything queued on it.
    pub(super) fn backend_failed(&mut self, cx: &mut Context<'_, Timer>, key: Key, reason: &str) {
        let Some(mut b) = self.backends.remove(key) else {
            return;
        };
        if let Some(stream) = b.stream_mut() {
            let _ = cx.registry.deregister(stream);
        }
        self.obs.retire_backend(&b); // observe
        let addr = b.addr;
        if matches!(b.role, Role::Shared(_)) {
            // A ring's server: one more failure toward its ejection.
            self.ring_failure(b.server_pool, b.ring_server, addr, reason);
        }
        // Never usable (its TCP connect or its TLS handshake unfinished):
        // a failed connect, which the set backs off from.
        let unready = b.state == State::Connecting || b.tls_handshaking();
        if let Some(pool) = b.conn_set().filter(|_| unready) {
            self.place
                .conns
                .mark_failed(pool, cx.now, reason.to_string());
        }
        if b.role == Role::Lease {
            self.shared.lease_closed(addr);
        }
        if b.role == Role::Tracker {
            log::debug!(target: "mithril::worker", "worker {}: tracker to {addr} closed: {reason}", self.id);
            self.tracker_lost(key);
            return;
        }
        if b.tracking != 0 {
            self.tracked_conn_lost();
        }
        if b.role == Role::Lease && b.in_flight() == 0 {
            // An idle lease the node closed (its `timeout`): nothing lost.
            log::debug!(target: "mithril::worker", "worker {}: idle lease to {addr} closed: {reason}", self.id);
            return;
        }
        // observe: counted per node; the warning is sampled per node.
        let node = (b.server_pool, addr);
        self.obs
            .backend_failed(self.id, node, reason, b.in_flight(), cx.now);
        self.shared.topology.request_refresh();
        if let Role::Pubsub(owner) = b.role {
            // A subscriber that lost its home connection lost its
            // subscriptions: close it rather than let it wait forever.
            // Another connection's are made again (pubsub/mod.rs).
            if self.subscriber_lost(owner, key) {
                self.close_session(cx, owner);
            }
            return;
        }
        let lost = Bytes::from(format!(
            "-ERR mithril: connection to {addr} lost ({reason})\r\n"
        ));
        let unsent = Bytes::from(format!(
            "-CLUSTERDOWN mithril: cannot reach {addr} ({reason})\r\n"
        ));
        let drained: Vec<(InFlight, bool)> = b.drain().collect();
        for (f, sent) in drained {
            let err = if sent { lost.clone() } else { unsent.clone() };
            self.complete_error(cx, f, err);
        }
    }

    /// A ring pool's server failed (a connection lost, refused or timed
    /// out, or an -OOM / -BUSY / -LOADING reply): counted toward its
    /// ejection; one that ejects it asks for a new map.
    pub(super) fn ring_failure(
        &self,
        pool: usize,
        server: Option<u16>,
        addr: SocketAddr,
        why: &str,
    ) {
        let (Some(i), Some(h)) = (
            server,
            self.shared.pools.get(pool).and_then(|p| p.ring_health()),
        ) else {
            return;
        };
        if h.failed(usize::from(i)) {
            log::warn!(target: "mithril::worker", "pool {}: server {addr} ejected ({why})", self.shared.pools[pool].name);
            self.shared.topology.request_refresh();
        }
    }

    /// The connection `bkey` got a reply twemproxy counts as its server's
    /// failure.
    pub(super) fn server_failed(&self, bkey: Key) {
        if let Some(b) = self.backends.get(bkey) {
            self.ring_failure(b.server_pool, b.ring_server, b.addr, "a failure reply");
        }
    }
}
