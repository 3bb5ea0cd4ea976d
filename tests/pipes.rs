//! `backend-sharding`: the shared pipes of `yes` carry every worker's
//! requests in order, and `auto` moves sessions both ways under load
//! without losing or reordering a reply (its verdict forced by the test
//! hook; debug builds only, like every MITHRIL-TEST command).

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{argv, ok, Conn, Reply};
use support::{bin, wait_until, ClusterSpec, Mithril, RedisCluster};

fn info(c: &mut Conn, section: &str) -> HashMap<String, String> {
    let r = c.cmd(&["INFO", section]);
    let text = r.as_str().to_string();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// A 3-master cluster and mithril with the MITHRIL-TEST commands on
/// (debug builds read `MITHRIL_TEST_HOOKS=1` at start).
fn with_test_hooks(conf: &str) -> (RedisCluster, Mithril) {
    std::env::set_var("MITHRIL_TEST_HOOKS", "1");
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), conf);
    (cluster, m)
}

fn num(m: &HashMap<String, String>, k: &str) -> u64 {
    m.get(k)
        .unwrap_or_else(|| panic!("no {k} in {m:?}"))
        .parse()
        .unwrap()
}

/// One client's work: `rounds` batches of `depth` requests over keys on
/// every master (`{c}-{i}` spread over the slots), each an INCR of the
/// client's own counters, a SET of a value naming the round, and its GET:
/// every reply is checked, so a lost, duplicated or reordered reply fails.
fn client_load(addr: &str, c: usize, rounds: usize, depth: usize, stop: &AtomicBool) -> usize {
    let mut conn = Conn::connect(addr);
    let mut counters = [0i64; 16];
    let mut done = 0;
    for round in 0..rounds {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut cmds = Vec::new();
        let mut want = Vec::new();
        let mut last = 0;
        for i in 0..depth {
            let k = (round * depth + i) % counters.len();
            match i % 3 {
                0 => {
                    counters[k] += 1;
                    last = k;
                    cmds.push(argv(&["INCR", &format!("pipes:{c}:n{k}")]));
                    want.push(Reply::Int(counters[k]));
                }
                1 => {
                    let v = format!("{c}-{round}-{i}");
                    cmds.push(argv(&["SET", &format!("pipes:{c}:s{k}"), &v]));
                    want.push(ok());
                    cmds.push(argv(&["GET", &format!("pipes:{c}:s{k}")]));
                    want.push(Reply::Bulk(Some(v.into_bytes())));
                }
                _ => {
                    cmds.push(argv(&["GET", &format!("pipes:{c}:n{last}")]));
                    want.push(Reply::Bulk(Some(counters[last].to_string().into_bytes())));
                }
            }
        }
        let got = conn.pipeline(&cmds);
        assert_eq!(got, want, "client {c}, round {round}");
        done += cmds.len();
    }
    done
}

fn run_clients(addr: &str, clients: usize, rounds: usize, depth: impl Fn(usize) -> usize) -> usize {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let addr = addr.to_string();
            let stop = stop.clone();
            let d = depth(c);
            std::thread::spawn(move || client_load(&addr, c, rounds, d, &stop))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

/// `yes` with four workers: every client's requests, pipelined or not,
/// come back in order with the right values, and other workers' requests
/// did cross to the pipes' owners.
#[test]
fn shared_pipes_keep_every_clients_order() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 4\nbackend-sharding yes\nplacement round-robin\n",
    );
    let n = run_clients(&m.addr(), 12, 60, |c| if c % 2 == 0 { 1 } else { 24 });
    assert!(n > 12 * 60);
    let mut probe = m.conn();
    // The counters are published at each worker's tick (100 ms).
    let p = wait_until(
        "requests crossed to the pipes' owners",
        Duration::from_secs(10),
        || {
            let p = info(&mut probe, "pipes");
            (num(&p, "pipes_remote_requests") > 1000).then_some(p)
        },
    );
    assert_eq!(p["backend_sharding"], "yes");
    assert!(num(&p, "backend_writes") > 0, "{p:?}");
    // One connection per node for the whole process (and leases none).
    let b = probe.cmd(&["INFO", "backends"]).as_str().to_string();
    assert!(!b.is_empty());
    // A cross-slot MSET / MGET and a transaction on the shared pipes.
    assert_eq!(
        probe.cmd(&["MSET", "pa", "1", "pb", "2", "pc", "3", "pd", "4"]),
        ok()
    );
    assert_eq!(
        probe.cmd(&["MGET", "pa", "pb", "pc", "pd"]),
        Reply::Array(Some(
            ["1", "2", "3", "4"]
                .map(|v| Reply::Bulk(Some(v.into())))
                .to_vec()
        ))
    );
    let tx = probe.pipeline(&[
        argv(&["MULTI"]),
        argv(&["INCR", "{pt}a"]),
        argv(&["INCR", "{pt}a"]),
        argv(&["EXEC"]),
    ]);
    assert_eq!(
        tx[3],
        Reply::Array(Some(vec![Reply::Int(1), Reply::Int(2)])),
        "{tx:?}"
    );
}

