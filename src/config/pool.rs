//! Server pools: the `pool` directive, and the pools the daemon serves.
//!
//! A pool is a set of backends behind listeners of its own, with its own
//! settings. Two kinds:
//!
//! - a **cluster** pool fronts a Redis Cluster (`pool NAME cluster-nodes
//!   HOST:PORT ...`), placed by slot as the top-level `cluster-nodes` is;
//! - a **ring** pool fronts standalone servers (`pool NAME server
//!   HOST:PORT[:WEIGHT] [NAME]`, one line each), placed by twemproxy's
//!   distribution and hash (`crate::hashkit`), byte for byte as nutcracker
//!   places them.
//!
//! Every line is `pool NAME SETTING ARGS...`; the settings are [`SETTINGS`]
//! (twemproxy's keys with dashes). The top-level `cluster-nodes`, `bind`
//! and `port`, when `cluster-nodes` is given, make the first pool, named
//! `default` ([`Config::server_pools`]); a file may have it, declared
//! pools, or both.
//!
//! Invariants: a setter applies its whole value or leaves the pool as it
//! was; a pool is created by its first line; validation
//! ([`validate_pools`]) runs once the whole file is read. Never: resolve
//! host names (that is the start-up's job), or reorder servers (the order
//! written is kept; placement sorts by name as twemproxy does).

use super::values::{check_node, number, quote_arg};
use super::Config;
use crate::hashkit::{self, Distribution, HashFn};

pub mod groups;
mod validate;
pub use groups::{GroupPool, GroupSpec};
pub use validate::validate_pools;

/// Name of the pool the top-level `cluster-nodes` makes.
pub const DEFAULT_POOL: &str = "default";
/// Most units (slots of cluster pools plus servers of ring pools) one
/// process places: a unit is a 16-bit number.
pub const MAX_UNITS: usize = 65_535;
/// Slots a cluster pool takes of the unit space.
pub const CLUSTER_UNITS: usize = 16_384;

/// What a pool's backends are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolKind {
    /// A Redis Cluster, found from these `HOST:PORT` seeds.
    Cluster { seeds: Vec<String> },
    /// Standalone servers placed on a ring.
    Ring {
        servers: Vec<ServerSpec>,
        hash: HashFn,
        /// Two characters; `None`: the whole key is hashed.
        hash_tag: Option<[u8; 2]>,
        distribution: Distribution,
        /// Servers leave the ring after `server_failure_limit` failures in
        /// a row, for `server_retry_timeout_ms`.
        auto_eject_hosts: bool,
        server_retry_timeout_ms: u64,
        server_failure_limit: u32,
    },
    /// Master-replica groups placed as predixy places them (`groups.rs`).
    Groups(GroupPool),
}

/// One `server` line of a ring pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// As written: a host name, an IPv4 address, or `[IPv6]`.
    pub host: String,
    pub port: u16,
    pub weight: u32,
    /// The name given after the address, if any.
    pub alias: Option<String>,
}

impl ServerSpec {
    /// `HOST:PORT`, for connecting and for messages.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The name twemproxy gives the server: what its ring is built from
    /// and what its servers are sorted by.
    pub fn ring_name(&self) -> String {
        hashkit::server_name(&self.host, self.port, self.alias.as_deref())
    }
}

/// One pool, as the configuration describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    /// `HOST:PORT` addresses clients connect to (a host may be `*`).
    pub listen: Vec<String>,
    /// `HOST:PORT` addresses TLS clients connect to (`tls-listen`), with
    /// the top-level `tls-*` certificate and settings.
    pub tls_listen: Vec<String>,
    pub kind: PoolKind,
    /// Milliseconds a server may take to answer (0: the top-level
    /// `backend-timeout`).
    pub timeout_ms: u64,
    /// The listen queue (0: the top-level `tcp-backlog`).
    pub backlog: u32,
    /// Connect to every server at start rather than on first use.
    pub preconnect: bool,
    /// twemproxy's `redis_auth`: the password the servers are given, and
    /// the one clients of this pool must AUTH with. Empty: none (the
    /// top-level `backend-password` and users apply).
    pub password: String,
    /// The database selected on every server connection, and the one a
    /// client starts in.
    pub db: u32,
    /// Connections per server per worker (0: the top-level
    /// `backend-conns`).
    pub server_connections: usize,
    /// TCP keepalive toward clients and servers.
    pub tcp_keepalive: bool,
    /// Most clients of this pool at once (0: only `maxclients` bounds it).
    pub client_connections: usize,
    /// How many databases the servers have, which clients may SELECT among
    /// (0: 16 for a ring, as a server's default; 1 for a cluster).
    pub databases: u32,
}

