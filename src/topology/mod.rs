//! The map of every pool: where every unit lives, kept current by one
//! thread.
//!
//! ```text
//!   workers ──request_refresh()──► refresher thread ──CLUSTER SHARDS──► a cluster node
//!      ▲                                 │  └──────── PING ──► ring servers (health)
//!      └──── load() / epoch() ◄── ArcSwap<Topology> (published whole)
//! ```
//!
//! The refresher keeps one part per pool ([`Source`]): a cluster pool's
//! map, asked of one of its nodes every `topology-refresh-secs` and sooner
//! when a worker asks (a redirect, a dead connection), requests closer
//! than 100 ms to the previous fetch folded into one; a ring pool's
//! servers, with the ring rebuilt from the live ones whenever one is
//! ejected or rejoins (`health`), or a reload changes the list
//! (`set_ring`). Discovery tries every node of a
//! cluster's current map, then its seeds, so losing the seeds does not
//! blind the proxy once it knows the cluster. The parts are composed into
//! one map, published only when it differs from the current one, and
//! then with the next epoch.
//!
//! Workers read `epoch()` (one atomic load) once per loop turn and reload
//! the `Arc<Topology>` only when it moved. The refresher never blocks a
//! worker; a failed refresh keeps the previous part.

pub mod discover;
pub mod health;
mod live;
pub mod probe;
mod rings;
pub mod sentinel;
pub mod slot;
pub mod snapshot;

pub use slot::{key_slot, SLOTS};
pub use snapshot::{Node, Role, Shard, Topology};

use crate::resp::value::Value;
use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// On-demand refreshes closer together than this are coalesced.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// While no map is known, retry this often.
const RETRY_WHEN_EMPTY: Duration = Duration::from_secs(1);
/// How often the rings' servers are checked (`health`).
const RING_CHECK: Duration = Duration::from_secs(1);

enum Msg {
    Refresh,
    Stop,
    /// A sentinel's event for group pool `pool`: (channel, payload).
    Sentinel(usize, String, String),
    /// New seeds for cluster pool `pool` (a reload).
    Seeds(usize, Vec<String>),
    /// New servers for ring pool `pool`, with their health (a reload).
    Ring(usize, RingServers),
    /// New groups for group pool `pool` (a reload).
    Groups(usize, Box<sentinel::GroupsSource>),
    /// A pool a reload added, at index `pool` (the next): its part is
    /// published before `done` is answered.
    AddPool(usize, Box<Source>, Sender<()>),
    /// A pool a reload removed: its part stays as it is until the
    /// instant given (its clients drain), then is emptied.
    RetirePool(usize, Instant),
}

/// What the refresher's loop still has to do about a message
/// `Refresher::take` acted on.
enum Taken {
    Stop,
    /// A refresh was asked for (debounced by the loop).
    Refresh,
    /// A sentinel's event, acted on.
    Event,
    /// New seeds: a refresh follows at once.
    Seeds,
    /// New ring servers or groups, put in place.
    Applied,
}

/// A ring pool's servers as `Source::Ring` holds them, and their health.
pub type RingServers = (Vec<(String, u32, String)>, Arc<health::RingHealth>);

/// The shared, read-mostly side of the topology.
pub struct TopologyHandle {
    current: ArcSwap<Topology>,
    epoch: AtomicU64,
    /// Unix milliseconds of the last successful fetch (changed or not).
    last_ok_ms: AtomicU64,
    refreshes: AtomicU64,
    tx: Sender<Msg>,
    /// Set by `stop`: the sentinel watchers end.
    stopped: Arc<std::sync::atomic::AtomicBool>,
}

impl TopologyHandle {
    pub fn load(&self) -> Arc<Topology> {
        self.current.load_full()
    }

    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Ask for a refresh soon. Never blocks; extra requests are dropped
    /// (one pending request already covers them).
    pub fn request_refresh(&self) {
        let _ = self.tx.try_send(Msg::Refresh);
    }

    pub fn last_ok_ms(&self) -> u64 {
        self.last_ok_ms.load(Ordering::Relaxed)
    }