/// A node's pipe dies under load (the node is killed): every request on
/// it, from whichever worker, is answered (an error), none hangs, and
/// the other masters keep serving.
#[test]
fn a_dead_pipe_answers_every_worker() {
    let mut cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 4\nbackend-sharding yes\nplacement round-robin\n",
    );
    // Warm: every worker links to every pipe.
    run_clients(&m.addr(), 8, 5, |_| 6);
    let victim = cluster.masters()[0].port;
    let victim_idx = cluster.nodes.iter().position(|n| n.port == victim).unwrap();
    cluster.kill(victim_idx);
    let mut conns: Vec<Conn> = (0..8).map(|_| m.conn()).collect();
    for c in conns.iter_mut() {
        let cmds: Vec<_> = (0..30)
            .map(|i| argv(&["SET", &format!("dead:{i}"), "v"]))
            .collect();
        let got = c
            .try_pipeline(&cmds)
            .expect("every request is answered, none hangs");
        assert_eq!(got.len(), 30);
        let errors = got.iter().filter(|r| r.is_error()).count();
        let oks = got.iter().filter(|r| **r == ok()).count();
        assert_eq!(errors + oks, 30, "{got:?}");
        assert!(oks > 0, "the other masters still answer: {got:?}");
    }
}

/// `auto`, its verdict forced both ways every few dozen milliseconds while
/// request-response and pipelining clients run: no reply lost or out of
/// order (the clients check every one), and sessions did move each way.
#[test]
fn auto_moves_sessions_both_ways_under_load() {
    let (_cluster, m) =
        with_test_hooks("threads 2\nbackend-sharding auto\nplacement round-robin\n");
    let addr = m.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        let addr = addr.clone();
        std::thread::spawn(move || {
            let hs: Vec<_> = (0..8)
                .map(|c| {
                    let addr = addr.clone();
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        client_load(&addr, c, 100_000, if c < 6 { 1 } else { 12 }, &stop)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
        })
    };
    let mut ctl = m.conn();
    let mut saw_shared = 0;
    let mut saw_local = 0;
    for round in 0..8 {
        let (to, want_some) = if round % 2 == 0 {
            ("shared", true)
        } else {
            ("local", false)
        };
        assert_eq!(ctl.cmd(&["MITHRIL-TEST", "PIPES-FORCE", to]), ok());
        // The verdict is read at the workers' ticks; the sessions move at
        // their next dispatch.
        wait_until(
            &format!("sessions on the pipes to follow '{to}'"),
            Duration::from_secs(10),
            || {
                let p = info(&mut ctl, "pipes");
                let n = num(&p, "pipes_sessions");
                ((n > 0) == want_some).then_some(())
            },
        );
        if want_some {
            saw_shared += 1;
        } else {
            saw_local += 1;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    stop.store(true, Ordering::Relaxed);
    let done = load.join().expect("every reply was as expected");
    assert!(done > 1000, "{done} requests");
    assert_eq!((saw_shared, saw_local), (4, 4));
    let p = info(&mut ctl, "pipes");
    assert!(num(&p, "pipes_remote_requests") > 0, "{p:?}");
    assert_eq!(p["pipes_last_decision"], "forced local by the test hook");
}

/// A session that never idles (it always has replies outstanding) still
/// moves: once `auto` wants it elsewhere it is held for one round trip,
/// drains, and moves, with every reply in order.
#[test]
fn a_session_that_never_idles_still_moves() {
    let (_cluster, m) = with_test_hooks("threads 2\nbackend-sharding auto\n");
    let mut ctl = m.conn();
    assert_eq!(ctl.cmd(&["MITHRIL-TEST", "PIPES-FORCE", "shared"]), ok());
    // Request-response: its score runs down and it moves to the pipes
    // (and so does this test's INFO connection, which is request-response
    // too: two sessions).
    let mut c = m.conn();
    wait_until("the client on the pipes", Duration::from_secs(10), || {
        c.cmd(&["INCR", "idle:n"]);
        (num(&info(&mut ctl, "pipes"), "pipes_sessions") == 2).then_some(())
    });
    // Now it pipelines: batches of four in one write, so three of each
    // four are dispatched with replies outstanding. Its score climbs, it
    // wants its worker's connections, and it must drain to go: held.
    let held0 = num(&info(&mut ctl, "pipes"), "pipes_held_moves");
    let mut expect: i64 = c.cmd(&["GET", "idle:n"]).as_str().parse().unwrap();
    let mut moved = false;
    for _ in 0..500 {
        let cmds: Vec<_> = (0..4).map(|_| argv(&["INCR", "idle:n"])).collect();
        let got = c.pipeline(&cmds);
        let want: Vec<Reply> = (1..=4).map(|i| Reply::Int(expect + i)).collect();
        assert_eq!(got, want);
        expect += 4;
        if num(&info(&mut ctl, "pipes"), "pipes_sessions") == 1 {
            moved = true;
            break;
        }
    }
    assert!(moved, "the pipelining client left the pipes");
    assert!(
        num(&info(&mut ctl, "pipes"), "pipes_held_moves") > held0,
        "it waited for its replies to move"
    );
    assert_eq!(c.cmd(&["GET", "idle:n"]).as_str(), expect.to_string());
}

/// GETs a node has run (its commandstats).
fn node_gets(node: &mut Conn) -> u64 {
    let text = node.cmd(&["INFO", "commandstats"]).as_str().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The reply cache on the shared pipes: with two workers, each owning
/// some masters' pipes, a client on either worker fills from every master
/// (its reads of the other worker's masters through their pipes), its
/// hits never reach a node, and a write made directly on a node reaches
/// the cache of whichever worker filled the key, through the owner's
/// tracker, within a generous 2 s (a round trip in practice).
#[test]
fn the_reply_cache_fills_and_invalidates_across_the_pipes() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 2\nbackend-sharding yes\nplacement round-robin\nreply-cache yes\n",
    );
    let keys = cluster.key_per_master("pc");
    // Two clients, one per worker.
    let mut clients: Vec<Conn> = (0..2).map(|_| m.conn()).collect();
    let workers: Vec<String> = clients.iter_mut().map(support::worker_of).collect();
    assert_ne!(workers[0], workers[1], "one client per worker");
    for (n, (key, port)) in keys.iter().enumerate() {
        let mut node = Conn::connect(&format!("127.0.0.1:{port}"));
        for (w, c) in clients.iter_mut().enumerate() {
            let v = format!("v{n}-{w}");
            assert_eq!(c.cmd(&["SET", key, &v]), ok());
            // Fills once the worker's trackers (and the owner's) are known.
            wait_until("a hit", Duration::from_secs(10), || {
                assert_eq!(
                    c.cmd(&["GET", key]),
                    Reply::Bulk(Some(v.clone().into_bytes()))
                );
                let before = node_gets(&mut node);
                let got = c.cmd(&["GET", key]);
                assert_eq!(got, Reply::Bulk(Some(v.clone().into_bytes())));
                (node_gets(&mut node) == before).then_some(())
            });
            // A direct write on the node: the next reads see it soon.
            let fresh = format!("direct{n}-{w}");
            assert_eq!(node.cmd(&["SET", key, &fresh]), ok());
            wait_until("the invalidation", Duration::from_secs(2), || {
                (c.cmd(&["GET", key]) == Reply::Bulk(Some(fresh.clone().into_bytes())))
                    .then_some(())
            });
        }
    }
    let text = clients[0].cmd(&["INFO", "replycache"]).as_str().to_string();
    assert!(text.contains("reply_cache_hits:"), "{text}");
}

/// `auto` deciding by itself: the schedule shortened tenfold and every
/// worker counted busy (this machine's cores are shared with the client
/// and the nodes, so its workers never reach 85%), request-response
/// clients (thin batches) make it try the shared pipes and judge them by
/// the measured rate; whatever it decides, every reply is as expected.
#[test]
fn auto_measures_and_decides_under_load() {
    let (_cluster, m) =
        with_test_hooks("threads 2\nbackend-sharding auto\nplacement round-robin\n");
    let mut ctl = m.conn();
    for hook in [["PIPES-SCALE", "10"], ["PIPES-BUSY", "1"]] {
        assert_eq!(ctl.cmd(&["MITHRIL-TEST", hook[0], hook[1]]), ok());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let addr = m.addr();
    let load: Vec<_> = (0..8)
        .map(|c| {
            let addr = addr.clone();
            let stop = stop.clone();
            std::thread::spawn(move || client_load(&addr, c, 1_000_000, 1, &stop))
        })
        .collect();
    let decision = wait_until("a measured decision", Duration::from_secs(30), || {
        let p = info(&mut ctl, "pipes");
        let d = p["pipes_last_decision"].clone();
        (d.starts_with("kept") || d.starts_with("went back")).then_some(d)
    });
    stop.store(true, Ordering::Relaxed);
    let done: usize = load
        .into_iter()
        .map(|h| h.join().expect("replies as expected"))
        .sum();
    assert!(done > 100, "{done} requests");
    assert!(decision.contains("/s"), "the rates it compared: {decision}");
}
