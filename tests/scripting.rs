//! Scripts and functions through mithril against a real cluster: EVALSHA,
//! SCRIPT LOAD / EXISTS / FLUSH / KILL on every master, SCRIPT EXISTS and
//! INFO's script counts as a client of one server sees them, the script
//! registry carrying scripts and libraries to nodes that lack them (a
//! cache flushed on the node, a failover), its byte budget, FUNCTION
//! LOAD / LIST / DELETE / FLUSH / RESTORE / KILL, FCALL, calls without
//! declared keys routed by their literal key, transactions, and
//! redis-py's register_script.

mod support;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;
use support::*;

const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
const NOT_FOUND: &str = "ERR Function not found";
const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Increments KEYS[1] and answers it with its new value.
const INCR: &str = "return {KEYS[1], redis.call('incr', KEYS[1])}";

const LIBRARY: &str = "#!lua name=mylib\n\
    redis.register_function('lib_incr', function(keys, args) return redis.call('incr', keys[1]) end)\n\
    redis.register_function{function_name='lib_get', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}}\n\
    redis.register_function('lib_echo', function(keys, args) return args[1] end)\n";

fn int(n: i64) -> Reply {
    Reply::Int(n)
}

fn array(items: Vec<Reply>) -> Reply {
    Reply::Array(Some(items))
}

fn ints(v: &[i64]) -> Reply {
    array(v.iter().map(|&n| int(n)).collect())
}

/// `field:value` lines of an INFO text.
fn info(c: &mut Conn, section: &str) -> HashMap<String, u64> {
    c.cmd(&["INFO", section])
        .as_str()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect()
}

fn stat(c: &mut Conn, name: &str) -> u64 {
    let f = info(c, "stats");
    *f.get(name).unwrap_or_else(|| panic!("no {name} in {f:?}"))
}

/// One key owned by each master, as (key, the master's port).
fn key_per_master(cluster: &RedisCluster, prefix: &str) -> Vec<(String, u16)> {
    cluster.key_per_master(prefix)
}

fn node_at(cluster: &RedisCluster, port: u16) -> &RedisNode {
    cluster.nodes.iter().find(|n| n.port == port).unwrap()
}

fn with_replicas() -> RedisCluster {
    RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    })
}

/// Fails the master serving `slot` over to its replica and returns the
/// new master.
fn fail_over(cluster: &mut RedisCluster, slot: u16) -> usize {
    cluster.fail_over(slot)
}

