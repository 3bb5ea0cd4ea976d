//! Issue 3's routing kinds against a real cluster: fan-out, cluster-wide
//! commands, transactions, blocking commands, pub/sub, read splitting and
//! the commands that are refused.

mod support;

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};
use support::*;

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn fanout_over_a_thousand_keys_with_duplicates_and_mixed_pipeline() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let keys: Vec<String> = (0..1000).map(|i| format!("fk:{i}")).collect();
    let slots: HashSet<u16> = keys.iter().map(|k| key_slot(k.as_bytes())).collect();
    assert!(slots.len() > 900, "keys spread over many slots");

    let mut mset = vec!["MSET".to_string()];
    for (i, k) in keys.iter().enumerate() {
        mset.push(k.clone());
        mset.push(format!("v{i}"));
    }
    assert_eq!(c.cmd(&strs(&mset)), ok());
    // Every key landed on its owner.
    for (i, k) in keys.iter().enumerate().step_by(97) {
        let port = cluster.port_for_slot(key_slot(k.as_bytes()));
        let mut d = Conn::connect(&format!("127.0.0.1:{port}"));
        assert_eq!(d.cmd(&["GET", k]), bulk(&format!("v{i}")));
    }

    // MGET keeps request order, nil for missing keys, duplicates included.
    let mut mget = vec!["MGET".to_string()];
    let mut expect = Vec::new();
    for i in (0..1000).rev().step_by(3) {
        mget.push(format!("fk:{i}"));
        expect.push(bulk(&format!("v{i}")));
        mget.push(format!("missing:{i}"));
        expect.push(Reply::Bulk(None));
        mget.push("fk:7".into());
        expect.push(bulk("v7"));
    }
    assert_eq!(c.cmd(&strs(&mget)), Reply::Array(Some(expect)));

    // Counting commands sum; EXISTS counts a key named twice twice.
    assert_eq!(
        c.cmd(&["EXISTS", "fk:1", "fk:2", "fk:1", "nope"]),
        Reply::Int(3)
    );
    assert_eq!(c.cmd(&["TOUCH", "fk:1", "fk:2", "nope"]), Reply::Int(2));
    assert_eq!(c.cmd(&["UNLINK", "fk:1", "fk:2", "nope"]), Reply::Int(2));
    let mut del = vec!["DEL".to_string()];
    del.extend(keys[10..510].iter().cloned());
    del.push("fk:10".into());
    assert_eq!(c.cmd(&strs(&del)), Reply::Int(500));
    assert_eq!(c.cmd(&["EXISTS", "fk:10", "fk:600"]), Reply::Int(1));

    // Fan-outs interleaved with single-key commands in one pipeline.
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut want = Vec::new();
    for i in 0..200 {
        let a = format!("mix:{i}:a");
        let b = format!("mix:{i}:b");
        cmds.push(vec![
            b"MSET".to_vec(),
            a.clone().into(),
            b"1".to_vec(),
            b.clone().into(),
            b"2".to_vec(),
        ]);
        want.push(ok());
        cmds.push(vec![b"INCR".to_vec(), a.clone().into()]);
        want.push(Reply::Int(2));
        cmds.push(vec![b"MGET".to_vec(), b.clone().into(), a.clone().into()]);
        want.push(Reply::Array(Some(vec![bulk("2"), bulk("2")])));
        cmds.push(vec![b"DEL".to_vec(), a.into(), b.into()]);
        want.push(Reply::Int(2));
    }
    assert_eq!(c.pipeline(&cmds), want);

    // One-slot multi-key commands pass straight through.
    assert_eq!(c.cmd(&["MSET", "{t}a", "1", "{t}b", "2"]), ok());
    assert_eq!(
        c.cmd(&["MGET", "{t}a", "{t}b"]),
        Reply::Array(Some(vec![bulk("1"), bulk("2")]))
    );
    // PFCOUNT over slots: the union (of disjoint sets here).
    assert_eq!(c.cmd(&["PFADD", "hll:a", "x", "y"]), Reply::Int(1));
    assert_eq!(c.cmd(&["PFADD", "hll:b", "z"]), Reply::Int(1));
    assert_eq!(c.cmd(&["PFCOUNT", "hll:a", "hll:b"]), Reply::Int(3));
    // A wrong type inside one part surfaces as that error.
    assert_eq!(c.cmd(&["LPUSH", "alist", "x"]), Reply::Int(1));
    let r = c.cmd(&["MGET", "alist", "fk:600"]);
    assert_eq!(r, Reply::Array(Some(vec![Reply::Bulk(None), bulk("v600")])));
}

