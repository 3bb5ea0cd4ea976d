//! Live resharding, scale-out and failover behind mithril while traffic
//! runs: the client sees no redirect and no error during migrations, nor
//! while a killed master's replica takes over (on the other masters'
//! slots), and every acknowledged write is in the cluster afterwards.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::load::{run_load, verify};
use support::*;

/// Hot slots spread over the masters.
fn hot_slots() -> Vec<u16> {
    vec![100, 5600, 11000, 16000]
}

#[test]
fn resharding_back_and_forth_under_load_is_invisible() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let stop = Arc::new(AtomicBool::new(false));
    let load = run_load(m.addr(), hot_slots(), stop.clone(), false);
    let masters: Vec<usize> = (0..cluster.nodes.len()).collect();
    let started = Instant::now();
    let mut moved = 0;
    for round in 0..3 {
        for (i, &slot) in hot_slots().iter().enumerate() {
            let to = masters[(i + round + 1) % masters.len()];
            // One key per MIGRATE, with pauses: multi-key requests see
            // slots split between two nodes for longer than the TRYAGAIN
            // waits, and are re-sent key by key.
            moved += cluster.migrate_slot_paced(slot, to, 1, Duration::from_millis(100));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let out = load.join().unwrap();
    out.assert_no_errors();
    assert!(
        moved > 0 && out.ops > 1000,
        "moved {moved} keys, {} ops",
        out.ops
    );
    eprintln!(
        "resharding: {} ops, {moved} keys moved in {:?}",
        out.ops,
        started.elapsed()
    );
    verify(&cluster, &out.model);
}

#[test]
fn scale_out_under_load_is_invisible() {
    let mut cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let stop = Arc::new(AtomicBool::new(false));
    let load = run_load(m.addr(), hot_slots(), stop.clone(), false);
    let new = cluster.add_master();
    for &slot in &hot_slots() {
        cluster.migrate_slot(slot, new, 2);
    }
    // Traffic keeps flowing to the new master for a moment.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let out = load.join().unwrap();
    out.assert_no_errors();
    verify(&cluster, &out.model);
    let on_new = cluster.nodes[new].conn().cmd(&["DBSIZE"]).as_int();
    assert!(on_new > 0, "the new master holds keys");
}

#[test]
fn manual_failover_under_load_loses_nothing() {
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "topology-refresh-secs 1");
    let stop = Arc::new(AtomicBool::new(false));
    let load = run_load(m.addr(), hot_slots(), stop.clone(), true);
    // Fail over the master of the first hot slot.
    let master = cluster.node_for_slot(hot_slots()[0]).id.clone();
    let replica = cluster
        .nodes
        .iter()
        .position(|n| n.master_of.as_deref() == Some(master.as_str()))
        .unwrap();
    assert_eq!(
        cluster.nodes[replica].conn().cmd(&["CLUSTER", "FAILOVER"]),
        Reply::Simple("OK".into())
    );
    wait_until("the replica took over", Duration::from_secs(20), || {
        (cluster.port_for_slot(hot_slots()[0]) == cluster.nodes[replica].port).then_some(())
    });
    cluster.refresh_roles();
    // Traffic resumes: keep going until a stretch of clean pipelines.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let out = load.join().unwrap();
    assert!(
        out.clean_after_last_error > 5,
        "traffic resumed cleanly (errors: {:?})",
        &out.errors[..out.errors.len().min(5)]
    );
    for e in &out.errors {
        assert!(
            !e.contains("MOVED") && !e.contains("ASK "),
            "a redirect reached the client: {e}"
        );
    }
    verify(&cluster, &out.model);
}

#[test]
fn killed_master_gives_errors_not_hangs_then_recovers() {
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "topology-refresh-secs 1\nbackend-timeout 2000",
    );
    let mut c = m.conn();
    let key = format!("{{{}}}k", key_for_slot(hot_slots()[0], "x"));
    assert_eq!(c.cmd(&["SET", &key, "1"]), Reply::Simple("OK".into()));
    let port = cluster.port_for_slot(hot_slots()[0]);
    let idx = cluster.nodes.iter().position(|n| n.port == port).unwrap();
    cluster.kill(idx);
    // Every request is answered, quickly, while the replica is promoted.
    let t = Instant::now();
    let mut errors = 0;
    let recovered = loop {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no recovery within 30 s"
        );
        let asked = Instant::now();
        let r = c.cmd(&["SET", &key, "2"]);
        assert!(
            asked.elapsed() < Duration::from_secs(4),
            "a request hung for {:?}",
            asked.elapsed()
        );
        if r.is_error() {
            errors += 1;
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        break t.elapsed();
    };
    assert!(errors > 0, "the dead master's slots failed for a while");
    assert_eq!(c.cmd(&["GET", &key]).as_str(), "2");
    eprintln!("recovered after {recovered:?} with {errors} errors");
}

