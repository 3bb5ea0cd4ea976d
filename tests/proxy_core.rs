//! The core proxy against a real 3-master Redis Cluster: routing, request
//! order, redirects, protocol errors and admission.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::*;

fn owner(cluster: &RedisCluster, key: &str) -> Conn {
    let port = cluster.port_for_slot(key_slot(key.as_bytes()));
    Conn::connect(&format!("127.0.0.1:{port}"))
}

/// One command per line; the key is the second word (the third for OBJECT).
const SCRIPT: &str = "
SET s:1 hello
GET s:1
APPEND s:1 _world
STRLEN s:1
GETRANGE s:1 0 4
SETRANGE s:1 0 J
GETSET s:1 new
SETNX s:1 other
SETNX s:2 fresh
INCR n:1
INCRBY n:1 41
INCRBYFLOAT n:2 2.5
DECRBY n:1 2
GETDEL s:2
GET s:2
SET s:3 v EX 100
TTL s:3
PERSIST s:3
TTL s:3
PEXPIRE s:3 100000
TYPE s:3
EXISTS s:3
GET nosuchkey
INCR s:1
HSET h:1 f1 v1 f2 v2 f3 3
HGET h:1 f1
HMGET h:1 f1 nofield f2
HINCRBY h:1 f3 7
HLEN h:1
HEXISTS h:1 f2
HDEL h:1 f2
HGETALL h:1
HKEYS h:1
HVALS h:1
HSTRLEN h:1 f1
RPUSH l:1 a b c d e
LPUSH l:1 z
LRANGE l:1 0 -1
LINDEX l:1 2
LLEN l:1
LPOP l:1
RPOP l:1 2
LSET l:1 0 X
LINSERT l:1 BEFORE X W
LREM l:1 1 W
LPOS l:1 c
LTRIM l:1 0 1
LRANGE l:1 0 -1
SADD set:1 a b c d
SCARD set:1
SISMEMBER set:1 c
SMISMEMBER set:1 a x
SREM set:1 d
SORT set:1 ALPHA
ZADD z:1 1 one 2 two 3 three
ZSCORE z:1 two
ZINCRBY z:1 5 one
ZRANGE z:1 0 -1 WITHSCORES
ZREVRANGE z:1 0 1
ZRANK z:1 three
ZCOUNT z:1 2 10
ZRANGEBYSCORE z:1 (2 +inf
ZREM z:1 two
ZCARD z:1
ZPOPMIN z:1
XADD x:1 1-1 f v
XADD x:1 2-1 g w
XLEN x:1
XRANGE x:1 - +
XREVRANGE x:1 + - COUNT 1
XDEL x:1 1-1
XTRIM x:1 MAXLEN 0
GEOADD g:1 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
GEODIST g:1 Palermo Catania km
GEOHASH g:1 Palermo
GEOSEARCH g:1 FROMLONLAT 15 37 BYRADIUS 200 km ASC
SETBIT b:1 7 1
GETBIT b:1 7
BITCOUNT b:1
BITPOS b:1 1
BITFIELD b:1 INCRBY u8 0 10 GET u8 0
PFADD p:1 a b c a
PFCOUNT p:1
SORT l:1 ALPHA
OBJECT ENCODING l:1
EXPIRE h:1 1000
PTTL nosuchkey
DEL set:1
LPUSH s:1 x
";

fn script() -> Vec<Vec<String>> {
    SCRIPT
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(' ').map(String::from).collect())
        .collect()
}

/// TTLs can tick between the two runs; compare them loosely.
fn normalize(cmd: &[String], r: Reply) -> Reply {
    match (cmd[0].as_str(), &r) {
        ("TTL" | "PTTL", Reply::Int(n)) if *n > 0 => Reply::Int(1),
        _ => r,
    }
}

