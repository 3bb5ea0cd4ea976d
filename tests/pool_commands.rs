//! The command surface on a pool of three standalone servers (a
//! twemproxy-style ring), beside `command_surface.rs` for a cluster:
//! single-key commands where the ring puts them, fan-outs split per server
//! and merged, multi-key commands forwarded when their keys share a server
//! and refused (naming the pool) when not, MULTI/EXEC and WATCH on one
//! server, scripts by first key, SCRIPT on every server, blocking commands
//! on a lease, pub/sub and keyspace events from every server, SCAN / KEYS /
//! DBSIZE / FLUSHALL / RANDOMKEY across servers, RESP3, CLUSTER answered as
//! a server without cluster support, the pool's password and database;
//! then two and three pools in one process, one of them a cluster, and a
//! pool whose servers are all dead answering errors while the others serve.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use mithril::hashkit::{sorted_order, Distribution, HashFn, Ring};
use support::*;

/// Three servers and mithril in front, `extra` appended to the pool lines.
fn ring_pool(extra: &str) -> (StandaloneSet, Mithril) {
    let set = StandaloneSet::start(3);
    let m = start_pool(&set, extra, false);
    (set, m)
}

fn pool_conf(set: &StandaloneSet, port: u16, name: &str, extra: &str) -> String {
    let mut conf = format!("pool {name} listen 127.0.0.1:{port}\npool {name} hash-tag {{}}\n");
    for i in 0..set.len() {
        conf.push_str(&format!(
            "pool {name} server 127.0.0.1:{}:1 s{i}\n",
            set.port(i)
        ));
    }
    for line in extra.lines().filter(|l| !l.trim().is_empty()) {
        conf.push_str(&format!("pool {name} {line}\n"));
    }
    conf
}

fn start_pool(set: &StandaloneSet, extra: &str, locked: bool) -> Mithril {
    let port = free_port();
    let conf = format!("port {port}\n{}", pool_conf(set, port, "ring", extra));
    if locked {
        Mithril::start_locked(bin(), &[], &conf)
    } else {
        Mithril::start(bin(), &[], &conf)
    }
}

/// Which server (index of the set) the ring of `start_pool` puts `key` on.
fn server_of(set: &StandaloneSet, key: &[u8]) -> usize {
    let names: Vec<String> = (0..set.len()).map(|i| format!("s{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let order = sorted_order(&refs);
    let servers: Vec<(&str, u32)> = order.iter().map(|&i| (refs[i], 1)).collect();
    let ring = Ring::build(Distribution::Ketama, &servers, &vec![true; servers.len()]);
    let pos = ring
        .locate(HashFn::Fnv1a_64, Some(*b"{}"), key, 0)
        .expect("a live server");
    order[pos]
}

/// Keys on three different servers, and one more on the first's server.
fn spread_keys(set: &StandaloneSet) -> (String, String, String, String) {
    let mut by_server: Vec<Vec<String>> = vec![Vec::new(); 3];
    for i in 0..1000 {
        let k = format!("key:{i}");
        let s = server_of(set, k.as_bytes());
        by_server[s].push(k);
        if by_server.iter().all(|v| v.len() >= 2) {
            break;
        }
    }
    (
        by_server[0][0].clone(),
        by_server[1][0].clone(),
        by_server[2][0].clone(),
        by_server[0][1].clone(),
    )
}

#[test]
fn single_key_commands_go_where_the_ring_puts_them() {
    let (set, m) = ring_pool("");
    let mut c = m.conn();
    for i in 0..200 {
        let k = format!("k{i}");
        assert_eq!(c.cmd(&["SET", &k, &i.to_string()]), ok());
        let s = server_of(&set, k.as_bytes());
        assert_eq!(set.conn(s).cmd(&["GET", &k]), bulk(&i.to_string()), "{k}");
    }
    assert_eq!(c.cmd(&["INCR", "counter"]), Reply::Int(1));
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), Reply::Int(1));
    assert_eq!(c.cmd(&["HGET", "h", "f"]), bulk("v"));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(202));
}