impl PoolSpec {
    /// A pool with twemproxy's defaults and no listener or backend yet.
    pub fn new(name: &str, kind: PoolKind) -> PoolSpec {
        PoolSpec {
            name: name.to_string(),
            listen: Vec::new(),
            tls_listen: Vec::new(),
            kind,
            timeout_ms: 0,
            backlog: 0,
            preconnect: false,
            password: String::new(),
            db: 0,
            server_connections: 0,
            tcp_keepalive: false,
            client_connections: 0,
            databases: 0,
        }
    }

    /// The databases clients may SELECT among: the `databases` setting,
    /// else 16 for a ring (a server's default) and 1 for a cluster.
    pub fn databases(&self) -> u32 {
        match (self.databases, &self.kind) {
            (0, PoolKind::Cluster { .. }) => 1,
            (0, PoolKind::Ring { .. }) => 16,
            (0, PoolKind::Groups(_)) => 1,
            (n, _) => n,
        }
    }

    /// A ring pool with twemproxy's defaults.
    pub fn ring(name: &str) -> PoolSpec {
        PoolSpec::new(
            name,
            PoolKind::Ring {
                servers: Vec::new(),
                hash: HashFn::DEFAULT,
                hash_tag: None,
                distribution: Distribution::DEFAULT,
                auto_eject_hosts: false,
                server_retry_timeout_ms: 30_000,
                server_failure_limit: 2,
            },
        )
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, PoolKind::Cluster { .. })
    }

    /// How many units the pool places keys on.
    pub fn units(&self) -> usize {
        match &self.kind {
            PoolKind::Cluster { .. } => CLUSTER_UNITS,
            PoolKind::Ring { servers, .. } => servers.len(),
            PoolKind::Groups(g) => g.groups.len(),
        }
    }
}

type Setter = fn(&mut PoolSpec, &[&str]) -> Result<(), String>;
type Getter = fn(&PoolSpec) -> Vec<Vec<String>>;

/// One setting of the `pool` directive.
pub struct Setting {
    /// The name, lower case.
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Fewest and most arguments after the name.
    arity: (usize, usize),
    setter: Setter,
    /// The lines that write the setting back (each a list of arguments);
    /// empty when it is at its default.
    getter: Getter,
}

fn one(v: String) -> Vec<Vec<String>> {
    vec![vec![v]]
}

fn ring_mut<'a>(
    p: &'a mut PoolSpec,
    what: &str,
) -> Result<(&'a mut Vec<ServerSpec>, RingSettings<'a>), String> {
    match &mut p.kind {
        PoolKind::Ring {
            servers,
            hash,
            hash_tag,
            distribution,
            auto_eject_hosts,
            server_retry_timeout_ms,
            server_failure_limit,
        } => Ok((
            servers,
            RingSettings {
                hash,
                hash_tag,
                distribution,
                auto_eject_hosts,
                server_retry_timeout_ms,
                server_failure_limit,
            },
        )),
        PoolKind::Cluster { .. } => Err(format!(
            "{what} is a setting of a pool of standalone servers, and pool '{}' is a cluster \
             pool (it has cluster-nodes)",
            p.name
        )),
        PoolKind::Groups(_) => Err(format!(
            "{what} is a setting of a ring of standalone servers, and pool '{}' is a pool of \
             master-replica groups (it has group or sentinel lines)",
            p.name
        )),
    }
}

struct RingSettings<'a> {
    hash: &'a mut HashFn,
    hash_tag: &'a mut Option<[u8; 2]>,
    distribution: &'a mut Distribution,
    auto_eject_hosts: &'a mut bool,
    server_retry_timeout_ms: &'a mut u64,
    server_failure_limit: &'a mut u32,
}

