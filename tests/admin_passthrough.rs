//! Issue 14, items 5 to 7: server administration through the proxy.
//! WAIT on the masters a session wrote to (a cluster with replicas),
//! CONFIG SET / GET / RESETSTAT of the servers' parameters, DEBUG by key
//! and on every master, MEMORY / OBJECT / LATENCY, SCAN pages filled over
//! the masters, RANDOMKEY, FLUSHDB and KEYS, the version the face reports,
//! and the NOPERM texts of a user without admin rights, against a node.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::*;

/// A key served by each master, one per master.
fn key_per_master(cluster: &RedisCluster, prefix: &str) -> Vec<String> {
    let mut ports = BTreeSet::new();
    cluster
        .slot_map()
        .into_iter()
        .filter(|&(_, _, port)| ports.insert(port))
        .map(|(lo, _, _)| key_for_slot(lo, prefix))
        .collect()
}

fn field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .to_string()
}

/// How many of a node's clients are blocked in `cmd` now (CLIENT LIST's
/// `flags=b` and `cmd=`).
fn clients_running(node: &RedisNode, cmd: &str) -> usize {
    let list = node.conn().cmd(&["CLIENT", "LIST"]);
    list.as_str()
        .lines()
        .filter(|l| l.contains(" flags=b ") && l.contains(&format!(" cmd={cmd} ")))
        .count()
}

