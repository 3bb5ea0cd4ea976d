//! The reply cache's promises across workers and through failures, each
//! at `threads 1`, `2` and `4`: a write acknowledged through any worker is
//! never followed by an older value from another worker's cache; a cached
//! entry (a nil included) goes when its slot changes owner; a script that
//! may write holds its whole slot; a frozen master's keys stop being served
//! from the cache before its replica could take a write. The checker at
//! the end runs writers and readers spread over every worker.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

/// The cache on, connections placed on the workers in turn (so a few
/// connections cover every worker).
fn conf(threads: usize) -> String {
    format!("threads {threads}\nreply-cache yes\nplacement round-robin")
}

fn cache_stat(c: &mut Conn, name: &str) -> u64 {
    let r = c.cmd(&["INFO", "replycache"]);
    let text = String::from_utf8_lossy(r.as_bulk().unwrap_or_default()).to_string();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO replycache"))
}

/// One connection on each worker (at most 64 tries).
fn one_per_worker(m: &Mithril, threads: usize) -> Vec<Conn> {
    let mut by_worker: HashMap<String, Conn> = HashMap::new();
    for _ in 0..64 {
        let mut c = m.conn();
        let w = worker_of(&mut c);
        by_worker.entry(w).or_insert(c);
        if by_worker.len() == threads {
            break;
        }
    }
    assert_eq!(by_worker.len(), threads, "a connection on every worker");
    let mut v: Vec<(String, Conn)> = by_worker.into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.into_iter().map(|(_, c)| c).collect()
}

/// Until every given connection's worker has a hit on `key` (its fills
/// are open: every master tracked).
fn cached_everywhere(conns: &mut [Conn], key: &str) {
    for c in conns.iter_mut() {
        wait_until(
            "the key cached on this worker",
            Duration::from_secs(10),
            || {
                c.cmd(&["GET", key]);
                let hits = cache_stat(c, "reply_cache_hits");
                c.cmd(&["GET", key]);
                (cache_stat(c, "reply_cache_hits") > hits).then_some(())
            },
        );
    }
}

fn acknowledged_writes_are_seen_by_every_worker(threads: usize) {
    let (_cluster, m) = cluster_and_mithril(&conf(threads));
    let mut conns = one_per_worker(&m, threads);
    let key = "ack:{w}";
    assert_eq!(conns[0].cmd(&["SET", key, "0"]), ok());
    cached_everywhere(&mut conns, key);
    let (mut stale, mut reads) = (0, 0);
    for i in 1..=400u32 {
        // Every worker serves the current value from its cache...
        let v = (i - 1).to_string();
        for c in conns.iter_mut() {
            c.cmd(&["GET", key]);
        }
        // ...then one of them takes a write; once it is acknowledged, no
        // worker may answer the value before it.
        let w = i as usize % threads;
        let v2 = i.to_string();
        assert_eq!(conns[w].cmd(&["SET", key, &v2]), ok());
        for (j, c) in conns.iter_mut().enumerate() {
            let got = c.cmd(&["GET", key]);
            reads += 1;
            if got != bulk(&v2) {
                stale += 1;
                eprintln!("write {i} on worker {w}: worker {j} read {got:?} (was {v})");
            }
        }
    }
    let hits = cache_stat(&mut conns[0], "reply_cache_hits");
    println!(
        "threads {threads}: {reads} reads after acknowledged writes, {stale} stale, {hits} hits"
    );
    assert_eq!(stale, 0, "reads older than an acknowledged write");
    assert!(hits > 400, "the check ran without the cache ({hits} hits)");
}

#[test]
fn an_acknowledged_write_is_never_followed_by_an_older_hit_threads_1() {
    acknowledged_writes_are_seen_by_every_worker(1);
}

#[test]
fn an_acknowledged_write_is_never_followed_by_an_older_hit_threads_2() {
    acknowledged_writes_are_seen_by_every_worker(2);
}

#[test]
fn an_acknowledged_write_is_never_followed_by_an_older_hit_threads_4() {
    acknowledged_writes_are_seen_by_every_worker(4);
}