#[test]
fn cluster_wide_commands() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let cmds: Vec<Vec<Vec<u8>>> = (0..300)
        .map(|i| {
            vec![
                b"SET".to_vec(),
                format!("w:{i}").into_bytes(),
                b"x".to_vec(),
            ]
        })
        .collect();
    c.pipeline(&cmds);
    assert_eq!(c.cmd(&["SET", "other", "y"]), ok());
    assert_eq!(c.cmd(&["LPUSH", "w:list", "y"]), Reply::Int(1));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(302));
    let direct: i64 = cluster
        .masters()
        .iter()
        .map(|n| n.conn().cmd(&["DBSIZE"]).as_int())
        .sum();
    assert_eq!(direct, 302);

    // A full SCAN returns exactly the union of the masters' keys.
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut rounds = 0;
    loop {
        let r = c.cmd(&["SCAN", &cursor, "COUNT", "50"]);
        let parts = r.as_array();
        cursor = parts[0].as_str().to_string();
        for k in parts[1].as_array() {
            seen.insert(k.as_str().to_string());
        }
        rounds += 1;
        if cursor == "0" {
            break;
        }
        assert!(rounds < 1000);
    }
    let mut all = BTreeSet::new();
    for n in cluster.masters() {
        let mut d = n.conn();
        let mut cur = "0".to_string();
        loop {
            let r = d.cmd(&["SCAN", &cur, "COUNT", "100"]);
            cur = r.as_array()[0].as_str().to_string();
            for k in r.as_array()[1].as_array() {
                all.insert(k.as_str().to_string());
            }
            if cur == "0" {
                break;
            }
        }
    }
    assert_eq!(seen, all);
    assert_eq!(seen.len(), 302);

    // MATCH and TYPE are honoured.
    let mut matched = BTreeSet::new();
    let mut typed = BTreeSet::new();
    for (opts, out) in [
        (vec!["MATCH", "w:1*"], &mut matched),
        (vec!["TYPE", "list"], &mut typed),
    ] {
        let mut cur = "0".to_string();
        loop {
            let mut args = vec!["SCAN", cur.as_str()];
            args.extend(opts.iter());
            let r = c.cmd(&args);
            let next = r.as_array()[0].as_str().to_string();
            for k in r.as_array()[1].as_array() {
                out.insert(k.as_str().to_string());
            }
            cur = next;
            if cur == "0" {
                break;
            }
        }
    }
    assert_eq!(
        matched,
        all.iter()
            .filter(|k| k.starts_with("w:1"))
            .cloned()
            .collect::<BTreeSet<_>>()
    );
    assert_eq!(typed, ["w:list".to_string()].into_iter().collect());
    assert_eq!(c.cmd(&["SCAN", "abc"]).as_error(), "ERR invalid cursor");

    let rk = c.cmd(&["RANDOMKEY"]);
    assert!(all.contains(rk.as_str()), "{rk:?}");
    // KEYS: the union over every master, each key once.
    let keys: BTreeSet<String> = c
        .cmd(&["KEYS", "*"])
        .as_array()
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    assert_eq!(keys, all);
    let some: BTreeSet<String> = c
        .cmd(&["KEYS", "w:1*"])
        .as_array()
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    assert_eq!(some, matched);
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(0));
    assert_eq!(c.cmd(&["RANDOMKEY"]), Reply::Bulk(None));
    assert_eq!(c.cmd(&["KEYS", "*"]), Reply::Array(Some(vec![])));
    // One key on one master: RANDOMKEY finds it every time (nil only when
    // every master is empty).
    assert_eq!(c.cmd(&["SET", "lonely", "1"]), ok());
    for _ in 0..20 {
        assert_eq!(c.cmd(&["RANDOMKEY"]), bulk("lonely"));
    }
    assert_eq!(c.cmd(&["FLUSHALL", "ASYNC"]), ok());
    // FLUSHDB (db 0) empties every master, ASYNC and SYNC passed on.
    for mode in [None, Some("ASYNC"), Some("SYNC")] {
        for i in 0..30 {
            assert_eq!(c.cmd(&["SET", &format!("fdb:{i}"), "v"]), ok());
        }
        assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(30));
        let mut args = vec!["FLUSHDB"];
        args.extend(mode);
        assert_eq!(c.cmd(&args), ok(), "{args:?}");
        for n in cluster.masters() {
            assert_eq!(
                n.conn().cmd(&["DBSIZE"]),
                Reply::Int(0),
                "{args:?} on {}",
                n.port
            );
        }
    }
    assert!(c
        .cmd(&["FLUSHDB", "LATER"])
        .as_error()
        .starts_with("ERR syntax error"));
}

