//! The worker's side of TLS sessions: starting one on a connection the
//! TLS listener accepted, and bounding its handshake in time; and the
//! same bound on a node connection's handshake (`tls-cluster yes`).
//!
//! A client accepted on `tls-port` gets a rustls server connection from
//! the shared configuration (`Shared::tls`) and is listed here with its
//! handshake deadline (`tls-handshake-timeout` from the accept). The tick
//! (every 100 ms) drops from the list every session whose handshake is
//! over or that is gone, and closes those still handshaking past their
//! deadline: a silent client, a half handshake or a trickle of bytes costs
//! its socket and one rustls connection (a handshake message at most) for
//! that long, never longer than a tick more. Garbage that is not TLS ends
//! sooner: rustls refuses the first record and the read closes the
//! session (`session/tls.rs`).
//!
//! The list holds at most one entry per TLS session, added once at its
//! accept; a plain session is never in it, and a worker without TLS
//! clients pays one `is_empty` per tick.
//!
//! A node connection over TLS gets one timer instead, armed when it opens
//! (`Timer::TlsHandshake`, `tls-handshake-timeout` from the connect's
//! start, so the TCP connect counts too): if the handshake is still under
//! way when it fires, the connection fails as a refused connect would,
//! whether or not `backend-timeout` bounds a silent node. A plain
//! connection arms none.

use super::{Timer, Worker};
use reactor::{Context, Key};
use std::time::{Duration, Instant};

impl Worker {
    /// A rustls server connection for a client of the TLS listener; `None`
    /// (the socket is then closed) when TLS is off or rustls refuses.
    pub(super) fn tls_connection(&self) -> Option<rustls::ServerConnection> {
        let cfg = self.shared.tls.as_ref()?;
        match rustls::ServerConnection::new(cfg.load_full()) {
            Ok(c) => Some(c),
            Err(e) => {
                log::warn!(target: "mithril::worker", "worker {}: cannot start a TLS session: {e}", self.id);
                None
            }
        }
    }

    /// How long a handshake may take, a client's or a node's
    /// (`tls-handshake-timeout`, read at start).
    pub(super) fn tls_handshake_limit(&self) -> Duration {
        Duration::from_millis(self.shared.config.tls.handshake_timeout_ms)
    }

    /// Session `key` starts its handshake now.
    pub(super) fn tls_started(&mut self, key: Key, now: Instant) {
        let limit = self.tls_handshake_limit();
        self.tls_handshakes.push((key, now + limit));
    }

    /// Node connection `key`'s handshake time is up: still handshaking, it
    /// fails as a refused connect does (its requests get the same
    /// "cannot reach" error, its connection set backs off). Done, or a
    /// connection gone since (a reused slot has another generation):
    /// nothing to do.
    pub(super) fn backend_tls_due(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        if self.backends.get(key).is_some_and(|b| b.tls_handshaking()) {
            self.backend_failed(cx, key, "TLS handshake not finished in time");
        }
    }

    /// Close the sessions whose handshake outlived its deadline; forget
    /// those whose handshake is over.
    pub(super) fn tls_tick(&mut self, cx: &mut Context<'_, Timer>) {
        if self.tls_handshakes.is_empty() {
            return;
        }
        let now = cx.now;
        let sessions = &self.sessions;
        let mut late = Vec::new();
        self.tls_handshakes.retain(|&(key, deadline)| {
            match sessions.get(key) {
                Some(s) if s.tls_handshaking() => {
                    if now >= deadline {
                        late.push(key);
                        return false;
                    }
                    true
                }
                // Done, or gone (a reused slot has another generation).
                _ => false,
            }
        });
        for key in late {
            if let Some(s) = self.sessions.get(key) {
                log::debug!(target: "mithril::worker", "worker {}: client {} closed: TLS handshake not finished in time", self.id, s.id);
                self.obs.stats.pool(s.pool()).client_err += 1; // observe
            }
            self.close_session(cx, key);
        }
    }
}
