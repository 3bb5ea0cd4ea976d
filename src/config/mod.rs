//! Mithril's configuration: the file format, the directive table, the
//! command line and the `CONFIG GET` view of it all.
//!
//! Owns [`Config`], the one value every other part of the daemon reads its
//! settings from, and the way it is built: defaults, then the file (with its
//! includes, in order, the last setting of a directive winning except for
//! `cluster-nodes`, whose lines accumulate), then command-line flags, then
//! [`validate`] for the checks that span several directives.
//!
//! ```text
//!   defaults ─▶ file, includes read in place ─▶ --port / --bind ─▶ validate ─▶ Config
//!               (or a nutcracker.yml / predixy.conf, translated by compat)
//!                  each line: lex ─▶ DIRECTIVES[name].set
//! ```
//!
//! Invariants:
//! - A directive exists in exactly three places kept in sync by
//!   `tests/docs_sync.rs`: [`DIRECTIVES`], `conf/mithril.conf` and
//!   `man/mithril.conf.5`.
//! - Every error names where it came from (file and line, or the command
//!   line) and the directive as written; see [`ConfigError`].
//! - `Config::threads` is never 0 once a `Config` exists: 0 in the file
//!   means "one per core" and is resolved on the spot.
//!
//! The `user` lines are parsed here ([`UserSpec`], in [`user`]); the
//! access control builds its users from them.
//!
//! Must never: panic on any file content, read files other than the named
//! file and its includes, touch sockets, or start logging (it runs before
//! the logger exists).

pub mod cli;
pub mod compat;
mod directives;
mod glob;
mod lex;
mod options;
pub mod pool;
pub mod rewrite;
pub mod sha256;
pub mod tls;
pub mod user;
pub(crate) mod values;

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub use directives::{
    get, lookup, matching, parse_bool, parse_size, render, Directive, DIRECTIVES,
};
pub use glob::glob_match;
pub use options::{BindAddr, LogLevel, OutputLimit, Placement, ReadFrom, Sharding};
pub use user::UserSpec;

/// Deepest allowed `include` nesting (the main file is level 0).
pub const MAX_INCLUDE_DEPTH: usize = 16;
/// Largest `threads` value, and the cap for "one per core".
pub const MAX_THREADS: usize = 256;

