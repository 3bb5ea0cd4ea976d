//! Cross-slot fan-outs answer exactly what one server would: PFCOUNT over
//! keys on several masters is the cardinality of the union (merged from
//! the keys' HLL strings, as Redis merges them), not a sum of per-slot
//! counts; MSET with a key but no value is refused whole, nothing written;
//! SPUBLISH reaches its shard, and PUBSUB SHARDCHANNELS lists them all;
//! SAVE, BGSAVE and BGREWRITEAOF make every master save, and LASTSAVE is
//! the oldest of their save times.
//!
//! The reference is Redis itself: the same values under one hash tag sit
//! in one slot, so mithril forwards that PFCOUNT untouched and the node
//! computes it.

mod support;

use std::path::Path;
use std::time::Duration;
use support::*;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mithril"))
}

fn setup(extra: &str) -> (RedisCluster, Mithril) {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), extra);
    (cluster, m)
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

/// One key `<prefix>:<n>` owned by each master, in master order.
fn key_per_master(cluster: &RedisCluster, prefix: &str) -> Vec<String> {
    cluster
        .masters()
        .iter()
        .map(|n| {
            (0..)
                .map(|i| format!("{prefix}:{i}"))
                .find(|k| cluster.port_for_slot(key_slot(k.as_bytes())) == n.port)
                .unwrap()
        })
        .collect()
}

/// The direct connection to the master that owns `key`.
fn owner(cluster: &RedisCluster, key: &str) -> Conn {
    let port = cluster.port_for_slot(key_slot(key.as_bytes()));
    Conn::connect(&format!("127.0.0.1:{port}"))
}

/// PFADD `key` with the elements `e:<from>` .. `e:<to - 1>`.
fn pfadd(c: &mut Conn, key: &str, from: usize, to: usize) {
    let elements: Vec<String> = (from..to).map(|i| format!("e:{i}")).collect();
    let mut args = vec!["PFADD", key];
    args.extend(elements.iter().map(String::as_str));
    assert_eq!(c.cmd(&args), Reply::Int(1), "PFADD {key}");
}

/// `SET key value` with a binary value, straight on the key's owner.
fn set_raw(cluster: &RedisCluster, key: &str, value: &[u8]) {
    assert_eq!(
        owner(cluster, key).cmd_bytes(&[b"SET", key.as_bytes(), value]),
        ok()
    );
}

#[test]
fn pfcount_across_masters_is_the_union_of_the_sets() {
    let (cluster, m) = setup("");
    let mut c = m.conn();
    let keys = key_per_master(&cluster, "hll");
    let (a, b, d) = (&keys[0], &keys[1], &keys[2]);
    // Overlapping sets: a and b share 500 elements (both sparse), d is
    // dense (20,000 elements) and holds all of a and b.
    let sets = [(a, "{one}a", 0, 1000), (b, "{one}b", 500, 1500)];
    for (spread, tagged, from, to) in sets {
        pfadd(&mut c, spread, from, to);
        pfadd(&mut c, tagged, from, to);
    }
    pfadd(&mut c, d, 0, 20_000);
    pfadd(&mut c, "{one}d", 0, 20_000);
    let mut direct = owner(&cluster, "{one}a");
    let encoding =
        |key: &str, conn: &mut Conn| conn.cmd(&["GETRANGE", key, "4", "4"]).as_bulk().unwrap()[0];
    assert_eq!(encoding(a, &mut owner(&cluster, a)), 1, "a is sparse");
    assert_eq!(encoding(d, &mut owner(&cluster, d)), 0, "d is dense");

    // Each spread combination against Redis's own answer for the same
    // values in one slot (a missing key counts as empty).
    let combos: [&[&str]; 6] = [
        &["a", "b"],
        &["b", "a"],
        &["a", "d"],
        &["a", "b", "d"],
        &["d", "missing", "b", "a", "a"],
        &["missing", "missing2"],
    ];
    for combo in combos {
        let spread: Vec<&str> = combo
            .iter()
            .map(|k| match *k {
                "a" => a.as_str(),
                "b" => b.as_str(),
                "d" => d.as_str(),
                other => other,
            })
            .collect();
        let tagged: Vec<String> = combo.iter().map(|k| format!("{{one}}{k}")).collect();
        let mut one = vec!["PFCOUNT"];
        one.extend(tagged.iter().map(String::as_str));
        let want = direct.cmd(&one);
        assert_eq!(c.cmd(&one), want, "one slot through mithril: {combo:?}");
        let mut across = vec!["PFCOUNT"];
        across.extend(&spread);
        assert_eq!(c.cmd(&across), want, "across masters: {combo:?}");
    }
    // The union, not the sum (which would be 1,000 + 1,000 = ~2,000).
    let union = c.cmd(&["PFCOUNT", a, b]).as_int();
    assert!((1400..1600).contains(&union), "{union}");

    // RESP3: a missing key's null is an empty set too.
    assert!(!c.cmd(&["HELLO", "3"]).is_error());
    let want = direct.cmd(&["PFCOUNT", "{one}a", "{one}b", "{one}missing"]);
    assert_eq!(c.cmd(&["PFCOUNT", a, b, "missing"]), want);

    // Nothing was written by the cross-slot counts: the keys' values are
    // the ones PFADD left (GET of the spread keys equals the tagged ones).
    for (spread, tagged) in [(a, "{one}a"), (b, "{one}b"), (d, "{one}d")] {
        let got = owner(&cluster, spread).cmd(&["GET", spread]);
        assert_eq!(got, direct.cmd(&["GET", tagged]), "{spread}");
    }
}