#[test]
fn script_load_exists_flush_and_evalsha_on_every_master() {
    let cluster = with_replicas();
    let m = Mithril::start(bin(), &cluster.seeds(), "read-from-replicas yes");
    let mut c = m.conn();

    // SCRIPT LOAD reaches every master; the answer is the SHA-1.
    let sha = c.cmd(&["SCRIPT", "LOAD", INCR]).as_str().to_string();
    assert_eq!(sha.len(), 40, "{sha}");
    for n in cluster.masters() {
        assert_eq!(
            n.conn().cmd(&["SCRIPT", "EXISTS", &sha]),
            ints(&[1]),
            ":{}",
            n.port
        );
    }
    // EVALSHA on a key of every master runs there.
    for (key, port) in key_per_master(&cluster, "s:") {
        assert_eq!(
            c.cmd(&["EVALSHA", &sha, "1", &key]),
            array(vec![bulk(&key), int(1)])
        );
        assert_eq!(
            node_at(&cluster, port).conn().cmd(&["GET", &key]),
            bulk("1")
        );
        // Either case names the script, as on a node.
        assert_eq!(
            c.cmd(&["EVALSHA", &sha.to_uppercase(), "1", &key]),
            array(vec![bulk(&key), int(2)])
        );
    }
    // The read-only variant, on a replica or a master; no key: any master.
    let ro = c.cmd(&["SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"]);
    let ro = ro.as_str().to_string();
    let (key, _) = &key_per_master(&cluster, "s:")[1];
    wait_until("the replica has the write", Duration::from_secs(5), || {
        (0..8)
            .all(|_| m.conn().cmd(&["EVALSHA_RO", &ro, "1", key]) == bulk("2"))
            .then_some(())
    });
    let seven = c.cmd(&["SCRIPT", "LOAD", "return 7"]).as_str().to_string();
    for _ in 0..4 {
        assert_eq!(c.cmd(&["EVALSHA", &seven, "0"]), int(7));
    }

    // A script some master lacks does not exist for the proxy.
    let lone = cluster.masters()[0]
        .conn()
        .cmd(&["SCRIPT", "LOAD", "return 'lone'"]);
    let lone = lone.as_str().to_string();
    assert_eq!(
        c.cmd(&[
            "SCRIPT",
            "EXISTS",
            &sha,
            &lone,
            "0000000000000000000000000000000000000000"
        ]),
        ints(&[1, 0, 0])
    );
    // Redis's own errors, texts unchanged.
    assert_eq!(
        c.cmd(&["EVALSHA", "0000000000000000000000000000000000000000", "0"]),
        err(NOSCRIPT)
    );
    assert_eq!(c.cmd(&["EVALSHA", "nosuch", "0"]), err(NOSCRIPT));
    let (k1, k2) = ("{a}1", "{b}1");
    assert_ne!(key_slot(k1.as_bytes()), key_slot(k2.as_bytes()));
    assert_eq!(c.cmd(&["EVALSHA", &sha, "2", k1, k2]), err(CROSSSLOT));
    assert_eq!(c.cmd(&["EVAL", INCR, "2", k1, k2]), err(CROSSSLOT));
    let bad = c.cmd(&["SCRIPT", "LOAD", "return ("]);
    assert!(
        bad.as_error().starts_with("ERR Error compiling script"),
        "{bad:?}"
    );
    assert_eq!(
        c.cmd(&["SCRIPT", "FLUSH", "NOW"]),
        err("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    );

    // SCRIPT FLUSH empties every master, and mithril forgets too: the SHA
    // gets the node's NOSCRIPT again.
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH", "ASYNC"]), ok());
    for n in cluster.masters() {
        assert_eq!(n.conn().cmd(&["SCRIPT", "EXISTS", &sha]), ints(&[0]));
    }
    assert_eq!(c.cmd(&["SCRIPT", "EXISTS", &sha]), ints(&[0]));
    assert_eq!(c.cmd(&["EVALSHA", &sha, "1", "k"]), err(NOSCRIPT));
    assert_eq!(
        c.cmd(&["SCRIPT", "KILL"]),
        err("NOTBUSY No scripts in execution right now.")
    );
    // Help comes from a node.
    assert!(!c.cmd(&["SCRIPT", "HELP"]).is_error());
}

#[test]
fn script_exists_answers_what_evalsha_through_mithril_finds() {
    // The suite's "SCRIPT EXISTS - can detect already defined scripts?"
    // (unit/scripting): a script EVAL ran exists, though only the master
    // that ran it caches it.
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["EVAL", "return 1+1", "0"]), int(2));
    let sha = "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bd9";
    let cached = cluster
        .masters()
        .iter()
        .filter(|n| n.conn().cmd(&["SCRIPT", "EXISTS", sha]) == ints(&[1]))
        .count();
    assert_eq!(cached, 1, "only the master that ran it caches it");
    assert_eq!(
        c.cmd(&[
            "SCRIPT",
            "EXISTS",
            sha,
            "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bda"
        ]),
        ints(&[1, 0])
    );
    // And an EVALSHA of it runs on every master (loaded where missing).
    for (key, _) in key_per_master(&cluster, "ex:") {
        assert_eq!(c.cmd(&["EVALSHA", sha, "1", &key]), int(2));
    }
    // A body remembered that no master has (it did not compile) does not
    // exist, as on a node.
    let bad = "return (";
    assert!(c.cmd(&["EVAL", bad, "0"]).is_error());
    let bad_sha = c.cmd(&["EVAL", "return redis.sha1hex(ARGV[1])", "0", bad]);
    assert_eq!(c.cmd(&["SCRIPT", "EXISTS", bad_sha.as_str()]), ints(&[0]));

    // The suite's "SCRIPTING FLUSH ASYNC": INFO memory counts the cached
    // scripts (the registry's), and none after SCRIPT FLUSH.
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]), ok());
    for j in 0..100 {
        let r = c.cmd(&["SCRIPT", "LOAD", &format!("return {j}")]);
        assert_eq!(r.as_str().len(), 40, "{r:?}");
    }
    assert_eq!(info(&mut c, "memory")["number_of_cached_scripts"], 100);
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH", "ASYNC"]), ok());
    assert_eq!(info(&mut c, "memory")["number_of_cached_scripts"], 0);
    // Libraries and their functions likewise.
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIBRARY]), bulk("mylib"));
    let mem = info(&mut c, "memory");
    assert_eq!(
        (mem["number_of_libraries"], mem["number_of_functions"]),
        (1, 3),
        "{mem:?}"
    );
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH"]), ok());
    let mem = info(&mut c, "memory");
    assert_eq!(
        (mem["number_of_libraries"], mem["number_of_functions"]),
        (0, 0),
        "{mem:?}"
    );
}