#[test]
fn transactions() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "{u}a", "1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["INCR", "{u}a"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["GET", "{u}a"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Array(Some(vec![
            ok(),
            Reply::Int(2),
            bulk("2"),
            Reply::Simple("PONG".into())
        ]))
    );
    let port = cluster.port_for_slot(key_slot(b"{u}a"));
    assert_eq!(
        Conn::connect(&format!("127.0.0.1:{port}")).cmd(&["GET", "{u}a"]),
        bulk("2")
    );

    // Another slot: CROSSSLOT at queue time, then EXECABORT.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "{u}a", "9"]), Reply::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["SET", "{v}b", "9"]).as_error(),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(
        c.cmd(&["EXEC"]).as_error(),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(
        c.cmd(&["GET", "{u}a"]),
        bulk("2"),
        "nothing of the aborted transaction ran"
    );

    // Unknown command inside MULTI dooms it too.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert!(c
        .cmd(&["NOSUCH"])
        .as_error()
        .starts_with("ERR unknown command"));
    assert_eq!(
        c.cmd(&["EXEC"]).as_error(),
        "EXECABORT Transaction discarded because of previous errors."
    );

    // DISCARD, and the errors of misplaced EXEC/DISCARD/MULTI.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["MULTI"]).as_error(),
        "ERR MULTI calls can not be nested"
    );
    assert_eq!(c.cmd(&["INCR", "{u}a"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["DISCARD"]), ok());
    assert_eq!(c.cmd(&["GET", "{u}a"]), bulk("2"));
    assert_eq!(c.cmd(&["EXEC"]).as_error(), "ERR EXEC without MULTI");
    assert_eq!(c.cmd(&["DISCARD"]).as_error(), "ERR DISCARD without MULTI");

    // Empty and keyless transactions.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![])));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["ECHO", "hi"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![bulk("hi")])));

    // A runtime error inside EXEC is per command, as in Redis.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    c.cmd(&["LPUSH", "{u}a", "x"]);
    c.cmd(&["INCR", "{u}a"]);
    let r = c.cmd(&["EXEC"]);
    let items = r.as_array();
    assert!(items[0].as_error().starts_with("WRONGTYPE"));
    assert_eq!(items[1], Reply::Int(3));

    // A transaction whose slot moved before EXEC follows the redirect.
    let key = "{moved}k";
    let slot = key_slot(key.as_bytes());
    assert_eq!(c.cmd(&["SET", key, "1"]), ok());
    let from = cluster.node_for_slot(slot).clone();
    let to = cluster.other_master(slot).clone();
    let s = slot.to_string();
    to.conn()
        .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id]);
    from.conn()
        .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to.id]);
    let p = to.port.to_string();
    assert_eq!(
        from.conn()
            .cmd(&["MIGRATE", "127.0.0.1", &p, "", "0", "5000", "KEYS", key]),
        ok()
    );
    for n in cluster.masters() {
        assert_eq!(
            n.conn().cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &to.id]),
            ok()
        );
    }
    assert_eq!(c.cmd(&["MULTI"]), ok());
    c.cmd(&["INCR", key]);
    c.cmd(&["INCR", key]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Array(Some(vec![Reply::Int(2), Reply::Int(3)]))
    );
    assert_eq!(to.conn().cmd(&["GET", key]), bulk("3"));
}