/// A cached nil of an empty slot, the slot moved to another master, the
/// key then written directly there: the next reads find the value once
/// mithril has the new map (and, at more threads, a write through mithril
/// is seen by every worker at once).
fn a_cached_nil_goes_with_its_slot(threads: usize) {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("{}\ntopology-refresh-secs 1", conf(threads)),
    );
    let mut conns = one_per_worker(&m, threads);
    let key = format!("nil:{}", random_u64());
    let slot = key_slot(key.as_bytes());
    cached_everywhere(&mut conns, &key);
    assert_eq!(conns[0].cmd(&["GET", &key]), Reply::Bulk(None));
    let from = cluster.port_for_slot(slot);
    let to = cluster
        .nodes
        .iter()
        .position(|n| n.port != from && n.master_of.is_none())
        .unwrap();
    assert_eq!(cluster.migrate_slot(slot, to, 10), 0, "the slot was empty");
    let mut owner = cluster.nodes[to].conn();
    assert_eq!(owner.cmd(&["SET", &key, "there"]), ok());
    for c in conns.iter_mut() {
        wait_until(
            "the value written on the slot's new owner",
            Duration::from_secs(10),
            || (c.cmd(&["GET", &key]) == bulk("there")).then_some(()),
        );
    }
    // Cached again on every worker, then written through one of them.
    cached_everywhere(&mut conns, &key);
    assert_eq!(conns[threads - 1].cmd(&["SET", &key, "through"]), ok());
    for c in conns.iter_mut() {
        assert_eq!(c.cmd(&["GET", &key]), bulk("through"));
    }
}

#[test]
fn a_cached_nil_goes_when_its_slot_moves_threads_1() {
    a_cached_nil_goes_with_its_slot(1);
}

#[test]
fn a_cached_nil_goes_when_its_slot_moves_threads_2() {
    a_cached_nil_goes_with_its_slot(2);
}

#[test]
fn a_cached_nil_goes_when_its_slot_moves_threads_4() {
    a_cached_nil_goes_with_its_slot(4);
}

/// A script that writes a key it did not declare (same slot), pipelined
/// with a GET of that key: the GET sees the script's write, on the same
/// worker and on the others once the script is acknowledged.
fn a_writing_script_holds_its_slot(threads: usize) {
    let (_cluster, m) = cluster_and_mithril(&conf(threads));
    let mut conns = one_per_worker(&m, threads);
    let script = "redis.call('set', KEYS[1], ARGV[1]); redis.call('set', '{t}b', ARGV[1])";
    assert_eq!(conns[0].cmd(&["SET", "{t}b", "0"]), ok());
    cached_everywhere(&mut conns, "{t}b");
    let mut stale = 0;
    for i in 1..=100u32 {
        let v = i.to_string();
        let w = i as usize % threads;
        let replies = conns[w].pipeline(&[
            argv(&["EVAL", script, "1", "{t}a", &v]),
            argv(&["GET", "{t}b"]),
        ]);
        assert_eq!(replies[0], Reply::Bulk(None), "EVAL's reply");
        if replies[1] != bulk(&v) {
            stale += 1;
            eprintln!("pipelined GET after script {i}: {:?}", replies[1]);
        }
        for c in conns.iter_mut() {
            if c.cmd(&["GET", "{t}b"]) != bulk(&v) {
                stale += 1;
            }
            // Read twice: the second may be a hit again.
            if c.cmd(&["GET", "{t}b"]) != bulk(&v) {
                stale += 1;
            }
        }
    }
    assert_eq!(stale, 0, "reads older than a script's acknowledged write");
    assert!(cache_stat(&mut conns[0], "reply_cache_hits") > 0);
}

#[test]
fn a_script_writing_an_undeclared_key_is_never_read_stale_threads_1() {
    a_writing_script_holds_its_slot(1);
}

#[test]
fn a_script_writing_an_undeclared_key_is_never_read_stale_threads_2() {
    a_writing_script_holds_its_slot(2);
}

#[test]
fn a_script_writing_an_undeclared_key_is_never_read_stale_threads_4() {
    a_writing_script_holds_its_slot(4);
}

