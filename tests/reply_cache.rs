//! The reply cache (`reply-cache yes`) against real clusters: hits that
//! never reach a node, reads of one's own writes, invalidations from
//! writes made directly on the nodes (within a measured window), node
//! flushes, expiry, a killed tracker, CONFIG SET. The promises across
//! workers, and the linearizability checker, are in reply_cache_workers.rs.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::*;

/// No thread count of its own: the default (and the Makefile's second
/// pass, `threads 4` on the shared pipes) applies. The promises across
/// workers are tested at 1, 2 and 4 in `reply_cache_workers.rs`.
const CACHE_ON: &str = "reply-cache yes";

/// INFO replycache's fields of mithril.
fn cache_info(c: &mut Conn) -> HashMap<String, String> {
    let r = c.cmd(&["INFO", "replycache"]);
    let text = String::from_utf8_lossy(r.as_bulk().unwrap_or_default()).to_string();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn stat(c: &mut Conn, name: &str) -> u64 {
    cache_info(c)
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO replycache"))
}

/// GETs a node has run (its INFO commandstats).
fn node_gets(node: &mut Conn) -> u64 {
    let r = node.cmd(&["INFO", "commandstats"]);
    let text = String::from_utf8_lossy(r.as_bulk().unwrap_or_default()).to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Wait until every master is tracked (fills are paused before).
fn wait_tracked(m: &Mithril) {
    let mut c = m.conn();
    wait_until(
        "the reply cache to track every master",
        Duration::from_secs(10),
        || {
            // A GET of a fresh key arms a fill once trackers are up: repeat
            // until one is admitted.
            let k = format!("probe:{}", random_u64());
            c.cmd(&["GET", &k]);
            (stat(&mut c, "reply_cache_fills_admitted") > 0).then_some(())
        },
    );
}

fn start(extra: &str) -> (RedisCluster, Mithril) {
    let (cluster, m) = cluster_and_mithril(extra);
    wait_tracked(&m);
    (cluster, m)
}

#[test]
fn a_hit_is_answered_without_the_node() {
    let (cluster, m) = start(CACHE_ON);
    let mut c = m.conn();
    let key = "hot:key";
    assert_eq!(c.cmd(&["SET", key, "v1"]), ok());
    assert_eq!(c.cmd(&["GET", key]), bulk("v1"), "the fill");
    let mut node = cluster.node_for_slot(key_slot(key.as_bytes())).conn();
    let before = node_gets(&mut node);
    let hits = stat(&mut c, "reply_cache_hits");
    for _ in 0..100 {
        assert_eq!(c.cmd(&["GET", key]), bulk("v1"));
    }
    assert_eq!(node_gets(&mut node), before, "hits reached the node");
    assert!(stat(&mut c, "reply_cache_hits") >= hits + 100);
    // A missing key is cached as nil, in both protocols.
    assert_eq!(c.cmd(&["GET", "no:such:key"]), Reply::Bulk(None));
    let before = node_gets(&mut node);
    let mut c3 = m.conn();
    c3.cmd(&["HELLO", "3"]);
    assert_eq!(c3.cmd(&["GET", "no:such:key"]), Reply::Null);
    assert_eq!(c.cmd(&["GET", "no:such:key"]), Reply::Bulk(None));
    let node2 = cluster.node_for_slot(key_slot(b"no:such:key"));
    if node2.addr() == cluster.node_for_slot(key_slot(key.as_bytes())).addr() {
        assert_eq!(node_gets(&mut node), before);
    }
}

/// GETs and MGETs a node has run.
fn node_reads(node: &mut Conn) -> u64 {
    let r = node.cmd(&["INFO", "commandstats"]);
    let text = String::from_utf8_lossy(r.as_bulk().unwrap_or_default()).to_string();
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("cmdstat_get:calls=")
                .or_else(|| l.strip_prefix("cmdstat_mget:calls="))
        })
        .filter_map(|r| r.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn an_mget_is_answered_from_the_cache_when_every_key_hits() {
    let (cluster, m) = start(CACHE_ON);
    let mut c = m.conn();
    // Keys over all three masters, and three in one slot.
    let keys: Vec<String> = (0..12).map(|i| format!("{{mg{i}}}k")).collect();
    let one_slot: Vec<String> = (0..3).map(|i| format!("{{same}}k{i}")).collect();
    for k in keys.iter().chain(&one_slot) {
        c.cmd(&["SET", k, &format!("v-{k}")]);
    }
    let expect =
        |ks: &[String]| Reply::Array(Some(ks.iter().map(|k| bulk(&format!("v-{k}"))).collect()));
    let mget = |c: &mut Conn, ks: &[String]| {
        let mut a = vec!["MGET"];
        a.extend(ks.iter().map(String::as_str));
        c.cmd(&a)
    };
    // The first MGETs fill (one opt-in per part), the next ones hit.
    assert_eq!(mget(&mut c, &keys), expect(&keys));
    assert_eq!(mget(&mut c, &one_slot), expect(&one_slot));
    let mut nodes: Vec<Conn> = cluster.masters().iter().map(|n| n.conn()).collect();
    let before: u64 = nodes.iter_mut().map(node_reads).sum();
    for _ in 0..20 {
        assert_eq!(mget(&mut c, &keys), expect(&keys));
        assert_eq!(mget(&mut c, &one_slot), expect(&one_slot));
        // A GET of a key an MGET filled is a hit too.
        assert_eq!(c.cmd(&["GET", &keys[3]]), bulk(&format!("v-{}", keys[3])));
    }
    let after: u64 = nodes.iter_mut().map(node_reads).sum();
    assert_eq!(after, before, "hits reached the nodes");
    // A write of one key: the next MGET reads it from its node, in place.
    c.cmd(&["SET", &keys[5], "new"]);
    let mut want = expect(&keys);
    if let Reply::Array(Some(items)) = &mut want {
        items[5] = bulk("new");
    }
    assert_eq!(mget(&mut c, &keys), want);
    // Missing keys are nils, in RESP3 too.
    let mut c3 = m.conn();
    c3.cmd(&["HELLO", "3"]);
    let missing = ["{mg1}nope".to_string(), "{mg2}nope".to_string()];
    assert_eq!(
        mget(&mut c3, &missing),
        Reply::Array(Some(vec![Reply::Null, Reply::Null]))
    );
    assert_eq!(
        mget(&mut c3, &missing),
        Reply::Array(Some(vec![Reply::Null, Reply::Null]))
    );
    assert_eq!(
        mget(&mut c, &missing),
        Reply::Array(Some(vec![Reply::Bulk(None), Reply::Bulk(None)]))
    );
}

#[test]
fn a_session_reads_its_own_writes_on_every_master() {
    let (cluster, m) = start(CACHE_ON);
    let mut c = m.conn();
    // Keys on all three masters (hash tags spread over the slots).
    let keys: Vec<String> = (0..60).map(|i| format!("{{t{i}}}k")).collect();
    let masters: std::collections::HashSet<String> = keys
        .iter()
        .map(|k| cluster.node_for_slot(key_slot(k.as_bytes())).addr())
        .collect();
    assert_eq!(masters.len(), 3);
    for round in 0..20 {
        for k in &keys {
            let v = format!("v{round}");
            assert_eq!(c.cmd(&["SET", k, &v]), ok());
            assert_eq!(c.cmd(&["GET", k]), bulk(&v), "{k} after SET, round {round}");
            assert_eq!(c.cmd(&["GET", k]), bulk(&v), "{k} again");
        }
        // Pipelined: write, read, write, read in one batch.
        let mut cmds = Vec::new();
        for k in &keys {
            cmds.push(argv(&["SET", k, &format!("p{round}a")]));
            cmds.push(argv(&["GET", k]));
            cmds.push(argv(&["APPEND", k, "b"]));
            cmds.push(argv(&["GET", k]));
        }
        let replies = c.pipeline(&cmds);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(replies[4 * i + 1], bulk(&format!("p{round}a")), "{k}");
            assert_eq!(replies[4 * i + 3], bulk(&format!("p{round}ab")), "{k}");
        }
        // Deletions and renames through mithril.
        let k = &keys[round % keys.len()];
        assert_eq!(c.cmd(&["GET", k]), bulk(&format!("p{round}ab")));
        assert_eq!(c.cmd(&["DEL", k]), Reply::Int(1));
        assert_eq!(c.cmd(&["GET", k]), Reply::Bulk(None));
        let (a, b) = (format!("{{r{round}}}a"), format!("{{r{round}}}b"));
        c.cmd(&["SET", &a, "x"]);
        c.cmd(&["SET", &b, "y"]);
        assert_eq!(c.cmd(&["GET", &b]), bulk("y"));
        assert_eq!(c.cmd(&["RENAME", &a, &b]), ok());
        assert_eq!(c.cmd(&["GET", &b]), bulk("x"), "RENAME's destination");
        assert_eq!(c.cmd(&["GET", &a]), Reply::Bulk(None), "RENAME's source");
        // A transaction's writes, and a script's.
        c.cmd(&["GET", &a]);
        assert_eq!(c.cmd(&["MULTI"]), ok());
        c.cmd(&["SET", &a, "in-txn"]);
        assert_eq!(c.cmd(&["EXEC"]).as_array().len(), 1);
        assert_eq!(c.cmd(&["GET", &a]), bulk("in-txn"));
        c.cmd(&[
            "EVAL",
            "return redis.call('set', KEYS[1], ARGV[1])",
            "1",
            &a,
            "by-script",
        ]);
        assert_eq!(c.cmd(&["GET", &a]), bulk("by-script"));
        // EVALSHA and FCALL write their declared keys too: pipelined with
        // the read, so that only the dispatch-time invalidation can win.
        let sha = c.cmd(&[
            "SCRIPT",
            "LOAD",
            "return redis.call('set', KEYS[1], ARGV[1])",
        ]);
        let sha = sha.as_str().to_string();
        c.cmd(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=rw\nredis.register_function('setk', function(k, a) return redis.call('set', k[1], a[1]) end)",
        ]);
        assert_eq!(c.cmd(&["GET", &a]), bulk("by-script"));
        let r = c.pipeline(&[
            argv(&["EVALSHA", &sha, "1", &a, "by-sha"]),
            argv(&["GET", &a]),
            argv(&["FCALL", "setk", "1", &a, "by-function"]),
            argv(&["GET", &a]),
        ]);
        assert_eq!(r[1], bulk("by-sha"), "GET after EVALSHA");
        assert_eq!(r[3], bulk("by-function"), "GET after FCALL");
        // A cross-slot write (fan-out).
        c.cmd(&["GET", &keys[0]]);
        c.cmd(&["GET", &keys[1]]);
        assert_eq!(c.cmd(&["MSET", &keys[0], "m0", &keys[1], "m1"]), ok());
        assert_eq!(c.cmd(&["GET", &keys[0]]), bulk("m0"));
        assert_eq!(c.cmd(&["GET", &keys[1]]), bulk("m1"));
    }
    assert!(stat(&mut c, "reply_cache_hits") > 0);
}

