//! Starting and stopping the proxy and its threads (see the thread table
//! in `doc/architecture.md`).
//!
//! ```text
//!   main ── bind, first topology, spawn ──► signals   (sigwait: TERM INT HUP;
//!                                       │              HUP: log reopened, config reloaded)
//!                                       ├─► topology  (refresher)
//!                                       ├─► acceptor  (listeners, admission, placement)
//!                                       └─► worker × N (event loops)
//!   main joins the workers; they exit after a drain on TERM/INT.
//! ```
//!
//! Signals are blocked in the main thread before any other thread exists,
//! so every thread inherits the mask and only the signal thread ever sees
//! them (synchronously, through sigwait).
//!
//! The caller learns about the proxy's life through [`Lifecycle`]: `ready`
//! once the listeners are bound, the first topology attempt is over and
//! every thread runs (pidfile, daemon start pipe, systemd `READY=1`);
//! `stopping` at the first shutdown signal; `exiting_now` just before a
//! second signal ends the process without returning.

use crate::acceptor::Acceptor;
use crate::config::Config;
use crate::shared::{Padded, Shared, WorkerMsg, WorkerSlot};
use crate::topology::Refresher;
use crate::worker::Worker;
use reactor::signals::{self, SignalSet};
use reactor::{fabric, EventLoop};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Per-worker mailbox size (connections handed over and control messages).
const MAILBOX: usize = 4096;

#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Hooks for what surrounds the proxy (pidfile, daemon parent, service
/// manager). Called from the main thread (`ready`) and the signal thread
/// (`stopping`, `exiting_now`); each at most once.
pub trait Lifecycle: Send + Sync {
    /// Listening, first topology attempt done, all threads started.
    fn ready(&self) {}
    /// A shutdown signal arrived; the drain begins.
    fn stopping(&self) {}
    /// A second shutdown signal: the process exits right after this.
    fn exiting_now(&self) {}
    /// A new process took the listening sockets (`crate::upgrade`): this
    /// one no longer owns the pidfile.
    fn handed_over(&self) {}
    /// This process took over from an old one, which has stopped
    /// accepting: the pidfile and the service manager's main PID are ours.
    fn took_over(&self) {}
}

/// No hooks.
pub struct Quiet;
impl Lifecycle for Quiet {}

/// The default pool's listeners: `port` (unless 0) and `tls-port` (unless
/// 0) on every `bind` address, each with whether it is the TLS one.
fn bind_all(cfg: &Config) -> Result<Vec<(mio::net::TcpListener, bool)>, StartError> {
    let mut out = Vec::new();
    let ports = [(cfg.port, false), (cfg.tls.port, true)];
    for (b, (port, tls)) in cfg
        .bind
        .iter()
        .flat_map(|b| ports.iter().filter(|p| p.0 != 0).map(move |p| (b, *p)))
    {
        let ip: IpAddr = match b.addr.as_str() {
            "*" => IpAddr::from([0, 0, 0, 0]),
            "::*" => "::".parse().map_err(|_| StartError("bad address".into()))?,
            a => a
                .parse()
                .map_err(|_| StartError(format!("bind: '{a}' is not an IP address")))?,
        };
        let addr = SocketAddr::new(ip, port);
        match crate::upgrade::listen(addr, cfg.tcp_backlog) {
            Ok(l) => {
                let what = if tls { " (TLS)" } else { "" };
                log::info!(target: "mithril::server", "listening on {addr}{what}");
                out.push((l, tls));
            }
            Err(e) if b.optional => {
                log::info!(target: "mithril::server", "skipping optional bind address {addr}: {e}");
            }
            Err(e) => return Err(StartError(format!("cannot listen on {addr}: {e}"))),
        }
    }
    if out.is_empty() {
        return Err(StartError("no address to listen on".into()));
    }
    Ok(out)
}

/// The socket address of a `listen` line (`*:PORT`: every IPv4 address).
pub(crate) fn listen_addr(text: &str) -> Option<SocketAddr> {
    let text = match text.strip_prefix("*:") {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_string(),
    };
    crate::topology::probe::resolve(&text)
        .ok()
        .and_then(|a| a.into_iter().next())
}