#[test]
fn scripts_flushed_on_the_nodes_are_loaded_again_unseen() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    let keys = key_per_master(&cluster, "r:");
    let flush_nodes = || {
        for n in cluster.masters() {
            assert_eq!(n.conn().cmd(&["SCRIPT", "FLUSH"]), ok());
        }
    };
    // One script arrives by EVAL, one by SCRIPT LOAD.
    let by_eval = "return 'by eval ' .. KEYS[1]";
    assert_eq!(
        c.cmd(&["EVAL", by_eval, "1", &keys[0].0]),
        bulk(&format!("by eval {}", keys[0].0))
    );
    let eval_sha = cluster.masters()[0]
        .conn()
        .cmd(&["SCRIPT", "LOAD", by_eval]);
    let eval_sha = eval_sha.as_str().to_string();
    let load_sha = c.cmd(&["SCRIPT", "LOAD", INCR]).as_str().to_string();
    flush_nodes();
    for (key, _) in &keys {
        assert_eq!(
            c.cmd(&["EVALSHA", &eval_sha, "1", key]),
            bulk(&format!("by eval {key}"))
        );
        assert_eq!(
            c.cmd(&["EVALSHA", &load_sha, "1", key]),
            array(vec![bulk(key), int(1)])
        );
    }
    assert_eq!(stat(&mut c, "script_reloads"), 2 * keys.len() as u64);

    // Pipelined, mixed with other commands: every reply in its place.
    flush_nodes();
    let mut cmds = Vec::new();
    for (key, _) in &keys {
        cmds.push(argv(&["EVALSHA", &load_sha, "1", key]));
        cmds.push(argv(&["GET", key]));
        cmds.push(argv(&["EVALSHA", &load_sha, "1", key]));
    }
    // The first EVALSHA has the GET behind it on the same connection: a
    // reload would run it after the GET, so its NOSCRIPT is the answer,
    // as Redis gives it. The second has nothing of the session behind
    // it: cured unseen.
    let replies = c.pipeline(&cmds);
    for (i, (key, _)) in keys.iter().enumerate() {
        assert_eq!(replies[3 * i], err(NOSCRIPT), "{key}");
        assert_eq!(replies[3 * i + 1], bulk("1"), "{key}");
        assert_eq!(replies[3 * i + 2], array(vec![bulk(key), int(2)]));
    }

    // Inside MULTI a NOSCRIPT is what Redis answers: not replayed.
    flush_nodes();
    let key = &keys[1].0;
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["EVALSHA", &load_sha, "1", key]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(c.cmd(&["INCR", key]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), array(vec![err(NOSCRIPT), int(3)]));
    // An EVAL queued in a transaction is remembered like any other.
    let queued = "return 'queued'";
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["EVAL", queued, "1", key]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(c.cmd(&["EXEC"]), array(vec![bulk("queued")]));
    let queued_sha = cluster.masters()[0].conn().cmd(&["SCRIPT", "LOAD", queued]);
    flush_nodes();
    assert_eq!(
        c.cmd(&["EVALSHA", queued_sha.as_str(), "1", key]),
        bulk("queued")
    );
}

/// Sets KEYS[1] to ARGV[1] and answers 1.
const SET_BY_SCRIPT: &str = "redis.call('set', KEYS[1], ARGV[1]) return 1";

/// Issue 32 (4): a script missing on its node, pipelined ahead of a SET
/// and a GET of its key: the call must not run after them. The client
/// gets NOSCRIPT, as from Redis, and the key keeps the SET's value; the
/// GET sees it too. Alone, the same call is still cured unseen.
#[test]
fn a_script_reload_never_reorders_a_pipeline() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    let sha = c
        .cmd(&["SCRIPT", "LOAD", SET_BY_SCRIPT])
        .as_str()
        .to_string();
    for (key, port) in key_per_master(&cluster, "ro:") {
        let node = node_at(&cluster, port);
        assert_eq!(node.conn().cmd(&["SCRIPT", "FLUSH"]), ok());
        let replies = c.pipeline(&[
            argv(&["EVALSHA", &sha, "1", &key, "script"]),
            argv(&["SET", &key, "after"]),
            argv(&["GET", &key]),
        ]);
        assert_eq!(
            replies,
            vec![err(NOSCRIPT), ok(), bulk("after")],
            "{key} on :{port}"
        );
        assert_eq!(node.conn().cmd(&["GET", &key]), bulk("after"), "{key}");
        // Nothing behind it: the registry loads it and the call runs.
        assert_eq!(c.cmd(&["EVALSHA", &sha, "1", &key, "script"]), int(1));
        assert_eq!(c.cmd(&["GET", &key]), bulk("script"));
    }
    assert_eq!(stat(&mut c, "script_reloads"), 3);

    // The same for a function after FUNCTION FLUSH on the node.
    let lib = "#!lua name=setlib\n\
        redis.register_function('lib_set', function(keys, args) redis.call('set', keys[1], args[1]) return 1 end)\n";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), bulk("setlib"));
    for (key, port) in key_per_master(&cluster, "rf:") {
        let node = node_at(&cluster, port);
        assert_eq!(node.conn().cmd(&["FUNCTION", "FLUSH"]), ok());
        let replies = c.pipeline(&[
            argv(&["FCALL", "lib_set", "1", &key, "script"]),
            argv(&["SET", &key, "after"]),
            argv(&["GET", &key]),
        ]);
        assert_eq!(
            replies,
            vec![err(NOT_FOUND), ok(), bulk("after")],
            "{key} on :{port}"
        );
        assert_eq!(node.conn().cmd(&["GET", &key]), bulk("after"), "{key}");
        assert_eq!(c.cmd(&["FCALL", "lib_set", "1", &key, "script"]), int(1));
        assert_eq!(c.cmd(&["GET", &key]), bulk("script"));
    }
    assert_eq!(stat(&mut c, "function_reloads"), 3);
}