#[test]
fn blocking_commands_use_leases_and_keep_order() {
    let (cluster, m) = cluster_and_mithril("");
    // 50 clients blocked at once...
    let mut blocked: Vec<Conn> = (0..50).map(|_| m.conn()).collect();
    for (i, b) in blocked.iter_mut().enumerate() {
        b.send(&[b"BLPOP", format!("q:{i}").as_bytes(), b"10"]);
    }
    // ...never delay another client.
    let mut other = m.conn();
    let t = Instant::now();
    for i in 0..200 {
        assert_eq!(other.cmd(&["SET", &format!("free:{i}"), "1"]), ok());
    }
    assert!(t.elapsed() < Duration::from_secs(5));
    for i in 0..50 {
        assert_eq!(
            other.cmd(&["RPUSH", &format!("q:{i}"), &format!("item{i}")]),
            Reply::Int(1)
        );
    }
    for (i, b) in blocked.iter_mut().enumerate() {
        let r = b.read_reply();
        assert_eq!(
            r,
            Reply::Array(Some(vec![
                bulk(&format!("q:{i}")),
                bulk(&format!("item{i}"))
            ]))
        );
    }

    // Requests pipelined behind a blocking command run after it.
    let mut c = m.conn();
    let cmds = vec![
        vec![b"BLPOP".to_vec(), b"order".to_vec(), b"1".to_vec()],
        vec![b"RPUSH".to_vec(), b"order".to_vec(), b"late".to_vec()],
        vec![
            b"LRANGE".to_vec(),
            b"order".to_vec(),
            b"0".to_vec(),
            b"-1".to_vec(),
        ],
    ];
    let got = c.pipeline(&cmds);
    assert_eq!(
        got[0],
        Reply::Array(None),
        "BLPOP timed out: the RPUSH behind it had not run"
    );
    assert_eq!(got[1], Reply::Int(1));
    assert_eq!(got[2], Reply::Array(Some(vec![bulk("late")])));

    // Other blocking forms.
    assert_eq!(c.cmd(&["ZADD", "zq", "1", "a", "2", "b"]), Reply::Int(2));
    assert_eq!(c.cmd(&["BZPOPMAX", "zq", "1"]).as_array()[1], bulk("b"));
    assert_eq!(c.cmd(&["XADD", "st", "1-1", "f", "v"]), bulk("1-1"));
    let r = c.cmd(&["XREAD", "BLOCK", "1000", "STREAMS", "st", "0"]);
    assert_eq!(r.as_array()[0].as_array()[0], bulk("st"));
    // (Redis answers a timed-out list block with a null array.)
    assert_eq!(
        c.cmd(&["BRPOPLPUSH", "{b}nothing", "{b}dst", "1"]),
        Reply::Array(None)
    );

    // A client that leaves mid-block: its lease is closed, the node
    // forgets the block (no blocked client is left on the server).
    let mut leaver = m.conn();
    leaver.send(&[b"BLPOP", b"never", b"0"]);
    wait_until(
        "the BLPOP is blocked on the node",
        Duration::from_secs(5),
        || (info_field(&cluster, "blocked_clients") >= 1).then_some(()),
    );
    drop(leaver);
    wait_until(
        "the node forgot the blocked client",
        Duration::from_secs(5),
        || (info_field(&cluster, "blocked_clients") == 0).then_some(()),
    );
}