#[test]
fn wait_answers_for_the_masters_written_to() {
    let cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    let keys = key_per_master(&cluster, "w");
    assert_eq!(keys.len(), 3);

    // Writes to two masters: each has its replica, so one replica has
    // every write, on both.
    assert_eq!(c.cmd(&["SET", &keys[0], "a"]), ok());
    assert_eq!(c.cmd(&["SET", &keys[1], "b"]), ok());
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    // Two replicas cannot be had: the smallest count, after the timeout.
    assert_eq!(c.cmd(&["SET", &keys[2], "c"]), ok());
    let t = Instant::now();
    assert_eq!(c.cmd(&["WAIT", "2", "300"]), Reply::Int(1));
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}"); // it ends
                                                         // ROLE: the proxy is a master, with the largest of the masters'
                                                         // offsets (each read before it) and no replicas of its own.
    let mut largest = 0;
    for master in cluster.masters() {
        match master.conn().cmd(&["ROLE"]) {
            Reply::Array(Some(v)) if v.len() == 3 && v[0] == bulk("master") => match v[1] {
                Reply::Int(n) => largest = largest.max(n),
                ref other => panic!(":{} ROLE offset {other:?}", master.port),
            },
            other => panic!(":{} answered ROLE with {other:?}", master.port),
        }
    }
    assert!(largest > 0, "the masters have replicas: offsets move");
    match c.cmd(&["ROLE"]) {
        Reply::Array(Some(v)) if v.len() == 3 => {
            assert_eq!(v[0], bulk("master"));
            assert!(
                matches!(v[1], Reply::Int(n) if n >= largest),
                "{v:?} against {largest}"
            );
            assert_eq!(v[2], Reply::Array(Some(vec![])));
        }
        other => panic!("mithril answered ROLE with {other:?}"),
    }
    // No write since: one master's count, at once.
    assert_eq!(c.cmd(&["WAIT", "0", "0"]), Reply::Int(1));
    assert_eq!(c.cmd(&["WAIT", "1", "1000"]), Reply::Int(1));
    // A write pipelined with its WAIT is covered by it.
    let r = c.pipeline(&[argv(&["INCR", &keys[0]]), argv(&["WAIT", "1", "5000"])]);
    assert!(r[0].is_error(), "INCR of a string: {r:?}");
    assert_eq!(r[1], Reply::Int(1));
    let r = c.pipeline(&[
        argv(&["SET", &keys[1], "again"]),
        argv(&["WAIT", "1", "5000"]),
        argv(&["GET", &keys[1]]),
    ]);
    assert_eq!(r, vec![ok(), Reply::Int(1), bulk("again")]);
    let replica = cluster
        .nodes
        .iter()
        .find(|n| {
            n.master_of.as_deref()
                == Some(
                    cluster
                        .node_for_slot(key_slot(keys[1].as_bytes()))
                        .id
                        .as_str(),
                )
        })
        .expect("the master's replica");
    let mut r = replica.conn();
    assert_eq!(r.cmd(&["READONLY"]), ok());
    assert_eq!(r.cmd(&["GET", &keys[1]]), bulk("again"));

    // WAIT waits for the session's own writes: with the replica stopped,
    // a write the replica cannot have gives 0 after the timeout (a WAIT
    // on a connection that wrote nothing would count the replica at once).
    let stopped = Stopped::stop(replica.pid);
    assert_eq!(c.cmd(&["SET", &keys[1], "unseen"]), ok());
    let t = Instant::now();
    assert_eq!(c.cmd(&["WAIT", "1", "300"]), Reply::Int(0));
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    drop(stopped);
    assert_eq!(c.cmd(&["SET", &keys[1], "seen"]), ok());
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));

    // The nodes' error texts.
    let mut node = cluster.masters()[0].conn();
    for args in [
        &["WAIT", "1", "-1"][..],
        &["WAIT", "x", "0"],
        &["WAIT", "1", "x"],
        &["WAITAOF", "0", "0", "0"],
    ] {
        let (ours, theirs) = (c.cmd(args), node.cmd(args));
        assert!(ours.is_error(), "{args:?}: {ours:?}");
        assert_eq!(ours, theirs, "{args:?}");
    }
    assert_eq!(
        c.cmd(&["WAIT", "1", "-1"]).as_error(),
        "ERR timeout is negative"
    );
    // Inside MULTI it runs with the transaction, answered at once, as on
    // a node.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SET", &keys[2], "t"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(c.cmd(&["WAIT", "0", "0"]), Reply::Simple("QUEUED".into()));
    let r = c.cmd(&["EXEC"]);
    assert_eq!(r.as_array().len(), 2, "{r:?}");
    assert!(matches!(r.as_array()[1], Reply::Int(0 | 1)), "{r:?}");

    // Other sessions are not held up by a WAIT that blocks.
    let mut waiter = m.conn();
    assert_eq!(waiter.cmd(&["SET", &keys[0], "x"]), ok());
    waiter.send(&[b"WAIT", b"5", b"0"]);
    let master0 = cluster.node_for_slot(key_slot(keys[0].as_bytes())).clone();
    wait_until_explained(
        "the WAIT blocks on its master",
        Duration::from_secs(5),
        || match clients_running(&master0, "wait") {
            1 => Ok(()),
            _ => Err(master0.conn().cmd(&["CLIENT", "LIST"]).as_str().to_string()),
        },
    );
    let mut other = m.conn();
    let t = Instant::now();
    for i in 0..50 {
        assert_eq!(other.cmd(&["SET", &keys[0], &i.to_string()]), ok());
    }
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // A client that leaves mid-WAIT frees its lease: the node's WAIT ends.
    drop(waiter);
    wait_until("the abandoned WAIT is gone", Duration::from_secs(5), || {
        (clients_running(&master0, "wait") == 0).then_some(())
    });
    // One that half-closes after a write and a WAIT that cannot be met
    // gets the write's reply, then the connection closes (the WAIT is
    // cancelled, as a blocking command's is).
    let mut half = m.conn();
    half.write_raw(&encode_command(&[b"SET", keys[0].as_bytes(), b"h"]))
        .unwrap();
    half.write_raw(&encode_command(&[b"WAIT", b"5", b"0"]))
        .unwrap();
    half.stream().shutdown(std::net::Shutdown::Write).unwrap();
    let rest = half.read_raw_until_closed(Duration::from_secs(5));
    assert_eq!(rest, b"+OK\r\n");
    wait_until(
        "the half-closed WAIT is gone",
        Duration::from_secs(5),
        || (clients_running(&master0, "wait") == 0).then_some(()),
    );
}

