//! Differences from a Redis node that Redis's own test suite found
//! (tools/redis-testsuite/run.sh), each checked here against a real cluster
//! and, where the answer is the node's, against that node's answer.

mod support;

use std::time::Duration;
use support::*;

fn arr(v: Vec<Reply>) -> Reply {
    Reply::Array(Some(v))
}

/// `blocked_clients` from INFO clients.
fn blocked_clients(c: &mut Conn) -> i64 {
    let info = c.cmd(&["INFO", "clients"]);
    info.as_str()
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .unwrap_or_else(|| panic!("no blocked_clients in {info:?}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("blocked_clients is not a number ({e}): {info:?}"))
}

fn wait_blocked(c: &mut Conn, want: i64) {
    let mut last = -1;
    let seen = poll_until(Duration::from_secs(5), || {
        last = blocked_clients(c);
        (last == want).then_some(())
    });
    assert!(
        seen.is_some(),
        "blocked_clients stayed {last}, expected {want}"
    );
}

#[test]
fn ping_with_more_than_one_argument_is_an_arity_error() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let mut node = cluster.nodes[0].conn();
    let want = Reply::Error("ERR wrong number of arguments for 'ping' command".into());
    for args in [&["PING", "x", "y"][..], &["PING", "x", "y", "z"][..]] {
        assert_eq!(node.cmd(args), want, "the node's answer to {args:?}");
        assert_eq!(c.cmd(args), want, "mithril's answer to {args:?}");
    }
    // One message is still echoed, and the connection is still usable.
    assert_eq!(c.cmd(&["PING", "x"]), bulk("x"));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn ping_after_unsubscribing_from_everything_is_a_plain_pong() {
    let (cluster, m) = cluster_and_mithril("");
    let mut node = cluster.nodes[0].conn();
    let mut c = m.conn();
    // Redis's sequence (the suite's "Pub/Sub PING"), asked of a node and of
    // mithril: while subscribed, PING answers ["pong", msg]; once the last
    // subscription is gone, it is a plain PONG again.
    for (who, conn) in [("node", &mut node), ("mithril", &mut c)] {
        assert_eq!(
            conn.cmd(&["SUBSCRIBE", "somechannel"]),
            arr(vec![bulk("subscribe"), bulk("somechannel"), Reply::Int(1)]),
            "{who}"
        );
        assert_eq!(
            conn.cmd(&["PING"]),
            arr(vec![bulk("pong"), bulk("")]),
            "{who}"
        );
        assert_eq!(
            conn.cmd(&["PING", "foo"]),
            arr(vec![bulk("pong"), bulk("foo")]),
            "{who}"
        );
        assert_eq!(
            conn.cmd(&["UNSUBSCRIBE", "somechannel"]),
            arr(vec![
                bulk("unsubscribe"),
                bulk("somechannel"),
                Reply::Int(0)
            ]),
            "{who}"
        );
        assert_eq!(conn.cmd(&["PING"]), Reply::Simple("PONG".into()), "{who}");
        // Ordinary commands work again.
        assert_eq!(conn.cmd(&["ECHO", "hi"]), bulk("hi"), "{who}");
    }
}

#[test]
fn info_blocked_clients_counts_clients_waiting_on_a_blocking_command() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut admin = m.conn();
    assert_eq!(blocked_clients(&mut admin), 0);

    let mut a = m.conn();
    a.send(&[b"BLPOP", b"bc:list", b"0"]);
    wait_blocked(&mut admin, 1);
    let mut b = m.conn();
    b.send(&[b"BRPOPLPUSH", b"bc:{x}src", b"bc:{x}dst", b"0"]);
    wait_blocked(&mut admin, 2);

    // Answered: the count goes down and the client got its element.
    assert_eq!(admin.cmd(&["LPUSH", "bc:list", "v"]), Reply::Int(1));
    assert_eq!(a.read_reply(), arr(vec![bulk("bc:list"), bulk("v")]));
    wait_blocked(&mut admin, 1);

    // A client that leaves while blocked is no longer counted.
    drop(b);
    wait_blocked(&mut admin, 0);

    // A blocking command that times out counts only while it waits.
    a.send(&[b"BLPOP", b"bc:empty", b"0.2"]);
    assert_eq!(a.read_reply(), Reply::Array(None));
    wait_blocked(&mut admin, 0);
}

/// `INFO errorstats` as `code -> count`, and `total_error_replies`.
fn errorstats(c: &mut Conn) -> (Vec<(String, u64)>, u64) {
    let text = c.cmd(&["INFO", "errorstats"]).as_str().to_string();
    assert!(text.starts_with("# Errorstats\r\n"), "{text:?}");
    let codes = text
        .lines()
        .filter_map(|l| l.strip_prefix("errorstat_"))
        .map(|l| {
            let (code, count) = l.split_once(":count=").unwrap_or_else(|| panic!("{l:?}"));
            (code.to_string(), count.trim().parse().unwrap())
        })
        .collect();
    let stats = c.cmd(&["INFO", "stats"]).as_str().to_string();
    let total = stats
        .lines()
        .find_map(|l| l.strip_prefix("total_error_replies:"))
        .unwrap_or_else(|| panic!("no total_error_replies in {stats:?}"))
        .trim()
        .parse()
        .unwrap();
    (codes, total)
}

fn codes(v: &[(&str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|&(c, n)| (c.to_string(), n)).collect()
}

#[test]
fn errorstats_count_error_replies_by_code_as_a_node_does() {
    // The suite's "LUA redis.error_reply API" (unit/scripting): a script's
    // error reply is counted under its code, by mithril as by the node.
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let mut node = cluster.nodes[0].conn();
    for conn in [&mut node, &mut c] {
        assert_eq!(conn.cmd(&["CONFIG", "RESETSTAT"]), ok());
        assert_eq!(errorstats(conn), (vec![], 0));
        let e = conn.cmd(&[
            "EVAL",
            "return redis.error_reply('MY_ERR_CODE custom msg')",
            "0",
        ]);
        assert_eq!(e, err("MY_ERR_CODE custom msg"));
        assert_eq!(
            conn.cmd(&["EVAL", "return redis.error_reply('')", "0"]),
            err("ERR ")
        );
        assert_eq!(
            errorstats(conn),
            (codes(&[("ERR", 1), ("MY_ERR_CODE", 1)]), 2),
            "{}",
            conn.addr()
        );
    }

    // The proxy's own errors count too, a merged reply once (SCRIPT KILL:
    // NOTBUSY from every master, one reply), and a blocked command's
    // error as it ends the block (the suite's "XGROUP DESTROY should
    // unblock XREADGROUP with -NOGROUP").
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert!(c.cmd(&["NOSUCHCOMMAND"]).is_error());
    assert_eq!(c.cmd(&["SET", "es:k", "v"]), ok());
    assert!(c
        .cmd(&["LPUSH", "es:k", "x"])
        .as_error()
        .starts_with("WRONGTYPE"));
    assert!(c.cmd(&["SCRIPT", "KILL"]).as_error().starts_with("NOTBUSY"));
    assert_eq!(
        c.cmd(&["XGROUP", "CREATE", "es:s", "g", "$", "MKSTREAM"]),
        ok()
    );
    let mut blocked = m.conn();
    blocked.send(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"alice",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"es:s",
        b">",
    ]);
    wait_blocked(&mut c, 1);
    assert_eq!(c.cmd(&["XGROUP", "DESTROY", "es:s", "g"]), Reply::Int(1));
    assert!(blocked.read_reply().as_error().starts_with("NOGROUP"));
    assert_eq!(
        errorstats(&mut c),
        (
            codes(&[("ERR", 1), ("NOGROUP", 1), ("NOTBUSY", 1), ("WRONGTYPE", 1)]),
            4
        )
    );
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(errorstats(&mut c), (vec![], 0));

    // A node's error that mithril retries counts only once it reaches the
    // client: a multi-key command on a half-migrated slot with a request
    // behind it gets TRYAGAIN at once (the waits are for a last request).
    let (j1, j2) = ("{es-t}1", "{es-t}2");
    assert_eq!(c.cmd(&["SADD", j1, "a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["SADD", j2, "b"]), Reply::Int(1));
    cluster.split_slot(key_slot(j1.as_bytes()), &[j1]);
    let r = c.pipeline(&[argv(&["SUNION", j1, j2]), argv(&["PING"])]);
    assert!(r[0].as_error().starts_with("TRYAGAIN"), "{r:?}");
    assert_eq!(errorstats(&mut c), (codes(&[("TRYAGAIN", 1)]), 1));
}

/// Sends `cmds` in one write and reads `n` replies.
fn pipelined(c: &mut Conn, cmds: &[&[&str]], n: usize) -> Vec<Reply> {
    for cmd in cmds {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        c.send(&args);
    }
    (0..n).map(|_| c.read_reply()).collect()
}

#[test]
fn client_reply_off_and_skip_silence_replies_but_not_pubsub() {
    // The suite's "PubSub messages with CLIENT REPLY OFF" and the keyspace
    // notification tests, which silence a subscriber's replies first.
    let (cluster, m) = cluster_and_mithril("");
    let mut node = cluster.nodes[0].conn();
    let mut c = m.conn();
    for (who, conn) in [("node", &mut node), ("mithril", &mut c)] {
        // OFF: nothing until ON's own OK; the commands ran.
        let r = pipelined(
            conn,
            &[
                &["CLIENT", "REPLY", "OFF"],
                &["ECHO", "silenced"],
                &["NOSUCHCOMMAND"],
                &["CLIENT", "REPLY", "ON"],
                &["ECHO", "heard"],
            ],
            2,
        );
        assert_eq!(r, vec![ok(), bulk("heard")], "{who}");
        // SKIP: its own reply and the next command's are dropped.
        let r = pipelined(
            conn,
            &[
                &["CLIENT", "REPLY", "SKIP"],
                &["ECHO", "skipped"],
                &["ECHO", "after"],
            ],
            1,
        );
        assert_eq!(r, vec![bulk("after")], "{who}");
        assert_eq!(
            conn.cmd(&["CLIENT", "REPLY", "maybe"]),
            err("ERR syntax error"),
            "{who}"
        );
    }
    // Routed commands, answered later by the masters, are silenced too.
    let r = pipelined(
        &mut c,
        &[
            &["CLIENT", "REPLY", "OFF"],
            &["SET", "cr:a", "1"],
            &["MSET", "cr:b", "2", "cr:c", "3"],
            &["CLIENT", "REPLY", "ON"],
            &["MGET", "cr:a", "cr:b", "cr:c"],
        ],
        2,
    );
    assert_eq!(
        r,
        vec![ok(), arr(vec![bulk("1"), bulk("2"), bulk("3")])],
        "mithril"
    );

    // Subscribe confirmations and messages still arrive, in RESP3.
    let mut pubr = m.conn();
    let mut sub = m.conn();
    assert!(!sub.cmd(&["HELLO", "3"]).is_error());
    sub.send(&[b"CLIENT", b"REPLY", b"OFF"]);
    let push = |v: &[Reply]| Reply::Push(v.to_vec());
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "cr:ch"]),
        push(&[bulk("subscribe"), bulk("cr:ch"), Reply::Int(1)])
    );
    assert_eq!(pubr.cmd(&["PUBLISH", "cr:ch", "hello"]), Reply::Int(1));
    assert_eq!(
        sub.read_reply(),
        push(&[bulk("message"), bulk("cr:ch"), bulk("hello")])
    );
    assert_eq!(
        sub.cmd(&["UNSUBSCRIBE", "cr:ch"]),
        push(&[bulk("unsubscribe"), bulk("cr:ch"), Reply::Int(0)])
    );
    // RESET turns the replies back on.
    sub.send(&[b"ECHO", b"silenced"]);
    assert_eq!(sub.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    assert_eq!(sub.cmd(&["ECHO", "x"]), bulk("x"));
}

#[test]
fn pfselftest_and_pfdebug_reach_the_nodes() {
    // The suite's hyperloglog unit: "HyperLogLog self test passes",
    // "PFDEBUG GETREG returns the HyperLogLog raw registers", and the
    // sparse / dense promotion tests that read PFDEBUG ENCODING.
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["PFSELFTEST"]), ok());
    // Keys on every master: PFDEBUG goes where the key lives.
    for key in ["pf:a", "pf:b", "pf:c", "pf:d"] {
        assert_eq!(c.cmd(&["PFADD", key, "x", "y", "z"]), Reply::Int(1));
        assert_eq!(
            c.cmd(&["PFDEBUG", "ENCODING", key]),
            Reply::Simple("sparse".into())
        );
        assert_eq!(c.cmd(&["PFDEBUG", "TODENSE", key]), Reply::Int(1));
        assert_eq!(
            c.cmd(&["PFDEBUG", "ENCODING", key]),
            Reply::Simple("dense".into())
        );
        assert_eq!(c.cmd(&["PFDEBUG", "GETREG", key]).as_array().len(), 16384);
        let mut node = cluster.node_for_slot(key_slot(key.as_bytes())).conn();
        assert_eq!(
            node.cmd(&["PFDEBUG", "ENCODING", key]),
            Reply::Simple("dense".into())
        );
    }
    assert_eq!(
        c.cmd(&["PFDEBUG", "nosuch", "pf:a"]),
        err("ERR Unknown PFDEBUG subcommand 'nosuch'")
    );
}