#[test]
fn newer_blocking_forms_wake_on_push_and_time_out_with_nil() {
    let (_cluster, m) = cluster_and_mithril("");
    // Keys on different masters: each form leases a connection to its
    // keys' slot (hash tags keep a command's keys in one slot).
    for tag in ["{a}", "{b}", "{c}"] {
        let (src, dst, l2, l3, z1, z2) = (
            format!("{tag}src"),
            format!("{tag}dst"),
            format!("{tag}l2"),
            format!("{tag}l3"),
            format!("{tag}z1"),
            format!("{tag}z2"),
        );
        let mut waiter = m.conn();
        waiter.send(&[
            b"BLMOVE",
            src.as_bytes(),
            dst.as_bytes(),
            b"LEFT",
            b"RIGHT",
            b"5",
        ]);
        let mut waiter2 = m.conn();
        waiter2.send(&[b"BLMPOP", b"5", b"2", l2.as_bytes(), l3.as_bytes(), b"LEFT"]);
        let mut waiter3 = m.conn();
        waiter3.send(&[b"BZMPOP", b"5", b"2", z1.as_bytes(), z2.as_bytes(), b"MIN"]);
        let mut c = m.conn();
        // Let all three block before the pushes.
        wait_until("three clients blocked", Duration::from_secs(5), || {
            let info = c.cmd(&["INFO", "clients"]);
            let text = String::from_utf8_lossy(info.as_bulk().unwrap_or_default()).into_owned();
            text.lines()
                .find_map(|l| l.strip_prefix("blocked_clients:"))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|&n| n >= 3)
                .map(|_| ())
        });
        assert_eq!(c.cmd(&["RPUSH", &src, "one"]), Reply::Int(1));
        assert_eq!(waiter.read_reply(), bulk("one"), "BLMOVE {tag}");
        assert_eq!(c.cmd(&["RPUSH", &l3, "two"]), Reply::Int(1));
        assert_eq!(
            waiter2.read_reply(),
            Reply::Array(Some(vec![bulk(&l3), Reply::Array(Some(vec![bulk("two")]))])),
            "BLMPOP {tag}"
        );
        assert_eq!(c.cmd(&["ZADD", &z2, "3", "m"]), Reply::Int(1));
        assert_eq!(
            waiter3.read_reply(),
            Reply::Array(Some(vec![
                bulk(&z2),
                Reply::Array(Some(vec![Reply::Array(Some(vec![bulk("m"), bulk("3")]))]))
            ])),
            "BZMPOP {tag}"
        );
        assert_eq!(
            c.cmd(&["LRANGE", &dst, "0", "-1"]),
            Reply::Array(Some(vec![bulk("one")]))
        );
        // Timeouts answer nil as on a node (a null array in RESP2, as
        // for BRPOPLPUSH).
        assert_eq!(
            c.cmd(&["BLMOVE", &src, &dst, "LEFT", "LEFT", "0.1"]),
            Reply::Array(None)
        );
        assert_eq!(
            c.cmd(&["BLMPOP", "0.1", "1", &src, "LEFT"]),
            Reply::Array(None)
        );
        assert_eq!(
            c.cmd(&["BZMPOP", "0.1", "1", &z1, "MAX"]),
            Reply::Array(None)
        );
    }
    // Keys in two slots: the node's CROSSSLOT, as a direct connection.
    let mut c = m.conn();
    let r = c.cmd(&["BLMOVE", "{a}x", "{b}y", "LEFT", "LEFT", "0.1"]);
    assert!(r.as_error().starts_with("CROSSSLOT"), "{r:?}");
}