#[test]
fn config_debug_and_the_other_admin_commands() {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["enable-debug-command yes".into()],
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    let masters = cluster.masters();

    // CONFIG SET of a server parameter reaches every master.
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "17"]), ok());
    for n in &masters {
        assert_eq!(
            n.conn().cmd(&["CONFIG", "GET", "hz"]),
            Reply::Array(Some(vec![bulk("hz"), bulk("17")])),
            "on {}",
            n.port
        );
    }
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA", "hz", "11"]),
        ok()
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "hz"]),
        Reply::Array(Some(vec![bulk("hz"), bulk("11")]))
    );
    let mut node = masters[0].conn();
    assert_eq!(
        node.cmd(&["CONFIG", "GET", "notify-keyspace-events"]),
        Reply::Array(Some(vec![bulk("notify-keyspace-events"), bulk("AKE")]))
    );
    // mithril's own directives stay its own.
    assert_eq!(c.cmd(&["CONFIG", "SET", "timeout", "0"]), ok());
    // Both kinds in one CONFIG SET: mithril's applied once every master
    // took the rest; a master's refusal leaves mithril's unchanged, and a
    // bad value of mithril's sends nothing.
    let both = Reply::Array(Some(["timeout", "7", "hz", "12"].map(bulk).to_vec()));
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "12", "timeout", "7"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "GET", "timeout", "hz"]), both);
    for bad in [["hz", "x", "timeout", "8"], ["hz", "13", "timeout", "x"]] {
        let mut args = vec!["CONFIG", "SET"];
        args.extend(bad);
        assert!(c.cmd(&args).is_error(), "{args:?}");
        assert_eq!(c.cmd(&["CONFIG", "GET", "timeout", "hz"]), both, "{args:?}");
    }
    assert_eq!(c.cmd(&["CONFIG", "SET", "timeout", "0"]), ok());
    for args in [
        &["CONFIG", "SET", "no-such-parameter", "1"][..],
        &["CONFIG", "SET", "hz", "lots"],
    ] {
        assert_eq!(c.cmd(args), node.cmd(args), "{args:?}");
    }
    // CONFIG GET *: mithril's directives first, then the servers' that
    // it does not shadow, each name once.
    let all = c.cmd(&["CONFIG", "GET", "*"]);
    let names: Vec<&str> = all
        .as_array()
        .iter()
        .step_by(2)
        .map(Reply::as_str)
        .collect();
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    let at = |n: &str| {
        names
            .iter()
            .position(|x| *x == n)
            .unwrap_or_else(|| panic!("{n} in {names:?}"))
    };
    assert!(at("maxmemory") < at("hz"));
    assert!(at("loglevel") < at("lua-time-limit"));
    assert!(at("backend-conns") < at("notify-keyspace-events"));
    let mine = c.cmd(&["CONFIG", "GET", "maxmemory"]);
    assert_eq!(mine.as_array()[0], bulk("maxmemory"));
    // CONFIG RESETSTAT: mithril's and every master's.
    for _ in 0..200 {
        c.cmd(&["PING"]);
        node.cmd(&["PING"]);
    }
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    let processed: i64 = field(
        node.cmd(&["INFO", "stats"]).as_str(),
        "total_commands_processed",
    )
    .parse()
    .unwrap();
    assert!(processed < 50, "{processed}");

    // DEBUG OBJECT by key, on each master.
    let keys = key_per_master(&cluster, "d");
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "12345"]), ok());
        let r = c.cmd(&["DEBUG", "OBJECT", k]);
        assert!(r.as_str().starts_with("Value at:"), "{k}: {r:?}");
        assert!(r.as_str().contains("encoding:int"), "{k}: {r:?}");
        assert_eq!(c.cmd(&["OBJECT", "ENCODING", k]), bulk("int"));
        assert!(c.cmd(&["MEMORY", "USAGE", k]).as_int() > 0);
        let r = c.cmd(&["DEBUG", "DIGEST-VALUE", k]);
        assert_eq!(r.as_array().len(), 1, "{r:?}");
    }
    assert_eq!(
        c.cmd(&["DEBUG", "OBJECT", "missing"]).as_error(),
        "ERR no such key"
    );
    // DEBUG DIGEST: stable over DEBUG RELOAD, zeros only for no data.
    let digest = c.cmd(&["DEBUG", "DIGEST"]).as_str().to_string();
    assert_eq!(digest.len(), 40);
    assert_ne!(digest, "0".repeat(40));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]).as_str(), digest);
    assert_eq!(c.cmd(&["SET", &keys[1], "changed"]), ok());
    assert_ne!(c.cmd(&["DEBUG", "DIGEST"]).as_str(), digest);
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "CHANGE-REPL-ID"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100"]), ok());
    assert!(c
        .cmd(&["DEBUG", "SEGFAULT"])
        .as_error()
        .starts_with("ERR mithril: DEBUG SEGFAULT"));
    // DEBUG SET-ACTIVE-EXPIRE on every master: with it off, keys past
    // their time stay counted; back on, every master drops them.
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v", "PX", "20"]), ok());
    }
    let until = Instant::now() + Duration::from_millis(400);
    while Instant::now() < until {
        for n in &masters {
            assert_eq!(n.conn().cmd(&["DBSIZE"]), Reply::Int(1), "on {}", n.port);
        }
    }
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), ok());
    wait_until(
        "active expiry on every master",
        Duration::from_secs(10),
        || {
            masters
                .iter()
                .all(|n| n.conn().cmd(&["DBSIZE"]) == Reply::Int(0))
                .then_some(())
        },
    );
    // LATENCY and MEMORY.
    assert!(c.cmd(&["LATENCY", "RESET"]).as_int() >= 0);
    assert!(matches!(
        c.cmd(&["LATENCY", "LATEST"]),
        Reply::Array(Some(_))
    ));
    assert_eq!(c.cmd(&["MEMORY", "PURGE"]), ok());
    assert!(!c.cmd(&["MEMORY", "DOCTOR"]).as_str().is_empty());

    // The version the masters run, in INFO and HELLO.
    let version = field(node.cmd(&["INFO", "server"]).as_str(), "redis_version");
    assert_eq!(
        field(c.cmd(&["INFO", "server"]).as_str(), "redis_version"),
        version
    );
    let hello = c.cmd(&["HELLO", "2"]);
    let items = hello.as_array();
    let at = items.iter().position(|i| *i == bulk("version")).unwrap();
    assert_eq!(items[at + 1], bulk(&version));
}