/// The keys of the next `message` on `__redis__:invalidate` (RESP2).
fn invalidated(sub: &mut Conn) -> Vec<String> {
    let m = sub
        .try_read_reply(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("no invalidation came: {e}"));
    let parts = m.as_array();
    assert_eq!(parts[0], bulk("message"), "{m:?}");
    assert_eq!(parts[1], bulk("__redis__:invalidate"), "{m:?}");
    let mut keys: Vec<String> = parts[2]
        .as_array()
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    keys.sort();
    keys
}

#[test]
fn bcast_invalidations_come_batched_per_prefix_without_a_null() {
    // The suite's tracking unit, from "Clients can enable the BCAST mode
    // with the empty prefix" on: the keys a command changed come in one
    // message per prefix, and turning BCAST on sends nothing. mithril sent
    // a null at BCAST, then one message per key, which shifted every later
    // read of the redirect client; and it told a BCAST client of a key it
    // had read before, in the default mode.
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut sub = m.conn();
    let id = sub.cmd(&["CLIENT", "ID"]).as_int().to_string();
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "__redis__:invalidate"]),
        arr(vec![
            bulk("subscribe"),
            bulk("__redis__:invalidate"),
            Reply::Int(1)
        ])
    );
    let mut r = m.conn();
    // Normal tracking first, as the suite does: once a read's change is
    // heard, the trackers are up.
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]), ok());
    wait_until("the trackers to be up", Duration::from_secs(10), || {
        r.cmd(&["GET", "bc:probe{t}"]);
        r.cmd(&["SET", "bc:probe{t}", "1"]);
        // Read everything that comes (a null may, while trackers start).
        let mut heard = false;
        while let Ok(m) = sub.try_read_reply(Duration::from_millis(300)) {
            if let Reply::Array(Some(v)) = &m {
                heard |= matches!(v.get(2), Some(Reply::Array(Some(k))) if k.len() == 1);
            }
        }
        heard.then_some(())
    });
    // A key read in the default mode is not news once the client is in
    // BCAST (Redis skips BCAST clients when it invalidates its table):
    // only the key under the prefix comes.
    assert_eq!(r.cmd(&["GET", "bc:x{t}"]), Reply::Bulk(None));
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id, "PREFIX", "a:"]),
        ok()
    );
    assert_eq!(r.cmd(&["SET", "bc:x{t}", "1"]), ok());
    assert_eq!(r.cmd(&["INCR", "a:0{t}"]), Reply::Int(1));
    assert_eq!(invalidated(&mut sub), ["a:0{t}"]);
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id]),
        ok()
    );
    assert_eq!(
        r.cmd(&["MSET", "a{t}", "1", "b{t}", "2", "c{t}", "3"]),
        ok()
    );
    assert_eq!(invalidated(&mut sub), ["a{t}", "b{t}", "c{t}"]);

    // With prefixes: one message for a:, one for b:, nothing for c:.
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(
        r.cmd(&[
            "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id, "PREFIX", "a:", "PREFIX", "b:"
        ]),
        ok()
    );
    assert_eq!(r.cmd(&["MULTI"]), ok());
    for k in ["a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}", "c:1{t}"] {
        assert_eq!(r.cmd(&["INCR", k]), Reply::Simple("QUEUED".into()));
    }
    assert_eq!(r.cmd(&["EXEC"]).as_array().len(), 5);
    let mut both = invalidated(&mut sub);
    both.extend(invalidated(&mut sub));
    both.sort();
    assert_eq!(both, ["a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}"]);
    // And nothing else is waiting (the suite's next test reads one more).
    assert_eq!(r.cmd(&["INCR", "a:3{t}"]), Reply::Int(1));
    assert_eq!(invalidated(&mut sub), ["a:3{t}"]);
}