/// yes / no, or twemproxy's true / false.
fn yes_no(name: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => super::values::parse_bool(v).ok_or_else(|| format!("{name} must be yes or no")),
    }
}

fn bool_word(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// `HOST:PORT[:WEIGHT]`, as a twemproxy `servers:` entry writes it.
fn parse_server(text: &str, alias: Option<&str>) -> Result<ServerSpec, String> {
    let bad = || format!("server: '{text}' is not HOST:PORT[:WEIGHT] (e.g. 127.0.0.1:6379:1)");
    // [v6]:port[:weight], or host:port[:weight].
    let (host, rest) = if let Some(inner) = text.strip_prefix('[') {
        let (v6, rest) = inner.split_once(']').ok_or_else(bad)?;
        (format!("[{v6}]"), rest.strip_prefix(':').ok_or_else(bad)?)
    } else {
        let (host, rest) = text.split_once(':').ok_or_else(bad)?;
        (host.to_string(), rest)
    };
    let (port, weight) = match rest.split_once(':') {
        Some((p, w)) => (p, Some(w)),
        None => (rest, None),
    };
    check_node(&format!("{host}:{port}")).map_err(|e| e.replace("cluster-nodes", "server"))?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let weight = match weight {
        Some(w) => number("server weight", w, 1, u32::MAX as u64)? as u32,
        None => 1,
    };
    Ok(ServerSpec {
        host,
        port,
        weight,
        alias: alias.map(str::to_string),
    })
}

fn set_server(p: &mut PoolSpec, args: &[&str]) -> Result<(), String> {
    let server = parse_server(args[0], args.get(1).copied())?;
    let (servers, _) = ring_mut(p, "server")?;
    servers.push(server);
    Ok(())
}

fn get_servers(p: &PoolSpec) -> Vec<Vec<String>> {
    let PoolKind::Ring { servers, .. } = &p.kind else {
        return Vec::new();
    };
    servers
        .iter()
        .map(|s| {
            let mut line = vec![format!("{}:{}:{}", s.host, s.port, s.weight)];
            line.extend(s.alias.clone());
            line
        })
        .collect()
}

/// Every setting of a pool, in the order `--print-config` writes them.
pub static SETTINGS: &[Setting] = &[
    Setting {
        name: "listen",
        summary: "HOST:PORT the pool's clients connect to (lines accumulate)",
        arity: (1, usize::MAX),
        setter: |p, args| add_listen(&mut p.listen, args),
        getter: |p| p.listen.iter().map(|l| vec![l.clone()]).collect(),
    },
    Setting {
        name: "tls-listen",
        summary: "HOST:PORT the pool's TLS clients connect to (tls-cert-file's certificate)",
        arity: (1, usize::MAX),
        setter: |p, args| add_listen(&mut p.tls_listen, args),
        getter: |p| p.tls_listen.iter().map(|l| vec![l.clone()]).collect(),
    },
    Setting {
        name: "cluster-nodes",
        summary: "HOST:PORT seeds: the pool fronts this Redis Cluster",
        arity: (1, usize::MAX),
        setter: |p, args| {
            for a in args {
                check_node(a)?;
            }
            match &mut p.kind {
                PoolKind::Cluster { seeds } => {
                    for a in args {
                        if !seeds.iter().any(|s| s == a) {
                            seeds.push(a.to_string());
                        }
                    }
                    Ok(())
                }
                PoolKind::Ring { servers, .. } if servers.is_empty() => {
                    p.kind = PoolKind::Cluster {
                        seeds: args.iter().map(|a| a.to_string()).collect(),
                    };
                    Ok(())
                }
                PoolKind::Ring { .. } | PoolKind::Groups(_) => Err(format!(
                    "pool '{}' has standalone servers: a pool is either a cluster \
                     (cluster-nodes), a ring of servers (server) or a set of groups \
                     (group), not two of them",
                    p.name
                )),
            }
        },
        getter: |p| match &p.kind {
            PoolKind::Cluster { seeds } => vec![seeds.clone()],
            PoolKind::Ring { .. } | PoolKind::Groups(_) => Vec::new(),
        },
    },
    Setting {
        name: "server",
        summary: "HOST:PORT[:WEIGHT] [NAME]: one standalone server of the ring",
        arity: (1, 2),
        setter: set_server,
        getter: get_servers,
    },
    Setting {
        name: "distribution",
        summary: "ketama, modula or random: how keys spread over the servers",
        arity: (1, 1),
        setter: |p, args| {
            if let Some(r) = groups::try_set(p, "distribution", args[0]) {
                return r;
            }
            let d = Distribution::from_name(args[0]).ok_or_else(|| {
                format!(
                    "distribution must be ketama, modula or random, not '{}'",
                    args[0]
                )
            })?;
            *ring_mut(p, "distribution")?.1.distribution = d;
            Ok(())
        },
        getter: |p| match &p.kind {
            PoolKind::Groups(_) => groups::get(p, "distribution").unwrap_or_default(),
            PoolKind::Ring { distribution, .. } if *distribution != Distribution::DEFAULT => {
                one(distribution.name().to_string())
            }
            _ => Vec::new(),
        },
    },
    Setting {
        name: "hash",
        summary: "the key hash, one of twemproxy's twelve (fnv1a_64 by default)",
        arity: (1, 1),
        setter: |p, args| {
            if let Some(r) = groups::try_set(p, "hash", args[0]) {
                return r;
            }
            let h = HashFn::from_name(args[0]).ok_or_else(|| {
                let names: Vec<&str> = HashFn::ALL.iter().map(|h| h.name()).collect();
                format!(
                    "hash must be one of {}, not '{}'",
                    names.join(", "),
                    args[0]
                )
            })?;
            *ring_mut(p, "hash")?.1.hash = h;
            Ok(())
        },
        getter: |p| match &p.kind {
            PoolKind::Groups(_) => groups::get(p, "hash").unwrap_or_default(),
            PoolKind::Ring { hash, .. } if *hash != HashFn::DEFAULT => one(hash.name().to_string()),
            _ => Vec::new(),
        },
    },
    Setting {
        name: "hash-tag",
        summary: "two characters: only what a key holds between them is hashed",
        arity: (1, 1),
        setter: |p, args| {
            if let Some(r) = groups::try_set(p, "hash-tag", args[0]) {
                return r;
            }
            let tag: [u8; 2] = args[0]
                .as_bytes()
                .try_into()
                .map_err(|_| format!("hash-tag must be two characters, not '{}'", args[0]))?;
            *ring_mut(p, "hash-tag")?.1.hash_tag = Some(tag);
            Ok(())
        },
        getter: |p| match &p.kind {
            PoolKind::Groups(_) => groups::get(p, "hash-tag").unwrap_or_default(),
            PoolKind::Ring {
                hash_tag: Some(t), ..
            } => one(String::from_utf8_lossy(t).into_owned()),
            _ => Vec::new(),
        },
    },
    Setting {
        name: "auto-eject-hosts",
        summary: "yes: a failing server leaves the ring for server-retry-timeout",
        arity: (1, 1),
        setter: |p, args| {
            let b = yes_no("auto-eject-hosts", args[0])?;
            *ring_mut(p, "auto-eject-hosts")?.1.auto_eject_hosts = b;
            Ok(())
        },
        getter: |p| match &p.kind {
            PoolKind::Ring {
                auto_eject_hosts: true,
                ..
            } => one(bool_word(true)),
            _ => Vec::new(),
        },
    },
    Setting {
        name: "server-retry-timeout",
        summary: "milliseconds an ejected server stays out of the ring (30000)",
        arity: (1, 1),
        setter: |p, args| {
            let ms = number("server-retry-timeout", args[0], 1, 86_400_000)?;
            *ring_mut(p, "server-retry-timeout")?
                .1
                .server_retry_timeout_ms = ms;
            Ok(())
        },
        getter: |p| match &p.kind {
            PoolKind::Ring {
                server_retry_timeout_ms: ms,
                ..
            } if *ms != 30_000 => one(ms.to_string()),
            _ => Vec::new(),
        },
    },
    Setting {
        name: "server-failure-limit",
        summary: "failures in a row that eject a server (2)",
        arity: (1, 1),
        setter: |p, args| {
            let n = number("server-failure-limit", args[0], 1, 1_000_000)? as u32;
            *ring_mut(p, "server-failure-limit")?.1.server_failure_limit = n;
            Ok(())
        },
        getter: |p| match &p.kind {
            PoolKind::Ring {
                server_failure_limit: n,
                ..
            } if *n != 2 => one(n.to_string()),
            _ => Vec::new(),
        },
    },
    Setting {
        name: "timeout",
        summary: "milliseconds a server may take to answer (0: backend-timeout)",
        arity: (1, 1),
        setter: |p, args| {
            p.timeout_ms = number("timeout", args[0], 0, 86_400_000)?;
            Ok(())
        },
        getter: |p| match p.timeout_ms {
            0 => Vec::new(),
            ms => one(ms.to_string()),
        },
    },
    Setting {
        name: "backlog",
        summary: "the listen queue (0: tcp-backlog)",
        arity: (1, 1),
        setter: |p, args| {
            p.backlog = number("backlog", args[0], 0, i32::MAX as u64)? as u32;
            Ok(())
        },
        getter: |p| match p.backlog {
            0 => Vec::new(),
            n => one(n.to_string()),
        },
    },
    Setting {
        name: "preconnect",
        summary: "yes: every worker connects to every server at start",
        arity: (1, 1),
        setter: |p, args| {
            p.preconnect = yes_no("preconnect", args[0])?;
            Ok(())
        },
        getter: |p| match p.preconnect {
            true => one(bool_word(true)),
            false => Vec::new(),
        },
    },
    Setting {
        name: "password",
        summary: "given to the servers, and asked of the pool's clients (redis_auth)",
        arity: (1, 1),
        setter: |p, args| {
            p.password = args[0].to_string();
            Ok(())
        },
        getter: |p| match p.password.is_empty() {
            true => Vec::new(),
            false => one(p.password.clone()),
        },
    },
    Setting {
        name: "db",
        summary: "the database selected on the servers, and a client's first one",
        arity: (1, 1),
        setter: |p, args| {
            p.db = number("db", args[0], 0, 1_000_000)? as u32;
            Ok(())
        },
        getter: |p| match p.db {
            0 => Vec::new(),
            n => one(n.to_string()),
        },
    },
    Setting {
        name: "databases",
        summary: "databases clients may SELECT among (0: 16 for servers, 1 for a cluster)",
        arity: (1, 1),
        setter: |p, args| {
            p.databases = number("databases", args[0], 0, 1_000_000)? as u32;
            Ok(())
        },
        getter: |p| match p.databases {
            0 => Vec::new(),
            n => one(n.to_string()),
        },
    },
    Setting {
        name: "server-connections",
        summary: "connections per server per worker (0: backend-conns)",
        arity: (1, 1),
        setter: |p, args| {
            p.server_connections = number("server-connections", args[0], 0, 64)? as usize;
            Ok(())
        },
        getter: |p| match p.server_connections {
            0 => Vec::new(),
            n => one(n.to_string()),
        },
    },
    Setting {
        name: "tcp-keepalive",
        summary: "yes: TCP keepalive on the pool's connections",
        arity: (1, 1),
        setter: |p, args| {
            p.tcp_keepalive = yes_no("tcp-keepalive", args[0])?;
            Ok(())
        },
        getter: |p| match p.tcp_keepalive {
            true => one(bool_word(true)),
            false => Vec::new(),
        },
    },
    Setting {
        name: "client-connections",
        summary: "most clients of the pool at once (0: maxclients alone)",
        arity: (1, 1),
        setter: |p, args| {
            p.client_connections = number("client-connections", args[0], 0, 1_000_000)? as usize;
            Ok(())
        },
        getter: |p| match p.client_connections {
            0 => Vec::new(),
            n => one(n.to_string()),
        },
    },
];

/// `listen` / `tls-listen`: each address checked, and added unless there.
fn add_listen(list: &mut Vec<String>, args: &[&str]) -> Result<(), String> {
    for a in args {
        check_listen(a)?;
        if !list.iter().any(|l| l == a) {
            list.push(a.to_string());
        }
    }
    Ok(())
}

/// A listen address: `HOST:PORT` with a literal IP, `*` or `[::]`-style
/// IPv6, or a host name resolved at start.
fn check_listen(text: &str) -> Result<(), String> {
    let bad = || format!("listen: '{text}' is not HOST:PORT (e.g. 127.0.0.1:22121)");
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() {
        return Err(bad());
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(bad()),
    }
}

/// Every setting: the table above, then a group pool's.
pub fn all_settings() -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().chain(groups::GROUP_SETTINGS)
}

