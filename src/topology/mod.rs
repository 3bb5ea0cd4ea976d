//! The cluster map: where every slot lives, kept current by one thread.
//!
//! ```text
//!   workers ──request_refresh()──► refresher thread ──CLUSTER SHARDS──► a node
//!      ▲                                 │
//!      └──── load() / epoch() ◄── ArcSwap<Topology> (published whole)
//! ```
//!
//! The refresher asks one node for the map every `topology-refresh-secs`,
//! and sooner when a worker asks (a redirect, a dead connection); requests
//! arriving closer than 100 ms to the previous fetch are folded into one.
//! Discovery tries every node of the current map, then the configured
//! seeds, so losing the seeds does not blind the proxy once it knows the
//! cluster. A map is published only when it differs from the current one,
//! and then with the next epoch.
//!
//! Workers read `epoch()` (one atomic load) once per loop turn and reload
//! the `Arc<Topology>` only when it moved. The refresher never blocks a
//! worker; a failed refresh keeps the previous map.

pub mod discover;
pub mod probe;
pub mod slot;
pub mod snapshot;

pub use slot::{key_slot, SLOTS};
pub use snapshot::{Node, Role, Shard, Topology};

use crate::resp::value::Value;
use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// On-demand refreshes closer together than this are coalesced.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// While no map is known, retry this often.
const RETRY_WHEN_EMPTY: Duration = Duration::from_secs(1);

enum Msg {
    Refresh,
    Stop,
}

/// The shared, read-mostly side of the topology.
pub struct TopologyHandle {
    current: ArcSwap<Topology>,
    epoch: AtomicU64,
    /// Unix milliseconds of the last successful fetch (changed or not).
    last_ok_ms: AtomicU64,
    refreshes: AtomicU64,
    tx: Sender<Msg>,
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

    pub fn stop(&self) {
        let _ = self.tx.try_send(Msg::Stop);
    }
}

pub struct Refresher {
    handle: Arc<TopologyHandle>,
    rx: Receiver<Msg>,
    seeds: Vec<String>,
    interval: Duration,
    timeout: Duration,
    /// Sent ahead of every query (`backend-password`).
    auth: Option<probe::Auth>,
}

impl Refresher {
    /// A refresher over `seeds` (`host:port`), authenticating with `auth`
    /// when given. Nothing is fetched yet.
    pub fn new(
        seeds: Vec<String>,
        interval: Duration,
        timeout: Duration,
        auth: Option<probe::Auth>,
    ) -> Refresher {
        let (tx, rx) = crossbeam_channel::bounded(4);
        let handle = Arc::new(TopologyHandle {
            current: ArcSwap::from_pointee(Topology::empty()),
            epoch: AtomicU64::new(0),
            last_ok_ms: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            tx,
        });
        Refresher {
            handle,
            rx,
            seeds,
            interval,
            timeout,
            auth,
        }
    }

    pub fn handle(&self) -> Arc<TopologyHandle> {
        self.handle.clone()
    }

    /// Candidates in the order tried: current masters, current replicas,
    /// then the seeds.
    fn candidates(&self) -> Vec<SocketAddr> {
        let cur = self.handle.load();
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
        for seed in &self.seeds {
            match probe::resolve(seed) {
                Ok(addrs) => addrs.into_iter().for_each(&mut push),
                Err(e) => {
                    log::warn!(target: "mithril::topology", "cannot resolve seed {seed}: {e}")
                }
            }
        }
        out
    }

    fn fetch_from(&self, addr: SocketAddr) -> Result<Topology, String> {
        let ask = |cmd: &[&[u8]]| {
            probe::query(addr, self.timeout, self.auth.as_ref(), cmd).map_err(|e| e.to_string())
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
            discover::from_shards(&shards, addr).map_err(|e| e.to_string())?
        };
        if topo.is_empty() {
            return Err("the node reports no slots assigned".into());
        }
        Ok(topo)
    }

    /// One refresh: the first candidate that answers wins. Returns true
    /// when a map was obtained.
    pub fn refresh_once(&self) -> bool {
        let candidates = self.candidates();
        let mut last_err = String::from("no cluster-nodes configured");
        for addr in candidates {
            match self.fetch_from(addr) {
                Ok(topo) => {
                    self.publish(topo, addr);
                    return true;
                }
                Err(e) => {
                    log::debug!(target: "mithril::topology", "topology from {addr} failed: {e}");
                    last_err = format!("{addr}: {e}");
                }
            }
        }
        log::warn!(target: "mithril::topology", "cannot load the cluster topology from any known node (last: {last_err})");
        false
    }

    fn publish(&self, mut topo: Topology, from: SocketAddr) {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.handle.last_ok_ms.store(now_ms, Ordering::Relaxed);
        self.handle.refreshes.fetch_add(1, Ordering::Relaxed);
        let cur = self.handle.load();
        if cur.same_layout(&topo) {
            return;
        }
        topo.epoch = cur.epoch + 1;
        topo.min_version = self.lowest_master_version(&topo);
        let replicas: usize = topo.shards.iter().map(|s| s.replicas.len()).sum();
        log::info!(
            target: "mithril::topology",
            "topology epoch {} from {from}: {} masters, {replicas} replicas, {} of 16384 slots served",
            topo.epoch,
            topo.shards.len(),
            topo.covered_slots()
        );
        let epoch = topo.epoch;
        self.handle.current.store(Arc::new(topo));
        self.handle.epoch.store(epoch, Ordering::Release);
    }

    /// `INFO server` of every master, for the lowest `redis_version` (None
    /// when one does not answer: the proxy then reports its own).
    fn lowest_master_version(&self, topo: &Topology) -> Option<String> {
        let mut low: Option<String> = None;
        for n in topo.masters() {
            let info = probe::query(
                n.addr,
                self.timeout,
                self.auth.as_ref(),
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

    /// The thread body: periodic refreshes plus debounced on-demand ones.
    pub fn run(self) {
        let mut last_fetch = Instant::now();
        loop {
            let period = if self.handle.load().is_empty() {
                RETRY_WHEN_EMPTY
            } else {
                self.interval
            };
            let wait = (last_fetch + period).saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Msg::Refresh) => {
                    // Fold every request until DEBOUNCE after the previous
                    // fetch into this one, but still honour a stop.
                    let deadline = last_fetch + DEBOUNCE;
                    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                        match self.rx.recv_timeout(left) {
                            Ok(Msg::Refresh) => continue,
                            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                            Err(RecvTimeoutError::Timeout) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            while let Ok(m) = self.rx.try_recv() {
                if let Msg::Stop = m {
                    return;
                }
            }
            self.refresh_once();
            last_fetch = Instant::now();
        }
    }

    pub fn spawn(self) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("topology".into())
            .spawn(move || self.run())
    }
}