    pub fn refresh_count(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// Cluster pool `pool` is found from `seeds` from now on (a reload):
    /// tried after the nodes of its current map, with a refresh at once.
    pub fn set_seeds(&self, pool: usize, seeds: Vec<String>) {
        let _ = self
            .tx
            .send_timeout(Msg::Seeds(pool, seeds), Duration::from_secs(1));
    }

    /// Ring pool `pool` is made of `servers` from now on (a reload): its
    /// ring is rebuilt and published at once, with `health` in place of
    /// the old servers' (indexed as `servers`).
    pub fn set_ring(&self, pool: usize, servers: RingServers) {
        let _ = self
            .tx
            .send_timeout(Msg::Ring(pool, servers), Duration::from_secs(1));
    }

    /// Group pool `pool` is `groups` from now on (a reload of a pool
    /// without sentinels): its part is rebuilt and published at once.
    pub fn set_groups(&self, pool: usize, groups: sentinel::GroupsSource) {
        let _ = self
            .tx
            .send_timeout(Msg::Groups(pool, Box::new(groups)), Duration::from_secs(1));
    }

    /// Pool `pool` (the next index) is `source` from now on (a reload
    /// added it): true once its part is published, false when the
    /// topology thread did not take it within `wait`.
    pub fn add_pool(&self, pool: usize, source: Source, wait: Duration) -> bool {
        let (done, took) = crossbeam_channel::bounded(1);
        let msg = Msg::AddPool(pool, Box::new(source), done);
        self.tx.send_timeout(msg, wait).is_ok() && took.recv_timeout(wait).is_ok()
    }

    /// Pool `pool` was removed by a reload: its part stays until `until`
    /// (its clients drain), then is emptied.
    pub fn retire_pool(&self, pool: usize, until: Instant) {
        let _ = self
            .tx
            .send_timeout(Msg::RetirePool(pool, until), Duration::from_secs(1));
    }

    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        let _ = self.tx.try_send(Msg::Stop);
    }
}

/// Where one pool's part of the map comes from.
pub enum Source {
    /// A Redis Cluster, asked for its map.
    Cluster {
        name: String,
        seeds: Vec<String>,
        /// Sent ahead of every query (the pool's or `backend-password`).
        auth: Option<probe::Auth>,
    },
    /// Standalone servers on a twemproxy ring, rebuilt from the live ones.
    Ring {
        name: String,
        /// (twemproxy's name, weight, `HOST:PORT`), in twemproxy's order.
        servers: Vec<(String, u32, String)>,
        dist: crate::hashkit::Distribution,
        hash: crate::hashkit::HashFn,
        tag: Option<[u8; 2]>,
        health: Arc<health::RingHealth>,
        auth: Option<probe::Auth>,
    },
    /// Master-replica groups, fixed or learnt from Sentinel.
    Groups(Box<sentinel::GroupsSource>),
    /// A pool a reload removed: nothing to ask, an empty part.
    Retired { name: String },
}

impl Source {
    fn name(&self) -> &str {
        match self {
            Source::Cluster { name, .. } | Source::Ring { name, .. } | Source::Retired { name } => {
                name
            }
            Source::Groups(g) => &g.name,
        }
    }
}

pub struct Refresher {
    handle: Arc<TopologyHandle>,
    rx: Receiver<Msg>,
    sources: Vec<Source>,
    /// Each pool's part of the map, as last obtained.
    parts: Vec<Arc<Topology>>,
    interval: Duration,
    timeout: Duration,
    /// Addresses whose last query for a map failed (refused, timed out):
    /// tried after the others, so a frozen node (one that accepts the
    /// connection and never answers) costs `timeout` once, not on every
    /// refresh while the cluster fails it over.
    silent: HashSet<SocketAddr>,
    /// The sentinel watchers run (`spawn`): a sentinel learnt later gets
    /// one at once.
    watching: bool,
    /// `tls-cluster yes`: the probes speak TLS to the nodes.
    tls: Option<Arc<crate::tls::nodes::NodeTls>>,
    /// `tls-sentinel yes`: the sentinels are asked and watched over TLS.
    sentinel_tls: Option<Arc<crate::tls::nodes::NodeTls>>,
    /// Per pool: set to stop the watchers of its sentinels (the pool was
    /// removed, or a reload gave it new groups and sentinels).
    watch_stops: Vec<Arc<std::sync::atomic::AtomicBool>>,
    /// Pools a reload removed whose part stays until the instant given.
    retiring: Vec<(usize, Instant)>,
}