/// The `pool` directive: `pool NAME SETTING ARGS...`.
pub(super) fn set_pool(cfg: &mut Config, args: &[&str]) -> Result<(), String> {
    let [name, setting, rest @ ..] = args else {
        return Err("pool takes a pool name, a setting and its value".to_string());
    };
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(format!(
            "pool: '{name}' is not a pool name (letters, digits, '_', '-', '.')"
        ));
    }
    let setting = setting.to_ascii_lowercase();
    let Some(s) = all_settings().find(|s| s.name == setting) else {
        let names: Vec<&str> = all_settings().map(|s| s.name).collect();
        return Err(format!(
            "pool {name}: unknown setting '{setting}' (known: {})",
            names.join(", ")
        ));
    };
    let (min, max) = s.arity;
    if rest.len() < min || rest.len() > max {
        return Err(format!(
            "pool {name} {setting}: takes {} argument(s), got {}",
            if min == max {
                min.to_string()
            } else if max == usize::MAX {
                format!("at least {min}")
            } else {
                format!("{min} to {max}")
            },
            rest.len()
        ));
    }
    let at = match cfg.pools.iter().position(|p| p.name == *name) {
        Some(i) => i,
        None => {
            cfg.pools.push(PoolSpec::ring(name));
            cfg.pools.len() - 1
        }
    };
    let mut pool = cfg.pools[at].clone();
    (s.setter)(&mut pool, rest).map_err(|e| format!("pool {name}: {e}"))?;
    cfg.pools[at] = pool;
    Ok(())
}

