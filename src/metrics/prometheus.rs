//! The Prometheus text exposition format (version 0.0.4) of the proxy's
//! counters, gauges and per-command latency histograms.
//!
//! Every family has its `# HELP` and `# TYPE` lines; names carry the
//! `mithril_` prefix; counters end in `_total`; durations are in seconds.
//! Histogram buckets sit at `(2^k - 1)` µs for k = 4..=25 (15 µs to 33.5 s):
//! those bounds fall exactly on the edges of the workers' log-linear
//! buckets, so every count is exact, not interpolated.
//!
//! Labels: everything that belongs to one server pool carries
//! `pool="NAME"` (the pool's name; `default` for the top-level
//! `cluster-nodes`): the per-pool counters and gauges (`client_errors`,
//! `client_eof`, `fanout_parts`, `forward_errors`, `pool_clients`,
//! `pool_servers`, `pool_servers_live`, `server_ejections` for ring
//! pools, `cluster_masters`, `cluster_replicas`, `cluster_slots_served`)
//! and every `backend_*` family, whose samples are labelled
//! `pool`, `addr` and `role`. A node two pools name is a series in each.
//! Summing a family over `pool` gives the process's figure. The rest
//! (clients, commands, memory, redirects, retries, the reply cache) is the
//! whole process's and has no pool label.
//!
//! Never: block, or allocate more than the text it returns.

use crate::shared::Shared;
use crate::stats::pools::PoolView;
use crate::stats::{self, Totals};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// Powers of two bounding the histogram buckets: `le` = (2^k - 1) µs.
const LE_POWERS: std::ops::RangeInclusive<u32> = 4..=25;

struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = write!(
            self.text,
            "# HELP mithril_{name} {help}\n# TYPE mithril_{name} {kind}\n"
        );
    }

    fn value(&mut self, name: &str, labels: &str, v: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.text, "mithril_{name} {v}");
        } else {
            let _ = writeln!(self.text, "mithril_{name}{{{labels}}} {v}");
        }
    }

    fn single(&mut self, name: &str, kind: &str, help: &str, v: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.value(name, "", v);
    }
}

/// Seconds from microseconds, as Prometheus wants durations.
fn secs(us: u64) -> String {
    format!("{}", us as f64 / 1e6)
}

/// The whole exposition.
pub fn render(shared: &Shared) -> String {
    let snaps = shared.stats.load_all();
    let t = stats::totals(&snaps);
    let topo = shared.topology.load();
    let pools = stats::pools::pools(shared, &topo, &t);
    let mut o = Out {
        text: String::with_capacity(8192 + t.cmds.len() * 2048 + t.nodes.len() * 2048),
    };
    process(&mut o, shared, &t);
    per_pool(&mut o, &topo, &pools);
    reply_cache(&mut o, &t);
    commands(&mut o, &t);
    backends(&mut o, &pools);
    o.text
}

/// `pool="NAME"`.
fn pool_label(p: &PoolView) -> String {
    format!("pool=\"{}\"", p.name)
}