#[test]
fn pfcount_across_masters_answers_the_errors_a_server_would() {
    let (cluster, m) = setup("");
    let mut c = m.conn();
    let keys = key_per_master(&cluster, "bad");
    let (hll, other, third) = (&keys[0], &keys[1], &keys[2]);
    pfadd(&mut c, hll, 0, 10);
    pfadd(&mut c, "{one}hll", 0, 10);
    let mut direct = owner(&cluster, "{one}hll");
    let header = |encoding: u8| {
        let mut v = b"HYLL".to_vec();
        v.push(encoding);
        v.extend_from_slice(&[0; 11]);
        v
    };
    let dense_short = {
        let mut v = header(0);
        v.extend_from_slice(&[0; 100]);
        v
    };
    let sparse_short = {
        let mut v = header(1);
        v.extend_from_slice(&[0x40, 0x00]); // XZERO:1 — 16,383 registers missing
        v
    };
    let bad_magic = {
        let mut v = header(1);
        v[0] = b'h';
        v.extend_from_slice(&[0x7f, 0xff]);
        v
    };
    let cases: [(&str, Vec<u8>); 6] = [
        ("str", b"hello".to_vec()),
        ("int", b"123".to_vec()),
        ("dense-short", dense_short),
        ("sparse-short", sparse_short),
        ("magic", bad_magic),
        ("encoding", {
            let mut v = header(2);
            v.extend_from_slice(&[0x7f, 0xff]);
            v
        }),
    ];
    for (name, value) in &cases {
        set_raw(&cluster, other, value);
        set_raw(&cluster, "{one}other", value);
        let want = direct.cmd(&["PFCOUNT", "{one}hll", "{one}other"]);
        assert!(want.is_error(), "{name}: Redis refuses it: {want:?}");
        assert_eq!(c.cmd(&["PFCOUNT", hll, other]), want, "{name}");
        let want = direct.cmd(&["PFCOUNT", "{one}other", "{one}hll"]);
        assert_eq!(c.cmd(&["PFCOUNT", other, hll]), want, "{name}, first");
    }
    // Strings at the edges of the format, which a server accepts or
    // refuses in its own way: the same answers across masters.
    let edges: [(&str, Vec<u8>); 4] = [
        (
            "a VAL after an exact end",
            [header(1), vec![0x7f, 0xff, 0x80]].concat(),
        ),
        (
            "a cut XZERO that completes",
            [header(1), vec![0x40, 0xfe, 0x7f]].concat(),
        ),
        (
            "VAL:32 at the last register",
            [header(1), vec![0x7f, 0xfe, 0xfc]].concat(),
        ),
        // Every register 63: outside the estimate, which then overflows.
        ("dense, all 63", [header(0), vec![0xff; 12288]].concat()),
    ];
    for (name, value) in &edges {
        set_raw(&cluster, other, value);
        set_raw(&cluster, "{one}other", value);
        let want = direct.cmd(&["PFCOUNT", "{one}hll", "{one}other"]);
        assert_eq!(c.cmd(&["PFCOUNT", hll, other]), want, "{name}");
    }

    // The texts, once: Redis 7.0's own.
    set_raw(&cluster, other, b"hello");
    assert_eq!(
        c.cmd(&["PFCOUNT", hll, other]),
        err("WRONGTYPE Key is not a valid HyperLogLog string value.")
    );
    for k in [other.as_str(), "{one}other"] {
        set_raw(&cluster, k, &cases[3].1); // the corrupt sparse string
    }
    assert_eq!(
        c.cmd(&["PFCOUNT", hll, other]),
        err("INVALIDOBJ Corrupted HLL object detected")
    );

    // Not a string: GET's own error, as PFCOUNT gives it.
    assert_eq!(c.cmd(&["RPUSH", third, "x"]), Reply::Int(1));
    assert_eq!(c.cmd(&["RPUSH", "{one}third", "x"]), Reply::Int(1));
    let wrongtype = err("WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(c.cmd(&["PFCOUNT", hll, third]), wrongtype);
    // Several bad keys: the first one in key order decides, as on a server
    // (here the corrupt sparse string, then the list).
    for order in [[other, third], [third, other]] {
        let tagged: Vec<&str> = order
            .iter()
            .map(|k| {
                if *k == other {
                    "{one}other"
                } else {
                    "{one}third"
                }
            })
            .collect();
        let want = direct.cmd(&["PFCOUNT", "{one}hll", tagged[0], tagged[1]]);
        assert_eq!(c.cmd(&["PFCOUNT", hll, order[0], order[1]]), want);
    }
    assert_eq!(
        c.cmd(&["PFCOUNT", third, other]),
        wrongtype,
        "the list comes first"
    );
    // The session goes on.
    assert_eq!(c.cmd(&["PFCOUNT", hll]), Reply::Int(10));
}

/// A PFCOUNT forwarded whole to a slot whose keys are split by a
/// migration gets TRYAGAIN until the waits are spent, then is re-sent key
/// by key: those keys' HLLs are merged the same way, not summed.
#[test]
fn pfcount_split_by_a_migration_is_still_the_union() {
    let (cluster, m) = setup("topology-refresh-secs 3600");
    let mut c = m.conn();
    let (a, b) = ("{split}a", "{split}b");
    pfadd(&mut c, a, 0, 1000);
    pfadd(&mut c, b, 500, 1500);
    let want = c.cmd(&["PFCOUNT", a, b]);
    let union = want.as_int();
    assert!((1400..1600).contains(&union), "{union}");

    // Only `a` moves: the slot's keys are split.
    let (from, _) = cluster.split_slot(key_slot(a.as_bytes()), &[a]);
    assert!(from
        .conn()
        .cmd(&["PFCOUNT", a, b])
        .as_error()
        .starts_with("TRYAGAIN"));
    assert_eq!(c.cmd(&["PFCOUNT", a, b]), want);
}

#[test]
fn mset_with_a_key_but_no_value_is_refused_whole() {
    let (cluster, m) = setup("");
    let mut c = m.conn();
    let keys = key_per_master(&cluster, "ms");
    let (a, b, d) = (keys[0].as_str(), keys[1].as_str(), keys[2].as_str());
    let arity = |cmd: &str| {
        err(&format!(
            "ERR wrong number of arguments for '{cmd}' command"
        ))
    };
    let nothing_written = |what: &str| {
        for k in [a, b, d, "{one}a", "{one}b", "{one}c"] {
            assert_eq!(
                owner(&cluster, k).cmd(&["EXISTS", k]),
                Reply::Int(0),
                "{what}: {k} written"
            );
        }
    };

    // Keys on three masters, the last one without a value.
    assert_eq!(c.cmd(&["MSET", a, "1", b, "2", d]), arity("mset"));
    nothing_written("MSET across masters");
    assert_eq!(c.cmd(&["mset", b, "2", a]), arity("mset"));
    nothing_written("mset across masters");
    // One slot: the node's own refusal, the same text.
    assert_eq!(
        c.cmd(&["MSET", "{one}a", "1", "{one}b", "2", "{one}c"]),
        arity("mset")
    );
    nothing_written("MSET in one slot");
    assert_eq!(c.cmd(&["MSET", a]), arity("mset"));
    // MSETNX is not fanned out, but mithril checks its pairs before it
    // is sent: the arity error a single server gives, in one slot and
    // across slots alike (a cluster node would say CROSSSLOT first), and
    // nothing is written.
    assert_eq!(c.cmd(&["MSETNX", "{one}a", "1", "{one}b"]), arity("msetnx"));
    assert_eq!(c.cmd(&["MSETNX", a, "1", b]), arity("msetnx"));
    nothing_written("MSETNX");

    // The session is fine, and a well-formed MSET still fans out.
    assert_eq!(c.cmd(&["MSET", a, "1", b, "2", d, "3"]), ok());
    for (k, v) in [(a, "1"), (b, "2"), (d, "3")] {
        assert_eq!(
            owner(&cluster, k).cmd(&["GET", k]),
            Reply::Bulk(Some(v.as_bytes().to_vec())),
            "{k} on its owner"
        );
    }
}

/// SPUBLISH goes to the master of its shard channel's slot, as a cluster
/// client sends it, so a subscriber of that shard (SSUBSCRIBE on the node
/// itself) gets the message and the reply counts it; PUBSUB SHARDCHANNELS
/// lists the shard channels of every master.
#[test]
fn spublish_reaches_its_shard_and_shardchannels_lists_every_master() {
    let (cluster, m) = setup("");
    let channels = key_per_master(&cluster, "shard");
    let mut subs: Vec<Conn> = Vec::new();
    for ch in &channels {
        let mut s = owner(&cluster, ch);
        s.send(&[b"SSUBSCRIBE", ch.as_bytes()]);
        let r = s.read_reply();
        assert_eq!(
            r.as_array().first(),
            Some(&Reply::Bulk(Some(b"ssubscribe".to_vec())))
        );
        subs.push(s);
    }
    let mut c = m.conn();
    for (ch, s) in channels.iter().zip(subs.iter_mut()) {
        assert_eq!(c.cmd(&["SPUBLISH", ch, "hello"]), Reply::Int(1), "{ch}");
        let msg = s.read_reply();
        assert_eq!(
            msg,
            Reply::Array(Some(vec![
                Reply::Bulk(Some(b"smessage".to_vec())),
                Reply::Bulk(Some(ch.as_bytes().to_vec())),
                Reply::Bulk(Some(b"hello".to_vec())),
            ]))
        );
    }
    assert_eq!(c.cmd(&["SPUBLISH", "nobody:listens", "x"]), Reply::Int(0));
    let listed = c.cmd(&["PUBSUB", "SHARDCHANNELS"]);
    let mut got: Vec<String> = listed
        .as_array()
        .iter()
        .map(|r| String::from_utf8_lossy(r.as_bulk().unwrap()).to_string())
        .collect();
    got.sort();
    let mut want = channels.clone();
    want.sort();
    assert_eq!(got, want);
    let one = c.cmd(&["PUBSUB", "SHARDCHANNELS", &channels[1]]);
    assert_eq!(one.as_array().len(), 1);
}

/// `field:value` of a master's `INFO persistence`.
fn persistence(n: &RedisNode, field: &str) -> i64 {
    let text = n.conn().cmd(&["INFO", "persistence"]);
    let text = String::from_utf8_lossy(text.as_bulk().unwrap()).to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in {text}"))
}

#[test]
fn save_bgsave_and_lastsave_cover_every_master() {
    let (cluster, m) = setup("user writer on >pw mode write\n");
    let mut c = m.conn();
    let masters = cluster.masters();
    for (k, _) in cluster.key_per_master("persist") {
        assert_eq!(c.cmd(&["SET", &k, "v"]), ok());
    }
    // SAVE: every master writes its snapshot.
    assert_eq!(c.cmd(&["SAVE"]), ok());
    for n in &masters {
        assert_eq!(
            persistence(n, "rdb_changes_since_last_save"),
            0,
            "{}",
            n.port
        );
        assert_eq!(persistence(n, "rdb_saves"), 1, "{}", n.port);
    }
    // The background saves: a master's own status line once every master
    // started one, and each master's counter goes up.
    let background: &[(&[&str], &str, &str, &str, i64)] = &[
        (
            &["BGSAVE"],
            "Background saving started",
            "rdb_saves",
            "rdb_bgsave_in_progress",
            2,
        ),
        (
            &["BGSAVE", "SCHEDULE"],
            "Background saving started",
            "rdb_saves",
            "rdb_bgsave_in_progress",
            3,
        ),
        (
            &["BGREWRITEAOF"],
            "Background append only file rewriting started",
            "aof_rewrites",
            "aof_rewrite_in_progress",
            1,
        ),
    ];
    for &(args, status, counter, busy, want) in background {
        assert_eq!(c.cmd(args), Reply::Simple(status.into()), "{args:?}");
        for n in &masters {
            wait_until(
                &format!("{args:?} on {}", n.port),
                Duration::from_secs(10),
                || (persistence(n, counter) == want && persistence(n, busy) == 0).then_some(()),
            );
        }
    }
    // LASTSAVE: the oldest of the masters' (all data saved since then).
    // masters[0] saves again a second later, so that its time is not the
    // oldest; the others' times are read after that save (a background
    // save of theirs finishing late moves them on), and the step is tried
    // again while masters[0] is not alone at the newest.
    let save_time = |n: &RedisNode| persistence(n, "rdb_last_save_time");
    let mut last = String::new();
    let oldest = poll_until(Duration::from_secs(30), || {
        let newest = masters.iter().map(|n| save_time(n)).max().unwrap();
        wait_until(
            "a second past the last save",
            Duration::from_secs(5),
            || {
                let t = masters[0].conn().cmd(&["TIME"]);
                let secs: i64 = std::str::from_utf8(t.as_array()[0].as_bulk().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap();
                (secs > newest).then_some(())
            },
        );
        assert_eq!(masters[0].conn().cmd(&["SAVE"]), ok());
        let first = save_time(masters[0]);
        let oldest = masters[1..].iter().map(|n| save_time(n)).min().unwrap();
        last = format!("masters[0] saved at {first}, the others' oldest is {oldest}");
        (first > oldest).then_some(oldest)
    })
    .unwrap_or_else(|| panic!("masters[0] never saved after the others: {last}"));
    assert_eq!(c.cmd(&["LASTSAVE"]), Reply::Int(oldest));
    // Administration: a user without admin rights gets Redis's NOPERM.
    let mut w = m.conn();
    assert_eq!(w.cmd(&["AUTH", "writer", "pw"]), ok());
    for name in ["save", "bgsave", "bgrewriteaof", "lastsave"] {
        assert_eq!(
            w.cmd(&[name]),
            err(&format!(
                "NOPERM this user has no permissions to run the '{name}' command"
            ))
        );
    }
    assert_eq!(
        c.cmd(&["SAVE", "x"]),
        err("ERR wrong number of arguments for 'save' command")
    );
    // One master that cannot write its snapshot (a directory stands where
    // its temporary file would go): its refusal is the answer, not the
    // others' OK.
    let dir = masters[1].conn().cmd(&["CONFIG", "GET", "dir"]);
    let dir = String::from_utf8_lossy(dir.as_array()[1].as_bulk().unwrap()).to_string();
    let blocker = Path::new(&dir).join(format!("temp-{}.rdb", masters[1].pid));
    std::fs::create_dir_all(&blocker).unwrap();
    let saves = persistence(masters[0], "rdb_saves");
    assert_eq!(c.cmd(&["SAVE"]), err("ERR"));
    assert_eq!(persistence(masters[0], "rdb_saves"), saves + 1);
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(c.cmd(&["SAVE"]), ok());
}