/// A refresh of a cluster pool that cannot succeed as configured: its
/// nodes are not cluster nodes.
pub const NOT_A_CLUSTER: &str = "cluster support disabled";

impl Refresher {
    /// A refresher over `sources`, one per pool, in the pools' order.
    /// Nothing is fetched yet.
    pub fn new(sources: Vec<Source>, interval: Duration, timeout: Duration) -> Refresher {
        // Room for the sentinels' events besides the workers' requests
        // (which are dropped when it is full: one pending covers them).
        let (tx, rx) = crossbeam_channel::bounded(64);
        let parts: Vec<Arc<Topology>> = sources
            .iter()
            .map(|s| Arc::new(Topology::unknown_cluster(s.name())))
            .collect();
        let handle = Arc::new(TopologyHandle {
            current: ArcSwap::from_pointee(Topology::compose(&parts)),
            epoch: AtomicU64::new(0),
            last_ok_ms: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            tx,
            stopped: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        });
        let mut r = Refresher {
            handle,
            rx,
            sources,
            parts,
            interval,
            timeout,
            silent: HashSet::new(),
            watching: false,
            tls: None,
            sentinel_tls: None,
            watch_stops: Vec::new(),
            retiring: Vec::new(),
        };
        r.watch_stops = (0..r.sources.len()).map(|_| Default::default()).collect();
        // A ring's servers are known from the start: its part needs no
        // network (health checks follow in the thread).
        for i in 0..r.sources.len() {
            match &r.sources[i] {
                Source::Ring { .. } => r.parts[i] = Arc::new(r.ring_part(i)),
                Source::Groups(g) => r.parts[i] = Arc::new(g.part()),
                Source::Cluster { .. } | Source::Retired { .. } => {}
            }
        }
        r.publish_if_changed(None);
        r
    }

    /// The probes of the nodes go over TLS (`tls-cluster yes`), the
    /// sentinels' questions and watches too (`tls-sentinel yes`).
    pub fn set_tls(
        &mut self,
        nodes: Option<Arc<crate::tls::nodes::NodeTls>>,
        sentinels: Option<Arc<crate::tls::nodes::NodeTls>>,
    ) {
        self.tls = nodes;
        self.sentinel_tls = sentinels;
    }

    pub fn handle(&self) -> Arc<TopologyHandle> {
        self.handle.clone()
    }

    /// Candidates for pool `i`'s map in the order tried: its current
    /// masters, its current replicas, then its seeds; those that failed
    /// last time after all the others, in the same order.
    fn candidates(&self, i: usize, seeds: &[String]) -> Vec<SocketAddr> {
        let cur = &self.parts[i];
        let mut out: Vec<SocketAddr> = Vec::new();
        let mut push = |a: SocketAddr| {
            if !out.contains(&a) {
                out.push(a);
            }
        };
        for n in cur.masters() {
            push(n.addr);
        }
        for n in &cur.nodes {
            push(n.addr);
        }
        for seed in seeds {
            match probe::resolve(seed) {
                Ok(addrs) => addrs.into_iter().for_each(&mut push),
                Err(e) => {
                    log::warn!(target: "mithril::topology", "cannot resolve seed {seed}: {e}")
                }
            }
        }
        // Stable: the order above holds within each group.
        out.sort_by_key(|a| self.silent.contains(a));
        out
    }

