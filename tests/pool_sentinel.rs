//! A Sentinel pool of two master-replica groups behind mithril, as
//! predixy's `SentinelServerPool` deploys it: three real sentinels
//! (`redis-server --sentinel`) watching groups `shard001` and `shard002`
//! (the names of predixy's own example). Started from predixy's
//! `conf/sentinel.conf` example with only the addresses changed; reads go
//! to the replicas their priority names; `SENTINEL FAILOVER` of one group
//! and a killed master of the other are each served from the new master
//! soon after `+switch-master` (the figure is printed); every write
//! mithril acknowledged is on the new master, and the writes caught in
//! the planned failover wait for it rather than fail. At threads 1, 2
//! and 4.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::*;

/// A key whose group (crc16 over two groups, predixy's modula) is `g`.
fn key_in(g: usize, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| crc16_xmodem(k.as_bytes()) as usize % 2 == g)
        .unwrap()
}

fn info(c: &mut Conn, section: &str) -> String {
    String::from_utf8_lossy(c.cmd(&["INFO", section]).as_bulk().unwrap_or_default()).into_owned()
}

fn gets(c: &mut Conn) -> i64 {
    info(c, "commandstats")
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The replica at index `r` follows the master at `m`, in sync.
fn replicate(set: &StandaloneSet, m: usize, r: usize) {
    assert_eq!(
        set.conn(r)
            .cmd(&["REPLICAOF", "127.0.0.1", &set.port(m).to_string()]),
        ok()
    );
    wait_until("a replica in sync", Duration::from_secs(15), || {
        info(&mut set.conn(r), "replication")
            .contains("master_link_status:up")
            .then_some(())
    });
}

/// Until the master at `m` has no write its replica lacks.
fn wait_replicated(set: &StandaloneSet, m: usize) {
    wait_until("the replica caught up", Duration::from_secs(10), || {
        let text = info(&mut set.conn(m), "replication");
        let master = text
            .lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))?
            .trim()
            .to_string();
        text.lines()
            .find(|l| l.starts_with("slave0:"))
            .filter(|l| l.contains(&format!("offset={master},")))
            .map(|_| ())
    });
}

/// Writes `prefix:N` for N = 0, 1, ... through mithril until stopped; the
/// keys acknowledged with +OK, and the other answers.
fn writer(
    addr: String,
    prefix: String,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<(Vec<String>, Vec<String>)> {
    thread::spawn(move || {
        let mut acked = Vec::new();
        let mut errors = Vec::new();
        let mut c = Conn::connect(&addr);
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let k = format!("{prefix}:{n}");
            n += 1;
            match c.try_pipeline(&[argv(&["SET", &k, "v"])]) {
                Ok(r) if r[0] == ok() => acked.push(k),
                Ok(r) => {
                    errors.push(format!("{:?}", r[0]));
                    thread::sleep(Duration::from_millis(2))
                }
                Err(e) => {
                    errors.push(e.to_string());
                    c = Conn::connect(&addr)
                }
            }
        }
        (acked, errors)
    })
}

/// Time from `switched` until a write through mithril to `key`'s group is
/// found on the server at `new_master`.
fn served_after(m: &str, new_master: &str, key: &str, switched: Instant) -> Duration {
    let mut c = Conn::connect(m);
    let mut direct = Conn::connect(new_master);
    let mut n = 0u64;
    wait_until("a write on the new master", Duration::from_secs(20), || {
        n += 1;
        let v = n.to_string();
        if c.cmd(&["SET", key, &v]) != ok() {
            thread::sleep(Duration::from_millis(5));
            return None;
        }
        (direct.cmd(&["GET", key]) == bulk(&v)).then(|| switched.elapsed())
    })
}

/// Subscribes to a sentinel's `+switch-master`; returns the connection.
fn switch_watcher(s: &Sentinel) -> Conn {
    let mut c = s.conn();
    let r = c.cmd(&["SUBSCRIBE", "+switch-master"]);
    assert_eq!(r.as_array()[0], bulk("subscribe"));
    c
}