#[test]
fn an_evalsha_survives_a_failover_to_a_flushed_replica() {
    let mut cluster = with_replicas();
    let m = Mithril::start(bin(), &cluster.seeds(), "topology-refresh-secs 1");
    let mut c = m.conn();
    let sha = c.cmd(&["SCRIPT", "LOAD", INCR]).as_str().to_string();
    let (key, port) = key_per_master(&cluster, "f:")[0].clone();
    assert_eq!(
        c.cmd(&["EVALSHA", &sha, "1", &key]),
        array(vec![bulk(&key), int(1)])
    );
    let slot = key_slot(key.as_bytes());
    assert_eq!(cluster.port_for_slot(slot), port);
    let new = fail_over(&mut cluster, slot);
    assert_eq!(cluster.nodes[new].conn().cmd(&["SCRIPT", "FLUSH"]), ok());
    assert_eq!(
        cluster.nodes[new].conn().cmd(&["SCRIPT", "EXISTS", &sha]),
        ints(&[0])
    );
    // Through mithril the call just works (after the MOVED, the NOSCRIPT
    // is cured on the new master), and INFO counts one reload.
    assert_eq!(
        c.cmd(&["EVALSHA", &sha, "1", &key]),
        array(vec![bulk(&key), int(2)])
    );
    assert_eq!(stat(&mut c, "script_reloads"), 1);
    assert_eq!(
        cluster.nodes[new].conn().cmd(&["SCRIPT", "EXISTS", &sha]),
        ints(&[1])
    );
}

#[test]
fn script_kill_reaches_a_master_busy_with_a_script() {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["busy-reply-threshold 100".into()],
        ..Default::default()
    });
    // One worker: the busy script holds that worker's only connection to
    // its node, and the kill must not queue behind it.
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 1");
    let (key, _) = key_per_master(&cluster, "busy:")[2].clone();
    let mut busy = m.conn();
    busy.send(&[b"EVAL", b"while true do end", b"1", key.as_bytes()]);
    let mut c = m.conn();
    wait_until("SCRIPT KILL killed it", Duration::from_secs(10), || {
        let r = c.cmd(&["SCRIPT", "KILL"]);
        if r == ok() {
            return Some(());
        }
        assert_eq!(r, err("NOTBUSY No scripts in execution right now."));
        None
    });
    let killed = busy.read_reply();
    assert!(
        killed
            .as_error()
            .contains("Script killed by user with SCRIPT KILL"),
        "{killed:?}"
    );
    // The node and the connection answer again.
    assert_eq!(busy.cmd(&["SET", &key, "after"]), ok());
    assert_eq!(c.cmd(&["GET", &key]), bulk("after"));
    assert_eq!(
        c.cmd(&["SCRIPT", "KILL"]),
        err("NOTBUSY No scripts in execution right now.")
    );

    // FUNCTION KILL, the same way.
    let spin = "#!lua name=spin\nredis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", spin]), bulk("spin"));
    busy.send(&[b"FCALL", b"spin", b"1", key.as_bytes()]);
    wait_until("FUNCTION KILL killed it", Duration::from_secs(10), || {
        let r = c.cmd(&["FUNCTION", "KILL"]);
        (r == ok()).then_some(())
    });
    assert!(busy.read_reply().is_error());
    assert_eq!(busy.cmd(&["GET", &key]), bulk("after"));
}