/// Writes made on the node itself reach the cache as invalidations: the
/// largest window in which mithril still served the old value is printed.
#[test]
fn a_direct_write_on_the_node_invalidates_within_a_round_trip() {
    let (cluster, m) = start(CACHE_ON);
    let mut c = m.conn();
    let key = "direct:key";
    let mut node = cluster.node_for_slot(key_slot(key.as_bytes())).conn();
    let mut worst = Duration::ZERO;
    const WRITES: usize = 2000;
    for i in 0..WRITES {
        let v = format!("v{i}");
        // Make sure the current value is cached (a hit, or a fill).
        c.cmd(&["GET", key]);
        c.cmd(&["GET", key]);
        assert_eq!(node.cmd(&["SET", key, &v]), ok());
        let t0 = Instant::now();
        loop {
            let r = c.cmd(&["GET", key]);
            if r == bulk(&v) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(2),
                "write {i} never seen: {r:?}"
            );
        }
        worst = worst.max(t0.elapsed());
    }
    // The window is printed, not held to a bound (a test never fails on a
    // timing): without the invalidation a write would never be seen (the
    // max age is 300 s), which the loop above catches.
    println!("largest staleness window over {WRITES} direct writes: {worst:?}");
    assert!(stat(&mut c, "reply_cache_invalidations") >= WRITES as u64 / 2);
}