/// Waits for `+switch-master` of `group`; the new master's address.
fn switched(c: &mut Conn, group: &str) -> (String, Instant) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline {
        let Ok(r) = c.try_read_reply(Duration::from_secs(1)) else {
            continue;
        };
        let parts = r.as_array();
        let text = parts[2].as_str().to_string();
        let w: Vec<&str> = text.split_whitespace().collect();
        if w.first() == Some(&group) {
            return (format!("{}:{}", w[3], w[4]), Instant::now());
        }
    }
    panic!("no +switch-master for {group} within 40 s");
}

/// `threads`: a `WorkerThreads` line added to predixy's file (None: the
/// file exactly as predixy's example has it, addresses aside).
fn failover_is_served_from_the_new_master(threads: Option<usize>) {
    let mut set = StandaloneSet::start(4);
    replicate(&set, 0, 1);
    replicate(&set, 2, 3);
    let sentinels = SentinelSet::start(
        3,
        &[("shard001", set.port(0), 1), ("shard002", set.port(2), 1)],
    );
    let port = free_port();
    // predixy's conf/sentinel.conf example, uncommented; the addresses
    // changed, and WorkerThreads added when the test pins the threads.
    let list: String = sentinels
        .addrs()
        .iter()
        .map(|a| format!("        + {a}\n"))
        .collect();
    let conf = format!(
        "Bind 127.0.0.1:{port}\n{}\
         SentinelServerPool {{\n    Databases 16\n    Hash crc16\n    HashTag \"{{}}\"\n\
         \x20   Distribution modula\n    MasterReadPriority 60\n    StaticSlaveReadPriority 50\n\
         \x20   DynamicSlaveReadPriority 50\n    RefreshInterval 1\n    ServerTimeout 1\n\
         \x20   ServerFailureLimit 10\n    ServerRetryTimeout 1\n    KeepAlive 120\n\
         \x20   Sentinels {{\n{list}    }}\n    Group shard001 {{\n    }}\n    Group shard002 {{\n    }}\n}}\n",
        threads.map_or(String::new(), |n| format!("WorkerThreads {n}\n"))
    );
    let dir = make_temp_dir();
    let path = dir.join("predixy.conf");
    std::fs::write(&path, conf).unwrap();
    let (mut proxy, mut c) = start_from_file(bin(), &path, port, |c| {
        // Ready once both groups have a master.
        c.cmd(&["SET", &key_in(0, "ready"), "1"]) == ok()
            && c.cmd(&["SET", &key_in(1, "ready"), "1"]) == ok()
    });
    let addr = format!("127.0.0.1:{port}");
    let (k1, k2) = (key_in(0, "k"), key_in(1, "k"));
    assert_eq!(c.cmd(&["SET", &k1, "a"]), ok());
    assert_eq!(c.cmd(&["SET", &k2, "b"]), ok());
    assert_eq!(
        set.conn(0).cmd(&["GET", &k1]),
        bulk("a"),
        "group 0's master"
    );
    assert_eq!(
        set.conn(2).cmd(&["GET", &k2]),
        bulk("b"),
        "group 1's master"
    );
    // Master 60 over dynamic replicas 50: reads stay on the masters.
    wait_replicated(&set, 0);
    let before = (gets(&mut set.conn(0)), gets(&mut set.conn(1)));
    for _ in 0..20 {
        assert_eq!(c.cmd(&["GET", &k1]), bulk("a"));
    }
    assert_eq!(gets(&mut set.conn(0)) - before.0, 20);
    assert_eq!(gets(&mut set.conn(1)) - before.1, 0);

    // 1. SENTINEL FAILOVER of shard001 under a stream of writes.
    let mut watch = switch_watcher(&sentinels.sentinels[1]);
    let stop = Arc::new(AtomicBool::new(false));
    let tag = format!("{{{k1}}}");
    let w = writer(addr.clone(), format!("{tag}w"), stop.clone());
    thread::sleep(Duration::from_millis(200));
    let r = sentinels.sentinels[0]
        .conn()
        .cmd(&["SENTINEL", "FAILOVER", "shard001"]);
    assert_eq!(r, ok());
    let (new1, at1) = switched(&mut watch, "shard001");
    assert_eq!(new1, format!("127.0.0.1:{}", set.port(1)));
    let took1 = served_after(&addr, &new1, &format!("{tag}probe"), at1);
    stop.store(true, Ordering::Relaxed);
    let (acked, errors) = w.join().unwrap();
    // Writes caught in the promotion waited for the new master: none failed.
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let mut direct = Conn::connect(&new1);
    let lost: Vec<&String> = acked
        .iter()
        .filter(|k| direct.cmd(&["EXISTS", k]) != Reply::Int(1))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged writes lost: {} of {}: {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)]
    );
    assert!(acked.len() > 10, "the writer wrote {}", acked.len());

    // 2. The master of shard002 killed.
    wait_replicated(&set, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let tag2 = format!("{{{k2}}}");
    let w = writer(addr.clone(), format!("{tag2}w"), stop.clone());
    thread::sleep(Duration::from_millis(200));
    // The writes so far reached the replica before the kill.
    stop.store(true, Ordering::Relaxed);
    let (acked_before, _) = w.join().unwrap();
    wait_replicated(&set, 2);
    set.kill(2);
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(addr.clone(), format!("{tag2}x"), stop.clone());
    let (new2, at2) = switched(&mut watch, "shard002");
    assert_eq!(new2, format!("127.0.0.1:{}", set.port(3)));
    let took2 = served_after(&addr, &new2, &format!("{tag2}probe"), at2);
    stop.store(true, Ordering::Relaxed);
    let (acked_after, errors2) = w.join().unwrap();
    let mut direct = Conn::connect(&new2);
    for k in acked_before.iter().chain(&acked_after) {
        assert_eq!(
            direct.cmd(&["EXISTS", k]),
            Reply::Int(1),
            "{k} acknowledged, then lost"
        );
    }
    eprintln!(
        "threads {threads:?}: served from the new master {} ms after +switch-master \
         (SENTINEL FAILOVER, no error), {} ms (killed master, {} errors while no master \
         answered); {} + {} writes acknowledged, none lost",
        took1.as_millis(),
        took2.as_millis(),
        errors2.len(),
        acked.len(),
        acked_before.len() + acked_after.len()
    );
    // A generous bound: the figure above is what matters.
    assert!(took1 < Duration::from_secs(3), "{took1:?}");
    assert!(took2 < Duration::from_secs(3), "{took2:?}");
    // The proxy still serves both groups.
    assert_eq!(c.cmd(&["GET", &k1]), bulk("a"));
    assert_eq!(c.cmd(&["GET", &k2]), bulk("b"));
    let _ = proxy.0.kill();
    let _ = proxy.0.wait();
    remove_temp_dir(&dir);
}