/// Every setting of the daemon. Field meanings and limits are documented
/// once, in `man/mithril.conf.5` and in the [`DIRECTIVES`] table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `bind`: the addresses to listen on.
    pub bind: Vec<BindAddr>,
    /// `port`: the TCP port to listen on.
    pub port: u16,
    /// `cluster-nodes`: `HOST:PORT` seeds, as written (IPv6 hosts in
    /// brackets), in order, without repeats.
    pub cluster_nodes: Vec<String>,
    /// `pool`: the pools declared besides the top-level cluster, in the
    /// order of their first line (see [`pool`]).
    pub pools: Vec<pool::PoolSpec>,
    /// `threads`: worker threads; already resolved, never 0.
    pub threads: usize,
    /// `maxclients`: most client connections open at once.
    pub maxclients: usize,
    /// `backend-conns`: pipelined connections per node per worker.
    pub backend_conns: usize,
    /// `placement`: how the acceptor picks a worker.
    pub placement: Placement,
    /// `read-from-replicas`: where read-only commands may go.
    pub read_from_replicas: ReadFrom,
    pub backend_sharding: Sharding,
    /// `topology-refresh-secs`: period of the routine slot-map reload.
    pub topology_refresh_secs: u64,
    /// `connect-timeout`: milliseconds allowed for a backend TCP connect.
    pub connect_timeout_ms: u64,
    /// `backend-timeout`: milliseconds a node may take to answer; 0 = no limit.
    pub backend_timeout_ms: u64,
    /// `proto-max-bulk-len`: largest bulk string accepted from a client.
    pub proto_max_bulk_len: u64,
    /// `query-buffer-limit`: most unprocessed input bytes held per client.
    pub query_buffer_limit: u64,
    /// `reply-batch-wait-us`: longest wait, in microseconds, of the replies
    /// to a pipelined read for the rest of them (0: none).
    pub reply_batch_wait_us: u64,
    /// `client-output-high-water`: unsent output bytes at which a client's
    /// requests stop being dispatched (until half of it has drained).
    pub client_output_high_water: u64,
    /// `client-output-buffer-limit normal ...`: limits for ordinary clients.
    pub output_limit_normal: OutputLimit,
    /// `client-output-buffer-limit pubsub ...`: limits for subscribed clients.
    pub output_limit_pubsub: OutputLimit,
    /// `client-output-buffer-limit replica ...`: limits for replication
    /// feeds (SYNC / PSYNC through the proxy).
    pub output_limit_replica: OutputLimit,
    /// `client-output-total-limit`: output held for all clients at once
    /// (what `client-output-buffer-limit` counts, summed over every
    /// client of every worker); past it the client holding the most is
    /// disconnected; 0 = no limit.
    pub client_output_total_limit: u64,
    /// `maxmemory`: bytes the proxy may buffer (client input and output,
    /// requests in flight) before write commands get -OOM; 0 = no limit.
    pub maxmemory: u64,
    /// `script-registry-size`: most bytes of script bodies remembered (and
    /// as many again of function libraries) to load them again on a node
    /// that lacks them; 0 = remember nothing.
    pub script_registry_size: u64,
    /// `reply-cache`: GET replies cached per worker (`crate::cache`).
    pub reply_cache: bool,
    /// `reply-cache-size`: the cache's bytes for the whole process.
    pub reply_cache_size: u64,
    /// `reply-cache-max-age`: seconds an entry may be served; 0 = no limit.
    pub reply_cache_max_age_secs: u64,
    /// `tracking-table-max-keys`: keys remembered for clients' CLIENT
    /// TRACKING, for the whole process (each worker its share); 0 = no
    /// limit.
    pub tracking_table_max_keys: u64,
    /// `tcp-backlog`: the listen queue length.
    pub tcp_backlog: i32,
    /// `tcp-keepalive`: keepalive idle seconds; 0 turns keepalive off.
    pub tcp_keepalive_secs: u64,
    /// `timeout`: seconds a client may stay idle before it is closed; 0 = never.
    pub timeout_secs: u64,
    /// `loglevel`: log verbosity.
    pub loglevel: LogLevel,
    /// `logfile`: the log file; empty means standard error.
    pub logfile: String,
    /// The file the configuration was read from, made absolute (the daemon
    /// may change directory later); `None` when there was no file.
    pub config_file: Option<PathBuf>,
    /// `requirepass`: the password clients must give with AUTH (or HELLO
    /// AUTH) before other commands; empty means no password.
    pub requirepass: String,
    /// `protected-mode`: refuse to start when listening on a non-loopback
    /// address while clients need no password.
    pub protected_mode: bool,
    /// `user`: the users clients may authenticate as, in the order written
    /// (one line each; a line named `default` replaces the built-in user).
    pub users: Vec<UserSpec>,
    /// `acl-pubsub-default`: `true` (`allchannels`) when a user without a
    /// channel rule may use every channel; `false` (`resetchannels`, as
    /// Redis 7) when it may use none.
    pub acl_pubsub_all: bool,
    /// `auth-any-user`: `AUTH <password>` alone also tries the users other
    /// than `default` (predixy's clients); off: `default` only, as Redis.
    pub auth_any_user: bool,
    /// `auth-max-failures`: failed AUTH / HELLO AUTH a connection may make
    /// before it is closed; 0 = no cap.
    pub auth_max_failures: u64,
    /// `auth-failures-per-source`: failed AUTH from one client address in
    /// one second after which that address's AUTH is refused unchecked
    /// until the second ends; 0 = no cap.
    pub auth_failures_per_source: u64,
    /// `backend-user`: the user mithril authenticates as on the cluster's
    /// nodes; empty means `AUTH <password>` alone.
    pub backend_user: String,
    /// `backend-password`: the password mithril sends to the cluster's
    /// nodes on every connection; empty means none.
    pub backend_password: String,
    /// `cluster-announce-ip`: the address the emulated CLUSTER replies
    /// show; empty means the address the client connected to.
    pub cluster_announce_ip: String,
    /// `cluster-announce-port`: the port the emulated CLUSTER replies show;
    /// 0 means the port the client connected to.
    pub cluster_announce_port: u16,
    /// `daemonize`: fork into the background at start.
    pub daemonize: bool,
    /// `pidfile`: where the process id is written; empty means none.
    pub pidfile: String,
    /// `shutdown-timeout`: seconds a SIGTERM waits for in-flight requests.
    pub shutdown_timeout_secs: u64,
    /// `upgrade-socket`: the unix socket a new process (`--upgrade`) takes
    /// the listening sockets through; empty means none.
    pub upgrade_socket: String,
    /// `stats`: per-request accounting (command statistics, latency
    /// histograms, the slow log).
    pub stats: bool,
    /// `slowlog-log-slower-than`: microseconds; negative turns the slow log
    /// off, 0 logs every request.
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`: entries the slow log keeps.
    pub slowlog_max_len: usize,
    /// `metrics-port`: Prometheus endpoint port; 0 is off.
    pub metrics_port: u16,
    /// `metrics-bind`: the address of the Prometheus endpoint.
    pub metrics_bind: String,
    /// `stats-port`: twemproxy-style stats port; 0 is off.
    pub stats_port: u16,
    /// `stats-bind`: the address of the twemproxy-style stats port.
    pub stats_bind: String,
    /// `metrics-allow`: the client addresses (IPs or CIDR blocks) the
    /// metrics and stats ports serve; empty = any that reaches the bind.
    pub metrics_allow: Vec<String>,
    /// The `tls-*` directives (`tls.rs`).
    pub tls: tls::TlsSettings,
}

/// `threads 0` means one worker per core (at most [`MAX_THREADS`]).
pub(crate) fn resolve_threads(threads: usize) -> usize {
    if threads != 0 {
        return threads;
    }
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec![
                BindAddr {
                    addr: "127.0.0.1".to_string(),
                    optional: false,
                },
                BindAddr {
                    addr: "::1".to_string(),
                    optional: true,
                },
            ],
            port: 7777,
            cluster_nodes: Vec::new(),
            pools: Vec::new(),
            threads: resolve_threads(0),
            maxclients: 10_000,
            backend_conns: 1,
            placement: Placement::LeastLoaded,
            read_from_replicas: ReadFrom::No,
            backend_sharding: Sharding::Auto,
            topology_refresh_secs: 10,
            connect_timeout_ms: 1000,
            backend_timeout_ms: 5000,
            proto_max_bulk_len: 64 * 1024 * 1024,
            query_buffer_limit: 128 * 1024 * 1024,
            reply_batch_wait_us: 500,
            client_output_high_water: 4 * 1024 * 1024,
            output_limit_normal: OutputLimit {
                hard: 256 * 1024 * 1024,
                soft: 0,
                soft_secs: 0,
            },
            output_limit_pubsub: OutputLimit {
                hard: 32 * 1024 * 1024,
                soft: 8 * 1024 * 1024,
                soft_secs: 60,
            },
            output_limit_replica: OutputLimit {
                hard: 256 * 1024 * 1024,
                soft: 64 * 1024 * 1024,
                soft_secs: 60,
            },
            client_output_total_limit: 512 * 1024 * 1024,
            maxmemory: 0,
            script_registry_size: 16 * 1024 * 1024,
            reply_cache: false,
            reply_cache_size: 64 * 1024 * 1024,
            reply_cache_max_age_secs: 300,
            tracking_table_max_keys: 1_000_000,
            tcp_backlog: 511,
            tcp_keepalive_secs: 300,
            timeout_secs: 0,
            loglevel: LogLevel::Notice,
            logfile: String::new(),
            config_file: None,
            requirepass: String::new(),
            protected_mode: true,
            users: Vec::new(),
            acl_pubsub_all: false,
            auth_any_user: false,
            auth_max_failures: 10,
            auth_failures_per_source: 100,
            backend_user: String::new(),
            backend_password: String::new(),
            cluster_announce_ip: String::new(),
            cluster_announce_port: 0,
            daemonize: false,
            pidfile: String::new(),
            upgrade_socket: String::new(),
            shutdown_timeout_secs: 10,
            stats: true,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            metrics_port: 0,
            metrics_bind: "127.0.0.1".to_string(),
            stats_port: 0,
            stats_bind: "127.0.0.1".to_string(),
            metrics_allow: Vec::new(),
            tls: tls::TlsSettings::default(),
        }
    }
}

/// A configuration problem, from the file, the command line or validation.
///
/// Displays as `ORIGIN[:LINE]: ['DIRECTIVE AS WRITTEN': ]MESSAGE`, e.g.
/// `/etc/mithril/mithril.conf:12: 'port 99999': port must be between 0 and 65535`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    origin: String,
    line: Option<usize>,
    text: Option<String>,
    message: String,
}

impl ConfigError {
    /// An error about `origin` as a whole (no line, no directive).
    pub fn new(origin: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            origin: origin.into(),
            line: None,
            text: None,
            message: message.into(),
        }
    }

    pub(crate) fn at(
        origin: &str,
        line: usize,
        text: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            origin: origin.to_string(),
            line: Some(line),
            text: text.map(str::to_string),
            message: message.into(),
        }
    }

    pub(crate) fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// The file (or `command line`) the problem is in.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The 1-based line number, for errors inside a file.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(text) = &self.text {
            write!(f, ": '{text}'")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Reads the configuration file at `path` (and its includes) over the
/// defaults. Does not run [`validate`].
pub fn parse_file(path: &Path) -> Result<Config, ConfigError> {
    let mut cfg = Config::default();
    let mut reader = Reader { stack: Vec::new() };
    reader.read_file(&mut cfg, path, &path.display().to_string())?;
    cfg.config_file = Some(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
    Ok(cfg)
}

/// Parses configuration text over the defaults; `origin` names it in errors.
/// Relative `include` paths resolve against the current directory, since
/// the text has no directory of its own. Does not run [`validate`].
pub fn parse_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let mut cfg = Config::default();
    let mut reader = Reader { stack: Vec::new() };
    reader.read_text(&mut cfg, text.as_bytes(), origin, None, 0)?;
    Ok(cfg)
}

/// Walks a file and its includes.
struct Reader {
    /// Canonical paths of the files being read, outermost first (cycle check).
    stack: Vec<PathBuf>,
}

impl Reader {
    /// Reads the main file `path`, shown as `shown` in errors.
    fn read_file(&mut self, cfg: &mut Config, path: &Path, shown: &str) -> Result<(), ConfigError> {
        let bytes = std::fs::read(path)
            .map_err(|e| ConfigError::new(shown, format!("cannot read configuration file: {e}")))?;
        self.read_bytes(cfg, path, &bytes, shown, 0)
    }

    /// Parses the contents of file `path` at include depth `depth`, with the
    /// file on the stack of open files for the cycle check.
    fn read_bytes(
        &mut self,
        cfg: &mut Config,
        path: &Path,
        bytes: &[u8],
        shown: &str,
        depth: usize,
    ) -> Result<(), ConfigError> {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = path.parent().map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        });
        self.stack.push(canonical);
        let result = self.read_text(cfg, bytes, shown, dir, depth);
        self.stack.pop();
        result
    }

    fn read_text(
        &mut self,
        cfg: &mut Config,
        text: &[u8],
        origin: &str,
        dir: Option<&Path>,
        depth: usize,
    ) -> Result<(), ConfigError> {
        for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = index + 1;
            let split = lex::split_line(raw)
                .map_err(|(e, text)| ConfigError::at(origin, line, Some(&text), e.message()))?;
            let Some((name, args)) = split.args.split_first() else {
                continue;
            };
            let fail = |message: String| ConfigError::at(origin, line, Some(&split.text), message);
            let name = std::str::from_utf8(name)
                .map_err(|_| fail("directive name is not valid UTF-8".into()))?;
            let args = args
                .iter()
                .map(|a| std::str::from_utf8(a))
                .collect::<Result<Vec<&str>, _>>()
                .map_err(|_| fail(format!("{name}: argument is not valid UTF-8")))?;
            let shown = shown_line(name, &split.text, &args);
            let fail = |message: String| ConfigError::at(origin, line, Some(&shown), message);
            let Some(directive) = lookup(name) else {
                return Err(ConfigError::at(
                    origin,
                    line,
                    None,
                    format!("unknown directive '{name}'"),
                ));
            };
            if directive.name == "include" {
                self.include(cfg, &args, dir, depth).map_err(|e| match e {
                    Nested::Here(message) => fail(message),
                    Nested::Inside(err) => err,
                })?;
            } else {
                directive.set(cfg, &args).map_err(fail)?;
            }
        }
        Ok(())
    }

    fn include(
        &mut self,
        cfg: &mut Config,
        args: &[&str],
        dir: Option<&Path>,
        depth: usize,
    ) -> Result<(), Nested> {
        let [target] = args else {
            return Err(Nested::Here("include takes exactly one path".to_string()));
        };
        if target.is_empty() {
            return Err(Nested::Here("include needs a file name".to_string()));
        }
        let target = Path::new(target);
        let path = match dir {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target.to_path_buf(),
        };
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(Nested::Here(format!(
                "includes nest deeper than {MAX_INCLUDE_DEPTH} levels"
            )));
        }
        let canonical = std::fs::canonicalize(&path)
            .map_err(|e| Nested::Here(format!("cannot read {}: {e}", path.display())))?;
        if self.stack.contains(&canonical) {
            let chain: Vec<String> = self
                .stack
                .iter()
                .chain(std::iter::once(&canonical))
                .map(|p| p.display().to_string())
                .collect();
            return Err(Nested::Here(format!(
                "include cycle: {}",
                chain.join(" -> ")
            )));
        }
        let bytes = std::fs::read(&path)
            .map_err(|e| Nested::Here(format!("cannot read {}: {e}", path.display())))?;
        let shown = path.display().to_string();
        self.read_bytes(cfg, &path, &bytes, &shown, depth + 1)
            .map_err(Nested::Inside)
    }
}

/// An include failure: about the include line itself, or an error already
/// located inside the included file.
enum Nested {
    Here(String),
    Inside(ConfigError),
}

/// Checks that span several directives, and the invariants of a `Config`
/// that code (not the parser) may have built. Run after the file and the
/// command line have been applied.
pub fn validate(cfg: &Config) -> Result<(), ConfigError> {
    let origin = cfg
        .config_file
        .as_ref()
        .map_or_else(|| "configuration".to_string(), |p| p.display().to_string());
    let fail = |message: String| Err(ConfigError::new(origin.clone(), message));
    if cfg.cluster_nodes.is_empty() && cfg.pools.is_empty() {
        return fail(
            "no cluster-nodes given: name at least one node of the Redis Cluster, \
             e.g. 'cluster-nodes 127.0.0.1:7000'"
                .to_string(),
        );
    }
    if let Err(e) = pool::validate_pools(cfg) {
        return fail(e);
    }
    if cfg.bind.is_empty() {
        return fail("bind names no address to listen on".to_string());
    }
    if let Some(bad) = cfg.bind.iter().find(|b| b.ip().is_none()) {
        return fail(format!("bind: '{}' is not an IP address", bad.addr));
    }
    if let Some(e) = tls::validate_tls(&cfg.tls, cfg.port) {
        return fail(e);
    }
    if cfg.threads == 0 || cfg.threads > MAX_THREADS {
        return fail(format!(
            "threads must be between 1 and {MAX_THREADS} once resolved"
        ));
    }
    if !cfg.backend_user.is_empty() && cfg.backend_password.is_empty() {
        return fail(
            "backend-user is set but backend-password is not: give the password mithril \
             authenticates with on the cluster's nodes"
                .to_string(),
        );
    }
    if !cfg.requirepass.is_empty() && cfg.users.iter().any(|u| u.name == "default") {
        return fail(
            "both requirepass and a 'user default' line set the default user: keep one \
             (e.g. 'user default on >password ...' and no requirepass)"
                .to_string(),
        );
    }
    if let Some(refusal) = protected_mode_refusal(cfg) {
        return fail(refusal);
    }
    if cfg.proto_max_bulk_len > cfg.query_buffer_limit {
        return fail(format!(
            "proto-max-bulk-len ({}) is larger than query-buffer-limit ({}): \
             a bulk string that size could never be received",
            cfg.proto_max_bulk_len, cfg.query_buffer_limit
        ));
    }
    Ok(())
}

/// Whether clients that never authenticate may run commands: the
/// `default` user is enabled and needs no password.
pub fn default_user_is_open(cfg: &Config) -> bool {
    if !cfg.requirepass.is_empty() {
        return false;
    }
    match cfg.users.iter().find(|u| u.name == "default") {
        Some(u) => u.enabled && u.nopass,
        None => true,
    }
}

/// Protected mode: the reason to refuse to start when `protected-mode` is
/// on, a listen address is not a loopback one, and clients need no
/// password (Redis refuses such clients one by one; a proxy in front of a
/// whole cluster refuses to start instead).
pub fn protected_mode_refusal(cfg: &Config) -> Option<String> {
    if !cfg.protected_mode || !default_user_is_open(cfg) {
        return None;
    }
    let exposed = exposed_listeners(cfg);
    if exposed.is_empty() {
        return None;
    }
    Some(format!(
        "protected mode: refusing to listen on {} (not a loopback address) while clients \
         need no password. Set requirepass (or give the default user a password or turn it \
         off with a 'user default' line), or bind to 127.0.0.1 / ::1 only, or, if every \
         client that can reach that address is trusted, set 'protected-mode no'",
        exposed.join(", ")
    ))
}

/// The addresses clients could reach without a password from beyond this
/// host: the top-level `bind` addresses (when the top-level cluster is
/// served) and the listeners of pools without a `password`, that are not
/// loopback.
pub fn exposed_listeners(cfg: &Config) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !cfg.cluster_nodes.is_empty() {
        out.extend(
            cfg.bind
                .iter()
                .filter(|b| b.ip().is_some_and(|ip| !ip.is_loopback()))
                .map(|b| b.addr.clone()),
        );
    }
    for p in cfg.pools.iter().filter(|p| p.password.is_empty()) {
        for l in p.listen.iter().chain(&p.tls_listen) {
            let host = l.rsplit_once(':').map_or(l.as_str(), |(h, _)| h);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let loopback =
                host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                out.push(l.clone());
            }
        }
    }
    out
}

impl Config {
    /// Replaces every client password this configuration holds in clear by
    /// its SHA-256 digest (`user` lines) or drops it (`requirepass`, once
    /// the users were built from it), so that the copy the running proxy
    /// keeps has none. The backend password stays: it must be sent.
    pub fn forget_client_passwords(&mut self) {
        self.requirepass.clear();
        for u in &mut self.users {
            *u = u.hashed();
        }
    }
}

/// The text of a configuration line as error messages show it: for the
/// directives that carry passwords, the secret words are masked.
fn shown_line(name: &str, text: &str, args: &[&str]) -> String {
    let secret = |a: &&str| -> String {
        if a.starts_with('>') {
            ">***".to_string()
        } else {
            a.to_string()
        }
    };
    match name.to_ascii_lowercase().as_str() {
        "requirepass" | "backend-password" => format!("{name} ***"),
        "user" => std::iter::once(name.to_string())
            .chain(args.iter().map(secret))
            .collect::<Vec<_>>()
            .join(" "),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests;
