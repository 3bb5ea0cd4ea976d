//! INFO: the sections Redis users know, filled with the proxy's own
//! figures, plus `backends` (one line per server pool, then one per node).
//!
//! Pools: a client sees its own pool (the one whose listener it reached).
//! `redis_mode` and `tcp_port` in `server`, and `cluster`, are that
//! pool's: a ring of standalone servers says `redis_mode:standalone` and
//! `cluster_enabled:0`, as a standalone server does; a cluster pool counts
//! its own masters, replicas and slots. The masters whose INFO is merged
//! below are the pool's. Everything else is the whole process's; the
//! per-pool figures are in `backends` (`poolN:` lines, `pool=` on each
//! node's line), in twemproxy's stats JSON and in Prometheus's `pool`
//! label (`crate::metrics`).
//!
//! The text has Redis's layout: `# Section` headers, `field:value` lines,
//! CRLF line ends, a blank line between sections, sections always in
//! Redis's order whatever order they were asked in. Arguments are section
//! names in any case, or `default` / `all` / `everything`; unknown names
//! are ignored (an INFO of only unknown sections is empty). RESP2 gets a
//! bulk string, RESP3 a verbatim string, as from Redis.
//!
//! Where the numbers come from: the workers' published snapshots
//! (`stats::Hub`), which the worker answering INFO has every worker refresh
//! first (`worker::observe`), and, for `keyspace`, `persistence`, the
//! data's fields of `stats` and `memory` (`DATA_FIELDS`) and
//! `replication` after the proxy's `role:master`, and `blocked_clients`
//! (what the nodes hold blocked, leases included), each master's own
//! `INFO keyspace persistence stats memory replication clients`, merged (summed,
//! or as [`persistence_merge`] and [`replication_field`] say: the data and
//! its saving are the nodes'). Field names are Redis's where the meaning
//! carries over; mithril's own fields follow Redis's in their section.
//!
//! Never: block, or touch a worker's live counters (only snapshots).

use super::{built, Outcome};
use crate::command::Args;
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::{self, rss_bytes, Totals};
use bytes::Bytes;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// What the section fillers read.
struct Ctx<'a> {
    shared: &'a Shared,
    /// The asking session's server pool (`Shared::pools`' index).
    pool: usize,
    totals: Totals,
    /// The `keyspace` section's lines, already summed.
    keyspace: &'a str,
    /// The `persistence` section's lines, merged over the masters.
    persistence: &'a str,
    /// The masters' fields about their data, added to `stats` and
    /// `memory` (see [`DATA_FIELDS`]).
    data_stats: &'a str,
    data_memory: &'a str,
    /// The masters' replication fields (see [`replication_field`]).
    replication: &'a str,
    /// The masters' `blocked_clients` summed, when they were asked.
    node_blocked: Option<u64>,
}

impl Ctx<'_> {
    /// Whether the asking session's pool is a ring of standalone servers
    /// (else a Redis Cluster).
    fn ring(&self) -> bool {
        self.shared.pools.get(self.pool).is_some_and(|p| p.ring)
    }

    /// The port the asking session's pool listens on: its first
    /// listener's (the top-level `port` for `default`).
    fn port(&self) -> u16 {
        self.shared
            .pools
            .get(self.pool)
            .and_then(|p| p.listen.first())
            .and_then(|l| l.rsplit_once(':')?.1.parse().ok())
            .unwrap_or(self.shared.config.port)
    }
}

struct Section {
    /// Lower-case name, as INFO takes it.
    name: &'static str,
    title: &'static str,
    /// Part of a bare INFO (and of `default`).
    default: bool,
    fill: fn(&mut String, &Ctx),
}

/// In Redis's order of sections (mithril's own last).
const SECTIONS: &[Section] = &[
    Section {
        name: "server",
        title: "Server",
        default: true,
        fill: server,
    },
    Section {
        name: "clients",
        title: "Clients",
        default: true,
        fill: clients,
    },
    Section {
        name: "memory",
        title: "Memory",
        default: true,
        fill: memory,
    },
    Section {
        name: "persistence",
        title: "Persistence",
        default: true,
        fill: |t, c| t.push_str(c.persistence),
    },
    Section {
        name: "stats",
        title: "Stats",
        default: true,
        fill: stats,
    },
    Section {
        name: "replication",
        title: "Replication",
        default: true,
        fill: |t, c| {
            t.push_str("role:master\r\n");
            t.push_str(c.replication);
        },
    },
    Section {
        name: "cpu",
        title: "CPU",
        default: true,
        fill: cpu,
    },
    Section {
        name: "commandstats",
        title: "Commandstats",
        default: false,
        fill: commandstats,
    },
    Section {
        name: "errorstats",
        title: "Errorstats",
        default: true,
        fill: errorstats,
    },
    Section {
        name: "latencystats",
        title: "Latencystats",
        default: false,
        fill: latencystats,
    },
    Section {
        name: "cluster",
        title: "Cluster",
        default: true,
        fill: cluster,
    },
    Section {
        name: "keyspace",
        title: "Keyspace",
        default: true,
        fill: |t, c| t.push_str(c.keyspace),
    },
    Section {
        name: "backends",
        title: "Backends",
        default: false,
        fill: backends,
    },
    Section {
        name: "pipes",
        title: "Pipes",
        default: false,
        fill: pipes,
    },
    Section {
        name: "replycache",
        title: "Replycache",
        default: false,
        fill: replycache,
    },
];