#[test]
fn failover_is_served_from_the_new_master_threads_1() {
    failover_is_served_from_the_new_master(Some(1));
}

#[test]
fn failover_is_served_from_the_new_master_as_predixys_example_has_it() {
    failover_is_served_from_the_new_master(None);
}

#[test]
fn failover_is_served_from_the_new_master_threads_2() {
    failover_is_served_from_the_new_master(Some(2));
}

#[test]
fn failover_is_served_from_the_new_master_threads_4() {
    failover_is_served_from_the_new_master(Some(4));
}

#[test]
fn reads_go_to_replicas_of_higher_priority_and_those_sentinel_drops_leave() {
    let mut set = StandaloneSet::start(3);
    replicate(&set, 0, 1);
    replicate(&set, 0, 2);
    let sentinels = SentinelSet::start(3, &[("shard001", set.port(0), 2)]);
    let port = free_port();
    let mut conf = format!(
        "port {port}\npool s listen 127.0.0.1:{port}\npool s group shard001\n\
         pool s sentinel-replica-read-priority 60\npool s refresh-interval 200\n"
    );
    // One sentinel written: the other two are learnt from it.
    conf.push_str(&format!("pool s sentinel {}\n", sentinels.addrs()[0]));
    let m = Mithril::start(bin(), &[], &conf);
    wait_until(
        "the other sentinels learnt",
        Duration::from_secs(10),
        || (m.log().matches("learnt from the others").count() == 2).then_some(()),
    );
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "r", "1"]), ok());
    wait_replicated(&set, 0);
    let g = |set: &StandaloneSet| {
        [
            gets(&mut set.conn(0)),
            gets(&mut set.conn(1)),
            gets(&mut set.conn(2)),
        ]
    };
    let before = g(&set);
    for _ in 0..40 {
        c.cmd(&["GET", "r"]);
    }
    let after = g(&set);
    assert_eq!(after[0] - before[0], 0, "the master takes no read");
    assert_eq!((after[1] - before[1]) + (after[2] - before[2]), 40);
    // A replica killed: once Sentinel says it is down, its reads move to
    // the other one.
    set.kill(2);
    wait_until(
        "reads on the live replica only",
        Duration::from_secs(20),
        || {
            let before = gets(&mut set.conn(1));
            let ok_all = (0..10).all(|_| c.cmd(&["GET", "r"]) == bulk("1"));
            (ok_all && gets(&mut set.conn(1)) - before == 10).then_some(())
        },
    );
}