/// Binds every declared pool's `listen` addresses (the default pool's
/// come from `bind` and `port`, above); each listener with its pool.
fn bind_pools(
    cfg: &Config,
    pools: &[crate::config::pool::PoolSpec],
    first: Vec<(mio::net::TcpListener, bool)>,
) -> Result<Vec<(mio::net::TcpListener, usize, bool)>, StartError> {
    let mut out: Vec<(mio::net::TcpListener, usize, bool)> =
        first.into_iter().map(|(l, tls)| (l, 0, tls)).collect();
    let default_first = !cfg.cluster_nodes.is_empty();
    for (i, pool) in pools.iter().enumerate() {
        if i == 0 && default_first {
            continue;
        }
        let backlog = if pool.backlog > 0 {
            pool.backlog as i32
        } else {
            cfg.tcp_backlog
        };
        let each = pool.listen.iter().map(|l| (l, false));
        for (l, tls) in each.chain(pool.tls_listen.iter().map(|l| (l, true))) {
            let addr = listen_addr(l).ok_or_else(|| {
                StartError(format!(
                    "pool {}: cannot resolve listen address {l}",
                    pool.name
                ))
            })?;
            match crate::upgrade::listen(addr, backlog) {
                Ok(listener) => {
                    let what = if tls { " (TLS)" } else { "" };
                    log::info!(target: "mithril::server", "pool {}: listening on {addr}{what}", pool.name);
                    out.push((listener, i, tls));
                }
                Err(e) => {
                    return Err(StartError(format!(
                        "pool {}: cannot listen on {addr}: {e}",
                        pool.name
                    )))
                }
            }
        }
    }
    Ok(out)
}

/// The `HOST:PORT` seeds and servers of every cluster and ring pool, as
/// written: where `tls-cluster` finds a host name to verify the nodes by.
pub(crate) fn pool_seeds(pools: &[crate::config::pool::PoolSpec]) -> Vec<String> {
    use crate::config::pool::PoolKind;
    let mut out = Vec::new();
    for pool in pools {
        match &pool.kind {
            PoolKind::Cluster { seeds } => out.extend(seeds.iter().cloned()),
            PoolKind::Ring { servers, .. } => out.extend(servers.iter().map(|s| s.addr())),
            PoolKind::Groups(_) => {}
        }
    }
    out
}