/// The master of a cached key is frozen (SIGSTOP) and its replica takes
/// over; a write is made directly on the new master. Readers on every
/// worker read the key all along: no read sent after that write was
/// acknowledged returns the old value, and the cache stops answering the
/// frozen master's key within the tracker's heartbeat bound.
fn a_frozen_master_is_not_served_from_the_cache(threads: usize) {
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("{}\ntopology-refresh-secs 1", conf(threads)),
    );
    let mut conns = one_per_worker(&m, threads);
    let key = "frozen:key";
    let slot = key_slot(key.as_bytes());
    assert_eq!(conns[0].cmd(&["SET", key, "old"]), ok());
    cached_everywhere(&mut conns, key);
    let port = cluster.port_for_slot(slot);
    let idx = cluster.nodes.iter().position(|n| n.port == port).unwrap();
    let master_id = cluster.nodes[idx].id.clone();
    let replica = cluster
        .nodes
        .iter()
        .position(|n| n.master_of.as_deref() == Some(master_id.as_str()))
        .expect("a replica");
    // (read sent at, answered at, value) per reader.
    let log: Arc<Mutex<Vec<(Instant, Instant, Reply)>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let frozen_at = Instant::now();
    let pid = cluster.nodes[idx].pid as i32;
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let readers: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let (log, stop) = (log.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    c.send(&[b"GET", key.as_bytes()]);
                    let r = match c.try_read_reply(Duration::from_secs(60)) {
                        Ok(r) => r,
                        Err(_) => break,
                    };
                    log.lock().unwrap().push((sent, Instant::now(), r));
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();
    wait_until("the replica promoted", Duration::from_secs(60), || {
        let r = cluster.nodes[replica].conn().cmd(&["ROLE"]);
        (r.as_array().first() == Some(&bulk("master"))).then_some(())
    });
    let mut node = cluster.nodes[replica].conn();
    assert_eq!(node.cmd(&["SET", key, "new"]), ok());
    let acked = Instant::now();
    wait_until(
        "a reader to see the new value",
        Duration::from_secs(30),
        || {
            log.lock()
                .unwrap()
                .iter()
                .any(|(s, _, r)| *s > acked && *r == bulk("new"))
                .then_some(())
        },
    );
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    // Until here the old master answers nothing, so an "old" answered
    // before this instant came from mithril's cache. A read it took while
    // frozen (sent before mithril installed the new map) it answers "old"
    // once let go, as it would a direct client: that is not the cache's.
    let thawed = Instant::now();
    // SAFETY: as above; the frozen node is let go before the cluster drops.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    for r in readers {
        let _ = r.join();
    }
    cluster.kill(idx);
    let log = log.lock().unwrap();
    let stale_after_ack = log
        .iter()
        .filter(|(s, a, r)| *s > acked && *a < thawed && *r == bulk("old"))
        .count();
    let old_from_thawed = log
        .iter()
        .filter(|(s, a, r)| *s > acked && *a >= thawed && *r == bulk("old"))
        .count();
    let errors: Vec<String> = log
        .iter()
        .filter(|(_, _, r)| *r != bulk("old") && *r != bulk("new"))
        .map(|(s, _, r)| format!("{:?} at {:?}", r, s.duration_since(frozen_at)))
        .collect();
    // The last answer of "old" served without waiting (a hit) after the freeze.
    let last_old_hit = log
        .iter()
        .filter(|(s, a, r)| *r == bulk("old") && *a - *s < Duration::from_millis(50))
        .map(|(s, _, _)| s.duration_since(frozen_at))
        .max();
    println!(
        "threads {threads}: {} reads, promoted after {:?}, last old hit {:?} after the freeze, {stale_after_ack} stale after the new master's ack, {old_from_thawed} answered by the old master once let go, errors: {errors:?}",
        log.len(),
        acked.duration_since(frozen_at),
        last_old_hit
    );
    assert_eq!(stale_after_ack, 0, "hits older than the new master's write");
}

#[test]
fn a_frozen_master_is_not_served_from_the_cache_threads_1() {
    a_frozen_master_is_not_served_from_the_cache(1);
}

#[test]
fn a_frozen_master_is_not_served_from_the_cache_threads_2() {
    a_frozen_master_is_not_served_from_the_cache(2);
}

#[test]
fn a_frozen_master_is_not_served_from_the_cache_threads_4() {
    a_frozen_master_is_not_served_from_the_cache(4);
}

/// The highest value completed per key, and when; `true` for a write
/// made directly on the node.
type Completed = Vec<(u64, Instant, bool)>;