/// INFO answered without the workers' help (no fresh snapshots, no
/// keyspace): the fallback when the worker core does not intercept it.
pub fn info(shared: &Shared, s: &Session, args: &Args) -> Outcome {
    let asked: Vec<&[u8]> = (1..args.len()).filter_map(|i| args.get(i)).collect();
    let text = info_text(shared, s.pool(), &asked, &[]);
    built(
        |e| {
            e.verbatim(b"txt", text.as_bytes());
        },
        s,
    )
}

fn is_wanted(sec: &Section, asked: &[&[u8]]) -> bool {
    if asked.is_empty() {
        return sec.default;
    }
    asked.iter().any(|a| {
        a.eq_ignore_ascii_case(sec.name.as_bytes())
            || a.eq_ignore_ascii_case(b"all")
            || a.eq_ignore_ascii_case(b"everything")
            || (sec.default && a.eq_ignore_ascii_case(b"default"))
    })
}

/// Whether an INFO with these arguments shows the section `name`.
pub fn wants(asked: &[&[u8]], name: &str) -> bool {
    SECTIONS
        .iter()
        .find(|s| s.name == name)
        .is_some_and(|s| is_wanted(s, asked))
}

/// The INFO text for a session of server pool `pool` and the requested
/// section names (none: the defaults), the masters' parts made of the
/// pool's masters' replies to `INFO keyspace persistence stats memory
/// replication clients` (`masters`; empty: none).
pub fn info_text(shared: &Shared, pool: usize, asked: &[&[u8]], masters: &[Bytes]) -> String {
    let snaps = shared.stats.load_all();
    let keyspace = keyspace_sum(masters);
    let persistence = persistence_merge(masters);
    let data_stats = merged_section(masters, "stats", data_field);
    let data_memory = merged_section(masters, "memory", data_field);
    let replication = merged_section(masters, "replication", replication_field);
    let node_blocked = merged_section(masters, "clients", |name, values| {
        (name == "blocked_clients").then(|| {
            let n: u64 = values.iter().filter_map(|v| v.parse::<u64>().ok()).sum();
            n.to_string()
        })
    });
    let node_blocked = node_blocked
        .strip_prefix("blocked_clients:")
        .and_then(|v| v.trim().parse().ok());
    let cx = Ctx {
        shared,
        pool,
        totals: stats::totals(&snaps),
        keyspace: &keyspace,
        persistence: &persistence,
        data_stats: &data_stats,
        data_memory: &data_memory,
        replication: &replication,
        node_blocked,
    };
    let mut text = String::with_capacity(2048);
    let mut first = true;
    for sec in SECTIONS.iter().filter(|sec| is_wanted(sec, asked)) {
        if !first {
            text.push_str("\r\n");
        }
        first = false;
        let _ = write!(text, "# {}\r\n", sec.title);
        (sec.fill)(&mut text, &cx);
    }
    text
}