#[test]
fn single_key_commands_answer_like_the_owning_node() {
    let (cluster, m) = cluster_and_mithril("");
    let mut via = m.conn();
    let mut proxied = Vec::new();
    for c in script() {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        proxied.push(normalize(&c, via.cmd(&args)));
    }
    for node in cluster.masters() {
        assert_eq!(node.conn().cmd(&["FLUSHALL"]), Reply::Simple("OK".into()));
    }
    for (c, got) in script().iter().zip(proxied) {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        let key = if c[0] == "OBJECT" { &c[2] } else { &c[1] };
        let direct = normalize(c, owner(&cluster, key).cmd(&args));
        assert!(
            !direct.is_error() || !direct.as_error().starts_with("MOVED"),
            "{c:?}"
        );
        assert_eq!(got, direct, "command {c:?}");
    }
}

#[test]
fn data_lands_on_the_node_that_owns_the_slot() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let cmds: Vec<Vec<Vec<u8>>> = (0..1000)
        .map(|i| argv(&["SET", &format!("key:{i}"), &format!("value:{i}")]))
        .collect();
    for r in c.pipeline(&cmds) {
        assert_eq!(r, Reply::Simple("OK".into()));
    }
    let mut per_node: HashMap<u16, i64> = HashMap::new();
    for i in 0..1000 {
        let key = format!("key:{i}");
        let port = cluster.port_for_slot(key_slot(key.as_bytes()));
        *per_node.entry(port).or_default() += 1;
        let mut direct = Conn::connect(&format!("127.0.0.1:{port}"));
        assert_eq!(
            direct.cmd(&["GET", &key]).as_bulk(),
            Some(format!("value:{i}").as_bytes())
        );
    }
    assert_eq!(per_node.len(), 3, "1000 keys spread over every master");
    for (port, n) in per_node {
        let mut direct = Conn::connect(&format!("127.0.0.1:{port}"));
        assert_eq!(direct.cmd(&["DBSIZE"]).as_int(), n, "node {port}");
    }
}

#[test]
fn ten_thousand_pipelined_mixed_commands_come_back_in_order() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let mut cmds = Vec::new();
    let mut expect = Vec::new();
    let mut counters = [0i64; 50];
    let mut lists = [0i64; 20];
    for i in 0..2500 {
        let key = format!("k:{i}");
        cmds.push(argv(&["SET", &key, &format!("v{i}")]));
        expect.push(Reply::Simple("OK".into()));
        let ctr = format!("ctr:{}", i % 50);
        counters[i % 50] += 1;
        cmds.push(argv(&["INCR", &ctr]));
        expect.push(Reply::Int(counters[i % 50]));
        cmds.push(argv(&["GET", &key]));
        expect.push(Reply::Bulk(Some(format!("v{i}").into_bytes())));
        if i % 2 == 0 {
            lists[i % 20] += 1;
            cmds.push(argv(&[
                "RPUSH",
                &format!("list:{}", i % 20),
                &i.to_string(),
            ]));
            expect.push(Reply::Int(lists[i % 20]));
        } else {
            cmds.push(argv(&["PING"]));
            expect.push(Reply::Simple("PONG".into()));
        }
    }
    assert_eq!(cmds.len(), 10_000);
    let got = c.pipeline(&cmds);
    assert_eq!(got.len(), expect.len());
    for (i, (g, e)) in got.iter().zip(&expect).enumerate() {
        assert_eq!(
            g,
            e,
            "reply {i} to {:?}",
            String::from_utf8_lossy(&cmds[i].concat())
        );
    }
}

/// Move `slot` from its owner to `to` the way redis-cli --cluster does.
fn migrate_slot(cluster: &RedisCluster, slot: u16, to: &RedisNode, keys: &[&str]) {
    let from = cluster.node_for_slot(slot);
    let s = slot.to_string();
    assert_eq!(
        to.conn()
            .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id]),
        Reply::Simple("OK".into())
    );
    assert_eq!(
        from.conn()
            .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to.id]),
        Reply::Simple("OK".into())
    );
    let mut args = vec!["MIGRATE", "127.0.0.1"];
    let port = to.port.to_string();
    args.extend([port.as_str(), "", "0", "5000", "KEYS"]);
    args.extend_from_slice(keys);
    assert_eq!(from.conn().cmd(&args), Reply::Simple("OK".into()));
    for n in cluster.masters() {
        assert_eq!(
            n.conn().cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &to.id]),
            Reply::Simple("OK".into())
        );
    }
}

