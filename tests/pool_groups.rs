//! A pool of master-replica groups placed as predixy places it
//! (`StandaloneServerPool` with `RefreshMethod fixed`): keys land on the
//! group predixy's rule names, for crc16 and atol over 1, 2 and 5 groups,
//! with hash tags, binary, numeric and empty keys, checked against a
//! reference written here from the rule; SELECT keeps databases apart
//! through pipelining, MULTI, scripts and SCAN, refused past `databases`
//! with predixy's words; reads follow the read priorities; predixy's
//! own `conf/standalone.conf` example (addresses changed) starts mithril;
//! and the groups changed by a reload (one added, one removed) under
//! clients that keep their connections, at 1, 2 and 4 threads: keys
//! placed by the rule for the new list at once, the removed group's
//! connections closed.

mod support;

use std::time::Duration;

use support::*;

/// predixy's atol: a sign, then leading digits into a wrapping i64.
fn atol(data: &[u8]) -> i64 {
    let (neg, digits) = match data.first() {
        Some(b'-') => (true, &data[1..]),
        Some(b'+') => (false, &data[1..]),
        _ => (false, data),
    };
    let mut v: i64 = 0;
    for &b in digits.iter().take_while(|b| b.is_ascii_digit()) {
        v = v.wrapping_mul(10).wrapping_add(i64::from(b - b'0'));
    }
    if neg {
        v.wrapping_neg()
    } else {
        v
    }
}

/// The part between the first `{` and the next `}`, when not empty.
fn tagged(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            if close > 0 {
                return &rest[..close];
            }
        }
    }
    key
}

/// predixy's `idx %= mGroupPool.size()`: the long read as a size_t.
fn group_of(hash: &str, groups: usize, key: &[u8]) -> usize {
    if groups == 1 {
        return 0;
    }
    let part = tagged(key);
    let h: i64 = match hash {
        "crc16" => i64::from(crc16_xmodem(part)),
        _ => atol(part),
    };
    ((h as u64) % groups as u64) as usize
}

fn keys() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = (0..60).map(|i| format!("key:{i}").into_bytes()).collect();
    for k in [
        "",
        "0",
        "7",
        "12",
        "12ab",
        "-7",
        "-123456",
        "+42",
        "abc",
        "{user1000}.following",
        "{user1000}.followers",
        "x{13}y",
        "13{}",
        "{}",
        "99999999999999999999",
    ] {
        out.push(k.as_bytes().to_vec());
    }
    out.push(vec![0xff, 0x80, 0x00, b'z']);
    out.push(vec![b'{', 0xc3, 0xa9, b'}', 1, 2]);
    out
}

fn pool_conf(port: u16, hash: &str, groups: &[String], extra: &str) -> String {
    let mut conf = format!(
        "port {port}\npool p listen 127.0.0.1:{port}\npool p hash {hash}\npool p hash-tag {{}}\n"
    );
    for (i, g) in groups.iter().enumerate() {
        conf.push_str(&format!("pool p group g{i} {g}\n"));
    }
    for line in extra.lines().filter(|l| !l.trim().is_empty()) {
        conf.push_str(&format!("pool p {line}\n"));
    }
    conf
}

fn start(set: &StandaloneSet, n: usize, hash: &str) -> Mithril {
    let port = free_port();
    let groups: Vec<String> = (0..n)
        .map(|i| format!("127.0.0.1:{}", set.port(i)))
        .collect();
    Mithril::start(bin(), &[], &pool_conf(port, hash, &groups, ""))
}

#[test]
fn keys_land_on_the_group_predixys_rule_names() {
    let set = StandaloneSet::start(5);
    for hash in ["crc16", "atol"] {
        for n in [1, 2, 5] {
            set.flush_all();
            let m = start(&set, n, hash);
            let mut c = m.conn();
            for k in keys() {
                assert_eq!(c.cmd_bytes(&[b"SET", &k, b"v"]), ok(), "{hash}/{n}: {k:?}");
            }
            for k in keys() {
                let want = group_of(hash, n, &k);
                for s in 0..n {
                    let there = set.conn(s).cmd_bytes(&[b"EXISTS", &k]);
                    let expected = Reply::Int(i64::from(s == want));
                    assert_eq!(
                        there,
                        expected,
                        "{hash} over {n} groups: key {:?} should be on group {want} only",
                        String::from_utf8_lossy(&k)
                    );
                }
                assert_eq!(c.cmd_bytes(&[b"GET", &k]), bulk("v"));
            }
        }
    }
}

