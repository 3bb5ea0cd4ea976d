//! Live resharding, scale-out and failover behind mithril while traffic
//! runs: the client sees no redirect and no error during migrations, and
//! every acknowledged write is in the cluster afterwards.

mod support;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::*;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mithril"))
}

/// What one writer believes the cluster holds: only it writes these keys.
#[derive(Default)]
struct Model {
    counters: HashMap<String, i64>,
    sets: HashMap<String, HashSet<String>>,
    strings: HashMap<String, String>,
}

struct Outcome {
    model: Model,
    ops: u64,
    errors: Vec<String>,
    /// Pipelines whose replies were all good after the last error.
    clean_after_last_error: u64,
}

/// A pipelined writer and reader: counters, set members, cross-slot MSET
/// and MGET batches, over keys in `hot` slots (being moved) and elsewhere.
fn run_load(
    addr: String,
    hot: Vec<u16>,
    stop: Arc<AtomicBool>,
    tolerate_errors: bool,
) -> JoinHandle<Outcome> {
    let tags: Vec<String> = hot.iter().map(|&s| key_for_slot(s, "h")).collect();
    let progress = Arc::new(AtomicU64::new(0));
    let seen = progress.clone();
    let handle = std::thread::spawn(move || {
        let mut c = Conn::connect(&addr);
        let mut m = Model::default();
        let mut errors = Vec::new();
        let mut ops = 0u64;
        let mut clean = 0u64;
        let mut round = 0u64;
        while !stop.load(Ordering::Relaxed) {
            round += 1;
            let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
            let mut expect: Vec<Expect> = Vec::new();
            for (t, tag) in tags.iter().enumerate() {
                // Two keys per hot slot, plus one elsewhere.
                for k in [
                    format!("{{{tag}}}c1"),
                    format!("{{{tag}}}c2"),
                    format!("cold:c{t}"),
                ] {
                    cmds.push(vec![b"INCR".to_vec(), k.clone().into_bytes()]);
                    expect.push(Expect::Counter(k));
                }
                let set = format!("{{{tag}}}s");
                let member = format!("m{round}");
                cmds.push(vec![
                    b"SADD".to_vec(),
                    set.clone().into_bytes(),
                    member.clone().into_bytes(),
                ]);
                expect.push(Expect::Added(set, member));
            }
            // A cross-slot MSET with several keys per hot slot, then MGET.
            let mut mset = vec![b"MSET".to_vec()];
            let mut written = Vec::new();
            for tag in &tags {
                for j in 0..3 {
                    let k = format!("{{{tag}}}str{j}");
                    let v = format!("r{round}j{j}");
                    mset.push(k.clone().into_bytes());
                    mset.push(v.clone().into_bytes());
                    written.push((k, v));
                }
            }
            cmds.push(mset);
            expect.push(Expect::Mset(written.clone()));
            let mut mget = vec![b"MGET".to_vec()];
            mget.extend(written.iter().map(|(k, _)| k.clone().into_bytes()));
            cmds.push(mget);
            expect.push(Expect::Mget(
                written.iter().map(|(_, v)| v.clone()).collect(),
            ));
            let replies = match c.try_pipeline(&cmds) {
                Ok(r) => r,
                Err(e) => {
                    errors.push(format!("round {round}: {e}"));
                    if !tolerate_errors {
                        break;
                    }
                    c = Conn::connect(&addr);
                    continue;
                }
            };
            let before = errors.len();
            for (r, e) in replies.into_iter().zip(expect) {
                ops += 1;
                if r.is_error() {
                    errors.push(format!("round {round}: {:?} -> {}", e, r.as_error()));
                    continue;
                }
                match e {
                    Expect::Counter(k) => {
                        let n = r.as_int();
                        let prev = m.counters.get(&k).copied().unwrap_or(0);
                        if n != prev + 1 && !tolerate_errors {
                            errors.push(format!(
                                "round {round}: INCR {k} gave {n}, expected {}",
                                prev + 1
                            ));
                        }
                        m.counters.insert(k, n);
                    }
                    Expect::Added(set, member) => {
                        m.sets.entry(set).or_default().insert(member);
                    }
                    Expect::Mset(written) => {
                        for (k, v) in written {
                            m.strings.insert(k, v);
                        }
                    }
                    Expect::Mget(values) => {
                        let got: Vec<Option<String>> = r
                            .as_array()
                            .iter()
                            .map(|x| x.as_bulk().map(|b| String::from_utf8_lossy(b).into_owned()))
                            .collect();
                        let want: Vec<Option<String>> = values.into_iter().map(Some).collect();
                        if got != want && !tolerate_errors {
                            errors.push(format!(
                                "round {round}: MGET gave {got:?}, expected {want:?}"
                            ));
                        }
                    }
                }
            }
            if errors.len() == before {
                clean += 1;
            } else {
                clean = 0;
            }
            progress.store(ops, Ordering::Relaxed);
        }
        Outcome {
            model: m,
            ops,
            errors,
            clean_after_last_error: clean,
        }
    });
    // Start changing the cluster only once traffic flows and the hot slots
    // hold data.
    wait_until("the load is running", Duration::from_secs(20), || {
        (seen.load(Ordering::Relaxed) > 200).then_some(())
    });
    handle
}

#[derive(Debug)]
enum Expect {
    Counter(String),
    Added(String, String),
    Mset(Vec<(String, String)>),
    Mget(Vec<String>),
}

/// Every acknowledged write is on the node that owns its slot.
fn verify(cluster: &RedisCluster, m: &Model) {
    cluster.wait_healthy(Duration::from_secs(30));
    let owner = |k: &str| {
        let port = cluster.port_for_slot(key_slot(k.as_bytes()));
        Conn::connect(&format!("127.0.0.1:{port}"))
    };
    for (k, n) in &m.counters {
        assert_eq!(
            owner(k).cmd(&["GET", k]).as_str(),
            n.to_string(),
            "counter {k}"
        );
    }
    for (k, members) in &m.sets {
        let got: HashSet<String> = owner(k)
            .cmd(&["SMEMBERS", k])
            .as_array()
            .iter()
            .map(|x| x.as_str().to_string())
            .collect();
        assert!(
            members.is_subset(&got),
            "set {k}: {} acknowledged members missing",
            members.difference(&got).count()
        );
    }
    for (k, v) in &m.strings {
        assert_eq!(owner(k).cmd(&["GET", k]).as_str(), v, "string {k}");
    }
}

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
    assert!(
        out.errors.is_empty(),
        "{} errors, first: {:?}",
        out.errors.len(),
        &out.errors[..out.errors.len().min(5)]
    );
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
    assert!(
        out.errors.is_empty(),
        "{} errors, first: {:?}",
        out.errors.len(),
        &out.errors[..out.errors.len().min(5)]
    );
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
    let port = cluster.port_for_slot(hot_slots()[0]);
    let master = cluster
        .nodes
        .iter()
        .find(|n| n.port == port)
        .unwrap()
        .id
        .clone();
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