    fn fetch_from(&self, addr: SocketAddr, auth: Option<&probe::Auth>) -> Result<Topology, String> {
        let ask = |cmd: &[&[u8]]| {
            probe::query(addr, self.timeout, auth, self.tls.as_deref(), cmd)
                .map_err(|e| e.to_string())
        };
        let shards = ask(&[b"CLUSTER", b"SHARDS"])?;
        let topo = if let Value::Error(e) = &shards {
            // Servers older than 7.0 do not know SHARDS.
            log::debug!(target: "mithril::topology", "{addr}: CLUSTER SHARDS failed ({}), trying CLUSTER SLOTS", String::from_utf8_lossy(e));
            let slots = ask(&[b"CLUSTER", b"SLOTS"])?;
            if let Value::Error(e) = &slots {
                return Err(String::from_utf8_lossy(e).into_owned());
            }
            discover::from_slots(&slots, addr).map_err(|e| e.to_string())?
        } else {
            discover::from_shards_on(&shards, addr, self.tls.is_some())
                .map_err(|e| e.to_string())?
        };
        if topo.is_empty() {
            return Err("the node reports no slots assigned".into());
        }
        Ok(topo)
    }

    /// One refresh of every pool: each cluster asked for its map, each
    /// ring rebuilt from its live servers. Returns true when every cluster
    /// pool's map was obtained.
    pub fn refresh_once(&mut self) -> bool {
        let mut all = true;
        let mut from = None;
        for i in 0..self.sources.len() {
            match &self.sources[i] {
                Source::Cluster { .. } => match self.refresh_cluster(i) {
                    Some(addr) => from = Some(addr),
                    None => all = false,
                },
                Source::Ring { .. } => {
                    let part = self.ring_part(i);
                    self.parts[i] = Arc::new(part);
                }
                Source::Groups(_) => self.poll_groups(i),
                Source::Retired { .. } => {}
            }
        }
        self.publish_if_changed(from);
        all
    }

    /// Why no node of cluster pool `i` gave a map, when the reason will
    /// not change by waiting: its nodes are not cluster nodes, or they
    /// refuse mithril's credentials.
    pub fn hopeless(&self, i: usize) -> Option<String> {
        let Source::Cluster { name, seeds, auth } = self.sources.get(i)? else {
            return None;
        };
        if let Some(why) =
            probe::auth_problem(seeds, self.timeout, auth.as_ref(), self.tls.as_deref())
        {
            return Some(why);
        }
        for seed in seeds {
            for addr in probe::resolve(seed).unwrap_or_default() {
                let Ok(Value::Error(e)) = probe::query(
                    addr,
                    self.timeout,
                    auth.as_ref(),
                    self.tls.as_deref(),
                    &[b"CLUSTER", b"SHARDS"],
                ) else {
                    continue;
                };
                if String::from_utf8_lossy(&e).contains(NOT_A_CLUSTER) {
                    return Some(format!(
                        "pool {name}: {addr} is not a Redis Cluster node (it answers \"{}\"): \
                         to front standalone servers, declare them as a pool of servers \
                         ('pool {name} server {seed}', placed as twemproxy places keys), or \
                         enable cluster mode on the nodes",
                        String::from_utf8_lossy(&e),
                    ));
                }
            }
        }
        None
    }

    /// The pools that are clusters, by index.
    pub fn cluster_pools(&self) -> Vec<usize> {
        (0..self.sources.len())
            .filter(|&i| matches!(self.sources[i], Source::Cluster { .. }))
            .collect()
    }

    /// Ask cluster pool `i` for its map; the address that answered.
    fn refresh_cluster(&mut self, i: usize) -> Option<SocketAddr> {
        let Source::Cluster { name, seeds, auth } = &self.sources[i] else {
            return None;
        };
        let mut last_err = String::from("no cluster-nodes configured");
        for addr in self.candidates(i, seeds) {
            let got = self.fetch_from(addr, auth.as_ref());
            if got.is_ok() {
                self.silent.remove(&addr);
            } else {
                self.silent.insert(addr);
            }
            match got {
                Ok(mut topo) => {
                    topo.pools[0].name = name.clone();
                    if !self.parts[i].same_layout(&topo) {
                        topo.min_version = self.lowest_master_version(&topo, auth.as_ref());
                    } else {
                        topo.min_version = self.parts[i].min_version.clone();
                    }
                    self.parts[i] = Arc::new(topo);
                    return Some(addr);
                }
                Err(e) => {
                    log::debug!(target: "mithril::topology", "pool {name}: topology from {addr} failed: {e}");
                    last_err = format!("{addr}: {e}");
                }
            }
        }
        log::warn!(target: "mithril::topology", "pool {name}: cannot load the cluster topology from any known node (last: {last_err})");
        None
    }