/// Writers (through mithril on every worker, and directly on the nodes)
/// and readers (on every worker) on a few keys: a read may not return a
/// value older than the newest write acknowledged before it was sent
/// through mithril, nor older than a direct write acknowledged a window
/// (the node's invalidation's round trip) before it.
fn linearizable_reads(threads: usize) {
    let secs: u64 = std::env::var("MITHRIL_LINEARIZABILITY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let (cluster, m) = cluster_and_mithril(&conf(threads));
    const KEYS: usize = 4;
    const DIRECT_WINDOW: Duration = Duration::from_millis(50);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("lin:{i}")).collect();
    let node_addrs: Vec<String> = keys
        .iter()
        .map(|k| cluster.node_for_slot(key_slot(k.as_bytes())).addr())
        .collect();
    let mut probe = m.conn();
    for k in &keys {
        probe.cmd(&["SET", k, "0"]);
    }
    let done: Arc<Vec<Mutex<Completed>>> = Arc::new(
        (0..KEYS)
            .map(|_| Mutex::new(vec![(0, Instant::now(), false)]))
            .collect(),
    );
    let counter = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let stale_through = Arc::new(AtomicU64::new(0));
    let stale_direct = Arc::new(AtomicU64::new(0));
    // Writers: one per worker through mithril, and one direct.
    let mut writer_conns: Vec<Option<Conn>> =
        one_per_worker(&m, threads).into_iter().map(Some).collect();
    writer_conns.push(None);
    let mut writers = Vec::new();
    for (w, conn) in writer_conns.into_iter().enumerate() {
        let (done, counter, stop, keys) =
            (done.clone(), counter.clone(), stop.clone(), keys.clone());
        let nodes = node_addrs.clone();
        writers.push(std::thread::spawn(move || {
            let direct = conn.is_none();
            let mut conns: Vec<Conn> = match conn {
                Some(c) => vec![c],
                None => nodes.iter().map(|a| Conn::connect(a)).collect(),
            };
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                let k = i % KEYS;
                i += 1;
                // Writes of a key are serialised by its lock, so values
                // only grow per key and "completed" is well defined.
                let mut d = done[k].lock().unwrap();
                let v = counter.fetch_add(1, Ordering::Relaxed);
                let conn = if direct { &mut conns[k] } else { &mut conns[0] };
                assert_eq!(conn.cmd(&["SET", &keys[k], &v.to_string()]), ok());
                d.push((v, Instant::now(), direct));
                drop(d);
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    let mut readers = Vec::new();
    for c in one_per_worker(&m, threads)
        .into_iter()
        .chain(one_per_worker(&m, threads))
    {
        let (done, stop, keys) = (done.clone(), stop.clone(), keys.clone());
        let (st, sd) = (stale_through.clone(), stale_direct.clone());
        let mut c = c;
        readers.push(std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let k = i % KEYS;
                i += 1;
                let sent = Instant::now();
                // The newest write through mithril completed before the
                // read was sent, and the newest direct one completed a
                // window before.
                let (through, direct) = {
                    let d = done[k].lock().unwrap();
                    let t = d.iter().rev().find(|x| !x.2).map_or(0, |x| x.0);
                    let dr = d
                        .iter()
                        .rev()
                        .find(|x| x.1 + DIRECT_WINDOW <= sent)
                        .map_or(0, |x| x.0);
                    (t, dr)
                };
                let r = c.cmd(&["GET", &keys[k]]);
                let got: u64 = std::str::from_utf8(r.as_bulk().expect("a value"))
                    .unwrap()
                    .parse()
                    .unwrap();
                if got < through {
                    st.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "{}: read {got}, older than {through} written through mithril",
                        keys[k]
                    );
                } else if got < direct {
                    sd.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "{}: read {got}, older than {direct} written directly",
                        keys[k]
                    );
                }
                reads += 1;
            }
            reads
        }));
    }
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for t in writers {
        t.join().unwrap();
    }
    let reads: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    let hits = cache_stat(&mut probe, "reply_cache_hits");
    let (st, sd) = (
        stale_through.load(Ordering::Relaxed),
        stale_direct.load(Ordering::Relaxed),
    );
    println!(
        "threads {threads}: {reads} reads checked in {secs} s, {hits} cache hits, stale: {st} after writes through mithril, {sd} after direct writes"
    );
    assert!(reads > 1000);
    assert!(hits > 0, "the check ran without the cache");
    assert_eq!(
        st, 0,
        "reads older than a write acknowledged through mithril"
    );
    assert_eq!(sd, 0, "reads older than a direct write past the window");
}

#[test]
fn every_read_is_current_threads_1() {
    linearizable_reads(1);
}

#[test]
fn every_read_is_current_threads_2() {
    linearizable_reads(2);
}

#[test]
fn every_read_is_current_threads_4() {
    linearizable_reads(4);
}
