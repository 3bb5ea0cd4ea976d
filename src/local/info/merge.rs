//! The masters' part of INFO: the sections only the nodes can fill (the
//! data and its saving), read from each master's reply to `INFO keyspace
//! persistence stats memory replication clients` and merged into what one
//! server holding all the data would show: `keyspace` summed per database
//! ([`keyspace_sum`]), `persistence` as [`persistence_merge`] says, the
//! data's fields of `stats` and `memory` summed ([`DATA_FIELDS`]), the
//! replication fields that mean something over masters
//! ([`replication_field`]).
//!
//! Invariants: a master that answered an error is left out, never taken
//! for an empty one's figures; fields keep the order they were first seen
//! in.
//!
//! Never: show a field whose meaning does not carry over to a cluster (a
//! replication id, a replica's line).

use bytes::Bytes;
use std::fmt::Write as _;

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
pub(super) fn data_field(name: &str, values: &[&str]) -> Option<String> {
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
pub(super) fn replication_field(name: &str, values: &[&str]) -> Option<String> {
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
pub(super) fn merged_section(
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