/// A Sentinel pool's groups changed by a reload: a group the sentinels
/// watch added to the pool, under clients on every worker that keep their
/// connections; keys are then placed over both groups by predixy's rule
/// (crc16 modulo the groups), each found on its group's master.
fn sentinel_groups_change_live(threads: usize) {
    let set = StandaloneSet::start(2);
    let sentinels = SentinelSet::start(
        3,
        &[("shard001", set.port(0), 0), ("shard002", set.port(1), 0)],
    );
    let port = free_port();
    let mut conf = format!(
        "threads {threads}\nport {port}\npool s listen 127.0.0.1:{port}\npool s group shard001\n\
         pool s refresh-interval 200\n"
    );
    for a in sentinels.addrs() {
        conf.push_str(&format!("pool s sentinel {a}\n"));
    }
    let m = Mithril::start(bin(), &[], &conf);
    let mut clients: Vec<Conn> = (0..2 * threads).map(|_| m.conn()).collect();
    let (k0, k1) = (key_in(0, "g0-"), key_in(1, "g1-"));
    // One group: every key on its master.
    assert_eq!(clients[0].cmd(&["SET", &k1, "before"]), ok());
    assert_eq!(set.conn(0).cmd(&["GET", &k1]), bulk("before"));
    let steady = load::Steady::start(m.conn());

    let mut lines = vec![
        "pool s group shard001".to_string(),
        "pool s group shard002".to_string(),
    ];
    lines.extend(
        sentinels
            .addrs()
            .iter()
            .map(|a| format!("pool s sentinel {a}")),
    );
    m.reload_lines(&mut clients[0], "pool s group ", &lines[..2], "groups now");
    for (i, c) in clients.iter_mut().enumerate() {
        let v = format!("after{i}");
        assert_eq!(c.cmd(&["SET", &k0, &v]), ok());
        assert_eq!(
            set.conn(0).cmd(&["GET", &k0]),
            bulk(&v),
            "threads {threads}: {k0} on shard001"
        );
        assert_eq!(c.cmd(&["SET", &k1, &v]), ok());
        assert_eq!(
            set.conn(1).cmd(&["GET", &k1]),
            bulk(&v),
            "threads {threads}: {k1} on shard002"
        );
        assert_eq!(c.cmd(&["GET", &k1]), bulk(&v));
    }
    load::all_kept(&mut clients, steady);
}

#[test]
fn sentinel_groups_change_live_threads_1() {
    sentinel_groups_change_live(1);
}

#[test]
fn sentinel_groups_change_live_threads_2() {
    sentinel_groups_change_live(2);
}

#[test]
fn sentinel_groups_change_live_threads_4() {
    sentinel_groups_change_live(4);
}