/// A ring pool's servers as the topology takes them: (twemproxy's name,
/// weight, `HOST:PORT`), in twemproxy's order (by name), the order the
/// ring's health is indexed by.
pub(crate) fn ring_order(
    servers: &[crate::config::pool::ServerSpec],
) -> Vec<(String, u32, String)> {
    let names: Vec<String> = servers.iter().map(|s| s.ring_name()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    crate::hashkit::sorted_order(&refs)
        .iter()
        .map(|&j| (names[j].clone(), servers[j].weight, servers[j].addr()))
        .collect()
}

/// A pool of groups' part of the map as the topology keeps it: its
/// groups, sentinels and rules (at start, and when a reload changes the
/// groups).
pub(crate) fn groups_source(
    name: &str,
    g: &crate::config::pool::GroupPool,
) -> crate::topology::sentinel::GroupsSource {
    use crate::topology::sentinel::{self, GroupsSource};
    let replica = if g.uses_sentinel() {
        g.sentinel_replica_read_priority
    } else {
        g.replica_read_priority
    };
    let sentinel_auth = (!g.sentinel_password.is_empty()).then(|| {
        let mut frame = Vec::with_capacity(32 + g.sentinel_password.len());
        crate::resp::encode::request(&mut frame, &[b"AUTH", g.sentinel_password.as_bytes()]);
        crate::topology::probe::Auth {
            frame: bytes::Bytes::from(frame),
            refused: sentinel::refused,
        }
    });
    GroupsSource::new(
        name.to_string(),
        g.groups
            .iter()
            .map(|x| (x.name.clone(), x.servers.clone()))
            .collect(),
        g.sentinels.clone(),
        sentinel_auth,
        g.hash,
        g.hash_tag,
        g.random,
        sentinel::read_mode(g.master_read_priority, replica),
        std::time::Duration::from_millis(g.refresh_interval_ms),
    )
}

/// Where each pool's part of the map comes from, and what the workers need
/// of each pool besides (credentials, database, ring health).
fn pool_sources(
    cfg: &Config,
    pools: &[crate::config::pool::PoolSpec],
) -> (
    Vec<crate::topology::Source>,
    Vec<crate::shared::PoolRuntime>,
) {
    pools
        .iter()
        .map(|pool| {
            let rt = crate::shared::PoolRuntime::new(cfg, pool);
            (pool_source(pool, &rt), rt)
        })
        .unzip()
}

/// Where pool `pool`'s part of the map comes from (at start, and for a
/// pool a reload adds), `rt` being what the workers keep of it.
pub(crate) fn pool_source(
    pool: &crate::config::pool::PoolSpec,
    rt: &crate::shared::PoolRuntime,
) -> crate::topology::Source {
    use crate::config::pool::PoolKind;
    use crate::topology::Source;
    let auth = rt.probe_auth();
    match &pool.kind {
        PoolKind::Cluster { seeds } => Source::Cluster {
            name: pool.name.clone(),
            seeds: seeds.clone(),
            auth,
        },
        PoolKind::Ring {
            servers,
            hash,
            hash_tag,
            distribution,
            ..
        } => Source::Ring {
            name: pool.name.clone(),
            servers: ring_order(servers),
            dist: *distribution,
            hash: *hash,
            tag: *hash_tag,
            health: rt
                .health
                .as_ref()
                .map(|h| h.load_full())
                .unwrap_or_else(|| {
                    Arc::new(crate::topology::health::RingHealth::new(0, false, 1, 0))
                }),
            auth,
        },
        PoolKind::Groups(g) => Source::Groups(Box::new(groups_source(&pool.name, g))),
    }
}

/// Descriptors kept for what is not a client or a node connection: the
/// listeners, the log and pidfile, the metrics ports, the signal,
/// topology and acceptor threads' needs (Redis keeps 32 for its own).
const RESERVED_FDS: u64 = 32;

/// Descriptors mithril needs besides one per client, with `nodes` nodes:
/// [`RESERVED_FDS`], each worker's poll and waker, and per node the
/// connections every worker may open to it (`backend-conns`, or a pool's
/// `server-connections` when larger, plus its tracker) and the topology's
/// probe and a shared pipe. Leases (blocking commands, WATCH) and
/// subscriber connections are made for clients as they need them and come
/// out of the same descriptors.
pub fn reserved_fds(cfg: &Config, nodes: usize) -> u64 {
    let threads = cfg.threads.max(1) as u64;
    let conns = cfg
        .server_pools()
        .iter()
        .map(|p| p.server_connections)
        .max()
        .unwrap_or(0)
        .max(cfg.backend_conns) as u64;
    let nodes = nodes.max(1) as u64;
    RESERVED_FDS + threads * 2 + nodes * (threads * (conns + 1) + 2)
}

/// The descriptor limit, as `getrlimit(RLIMIT_NOFILE)` gives it (soft,
/// hard).
fn nofile() -> std::io::Result<(u64, u64)> {
    // SAFETY: getrlimit only writes the struct it is given.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((l.rlim_cur as u64, l.rlim_max as u64))
    }
}