/// Sum of an INFO field over the masters, asked directly.
fn info_field(cluster: &RedisCluster, field: &str) -> i64 {
    cluster
        .masters()
        .iter()
        .map(|n| {
            let info = n.conn().cmd(&["INFO", "clients"]);
            info.as_str()
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{field}:")))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn pubsub_confirmations_interleave_and_messages_flow() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut sub = m.conn();
    let mut publisher = m.conn();
    sub.write_raw(b"*3\r\n$9\r\nSUBSCRIBE\r\n$2\r\nc1\r\n$2\r\nc2\r\n*2\r\n$10\r\nPSUBSCRIBE\r\n$3\r\np.*\r\n").unwrap();
    let arr = |v: Vec<Reply>| Reply::Array(Some(v));
    assert_eq!(
        sub.read_reply(),
        arr(vec![bulk("subscribe"), bulk("c1"), Reply::Int(1)])
    );
    assert_eq!(
        sub.read_reply(),
        arr(vec![bulk("subscribe"), bulk("c2"), Reply::Int(2)])
    );
    assert_eq!(
        sub.read_reply(),
        arr(vec![bulk("psubscribe"), bulk("p.*"), Reply::Int(3)])
    );
    assert_eq!(publisher.cmd(&["PUBLISH", "c1", "hello"]), Reply::Int(1));
    assert_eq!(
        sub.read_reply(),
        arr(vec![bulk("message"), bulk("c1"), bulk("hello")])
    );
    assert_eq!(publisher.cmd(&["PUBLISH", "p.x", "pat"]), Reply::Int(1));
    assert_eq!(
        sub.read_reply(),
        arr(vec![
            bulk("pmessage"),
            bulk("p.*"),
            bulk("p.x"),
            bulk("pat")
        ])
    );
    // RESP2 subscribed context: only the pubsub commands and PING.
    assert_eq!(
        sub.cmd(&["GET", "x"]).as_error(),
        "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    );
    assert_eq!(sub.cmd(&["PING"]), arr(vec![bulk("pong"), bulk("")]));
    // PUBSUB counts mithril's subscribers.
    assert_eq!(
        publisher.cmd(&["PUBSUB", "NUMSUB", "c1"]),
        arr(vec![bulk("c1"), Reply::Int(1)])
    );
    assert_eq!(publisher.cmd(&["PUBSUB", "NUMPAT"]), Reply::Int(1));
    // Unsubscribe from everything: one confirmation per channel.
    sub.send(&[b"UNSUBSCRIBE"]);
    let mut got = HashSet::new();
    for _ in 0..2 {
        let r = sub.read_reply();
        let items = r.as_array();
        assert_eq!(items[0], bulk("unsubscribe"));
        got.insert(items[1].as_str().to_string());
    }
    assert_eq!(
        got,
        ["c1".to_string(), "c2".to_string()].into_iter().collect()
    );
    assert_eq!(
        sub.cmd(&["PUNSUBSCRIBE"]),
        arr(vec![bulk("punsubscribe"), bulk("p.*"), Reply::Int(0)])
    );
    // Out of subscribed mode: ordinary commands again.
    assert_eq!(sub.cmd(&["SET", "after", "1"]), ok());
    // UNSUBSCRIBE when never subscribed: Redis's null confirmation.
    let mut fresh = m.conn();
    assert_eq!(
        fresh.cmd(&["UNSUBSCRIBE"]),
        arr(vec![bulk("unsubscribe"), Reply::Bulk(None), Reply::Int(0)])
    );

    // Many messages, in order.
    let mut s2 = m.conn();
    assert_eq!(
        s2.cmd(&["SUBSCRIBE", "flood"]),
        arr(vec![bulk("subscribe"), bulk("flood"), Reply::Int(1)])
    );
    for i in 0..500 {
        publisher.send(&[b"PUBLISH", b"flood", i.to_string().as_bytes()]);
    }
    for i in 0..500 {
        assert_eq!(
            s2.read_reply(),
            arr(vec![bulk("message"), bulk("flood"), bulk(&i.to_string())])
        );
    }
    for _ in 0..500 {
        assert_eq!(publisher.read_reply(), Reply::Int(1));
    }
}

#[test]
fn read_splitting_reads_from_replicas() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 3,
        replicas_per_master: 1,
        ..Default::default()
    });
    // A short refresh period: replicas still syncing at start are not
    // read from until the cluster reports them online.
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "read-from-replicas prefer-replica\ntopology-refresh-secs 1",
    );
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "rk", "v1"]), ok());
    // Wait until the replica has it, then reads are served there.
    let replicas: Vec<&RedisNode> = cluster
        .nodes
        .iter()
        .filter(|n| n.master_of.is_some())
        .collect();
    wait_until(
        "the write reached a replica",
        Duration::from_secs(10),
        || {
            replicas
                .iter()
                .any(|r| {
                    let mut d = r.conn();
                    d.cmd(&["READONLY"]);
                    d.cmd(&["GET", "rk"]) == bulk("v1")
                })
                .then_some(())
        },
    );
    wait_until(
        "mithril reads from a replica",
        Duration::from_secs(10),
        || {
            let before: i64 = replicas.iter().map(|r| stat(r, "cmdstat_get")).sum();
            c.cmd(&["GET", "rk"]);
            let after: i64 = replicas.iter().map(|r| stat(r, "cmdstat_get")).sum();
            (after > before).then_some(())
        },
    );
    let before: i64 = replicas.iter().map(|r| stat(r, "cmdstat_get")).sum();
    for _ in 0..20 {
        assert_eq!(c.cmd(&["GET", "rk"]), bulk("v1"));
    }
    let after: i64 = replicas.iter().map(|r| stat(r, "cmdstat_get")).sum();
    assert_eq!(after - before, 20, "every GET went to a replica");
    // Writes still go to the master.
    assert_eq!(c.cmd(&["SET", "rk", "v2"]), ok());
}