    /// Cluster pool `i`'s seeds from now on (a reload).
    fn set_seeds(&mut self, i: usize, new: Vec<String>) {
        if let Some(Source::Cluster { name, seeds, .. }) = self.sources.get_mut(i) {
            log::info!(target: "mithril::topology", "pool {name}: seeds now {}", new.join(" "));
            *seeds = new;
        }
    }

    /// Group pool `i`'s groups from now on (a reload of a pool without
    /// sentinels): its part rebuilt and published.
    fn set_groups(&mut self, i: usize, new: Box<sentinel::GroupsSource>) {
        if let Some(Source::Groups(g)) = self.sources.get_mut(i) {
            let names: Vec<&str> = new.groups.iter().map(|(n, _)| n.as_str()).collect();
            log::info!(target: "mithril::topology", "pool {}: groups now {}", g.name, names.join(" "));
            let sentinels = new.uses_sentinel() || g.uses_sentinel();
            *g = new;
            if sentinels {
                // The old sentinels' watchers stop; the new list's start.
                self.rewatch(i);
            }
            self.poll_groups(i);
            self.publish_if_changed(None);
        }
    }

    /// Ask group pool `i`'s sentinels (if it has any) and rebuild its
    /// part.
    fn poll_groups(&mut self, i: usize) {
        let timeout = self.timeout;
        let tls = self.sentinel_tls.clone();
        let Source::Groups(g) = &mut self.sources[i] else {
            return;
        };
        if g.uses_sentinel() {
            g.poll(timeout, tls.as_deref());
        }
        self.parts[i] = Arc::new(g.part());
        // Before `spawn`, nothing is watched: it watches every sentinel
        // known by then.
        if self.watching {
            if let Err(e) = self.watch_fresh(i) {
                log::warn!(target: "mithril::topology", "cannot watch a sentinel: {e}");
            }
        }
    }

    /// A watcher for each sentinel group pool `i` has not watched yet
    /// (`fresh`): a thread that forwards the sentinel's events to the
    /// refresher until the handle is stopped or the pool's stop flag is
    /// set (its sentinels changed, or it was removed).
    fn watch_fresh(&mut self, i: usize) -> std::io::Result<()> {
        let Some(Source::Groups(g)) = self.sources.get_mut(i) else {
            return Ok(());
        };
        let fresh = std::mem::take(&mut g.fresh);
        let auth = g.sentinel_auth.clone();
        let pool_stop = self.watch_stops.get(i).cloned().unwrap_or_default();
        for addr in fresh {
            let (tx, stopped) = (self.handle.tx.clone(), self.handle.stopped.clone());
            let pool_stop = pool_stop.clone();
            let stop = move || stopped.load(Ordering::Relaxed) || pool_stop.load(Ordering::Relaxed);
            let (auth, tls) = (auth.clone(), self.sentinel_tls.clone());
            std::thread::Builder::new()
                .name("sentinel".into())
                .spawn(move || {
                    sentinel::watch(addr, auth, tls.as_deref(), stop, |channel, payload| {
                        let msg = Msg::Sentinel(i, channel, payload);
                        let _ = tx.send_timeout(msg, Duration::from_secs(1));
                    })
                })?;
        }
        Ok(())
    }

    /// A sentinel's event for group pool `i`: applied at once, the
    /// sentinels asked when it says so.
    fn sentinel_event(&mut self, i: usize, channel: &str, payload: &str) {
        let timeout = self.timeout;
        let Some(Source::Groups(g)) = self.sources.get_mut(i) else {
            return;
        };
        let (changed, ask) = g.event(channel, payload);
        if ask {
            g.poll(timeout, self.sentinel_tls.as_deref());
        }
        if changed || ask {
            self.parts[i] = Arc::new(g.part());
            self.publish_if_changed(None);
        }
    }