#[test]
fn fan_outs_split_per_server_and_merge_as_one_server_answers() {
    let (set, m) = ring_pool("");
    let (a, b, cc, _) = spread_keys(&set);
    let mut c = m.conn();
    assert_eq!(c.cmd(&["MSET", &a, "1", &b, "2", &cc, "3"]), ok());
    for (k, s) in [(&a, 0), (&b, 1), (&cc, 2)] {
        assert_eq!(set.conn(s).cmd(&["EXISTS", k]), Reply::Int(1), "{k}");
    }
    assert_eq!(
        c.cmd(&["MGET", &a, "missing", &b, &cc]),
        Reply::Array(Some(vec![
            bulk("1"),
            Reply::Bulk(None),
            bulk("2"),
            bulk("3")
        ]))
    );
    assert_eq!(c.cmd(&["EXISTS", &a, &b, &cc, "missing"]), Reply::Int(3));
    assert_eq!(c.cmd(&["TOUCH", &a, &b]), Reply::Int(2));
    assert_eq!(c.cmd(&["UNLINK", &a]), Reply::Int(1));
    assert_eq!(c.cmd(&["DEL", &b, &cc, "missing"]), Reply::Int(2));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(0));
}

#[test]
fn multi_key_commands_run_on_one_server_or_are_refused_naming_the_pool() {
    let (set, m) = ring_pool("");
    let (a, b, _, a2) = spread_keys(&set);
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", &a, "x"]), ok());
    // Same server: forwarded as it is.
    assert_eq!(c.cmd(&["RENAME", &a, &a2]), ok());
    assert_eq!(set.conn(0).cmd(&["GET", &a2]), bulk("x"));
    // Hash-tagged keys share a server.
    assert_eq!(c.cmd(&["SADD", "{t}s1", "m"]), Reply::Int(1));
    assert_eq!(c.cmd(&["SMOVE", "{t}s1", "{t}s2", "m"]), Reply::Int(1));
    assert_eq!(c.cmd(&["SUNIONSTORE", "{t}d", "{t}s2"]), Reply::Int(1));
    // Different servers: a clear error, nothing sent.
    let e = c.cmd(&["RENAME", &a2, &b]);
    assert_eq!(
        e.as_error(),
        "CROSSSLOT Keys in request don't hash to the same server of pool ring"
    );
    assert_eq!(set.conn(0).cmd(&["GET", &a2]), bulk("x"), "nothing moved");
    assert!(c.cmd(&["SINTERSTORE", &a, &a2, &b]).is_error());
}