#[test]
fn moved_and_ask_are_followed_without_the_client_seeing_them() {
    // A long refresh period: only the redirect itself can teach mithril.
    let (cluster, m) = cluster_and_mithril("topology-refresh-secs 3600");
    let mut c = m.conn();
    let key = "{moving}a";
    let slot = key_slot(key.as_bytes());
    assert_eq!(c.cmd(&["SET", key, "1"]), Reply::Simple("OK".into()));
    let from = cluster.node_for_slot(slot).clone();
    let to = cluster.other_master(slot).clone();
    let s = slot.to_string();

    // Half-way: the slot is migrating and our key already moved: ASK.
    assert_eq!(
        to.conn()
            .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id]),
        Reply::Simple("OK".into())
    );
    assert_eq!(
        from.conn()
            .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to.id]),
        Reply::Simple("OK".into())
    );
    let port = to.port.to_string();
    assert_eq!(
        from.conn()
            .cmd(&["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS", key]),
        Reply::Simple("OK".into())
    );
    assert!(
        from.conn()
            .cmd(&["GET", key])
            .as_error()
            .starts_with("ASK "),
        "the source now redirects"
    );
    assert_eq!(c.cmd(&["GET", key]).as_bulk(), Some(&b"1"[..]));
    assert_eq!(c.cmd(&["INCR", key]), Reply::Int(2));
    // A new key of the migrating slot is created on the target, via ASK.
    assert_eq!(
        c.cmd(&["SET", "{moving}b", "x"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(to.conn().cmd(&["ASKING"]), Reply::Simple("OK".into()));

    // Finished: every node agrees the slot lives on `to`: MOVED.
    for n in cluster.masters() {
        assert_eq!(
            n.conn().cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &to.id]),
            Reply::Simple("OK".into())
        );
    }
    assert!(from
        .conn()
        .cmd(&["GET", key])
        .as_error()
        .starts_with("MOVED "));
    let cmds: Vec<Vec<Vec<u8>>> = (0..100).map(|_| argv(&["INCR", key])).collect();
    let got = c.pipeline(&cmds);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(*r, Reply::Int(3 + i as i64));
    }
    assert_eq!(to.conn().cmd(&["GET", key]).as_bulk(), Some(&b"102"[..]));
    let mut direct_b = to.conn();
    assert_eq!(
        direct_b.cmd(&["GET", "{moving}b"]).as_bulk(),
        Some(&b"x"[..])
    );
    // A second slot moved back and forth, with a pipeline over both.
    let other = "{other}k";
    assert_eq!(c.cmd(&["SET", other, "o"]), Reply::Simple("OK".into()));
    let target = cluster
        .masters()
        .into_iter()
        .find(|n| n.port != cluster.port_for_slot(key_slot(other.as_bytes())))
        .unwrap()
        .clone();
    migrate_slot(&cluster, key_slot(other.as_bytes()), &target, &[other]);
    let got = c.pipeline(&[
        argv(&["GET", other]),
        argv(&["GET", key]),
        argv(&["GET", other]),
    ]);
    assert_eq!(got[0].as_bulk(), Some(&b"o"[..]));
    assert_eq!(got[1].as_bulk(), Some(&b"102"[..]));
    assert_eq!(got[2].as_bulk(), Some(&b"o"[..]));
}