#[test]
fn expiry_and_a_flush_on_the_node_reach_the_cache() {
    let (cluster, m) = start(CACHE_ON);
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "exp:k", "v", "PX", "200"]), ok());
    assert_eq!(c.cmd(&["GET", "exp:k"]), bulk("v"));
    assert_eq!(c.cmd(&["GET", "exp:k"]), bulk("v"));
    wait_until(
        "the expired key to read nil",
        Duration::from_secs(5),
        || (c.cmd(&["GET", "exp:k"]) == Reply::Bulk(None)).then_some(()),
    );
    // FLUSHALL on the node directly.
    let keys: Vec<String> = (0..30).map(|i| format!("{{f{i}}}k")).collect();
    for k in &keys {
        c.cmd(&["SET", k, "v"]);
        assert_eq!(c.cmd(&["GET", k]), bulk("v"));
    }
    for n in cluster.masters() {
        assert_eq!(n.conn().cmd(&["FLUSHALL"]), ok());
    }
    wait_until(
        "every key to read nil after FLUSHALL",
        Duration::from_secs(5),
        || {
            keys.iter()
                .all(|k| c.cmd(&["GET", k]) == Reply::Bulk(None))
                .then_some(())
        },
    );
    // And through mithril.
    for k in &keys {
        c.cmd(&["SET", k, "w"]);
        assert_eq!(c.cmd(&["GET", k]), bulk("w"));
    }
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    for k in &keys {
        assert_eq!(c.cmd(&["GET", k]), Reply::Bulk(None), "{k} after FLUSHALL");
    }
}