#[test]
fn transactions_and_watch_keep_to_one_server() {
    let (set, m) = ring_pool("");
    let (a, b, _, a2) = spread_keys(&set);
    let mut c = m.conn();
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", &a, "1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["INCR", &a2]), Reply::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Array(Some(vec![ok(), Reply::Int(1)]))
    );
    // A key of another server dooms the transaction.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", &a, "2"]), Reply::Simple("QUEUED".into()));
    assert!(c.cmd(&["SET", &b, "2"]).as_error().starts_with("CROSSSLOT"));
    assert!(c.cmd(&["EXEC"]).as_error().starts_with("EXECABORT"));
    assert_eq!(c.cmd(&["GET", &a]), bulk("1"));
    // WATCH: a change by another client makes EXEC nil.
    assert_eq!(c.cmd(&["WATCH", &a]), ok());
    assert_eq!(m.conn().cmd(&["SET", &a, "other"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", &a, "mine"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(None));
    assert_eq!(c.cmd(&["GET", &a]), bulk("other"));
    assert_eq!(c.cmd(&["WATCH", &a]), ok());
    assert!(c.cmd(&["GET", &b]).as_error().starts_with("CROSSSLOT"));
    assert_eq!(c.cmd(&["UNWATCH"]), ok());
    assert_eq!(c.cmd(&["GET", &b]), Reply::Bulk(None));
}

#[test]
fn scripts_go_by_first_key_and_script_management_reaches_every_server() {
    let (set, m) = ring_pool("");
    let (a, b, _, a2) = spread_keys(&set);
    let mut c = m.conn();
    let body = "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])";
    assert_eq!(c.cmd(&["EVAL", body, "1", &a, "v"]), bulk("v"));
    assert_eq!(set.conn(0).cmd(&["GET", &a]), bulk("v"));
    assert_eq!(c.cmd(&["EVAL", body, "2", &a, &a2, "w"]), bulk("w"));
    assert!(c
        .cmd(&["EVAL", body, "2", &a, &b, "w"])
        .as_error()
        .starts_with("CROSSSLOT"));
    let sha = c.cmd(&["SCRIPT", "LOAD", "return 7"]);
    let sha = sha.as_str().to_string();
    for i in 0..3 {
        assert_eq!(
            set.conn(i).cmd(&["SCRIPT", "EXISTS", &sha]),
            Reply::Array(Some(vec![Reply::Int(1)])),
            "server {i}"
        );
    }
    assert_eq!(c.cmd(&["EVALSHA", &sha, "1", &b]), Reply::Int(7));
    assert_eq!(c.cmd(&["EVALSHA", &sha, "0"]), Reply::Int(7));
    let lib = "#!lua name=pl\nredis.register_function('pf', function(keys) return redis.call('incr', keys[1]) end)";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), bulk("pl"));
    assert_eq!(c.cmd(&["FCALL", "pf", "1", &b]), Reply::Int(1));
    assert_eq!(set.conn(1).cmd(&["GET", &b]), bulk("1"));
}

#[test]
fn blocking_commands_wait_on_a_lease_and_are_served() {
    let (_set, m) = ring_pool("");
    let mut waiter = m.conn();
    waiter.send(&[b"BLPOP", b"queue", b"5"]);
    // Another client's push wakes it (through the same server).
    let mut pusher = m.conn();
    wait_until("the BLPOP to be blocked", Duration::from_secs(5), || {
        let list = pusher.cmd(&["CLIENT", "LIST"]);
        list.as_str().contains("cmd=blpop").then_some(())
    });
    assert_eq!(pusher.cmd(&["RPUSH", "queue", "job"]), Reply::Int(1));
    assert_eq!(
        waiter.read_reply(),
        Reply::Array(Some(vec![bulk("queue"), bulk("job")]))
    );
    assert_eq!(pusher.cmd(&["LLEN", "queue"]), Reply::Int(0));
}

#[test]
fn pubsub_and_keyspace_events_reach_subscribers_from_every_server() {
    let (set, m) = ring_pool("");
    for i in 0..3 {
        assert_eq!(
            set.conn(i)
                .cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
            ok()
        );
    }
    let (a, b, cc, _) = spread_keys(&set);
    let mut sub = m.conn();
    sub.send(&[b"SUBSCRIBE", b"news"]);
    assert_eq!(
        sub.read_reply(),
        Reply::Array(Some(vec![bulk("subscribe"), bulk("news"), Reply::Int(1)]))
    );
    sub.send(&[b"PSUBSCRIBE", b"__keyspace@0__:*"]);
    assert_eq!(sub.read_reply().as_array()[0], bulk("psubscribe"));
    let mut c = m.conn();
    assert_eq!(c.cmd(&["PUBLISH", "news", "hello"]), Reply::Int(1));
    assert_eq!(
        sub.read_reply(),
        Reply::Array(Some(vec![bulk("message"), bulk("news"), bulk("hello")]))
    );
    // A write on each server: one event each, none twice.
    let mut want: HashSet<String> = HashSet::new();
    for k in [&a, &b, &cc] {
        assert_eq!(c.cmd(&["SET", k, "1"]), ok());
        want.insert(format!("__keyspace@0__:{k}"));
    }
    let mut got = HashSet::new();
    for _ in 0..3 {
        let r = sub.read_reply();
        let parts = r.as_array();
        assert_eq!(parts[0], bulk("pmessage"));
        assert!(got.insert(parts[2].as_str().to_string()), "{r:?} twice");
    }
    assert_eq!(got, want);
    assert!(
        sub.try_read_reply(Duration::from_millis(300)).is_err(),
        "nothing more"
    );
}