/// The text inside one node's INFO reply frame (bulk or verbatim), or
/// `None` for an error or anything else.
fn reply_text(frame: &[u8]) -> Option<String> {
    let (v, _) = crate::resp::value::parse(frame).ok()??;
    v.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// How the masters' values of one persistence field become the cluster's.
fn persistence_field(name: &str, values: &[&str]) -> String {
    let ints = || values.iter().filter_map(|v| v.parse::<i64>().ok());
    let first = values.first().copied().unwrap_or_default().to_string();
    // Something in progress, or on, anywhere: in progress, on.
    let any = name == "loading"
        || name == "async_loading"
        || name == "aof_enabled"
        || name.ends_with("_in_progress")
        || name.ends_with("_scheduled");
    // Work to do, or done, everywhere: added up.
    let sum = matches!(
        name,
        "rdb_changes_since_last_save" | "rdb_saves" | "aof_rewrites" | "current_cow_size"
    ) || name.ends_with("_keys_processed")
        || name.ends_with("_keys_total");
    if any {
        ints().max().map_or(first, |n| n.to_string())
    } else if sum {
        ints().sum::<i64>().to_string()
    } else if name.ends_with("_status") {
        // One failure is the cluster's failure.
        match values.iter().find(|v| **v != "ok") {
            Some(bad) => bad.to_string(),
            None => first,
        }
    } else if name == "rdb_last_save_time" {
        // The cluster is saved as of its oldest save.
        ints().min().map_or(first, |n| n.to_string())
    } else {
        first
    }
}

/// The persistence section's lines from the masters' INFO replies, field
/// by field in the first master's order: a flag or an operation in
/// progress on any master is shown on (`loading`, `*_in_progress`, ...),
/// the changes and counts of work are summed, a status is the first that
/// is not `ok`, the last save time is the oldest, and the rest is the
/// first master's value. Masters that answered an error are left out.
pub fn persistence_merge(replies: &[Bytes]) -> String {
    merged_section(replies, "persistence", |name, values| {
        Some(persistence_field(name, values))
    })
}

/// The fields of `stats` and `memory` that describe the data, which only
/// the masters know, summed over them (the others of those sections are
/// the proxy's own): what a client of one server reads there about its
/// keys (expiries, evictions, hits, lazy frees).
const DATA_FIELDS: &[&str] = &[
    "expired_keys",
    "expired_time_cap_reached_count",
    "expire_cycle_cpu_milliseconds",
    "evicted_keys",
    "total_eviction_exceeded_time",
    "current_eviction_exceeded_time",
    "keyspace_hits",
    "keyspace_misses",
    "total_forks",
    "lazyfree_pending_objects",
    "lazyfreed_objects",
    "migrate_cached_sockets",
    "used_memory_lua",
];

/// A data field's value over the masters ([`DATA_FIELDS`] summed, the
/// stale percentage and the last fork's time the largest); None for the
/// proxy's own fields.
fn data_field(name: &str, values: &[&str]) -> Option<String> {
    if DATA_FIELDS.contains(&name) {
        let sum: i64 = values.iter().filter_map(|v| v.parse::<i64>().ok()).sum();
        return Some(sum.to_string());
    }
    let largest = |values: &[&str]| {
        values
            .iter()
            .filter_map(|v| v.parse::<f64>().ok())
            .fold(0.0f64, f64::max)
    };
    match name {
        "expired_stale_perc" => Some(format!("{:.2}", largest(values))),
        "latest_fork_usec" => Some(format!("{}", largest(values) as i64)),
        // What holds the data (the suite runs its jemalloc tests by it).
        "mem_allocator" => values.first().map(|v| v.to_string()),
        _ => None,
    }
}

/// The replication fields that mean something over masters, after the
/// proxy's `role:master`: replicas summed, offsets and backlog sizes the
/// largest, a failover state other than `no-failover` shown. Replication
/// ids differ per master: none is shown, nor the per-replica lines.
fn replication_field(name: &str, values: &[&str]) -> Option<String> {
    let ints = || values.iter().filter_map(|v| v.parse::<i64>().ok());
    match name {
        "connected_slaves" => Some(ints().sum::<i64>().to_string()),
        "master_repl_offset"
        | "repl_backlog_active"
        | "repl_backlog_size"
        | "repl_backlog_histlen" => Some(ints().max().unwrap_or(0).to_string()),
        "master_failover_state" => Some(
            values
                .iter()
                .find(|v| **v != "no-failover")
                .copied()
                .unwrap_or("no-failover")
                .to_string(),
        ),
        _ => None,
    }
}

/// The lines of section `title` (lower case) gathered from the masters'
/// INFO replies, field by field in the order first seen, each value made
/// by `pick` from every master's (a field it answers None for is left
/// out). Masters that answered an error are left out.
fn merged_section(
    replies: &[Bytes],
    title: &str,
    pick: impl Fn(&str, &[&str]) -> Option<String>,
) -> String {
    let mut fields: Vec<(String, Vec<String>)> = Vec::new();
    for r in replies {
        let Some(text) = reply_text(r) else { continue };
        let mut inside = false;
        for line in text.lines() {
            if let Some(t) = line.strip_prefix("# ") {
                inside = t.eq_ignore_ascii_case(title);
                continue;
            }
            let Some((name, value)) = line.split_once(':').filter(|_| inside) else {
                continue;
            };
            match fields.iter_mut().find(|(n, _)| n == name) {
                Some((_, values)) => values.push(value.to_string()),
                None => fields.push((name.to_string(), vec![value.to_string()])),
            }
        }
    }
    let mut out = String::new();
    for (name, values) in &fields {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        if let Some(v) = pick(name, &values) {
            let _ = write!(out, "{name}:{v}\r\n");
        }
    }
    out
}

/// The keyspace section's lines from the masters' `INFO keyspace` replies:
/// keys, expires and any other integer field summed per database, avg_ttl
/// weighted by each master's expires. A master that answered an error is
/// left out.
pub fn keyspace_sum(replies: &[Bytes]) -> String {
    // Per database: its name, its fields in first-seen order with their
    // sums, and avg_ttl's weighted sum and weight.
    type Db = (String, Vec<(String, i64)>, f64, i64);
    let mut dbs: Vec<Db> = Vec::new();
    for r in replies {
        let Some(text) = reply_text(r) else { continue };
        for line in text.lines() {
            let Some((db, fields)) = line.split_once(':') else {
                continue;
            };
            if !db.starts_with("db") {
                continue;
            }
            let idx = match dbs.iter().position(|d| d.0 == db) {
                Some(i) => i,
                None => {
                    dbs.push((db.to_string(), Vec::new(), 0.0, 0));
                    dbs.len() - 1
                }
            };
            let entry = &mut dbs[idx];
            let pairs: Vec<(&str, i64)> = fields
                .split(',')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k, v.trim().parse::<i64>().ok()?))
                })
                .collect();
            let expires = pairs.iter().find(|p| p.0 == "expires").map_or(0, |p| p.1);
            for (k, v) in pairs {
                if k == "avg_ttl" {
                    entry.2 += v as f64 * expires as f64;
                    entry.3 += expires;
                }
                match entry.1.iter_mut().find(|f| f.0 == k) {
                    Some(f) => f.1 = f.1.saturating_add(v),
                    None => entry.1.push((k.to_string(), v)),
                }
            }
        }
    }
    dbs.sort_by_key(|d| d.0[2..].parse::<u32>().unwrap_or(u32::MAX));
    let mut out = String::new();
    for (db, fields, ttl_sum, ttl_weight) in dbs {
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| {
                if k == "avg_ttl" {
                    let avg = if ttl_weight > 0 {
                        (ttl_sum / ttl_weight as f64).round() as i64
                    } else {
                        0
                    };
                    format!("{k}={avg}")
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        let _ = write!(out, "{db}:{}\r\n", body.join(","));
    }
    out
}

/// `1.30M`-style sizes, as Redis's `*_human` fields.
fn human(bytes: u64) -> String {
    let b = bytes as f64;
    let units = [
        (1u64 << 40, 'T'),
        (1 << 30, 'G'),
        (1 << 20, 'M'),
        (1 << 10, 'K'),
    ];
    for (size, unit) in units {
        if bytes >= size {
            return format!("{:.2}{unit}", b / size as f64);
        }
    }
    format!("{bytes}B")
}

fn server(t: &mut String, cx: &Ctx) {
    let shared = cx.shared;
    let cfg = &shared.config;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let uptime = shared.started.elapsed().as_secs();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let conf = cfg
        .config_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let _ = write!(
        t,
        "redis_version:{}\r\n\
         redis_git_sha1:00000000\r\n\
         redis_git_dirty:0\r\n\
         redis_mode:{}\r\n\
         os:{}\r\n\
         arch_bits:{}\r\n\
         multiplexing_api:epoll\r\n\
         process_id:{}\r\n\
         process_supervised:no\r\n\
         run_id:{}\r\n\
         tcp_port:{}\r\n\
         server_time_usec:{}\r\n\
         uptime_in_seconds:{uptime}\r\n\
         uptime_in_days:{}\r\n\
         executable:{exe}\r\n\
         config_file:{conf}\r\n\
         mithril_version:{}\r\n\
         threads:{}\r\n",
        super::reported_version(shared),
        // A ring of standalone servers is one standalone server to its
        // clients (HELLO says so too).
        if cx.ring() { "standalone" } else { "cluster" },
        os_name(),
        usize::BITS,
        std::process::id(),
        shared.admin.run_id,
        cx.port(),
        now.as_micros(),
        uptime / 86_400,
        super::MITHRIL_VERSION,
        cfg.threads,
    );
}

fn clients(t: &mut String, cx: &Ctx) {
    let c = &cx.totals.clients;
    let backends: u64 = cx.totals.nodes.iter().map(|n| n.connections).sum();
    let _ = write!(
        t,
        "connected_clients:{}\r\n\
         cluster_connections:0\r\n\
         maxclients:{}\r\n\
         client_recent_max_input_buffer:{}\r\n\
         client_recent_max_output_buffer:{}\r\n\
         blocked_clients:{}\r\n\
         tracking_clients:{}\r\n\
         watching_clients:{}\r\n\
         pubsub_clients:{}\r\n\
         clients_in_timeout_table:0\r\n\
         backend_connections:{backends}\r\n",
        cx.shared.clients.load(Ordering::Relaxed),
        cx.shared.live.maxclients.load(Ordering::Relaxed),
        c.qbuf_max,
        c.out_max,
        // What is blocked where it blocks: at the nodes (a lease's command
        // counts once the node holds it, as the suite's waits expect).
        cx.node_blocked.unwrap_or(c.blocked),
        c.tracking,
        c.watching,
        c.pubsub,
    );
}

fn memory(t: &mut String, cx: &Ctx) {
    let c = &cx.totals.clients;
    let rss = rss_bytes();
    // What the maxmemory check compares (every buffer the workers count
    // and each connection's fixed cost, summed each tick and as sessions
    // open and close), and the budget itself. Nothing in it is left out
    // of the comparison: mem_not_counted_for_evict is 0 (a node leaves
    // its replicas' output and AOF buffers out; mithril's replication
    // feeds and monitors are sessions whose output counts as any
    // client's).
    let used = cx.shared.overload.used_memory.load(Ordering::Relaxed);
    let maxmemory: u64 = cx.shared.live.maxmemory.load(Ordering::Relaxed);
    let _ = write!(
        t,
        "used_memory:{used}\r\n\
         used_memory_human:{}\r\n\
         used_memory_rss:{rss}\r\n\
         used_memory_rss_human:{}\r\n\
         maxmemory:{maxmemory}\r\n\
         maxmemory_human:{}\r\n\
         maxmemory_policy:noeviction\r\n\
         mem_not_counted_for_evict:0\r\n\
         mem_clients_normal:{used}\r\n\
         client_query_buffers:{}\r\n\
         client_output_buffers:{}\r\n\
         replies_outstanding:{}\r\n",
        human(used),
        human(rss),
        human(maxmemory),
        c.qbuf,
        c.out,
        c.outstanding,
    );
    // The script registry (crate::script): what it holds of its budget.
    // Redis's counts are the registry's too: the scripts an EVALSHA
    // through mithril runs, the libraries (and their functions) it loads.
    let r = cx.shared.scripts.figures();
    let _ = write!(
        t,
        "number_of_cached_scripts:{}\r\n\
         number_of_functions:{}\r\n\
         number_of_libraries:{}\r\n\
         script_registry_size:{}\r\n\
         script_registry_scripts:{}\r\n\
         script_registry_script_bytes:{}\r\n\
         script_registry_libraries:{}\r\n\
         script_registry_library_bytes:{}\r\n",
        r.scripts,
        r.functions,
        r.libraries,
        r.budget,
        r.scripts,
        r.script_bytes,
        r.libraries,
        r.library_bytes,
    );
    t.push_str(cx.data_memory);
}

fn stats(t: &mut String, cx: &Ctx) {
    let tt = &cx.totals;
    let k = &tt.counters;
    let every = tt.all_pools();
    let failed: u64 = tt.cmds.iter().map(|c| c.failed).sum();
    let reconnects: u64 = tt.nodes.iter().map(|n| n.reconnects).sum();
    // Clients closed by a limit (overload control keeps these counters).
    let ov = &cx.shared.overload;
    let qbuf_evicted = ov.query_limit_disconnections.load(Ordering::Relaxed);
    let out_evicted = ov.output_limit_disconnections.load(Ordering::Relaxed);
    let idle_evicted = ov.idle_disconnections.load(Ordering::Relaxed);
    let _ = write!(
        t,
        "total_connections_received:{}\r\n\
         total_commands_processed:{}\r\n\
         instantaneous_ops_per_sec:{}\r\n\
         total_net_input_bytes:{}\r\n\
         total_net_output_bytes:{}\r\n\
         instantaneous_input_kbps:{:.2}\r\n\
         instantaneous_output_kbps:{:.2}\r\n\
         rejected_connections:{}\r\n\
         evicted_clients:{}\r\n\
         total_error_replies:{}\r\n\
         total_rejected_commands:{}\r\n\
         evicted_clients_query_buffer:{}\r\n\
         evicted_clients_output_buffer:{}\r\n\
         evicted_clients_idle:{}\r\n\
         redirects_moved:{}\r\n\
         redirects_ask:{}\r\n\
         tryagain_retries:{}\r\n\
         clusterdown_retries:{}\r\n\
         key_by_key_splits:{}\r\n\
         fanout_parts:{}\r\n\
         backend_errors:{}\r\n\
         backend_timeouts:{}\r\n\
         backend_reconnects:{reconnects}\r\n\
         forward_errors:{}\r\n\
         slowlog_entries_written:{}\r\n\
         slowlog_entries_skipped:{}\r\n\
         tracking_total_keys:{}\r\n\
         tracking_total_items:{}\r\n\
         tracking_total_prefixes:{}\r\n",
        cx.shared.total_connections.load(Ordering::Relaxed),
        tt.commands,
        tt.ops_per_sec.round() as u64,
        tt.net_in,
        tt.net_out,
        tt.in_kbps,
        tt.out_kbps,
        cx.shared.rejected_connections.load(Ordering::Relaxed),
        out_evicted + idle_evicted + qbuf_evicted,
        failed + k.rejected,
        k.rejected,
        qbuf_evicted,
        out_evicted,
        idle_evicted,
        k.moved,
        k.ask,
        k.tryagain,
        k.clusterdown,
        k.splits,
        every.fragments,
        k.backend_errors,
        k.backend_timeouts,
        every.forward_errors,
        k.slow_entries,
        k.slow_skipped,
        // Per worker, summed (a key read on two workers counts twice).
        tt.clients.tracking_keys,
        tt.clients.tracking_items,
        tt.clients.tracking_prefixes,
    );
    let denied = &cx.shared.admin.acl.denied;
    let _ = write!(
        t,
        "acl_access_denied_auth:{}\r\nacl_access_denied_cmd:{}\r\n\
         acl_access_denied_key:{}\r\nacl_access_denied_channel:{}\r\n",
        denied.auth.load(Ordering::Relaxed),
        denied.cmd.load(Ordering::Relaxed),
        denied.key.load(Ordering::Relaxed),
        denied.channel.load(Ordering::Relaxed),
    );
    // Scripts and libraries loaded again on a node that lacked them.
    let r = cx.shared.scripts.figures();
    let _ = write!(
        t,
        "script_reloads:{}\r\nfunction_reloads:{}\r\nscript_registry_evictions:{}\r\n",
        r.script_reloads, r.function_reloads, r.evictions,
    );
    t.push_str(cx.data_stats);
}

fn cpu(t: &mut String, _cx: &Ctx) {
    let (me, children) = (rusage(libc::RUSAGE_SELF), rusage(libc::RUSAGE_CHILDREN));
    let tv = |v: libc::timeval| format!("{}.{:06}", v.tv_sec, v.tv_usec);
    let _ = write!(
        t,
        "used_cpu_sys:{}\r\nused_cpu_user:{}\r\nused_cpu_sys_children:{}\r\nused_cpu_user_children:{}\r\n",
        tv(me.ru_stime),
        tv(me.ru_utime),
        tv(children.ru_stime),
        tv(children.ru_utime),
    );
}

fn commandstats(t: &mut String, cx: &Ctx) {
    for c in &cx.totals.cmds {
        let Some(cmd) = c.command() else { continue };
        let per_call = if c.calls > 0 {
            c.usec as f64 / c.calls as f64
        } else {
            0.0
        };
        let _ = write!(
            t,
            "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            cmd.name, c.calls, c.usec, c.rejected, c.failed
        );
    }
}

/// Error replies sent to clients, by code (`stats::error_code`): the
/// nodes' errors relayed and the proxy's own, as Redis counts its replies.
/// Errors inside an EXEC reply are not counted (as in
/// `total_error_replies`).
fn errorstats(t: &mut String, cx: &Ctx) {
    for (code, n) in &cx.totals.errors {
        let _ = write!(
            t,
            "errorstat_{}:count={n}\r\n",
            String::from_utf8_lossy(code)
        );
    }
}

/// The percentiles latencystats reports, as Redis's default
/// `latency-tracking-info-percentiles`.
const PERCENTILES: [(&str, f64); 3] = [("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)];

fn latencystats(t: &mut String, cx: &Ctx) {
    for c in &cx.totals.cmds {
        let (Some(cmd), Some(h)) = (c.command(), c.hist.as_ref()) else {
            continue;
        };
        if h.count() == 0 {
            continue;
        }
        let _ = write!(t, "latency_percentiles_usec_{}:", cmd.name);
        for (i, (label, p)) in PERCENTILES.iter().enumerate() {
            if i > 0 {
                t.push(',');
            }
            let _ = write!(t, "{label}={:.3}", h.percentile(*p) as f64);
        }
        t.push_str("\r\n");
    }
}

/// The asking session's pool: a cluster's part of the map, or
/// `cluster_enabled:0` for a ring (as a standalone server says), then the
/// refresher's figures, which are the whole map's.
fn cluster(t: &mut String, cx: &Ctx) {
    let topo = cx.shared.topology.load();
    if cx.ring() {
        let _ = write!(t, "cluster_enabled:0\r\ntopology_epoch:{}\r\n", topo.epoch);
    } else {
        let (masters, replicas, served) = stats::pools::map_counts(&topo, cx.pool);
        let _ = write!(
            t,
            "cluster_enabled:1\r\n\
             topology_epoch:{}\r\n\
             cluster_masters:{masters}\r\n\
             cluster_replicas:{replicas}\r\n\
             cluster_slots_served:{served}\r\n",
            topo.epoch,
        );
    }
    let last = cx.shared.topology.last_ok_ms();
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let _ = write!(
        t,
        "topology_refreshes:{}\r\n\
         topology_last_refresh_ms:{last}\r\n\
         topology_refresh_age_ms:{}\r\n",
        cx.shared.topology.refresh_count(),
        if last == 0 {
            0
        } else {
            now_ms.saturating_sub(last)
        },
    );
}

/// `backend-sharding`: the mode, `auto`'s state and last decision, and
/// per worker its sample and its sessions on the shared pipes.
fn pipes(t: &mut String, cx: &Ctx) {
    let p = &cx.shared.pipes;
    let (state, reason) = p
        .status
        .lock()
        .map(|s| (s.0, s.1.clone()))
        .unwrap_or(("local", String::new()));
    let mode = cx.shared.config.backend_sharding;
    let state = match mode {
        crate::config::Sharding::No => "local",
        crate::config::Sharding::Yes => "shared",
        crate::config::Sharding::Auto => state,
    };
    let (mut frames, mut writes, mut sessions, mut served, mut held) = (0, 0, 0, 0, 0);
    for w in &cx.shared.workers {
        held += w.pipe.held.load(Ordering::Relaxed);
        served += w.pipe.served.load(Ordering::Relaxed);
        frames += w.pipe.frames.load(Ordering::Relaxed);
        writes += w.pipe.writes.load(Ordering::Relaxed);
        sessions += w.pipe.sessions.load(Ordering::Relaxed);
    }
    let _ = write!(
        t,
        "backend_sharding:{mode}\r\npipes_state:{state}\r\npipes_last_decision:{}\r\n\
         pipes_sessions:{sessions}\r\npipes_remote_requests:{served}\r\npipes_held_moves:{held}\r\nbackend_frames:{frames}\r\nbackend_writes:{writes}\r\n",
        if mode == crate::config::Sharding::Auto { reason.as_str() } else { "fixed by backend-sharding" },
    );
    for (i, w) in cx.shared.workers.iter().enumerate() {
        let s = w.pipe.sample();
        let _ = write!(
            t,
            "pipes_worker{i}:busy={:.2},frames_per_write={:.1},sessions_on_pipes={}\r\n",
            s.busy,
            s.frames_per_write,
            w.pipe.sessions.load(Ordering::Relaxed)
        );
    }
}

/// The reply cache (`reply-cache`), summed over workers.
fn replycache(t: &mut String, cx: &Ctx) {
    let c = &cx.totals.cache;
    let on = cx
        .shared
        .live
        .reply_cache
        .load(std::sync::atomic::Ordering::Relaxed);
    let ratio = if c.lookups > 0 {
        c.hits as f64 / c.lookups as f64
    } else {
        0.0
    };
    let _ = write!(
        t,
        "reply_cache:{}\r\n\
         reply_cache_lookups:{}\r\nreply_cache_hits:{}\r\nreply_cache_misses:{}\r\n\
         reply_cache_hit_ratio:{ratio:.4}\r\n\
         reply_cache_fills_admitted:{}\r\nreply_cache_fills_refused:{}\r\nreply_cache_fills_stored:{}\r\n\
         reply_cache_invalidations:{}\r\nreply_cache_write_invalidations:{}\r\n\
         reply_cache_poisoned_fills:{}\r\nreply_cache_flushes:{}\r\nreply_cache_flips:{}\r\n\
         reply_cache_bytes_current:{}\r\nreply_cache_bytes_old:{}\r\n\
         reply_cache_entries_current:{}\r\nreply_cache_entries_old:{}\r\n",
        if on { "yes" } else { "no" },
        c.lookups,
        c.hits,
        c.misses,
        c.fills_admitted,
        c.fills_refused,
        c.fills_stored,
        c.invalidations,
        c.write_invalidations,
        c.poisoned,
        c.flushes,
        c.flips,
        c.bytes_current,
        c.bytes_old,
        c.entries_current,
        c.entries_old,
    );
}

/// One line per server pool (`pool0`, ...: its name, kind, listeners,
/// servers live and in all, twemproxy's `server_ejects` and its clients),
/// then one per node the workers counted (`backend0`, ...), each with its
/// pool.
fn backends(t: &mut String, cx: &Ctx) {
    let topo = cx.shared.topology.load();
    let pools = stats::pools::pools(cx.shared, &topo, &cx.totals);
    for p in &pools {
        let _ = write!(
            t,
            "pool{}:name={},kind={},listen={},servers={},servers_live={},server_ejects={},clients={}\r\n",
            p.index,
            p.name,
            p.kind(),
            p.listen.join(" "),
            p.servers.len(),
            p.live(),
            p.server_ejects,
            p.counters.client_connections,
        );
    }
    for (i, n) in cx.totals.nodes.iter().enumerate() {
        let role = pools
            .get(n.pool)
            .and_then(|p| p.servers.iter().find(|s| s.addr == n.addr))
            .map_or("unknown", |s| s.role_name());
        let tt = &n.totals;
        let avg = if tt.rtt_count > 0 {
            tt.rtt_sum_us as f64 / tt.rtt_count as f64
        } else {
            0.0
        };
        let _ = write!(
            t,
            "backend{i}:addr={},role={role},connections={},in_flight={},requests={},responses={},\
             errors={},timeouts={},reconnects={},down={},avg_latency_usec={avg:.2},pool={}\r\n",
            n.addr,
            n.connections,
            n.in_flight,
            tt.requests,
            tt.responses,
            tt.errors,
            tt.timeouts,
            n.reconnects,
            u8::from(n.down),
            pools.get(n.pool).map_or("", |p| p.name),
        );
    }
}

fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: getrusage only writes the struct it is given; an all-zero
    // rusage is a valid value to start from (and to keep on failure).
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    }
}

/// `sysname release machine`, as Redis prints `os:`.
fn os_name() -> String {
    // SAFETY: uname fills the struct; its fields are NUL-terminated arrays
    // (zeroed first, so they stay terminated even if uname fails).
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return String::new();
        }
        let field = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!(
            "{} {} {}",
            field(&u.sysname),
            field(&u.release),
            field(&u.machine)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspaces_add_up() {
        let bulk = |t: &str| Bytes::from(format!("${}\r\n{t}\r\n", t.len()));
        let a = bulk(
            "# Keyspace\r\ndb0:keys=10,expires=2,avg_ttl=1000\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n",
        );
        // RESP3 verbatim, and a master without keys, and an error.
        let text = "txt:# Keyspace\r\ndb0:keys=5,expires=6,avg_ttl=3000\r\n";
        let b = Bytes::from(format!("={}\r\n{text}\r\n", text.len()));
        let c = bulk("# Keyspace\r\n");
        let e = Bytes::from_static(b"-ERR nope\r\n");
        let got = keyspace_sum(&[a, b, c, e]);
        assert_eq!(
            got,
            "db0:keys=15,expires=8,avg_ttl=2500\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n"
        );
        assert_eq!(keyspace_sum(&[]), "");
    }

    #[test]
    fn section_choice_follows_redis() {
        assert!(wants(&[], "keyspace"));
        assert!(!wants(&[], "commandstats"));
        assert!(wants(&[b"ALL"], "commandstats"));
        assert!(wants(&[b"everything"], "backends"));
        assert!(!wants(&[b"default"], "latencystats"));
        assert!(wants(&[], "errorstats"));
        assert!(wants(&[b"default"], "memory"));
        assert!(!wants(&[b"server"], "keyspace"));
        assert_eq!(human(1363148), "1.30M");
        assert_eq!(human(512), "512B");
        assert!(rss_bytes() > 0);
    }
}

#[cfg(test)]
mod persistence_tests {
    use super::*;

    fn reply(text: &str) -> Bytes {
        Bytes::from(format!("${}\r\n{text}\r\n", text.len()))
    }

    #[test]
    fn persistence_merges_the_masters_as_one_server() {
        let a = reply("# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:3\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:200\r\nrdb_last_bgsave_status:ok\r\naof_enabled:0\r\n\r\n# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\n");
        let b = reply("# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:4\r\nrdb_bgsave_in_progress:1\r\nrdb_last_save_time:100\r\nrdb_last_bgsave_status:err\r\naof_enabled:0\r\n");
        let e = Bytes::from_static(b"-ERR down\r\n");
        assert_eq!(
            persistence_merge(&[a, b, e]),
            "loading:0\r\nrdb_changes_since_last_save:7\r\nrdb_bgsave_in_progress:1\r\nrdb_last_save_time:100\r\nrdb_last_bgsave_status:err\r\naof_enabled:0\r\n"
        );
        assert_eq!(persistence_merge(&[]), "");
    }

    #[test]
    fn the_data_fields_of_stats_and_memory_are_the_masters_summed() {
        let a = reply("# Stats\r\ntotal_commands_processed:9\r\nexpired_keys:2\r\nexpired_stale_perc:0.50\r\nkeyspace_hits:5\r\n\r\n# Memory\r\nused_memory:1\r\nlazyfree_pending_objects:1\r\n");
        let b = reply("# Stats\r\ntotal_commands_processed:7\r\nexpired_keys:3\r\nexpired_stale_perc:1.25\r\nkeyspace_hits:1\r\n");
        assert_eq!(
            merged_section(&[a.clone(), b.clone()], "stats", data_field),
            "expired_keys:5\r\nexpired_stale_perc:1.25\r\nkeyspace_hits:6\r\n"
        );
        assert_eq!(
            merged_section(&[a, b], "memory", data_field),
            "lazyfree_pending_objects:1\r\n"
        );
    }

    #[test]
    fn replication_shows_what_means_something_over_masters() {
        let a = reply("# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=x,port=1\r\nmaster_failover_state:no-failover\r\nmaster_replid:aaa\r\nmaster_repl_offset:70\r\n");
        let b = reply("# Replication\r\nrole:master\r\nconnected_slaves:2\r\nmaster_failover_state:waiting-for-sync\r\nmaster_replid:bbb\r\nmaster_repl_offset:90\r\n");
        assert_eq!(
            merged_section(&[a, b], "replication", replication_field),
            "connected_slaves:3\r\nmaster_failover_state:waiting-for-sync\r\nmaster_repl_offset:90\r\n"
        );
    }
}