    /// Group pools whose sentinels are due a question, or whose failover
    /// wait ended: asked, and the map published if it changed.
    fn check_groups(&mut self) {
        let now = Instant::now();
        let mut any = false;
        for i in 0..self.sources.len() {
            let Source::Groups(g) = &self.sources[i] else {
                continue;
            };
            let due = g.uses_sentinel()
                && g.last_poll
                    .map_or(true, |t| now.duration_since(t) >= g.interval);
            let hold_over = g.next_deadline().is_some_and(|d| d <= now);
            if due || hold_over {
                self.poll_groups(i);
                any = true;
            }
        }
        if any {
            self.publish_if_changed(None);
        }
    }

    /// When a group pool next needs [`check_groups`](Self::check_groups).
    fn groups_due(&self) -> Option<Instant> {
        self.sources
            .iter()
            .filter_map(|s| match s {
                Source::Groups(g) if g.uses_sentinel() => {
                    let poll = g.last_poll.map_or(Instant::now(), |t| t + g.interval);
                    Some(g.next_deadline().map_or(poll, |d| d.min(poll)))
                }
                _ => None,
            })
            .min()
    }

    fn publish_if_changed(&self, from: Option<SocketAddr>) {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        if from.is_some() {
            self.handle.last_ok_ms.store(now_ms, Ordering::Relaxed);
            self.handle.refreshes.fetch_add(1, Ordering::Relaxed);
        }
        let mut topo = Topology::compose(&self.parts);
        let cur = self.handle.load();
        if cur.same_layout(&topo) {
            return;
        }
        topo.epoch = cur.epoch + 1;
        let replicas: usize = topo.shards.iter().map(|s| s.replicas.len()).sum();
        let live = topo.nodes.iter().filter(|n| n.healthy).count();
        let line = format!(
            "topology epoch {}{}: {} pools, {} masters ({live} nodes healthy), {replicas} replicas, {} units served",
            topo.epoch,
            from.map(|a| format!(" from {a}")).unwrap_or_default(),
            topo.pools.len(),
            topo.shards.len(),
            topo.covered_slots()
        );
        let epoch = topo.epoch;
        self.handle.current.store(Arc::new(topo));
        self.handle.epoch.store(epoch, Ordering::Release);
        // Logged once in force: a request sent after the line is placed by
        // this map (a test waiting on the line raced the store before).
        log::info!(target: "mithril::topology", "{line}");
    }

    /// `INFO server` of every master, for the lowest `redis_version` (None
    /// when one does not answer: the proxy then reports its own).
    fn lowest_master_version(&self, topo: &Topology, auth: Option<&probe::Auth>) -> Option<String> {
        let mut low: Option<String> = None;
        for n in topo.masters() {
            let info = probe::query(
                n.addr,
                self.timeout,
                auth,
                self.tls.as_deref(),
                &[b"INFO", b"server"],
            )
            .ok()?;
            let text = String::from_utf8_lossy(info.as_bytes()?).into_owned();
            let v = text
                .lines()
                .find_map(|l| l.strip_prefix("redis_version:"))?
                .trim()
                .to_string();
            low = Some(match low {
                Some(l) => Topology::lower_version(&l, &v).to_string(),
                None => v,
            });
        }
        low
    }

    /// Acts on message `m` but for what the loop itself decides (a stop, a
    /// refresh's debounce): said by what it returns.
    fn take(&mut self, m: Msg) -> Taken {
        match m {
            Msg::Stop => Taken::Stop,
            Msg::Refresh => Taken::Refresh,
            Msg::Sentinel(i, channel, payload) => {
                self.sentinel_event(i, &channel, &payload);
                Taken::Event
            }
            Msg::Seeds(i, seeds) => {
                self.set_seeds(i, seeds);
                Taken::Seeds
            }
            Msg::Ring(i, servers) => {
                self.set_ring(i, servers);
                Taken::Applied
            }
            Msg::Groups(i, groups) => {
                self.set_groups(i, groups);
                Taken::Applied
            }
            Msg::AddPool(i, source, done) => {
                let cluster = matches!(*source, Source::Cluster { .. });
                self.add_pool(i, *source);
                let _ = done.try_send(());
                // A cluster's map is asked for at once.
                if cluster {
                    Taken::Seeds
                } else {
                    Taken::Applied
                }
            }
            Msg::RetirePool(i, until) => {
                self.retire_pool(i, until);
                Taken::Applied
            }
        }
    }