#[test]
fn ping_answers_busy_while_a_script_runs_long() {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["busy-reply-threshold 50".into()],
        ..Default::default()
    });
    // One worker: the script holds that worker's connection to its node,
    // and what asks about it must not queue behind it.
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 1");
    let mut c = m.conn();
    let spin = "#!lua name=spin\nredis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", spin]), bulk("spin"));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // The script, and a PING pipelined behind it on the same client.
    let mut busy = m.conn();
    busy.send(&[b"FCALL", b"spin", b"0"]);
    busy.send(&[b"PING"]);
    let e = wait_until("PING says BUSY", Duration::from_secs(10), || {
        let r = c.cmd(&["PING"]);
        r.is_error().then_some(r)
    });
    assert_eq!(
        e,
        err("BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.")
    );
    assert_eq!(
        c.cmd(&["PING", "hello"]).as_error().split(' ').next(),
        Some("BUSY")
    );
    // FUNCTION STATS is the busy master's: its running script.
    let stats = c.cmd(&["FUNCTION", "STATS"]);
    let items = stats.as_array();
    assert_eq!(items[0], bulk("running_script"), "{stats:?}");
    assert!(format!("{:?}", items[1]).contains("spin"), "{stats:?}");
    // SCRIPT KILL is refused by the node; FUNCTION KILL works.
    assert!(c.cmd(&["SCRIPT", "KILL"]).as_error().starts_with("BUSY"));
    assert_eq!(c.cmd(&["FUNCTION", "KILL"]), ok());
    wait_until("PING says PONG again", Duration::from_secs(10), || {
        (c.cmd(&["PING"]) == Reply::Simple("PONG".into())).then_some(())
    });
    let killed = busy.read_reply();
    assert!(killed.as_error().contains("killed by user"), "{killed:?}");
    assert_eq!(busy.read_reply(), Reply::Simple("PONG".into()));
    let stats = c.cmd(&["FUNCTION", "STATS"]);
    assert_eq!(stats.as_array()[1], Reply::Bulk(None), "{stats:?}");

    // The suite's "false dead client": FUNCTION LOAD, the call and a PING
    // in one write. The node answers nothing on that connection while the
    // script runs, the load included: the stall is seen behind it.
    let code = "#!lua name=test\nredis.register_function('test', function() while 1 do redis.call('ping') end end)";
    let mut pipeline = encode_command(&[b"FUNCTION", b"LOAD", b"REPLACE", code.as_bytes()]);
    pipeline.extend(encode_command(&[b"FCALL", b"test", b"0"]));
    pipeline.extend(encode_command(&[b"PING"]));
    busy.write_raw(&pipeline).unwrap();
    wait_until("PING says BUSY", Duration::from_secs(10), || {
        c.cmd(&["PING"]).is_error().then_some(())
    });
    assert_eq!(c.cmd(&["FUNCTION", "KILL"]), ok());
    assert_eq!(busy.read_reply(), bulk("test"));
    assert!(busy.read_reply().as_error().contains("killed by user"));
    assert_eq!(busy.read_reply(), Reply::Simple("PONG".into()));
}

/// While a script runs long, a transaction is refused as a busy server
/// refuses it: a command queued then gets BUSY (and dooms it), EXEC gets
/// EXECABORT with the BUSY reason and ends it; MULTI and DISCARD pass.
#[test]
fn a_transaction_meets_busy_while_a_script_runs_long() {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["busy-reply-threshold 50".into()],
        ..Default::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 2");
    let mut c = m.conn();
    let mut t = m.conn();
    assert_eq!(t.cmd(&["SET", "xx", "1"]), ok());
    assert_eq!(t.cmd(&["MULTI"]), ok());
    assert_eq!(t.cmd(&["INCR", "xx"]), Reply::Simple("QUEUED".into()));
    let mut busy = m.conn();
    busy.send(&[b"EVAL", b"while true do end", b"0"]);
    wait_until("PING says BUSY", Duration::from_secs(10), || {
        c.cmd(&["PING"]).is_error().then_some(())
    });
    let busy_text =
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
    assert_eq!(
        t.cmd(&["EXEC"]),
        err(&format!(
            "EXECABORT Transaction discarded because of: {busy_text}"
        ))
    );
    assert_eq!(t.cmd(&["MULTI"]), ok());
    assert_eq!(t.cmd(&["INCR", "xx"]), err(busy_text));
    assert_eq!(t.cmd(&["DISCARD"]), ok());
    assert_eq!(t.cmd(&["MULTI"]), ok());
    assert_eq!(t.cmd(&["INCR", "xx"]), err(busy_text));
    assert_eq!(c.cmd(&["SCRIPT", "KILL"]), ok());
    assert!(busy.read_reply().as_error().contains("killed by user"));
    // Its EXEC aborts (BUSY still, or the earlier BUSY doomed it).
    let e = t.cmd(&["EXEC"]);
    assert!(e.as_error().starts_with("EXECABORT"), "{e:?}");
    assert_eq!(t.cmd(&["GET", "xx"]), bulk("1"), "nothing of it ran");
    // Once the proxy has seen the script end, transactions run again.
    wait_until(
        "a transaction to queue again",
        Duration::from_secs(10),
        || {
            assert_eq!(t.cmd(&["MULTI"]), ok());
            let queued = t.cmd(&["INCR", "xx"]) == Reply::Simple("QUEUED".into());
            assert_eq!(t.cmd(&["DISCARD"]), ok());
            queued.then_some(())
        },
    );
    assert_eq!(t.cmd(&["MULTI"]), ok());
    assert_eq!(t.cmd(&["INCR", "xx"]), Reply::Simple("QUEUED".into()));
    assert_eq!(t.cmd(&["EXEC"]), Reply::Array(Some(vec![Reply::Int(2)])));
}