fn process(o: &mut Out, shared: &Shared, t: &Totals) {
    let k = &t.counters;
    o.single(
        "uptime_seconds",
        "gauge",
        "Seconds since the proxy started.",
        shared.started.elapsed().as_secs(),
    );
    o.single("threads", "gauge", "Worker threads.", shared.config.threads);
    o.single(
        "connected_clients",
        "gauge",
        "Client connections open.",
        shared.clients.load(Ordering::Relaxed),
    );
    o.single(
        "max_clients",
        "gauge",
        "The maxclients setting.",
        shared.live.maxclients.load(Ordering::Relaxed),
    );
    o.single(
        "blocked_clients",
        "gauge",
        "Clients waiting on a blocking command.",
        t.clients.blocked,
    );
    o.single(
        "pubsub_clients",
        "gauge",
        "Clients with subscriptions.",
        t.clients.pubsub,
    );
    o.single(
        "connections_received_total",
        "counter",
        "Client connections accepted.",
        shared.total_connections.load(Ordering::Relaxed),
    );
    o.single(
        "rejected_connections_total",
        "counter",
        "Client connections refused (maxclients).",
        shared.rejected_connections.load(Ordering::Relaxed),
    );
    o.family(
        "evicted_clients_total",
        "counter",
        "Clients disconnected for passing a limit.",
    );
    o.value(
        "evicted_clients_total",
        "limit=\"query_buffer\"",
        k.evicted_qbuf,
    );
    o.single(
        "commands_processed_total",
        "counter",
        "Requests read from clients.",
        t.commands,
    );
    o.single(
        "instantaneous_ops_per_second",
        "gauge",
        "Requests per second over about the last second.",
        format!("{:.2}", t.ops_per_sec),
    );
    o.single(
        "net_input_bytes_total",
        "counter",
        "Bytes read from clients.",
        t.net_in,
    );
    o.single(
        "net_output_bytes_total",
        "counter",
        "Bytes written to clients.",
        t.net_out,
    );
    o.single(
        "client_query_buffer_bytes",
        "gauge",
        "Bytes read from clients and not yet dispatched.",
        t.clients.qbuf,
    );
    o.single(
        "client_output_buffer_bytes",
        "gauge",
        "Reply bytes queued to clients and not yet written.",
        t.clients.out,
    );
    o.single(
        "replies_outstanding",
        "gauge",
        "Requests dispatched whose replies have not been written.",
        t.clients.outstanding,
    );
    o.single(
        "memory_rss_bytes",
        "gauge",
        "Resident set size of the process.",
        stats::rss_bytes(),
    );
    o.family("redirects_total", "counter", "Redirects followed, by kind.");
    o.value("redirects_total", "kind=\"moved\"", k.moved);
    o.value("redirects_total", "kind=\"ask\"", k.ask);
    o.family(
        "retries_total",
        "counter",
        "Requests waited and resent after a node's TRYAGAIN or CLUSTERDOWN.",
    );
    o.value("retries_total", "kind=\"tryagain\"", k.tryagain);
    o.value("retries_total", "kind=\"clusterdown\"", k.clusterdown);
    o.single(
        "key_splits_total",
        "counter",
        "Requests resent key by key after TRYAGAIN outlasted the waits.",
        k.splits,
    );
    o.single(
        "rejected_commands_total",
        "counter",
        "Requests refused before running (unknown, arity, NOAUTH).",
        k.rejected,
    );
    o.single(
        "slowlog_entries_total",
        "counter",
        "Slow log entries written.",
        k.slow_entries,
    );
    o.single(
        "slowlog_length",
        "gauge",
        "Slow log entries kept.",
        shared.stats.slowlog.len(),
    );
    o.single(
        "topology_epoch",
        "gauge",
        "Epoch of the slot map in use.",
        shared.topology.load().epoch,
    );
    let last = shared.topology.last_ok_ms();
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    o.single(
        "topology_last_refresh_timestamp_seconds",
        "gauge",
        "Unix time of the last successful slot-map fetch (0: never).",
        last as f64 / 1000.0,
    );
    o.single(
        "topology_refresh_age_seconds",
        "gauge",
        "Seconds since the last successful slot-map fetch.",
        if last == 0 {
            0.0
        } else {
            now_ms.saturating_sub(last) as f64 / 1000.0
        },
    );
}

/// The families of each server pool, labelled `pool`.
fn per_pool(o: &mut Out, topo: &crate::topology::Topology, pools: &[PoolView]) {
    type Field = fn(&PoolView) -> u64;
    let families: [(&str, &str, &str, Field); 7] = [
        (
            "pool_clients",
            "gauge",
            "Client connections open, per pool.",
            |p| p.counters.client_connections,
        ),
        (
            "client_eof_total",
            "counter",
            "Client connections the client closed, per pool.",
            |p| p.counters.client_eof,
        ),
        (
            "client_errors_total",
            "counter",
            "Client connections ended by a read or write error, per pool.",
            |p| p.counters.client_err,
        ),
        (
            "fanout_parts_total",
            "counter",
            "Parts sent for multi-key and every-server requests, per pool.",
            |p| p.counters.fragments,
        ),
        (
            "forward_errors_total",
            "counter",
            "Requests answered with an error because their server was unreachable, per pool.",
            |p| p.counters.forward_errors,
        ),
        (
            "pool_servers",
            "gauge",
            "Servers of the pool: a ring's servers, a cluster's nodes.",
            |p| p.servers.len() as u64,
        ),
        (
            "pool_servers_live",
            "gauge",
            "Servers that serve now: in the ring, or healthy and reachable.",
            |p| p.live() as u64,
        ),
    ];
    for (name, kind, help, f) in families {
        o.family(name, kind, help);
        for p in pools {
            o.value(name, &pool_label(p), f(p));
        }
    }
    o.family(
        "server_ejections_total",
        "counter",
        "Ejections of a ring pool's servers (auto-eject-hosts).",
    );
    for p in pools.iter().filter(|p| p.ring) {
        o.value("server_ejections_total", &pool_label(p), p.server_ejects);
    }
    // Each pool's part of the map.
    let part = |p: &PoolView| stats::pools::map_counts(topo, p.index);
    type Part = fn((usize, usize, usize)) -> usize;
    let families: [(&str, &str, Part); 3] = [
        (
            "cluster_masters",
            "Masters in the pool's map (a ring's servers).",
            |x| x.0,
        ),
        ("cluster_replicas", "Replicas in the pool's map.", |x| x.1),
        (
            "cluster_slots_served",
            "Units some master serves: a cluster's slots, a ring's servers.",
            |x| x.2,
        ),
    ];
    for (name, help, f) in families {
        o.family(name, "gauge", help);
        for p in pools {
            o.value(name, &pool_label(p), f(part(p)));
        }
    }
}