fn set_nofile(soft: u64, hard: u64) -> std::io::Result<()> {
    let l = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit only reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Fit `maxclients` to the descriptor limit at start, as Redis does
/// (`adjustOpenFilesLimit`, with its log lines): `maxclients` plus the
/// reserve ([`reserved_fds`]) are needed; the soft limit is raised to
/// that (and the hard one with it, when the process may); when it cannot
/// be, `maxclients` is lowered to what the limit leaves, and the log says
/// so. A limit that leaves no client at all is a start-up error. Without
/// it a client past the limit would not get Redis's "max number of
/// clients reached" but a failed accept, and the topology's and the
/// workers' connections to the nodes would fail with it.
/// Returns how many clients the limit leaves room for (what a CONFIG SET
/// of `maxclients` cannot raise admission past).
fn fit_maxclients(cfg: &mut Config, nodes: usize) -> Result<usize, StartError> {
    const T: &str = "mithril::server";
    let reserve = reserved_fds(cfg, nodes);
    let want = cfg.maxclients as u64 + reserve;
    let (soft, hard) = match nofile() {
        Ok(l) => l,
        Err(e) => {
            cfg.maxclients = 1024u64.saturating_sub(reserve).max(1) as usize;
            log::warn!(target: T, "Unable to obtain the current NOFILE limit ({e}), assuming 1024 and setting the max clients configuration accordingly.");
            return Ok(cfg.maxclients);
        }
    };
    let room = |limit: u64| limit.saturating_sub(reserve).min(usize::MAX as u64) as usize;
    if soft >= want {
        return Ok(room(soft));
    }
    // Up to what is needed; the hard limit too when the process may
    // raise it (root), else the soft one as far as the hard one allows.
    let mut error = set_nofile(want, hard.max(want)).err();
    let mut now = if error.is_none() { want } else { soft };
    if error.is_some() && hard > soft {
        let best = hard.min(want);
        if set_nofile(best, hard).is_ok() {
            now = best;
        }
    }
    if now >= want {
        log::info!(target: T, "Increased maximum number of open files to {want} (it was originally set to {soft}).");
        return Ok(room(now));
    }
    if now <= reserve {
        return Err(StartError(format!(
            "Your current 'ulimit -n' of {soft} is not enough for the server to start \
             ({reserve} descriptors are kept for the nodes and the proxy itself). Please \
             increase your open file limit to at least {want}. Exiting."
        )));
    }
    let asked = cfg.maxclients;
    cfg.maxclients = room(now);
    let why = error.take().map_or_else(
        || format!("the hard limit is {hard}"),
        |e| format!("OS error: {e}"),
    );
    log::warn!(target: T, "You requested maxclients of {asked} requiring at least {want} max file descriptors ({reserve} kept for the nodes and the proxy itself).");
    log::warn!(target: T, "Server can't set maximum open files to {want} because of {why}.");
    log::warn!(target: T, "Current maximum open files is {now}. maxclients has been reduced to {} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.", cfg.maxclients);
    Ok(cfg.maxclients)
}

/// Run the proxy until a shutdown signal; returns the exit code.
pub fn run(cfg: Config) -> Result<(), StartError> {
    run_with(cfg, Arc::new(Quiet))
}

/// [`run`], telling `life` when the proxy is ready and when it stops. A
/// reload reads `cfg.config_file` again, without command-line flags.
pub fn run_with(cfg: Config, life: Arc<dyn Lifecycle>) -> Result<(), StartError> {
    let read: Option<crate::reload::ReadConfig> = cfg.config_file.clone().map(|path| {
        Box::new(move || {
            let cfg = crate::config::compat::read_file(&path)?.config;
            crate::config::validate(&cfg)?;
            Ok(cfg)
        }) as crate::reload::ReadConfig
    });
    run_reloadable(cfg, life, read)
}

/// [`run_with`], a reload (SIGHUP, CONFIG RELOAD) reading the
/// configuration with `read` (`None`: there is no file to read).
pub fn run_reloadable(
    mut cfg: Config,
    life: Arc<dyn Lifecycle>,
    read: Option<crate::reload::ReadConfig>,
) -> Result<(), StartError> {
    // What a reload compares the file with: the configuration as read,
    // before maxclients is fitted and the passwords forgotten.
    let reload = crate::reload::Reload::new(read, cfg.clone());
    if let Some(refusal) = crate::config::protected_mode_refusal(&cfg) {
        return Err(StartError(refusal));
    }
    signals::ignore_sigpipe();
    let sigset = SignalSet::new(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP])
        .map_err(|e| StartError(format!("signals: {e}")))?;
    sigset
        .block()
        .map_err(|e| StartError(format!("signals: {e}")))?;

    log::info!(
        target: "mithril::server",
        "mithril {} starting (pid {}, {} worker threads)",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        cfg.threads
    );
    let pools = cfg.server_pools();
    let first = if cfg.cluster_nodes.is_empty() {
        Vec::new()
    } else {
        bind_all(&cfg)?
    };
    let listeners = bind_pools(&cfg, &pools, first)?;
    // Read before any client can come: a certificate or key that does not
    // load stops the start here.
    let tls = if !listeners.iter().any(|l| l.2) {
        None
    } else {
        let built = crate::tls::server_config(&cfg.tls).map_err(StartError)?;
        Some(arc_swap::ArcSwap::new(built))
    };
    // observe: the metrics and stats ports (off unless configured).
    let metrics = crate::metrics::bind(&cfg).map_err(StartError)?;

    let any_tls =
        crate::tls::nodes::NodeTls::new(&cfg.tls, &pool_seeds(&pools)).map_err(StartError)?;
    let node_tls = any_tls.clone().filter(|_| cfg.tls.cluster);
    let sentinel_tls = any_tls.filter(|_| cfg.tls.sentinel);
    let (sources, pool_runtime) = pool_sources(&cfg, &pools);
    let mut refresher = Refresher::new(
        sources,
        Duration::from_secs(cfg.topology_refresh_secs),
        Duration::from_millis(cfg.connect_timeout_ms),
    );
    refresher.set_tls(node_tls.clone(), sentinel_tls.clone());
    if !refresher.refresh_once() {
        // Credentials a cluster refuses, or servers that are not cluster
        // nodes, will not get better by waiting.
        for i in refresher.cluster_pools() {
            if let Some(why) = refresher.hopeless(i) {
                return Err(StartError(why));
            }
        }
        log::warn!(
            target: "mithril::server",
            "no node of some cluster pool answered; serving errors there until it is reachable"
        );
    }
    let topology = refresher.handle();
    // The first map's nodes (every pool's), else the configured seeds and
    // servers: what the backend connections are reserved for.
    let nodes = topology.load().nodes.len().max(
        pools
            .iter()
            .map(|p| match &p.kind {
                crate::config::pool::PoolKind::Cluster { seeds } => seeds.len(),
                crate::config::pool::PoolKind::Ring { servers, .. } => servers.len(),
                // A master and a replica per group, at least.
                crate::config::pool::PoolKind::Groups(g) => 2 * g.groups.len(),
            })
            .sum(),
    );
    let fd_room = fit_maxclients(&mut cfg, nodes)?;
    let topo_thread = refresher
        .spawn()
        .map_err(|e| StartError(format!("topology thread: {e}")))?;

    let mut loops = Vec::new();
    let mut slots = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..cfg.threads {
        let el: EventLoop<crate::worker::Timer> =
            EventLoop::new(1024).map_err(|e| StartError(format!("event loop: {e}")))?;
        let (tx, rx) = fabric(MAILBOX, el.notifier());
        slots.push(WorkerSlot {
            tx,
            commands: Padded(AtomicU64::new(0)),
            sessions: Padded(AtomicUsize::new(0)),
            buffered: Padded(AtomicU64::new(0)),
            handoff_asked: Padded(AtomicU64::new(0)),
            output: Padded(Default::default()),
            pipe: crate::shared::pipe::PipeInbox::new(el.notifier()),
        });
        receivers.push(rx);
        loops.push(el);
    }
    let notifiers: Vec<_> = loops.iter().map(|l| l.notifier()).collect();
    let cfg_threads = cfg.threads;
    let admin = crate::shared::AdminState::new(&cfg);
    // From here on the users' passwords exist only as digests.
    cfg.forget_client_passwords();
    let started = Instant::now();
    let stats = crate::stats::Hub::new(cfg.threads, &cfg, started); // observe
                                                                    // Every loop's microsecond clock counts from the statistics' base, so
                                                                    // a turn's `now_us` is the stamp clock with no second conversion.
    for l in &mut loops {
        l.set_epoch(started);
    }
    let mut live = crate::shared::Live::new(&cfg);
    live.fd_room = fd_room;
    let scripts = crate::script::Registry::new(cfg.script_registry_size);
    let shared = Arc::new(Shared {
        admin,
        pools: crate::shared::PoolTable::new(pool_runtime),
        config: cfg,
        topology: topology.clone(),
        clients: Arc::new(AtomicUsize::new(0)),
        next_client_id: AtomicU64::new(1),
        named_clients: Default::default(),
        shutting_down: AtomicBool::new(false),
        handed_over: AtomicBool::new(false),
        listener_changes: Default::default(),
        workers: slots,
        started,
        rejected_connections: AtomicU64::new(0),
        total_connections: AtomicU64::new(0),
        live,
        leases: Default::default(),
        overload: Default::default(),
        scripts,
        pipes: crate::shared::pipe::Pipes::new(cfg_threads),
        monitors: crate::shared::monitor::Monitors::new(cfg_threads),
        cache_epochs: Default::default(),
        cache_seed: {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        },
        block_order: crate::shared::block_order::BlockOrder::new(cfg_threads),
        stats,
        acceptor: std::sync::OnceLock::new(),
        reload,
        tls,
        node_tls,
        sentinel_tls,
    });

    let mut worker_threads = Vec::new();
    for (id, (mut el, rx)) in loops.into_iter().zip(receivers).enumerate() {
        let shared = shared.clone();
        let t = std::thread::Builder::new()
            .name(format!("worker-{id}"))
            .spawn(move || {
                let mut w = Worker::new(id, shared, rx);
                if let Err(e) = el.run(&mut w) {
                    log::error!(target: "mithril::worker", "worker {id} event loop failed: {e}");
                }
            })
            .map_err(|e| StartError(format!("worker thread: {e}")))?;
        worker_threads.push(t);
    }

    let (acceptor, acceptor_waker) = Acceptor::new(shared.clone(), listeners)
        .map_err(|e| StartError(format!("acceptor: {e}")))?;
    // Workers may now ask it for handoffs (observe: CLIENT LIST, INFO).
    let _ = shared.acceptor.set(acceptor_waker.clone());
    // Blocking commands of different workers go in the order the kernel
    // stamped their arrival (`shared::block_order`): stamps on before the
    // first client (the listeners asked for them; Linux turns them on a
    // moment later).
    if cfg_threads > 1 && !reactor::stamp::wait_effective(std::time::Duration::from_secs(2)) {
        log::warn!(target: "mithril::main", "the kernel gives no arrival stamps: blocking commands of clients on different workers are ordered by when each worker read them");
    }
    let acc_thread = std::thread::Builder::new()
        .name("acceptor".into())
        .spawn(move || acceptor.run())
        .map_err(|e| StartError(format!("acceptor thread: {e}")))?;

    {
        let shared = shared.clone();
        let notifiers = notifiers.clone();
        let life = life.clone();
        let acceptor_waker = acceptor_waker.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || loop {
                let Ok(sig) = sigset.wait() else { continue };
                match sig {
                    libc::SIGHUP => {
                        log::info!(target: "mithril::server", "SIGHUP: reopening the log file");
                        match crate::logging::reopen() {
                            Ok(()) => log::info!(target: "mithril::server", "log file reopened"),
                            Err(e) => log::warn!(target: "mithril::server", "cannot reopen the log file: {e}"),
                        }
                        // Then the configuration, here, off the workers'
                        // loops; the outcome is logged by the reload.
                        let _ = shared.reload.run(&shared, "SIGHUP");
                    }
                    _ => {
                        let why = format!("received signal {sig}");
                        if !begin_shutdown(&shared, &notifiers, &acceptor_waker, &*life, &why) {
                            log::warn!(target: "mithril::server", "second shutdown signal: exiting now");
                            life.exiting_now();
                            std::process::exit(0);
                        }
                    }
                }
            })
            .map_err(|e| StartError(format!("signal thread: {e}")))?;
    }
    metrics
        .spawn(shared.clone())
        .map_err(|e| StartError(format!("metrics thread: {e}")))?;
    life.ready();
    let took_over = crate::upgrade::pending();
    if took_over {
        // Serving: the old process may stop accepting now.
        crate::upgrade::finish().map_err(|e| StartError(format!("--upgrade: {e}")))?;
        log::info!(target: "mithril::upgrade", "took over from the old process, which drains");
        life.took_over();
    }
    if !shared.config.upgrade_socket.is_empty() {
        let path = std::path::PathBuf::from(&shared.config.upgrade_socket);
        let listener = crate::upgrade::bind(&path, took_over)
            .map_err(|e| StartError(format!("upgrade-socket {}: {e}", path.display())))?;
        let (shared, notifiers, waker, life) = (
            shared.clone(),
            notifiers.clone(),
            acceptor_waker.clone(),
            life.clone(),
        );
        std::thread::Builder::new()
            .name("upgrade".into())
            .spawn(move || {
                crate::upgrade::serve(listener, path, || {
                    handed_over(shared, notifiers, waker, life)
                })
            })
            .map_err(|e| StartError(format!("upgrade thread: {e}")))?;
    }

    for t in worker_threads {
        let _ = t.join();
    }
    let _ = acc_thread.join();
    topology.stop();
    let _ = topo_thread.join();
    log::info!(target: "mithril::server", "mithril stopped");
    Ok(())
}