#[test]
fn the_registry_budget_forgets_the_least_recently_used() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    // Room for two of the scripts below (1,509 bytes each, plus 96).
    let m = Mithril::start(bin(), &cluster.seeds(), "script-registry-size 4kb");
    let mut c = m.conn();
    let body = |c: char| format!("return '{}'", c.to_string().repeat(1500));
    let (a, b, d) = (body('a'), body('b'), body('d'));
    let sha_a = c.cmd(&["SCRIPT", "LOAD", &a]).as_str().to_string();
    let sha_b = c.cmd(&["SCRIPT", "LOAD", &b]).as_str().to_string();
    // Using `a` again (EVAL passes its body) makes `b` the oldest.
    assert!(!c.cmd(&["EVAL", &a, "0"]).is_error());
    let sha_d = c.cmd(&["SCRIPT", "LOAD", &d]).as_str().to_string();
    let mem = info(&mut c, "memory");
    assert_eq!(mem["script_registry_size"], 4096);
    assert_eq!(mem["script_registry_scripts"], 2, "{mem:?}");
    assert!(mem["script_registry_script_bytes"] <= 4096, "{mem:?}");
    assert_eq!(stat(&mut c, "script_registry_evictions"), 1);
    for n in cluster.masters() {
        assert_eq!(n.conn().cmd(&["SCRIPT", "FLUSH"]), ok());
    }
    // The evicted SHA gets the node's reply; the kept ones are reloaded.
    assert_eq!(c.cmd(&["EVALSHA", &sha_b, "0"]), err(NOSCRIPT));
    assert_eq!(c.cmd(&["EVALSHA", &sha_a, "1", "x"]).as_str().len(), 1500);
    assert_eq!(c.cmd(&["EVALSHA", &sha_d, "1", "x"]).as_str().len(), 1500);
    assert_eq!(stat(&mut c, "script_reloads"), 2);
}

#[test]
fn functions_load_call_list_and_delete_on_every_master() {
    let cluster = with_replicas();
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIBRARY]), bulk("mylib"));
    for n in cluster.masters() {
        let list = n.conn().cmd(&["FUNCTION", "LIST"]);
        assert_eq!(list.as_array().len(), 1, ":{} {list:?}", n.port);
    }
    for (key, port) in key_per_master(&cluster, "fn:") {
        assert_eq!(c.cmd(&["FCALL", "lib_incr", "1", &key]), int(1));
        assert_eq!(c.cmd(&["FCALL_RO", "lib_get", "1", &key]), bulk("1"));
        assert_eq!(
            node_at(&cluster, port).conn().cmd(&["GET", &key]),
            bulk("1")
        );
    }
    assert_eq!(c.cmd(&["FCALL", "lib_echo", "0", "hi"]), bulk("hi"));
    // Listing, dump and stats come from one master.
    let list = c.cmd(&["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "mylib"]);
    let text = format!("{list:?}");
    assert!(
        text.contains("mylib") && text.contains("lib_incr"),
        "{text}"
    );
    let dump = c.cmd(&["FUNCTION", "DUMP"]);
    let payload = dump.as_bulk().expect("a dump payload").to_vec();
    assert!(!c.cmd(&["FUNCTION", "STATS"]).is_error());
    // Redis's errors and REPLACE.
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", LIBRARY]),
        err("ERR Library 'mylib' already exists")
    );
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", "REPLACE", LIBRARY]),
        bulk("mylib")
    );
    assert_eq!(c.cmd(&["FCALL", "nosuch", "0"]), err(NOT_FOUND));
    assert_eq!(
        c.cmd(&["FUNCTION", "KILL"]),
        err("NOTBUSY No scripts in execution right now.")
    );
    // DELETE removes it everywhere, and mithril forgets it.
    assert_eq!(c.cmd(&["FUNCTION", "DELETE", "mylib"]), ok());
    for n in cluster.masters() {
        assert_eq!(n.conn().cmd(&["FUNCTION", "LIST"]), array(vec![]));
    }
    let (key, _) = &key_per_master(&cluster, "fn:")[0];
    assert_eq!(c.cmd(&["FCALL", "lib_incr", "1", key]), err(NOT_FOUND));
    assert_eq!(
        c.cmd(&["FUNCTION", "DELETE", "mylib"]),
        err("ERR Library not found")
    );
    // RESTORE brings the dump back on every master; FLUSH empties them.
    let restore = [&b"FUNCTION"[..], b"RESTORE", &payload];
    assert_eq!(c.cmd_bytes(&restore), ok());
    for n in cluster.masters() {
        assert_eq!(n.conn().cmd(&["FUNCTION", "LIST"]).as_array().len(), 1);
    }
    assert_eq!(c.cmd(&["FCALL", "lib_incr", "1", key]), int(2));
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH", "SYNC"]), ok());
    for n in cluster.masters() {
        assert_eq!(n.conn().cmd(&["FUNCTION", "LIST"]), array(vec![]));
    }
    assert_eq!(stat(&mut c, "function_reloads"), 0);
}

/// `INCR key` named literally in the body: no declared keys.
fn incr_literal(key: &str) -> String {
    format!("-- a comment: redis.call('incr', 'elsewhere')\nreturn redis.call ( 'incr' , '{key}' )")
}

