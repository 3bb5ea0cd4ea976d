//! State shared by all threads: configuration, the topology handle, the
//! admission counter, each worker's mailbox, and the little state the
//! locally answered commands keep ([`admin`]). Nothing here is touched per
//! request except through a worker's own padded counters.

pub mod admin;
pub mod block_order;
pub mod monitor;
pub mod pipe;
pub mod pools;

pub use pools::{ring_health, PoolRuntime, PoolTable};

pub use admin::AdminState;

use crate::config::Config;
use crate::topology::TopologyHandle;
use reactor::FabricSender;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Keeps a value on its own cache line(s), so one worker's counter does not
/// share a line with another's.
#[repr(align(128))]
#[derive(Default)]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One `maxclients` slot. Taken by the acceptor before a socket is handed
/// to a worker, released exactly once when dropped, whatever the path:
/// rejection, failed handoff, session end, or a panic unwinding the
/// session.
pub struct Ticket {
    clients: Arc<AtomicUsize>,
    /// The pool's own count, when its `client-connections` bounds it.
    pool: Option<Arc<AtomicUsize>>,
}

/// Take one of `max` slots of `count`; false (nothing taken) when full.
fn take(count: &AtomicUsize, max: usize) -> bool {
    if count.fetch_add(1, Ordering::AcqRel) >= max {
        count.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    true
}

impl Ticket {
    /// Take a slot if fewer than `max` are taken, and one of the pool's
    /// (`pool`: its count and bound) when it has a bound of its own.
    pub fn acquire(
        clients: &Arc<AtomicUsize>,
        max: usize,
        pool: Option<(&Arc<AtomicUsize>, usize)>,
    ) -> Option<Ticket> {
        if let Some((n, pool_max)) = pool {
            if !take(n, pool_max) {
                return None;
            }
        }
        if !take(clients, max) {
            if let Some((n, _)) = pool {
                n.fetch_sub(1, Ordering::AcqRel);
            }
            return None;
        }
        Some(Ticket {
            clients: clients.clone(),
            pool: pool.map(|(n, _)| n.clone()),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.clients.fetch_sub(1, Ordering::AcqRel);
        if let Some(n) = &self.pool {
            n.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A connection handed from the acceptor to a worker.
pub struct Accepted {
    pub stream: std::net::TcpStream,
    pub peer: SocketAddr,
    /// The pool of the listener that accepted it.
    pub pool: usize,
    pub ticket: Ticket,
    /// Accepted on the TLS listener (`tls-port`).
    pub tls: bool,
}

/// A listener a reload added or removed, for the acceptor to take.
pub enum ListenerChange {
    /// Bound already (so the reload could say why not): accept on it for
    /// pool `pool`, TLS when the flag says so (`tls-port`).
    Add(mio::net::TcpListener, SocketAddr, usize, bool),
    /// Stop accepting there; its clients drain.
    Remove(SocketAddr),
    /// The listener at this address serves pool `pool` (TLS when the flag
    /// says so) from now on: a removed pool's address taken over by one
    /// the same reload added. The clients it had drain as for `Remove`.
    Move(SocketAddr, usize, bool),
}

pub enum WorkerMsg {
    Accept(Accepted),
    /// A reload removed this listener: the clients that came through it
    /// drain (read nothing more, get their replies, close).
    ListenerGone(SocketAddr),
    /// Stop reading new requests, finish what is in flight, then exit.
    Shutdown,
    /// observe: another worker's question (CLIENT LIST/KILL, INFO).
    Ask(crate::stats::gather::AskMsg),
    /// observe: a part of the answer to this worker's question.
    Answer(crate::stats::gather::AnswerMsg),
    /// Client tracking: an invalidation for a REDIRECT target that is a
    /// session of the receiving worker.
    Invalidate(Box<Invalidation>),
    /// observe: from the acceptor: every connection waiting in the kernel
    /// when this worker's handoff request `n` was seen has been handed
    /// over (see [`Shared::request_handoff`]).
    HandedOver(u64),
    /// The output held for all clients passed `client-output-total-limit`
    /// and the receiver holds the largest share of it: close its largest
    /// holder (worker/overload.rs).
    OutputBudget,
}

/// An invalidation for a client's REDIRECT target on another worker.
pub struct Invalidation {
    /// The target session and its client id (checked: a slot reused since
    /// is not it).
    pub target: reactor::Key,
    pub id: u64,
    /// The keys; `None`: the null (everything), written as `null`, the
    /// tracking client's own protocol's.
    pub keys: Option<Vec<bytes::Bytes>>,
    pub null: &'static [u8],
}

/// What the acceptor and INFO can see of a worker.
pub struct WorkerSlot {
    pub tx: FabricSender<WorkerMsg>,
    /// Commands dispatched since start, stored once per loop turn.
    pub commands: Padded<AtomicU64>,
    /// Sessions currently open on this worker.
    pub sessions: Padded<AtomicUsize>,
    /// This worker's memory figure: the bytes it buffers for its clients
    /// (input, requests in flight, unsent output) plus each open
    /// session's fixed cost (`session::FIXED_COST`), stored at each tick
    /// and when a session opens or closes; summed into
    /// [`Overload::used_memory`] then.
    pub buffered: Padded<AtomicU64>,
    /// observe: the last handoff request this worker made (0: none); the
    /// acceptor answers each with [`WorkerMsg::HandedOver`].
    pub handoff_asked: Padded<AtomicU64>,
    /// Its part of `client-output-total-limit`'s sum (worker/overload.rs).
    pub output: Padded<OutputShare>,
    /// Requests for the node pipes this worker owns, and replies from the
    /// pipes other workers own (`backend-sharding yes`).
    pub pipe: pipe::PipeInbox,
}

/// A worker's part of the output held for every client
/// (`client-output-total-limit`, see `worker/overload.rs`).
#[derive(Default)]
pub struct OutputShare {
    /// Output held for its sessions, as it last published it (when it grew
    /// by a step, at each tick, and after it closed a session for the
    /// budget).
    pub held: AtomicU64,
    /// The most one of its sessions holds, as it last knew it: exact after
    /// it looked at every session, an upper bound in between.
    pub largest: AtomicU64,
    /// Another worker found the sum over the budget and this worker
    /// holding the largest: it looks at its sessions at its next turn
    /// (cleared then). One [`WorkerMsg::OutputBudget`] per setting.
    pub nudged: AtomicBool,
}

/// Most leased connections (blocking commands) to one node, process-wide.
pub const MAX_LEASES_PER_NODE: usize = 512;

pub struct Shared {
    pub config: Config,
    /// What the workers need of each pool besides its map, by pool index:
    /// the start's pools in `Config::server_pools`' order, then those
    /// reloads added (a removed pool keeps its index, retired).
    pub pools: PoolTable,
    pub topology: Arc<TopologyHandle>,
    /// Open client connections (admission tickets outstanding).
    pub clients: Arc<AtomicUsize>,
    pub next_client_id: AtomicU64,
    /// The clients that asked for their id (CLIENT ID, HELLO): client id
    /// -> (worker, session), so a CLIENT TRACKING REDIRECT on another
    /// worker can name them. Locked once when a session first asks and
    /// once when it closes; read by REDIRECT and by invalidations crossing
    /// workers.
    pub named_clients: std::sync::Mutex<std::collections::HashMap<u64, (usize, reactor::Key)>>,
    pub shutting_down: AtomicBool,
    /// A new process took the listening sockets (`crate::upgrade`): the
    /// acceptor has stopped accepting; the clients here drain.
    pub handed_over: AtomicBool,
    /// Listeners a reload added or removed, until the acceptor takes them
    /// (it is woken for each).
    pub listener_changes: std::sync::Mutex<Vec<ListenerChange>>,
    pub workers: Vec<WorkerSlot>,
    pub started: Instant,
    pub rejected_connections: AtomicU64,
    pub total_connections: AtomicU64,
    /// The settings CONFIG SET changes while running.
    pub live: Live,
    /// Leased connections per node (locked only when a lease is opened or
    /// closed, never per request).
    pub leases: std::sync::Mutex<std::collections::HashMap<SocketAddr, usize>>,
    /// What the commands mithril answers itself keep: live CONFIG values,
    /// the password, the run id and the emulated node's id.
    pub admin: AdminState,
    /// observe: every worker's published statistics and the slow logs.
    pub stats: crate::stats::Hub,
    /// The memory budget's total and the overload counters.
    pub overload: Overload,
    /// The acceptor's waker, set once it exists (handoff requests).
    pub acceptor: std::sync::OnceLock<Arc<mio::Waker>>,
    /// The scripts and function libraries loaded through the proxy, to
    /// load them again on a node that lacks them (`crate::script`).
    pub scripts: crate::script::Registry,
    /// The owner of each node's pipe and `auto`'s verdict
    /// (`backend-sharding`).
    pub pipes: pipe::Pipes,
    /// The MONITOR clients of every worker (`shared::monitor`).
    pub monitors: monitor::Monitors,
    /// The reply caches' write epochs (`cache::epochs`), and the seed
    /// every worker's cache hashes keys with (the same everywhere, so a
    /// key has one counter; random per process).
    pub cache_epochs: Arc<crate::cache::epochs::Epochs>,
    pub cache_seed: u64,
    /// Blocking commands sent in the order they arrived, across workers
    /// (`shared::block_order`).
    pub block_order: block_order::BlockOrder,
    /// Configuration reload: the file as last read, what waits for a
    /// restart (`crate::reload`).
    pub reload: crate::reload::Reload,
    /// TLS toward clients (`tls-port`): the rustls configuration every
    /// TLS session's handshake starts from (`crate::tls`); a reload swaps
    /// it, and the next handshakes use the new one.
    pub tls: Option<arc_swap::ArcSwap<rustls::ServerConfig>>,
    /// TLS toward the nodes (`tls-cluster yes`): what every connection a
    /// worker opens to a node speaks (`crate::tls::nodes`).
    pub node_tls: Option<Arc<crate::tls::nodes::NodeTls>>,
    /// TLS toward the sentinels (`tls-sentinel yes`): the same client
    /// configuration as `node_tls` (one object when both are on).
    pub sentinel_tls: Option<Arc<crate::tls::nodes::NodeTls>>,
}

/// Directives `CONFIG SET` may change while mithril runs, kept where every
/// thread can read them: the acceptor loads `maxclients` at each accept,
/// workers load `maxmemory` at each command they dispatch (the gate) and
/// copy `timeout` at every tick (100 ms). The
/// configuration keeps the start-up values.
pub struct Live {
    pub maxclients: AtomicUsize,
    /// The clients the descriptor limit leaves room for, as fitted at
    /// start (`server::fit_maxclients`): admission never goes past it,
    /// whatever a CONFIG SET of `maxclients` says.
    pub fd_room: usize,
    /// Bytes; 0: no budget. On a cache line of its own: every worker
    /// loads it at each command, and a write to a field beside it (the
    /// acceptor counts connections in `Shared`) must not make that load
    /// miss.
    pub maxmemory: Padded<AtomicU64>,
    /// Seconds; 0: never.
    pub timeout_secs: AtomicU64,
    /// `reply-cache`, `reply-cache-size` (bytes, whole process) and
    /// `reply-cache-max-age` (seconds): workers take them at each tick.
    pub reply_cache: AtomicBool,
    pub reply_cache_size: AtomicU64,
    pub reply_cache_max_age_secs: AtomicU64,
    /// `tracking-table-max-keys` (whole process; 0: no bound): workers
    /// take it at each tick.
    pub tracking_table_max_keys: AtomicU64,
    /// The limits and timeouts of [`LIVE_LIMITS`] as they are now (the
    /// other fields are the start's): CONFIG SET and a reload change them
    /// here and move `limits_gen`; workers take them at their next tick.
    pub limits: std::sync::Mutex<crate::config::Config>,
    pub limits_gen: AtomicU64,
}

/// The limits and timeouts that change while mithril runs, through
/// `Live::limits` (besides `maxclients`, `maxmemory` and `timeout`, which
/// have atomics of their own), and `read-from-replicas` (each worker
/// builds its placement tables again with it).
pub const LIVE_LIMITS: &[&str] = &[
    "proto-max-bulk-len",
    "query-buffer-limit",
    "client-output-high-water",
    "client-output-buffer-limit",
    "client-output-total-limit",
    "backend-timeout",
    "connect-timeout",
    "read-from-replicas",
];

impl Live {
    pub fn new(cfg: &crate::config::Config) -> Live {
        Live {
            maxclients: AtomicUsize::new(cfg.maxclients),
            fd_room: usize::MAX,
            maxmemory: Padded(AtomicU64::new(cfg.maxmemory)),
            timeout_secs: AtomicU64::new(cfg.timeout_secs),
            reply_cache: AtomicBool::new(cfg.reply_cache),
            reply_cache_size: AtomicU64::new(cfg.reply_cache_size),
            reply_cache_max_age_secs: AtomicU64::new(cfg.reply_cache_max_age_secs),
            tracking_table_max_keys: AtomicU64::new(cfg.tracking_table_max_keys),
            limits: std::sync::Mutex::new(cfg.clone()),
            limits_gen: AtomicU64::new(0),
        }
    }
}

/// Process-wide overload state: the memory total the `maxmemory`
/// check reads, and counts of clients closed by a limit (for INFO). All
/// relaxed: none of them orders anything.
#[derive(Default)]
pub struct Overload {
    /// Sum of every worker's [`WorkerSlot::buffered`], refreshed by each
    /// worker's tick and when a session opens or closes. What the
    /// `maxmemory` check compares, and INFO's `used_memory`.
    pub used_memory: Padded<AtomicU64>,
    /// Clients closed by `client-output-buffer-limit` (or the output cap
    /// before authentication).
    pub output_limit_disconnections: AtomicU64,
    /// Clients closed for reaching `query-buffer-limit`.
    pub query_limit_disconnections: AtomicU64,
    /// Clients closed by the idle `timeout`.
    pub idle_disconnections: AtomicU64,
}

impl Overload {
    /// Re-add the workers' published figures into `used_memory`.
    pub fn sum(&self, workers: &[WorkerSlot]) {
        let total = workers
            .iter()
            .map(|w| w.buffered.load(Ordering::Relaxed))
            .fold(0u64, u64::saturating_add);
        self.used_memory.store(total, Ordering::Relaxed);
    }
}

impl Shared {
    /// How a new (or RESET) session of pool `pool` starts: as the ACL's
    /// `default` user, not authenticated when the pool asks its clients
    /// for a password of its own (twemproxy's `redis_auth`).
    pub fn session_start(&self, pool: usize) -> crate::acl::SessionStart {
        let mut start = self.admin.acl.session_start();
        if self
            .pools
            .get(pool)
            .is_some_and(|p| p.client_password.is_some())
        {
            start.authenticated = false;
        }
        start
    }

    pub fn new_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// observe: worker `w` asks the acceptor to take every connection
    /// waiting in the kernel now and hand it to a worker, then to answer
    /// `WorkerMsg::HandedOver(n)`. A worker's mailbox keeps its order, so
    /// once that answer is in, every connection accepted before it sits
    /// ahead of anything the worker sends afterwards: a question then
    /// asked of every worker sees each of them, as a node sees a client
    /// from the moment it connected. False when no acceptor will answer
    /// (none yet, or shutting down): there is nothing to wait for.
    pub fn request_handoff(&self, w: usize, n: u64) -> bool {
        if self.shutting_down.load(Ordering::Acquire) {
            return false;
        }
        let (Some(waker), Some(slot)) = (self.acceptor.get(), self.workers.get(w)) else {
            return false;
        };
        slot.handoff_asked.0.store(n, Ordering::Release);
        waker.wake().is_ok()
    }

    /// Count a new lease to `addr`; false (and nothing counted) at the cap.
    pub fn lease_opened(&self, addr: SocketAddr) -> bool {
        let mut m = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(addr).or_insert(0);
        if *n >= MAX_LEASES_PER_NODE {
            return false;
        }
        *n += 1;
        true
    }

    pub fn lease_closed(&self, addr: SocketAddr) {
        let mut m = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&addr) {
            *n = n.saturating_sub(1);
        }
    }
}