#[test]
fn scan_pages_randomkey_flushdb_and_keys_over_every_master() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    // An empty cluster: done in one call.
    assert_eq!(
        c.cmd(&["SCAN", "0"]),
        Reply::Array(Some(vec![bulk("0"), Reply::Array(Some(vec![]))]))
    );
    // RANDOMKEY with keys on one master only is never nil.
    let keys = key_per_master(&cluster, "r");
    assert_eq!(c.cmd(&["SET", &keys[2], "1"]), ok());
    for _ in 0..30 {
        assert_eq!(c.cmd(&["RANDOMKEY"]), bulk(&keys[2]));
    }
    assert_eq!(c.cmd(&["DEL", &keys[2]]), Reply::Int(1));
    assert_eq!(c.cmd(&["RANDOMKEY"]), Reply::Bulk(None));

    // 30 keys over three masters, COUNT 100: one call, cursor 0.
    let small: BTreeSet<String> = (0..30).map(|i| format!("s:{i}")).collect();
    for k in &small {
        assert_eq!(c.cmd(&["SET", k, "v"]), ok());
    }
    for n in cluster.masters() {
        assert!(
            n.conn().cmd(&["DBSIZE"]).as_int() > 0,
            "keys on every master"
        );
    }
    let r = c.cmd(&["SCAN", "0", "COUNT", "100"]);
    assert_eq!(r.as_array()[0], bulk("0"));
    let got: BTreeSet<String> = r.as_array()[1]
        .as_array()
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    assert_eq!(got, small);
    // MATCH and TYPE still filter.
    let r = c.cmd(&[
        "SCAN", "0", "MATCH", "s:1*", "COUNT", "100", "TYPE", "string",
    ]);
    assert_eq!(r.as_array()[0], bulk("0"));
    assert_eq!(r.as_array()[1].as_array().len(), 11);

    // 1,000 keys with the default COUNT: every key once, pages of about
    // ten, the last cursor 0.
    for i in 0..1000 {
        assert_eq!(c.cmd(&["SET", &format!("big:{i}"), "v"]), ok());
    }
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    let mut pages = 0;
    loop {
        let r = c.cmd(&["SCAN", &cursor, "MATCH", "big:*"]);
        cursor = r.as_array()[0].as_str().to_string();
        let page = r.as_array()[1].as_array();
        if cursor != "0" {
            assert!(page.len() >= 10, "a page of {} before the end", page.len());
        }
        seen.extend(page.iter().map(|k| k.as_str().to_string()));
        pages += 1;
        assert!(pages < 1000);
        if cursor == "0" {
            break;
        }
    }
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no key twice");
    assert_eq!(unique.len(), 1000);
    assert!(pages < 150, "{pages} pages");

    // KEYS: the union; FLUSHDB empties every master.
    let all: BTreeSet<String> = c
        .cmd(&["KEYS", "*"])
        .as_array()
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    assert_eq!(all.len(), 1030);
    assert_eq!(c.cmd(&["FLUSHDB"]), ok());
    for n in cluster.masters() {
        assert_eq!(n.conn().cmd(&["DBSIZE"]), Reply::Int(0));
    }
    assert_eq!(c.cmd(&["KEYS", "*"]), Reply::Array(Some(vec![])));

    // INFO persistence: the masters' together (changes summed).
    assert_eq!(c.cmd(&["SET", "p:1", "v"]), ok());
    let changes =
        |text: &str| -> i64 { field(text, "rdb_changes_since_last_save").parse().unwrap() };
    let direct: i64 = cluster
        .masters()
        .iter()
        .map(|n| changes(n.conn().cmd(&["INFO", "persistence"]).as_str()))
        .sum();
    let ours = c.cmd(&["INFO", "persistence"]).as_str().to_string();
    assert!(ours.starts_with("# Persistence\r\n"), "{ours}");
    assert_eq!(changes(&ours), direct);
    assert!(direct >= 2031, "{direct}");
    assert_eq!(field(&ours, "loading"), "0");
    // The data's side of stats: the masters' hits and misses, summed.
    assert_eq!(c.cmd(&["GET", "p:1"]), bulk("v"));
    assert_eq!(c.cmd(&["GET", "p:none"]), Reply::Bulk(None));
    let stat = |text: &str, name: &str| -> i64 { field(text, name).parse().unwrap() };
    let direct: Vec<String> = cluster
        .masters()
        .iter()
        .map(|n| n.conn().cmd(&["INFO", "stats"]).as_str().to_string())
        .collect();
    let ours = c.cmd(&["INFO", "stats"]).as_str().to_string();
    for name in ["keyspace_hits", "keyspace_misses", "expired_keys"] {
        let sum: i64 = direct.iter().map(|t| stat(t, name)).sum();
        assert_eq!(stat(&ours, name), sum, "{name}");
    }
    assert!(stat(&ours, "keyspace_hits") >= 1);
    assert!(stat(&ours, "keyspace_misses") >= 1);
}