#[test]
fn scripts_without_keys_run_where_their_literal_key_lives() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    let keys = key_per_master(&cluster, "lit:");
    assert_eq!(keys.len(), 3);
    let mut code = String::from("#!lua name=literal\n");
    for (i, (key, _)) in keys.iter().enumerate() {
        code.push_str(&format!(
            "redis.register_function('f{i}', function(keys, args) return redis.call('incr', '{key}') end)\n"
        ));
    }
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", &code]), bulk("literal"));
    for (i, (key, port)) in keys.iter().enumerate() {
        // Three calls of each form: rotating over the masters would send
        // some of them to a node that does not own the key.
        let body = incr_literal(key);
        for n in 1..=3 {
            assert_eq!(c.cmd(&["EVAL", &body, "0"]), int(n), "EVAL {key}");
        }
        let sha = c.cmd(&["SCRIPT", "LOAD", &body]).as_str().to_string();
        for n in 4..=6 {
            assert_eq!(c.cmd(&["EVALSHA", &sha, "0"]), int(n), "EVALSHA {key}");
        }
        let f = format!("f{i}");
        for n in 7..=9 {
            assert_eq!(c.cmd(&["FCALL", &f, "0"]), int(n), "FCALL {f}");
        }
        assert_eq!(
            node_at(&cluster, *port).conn().cmd(&["GET", key]),
            bulk("9")
        );
    }
    // No literal key: any master, as before.
    for _ in 0..3 {
        assert_eq!(
            c.cmd(&["EVAL", "return redis.call('ping')", "0"]),
            Reply::Simple("PONG".into())
        );
    }
    // A script whose literal keys live on two masters fails as on a
    // cluster node: on its first key's master, at the second key.
    let two = format!(
        "redis.call('incr', '{}') return redis.call('incr', '{}')",
        keys[0].0, keys[1].0
    );
    let e = c.cmd(&["EVAL", &two, "0"]);
    assert!(
        e.as_error().contains("non local key in a cluster node"),
        "{e:?}"
    );
    assert_eq!(
        node_at(&cluster, keys[0].1)
            .conn()
            .cmd(&["GET", &keys[0].0]),
        bulk("10")
    );
}

#[test]
fn an_fcall_survives_a_failover_to_a_flushed_replica() {
    let mut cluster = with_replicas();
    let m = Mithril::start(bin(), &cluster.seeds(), "topology-refresh-secs 1");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIBRARY]), bulk("mylib"));
    let (key, _) = key_per_master(&cluster, "ff:")[1].clone();
    assert_eq!(c.cmd(&["FCALL", "lib_incr", "1", &key]), int(1));
    let new = fail_over(&mut cluster, key_slot(key.as_bytes()));
    assert_eq!(cluster.nodes[new].conn().cmd(&["FUNCTION", "FLUSH"]), ok());
    assert_eq!(c.cmd(&["FCALL", "lib_incr", "1", &key]), int(2));
    assert_eq!(stat(&mut c, "function_reloads"), 1);
    let list = cluster.nodes[new].conn().cmd(&["FUNCTION", "LIST"]);
    assert_eq!(list.as_array().len(), 1, "{list:?}");
    let mem = info(&mut c, "memory");
    assert_eq!(mem["script_registry_libraries"], 1, "{mem:?}");
}