/// The reply cache (`reply-cache`), summed over workers: INFO replycache.
fn reply_cache(o: &mut Out, t: &Totals) {
    let c = &t.cache;
    for (name, help, v) in [
        (
            "reply_cache_lookups_total",
            "Keys looked up in the reply cache.",
            c.lookups,
        ),
        (
            "reply_cache_hits_total",
            "Keys found in the reply cache.",
            c.hits,
        ),
        (
            "reply_cache_misses_total",
            "Keys not found in the reply cache.",
            c.misses,
        ),
        (
            "reply_cache_fills_admitted_total",
            "Fills armed after a miss.",
            c.fills_admitted,
        ),
        (
            "reply_cache_fills_refused_total",
            "Misses the admission did not fill.",
            c.fills_refused,
        ),
        (
            "reply_cache_fills_stored_total",
            "Replies stored.",
            c.fills_stored,
        ),
        (
            "reply_cache_invalidations_total",
            "Keys invalidated by a node.",
            c.invalidations,
        ),
        (
            "reply_cache_write_invalidations_total",
            "Keys invalidated by writes sent through mithril.",
            c.write_invalidations,
        ),
        (
            "reply_cache_poisoned_fills_total",
            "Fills an invalidation overtook.",
            c.poisoned,
        ),
        (
            "reply_cache_flushes_total",
            "Times the whole cache was emptied.",
            c.flushes,
        ),
        ("reply_cache_flips_total", "Generation flips.", c.flips),
    ] {
        o.single(name, "counter", help, v);
    }
    o.family(
        "reply_cache_bytes",
        "gauge",
        "Bytes in the reply cache, by generation.",
    );
    o.value(
        "reply_cache_bytes",
        "generation=\"current\"",
        c.bytes_current,
    );
    o.value("reply_cache_bytes", "generation=\"old\"", c.bytes_old);
    o.family(
        "reply_cache_entries",
        "gauge",
        "Entries in the reply cache, by generation.",
    );
    o.value(
        "reply_cache_entries",
        "generation=\"current\"",
        c.entries_current,
    );
    o.value("reply_cache_entries", "generation=\"old\"", c.entries_old);
}

fn commands(o: &mut Out, t: &Totals) {
    let named: Vec<(&str, &stats::CmdSnap)> = t
        .cmds
        .iter()
        .filter_map(|c| Some((c.command()?.name, c)))
        .collect();
    o.family("commands_total", "counter", "Calls per command.");
    for (name, c) in &named {
        o.value("commands_total", &format!("cmd=\"{name}\""), c.calls);
    }
    o.family(
        "commands_failed_total",
        "counter",
        "Calls answered with an error, per command.",
    );
    for (name, c) in &named {
        o.value(
            "commands_failed_total",
            &format!("cmd=\"{name}\""),
            c.failed,
        );
    }
    o.family(
        "commands_rejected_total",
        "counter",
        "Requests refused before running, per command.",
    );
    for (name, c) in &named {
        o.value(
            "commands_rejected_total",
            &format!("cmd=\"{name}\""),
            c.rejected,
        );
    }
    o.family(
        "command_duration_seconds",
        "histogram",
        "Time through the proxy, from the turn a request was read to the turn its reply was queued to the client.",
    );
    for (name, c) in &named {
        let Some(h) = &c.hist else { continue };
        for k in LE_POWERS {
            let bound = (1u64 << k) - 1;
            o.value(
                "command_duration_seconds_bucket",
                &format!("cmd=\"{name}\",le=\"{}\"", secs(bound)),
                h.count_at_most(bound),
            );
        }
        o.value(
            "command_duration_seconds_bucket",
            &format!("cmd=\"{name}\",le=\"+Inf\""),
            h.count(),
        );
        o.value(
            "command_duration_seconds_sum",
            &format!("cmd=\"{name}\""),
            secs(c.usec),
        );
        o.value(
            "command_duration_seconds_count",
            &format!("cmd=\"{name}\""),
            h.count(),
        );
    }
}