#[test]
fn malformed_input_closes_only_the_offending_connection() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut good = m.conn();
    assert_eq!(
        good.cmd(&["SET", "survivor", "yes"]),
        Reply::Simple("OK".into())
    );
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*2\r\n$-7\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$4\r\nPING\r\n*abc\r\n",
            b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*99999999999\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\nx\r\n",
            b"-ERR Protocol error: expected '$', got 'x'\r\n",
        ),
        (
            b"*1\r\n$1099511627776\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"SET \"a b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"GET survivor\r\n*1\r\n$3\r\nfooXX",
            b"$3\r\nyes\r\n-ERR Protocol error: expected CRLF after bulk data\r\n",
        ),
    ];
    for (input, expect) in cases {
        let mut bad = m.conn();
        bad.write_raw(input).unwrap();
        let got = bad.read_raw_until_closed(Duration::from_secs(5));
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expect),
            "input {:?}",
            String::from_utf8_lossy(input)
        );
        assert!(bad.is_closed(Duration::from_secs(2)));
        assert_eq!(good.cmd(&["GET", "survivor"]).as_bulk(), Some(&b"yes"[..]));
    }
    // A 70 KB inline line with no newline.
    let mut bad = m.conn();
    bad.write_raw(&vec![b'a'; 70 * 1024]).unwrap();
    let got = bad.read_raw_until_closed(Duration::from_secs(5));
    assert_eq!(got, b"-ERR Protocol error: too big inline request\r\n");
    assert_eq!(good.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn inline_commands_blank_lines_and_quit() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    c.write_raw(b"\r\n\r\nPING\r\nSET 'in line' \"a\\x41b\"\r\nGET 'in line'\r\n")
        .unwrap();
    assert_eq!(c.read_reply(), Reply::Simple("PONG".into()));
    assert_eq!(c.read_reply(), Reply::Simple("OK".into()));
    assert_eq!(c.read_reply().as_bulk(), Some(&b"aAb"[..]));
    // Split into one-byte writes.
    for b in b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n" {
        c.write_raw(&[*b]).unwrap();
    }
    assert_eq!(c.read_reply().as_bulk(), Some(&b"hello"[..]));
    c.write_raw(b"*1\r\n$4\r\nQUIT\r\nPING\r\n").unwrap();
    assert_eq!(c.read_raw_until_closed(Duration::from_secs(5)), b"+OK\r\n");
}

#[test]
fn local_commands_and_error_texts() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(c.cmd(&["ping", "hi"]).as_bulk(), Some(&b"hi"[..]));
    assert_eq!(c.cmd(&["ECHO", "x y"]).as_bulk(), Some(&b"x y"[..]));
    assert_eq!(c.cmd(&["SELECT", "0"]), Reply::Simple("OK".into()));
    assert_eq!(
        c.cmd(&["SELECT", "1"]).as_error(),
        "ERR SELECT is not allowed in cluster mode"
    );
    assert_eq!(
        c.cmd(&["SELECT", "x"]).as_error(),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        c.cmd(&["GET"]).as_error(),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        c.cmd(&["NOSUCH", "a", "b"]).as_error(),
        "ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "
    );
    assert_eq!(
        c.cmd(&["COMMAND", "COUNT"]).as_int(),
        mithril::command::all().len() as i64
    );
}

#[test]
fn maxclients_refuses_with_redis_error_and_releases_slots() {
    let (_cluster, m) = cluster_and_mithril("maxclients 2");
    // The harness's own readiness probe may still hold a slot for a
    // moment: take the two slots as they become free.
    let take_slot = || {
        wait_until("a free client slot", Duration::from_secs(10), || {
            let mut d = m.conn();
            d.write_raw(b"PING\r\n").ok()?;
            match d.try_read_reply(Duration::from_secs(2)) {
                Ok(Reply::Simple(s)) if s == "PONG" => Some(d),
                _ => None,
            }
        })
    };
    let a = take_slot();
    let mut b = take_slot();
    let mut c = m.conn();
    assert_eq!(
        c.read_raw_until_closed(Duration::from_secs(5)),
        b"-ERR max number of clients reached\r\n"
    );
    drop(a);
    // The ticket of the closed connection comes back.
    let mut d = take_slot();
    assert_eq!(d.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(b.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn starts_when_only_one_seed_answers_and_errors_without_any() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let dead = free_port();
    let seeds = vec![format!("127.0.0.1:{dead}"), cluster.seeds()[1].clone()];
    let m = Mithril::start(bin(), &seeds, "");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "seeded", "1"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "seeded"]).as_bulk(), Some(&b"1"[..]));

    let nobody = Mithril::start(bin(), &[format!("127.0.0.1:{dead}")], "");
    let mut c = nobody.conn();
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let err = c.cmd(&["GET", "k"]);
    assert!(err.as_error().starts_with("CLUSTERDOWN"), "{err:?}");
}

