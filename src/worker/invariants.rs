//! Debug builds: the checks of what must hold between a worker's
//! sessions and backends after dispatch and after each flush (each
//! object's own `check_invariants`, plus what only the worker sees),
//! fenced like a session's input so a violation closes what broke it.
use super::*;

impl Worker {
    /// Debug builds: what must hold of session `key` (see
    /// `Session::check_invariants`), and what only the worker can see: the
    /// lease of a blocked session carries its command (or it is held for
    /// that lease until it may go in arrival order), its pin is a lease
    /// off the idle list, its subscriber connection exists.
    #[cfg(debug_assertions)]
    pub(super) fn check_session(&self, key: Key) {
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        s.check_invariants();
        if let Some(lease) = s.input().lease() {
            assert!(
                self.backends
                    .get(lease)
                    .is_some_and(|b| b.role == Role::Lease
                        && (b.carries(key) || self.waits_in_order_on(lease, key))),
                "client {}: blocked on lease {lease:?}, which does not carry its command",
                s.id
            );
        }
        if let Some(p) = s.pin {
            // A live pin is a lease nobody else may take.
            assert!(
                self.backends
                    .get(p.conn)
                    .map_or(true, |b| b.role == Role::Lease),
                "client {}: pinned to a connection that is not a lease",
                s.id
            );
            assert!(
                !self.idle_leases.values().any(|idle| idle.contains(&p.conn)),
                "client {}: its pin is on the idle list",
                s.id
            );
        }
        if let Some(sub) = &s.sub {
            for c in &sub.conns {
                assert!(
                    self.backends
                        .get(c.conn)
                        .is_some_and(|b| b.role == Role::Pubsub(key) && b.addr == c.addr),
                    "client {}: its subscriber connection to {} is gone",
                    s.id,
                    c.addr
                );
            }
        }
    }

    /// Debug builds: what must hold of backend `key` (see
    /// `Backend::check_invariants`), and that a pooled one is its pool's.
    #[cfg(debug_assertions)]
    pub(super) fn check_backend(&self, key: Key) {
        let Some(b) = self.backends.get(key) else {
            return;
        };
        b.check_invariants();
        if let Some(pool) = b.conn_set() {
            assert!(
                self.place.conns.sets[pool].conns.contains(&key),
                "{}: a pooled connection its pool does not list",
                b.addr
            );
        }
    }

    /// Debug builds, after a flush: the checks above, fenced like a
    /// session's input. A violation is a bug: logged, and what broke it
    /// is closed (a session; a backend, answering what it carries).
    #[cfg(debug_assertions)]
    pub(super) fn check_fenced(&mut self, cx: &mut Context<'_, Timer>, kind: Kind, key: Key) {
        let checked = catch_unwind(AssertUnwindSafe(|| match kind {
            SESSION => self.check_session(key),
            _ => self.check_backend(key),
        }));
        if checked.is_ok() {
            return;
        }
        log::error!(
            target: "mithril::worker",
            "worker {}: invariant violated after a flush; closing that connection (this is a bug)",
            self.id
        );
        match kind {
            SESSION => self.close_session(cx, key),
            _ => self.backend_failed(cx, key, "invariant violated"),
        }
    }
}