/// One field of an INFO text.
fn info_field(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

#[test]
fn info_has_replication_and_the_masters_allocator_and_migrate_sockets() {
    // info-command's "info command with multiple sub-sections" wants
    // master_repl_offset in `INFO cpu all` / `INFO cpu default` and not in
    // `INFO cpu sentinel`; dump's "MIGRATE cached connections are released
    // after some time" waits for migrate_cached_sockets:0 in a bare INFO;
    // string's "trim on SET with big value" runs only when mem_allocator
    // names jemalloc.
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let t = c.cmd(&["INFO", "cpu", "sentinel"]).as_str().to_string();
    assert!(
        t.contains("used_cpu_user") && !t.contains("master_repl_offset"),
        "{t}"
    );
    let node = cluster.nodes[0].conn().cmd(&["INFO", "memory"]);
    let allocator = info_field(node.as_str(), "mem_allocator").unwrap();
    for args in [
        &["INFO", "cpu", "all"][..],
        &["INFO", "cpu", "default"],
        &["INFO"],
    ] {
        let t = c.cmd(args).as_str().to_string();
        assert_eq!(
            info_field(&t, "role").as_deref(),
            Some("master"),
            "{args:?}"
        );
        assert_eq!(
            info_field(&t, "connected_slaves").as_deref(),
            Some("0"),
            "{args:?}"
        );
        assert!(info_field(&t, "master_repl_offset").is_some(), "{args:?}");
        assert_eq!(
            info_field(&t, "migrate_cached_sockets").as_deref(),
            Some("0"),
            "{args:?}"
        );
        assert_eq!(
            info_field(&t, "mem_allocator"),
            Some(allocator.clone()),
            "{args:?}"
        );
        assert!(
            !t.contains("used_cpu_user_children:0\r\nused_cpu_user_children"),
            "{args:?}"
        );
    }
    let t = c.cmd(&["INFO", "replication"]).as_str().to_string();
    assert!(t.starts_with("# Replication\r\nrole:master\r\n"), "{t:?}");
    assert!(!t.contains("master_replid"), "{t:?}");
}

/// unit/tracking runs `DEBUG SLEEP` inside MULTI (and unit/expire `DEBUG
/// SET-ACTIVE-EXPIRE`): queued with the transaction, as a node queues it,
/// and run with it on the transaction's node.
#[test]
fn debug_inside_multi_is_queued_with_the_transaction() {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["enable-debug-command yes".into()],
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    let got = c.pipeline(&[
        argv(&["MULTI"]),
        argv(&["SET", "dbg{t}", "1"]),
        argv(&["DEBUG", "SLEEP", "0"]),
        argv(&["INCR", "dbg{t}"]),
        argv(&["EXEC"]),
    ]);
    assert_eq!(got[2], Reply::Simple("QUEUED".into()), "{got:?}");
    assert_eq!(
        got[4],
        Reply::Array(Some(vec![ok(), ok(), Reply::Int(2)])),
        "{got:?}"
    );
    // Alone in a transaction too.
    let got = c.pipeline(&[
        argv(&["MULTI"]),
        argv(&["DEBUG", "SLEEP", "0"]),
        argv(&["EXEC"]),
    ]);
    assert_eq!(got[2], Reply::Array(Some(vec![ok()])), "{got:?}");
    // What the proxy refuses outside a transaction stays refused inside.
    let got = c.pipeline(&[
        argv(&["MULTI"]),
        argv(&["DEBUG", "SEGFAULT"]),
        argv(&["DISCARD"]),
    ]);
    assert!(got[1].is_error(), "{got:?}");
    for n in cluster.masters() {
        assert_eq!(
            n.conn().cmd(&["PING"]).as_str(),
            "PONG",
            "every node still up"
        );
    }
}

/// The suite's "client unblock tests" (list), on a key of every master and
/// with the blocked client and the unblocking one on two workers: CLIENT
/// UNBLOCK reaches the node holding the lease, which answers the BLPOP as
/// timed out (nil) or with the UNBLOCKED error; a client not blocked gets
/// 0; the argument errors are Redis's own.
#[test]
fn client_unblock_reaches_the_node_holding_the_lease() {
    let (cluster, m) = cluster_and_mithril("threads 2\n");
    let mut node = cluster.nodes[0].conn();
    for (list, _port) in cluster.key_per_master("unblock") {
        // Several blocked clients, so that some share the unblocker's
        // worker and some do not (sessions are spread over the workers).
        let mut killer = m.conn();
        for round in 0..4 {
            let mut rd = m.conn();
            let id = match rd.cmd(&["CLIENT", "ID"]) {
                Reply::Int(n) => n.to_string(),
                other => panic!("CLIENT ID answered {other:?}"),
            };
            let error = round % 2 == 1;
            rd.send(&[b"BLPOP", list.as_bytes(), b"0"]);
            wait_blocked(&mut killer, 1);
            let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
            if error {
                args.push("ERROR");
            } else if round == 2 {
                args.push("timeout");
            }
            assert_eq!(killer.cmd(&args), Reply::Int(1), "{list} round {round}");
            let want = if error {
                Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
            } else {
                Reply::Array(None)
            };
            assert_eq!(
                rd.read_reply(),
                want,
                "{list} round {round}: the BLPOP's answer"
            );
            wait_blocked(&mut killer, 0);
            // Not blocked any more: 0, and the client works on.
            assert_eq!(
                killer.cmd(&["CLIENT", "UNBLOCK", id.as_str()]),
                Reply::Int(0)
            );
            assert_eq!(rd.cmd(&["RPUSH", list.as_str(), "x"]), Reply::Int(1));
            assert_eq!(
                rd.cmd(&["BLPOP", list.as_str(), "0"]),
                arr(vec![bulk(&list), bulk("x")])
            );
        }
    }
    let mut c = m.conn();
    for args in [
        &["CLIENT", "UNBLOCK", "asd"][..],
        &["CLIENT", "UNBLOCK", "1", "later"][..],
        &["CLIENT", "UNBLOCK", "1", "timeout", "x"][..],
        &["CLIENT", "UNBLOCK", "-5"][..],
    ] {
        assert_eq!(c.cmd(args), node.cmd(args), "{args:?}");
    }
}

/// INFO's `blocked_clients` is what the masters hold blocked: a client
/// blocked through mithril counts once its node holds the command (so
/// the suite's `wait_for_blocked_client` then an LPUSH never overtakes
/// the BLPOP), and a client blocked directly on a node counts too.
#[test]
fn blocked_clients_are_counted_where_they_block() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let keys = cluster.key_per_master("blockedhere");
    let (direct_key, direct_port) = keys[0].clone();
    let mut direct = Conn::connect(&format!("127.0.0.1:{direct_port}"));
    direct.send(&[b"BLPOP", direct_key.as_bytes(), b"0"]);
    wait_blocked(&mut c, 1);
    let mut through = m.conn();
    through.send(&[b"BLPOP", keys[1].0.as_bytes(), b"0"]);
    wait_blocked(&mut c, 2);
    // The count is the node's: the push reaches a node already blocked.
    assert_eq!(c.cmd(&["RPUSH", &keys[1].0, "v"]), Reply::Int(1));
    assert_eq!(through.read_reply(), arr(vec![bulk(&keys[1].0), bulk("v")]));
    assert_eq!(c.cmd(&["RPUSH", &direct_key, "w"]), Reply::Int(1));
    assert_eq!(direct.read_reply(), arr(vec![bulk(&direct_key), bulk("w")]));
    wait_blocked(&mut c, 0);
}

/// Commands mithril does not run answer what a cluster node answers for
/// them (SWAPDB, MOVE, REPLICAOF / SLAVEOF, FAILOVER), not an unknown
/// command: mithril's face is a cluster node.
#[test]
fn refused_commands_answer_as_a_cluster_node() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let (key, port) = cluster.key_per_master("mv").remove(0);
    let mut owner = Conn::connect(&format!("127.0.0.1:{port}"));
    for args in [
        &["SWAPDB", "0", "1"][..],
        &["MOVE", key.as_str(), "1"][..],
        &["REPLICAOF", "no", "one"][..],
        &["SLAVEOF", "no", "one"][..],
        &["FAILOVER"][..],
    ] {
        let node = owner.cmd(args);
        assert!(node.is_error(), "{args:?}: {node:?}");
        assert_eq!(c.cmd(args), node, "{args:?}");
    }
    // Unknown to a node too: the same unknown-command text.
    assert_eq!(c.cmd(&["NOSUCHCMD", "x"]), owner.cmd(&["NOSUCHCMD", "x"]));
}