/// Whether `python3 -c "import redis"` works, installing the package with
/// pip once when it is missing.
fn python_redis() -> bool {
    let ok = || {
        Command::new("python3")
            .args(["-c", "import redis"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok() {
        return true;
    }
    for extra in [&[][..], &["--break-system-packages"][..]] {
        let _ = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "redis"])
            .args(extra)
            .status();
        if ok() {
            return true;
        }
    }
    false
}

#[test]
fn redis_py_register_script_through_mithril() {
    if !python_redis() {
        println!("note: python3 with the redis package is not available; skipping");
        return;
    }
    let cluster = with_replicas();
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let keys: Vec<String> = key_per_master(&cluster, "py:")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let script = r#"
import sys, redis
port = int(sys.argv[1])
keys = sys.argv[2:]
r = redis.Redis(host="127.0.0.1", port=port)
incr = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
# EVALSHA first (NOSCRIPT: redis-py loads it and calls again), then EVALSHA.
for k in keys:
    assert incr(keys=[k], args=[2]) == 2, k
    assert incr(keys=[k], args=[3]) == 5, k
# A pipeline: redis-py checks SCRIPT EXISTS and loads what is missing.
r.script_flush()
pipe = r.pipeline(transaction=False)
for k in keys:
    incr(keys=[k], args=[1], client=pipe)
    pipe.get(k)
assert pipe.execute() == [6, b"6"] * len(keys), "pipeline"
# A transaction on one key's slot.
r.script_flush()
tx = r.pipeline(transaction=True)
incr(keys=[keys[0]], args=[10], client=tx)
incr(keys=[keys[0]], args=[10], client=tx)
assert tx.execute() == [16, 26], "transaction"
print("redis-py ok")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(m.port.to_string())
        .args(&keys)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "redis-py script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "redis-py ok");
    // Each master ran the script for its key.
    for (k, port) in key_per_master(&cluster, "py:") {
        let v = node_at(&cluster, port).conn().cmd(&["GET", &k]);
        assert!(v.as_bulk().is_some(), "{k}: {v:?}");
    }
}

/// Over maxmemory, scripts are refused as a node over its own budget
/// refuses them: EVAL and EVALSHA without a shebang that call a command
/// that may grow memory, EVAL whose shebang lacks no-writes and allow-oom,
/// FCALL of a function registered without them; scripts that only read,
/// read-only forms and flagged scripts run (Redis's suite checks these
/// with `maxmemory 1`).
#[test]
fn scripts_that_may_write_are_refused_over_maxmemory() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let lib = "#!lua name=oomlib\n\
        redis.register_function('plain', function(k, a) return redis.call('set', k[1], '1') end)\n\
        redis.register_function{function_name='ro', callback=function() return 'hello' end, flags={'no-writes'}}\n\
        redis.register_function{function_name='oom', callback=function(k, a) return redis.call('set', k[1], '2') end, flags={'allow-oom'}}";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", "REPLACE", lib]), bulk("oomlib"));
    let sha_ro = c.cmd(&["SCRIPT", "LOAD", "return 1"]).as_str().to_string();
    let set = "return redis.call('SET', KEYS[1], 'e')";
    let sha_rw = c.cmd(&["SCRIPT", "LOAD", set]).as_str().to_string();
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    let oom = "OOM command not allowed when used memory > 'maxmemory'.";
    assert_eq!(c.cmd(&["FCALL", "plain", "1", "k1"]), err(oom));
    assert_eq!(
        c.cmd(&["EVAL", "redis.call('set','k1','1')", "0"]),
        err(oom)
    );
    assert_eq!(c.cmd(&["EVALSHA", &sha_rw, "1", "k1"]), err(oom));
    // Without a shebang a script that only reads runs, as on a node.
    assert_eq!(c.cmd(&["EVALSHA", &sha_ro, "0"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "k1"]),
        Reply::Bulk(None)
    );
    let e = c.cmd(&["EVAL", "#!lua\nreturn 1", "0"]);
    assert!(
        e.as_error().starts_with("OOM allow-oom flag is not set"),
        "{e:?}"
    );
    assert_eq!(c.cmd(&["FCALL", "ro", "1", "k1"]), bulk("hello"));
    assert_eq!(c.cmd(&["FCALL_RO", "ro", "1", "k1"]), bulk("hello"));
    assert_eq!(c.cmd(&["FCALL", "oom", "1", "k1"]), ok());
    assert_eq!(
        c.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 7", "0"]),
        Reply::Int(7)
    );
    assert_eq!(c.cmd(&["EVAL_RO", "return 8", "0"]), Reply::Int(8));
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(c.cmd(&["GET", "k1"]), bulk("2"));
    assert_eq!(c.cmd(&["FCALL", "plain", "1", "k1"]), ok());
}

/// SCRIPT LOAD and SCRIPT FLUSH inside MULTI: the transaction's node
/// answers them in EXEC's reply, and every master has the script (then
/// none) afterwards.
#[test]
fn script_load_inside_multi_reaches_every_master() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let body = "return redis.call('set', KEYS[1], 'in-multi')";
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SCRIPT", "LOAD", body]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(
        c.cmd(&["SET", "foo", "bar"]),
        Reply::Simple("QUEUED".into())
    );
    let r = c.cmd(&["EXEC"]);
    let items = r.as_array();
    assert_eq!(items[1], ok(), "{r:?}");
    let sha = items[0].as_str().to_string();
    assert_eq!(sha.len(), 40, "{r:?}");
    for n in cluster.masters() {
        wait_until("the script on every master", Duration::from_secs(5), || {
            (n.conn().cmd(&["SCRIPT", "EXISTS", &sha]) == array(vec![int(1)])).then_some(())
        });
    }
    for k in ["a", "b", "c", "d", "e"] {
        assert_eq!(c.cmd(&["EVALSHA", &sha, "1", k]), ok());
    }
    // SCRIPT FLUSH inside MULTI empties every master's cache.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), array(vec![ok()]));
    for n in cluster.masters() {
        wait_until(
            "the script gone from every master",
            Duration::from_secs(5),
            || (n.conn().cmd(&["SCRIPT", "EXISTS", &sha]) == array(vec![int(0)])).then_some(()),
        );
    }
    // SAVE is refused as Redis refuses it there.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SAVE"]),
        err("ERR Command not allowed inside a transaction")
    );
    assert!(c.cmd(&["EXEC"]).as_error().starts_with("EXECABORT"));
}
