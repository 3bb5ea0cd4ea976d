//! Pools a reload adds or removes, as the refresher takes them.
//!
//! ```text
//!   reload ──AddPool(i, source)──► sources[i], parts[i] ──► published ──► ack
//!   reload ──RetirePool(i, t)────► part kept until t (clients drain)
//!                                   └─ at t: Source::Retired, an empty part
//! ```
//!
//! A pool's index is its place in `sources` and `parts`, the same as in
//! `Shared::pools`: the reload adds a pool to both in the same order, one
//! reload at a time, and a removed pool keeps its index for good. Its
//! part is emptied (no nodes, no units) only once its clients had their
//! drain time, so that a client still finishing a request is placed as
//! before; the workers then retire their connections to its nodes as for
//! any node a map no longer has.

use super::{Refresher, Source, Topology};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

impl Refresher {
    /// Pool `i` (the next index) is `source` from now on: its part is built
    /// (a ring's or fixed groups' at once, a cluster's asked for by the
    /// caller next) and published.
    pub(super) fn add_pool(&mut self, i: usize, source: Source) {
        // The reload adds pools in order; should a message have been lost,
        // the indices it skipped are kept empty rather than shifted.
        while self.sources.len() < i {
            let n = self.sources.len();
            log::warn!(target: "mithril::topology", "pool index {n} was never added; kept empty");
            self.push(Source::Retired {
                name: String::new(),
            });
        }
        if i < self.sources.len() {
            log::warn!(target: "mithril::topology", "pool index {i} exists already; not added again");
            return;
        }
        log::info!(target: "mithril::topology", "pool {}: added by a reload", source.name());
        self.push(source);
        match &self.sources[i] {
            Source::Ring { .. } => self.parts[i] = Arc::new(self.ring_part(i)),
            Source::Groups(g) => {
                if self.watching {
                    // Every sentinel it names gets a watcher (poll_groups
                    // spawns one for each one it lists as fresh).
                    let known = g.sentinels.clone();
                    if let Source::Groups(g) = &mut self.sources[i] {
                        g.fresh = known;
                    }
                }
                self.poll_groups(i);
            }
            Source::Cluster { .. } | Source::Retired { .. } => {}
        }
        self.publish_if_changed(None);
    }

    fn push(&mut self, source: Source) {
        self.parts
            .push(Arc::new(Topology::unknown_cluster(source.name())));
        self.sources.push(source);
        self.watch_stops.push(Arc::new(AtomicBool::new(false)));
    }

    /// Pool `i` was removed by a reload: its sentinels are no longer
    /// watched, nothing of it is asked any more, and its part stays as it
    /// is until `until`.
    pub(super) fn retire_pool(&mut self, i: usize, until: Instant) {
        let Some(source) = self.sources.get_mut(i) else {
            return;
        };
        let name = source.name().to_string();
        log::info!(target: "mithril::topology", "pool {name}: removed by a reload; its map stays while its clients drain");
        *source = Source::Retired { name };
        if let Some(stop) = self.watch_stops.get(i) {
            stop.store(true, Ordering::Relaxed);
        }
        self.retiring.push((i, until));
    }

    /// Removed pools whose clients had their time: their parts emptied,
    /// the map published without their nodes.
    pub(super) fn end_retirements(&mut self) {
        let now = Instant::now();
        let mut any = false;
        let parts = &mut self.parts;
        let sources = &self.sources;
        self.retiring.retain(|&(i, until)| {
            if until > now {
                return true;
            }
            if let (Some(part), Some(src)) = (parts.get_mut(i), sources.get(i)) {
                *part = Arc::new(Topology::retired(src.name()));
                any = true;
            }
            false
        });
        if any {
            self.publish_if_changed(None);
        }
    }

    /// Group pool `i`'s sentinels changed (a reload): the watchers of the
    /// old ones stop, and every one the pool names now gets a watcher.
    pub(super) fn rewatch(&mut self, i: usize) {
        if let Some(stop) = self.watch_stops.get_mut(i) {
            stop.store(true, Ordering::Relaxed);
            *stop = Arc::new(AtomicBool::new(false));
        }
        if let Some(Source::Groups(g)) = self.sources.get_mut(i) {
            g.fresh = if self.watching {
                g.sentinels.clone()
            } else {
                Vec::new()
            };
        }
    }
}