#[test]
fn the_spread_is_not_degenerate() {
    // A guard on the reference above: crc16 over 5 groups uses them all.
    let used: std::collections::HashSet<usize> =
        keys().iter().map(|k| group_of("crc16", 5, k)).collect();
    assert_eq!(used.len(), 5);
    assert_eq!(group_of("atol", 5, b"-7"), 4, "(2^64 - 7) % 5");
}

fn select_keeps_databases_apart(threads: usize) {
    let set = StandaloneSet::start(2);
    let port = free_port();
    let groups: Vec<String> = (0..2)
        .map(|i| format!("127.0.0.1:{}", set.port(i)))
        .collect();
    // The reply cache on: a hit must come from the session's database.
    let conf = format!(
        "threads {threads}\nreply-cache yes\n{}",
        pool_conf(port, "crc16", &groups, "databases 16\n")
    );
    let m = Mithril::start(bin(), &[], &conf);
    let mut c = m.conn();
    for db in ["0", "3", "15"] {
        assert_eq!(c.cmd(&["SELECT", db]), ok());
        // Pipelined: every key in the selected database.
        let cmds: Vec<Vec<Vec<u8>>> = (0..20)
            .map(|i| argv(&["SET", &format!("k{i}"), &format!("db{db}")]))
            .collect();
        assert!(c.pipeline(&cmds).iter().all(|r| *r == ok()));
        // MULTI on one group.
        assert_eq!(c.cmd(&["MULTI"]), ok());
        assert_eq!(c.cmd(&["SET", "{t}a", db]), Reply::Simple("QUEUED".into()));
        assert_eq!(c.cmd(&["INCR", "{t}n"]), Reply::Simple("QUEUED".into()));
        assert_eq!(c.cmd(&["EXEC"]).as_array().len(), 2);
        // A script.
        assert_eq!(
            c.cmd(&[
                "EVAL",
                "return redis.call('SET', KEYS[1], ARGV[1])",
                "1",
                "s",
                db
            ]),
            ok()
        );
    }
    for db in ["0", "3", "15", "0", "3"] {
        assert_eq!(c.cmd(&["SELECT", db]), ok());
        for i in 0..20 {
            // Twice: the second may be a cache hit.
            for _ in 0..2 {
                assert_eq!(c.cmd(&["GET", &format!("k{i}")]), bulk(&format!("db{db}")));
            }
        }
        assert_eq!(c.cmd(&["GET", "{t}a"]), bulk(db));
        assert_eq!(c.cmd(&["GET", "{t}n"]), bulk("1"));
        assert_eq!(c.cmd(&["GET", "s"]), bulk(db));
        // SCAN walks this database only: 23 keys.
        let mut cursor = "0".to_string();
        let mut seen = 0;
        loop {
            let r = c.cmd(&["SCAN", &cursor, "COUNT", "100"]);
            let parts = r.as_array();
            cursor = parts[0].as_str().to_string();
            seen += parts[1].as_array().len();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen, 23, "SCAN in db {db}");
    }
    // Directly on the servers: database 3 holds db3's values.
    let total: i64 = (0..2)
        .map(|s| {
            let mut d = set.conn(s);
            assert_eq!(d.cmd(&["SELECT", "3"]), ok());
            d.cmd(&["DBSIZE"]).as_int()
        })
        .sum();
    assert_eq!(total, 23);
    // predixy's refusal past Databases, and of a non-number.
    assert_eq!(c.cmd(&["SELECT", "16"]), err("ERR invalid DB index"));
    assert_eq!(c.cmd(&["SELECT", "-1"]), err("ERR invalid DB index"));
    assert_eq!(c.cmd(&["SELECT", "x"]), err("ERR invalid DB index"));
    // The database is the session's own: a second client starts in 0.
    let mut other = m.conn();
    assert_eq!(other.cmd(&["GET", "s"]), bulk("0"));
    // A write in database 3 by another client is seen there, not in 0.
    assert_eq!(other.cmd(&["SELECT", "3"]), ok());
    assert_eq!(other.cmd(&["SET", "k1", "changed"]), ok());
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(c.cmd(&["GET", "k1"]), bulk("db0"));
    assert_eq!(c.cmd(&["SELECT", "3"]), ok());
    assert_eq!(c.cmd(&["GET", "k1"]), bulk("changed"));
    // A blocking pop waits in the session's database.
    let mut blocked = m.conn();
    assert_eq!(blocked.cmd(&["SELECT", "15"]), ok());
    blocked.send(&[b"BLPOP", b"q", b"5"]);
    assert_eq!(other.cmd(&["LPUSH", "q", "in-3"]), Reply::Int(1));
    assert_eq!(c.cmd(&["SELECT", "15"]), ok());
    assert_eq!(c.cmd(&["LPUSH", "q", "in-15"]), Reply::Int(1));
    assert_eq!(
        blocked.read_reply(),
        Reply::Array(Some(vec![bulk("q"), bulk("in-15")]))
    );
    assert_eq!(
        other.cmd(&["LRANGE", "q", "0", "-1"]),
        Reply::Array(Some(vec![bulk("in-3")]))
    );
}