    /// The thread body: periodic refreshes plus debounced on-demand ones,
    /// and every second the rings' health checks.
    pub fn run(mut self) {
        let mut last_fetch = Instant::now();
        let mut last_rings = Instant::now();
        loop {
            // Asked each turn: a reload may add a ring pool.
            let rings = self
                .sources
                .iter()
                .any(|s| matches!(s, Source::Ring { health, .. } if health.auto_eject()));
            let known = self
                .cluster_pools()
                .iter()
                .all(|&i| !self.parts[i].is_empty());
            let period = if known {
                self.interval
            } else {
                RETRY_WHEN_EMPTY
            };
            let mut wait = (last_fetch + period).saturating_duration_since(Instant::now());
            if rings {
                wait =
                    wait.min((last_rings + RING_CHECK).saturating_duration_since(Instant::now()));
            }
            if let Some(due) = self.groups_due() {
                wait = wait.min(due.saturating_duration_since(Instant::now()));
            }
            if let Some(due) = self.retiring.iter().map(|r| r.1).min() {
                wait = wait.min(due.saturating_duration_since(Instant::now()));
            }
            let mut asked = false;
            match self.rx.recv_timeout(wait).map(|m| self.take(m)) {
                Ok(Taken::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                // An event is acted on at once (sentinel_event published
                // what it changed): wait again.
                Ok(Taken::Event) => continue,
                Ok(Taken::Seeds) => asked = true,
                Ok(Taken::Applied) => {}
                Ok(Taken::Refresh) => {
                    asked = true;
                    // A worker ejected a ring's server: the ring without
                    // it is published at once, before anything that
                    // waits (probes, the debounce of cluster fetches).
                    if self.rebuild_changed_rings() {
                        self.publish_if_changed(None);
                    }
                    // Fold every request until DEBOUNCE after the previous
                    // fetch into this one, but still honour a stop.
                    let deadline = last_fetch + DEBOUNCE;
                    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                        match self.rx.recv_timeout(left).map(|m| self.take(m)) {
                            Ok(Taken::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                            Ok(_) => {}
                            Err(RecvTimeoutError::Timeout) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            while let Ok(m) = self.rx.try_recv() {
                match self.take(m) {
                    Taken::Stop => return,
                    Taken::Seeds => asked = true,
                    Taken::Event | Taken::Applied | Taken::Refresh => {}
                }
            }
            self.check_groups();
            self.end_retirements();
            if rings && (asked || last_rings.elapsed() >= RING_CHECK) {
                last_rings = Instant::now();
                if self.check_rings() {
                    self.publish_if_changed(None);
                }
            }
            if asked || last_fetch.elapsed() >= period {
                self.refresh_once();
                last_fetch = Instant::now();
            }
        }
    }

    pub fn spawn(mut self) -> std::io::Result<JoinHandle<()>> {
        self.watching = true;
        // One watcher per sentinel of each group pool: they only forward
        // what they hear, and end once the handle is stopped.
        for i in 0..self.sources.len() {
            let Source::Groups(g) = &mut self.sources[i] else {
                continue;
            };
            g.fresh = g.sentinels.clone();
            self.watch_fresh(i)?;
        }
        std::thread::Builder::new()
            .name("topology".into())
            .spawn(move || self.run())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_failed_to_answer_is_asked_last() {
        let seeds = vec![
            "127.0.0.1:7001".to_string(),
            "127.0.0.1:7002".to_string(),
            "127.0.0.1:7003".to_string(),
        ];
        let source = Source::Cluster {
            name: "c".into(),
            seeds: seeds.clone(),
            auth: None,
        };
        let mut r = Refresher::new(
            vec![source],
            Duration::from_secs(10),
            Duration::from_millis(100),
        );
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            r.candidates(0, &seeds),
            [
                addr("127.0.0.1:7001"),
                addr("127.0.0.1:7002"),
                addr("127.0.0.1:7003")
            ]
        );
        r.silent.insert(addr("127.0.0.1:7001"));
        assert_eq!(
            r.candidates(0, &seeds),
            [
                addr("127.0.0.1:7002"),
                addr("127.0.0.1:7003"),
                addr("127.0.0.1:7001")
            ]
        );
    }
}