/// The tracker's connection killed on the node: what it would have
/// received is lost, so the cache is flushed and fills resume once a new
/// tracker is up; no stale value is served meanwhile.
#[test]
fn a_killed_tracker_flushes_the_cache_and_fills_resume() {
    let (cluster, m) = start(CACHE_ON);
    let mut c = m.conn();
    let key = "kill:key";
    let addr = cluster.node_for_slot(key_slot(key.as_bytes())).addr();
    let mut node = Conn::connect(&addr);
    c.cmd(&["SET", key, "before"]);
    assert_eq!(c.cmd(&["GET", key]), bulk("before"));
    assert_eq!(c.cmd(&["GET", key]), bulk("before"));
    let flushes = stat(&mut c, "reply_cache_flushes");
    // Every client of the node but this one: the tracker among them.
    let me = node.cmd(&["CLIENT", "ID"]).as_int().to_string();
    let killed = node.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    assert!(killed.as_int() >= 1, "{killed:?} ({me})");
    // The write the dead tracker would have been told about.
    assert_eq!(node.cmd(&["SET", key, "after"]), ok());
    wait_until(
        "the flush after the tracker died",
        Duration::from_secs(5),
        || (stat(&mut c, "reply_cache_flushes") > flushes).then_some(()),
    );
    assert_eq!(c.cmd(&["GET", key]), bulk("after"));
    // Fills resume: a fresh key is cached again (its second GET a hit).
    wait_until("fills to resume", Duration::from_secs(10), || {
        let k = format!("resume:{}", random_u64());
        c.cmd(&["SET", &k, "v"]);
        c.cmd(&["GET", &k]);
        let hits = stat(&mut c, "reply_cache_hits");
        c.cmd(&["GET", &k]);
        (stat(&mut c, "reply_cache_hits") > hits).then_some(())
    });
    // And stay coherent.
    assert_eq!(c.cmd(&["GET", key]), bulk("after"));
    assert_eq!(node.cmd(&["SET", key, "later"]), ok());
    wait_until("the direct write", Duration::from_secs(2), || {
        (c.cmd(&["GET", key]) == bulk("later")).then_some(())
    });
}