#[test]
fn select_keeps_databases_apart_threads_1() {
    select_keeps_databases_apart(1);
}

#[test]
fn select_keeps_databases_apart_threads_2() {
    select_keeps_databases_apart(2);
}

#[test]
fn select_keeps_databases_apart_threads_4() {
    select_keeps_databases_apart(4);
}

/// `GET` calls a server has served (INFO commandstats).
fn gets(s: &mut Conn) -> i64 {
    command_calls(s, "get")
}

#[test]
fn reads_follow_the_read_priorities() {
    let set = StandaloneSet::start(2);
    let mut replica = set.conn(1);
    assert_eq!(
        replica.cmd(&["REPLICAOF", "127.0.0.1", &set.port(0).to_string()]),
        ok()
    );
    wait_until("the replica in sync", Duration::from_secs(10), || {
        let info = set.conn(1).cmd(&["INFO", "replication"]);
        String::from_utf8_lossy(info.as_bulk().unwrap_or_default())
            .contains("master_link_status:up")
            .then_some(())
    });
    let group = format!("127.0.0.1:{} 127.0.0.1:{}", set.port(0), set.port(1));
    let run = |extra: &str| -> (i64, i64) {
        let m = Mithril::start(
            bin(),
            &[],
            &pool_conf(free_port(), "crc16", std::slice::from_ref(&group), extra),
        );
        let mut c = m.conn();
        assert_eq!(c.cmd(&["SET", "r", "1"]), ok());
        let before = (gets(&mut set.conn(0)), gets(&mut set.conn(1)));
        for _ in 0..50 {
            c.cmd(&["GET", "r"]);
        }
        (
            gets(&mut set.conn(0)) - before.0,
            gets(&mut set.conn(1)) - before.1,
        )
    };
    // predixy's defaults: the master (50) over replicas (0).
    assert_eq!(run(""), (50, 0));
    // INFO names the pool's kind and its two servers.
    let m = Mithril::start(
        bin(),
        &[],
        &pool_conf(free_port(), "crc16", std::slice::from_ref(&group), ""),
    );
    let info = m.conn().cmd(&["INFO", "backends"]);
    let text = String::from_utf8_lossy(info.as_bulk().unwrap_or_default()).into_owned();
    assert!(
        text.contains("pool0:name=p,kind=groups,") && text.contains(",servers=2,"),
        "{text}"
    );
    // A replica of higher priority takes every read.
    assert_eq!(run("replica-read-priority 60"), (0, 50));
    // Equal priorities share them.
    let (m, r) = run("replica-read-priority 50");
    assert_eq!(m + r, 50);
    assert!(m > 0 || r > 0);
}

#[test]
fn predixys_standalone_conf_example_starts_mithril() {
    let set = StandaloneSet::start(1);
    let port = free_port();
    // predixy's conf/standalone.conf, second example, uncommented; only
    // the addresses changed.
    let conf = format!(
        "Bind 127.0.0.1:{port}\n\
         StandaloneServerPool {{\n\
         \x20   Databases 16\n\
         \x20   Hash crc16\n\
         \x20   HashTag \"{{}}\"\n\
         \x20   Distribution modula\n\
         \x20   MasterReadPriority 60\n\
         \x20   StaticSlaveReadPriority 50\n\
         \x20   DynamicSlaveReadPriority 50\n\
         \x20   RefreshMethod fixed\n\
         \x20   ServerTimeout 1\n\
         \x20   ServerFailureLimit 10\n\
         \x20   ServerRetryTimeout 1\n\
         \x20   KeepAlive 120\n\
         \x20   Group shard001 {{\n\
         \x20      + 127.0.0.1:{}\n\
         \x20   }}\n\
         }}\n",
        set.port(0)
    );
    let dir = make_temp_dir();
    let path = dir.join("predixy.conf");
    std::fs::write(&path, conf).unwrap();
    let (_m, mut c) = start_from_file(bin(), &path, port, |c| {
        c.cmd(&["PING"]) == Reply::Simple("PONG".into())
    });
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(set.conn(0).cmd(&["GET", "a"]), bulk("1"));
    assert_eq!(c.cmd(&["SELECT", "15"]), ok());
    assert_eq!(c.cmd(&["SET", "a", "15"]), ok());
    let mut d = set.conn(0);
    assert_eq!(d.cmd(&["SELECT", "15"]), ok());
    assert_eq!(d.cmd(&["GET", "a"]), bulk("15"));
    assert_eq!(c.cmd(&["SELECT", "16"]), err("ERR invalid DB index"));
    drop(_m);
    remove_temp_dir(&dir);
}