/// `calls=` of a commandstats line on one node.
fn stat(node: &RedisNode, name: &str) -> i64 {
    let info = node.conn().cmd(&["INFO", "commandstats"]);
    let text = info.as_str().to_string();
    text.lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .and_then(|l| l.split("calls=").nth(1))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn not_implemented_commands_answer_unknown_command() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let refused: &[&[&str]] = &[
        &["SCRIPT", "DEBUG", "YES"],
        &["SHUTDOWN"],
        &["MIGRATE", "h", "1", "k", "0", "1"],
    ];
    // FAILOVER and REPLICAOF answer a cluster node's own refusal
    // (redis_suite_findings.rs compares them with a node's).
    for args in refused {
        let r = c.cmd(args);
        let e = r.as_error();
        assert!(
            e.starts_with(&format!("ERR unknown command '{}'", args[0])),
            "{args:?}: {e}"
        );
    }
    // The widening exceptions are ordinary single-key commands.
    assert_eq!(c.cmd(&["SET", "obj", "12345"]), ok());
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "obj"]), bulk("int"));
    let dump = c.cmd(&["DUMP", "obj"]);
    let payload = dump.as_bulk().unwrap().to_vec();
    assert_eq!(c.cmd_bytes(&[b"RESTORE", b"obj2", b"0", &payload]), ok());
    assert_eq!(c.cmd(&["GET", "obj2"]), bulk("12345"));
    // Scripts route by their first key, or to any master without keys.
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "return redis.call('SET', KEYS[1], ARGV[1])",
            "1",
            "ev",
            "x"
        ]),
        ok()
    );
    assert_eq!(c.cmd(&["GET", "ev"]), bulk("x"));
    assert_eq!(c.cmd(&["EVAL", "return 7", "0"]), Reply::Int(7));
    assert_eq!(
        c.cmd(&["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "ev"]),
        bulk("x")
    );
}

#[test]
fn resp3_sessions_get_resp3_replies_and_pushes() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let hello = c.cmd(&["HELLO", "3"]);
    assert!(matches!(hello, Reply::Map(_)), "{hello:?}");
    // Node replies in RESP3: null, maps, doubles.
    assert_eq!(c.cmd(&["GET", "r3:missing"]), Reply::Null);
    assert_eq!(c.cmd(&["HSET", "r3:h", "f", "v"]), Reply::Int(1));
    assert_eq!(
        c.cmd(&["HGETALL", "r3:h"]),
        Reply::Map(vec![(bulk("f"), bulk("v"))])
    );
    assert_eq!(c.cmd(&["ZADD", "r3:z", "1.5", "m"]), Reply::Int(1));
    assert_eq!(c.cmd(&["ZSCORE", "r3:z", "m"]), Reply::Double(1.5));
    // A fan-out merged by the proxy: nil items in RESP3 form.
    assert_eq!(c.cmd(&["SET", "r3:a", "1"]), ok());
    let r = c.cmd(&["MGET", "r3:a", "r3:nothing", "r3:h2"]);
    assert_eq!(
        r,
        Reply::Array(Some(vec![bulk("1"), Reply::Null, Reply::Null]))
    );
    // Subscribed RESP3 clients keep issuing commands; messages are pushes.
    let r = c.cmd(&["SUBSCRIBE", "r3ch"]);
    assert_eq!(
        r,
        Reply::Push(vec![bulk("subscribe"), bulk("r3ch"), Reply::Int(1)])
    );
    assert_eq!(c.cmd(&["GET", "r3:a"]), bulk("1"));
    let mut p = m.conn();
    assert_eq!(p.cmd(&["PUBLISH", "r3ch", "hi"]), Reply::Int(1));
    assert_eq!(
        c.read_reply(),
        Reply::Push(vec![bulk("message"), bulk("r3ch"), bulk("hi")])
    );
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // Back to RESP2 on a new connection: the node answers RESP2 there.
    assert_eq!(p.cmd(&["GET", "r3:missing"]), Reply::Bulk(None));
}