/// A user without admin rights gets the NOPERM a node gives the same user.
#[test]
fn noperm_for_a_user_without_admin_rights_as_on_a_node() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        extra_redis_conf: vec!["enable-debug-command yes".into()],
        ..ClusterSpec::default()
    });
    let m = Mithril::start_locked(
        bin(),
        &cluster.seeds(),
        "user default off\nuser writer on >w-pw mode write\n",
    );
    // The node's user of the same rights: everything but admin commands.
    let setuser = "ACL SETUSER writer on >w-pw ~* &* +@all -@admin -@dangerous";
    let setuser: Vec<&str> = setuser.split(' ').collect();
    assert_eq!(cluster.nodes[0].conn().cmd(&setuser), ok());
    let mut live = cluster.nodes[0].conn();
    assert_eq!(live.cmd(&["AUTH", "writer", "w-pw"]), ok());
    let mut ours = m.conn();
    assert_eq!(ours.cmd(&["AUTH", "writer", "w-pw"]), ok());
    for args in [
        &["CONFIG", "SET", "hz", "10"][..],
        &["CONFIG", "GET", "hz"],
        &["CONFIG", "RESETSTAT"],
        &["DEBUG", "OBJECT", "k"],
        &["DEBUG", "SET-ACTIVE-EXPIRE", "0"],
        &["LATENCY", "RESET"],
    ] {
        let (o, l) = (ours.cmd(args), live.cmd(args));
        assert!(o.as_error().starts_with("NOPERM"), "{args:?}: {o:?}");
        assert_eq!(o, l, "{args:?}");
    }
}