#[test]
fn server_wide_commands_cover_every_server() {
    let (set, m) = ring_pool("");
    let mut c = m.conn();
    let keys: Vec<String> = (0..60).map(|i| format!("w{i}")).collect();
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v"]), ok());
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(60));
    let listed: HashSet<String> = c
        .cmd(&["KEYS", "w*"])
        .as_array()
        .iter()
        .map(|r| r.as_str().to_string())
        .collect();
    assert_eq!(listed.len(), 60);
    // SCAN walks every server with one cursor, each key once.
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let r = c.cmd(&["SCAN", &cursor, "COUNT", "7"]);
        let parts = r.as_array();
        cursor = parts[0].as_str().to_string();
        for k in parts[1].as_array() {
            assert!(seen.insert(k.as_str().to_string()), "{k:?} twice");
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 60);
    assert!(keys.contains(&c.cmd(&["RANDOMKEY"]).as_str().to_string()));
    let info = c.cmd(&["INFO", "keyspace"]);
    assert!(info.as_str().contains("db0:keys=60"), "{info:?}");
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    for i in 0..3 {
        assert_eq!(set.conn(i).cmd(&["DBSIZE"]), Reply::Int(0));
    }
    assert_eq!(c.cmd(&["RANDOMKEY"]), Reply::Bulk(None));
}

#[test]
fn a_pool_looks_like_one_server_without_cluster_support() {
    let (_set, m) = ring_pool("");
    let mut c = m.conn();
    for cmd in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["READONLY"],
    ] {
        assert_eq!(
            c.cmd(cmd).as_error(),
            "ERR This instance has cluster support disabled",
            "{cmd:?}"
        );
    }
    let hello = c.cmd(&["HELLO", "3"]);
    let text = format!("{hello:?}");
    assert!(text.contains("standalone"), "{text}");
    assert_eq!(c.cmd(&["SET", "r3", "v"]), ok());
    assert_eq!(c.cmd(&["GET", "r3"]), bulk("v"));
}

#[test]
fn the_pools_password_and_database_are_twemproxys_redis_auth_and_redis_db() {
    let set = StandaloneSet::start(3);
    for i in 0..3 {
        assert_eq!(
            set.conn(i).cmd(&["CONFIG", "SET", "requirepass", "s3cret"]),
            ok()
        );
    }
    let m = start_pool(&set, "password s3cret\ndb 3", true);
    let mut c = m.conn();
    assert!(c.cmd(&["GET", "k"]).as_error().starts_with("NOAUTH"));
    assert!(c
        .cmd(&["AUTH", "wrong"])
        .as_error()
        .starts_with("WRONGPASS"));
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), ok());
    assert_eq!(c.cmd(&["SET", "indb3", "v"]), ok());
    let s = server_of(&set, b"indb3");
    let mut direct = set.conn(s);
    assert_eq!(direct.cmd(&["AUTH", "s3cret"]), ok());
    assert_eq!(
        direct.cmd(&["GET", "indb3"]),
        Reply::Bulk(None),
        "not in db 0"
    );
    assert_eq!(direct.cmd(&["SELECT", "3"]), ok());
    assert_eq!(direct.cmd(&["GET", "indb3"]), bulk("v"));
}