#[test]
fn a_dead_master_gives_errors_not_hangs() {
    let (mut cluster, m) = cluster_and_mithril("connect-timeout 500");
    let mut c = m.conn();
    let victim = cluster.masters()[0].port;
    let idx = cluster.nodes.iter().position(|n| n.port == victim).unwrap();
    let key = (0..)
        .map(|i| format!("victim:{i}"))
        .find(|k| cluster.port_for_slot(key_slot(k.as_bytes())) == victim)
        .unwrap();
    let survivor = (0..)
        .map(|i| format!("survivor:{i}"))
        .find(|k| cluster.port_for_slot(key_slot(k.as_bytes())) != victim)
        .unwrap();
    assert_eq!(c.cmd(&["SET", &key, "v"]), Reply::Simple("OK".into()));
    cluster.kill(idx);
    let started = Instant::now();
    for _ in 0..5 {
        let r = c.cmd(&["GET", &key]);
        assert!(r.is_error(), "{r:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "errors came promptly"
    );
    assert_eq!(c.cmd(&["SET", &survivor, "ok"]), Reply::Simple("OK".into()));
    cluster.restart(idx);
    let v = wait_until("the master is back", Duration::from_secs(20), || {
        match c.cmd(&["GET", &key]) {
            Reply::Bulk(v) => Some(v),
            _ => None,
        }
    });
    // No persistence: the restarted master came back empty.
    assert_eq!(v, None);
}

#[test]
fn a_client_that_sends_and_half_closes_gets_its_replies_then_eof() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let before = m_sessions(&m);
    for _ in 0..20 {
        let mut c = m.conn();
        c.write_raw(b"SET hc 1\r\nGET hc\r\n").unwrap();
        c.stream().shutdown(std::net::Shutdown::Write).unwrap();
        let got = c.read_raw_until_closed(Duration::from_secs(5));
        assert_eq!(got, b"+OK\r\n$1\r\n1\r\n");
    }
    // Every one of those sessions was closed by mithril (nothing leaks).
    wait_until(
        "the half-closed sessions are gone",
        Duration::from_secs(5),
        || (m_sessions(&m) <= before).then_some(()),
    );
}