/// One server's series: its labels and figures.
struct Row {
    labels: String,
    node: stats::NodeSnap,
    /// A ring pool's server: its ejections and the last one's time (µs).
    ejections: Option<(u64, u64)>,
}

fn backends(o: &mut Out, pools: &[PoolView]) {
    // Every server of every pool, each address once per pool (a ring may
    // name one address twice).
    let mut rows: Vec<Row> = Vec::new();
    for p in pools {
        let mut seen = std::collections::HashSet::new();
        for s in &p.servers {
            if !seen.insert(s.addr) {
                continue;
            }
            rows.push(Row {
                labels: format!(
                    "{},addr=\"{}\",role=\"{}\"",
                    pool_label(p),
                    s.addr,
                    s.role_name()
                ),
                node: s
                    .node
                    .cloned()
                    .unwrap_or_else(|| stats::NodeSnap::blank(p.index, s.addr)),
                ejections: p.ring.then_some((s.ejects, s.ejected_at_us)),
            });
        }
    }
    type Field = fn(&stats::NodeSnap) -> f64;
    let families: [(&str, &str, &str, Field); 13] = [
        (
            "backend_connections",
            "gauge",
            "Open connections to the node.",
            |n| n.connections as f64,
        ),
        (
            "backend_in_flight",
            "gauge",
            "Requests queued on the node or awaiting its reply.",
            |n| n.in_flight as f64,
        ),
        (
            "backend_down",
            "gauge",
            "1 while connecting to the node backs off.",
            |n| u8::from(n.down) as f64,
        ),
        (
            "backend_requests_total",
            "counter",
            "Requests sent to the node.",
            |n| n.totals.requests as f64,
        ),
        (
            "backend_responses_total",
            "counter",
            "Replies from the node.",
            |n| n.totals.responses as f64,
        ),
        (
            "backend_request_bytes_total",
            "counter",
            "Bytes written to the node.",
            |n| n.totals.bytes_out as f64,
        ),
        (
            "backend_response_bytes_total",
            "counter",
            "Bytes read from the node.",
            |n| n.totals.bytes_in as f64,
        ),
        (
            "backend_errors_total",
            "counter",
            "Connections to the node lost.",
            |n| n.totals.errors as f64,
        ),
        (
            "backend_timeouts_total",
            "counter",
            "Connections to the node dropped by backend-timeout.",
            |n| n.totals.timeouts as f64,
        ),
        (
            "backend_eof_total",
            "counter",
            "Connections the node closed.",
            |n| n.totals.eof as f64,
        ),
        (
            "backend_reconnects_total",
            "counter",
            "Connections made again after the node had failed.",
            |n| n.reconnects as f64,
        ),
        (
            "backend_round_trip_seconds_total",
            "counter",
            "Sum of request round trips to the node (written to answered).",
            |n| n.totals.rtt_sum_us as f64 / 1e6,
        ),
        (
            "backend_round_trips_total",
            "counter",
            "Request round trips measured.",
            |n| n.totals.rtt_count as f64,
        ),
    ];
    for (name, kind, help, f) in families {
        o.family(name, kind, help);
        for r in &rows {
            o.value(name, &r.labels, f(&r.node));
        }
    }
    // A ring's servers: their ejections (`auto-eject-hosts`).
    o.family(
        "backend_ejections_total",
        "counter",
        "Times a ring pool's server was ejected.",
    );
    for r in &rows {
        if let Some((n, _)) = r.ejections {
            o.value("backend_ejections_total", &r.labels, n);
        }
    }
    o.family(
        "backend_last_ejection_timestamp_seconds",
        "gauge",
        "Unix time of a ring pool's server's last ejection (0: never).",
    );
    for r in &rows {
        if let Some((_, at_us)) = r.ejections {
            o.value(
                "backend_last_ejection_timestamp_seconds",
                &r.labels,
                secs(at_us),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_are_exact() {
        let mut h = crate::stats::hist::Hist::new();
        for v in [15, 16, 31, 32, 1023, 1024, 40_000] {
            h.record(v);
        }
        assert_eq!(h.count_at_most((1 << 4) - 1), 1);
        assert_eq!(h.count_at_most((1 << 5) - 1), 3);
        assert_eq!(h.count_at_most((1 << 10) - 1), 5);
        assert_eq!(h.count_at_most((1 << 16) - 1), 7);
        assert_eq!(secs(15), "0.000015");
        assert_eq!(secs(1_500_000), "1.5");
    }
}