/// The `pool` lines that write `cfg.pools` back.
pub(super) fn pool_lines(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for p in &cfg.pools {
        for s in all_settings() {
            for args in (s.getter)(p) {
                let words: Vec<String> = args.iter().map(|a| quote_arg(a)).collect();
                out.push(format!("pool {} {} {}", p.name, s.name, words.join(" ")));
            }
        }
    }
    out
}

/// What `CONFIG GET pool` shows: each pool's name, kind and listeners.
pub(super) fn pool_summary(cfg: &Config) -> Vec<String> {
    cfg.pools
        .iter()
        .map(|p| {
            let kind = match p.kind {
                PoolKind::Cluster { .. } => "cluster",
                PoolKind::Ring { .. } => "ring",
                PoolKind::Groups(_) => "groups",
            };
            format!("{} {kind} {}", p.name, p.listen.join(","))
        })
        .collect()
}

impl Config {
    /// The pools the daemon serves, in order: `default` first when the
    /// top-level `cluster-nodes` is given (listening on every `bind`
    /// address at `port`, with the top-level settings), then each
    /// declared pool.
    pub fn server_pools(&self) -> Vec<PoolSpec> {
        let mut out = Vec::with_capacity(self.pools.len() + 1);
        if !self.cluster_nodes.is_empty() {
            let mut p = PoolSpec::new(
                DEFAULT_POOL,
                PoolKind::Cluster {
                    seeds: self.cluster_nodes.clone(),
                },
            );
            p.listen = self.bind_addrs(self.port);
            out.push(p);
        }
        out.extend(self.pools.iter().cloned());
        out
    }

    /// Every `bind` address at `port`, as a `listen` line writes it (the
    /// default pool's listeners: at `port`, and at `tls-port`).
    pub fn bind_addrs(&self, port: u16) -> Vec<String> {
        self.bind
            .iter()
            .map(|b| {
                if b.addr.contains(':') && b.addr != "::*" {
                    format!("[{}]:{port}", b.addr)
                } else {
                    format!("{}:{port}", b.addr)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
