//! `make bench-pools`, second table: a Sentinel pool of two master-replica
//! groups (three sentinels) behind mithril, beside a Redis Cluster of two
//! masters with a replica each behind mithril, the same machine, the same
//! run: what placing by group instead of by slot costs.
//!
//! ```text
//!  4 redis-servers (2 x master + replica) + 3 sentinels <── mithril (pool of groups) <── redis-benchmark  "groups"
//!  4 cluster nodes (2 x master + replica)               <── mithril (cluster)        <── redis-benchmark  "cluster"
//! ```
//!
//! Workloads: GET and SET at `-P 1` and `-P 16` (the first table's). The
//! row reads as the first table's with "cluster" for nutcracker and
//! "groups" for mithril. GROUPS=0 leaves this table out.

use std::path::Path;

use super::support::{ClusterSpec, Conn, Mithril, RedisCluster, SentinelSet, StandaloneSet};
use super::{side_by_side, workloads, Side};

fn replicate(set: &StandaloneSet, master: usize, replica: usize) -> Result<(), String> {
    let port = set.port(master).to_string();
    let r = set.conn(replica).cmd(&["REPLICAOF", "127.0.0.1", &port]);
    if r.is_error() {
        return Err(format!("REPLICAOF: {r:?}"));
    }
    super::support::wait_until(
        "a replica in sync",
        std::time::Duration::from_secs(20),
        || {
            let info = set.conn(replica).cmd(&["INFO", "replication"]);
            String::from_utf8_lossy(info.as_bulk().unwrap_or_default())
                .contains("master_link_status:up")
                .then_some(())
        },
    );
    Ok(())
}

/// Prints the table; false when something failed to run.
pub fn section(
    bin: &Path,
    only: &[String],
    rounds: usize,
    seconds: f64,
    cores: usize,
    dir: &Path,
) -> bool {
    let set = StandaloneSet::start(4);
    if let Err(e) = replicate(&set, 0, 1).and_then(|()| replicate(&set, 2, 3)) {
        println!("groups: {e}");
        return false;
    }
    let sentinels = SentinelSet::start(
        3,
        &[("shard001", set.port(0), 1), ("shard002", set.port(2), 1)],
    );
    let port = super::support::free_port();
    let mut conf = format!(
        "port {port}\npool g listen 127.0.0.1:{port}\nloglevel notice\n\
         pool g group shard001\npool g group shard002\n"
    );
    for a in sentinels.addrs() {
        conf.push_str(&format!("pool g sentinel {a}\n"));
    }
    if let Ok(t) = std::env::var("MITHRIL_THREADS") {
        conf.push_str(&format!("threads {t}\n"));
    }
    let groups = Mithril::start(bin, &[], &conf);
    // Both groups have a master before the runs start.
    super::support::wait_until(
        "both groups served",
        std::time::Duration::from_secs(20),
        || {
            let mut c = Conn::connect(&groups.addr());
            (0..20)
                .all(|i| c.cmd(&["SET", &format!("warm{i}"), "1"]) == super::support::ok())
                .then_some(())
        },
    );
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 2,
        replicas_per_master: 1,
        ..ClusterSpec::default()
    });
    let mut cconf = "loglevel notice\n".to_string();
    if let Ok(t) = std::env::var("MITHRIL_THREADS") {
        cconf.push_str(&format!("threads {t}\n"));
    }
    let front = Mithril::start(bin, &cluster.seeds(), &cconf);
    let a = Side {
        port: front.port,
        pid: front.pid,
        servers: cluster.nodes.iter().map(|n| n.pid).collect(),
    };
    let b = Side {
        port: groups.port,
        pid: groups.pid,
        servers: set.servers.iter().map(|s| s.pid).collect(),
    };
    println!();
    println!("groups: a Sentinel pool of 2 master-replica groups (3 sentinels) vs a 2-master cluster with a replica each, both behind mithril");
    println!(
        "{:<14} {:>11} {:>11} {:>6}   {:>22}   {:>22}   {:>7}  {:>9}",
        "workload",
        "cluster",
        "groups",
        "ratio",
        "cluster us/req p/s/c",
        "groups us/req p/s/c",
        "ceiling",
        "idle/steal"
    );
    let mut ok = true;
    for w in workloads().into_iter().filter(|w| w.command != "MGET") {
        if !only.is_empty() && !only.iter().any(|o| o == w.command) {
            continue;
        }
        ok &= side_by_side(&w, rounds, seconds, &a, &b, cores, dir);
    }
    drop((groups, front, sentinels, set, cluster));
    ok
}
