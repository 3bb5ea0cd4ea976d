//! The soak: mixed pipelined load through mithril for a given time while
//! the cluster behind it is resharded and failed over in a loop; then every
//! acknowledged write is looked up on the node that owns it.
//!
//!     cargo bench --bench soak -- --secs 600
//!
//! Prints operations done, errors the clients saw (and how many of them
//! were redirects: there must be none), and acknowledged writes lost.
//! Without `--secs` it prints this usage and does nothing (so a plain
//! `cargo bench` does not start a ten-minute run). Not part of `make test`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::load::{check_writes, run_load_named};
use support::*;

const WRITERS: usize = 4;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs = args
        .iter()
        .position(|a| a == "--secs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse::<u64>().ok());
    let Some(secs) = secs else {
        println!("usage: cargo bench --bench soak -- --secs N   (mixed load while resharding and failing over)");
        return;
    };
    let bin = support::bin();
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(
        bin,
        &cluster.seeds(),
        "topology-refresh-secs 1\nloglevel notice",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let hot: Vec<u16> = vec![100, 3000, 5600, 9000, 11000, 16000];
    let loads: Vec<_> = (0..WRITERS)
        .map(|w| run_load_named(m.addr(), hot.clone(), stop.clone(), true, &format!("w{w}")))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut reshards, mut failovers, mut keys_moved) = (0usize, 0usize, 0usize);
    let mut step = 0usize;
    println!("soak: {secs} s, {WRITERS} writers, {} hot slots", hot.len());
    while Instant::now() < deadline {
        step += 1;
        // Roles move with failovers: act on the cluster as it is now.
        cluster.wait_healthy(Duration::from_secs(30));
        cluster.refresh_roles();
        if step % 5 == 0 {
            // Fail over a random master to one of its replicas.
            cluster.refresh_roles();
            let replicas: Vec<usize> = (0..cluster.nodes.len())
                .filter(|&i| cluster.nodes[i].master_of.is_some() && cluster.is_running(i))
                .collect();
            let r = replicas[(support::random_u64() as usize) % replicas.len()];
            let reply = cluster.nodes[r].conn().cmd(&["CLUSTER", "FAILOVER"]);
            if reply == Reply::Simple("OK".into()) {
                failovers += 1;
                let port = cluster.nodes[r].port;
                wait_until("the failover completed", Duration::from_secs(30), || {
                    let mut c = Conn::connect(&format!("127.0.0.1:{port}"));
                    let role = c.cmd(&["ROLE"]);
                    (role.as_array()[0].as_str() == "master").then_some(())
                });
                cluster.refresh_roles();
                cluster.wait_healthy(Duration::from_secs(30));
            }
        } else {
            // Move a hot slot to another master, one key at a time.
            let slot = hot[(support::random_u64() as usize) % hot.len()];
            let owner = cluster.port_for_slot(slot);
            let targets: Vec<usize> = (0..cluster.nodes.len())
                .filter(|&i| {
                    cluster.nodes[i].master_of.is_none()
                        && cluster.is_running(i)
                        && cluster.nodes[i].port != owner
                })
                .collect();
            let to = targets[(support::random_u64() as usize) % targets.len()];
            keys_moved += cluster.migrate_slot_paced(slot, to, 2, Duration::from_millis(20));
            reshards += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (mut ops, mut errors, mut redirects, mut checked, mut lost) =
        (0u64, 0usize, 0usize, 0usize, 0usize);
    let mut samples = Vec::new();
    for l in loads {
        let out = l.join().expect("a writer panicked");
        ops += out.ops;
        errors += out.errors.len();
        redirects += out
            .errors
            .iter()
            .filter(|e| e.contains("MOVED") || e.contains("-ASK") || e.contains(" ASK "))
            .count();
        samples.extend(out.errors.iter().take(3).cloned());
        let (c, missing) = check_writes(&cluster, &out.model);
        checked += c;
        lost += missing.len();
        samples.extend(missing.into_iter().take(3));
    }
    println!(
        "soak: {secs} s, {reshards} reshards ({keys_moved} keys moved), {failovers} failovers"
    );
    println!("soak: operations {ops}");
    println!("soak: errors seen by clients {errors} (redirects among them: {redirects})");
    println!("soak: acknowledged writes checked {checked}, lost {lost}");
    for s in samples.iter().take(10) {
        println!("soak: sample: {s}");
    }
    if lost > 0 || redirects > 0 {
        std::process::exit(1);
    }
}