/// A master is killed under pipelined load on the other masters' slots:
/// while it is marked failed and until its replica takes over, the other
/// masters answer CLUSTERDOWN for every key (full coverage is required),
/// and mithril waits that out in order: the client sees no error, and
/// every INCR counts one more than the one before it on that key.
#[test]
fn a_killed_master_costs_the_other_masters_clients_no_error() {
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "topology-refresh-secs 1");
    let victim_port = cluster.port_for_slot(0);
    let victim = cluster
        .nodes
        .iter()
        .position(|n| n.port == victim_port)
        .unwrap();
    let keys: Vec<String> = (0..)
        .map(|i| format!("{{{}}}k", key_for_slot((i * 997) % 16384, "kf")))
        .filter(|k| cluster.port_for_slot(key_slot(k.as_bytes())) != victim_port)
        .take(8)
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (st, addr) = (stop.clone(), m.addr());
    let load = std::thread::spawn(move || {
        let mut c = Conn::connect(&addr);
        let mut counts = vec![0i64; keys.len()];
        let (mut ops, mut wrong) = (0u64, Vec::new());
        while !st.load(Ordering::Relaxed) {
            let cmds: Vec<Vec<Vec<u8>>> = (0..20)
                .flat_map(|_| keys.iter().map(|k| argv(&["INCR", k])))
                .collect();
            for (i, r) in c.pipeline(&cmds).into_iter().enumerate() {
                ops += 1;
                let k = i % keys.len();
                match r {
                    Reply::Int(n) if n == counts[k] + 1 => counts[k] = n,
                    other => wrong.push(format!("INCR {}: {other:?} after {}", keys[k], counts[k])),
                }
            }
        }
        (ops, wrong)
    });
    std::thread::sleep(Duration::from_millis(300));
    cluster.kill(victim);
    cluster.wait_healthy(Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let (ops, wrong) = load.join().unwrap();
    assert!(
        wrong.is_empty(),
        "{} of {ops} replies wrong, first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

#[test]
fn no_seed_reachable_at_start_then_the_cluster_appears() {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let seeds: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let m = Mithril::start(bin(), &seeds, "");
    let mut c = m.conn();
    let r = c.cmd(&["GET", "k"]);
    assert!(r.as_error().starts_with("CLUSTERDOWN"), "{r:?}");
    assert!(
        r.as_error().contains("topology"),
        "the error says why: {r:?}"
    );
    let _cluster = RedisCluster::start(ClusterSpec {
        ports,
        ..Default::default()
    });
    wait_until("mithril found the cluster", Duration::from_secs(20), || {
        (c.cmd(&["SET", "k", "v"]) == Reply::Simple("OK".into())).then_some(())
    });
    assert_eq!(c.cmd(&["GET", "k"]).as_str(), "v");
}

#[test]
fn a_frozen_node_costs_its_clients_backend_timeout_at_most() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "backend-timeout 1000");
    let mut c = m.conn();
    let key = format!("{{{}}}k", key_for_slot(hot_slots()[0], "f"));
    assert_eq!(c.cmd(&["SET", &key, "1"]), Reply::Simple("OK".into()));
    let pid = cluster.node_for_slot(hot_slots()[0]).pid;
    // Freeze the node: its socket stays open, nothing answers.
    // SAFETY: kill(2) takes plain integers; `pid` is a node this test started.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let asked = Instant::now();
    let r = c.cmd(&["GET", &key]);
    let waited = asked.elapsed();
    // SAFETY: as for SIGSTOP above.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    assert!(r.as_error().contains("backend-timeout"), "{r:?}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(3),
        "answered after {waited:?}"
    );
    // The node is back: the next request reconnects and works.
    let v = wait_until(
        "the node answers again",
        Duration::from_secs(10),
        || match c.cmd(&["GET", &key]) {
            Reply::Bulk(Some(v)) => Some(v),
            _ => None,
        },
    );
    assert_eq!(v, b"1");
}

#[test]
fn a_brief_clusterdown_is_waited_out() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    let slot = hot_slots()[1];
    let key = format!("{{{}}}k", key_for_slot(slot, "d"));
    assert_eq!(c.cmd(&["SET", &key, "v"]), Reply::Simple("OK".into()));
    let owner = cluster.node_for_slot(slot).clone();
    let s = slot.to_string();
    // The owner stops serving the slot for a moment (a direct client would
    // see CLUSTERDOWN), then serves it again.
    assert_eq!(
        owner.conn().cmd(&["CLUSTER", "DELSLOTS", &s]),
        Reply::Simple("OK".into())
    );
    let mut direct = owner.conn();
    assert!(direct
        .cmd(&["GET", &key])
        .as_error()
        .starts_with("CLUSTERDOWN"));
    let restorer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        owner.conn().cmd(&["CLUSTER", "ADDSLOTS", &s])
    });
    let r = c.cmd(&["GET", &key]);
    assert_eq!(restorer.join().unwrap(), Reply::Simple("OK".into()));
    assert_eq!(r.as_bulk(), Some(&b"v"[..]), "{r:?}");
}