#[test]
fn pools_in_one_process_serve_apart_one_of_them_a_cluster() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let a = StandaloneSet::start(2);
    let mut b = StandaloneSet::start(2);
    let (pa, pb) = (free_port(), free_port());
    let conf = format!(
        "{}{}",
        pool_conf(&a, pa, "alpha", ""),
        pool_conf(&b, pb, "beta", "")
    );
    // The top-level cluster is the first pool, on mithril's own port.
    let m = Mithril::start(bin(), &cluster.seeds(), &conf);
    let mut on_cluster = m.conn();
    let mut on_a = Conn::connect(&format!("127.0.0.1:{pa}"));
    let mut on_b = Conn::connect(&format!("127.0.0.1:{pb}"));
    assert_eq!(on_cluster.cmd(&["SET", "same", "cluster"]), ok());
    assert_eq!(on_a.cmd(&["SET", "same", "alpha"]), ok());
    assert_eq!(on_b.cmd(&["SET", "same", "beta"]), ok());
    assert_eq!(on_cluster.cmd(&["GET", "same"]), bulk("cluster"));
    assert_eq!(on_a.cmd(&["GET", "same"]), bulk("alpha"));
    assert_eq!(on_b.cmd(&["GET", "same"]), bulk("beta"));
    assert_eq!(on_a.cmd(&["DBSIZE"]), Reply::Int(1));
    assert!(on_cluster
        .cmd(&["CLUSTER", "INFO"])
        .as_str()
        .contains("cluster_state:ok"));
    assert!(on_a.cmd(&["CLUSTER", "INFO"]).is_error());
    // INFO: each client sees its own pool.
    let info = on_cluster.cmd(&["INFO", "server", "cluster"]);
    for want in [
        "redis_mode:cluster\r\n",
        "cluster_enabled:1\r\n",
        "cluster_masters:3\r\n",
        "cluster_slots_served:16384\r\n",
    ] {
        assert!(info.as_str().contains(want), "{want:?} in {info:?}");
    }
    let info = on_a.cmd(&["INFO", "server", "cluster"]);
    for want in [
        "redis_mode:standalone\r\n",
        &format!("tcp_port:{pa}\r\n"),
        "cluster_enabled:0\r\n",
    ] {
        assert!(info.as_str().contains(want), "{want:?} in {info:?}");
    }
    assert!(!info.as_str().contains("cluster_masters"), "{info:?}");
    // Every server of beta dead: beta answers errors, the others serve.
    b.kill(0);
    b.kill(1);
    let dead = wait_until("beta's servers to refuse", Duration::from_secs(10), || {
        let r = on_b.cmd(&["GET", "same"]);
        r.is_error().then_some(r)
    });
    assert!(dead.is_error());
    assert_eq!(on_a.cmd(&["GET", "same"]), bulk("alpha"));
    assert_eq!(on_cluster.cmd(&["GET", "same"]), bulk("cluster"));
    let mut fresh = Conn::connect(&format!("127.0.0.1:{pa}"));
    assert_eq!(fresh.cmd(&["SET", "more", "1"]), ok());
}