/// connected_clients as mithril's INFO reports it (this connection included).
fn m_sessions(m: &Mithril) -> i64 {
    let info = m.conn().cmd(&["INFO", "clients"]);
    info.as_str()
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

/// A request that follows a cross-slot MSET waits for the MSET's part in
/// its slot, inline or not: here the part meets keys split between source
/// and target (TRYAGAIN, waits, then key by key), and a read of one of its
/// keys, sent right behind it, must see the new value, not the old one the
/// source would serve at once.
#[test]
fn requests_behind_a_split_fan_out_part_wait_for_it_inline_too() {
    let (cluster, m) = cluster_and_mithril("topology-refresh-secs 3600");
    let mut c = m.conn();
    let (a, b) = ("{split}a", "{split}b");
    let slot = key_slot(a.as_bytes());
    let other = (0..)
        .map(|i| format!("other:{i}"))
        .find(|k| key_slot(k.as_bytes()) != slot)
        .unwrap();
    assert_eq!(c.cmd(&["MSET", a, "old-a", b, "old-b"]), ok());
    // Only `a` moves: the slot's keys are split.
    let (from, to) = cluster.split_slot(slot, &[a]);
    let mset = encode_command(&[
        b"MSET",
        a.as_bytes(),
        b"new-a",
        b.as_bytes(),
        b"new-b",
        other.as_bytes(),
        b"v",
    ]);
    for (round, inline) in [(1, true), (2, false)] {
        let mut wire = mset.clone();
        if inline {
            wire.extend_from_slice(format!("GET {b}\r\nGET {a}\r\n").as_bytes());
        } else {
            wire.extend_from_slice(&encode_command(&[b"GET", b.as_bytes()]));
            wire.extend_from_slice(&encode_command(&[b"GET", a.as_bytes()]));
        }
        c.write_raw(&wire).unwrap();
        assert_eq!(c.read_reply(), ok(), "round {round}");
        assert_eq!(
            c.read_reply(),
            bulk("new-b"),
            "round {round} (inline: {inline})"
        );
        assert_eq!(
            c.read_reply(),
            bulk("new-a"),
            "round {round} (inline: {inline})"
        );
        // Back to the old values for the next round, straight on the nodes.
        assert_eq!(from.conn().cmd(&["SET", b, "old-b"]), ok());
        let mut t = to.conn();
        assert_eq!(t.cmd(&["ASKING"]), ok());
        assert_eq!(t.cmd(&["SET", a, "old-a"]), ok());
    }
}

/// `reply-batch-wait-us`: the first replies to one pipelined read wait for
/// the rest of that read's (a script busy for 300 ms on another master), up
/// to the wait and no longer; with 0 they leave at once.
#[test]
fn replies_to_one_read_wait_for_each_other_up_to_the_batch_wait() {
    const BUSY: &str = "local t0 = redis.call('TIME') \
        local start = t0[1] * 1000000 + t0[2] \
        repeat local t = redis.call('TIME') \
        until t[1] * 1000000 + t[2] - start >= 300000 \
        return 1";
    let cluster = RedisCluster::start(ClusterSpec::default());
    let fast = "batch:fast";
    let port = cluster.port_for_slot(key_slot(fast.as_bytes()));
    let slow = (0..)
        .map(|i| format!("batch:slow:{i}"))
        .find(|k| cluster.port_for_slot(key_slot(k.as_bytes())) != port)
        .unwrap();
    let mut wire = encode_command(&[b"GET", fast.as_bytes()]);
    wire.extend_from_slice(&encode_command(&[
        b"EVAL",
        BUSY.as_bytes(),
        b"1",
        slow.as_bytes(),
    ]));
    // (wait, whether the GET's reply must come with the script's)
    for (wait, together) in [(0, false), (500, false), (1_000_000, true)] {
        let m = Mithril::start(
            bin(),
            &cluster.seeds(),
            &format!("reply-batch-wait-us {wait}\nbackend-timeout 10000"),
        );
        let mut c = m.conn();
        assert_eq!(c.cmd(&["SET", fast, "v"]), ok());
        let sent = Instant::now();
        c.write_raw(&wire).unwrap();
        assert_eq!(c.read_reply(), bulk("v"), "wait {wait}");
        let get_at = sent.elapsed();
        assert_eq!(c.read_reply(), Reply::Int(1), "wait {wait}");
        let script_at = sent.elapsed();
        assert!(
            script_at >= Duration::from_millis(300),
            "wait {wait}: {script_at:?}"
        );
        if together {
            assert!(
                get_at >= Duration::from_millis(250),
                "wait {wait}: the GET's reply left at {get_at:?}, before the script's ({script_at:?})"
            );
        } else {
            assert!(
                get_at + Duration::from_millis(150) < script_at,
                "wait {wait}: the GET's reply waited for the script's ({get_at:?}, {script_at:?})"
            );
        }
    }
}
