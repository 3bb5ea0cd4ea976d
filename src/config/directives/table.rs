//! The rows of the directive table, in the order the documentation
//! presents them. What a row's fields mean, and the views built on the
//! table, are in the parent module.

use super::parse_bool;
use super::tls;
use super::{Directive, Kind};
use crate::config::values::{
    first, listen_ip, number, set_bind, set_cluster_nodes, set_output_limits, set_user, size, KB,
    MAX_TIMEOUT, MB,
};
use crate::config::{
    resolve_threads, BindAddr, LogLevel, Placement, ReadFrom, Sharding, MAX_THREADS,
};

/// Linux refuses a keepalive idle time above this (`MAX_TCP_KEEPIDLE`).
const MAX_KEEPALIVE: u64 = 32_767;

/// Every directive, in the order the documentation presents them.
pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "include",
        default: "",
        summary: "read another configuration file at this point",
        runtime_settable: false,
        kind: Kind::Meta,
        arity: (1, 1),
        setter: |_, _| Err("include is only valid inside a configuration file".to_string()),
        getter: |_| Vec::new(),
    },
    Directive {
        name: "bind",
        default: "127.0.0.1 -::1",
        summary: "addresses to listen on; a leading '-' marks one that may fail to bind",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 16),
        setter: set_bind,
        getter: |c| c.bind.iter().map(BindAddr::to_string).collect(),
    },
    Directive {
        name: "port",
        default: "7777",
        summary: "TCP port to listen on; 0 means no plain listener (with a tls-port)",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.port = number("port", first(a), 0, 65535)? as u16;
            Ok(())
        },
        getter: |c| vec![c.port.to_string()],
    },
    Directive {
        name: "cluster-nodes",
        default: "",
        summary: "HOST:PORT seed nodes of the Redis Cluster (required; lines accumulate)",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, usize::MAX),
        setter: set_cluster_nodes,
        getter: |c| c.cluster_nodes.clone(),
    },
    Directive {
        name: "pool",
        default: "",
        summary: "pool NAME SETTING ARGS: a pool of its own listeners and backends (standalone servers placed as twemproxy places them, or another cluster)",
        runtime_settable: false,
        kind: Kind::PerPool,
        arity: (3, usize::MAX),
        setter: crate::config::pool::set_pool,
        // Unused: `render` writes one line per pool setting.
        getter: |_| Vec::new(),
    },
    Directive {
        name: "threads",
        default: "0",
        summary: "worker threads; 0 means one per CPU core",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.threads =
                resolve_threads(number("threads", first(a), 0, MAX_THREADS as u64)? as usize);
            Ok(())
        },
        getter: |c| vec![c.threads.to_string()],
    },
    Directive {
        name: "maxclients",
        default: "10000",
        summary: "most client connections open at once",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.maxclients = number("maxclients", first(a), 1, 1_000_000)? as usize;
            Ok(())
        },
        getter: |c| vec![c.maxclients.to_string()],
    },
    Directive {
        name: "backend-conns",
        default: "1",
        summary: "pipelined connections per cluster node per worker",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.backend_conns = number("backend-conns", first(a), 1, 64)? as usize;
            Ok(())
        },
        getter: |c| vec![c.backend_conns.to_string()],
    },
    Directive {
        name: "placement",
        default: "least-loaded",
        summary: "how new connections are spread over workers: least-loaded or round-robin",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.placement = first(a).parse::<Placement>()?;
            Ok(())
        },
        getter: |c| vec![c.placement.to_string()],
    },
    Directive {
        name: "read-from-replicas",
        default: "no",
        summary: "where read-only commands may go: no (masters), yes (masters and replicas), prefer-replica",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.read_from_replicas = first(a).parse::<ReadFrom>()?;
            Ok(())
        },
        getter: |c| vec![c.read_from_replicas.to_string()],
    },
    Directive {
        name: "backend-sharding",
        default: "auto",
        summary: "no: each worker its own connections to the nodes; yes: one process-wide pipe per node, on the worker that owns it",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.backend_sharding = first(a).parse::<Sharding>()?;
            Ok(())
        },
        getter: |c| vec![c.backend_sharding.to_string()],
    },
    Directive {
        name: "topology-refresh-secs",
        default: "10",
        summary: "seconds between periodic reloads of the cluster's slot map",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.topology_refresh_secs = number("topology-refresh-secs", first(a), 1, 86_400)?;
            Ok(())
        },
        getter: |c| vec![c.topology_refresh_secs.to_string()],
    },
    Directive {
        name: "connect-timeout",
        default: "1000",
        summary: "milliseconds to wait for a TCP connection to a cluster node",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.connect_timeout_ms = number("connect-timeout", first(a), 100, 60_000)?;
            Ok(())
        },
        getter: |c| vec![c.connect_timeout_ms.to_string()],
    },
    Directive {
        name: "backend-timeout",
        default: "5000",
        summary: "milliseconds a node may take to answer before its connection is dropped; 0 = no limit",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.backend_timeout_ms = number("backend-timeout", first(a), 0, 3_600_000)?;
            Ok(())
        },
        getter: |c| vec![c.backend_timeout_ms.to_string()],
    },
    Directive {
        name: "proto-max-bulk-len",
        default: "64mb",
        summary: "largest bulk string accepted from a client",
        runtime_settable: true,
        kind: Kind::Size,
        arity: (1, 1),
        setter: |c, a| {
            c.proto_max_bulk_len = size("proto-max-bulk-len", first(a), MB)?;
            Ok(())
        },
        getter: |c| vec![c.proto_max_bulk_len.to_string()],
    },
    Directive {
        name: "query-buffer-limit",
        default: "128mb",
        summary: "largest request, and most bytes buffered from one client, before it is disconnected",
        runtime_settable: true,
        kind: Kind::Size,
        arity: (1, 1),
        setter: |c, a| {
            c.query_buffer_limit = size("query-buffer-limit", first(a), MB)?;
            Ok(())
        },
        getter: |c| vec![c.query_buffer_limit.to_string()],
    },
    Directive {
        name: "client-output-high-water",
        default: "4mb",
        summary: "unsent output at which a client's requests wait until half of it has drained",
        runtime_settable: true,
        kind: Kind::Size,
        arity: (1, 1),
        setter: |c, a| {
            c.client_output_high_water = size("client-output-high-water", first(a), 16 * KB)?;
            Ok(())
        },
        getter: |c| vec![c.client_output_high_water.to_string()],
    },
    Directive {
        name: "reply-batch-wait-us",
        default: "500",
        summary: "microseconds a pipelined read's first replies may wait for the rest of its replies, to leave in one write; 0 = never",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.reply_batch_wait_us = number("reply-batch-wait-us", first(a), 0, 1_000_000)?;
            Ok(())
        },
        getter: |c| vec![c.reply_batch_wait_us.to_string()],
    },
    Directive {
        name: "client-output-buffer-limit",
        default: "normal 256mb 0 0 pubsub 32mb 8mb 60 replica 256mb 64mb 60",
        summary: "CLASS HARD SOFT SECONDS: disconnect a client whose unsent output passes a limit",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (4, 12),
        setter: set_output_limits,
        getter: |c| {
            let mut out = Vec::new();
            for (class, l) in [
                ("normal", c.output_limit_normal),
                ("pubsub", c.output_limit_pubsub),
                ("replica", c.output_limit_replica),
            ] {
                out.push(class.to_string());
                out.push(l.hard.to_string());
                out.push(l.soft.to_string());
                out.push(l.soft_secs.to_string());
            }
            out
        },
    },
    Directive {
        name: "client-output-total-limit",
        default: "512mb",
        summary: "output held for all clients together; past it the client holding the most is disconnected; 0 = no limit",
        runtime_settable: true,
        kind: Kind::Size,
        arity: (1, 1),
        setter: |c, a| {
            c.client_output_total_limit = size("client-output-total-limit", first(a), 0)?;
            Ok(())
        },
        getter: |c| vec![c.client_output_total_limit.to_string()],
    },
    Directive {
        name: "maxmemory",
        default: "0",
        summary: "bytes buffered for clients past which write commands get -OOM; 0 is no limit",
        runtime_settable: true,
        kind: Kind::Size,
        arity: (1, 1),
        setter: |c, a| {
            c.maxmemory = size("maxmemory", first(a), 0)?;
            Ok(())
        },
        getter: |c| vec![c.maxmemory.to_string()],
    },
    Directive {
        name: "script-registry-size",
        default: "16mb",
        summary: "bytes of scripts (and as many of function libraries) kept to reload them on a node that lacks them; 0 is off",
        runtime_settable: false,
        kind: Kind::Size,
        arity: (1, 1),
        setter: |c, a| {
            c.script_registry_size = size("script-registry-size", first(a), 0)?;
            Ok(())
        },
        getter: |c| vec![c.script_registry_size.to_string()],
    },
    Directive {
        name: "reply-cache",
        default: "no",
        summary: "serve GET from a per-worker cache kept coherent by the nodes' CLIENT TRACKING invalidations",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.reply_cache = parse_bool(first(a)).ok_or("reply-cache must be yes or no")?;
            Ok(())
        },
        getter: |c| vec![if c.reply_cache { "yes" } else { "no" }.to_string()],
    },
    Directive {
        name: "reply-cache-size",
        default: "64mb",
        summary: "bytes the reply cache may hold, for the whole process (each worker gets its share)",
        runtime_settable: true,
        kind: Kind::Size,
        arity: (1, 1),
        setter: |c, a| {
            c.reply_cache_size = size("reply-cache-size", first(a), 0)?;
            Ok(())
        },
        getter: |c| vec![c.reply_cache_size.to_string()],
    },
    Directive {
        name: "reply-cache-max-age",
        default: "300",
        summary: "seconds a cached reply may be served at most, a backstop behind the invalidations; 0 is no limit",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.reply_cache_max_age_secs = number("reply-cache-max-age", first(a), 0, 86_400 * 365)?;
            Ok(())
        },
        getter: |c| vec![c.reply_cache_max_age_secs.to_string()],
    },
    Directive {
        name: "tracking-table-max-keys",
        default: "1000000",
        summary: "keys remembered for clients' CLIENT TRACKING, for the whole process (each worker its share); past it the oldest are invalidated; 0 is no limit",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.tracking_table_max_keys =
                number("tracking-table-max-keys", first(a), 0, u32::MAX as u64)?;
            Ok(())
        },
        getter: |c| vec![c.tracking_table_max_keys.to_string()],
    },
    Directive {
        name: "tcp-backlog",
        default: "511",
        summary: "length of the listen queue for connections not yet accepted",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.tcp_backlog = number("tcp-backlog", first(a), 1, i32::MAX as u64)? as i32;
            Ok(())
        },
        getter: |c| vec![c.tcp_backlog.to_string()],
    },
    Directive {
        name: "tcp-keepalive",
        default: "300",
        summary: "TCP keepalive period in seconds for client and cluster connections; 0 is off",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.tcp_keepalive_secs = number("tcp-keepalive", first(a), 0, MAX_KEEPALIVE)?;
            Ok(())
        },
        getter: |c| vec![c.tcp_keepalive_secs.to_string()],
    },
    Directive {
        name: "timeout",
        default: "0",
        summary: "close a client idle for this many seconds; 0 never does",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.timeout_secs = number("timeout", first(a), 0, MAX_TIMEOUT)?;
            Ok(())
        },
        getter: |c| vec![c.timeout_secs.to_string()],
    },
    Directive {
        name: "loglevel",
        default: "notice",
        summary: "log verbosity: debug, verbose, notice, warning or nothing",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.loglevel = first(a).parse::<LogLevel>()?;
            Ok(())
        },
        getter: |c| vec![c.loglevel.to_string()],
    },
    Directive {
        name: "logfile",
        default: "\"\"",
        summary: "file to log to; empty means standard error",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.logfile = first(a).to_string();
            Ok(())
        },
        getter: |c| vec![c.logfile.clone()],
    },
    Directive {
        name: "requirepass",
        default: "\"\"",
        summary: "password clients must give with AUTH before other commands; empty means none",
        runtime_settable: false,
        kind: Kind::Secret,
        arity: (1, 1),
        setter: |c, a| {
            c.requirepass = first(a).to_string();
            Ok(())
        },
        // The real value, so `render` round-trips; CONFIG GET hides it.
        getter: |c| vec![c.requirepass.clone()],
    },
    Directive {
        name: "protected-mode",
        default: "yes",
        summary: "refuse to start on a non-loopback address while clients need no password",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.protected_mode = parse_bool(first(a)).ok_or("protected-mode must be yes or no")?;
            Ok(())
        },
        getter: |c| vec![if c.protected_mode { "yes" } else { "no" }.to_string()],
    },
    Directive {
        name: "user",
        default: "",
        summary: "a user clients may AUTH as: name, on|off, passwords, mode, key and channel patterns (one line each)",
        runtime_settable: false,
        kind: Kind::PerUser,
        arity: (1, usize::MAX),
        setter: set_user,
        // Unused: `render` writes one line per user, CONFIG GET shows them hashed.
        getter: |_| Vec::new(),
    },
    Directive {
        name: "acl-pubsub-default",
        default: "resetchannels",
        summary: "channels a user line without a channel rule may use: resetchannels (none) or allchannels",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.acl_pubsub_all = match first(a).to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => return Err("acl-pubsub-default must be resetchannels or allchannels".into()),
            };
            Ok(())
        },
        getter: |c| vec![if c.acl_pubsub_all { "allchannels" } else { "resetchannels" }.to_string()],
    },
    Directive {
        name: "auth-any-user",
        default: "no",
        summary: "AUTH with a password alone also tries every user, not only default (predixy's clients)",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.auth_any_user = parse_bool(first(a)).ok_or("auth-any-user must be yes or no")?;
            Ok(())
        },
        getter: |c| vec![if c.auth_any_user { "yes" } else { "no" }.to_string()],
    },
    Directive {
        name: "auth-max-failures",
        default: "10",
        summary: "failed AUTH a connection may make before it is closed; 0 is no cap",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.auth_max_failures = number("auth-max-failures", first(a), 0, 1_000_000_000)?;
            Ok(())
        },
        getter: |c| vec![c.auth_max_failures.to_string()],
    },
    Directive {
        name: "auth-failures-per-source",
        default: "100",
        summary: "failed AUTH per second from one client address before its AUTH is refused unchecked; 0 is no cap",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.auth_failures_per_source =
                number("auth-failures-per-source", first(a), 0, 1_000_000_000)?;
            Ok(())
        },
        getter: |c| vec![c.auth_failures_per_source.to_string()],
    },
    Directive {
        name: "backend-user",
        default: "\"\"",
        summary: "user mithril authenticates as on the cluster's nodes; empty sends AUTH with the password alone",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.backend_user = first(a).to_string();
            Ok(())
        },
        getter: |c| vec![c.backend_user.clone()],
    },
    Directive {
        name: "backend-password",
        default: "\"\"",
        summary: "password mithril sends to the cluster's nodes on every connection; empty means none",
        runtime_settable: false,
        kind: Kind::Secret,
        arity: (1, 1),
        setter: |c, a| {
            c.backend_password = first(a).to_string();
            Ok(())
        },
        // The real value, so `render` round-trips; CONFIG GET hides it.
        getter: |c| vec![c.backend_password.clone()],
    },
    tls::PORT,
    tls::CERT_FILE,
    tls::KEY_FILE,
    tls::KEY_FILE_PASS,
    tls::CA_CERT_FILE,
    tls::CA_CERT_DIR,
    tls::AUTH_CLIENTS,
    tls::AUTH_CLIENTS_USER,
    tls::PROTOCOLS,
    tls::CIPHERSUITES,
    tls::SESSION_CACHING,
    tls::HANDSHAKE_TIMEOUT,
    tls::CLUSTER,
    tls::SENTINEL,
    tls::CLIENT_CERT_FILE,
    tls::CLIENT_KEY_FILE,
    tls::CLIENT_KEY_FILE_PASS,
    tls::SERVER_NAME,
    Directive {
        name: "cluster-announce-ip",
        default: "\"\"",
        summary:
            "address shown by the emulated CLUSTER replies; empty means the one the client used",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            let ip = first(a);
            if !ip.is_empty() && ip.parse::<std::net::IpAddr>().is_err() {
                return Err(format!(
                    "cluster-announce-ip: '{ip}' is not an IP address (or \"\" for none)"
                ));
            }
            c.cluster_announce_ip = ip.to_string();
            Ok(())
        },
        getter: |c| vec![c.cluster_announce_ip.clone()],
    },
    Directive {
        name: "cluster-announce-port",
        default: "0",
        summary: "port shown by the emulated CLUSTER replies; 0 means the one the client used",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.cluster_announce_port = number("cluster-announce-port", first(a), 0, 65535)? as u16;
            Ok(())
        },
        getter: |c| vec![c.cluster_announce_port.to_string()],
    },
    Directive {
        name: "daemonize",
        default: "no",
        summary: "detach from the terminal and run in the background",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.daemonize = parse_bool(first(a)).ok_or("daemonize must be yes or no")?;
            Ok(())
        },
        getter: |c| vec![if c.daemonize { "yes" } else { "no" }.to_string()],
    },
    Directive {
        name: "pidfile",
        default: "\"\"",
        summary: "file to write the process id to, locked while the proxy runs; empty for none",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.pidfile = first(a).to_string();
            Ok(())
        },
        getter: |c| vec![c.pidfile.clone()],
    },
    Directive {
        name: "shutdown-timeout",
        default: "10",
        summary: "seconds SIGTERM waits for in-flight requests before the proxy exits anyway",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.shutdown_timeout_secs = number("shutdown-timeout", first(a), 0, 3600)?;
            Ok(())
        },
        getter: |c| vec![c.shutdown_timeout_secs.to_string()],
    },
    Directive {
        name: "upgrade-socket",
        default: "\"\"",
        summary: "unix socket through which `mithril --upgrade` takes over the listening sockets",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.upgrade_socket = first(a).to_string();
            Ok(())
        },
        getter: |c| vec![c.upgrade_socket.clone()],
    },
    // Observability (issue 8): statistics, the slow log, metrics ports.
    Directive {
        name: "stats",
        default: "yes",
        summary: "count every request: command statistics, latency histograms and the slow log",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.stats = parse_bool(first(a)).ok_or("stats must be yes or no")?;
            Ok(())
        },
        getter: |c| vec![if c.stats { "yes" } else { "no" }.to_string()],
    },
    Directive {
        name: "slowlog-log-slower-than",
        default: "10000",
        summary: "microseconds a request must take to enter the slow log; -1 is off, 0 logs all",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            let v = first(a);
            c.slowlog_log_slower_than = match v.strip_prefix('-') {
                Some(rest) => -(number("slowlog-log-slower-than", rest, 0, i64::MAX as u64)? as i64),
                None => number("slowlog-log-slower-than", v, 0, i64::MAX as u64)? as i64,
            };
            Ok(())
        },
        getter: |c| vec![c.slowlog_log_slower_than.to_string()],
    },
    Directive {
        name: "slowlog-max-len",
        default: "128",
        summary: "entries the slow log keeps",
        runtime_settable: true,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.slowlog_max_len = number("slowlog-max-len", first(a), 0, 1_000_000)? as usize;
            Ok(())
        },
        getter: |c| vec![c.slowlog_max_len.to_string()],
    },
    Directive {
        name: "metrics-port",
        default: "0",
        summary: "port of the Prometheus endpoint (HTTP GET /metrics); 0 is off",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.metrics_port = number("metrics-port", first(a), 0, 65535)? as u16;
            Ok(())
        },
        getter: |c| vec![c.metrics_port.to_string()],
    },
    Directive {
        name: "metrics-bind",
        default: "127.0.0.1",
        summary: "address the Prometheus endpoint listens on",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.metrics_bind = listen_ip("metrics-bind", first(a))?;
            Ok(())
        },
        getter: |c| vec![c.metrics_bind.clone()],
    },
    Directive {
        name: "stats-port",
        default: "0",
        summary: "port serving twemproxy's stats JSON to every connection (nutcracker -s); 0 is off",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.stats_port = number("stats-port", first(a), 0, 65535)? as u16;
            Ok(())
        },
        getter: |c| vec![c.stats_port.to_string()],
    },
    Directive {
        name: "stats-bind",
        default: "127.0.0.1",
        summary: "address the twemproxy stats port listens on (nutcracker -a)",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 1),
        setter: |c, a| {
            c.stats_bind = listen_ip("stats-bind", first(a))?;
            Ok(())
        },
        getter: |c| vec![c.stats_bind.clone()],
    },
    Directive {
        name: "metrics-allow",
        default: "\"\"",
        summary: "client addresses (IP or CIDR) the metrics and stats ports serve; empty is any",
        runtime_settable: false,
        kind: Kind::Plain,
        arity: (1, 64),
        setter: |c, a| {
            c.metrics_allow.clear();
            for w in a.iter().filter(|w| !w.is_empty()) {
                if crate::config::values::parse_cidr(w).is_none() {
                    return Err(format!(
                        "metrics-allow: '{w}' is not an IP address or CIDR block (10.0.0.0/8)"
                    ));
                }
                c.metrics_allow.push(w.to_string());
            }
            Ok(())
        },
        getter: |c| c.metrics_allow.clone(),
    },
];