/// The Prometheus endpoint's cache counters, as INFO shows them.
#[test]
fn the_metrics_endpoint_counts_what_info_counts() {
    let port = free_port();
    let (_cluster, m) = start(&format!("{CACHE_ON}\nmetrics-port {port}"));
    let mut c = m.conn();
    c.cmd(&["SET", "metric:k", "v"]);
    for _ in 0..10 {
        c.cmd(&["GET", "metric:k"]);
    }
    let metric = |name: &str| -> Option<u64> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        use std::io::{Read, Write};
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).ok()?;
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    };
    let hits = wait_until(
        "the metrics to show the hits",
        Duration::from_secs(5),
        || {
            let info = stat(&mut c, "reply_cache_hits");
            (info >= 9 && metric("mithril_reply_cache_hits_total") == Some(info)).then_some(info)
        },
    );
    assert!(hits >= 9);
    assert!(metric("mithril_reply_cache_entries{generation=\"current\"}").unwrap_or(0) >= 1);
}

#[test]
fn config_set_turns_the_cache_on_and_off() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "reply-cache"]).as_array()[1],
        bulk("no")
    );
    c.cmd(&["SET", "cs:k", "v"]);
    c.cmd(&["GET", "cs:k"]);
    c.cmd(&["GET", "cs:k"]);
    assert_eq!(stat(&mut c, "reply_cache_hits"), 0);
    assert_eq!(c.cmd(&["CONFIG", "SET", "reply-cache", "yes"]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "reply-cache"]).as_array()[1],
        bulk("yes")
    );
    wait_tracked(&m);
    c.cmd(&["GET", "cs:k"]);
    assert_eq!(c.cmd(&["GET", "cs:k"]), bulk("v"));
    assert!(stat(&mut c, "reply_cache_hits") > 0);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "reply-cache", "maybe"]).as_error(),
        "ERR CONFIG SET failed (possibly related to argument 'reply-cache') - reply-cache must be yes or no"
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "reply-cache", "no"]), ok());
    wait_until("the cache to turn off", Duration::from_secs(2), || {
        (cache_info(&mut c).get("reply_cache").map(String::as_str) == Some("no")).then_some(())
    });
}

/// Values larger in total than the budget (40 MB through a 4 MB cache):
/// the cache's bytes stay within it, and so does the process's growth,
/// give or take the documented overhead.
#[test]
fn the_cache_stays_within_its_budget() {
    let (_cluster, m) = start("reply-cache yes\nreply-cache-size 4mb");
    let mut c = m.conn();
    let value = "x".repeat(10_000);
    // Warm the allocator and the connections first.
    for i in 0..50 {
        c.cmd(&["SET", &format!("warm:{i}"), &value]);
    }
    let rss0 = rss_kb(m.pid);
    for i in 0..4000 {
        let k = format!("big:{i}");
        c.cmd(&["SET", &k, &value]);
        // Read twice: the second is a hit, so every fill is admitted.
        c.cmd(&["GET", &k]);
        assert_eq!(c.cmd(&["GET", &k]).as_bulk().map(<[u8]>::len), Some(10_000));
    }
    let rss1 = rss_kb(m.pid);
    // Published at the next tick.
    std::thread::sleep(Duration::from_millis(250));
    let info = cache_info(&mut c);
    let bytes: u64 = info["reply_cache_bytes_current"].parse::<u64>().unwrap()
        + info["reply_cache_bytes_old"].parse::<u64>().unwrap();
    println!("cached {bytes} bytes; RSS {rss0} kB -> {rss1} kB");
    assert!(bytes <= 4 * 1024 * 1024 + 11_000, "{bytes} bytes cached");
    // One connection fills one worker's share (the budget over the
    // workers, up to 4 here), in two generations of half.
    assert!(bytes > 256 * 1024, "{bytes}: the cache holds something");
    assert!(info["reply_cache_flips"].parse::<u64>().unwrap() >= 10);
    assert!(
        rss1.saturating_sub(rss0) <= 4 * 1024 + 8 * 1024,
        "RSS grew by {} kB for a 4 MB cache",
        rss1.saturating_sub(rss0)
    );
}

