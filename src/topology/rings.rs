//! The ring pools' side of the refresher: a ring's part of the map built
//! from its live servers (`health`), the health checks that eject and
//! take back servers, and a reload's new server list.

use super::{probe, Refresher, RingServers, Source, Topology};
use crate::resp::value::Value;
use std::net::SocketAddr;
use std::sync::Arc;

impl Refresher {
    /// Ring pool `i`'s servers from now on (a reload): its part rebuilt
    /// from them and published.
    pub(super) fn set_ring(&mut self, i: usize, (new, new_health): RingServers) {
        if let Some(Source::Ring {
            name,
            servers,
            health,
            ..
        }) = self.sources.get_mut(i)
        {
            let list: Vec<&str> = new.iter().map(|s| s.2.as_str()).collect();
            log::info!(target: "mithril::topology", "pool {name}: servers now {}", list.join(" "));
            *servers = new;
            *health = new_health;
            self.parts[i] = Arc::new(self.ring_part(i));
            self.publish_if_changed(None);
        }
    }

    /// Ring pool `i`'s part: its servers, the ring built from the live
    /// ones. A server whose address does not resolve is taken as down.
    pub(super) fn ring_part(&self, i: usize) -> Topology {
        let Source::Ring {
            name,
            servers,
            dist,
            hash,
            tag,
            health,
            ..
        } = &self.sources[i]
        else {
            return Topology::unknown_cluster("");
        };
        let mut live = health.live();
        let resolved: Vec<(String, u32, SocketAddr)> = servers
            .iter()
            .enumerate()
            .map(|(j, (n, w, hostport))| {
                let addr = probe::resolve(hostport)
                    .ok()
                    .and_then(|a| a.into_iter().next());
                if addr.is_none() {
                    log::warn!(target: "mithril::topology", "pool {name}: cannot resolve server {hostport}");
                    if health.auto_eject() {
                        if let Some(l) = live.get_mut(j) {
                            *l = false;
                        }
                    }
                }
                let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
                (n.clone(), *w, addr.unwrap_or(unspecified))
            })
            .collect();
        Topology::ring(name, &resolved, &live, *dist, *hash, *tag)
    }

    /// Health checks of every ring pool: a PING to each server in its
    /// ring (a failure counts toward its ejection), and one to each
    /// ejected server whose retry time has passed (answered: it rejoins).
    /// True when some ring changed.
    pub(super) fn check_rings(&mut self) -> bool {
        let mut changed = false;
        for i in 0..self.sources.len() {
            let Source::Ring {
                name,
                servers,
                health,
                auth,
                ..
            } = &self.sources[i]
            else {
                continue;
            };
            if !health.auto_eject() {
                continue;
            }
            let live = health.live();
            let ping = |j: usize| -> bool {
                let Some((_, _, hostport)) = servers.get(j) else {
                    return false;
                };
                let Some(addr) = probe::resolve(hostport)
                    .ok()
                    .and_then(|a| a.into_iter().next())
                else {
                    return false;
                };
                matches!(
                    probe::query(
                        addr,
                        self.timeout,
                        auth.as_ref(),
                        self.tls.as_deref(),
                        &[b"PING"]
                    ),
                    Ok(Value::Simple(_))
                )
            };
            for (j, &in_ring) in live.iter().enumerate() {
                if !in_ring {
                    continue;
                }
                if ping(j) {
                    health.answered(j);
                } else if health.failed(j) {
                    log::warn!(target: "mithril::topology", "pool {name}: server {} ejected (health check)", servers[j].2);
                }
            }
            for j in health.due() {
                if ping(j) {
                    log::info!(target: "mithril::topology", "pool {name}: server {} back in the ring", servers[j].2);
                    health.rejoin(j);
                } else {
                    health.stay_out(j);
                }
            }
            if health.take_changed() {
                self.parts[i] = Arc::new(self.ring_part(i));
                changed = true;
            }
        }
        changed
    }

    /// Rebuild the rings whose servers left or rejoined since last
    /// looked (no probe); true when one was.
    pub(super) fn rebuild_changed_rings(&mut self) -> bool {
        let mut changed = false;
        for i in 0..self.sources.len() {
            if let Source::Ring { health, .. } = &self.sources[i] {
                if health.take_changed() {
                    self.parts[i] = Arc::new(self.ring_part(i));
                    changed = true;
                }
            }
        }
        changed
    }
}