/// CLIENT PAUSE and UNPAUSE reach every master: under `PAUSE ... WRITE`
/// a write sent straight to any master waits while a read is answered,
/// and UNPAUSE through mithril releases it. The argument errors are the
/// node's.
#[test]
fn client_pause_and_unpause_reach_every_master() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let keys = key_per_master(&cluster, "paused");
    assert_eq!(keys.len(), 3);
    // Long enough never to run out during the test, however slow.
    assert_eq!(c.cmd(&["CLIENT", "PAUSE", "600000", "WRITE"]), ok());
    let mut direct = Vec::new();
    for (key, port) in cluster.key_per_master("paused-direct") {
        let mut d = Conn::connect(&format!("127.0.0.1:{port}"));
        assert_eq!(d.cmd(&["PING"]), Reply::Simple("PONG".into()), ":{port}");
        d.send(&[b"SET", key.as_bytes(), b"1"]);
        let early = d.try_read_reply(Duration::from_millis(300));
        assert!(
            early.is_err(),
            ":{port} answered a write during the pause: {early:?}"
        );
        direct.push((port, d));
    }
    // Reads through mithril go on; a write through mithril waits too.
    for k in &keys {
        assert_eq!(c.cmd(&["GET", k]), Reply::Bulk(None), "{k}");
    }
    assert_eq!(c.cmd(&["CLIENT", "UNPAUSE"]), ok());
    for (port, mut d) in direct {
        let r = d
            .try_read_reply(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!(":{port} never answered the write after UNPAUSE: {e}"));
        assert_eq!(r, ok(), ":{port}: the write held by the pause");
    }
    let mut node = cluster.nodes[0].conn();
    for args in [
        &["CLIENT", "PAUSE", "soon"][..],
        &["CLIENT", "PAUSE", "10", "READS"][..],
        &["CLIENT", "UNPAUSE", "x"][..],
    ] {
        assert_eq!(c.cmd(args), node.cmd(args), "{args:?}");
    }
}

/// A node that refuses a command of the transaction as EXEC brings it
/// (here NOREPLICAS, after CONFIG SET min-replicas-to-write through the
/// proxy): the client, which saw QUEUED, gets EXECABORT with the node's
/// reason, as from a server whose state changed after queueing; nothing
/// ran.
#[test]
fn exec_names_what_the_node_refused_in_the_transaction() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "xx", "1"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "xx"]), Reply::Simple("QUEUED".into()));
    let mut admin = m.conn();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2"]),
        ok()
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.")
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]),
        ok()
    );
    assert_eq!(c.cmd(&["GET", "xx"]), bulk("1"));
    // The next transaction is not told of the old refusal.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "xx"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![Reply::Int(2)])));
}