/// The first shutdown: stop accepting, tell every worker to drain. False
/// when one had begun already.
fn begin_shutdown(
    shared: &Shared,
    notifiers: &[reactor::Notifier],
    acceptor_waker: &mio::Waker,
    life: &dyn Lifecycle,
    why: &str,
) -> bool {
    if shared.shutting_down.swap(true, Ordering::AcqRel) {
        return false;
    }
    log::info!(target: "mithril::server", "{why}: shutting down after in-flight requests");
    life.stopping();
    let _ = acceptor_waker.wake();
    for (w, n) in shared.workers.iter().zip(notifiers) {
        // A full mailbox cannot refuse a shutdown for long: retry until
        // it is taken.
        let mut msg = WorkerMsg::Shutdown;
        while let Err(back) = w.tx.send(msg) {
            msg = back;
            std::thread::sleep(Duration::from_millis(1));
        }
        n.wake_now();
    }
    true
}

/// A new process took the listening sockets: stop accepting, give up the
/// pidfile, serve the clients this process has until each leaves or
/// `shutdown-timeout` passes, then drain as on SIGTERM.
fn handed_over(
    shared: Arc<Shared>,
    notifiers: Vec<reactor::Notifier>,
    acceptor_waker: Arc<mio::Waker>,
    life: Arc<dyn Lifecycle>,
) {
    shared.handed_over.store(true, Ordering::Release);
    let _ = acceptor_waker.wake();
    life.handed_over();
    let deadline = Instant::now() + Duration::from_secs(shared.config.shutdown_timeout_secs);
    let spawned = std::thread::Builder::new()
        .name("handed-over".into())
        .spawn(move || {
            while shared.clients.load(Ordering::Acquire) > 0
                && Instant::now() < deadline
                && !shared.shutting_down.load(Ordering::Acquire)
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            let why = "handed over to a new process, clients gone or shutdown-timeout over";
            begin_shutdown(&shared, &notifiers, &acceptor_waker, &*life, why);
        });
    if let Err(e) = spawned {
        log::error!(target: "mithril::upgrade", "cannot start the drain after a hand-over: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_counts_workers_and_their_connections_to_each_node() {
        let mut cfg = Config {
            threads: 2,
            backend_conns: 1,
            ..Default::default()
        };
        // 32 + 2 x 2 + 3 x (2 x (1 + 1) + 2)
        assert_eq!(reserved_fds(&cfg, 3), 54);
        cfg.threads = 4;
        cfg.backend_conns = 2;
        assert_eq!(reserved_fds(&cfg, 6), 32 + 8 + 6 * (4 * 3 + 2));
        // No node known yet: one counted.
        assert_eq!(reserved_fds(&cfg, 0), 32 + 8 + 14);
    }
}