/// The configuration reloaded with the groups `groups` (g0, g1, ...),
/// once they are in force.
fn reload_groups(m: &Mithril, groups: &[String], c: &mut Conn) {
    let lines: Vec<String> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| format!("pool p group g{i} {g}"))
        .collect();
    m.reload_lines(c, "pool p group ", &lines, "groups now");
}

/// A pool of groups' groups changed by a reload (a group added, then one
/// removed) while clients on every worker keep their connections and one
/// keeps sending: keys written after land on the group predixy's rule
/// names for the new list; a key written before is found through mithril
/// exactly when that group is the one it was written to; the removed
/// group's server loses mithril's connections.
fn groups_change_live(threads: usize) {
    let set = StandaloneSet::start(3);
    let addr = |i: usize| format!("127.0.0.1:{}", set.port(i));
    let port = free_port();
    let conf = format!(
        "threads {threads}\n{}",
        pool_conf(port, "crc16", &[addr(0), addr(1)], "")
    );
    let m = Mithril::start(bin(), &[], &conf);
    let mut clients: Vec<Conn> = (0..2 * threads).map(|_| m.conn()).collect();
    let steady = load::Steady::start(m.conn());
    let named =
        |p: &[u8]| -> Vec<Vec<u8>> { keys().into_iter().map(|k| [p, &k].concat()).collect() };
    let set_all = |clients: &mut [Conn], ks: &[Vec<u8>], v: &[u8]| {
        let n = clients.len();
        for (i, k) in ks.iter().enumerate() {
            let r = clients[i % n].cmd_bytes(&[b"SET", k, v]);
            assert_eq!(r, ok(), "SET {}", String::from_utf8_lossy(k));
        }
    };
    let on = |server: usize, k: &[u8]| {
        set.conn(server)
            .cmd_bytes(&[b"GET", k])
            .as_bulk()
            .map(<[u8]>::to_vec)
    };
    let before = named(b"a");
    set_all(&mut clients, &before, b"1");

    // A third group.
    reload_groups(&m, &[addr(0), addr(1), addr(2)], &mut clients[0]);
    let after = named(b"b");
    set_all(&mut clients, &after, b"2");
    for k in &after {
        let g = group_of("crc16", 3, k);
        assert_eq!(
            on(g, k),
            Some(b"2".to_vec()),
            "threads {threads}: {} not on group {g}",
            String::from_utf8_lossy(k)
        );
    }
    let mut moved = 0;
    for (i, k) in before.iter().enumerate() {
        let stays = group_of("crc16", 3, k) == group_of("crc16", 2, k);
        moved += usize::from(!stays);
        let n = clients.len();
        let got = clients[i % n].cmd_bytes(&[b"GET", k]);
        let want = Reply::Bulk(stays.then(|| b"1".to_vec()));
        assert_eq!(
            got,
            want,
            "threads {threads}: {}",
            String::from_utf8_lossy(k)
        );
    }
    assert!(moved > 0, "some keys change group");

    // The first group removed: the others are now groups 0 and 1.
    reload_groups(&m, &[addr(1), addr(2)], &mut clients[0]);
    let last = named(b"c");
    set_all(&mut clients, &last, b"3");
    for k in &last {
        let server = 1 + group_of("crc16", 2, k);
        assert_eq!(
            on(server, k),
            Some(b"3".to_vec()),
            "threads {threads}: {}",
            String::from_utf8_lossy(k)
        );
    }
    set.wait_no_clients(0, "mithril's connections to the removed group closed");
    load::all_kept(&mut clients, steady);
}

#[test]
fn groups_change_live_threads_1() {
    groups_change_live(1);
}

#[test]
fn groups_change_live_threads_2() {
    groups_change_live(2);
}

#[test]
fn groups_change_live_threads_4() {
    groups_change_live(4);
}