/// The tracker's master dies and its replica takes over: the cache is
/// flushed (that tracker's invalidations are lost), fills resume once the
/// new master is tracked, and writes made directly on the new master are
/// seen.
#[test]
fn a_failover_flushes_the_cache_and_fills_resume_on_the_new_master() {
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("{CACHE_ON}\ntopology-refresh-secs 1"),
    );
    wait_tracked(&m);
    let mut c = m.conn();
    let key = "failover:key";
    let slot = key_slot(key.as_bytes());
    assert_eq!(c.cmd(&["SET", key, "before"]), ok());
    assert_eq!(c.cmd(&["GET", key]), bulk("before"));
    assert_eq!(c.cmd(&["GET", key]), bulk("before"));
    let flushes = stat(&mut c, "reply_cache_flushes");
    let port = cluster.port_for_slot(slot);
    let idx = cluster.nodes.iter().position(|n| n.port == port).unwrap();
    cluster.kill(idx);
    wait_until(
        "the flush after the master died",
        Duration::from_secs(10),
        || (stat(&mut c, "reply_cache_flushes") > flushes).then_some(()),
    );
    // The replica takes over; write on it directly once it has.
    let new_master = wait_until("a new master for the slot", Duration::from_secs(30), || {
        cluster.refresh_roles();
        cluster.try_port_for_slot(slot).filter(|&p| p != port)
    });
    let mut node = Conn::connect(&format!("127.0.0.1:{new_master}"));
    assert_eq!(node.cmd(&["SET", key, "after"]), ok());
    wait_until(
        "mithril to read the new master",
        Duration::from_secs(20),
        || (c.cmd(&["GET", key]) == bulk("after")).then_some(()),
    );
    // Fills resume on the new master, and stay coherent there.
    wait_until("fills to resume", Duration::from_secs(20), || {
        c.cmd(&["GET", key]);
        let hits = stat(&mut c, "reply_cache_hits");
        (c.cmd(&["GET", key]) == bulk("after") && stat(&mut c, "reply_cache_hits") > hits)
            .then_some(())
    });
    assert_eq!(node.cmd(&["SET", key, "later"]), ok());
    wait_until(
        "the direct write on the new master",
        Duration::from_secs(2),
        || (c.cmd(&["GET", key]) == bulk("later")).then_some(()),
    );
}

/// A slot's keys migrate to another master (MIGRATE, as resharding does):
/// the source drops them and invalidates, so cached values of the moved
/// keys are read from their new owner afterwards, including writes made
/// there directly.
#[test]
fn a_migrated_slot_is_read_from_its_new_owner() {
    let (cluster, m) = start(CACHE_ON);
    let mut c = m.conn();
    let keys: Vec<String> = (0..20).map(|i| format!("{{mig}}k{i}")).collect();
    let slot = key_slot(keys[0].as_bytes());
    for k in &keys {
        c.cmd(&["SET", k, "v1"]);
        assert_eq!(c.cmd(&["GET", k]), bulk("v1"));
        assert_eq!(c.cmd(&["GET", k]), bulk("v1"));
    }
    let from = cluster.port_for_slot(slot);
    let to = cluster.nodes.iter().position(|n| n.port != from).unwrap();
    let moved = cluster.migrate_slot(slot, to, 5);
    assert_eq!(moved, keys.len());
    let mut owner = Conn::connect(&cluster.nodes[to].addr());
    for k in &keys {
        assert_eq!(owner.cmd(&["SET", k, "v2"]), ok());
    }
    wait_until(
        "the moved keys' new values",
        Duration::from_secs(10),
        || {
            keys.iter()
                .all(|k| c.cmd(&["GET", k]) == bulk("v2"))
                .then_some(())
        },
    );
}