#[test]
fn select_keeps_databases_apart_through_pipelines_transactions_scripts_and_scan() {
    let (set, m) = ring_pool("");
    let mut c = m.conn();
    let count_in = |db: &str| -> i64 {
        (0..3)
            .map(|i| {
                let mut d = set.conn(i);
                assert_eq!(d.cmd(&["SELECT", db]), ok());
                d.cmd(&["DBSIZE"]).as_int()
            })
            .sum()
    };
    for db in ["0", "3", "15"] {
        assert_eq!(c.cmd(&["SELECT", db]), ok());
        // Pipelined, then in a transaction, then from a script.
        let cmds: Vec<Vec<Vec<u8>>> = (0..30)
            .map(|i| argv(&["SET", &format!("p{i}"), db]))
            .collect();
        for r in c.pipeline(&cmds) {
            assert_eq!(r, ok());
        }
        assert_eq!(c.cmd(&["MULTI"]), ok());
        assert_eq!(c.cmd(&["SET", "{m}x", db]), Reply::Simple("QUEUED".into()));
        assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![ok()])));
        assert_eq!(
            c.cmd(&[
                "EVAL",
                "return redis.call('set', KEYS[1], ARGV[1])",
                "1",
                "s",
                db
            ]),
            ok()
        );
    }
    for db in ["0", "3", "15"] {
        assert_eq!(count_in(db), 32, "db {db} on the servers");
        assert_eq!(c.cmd(&["SELECT", db]), ok());
        assert_eq!(c.cmd(&["GET", "p7"]), bulk(db));
        assert_eq!(c.cmd(&["GET", "{m}x"]), bulk(db));
        assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(32));
        let mut seen = 0;
        let mut cursor = "0".to_string();
        loop {
            let r = c.cmd(&["SCAN", &cursor]);
            cursor = r.as_array()[0].as_str().to_string();
            seen += r.as_array()[1].as_array().len();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen, 32, "SCAN in db {db}");
    }
    assert_eq!(count_in("1"), 0);
    assert_eq!(
        c.cmd(&["SELECT", "16"]).as_error(),
        "ERR DB index is out of range"
    );
    assert_eq!(
        c.cmd(&["SELECT", "-1"]).as_error(),
        "ERR DB index is out of range"
    );
    // A blocked client waits in its own database.
    assert_eq!(c.cmd(&["SELECT", "3"]), ok());
    let mut w = m.conn();
    assert_eq!(w.cmd(&["SELECT", "3"]), ok());
    w.send(&[b"BLPOP", b"q3", b"5"]);
    wait_until("the BLPOP to be blocked", Duration::from_secs(5), || {
        c.cmd(&["CLIENT", "LIST"])
            .as_str()
            .contains("cmd=blpop")
            .then_some(())
    });
    let mut other = m.conn();
    assert_eq!(other.cmd(&["RPUSH", "q3", "wrong-db"]), Reply::Int(1));
    assert_eq!(c.cmd(&["RPUSH", "q3", "right"]), Reply::Int(1));
    assert_eq!(
        w.read_reply(),
        Reply::Array(Some(vec![bulk("q3"), bulk("right")]))
    );
    // RESET goes back to the pool's database.
    assert_eq!(c.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    assert_eq!(c.cmd(&["GET", "p7"]), bulk("0"));
}

#[test]
fn a_cluster_pool_over_standalone_servers_is_refused_at_start_with_the_fix() {
    let set = StandaloneSet::start(1);
    let mut m = Mithril::spawn(bin(), &[set.servers[0].addr()], "");
    let status = m.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1));
    let out = m.stdio();
    assert!(
        out.contains("is not a Redis Cluster node")
            && out.contains(&format!("'pool default server {}'", set.servers[0].addr())),
        "{out}"
    );
}

#[test]
fn shard_channels_and_client_tracking_work_on_a_pool() {
    let (_set, m) = ring_pool("");
    // Sharded pub/sub: the channel lives on its server, SPUBLISH finds it.
    let mut sub = m.conn();
    sub.send(&[b"SSUBSCRIBE", b"orders"]);
    assert_eq!(
        sub.read_reply(),
        Reply::Array(Some(vec![
            bulk("ssubscribe"),
            bulk("orders"),
            Reply::Int(1)
        ]))
    );
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SPUBLISH", "orders", "o1"]), Reply::Int(1));
    assert_eq!(
        sub.read_reply(),
        Reply::Array(Some(vec![bulk("smessage"), bulk("orders"), bulk("o1")]))
    );
    // Client-side caching: a key read is invalidated when another client
    // writes it.
    let mut t = m.conn();
    let _ = t.cmd(&["HELLO", "3"]);
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(c.cmd(&["SET", "tracked", "1"]), ok());
    assert_eq!(t.cmd(&["GET", "tracked"]), bulk("1"));
    assert_eq!(c.cmd(&["SET", "tracked", "2"]), ok());
    let push = wait_until("the invalidation", Duration::from_secs(5), || {
        t.try_read_reply(Duration::from_millis(200)).ok()
    });
    let text = format!("{push:?}");
    assert!(
        text.contains("invalidate") && text.contains("tracked"),
        "{text}"
    );
}
