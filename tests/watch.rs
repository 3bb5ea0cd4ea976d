//! WATCH through mithril: optimistic locking on a pinned connection to the
//! watched slot's master (issue 14, item 1). A change of a watched key,
//! made through mithril or on the node itself, makes EXEC answer nil as on
//! a direct connection; keys of other slots get CROSSSLOT; EXEC, DISCARD,
//! UNWATCH and the client's leaving free the pin; the per-node cap of
//! exclusive connections gives its documented error; a slot migrated away
//! under a watch makes EXEC nil; redis-py's `transaction()` (plain and
//! through `RedisCluster`) keeps a counter exact against a concurrent
//! writer.

mod support;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;
use support::*;

const WAIT: Duration = Duration::from_secs(10);

fn direct(port: u16) -> Conn {
    Conn::connect(&format!("127.0.0.1:{port}"))
}

fn info(c: &mut Conn, section: &str) -> HashMap<String, String> {
    c.cmd(&["INFO", section])
        .as_str()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn watching(c: &mut Conn) -> u64 {
    let f = info(c, "clients");
    f.get("watching_clients")
        .unwrap_or_else(|| panic!("no watching_clients in {f:?}"))
        .parse()
        .unwrap()
}

fn wait_watching(c: &mut Conn, n: u64) {
    wait_until(&format!("watching_clients:{n}"), WAIT, || {
        (watching(c) == n).then_some(())
    });
}

fn nil() -> Reply {
    Reply::Array(None)
}

fn arr(items: Vec<Reply>) -> Reply {
    Reply::Array(Some(items))
}

/// WATCH k; GET k; `interfere`; MULTI; SET k v; EXEC: EXEC's reply.
fn guarded_set(c: &mut Conn, k: &str, v: &str, interfere: impl FnOnce()) -> Reply {
    assert_eq!(c.cmd(&["WATCH", k]), ok());
    let _ = c.cmd(&["GET", k]);
    interfere();
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", k, v]), Reply::Simple("QUEUED".into()));
    c.cmd(&["EXEC"])
}

/// On a key of each master: WATCH, a change by `change(key, node port)`,
/// then EXEC is nil and the value is the change's; the retry without
/// interference goes through, and the pin is gone with its EXEC.
fn exec_nil_after(m: &Mithril, cluster: &RedisCluster, mut change: impl FnMut(&str, u16)) {
    let keys = cluster.key_per_master("w:");
    assert_eq!(keys.len(), 3);
    let mut c = m.conn();
    let mut admin = m.conn();
    for (k, port) in &keys {
        assert_eq!(admin.cmd(&["SET", k, "0"]), ok());
        let r = guarded_set(&mut c, k, "mine", || change(k, *port));
        assert_eq!(r, nil(), "{k} changed");
        assert_eq!(admin.cmd(&["GET", k]), bulk("theirs"));
        let r = guarded_set(&mut c, k, "mine", || wait_watching(&mut admin, 1));
        assert_eq!(r, arr(vec![ok()]), "{k} untouched");
        assert_eq!(direct(*port).cmd(&["GET", k]), bulk("mine"));
        wait_watching(&mut admin, 0);
    }
}

#[test]
fn a_change_through_mithril_makes_exec_nil_on_every_master() {
    let (cluster, m) = cluster_and_mithril("");
    let mut other = m.conn();
    exec_nil_after(&m, &cluster, |k, _| {
        assert_eq!(other.cmd(&["SET", k, "theirs"]), ok())
    });
}

#[test]
fn a_change_on_the_node_makes_exec_nil_on_every_master() {
    let (cluster, m) = cluster_and_mithril("");
    exec_nil_after(&m, &cluster, |k, port| {
        assert_eq!(direct(port).cmd(&["SET", k, "theirs"]), ok())
    });
    let mut c = m.conn();
    let mut other = m.conn();
    // RESP3: the nil is RESP3's null.
    let mut c3 = m.conn();
    assert!(matches!(c3.cmd(&["HELLO", "3"]), Reply::Map(_)));
    let (k, port) = cluster.key_per_master("w:").remove(0);
    let r = guarded_set(&mut c3, &k, "x", || {
        assert_eq!(direct(port).cmd(&["SET", &k, "y"]), ok());
    });
    assert_eq!(r, Reply::Null);
    // A tracking client's read inside a watched EXEC: it keeps nothing of
    // it (the null invalidation follows the EXEC's reply).
    assert_eq!(c3.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(c3.cmd(&["WATCH", &k]), ok());
    assert_eq!(c3.cmd(&["MULTI"]), ok());
    assert_eq!(c3.cmd(&["GET", &k]), Reply::Simple("QUEUED".into()));
    assert_eq!(c3.cmd(&["EXEC"]), arr(vec![bulk("y")]));
    assert_eq!(
        c3.read_reply(),
        Reply::Push(vec![bulk("invalidate"), Reply::Null])
    );
    // HELLO 3 while watching: the pinned connection follows.
    let mut c2 = m.conn();
    assert_eq!(c2.cmd(&["WATCH", &k]), ok());
    assert!(matches!(c2.cmd(&["HELLO", "3"]), Reply::Map(_)));
    // A reply of RESP3's own shape, from the pinned node.
    let h = key_for_slot(key_slot(k.as_bytes()), "h:");
    assert_eq!(c2.cmd(&["HGETALL", &h]), Reply::Map(vec![]));
    assert_eq!(direct(port).cmd(&["SET", &k, "w"]), ok());
    assert_eq!(c2.cmd(&["MULTI"]), ok());
    assert_eq!(c2.cmd(&["GET", &k]), Reply::Simple("QUEUED".into()));
    assert_eq!(c2.cmd(&["EXEC"]), Reply::Null);
    // An empty transaction answers the watch too.
    assert_eq!(c.cmd(&["WATCH", &k]), ok());
    assert_eq!(other.cmd(&["SET", &k, "z"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["EXEC"]), nil());
    assert_eq!(c.cmd(&["WATCH", &k]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["EXEC"]), arr(vec![]));
}

#[test]
fn keys_of_another_slot_get_crossslot() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
    assert_ne!(key_slot(b"a"), key_slot(b"b"));
    assert_eq!(c.cmd(&["WATCH", "a", "b"]), err(CROSSSLOT));
    assert_eq!(c.cmd(&["WATCH", "{t}a", "{t}b"]), ok());
    assert_eq!(c.cmd(&["WATCH", "{t}c"]), ok(), "more keys of the slot");
    assert_eq!(c.cmd(&["WATCH", "other"]), err(CROSSSLOT));
    assert_eq!(c.cmd(&["SET", "other", "1"]), err(CROSSSLOT));
    assert_eq!(c.cmd(&["MGET", "{t}a", "other"]), err(CROSSSLOT));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(0), "cluster-wide: served");
    // The slot's own keys, one slot's MGET, keyless and local commands.
    assert_eq!(c.cmd(&["SET", "{t}a", "1"]), ok());
    assert_eq!(
        c.cmd(&["MGET", "{t}a", "{t}b"]),
        arr(vec![bulk("1"), Reply::Bulk(None)])
    );
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        c.cmd(&["WATCH", "{t}a", "x", "MULTI"]),
        err(CROSSSLOT),
        "a WATCH naming one foreign key"
    );
    // Inside MULTI: another slot dooms the transaction, as on a node.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["WATCH", "{t}a"]),
        err("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(c.cmd(&["SET", "{t}a", "2"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["SET", "other", "2"]), err(CROSSSLOT));
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    // EXEC left the watch: every slot is served again.
    assert_eq!(c.cmd(&["SET", "other", "3"]), ok());
    assert_eq!(c.cmd(&["GET", "{t}a"]), bulk("1"));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(2));
}

#[test]
fn cluster_wide_commands_while_watching_run_in_order_with_the_pin() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    // As Redis's own suite checks: FLUSHALL touches a watched key that
    // exists, not one that does not.
    for (k, _) in cluster.key_per_master("fl:") {
        assert_eq!(c.cmd(&["SET", &k, "1"]), ok());
        assert_eq!(c.cmd(&["WATCH", &k]), ok());
        assert_eq!(c.cmd(&["FLUSHALL"]), ok());
        assert_eq!(c.cmd(&["MULTI"]), ok());
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("QUEUED".into()));
        assert_eq!(c.cmd(&["EXEC"]), nil(), "{k} flushed");
        assert_eq!(c.cmd(&["WATCH", &k]), ok());
        assert_eq!(c.cmd(&["FLUSHALL"]), ok());
        assert_eq!(c.cmd(&["MULTI"]), ok());
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("QUEUED".into()));
        assert_eq!(
            c.cmd(&["EXEC"]),
            arr(vec![Reply::Simple("PONG".into())]),
            "{k} was not there"
        );
    }
    // Pipelined behind writes on the pin, the pinned node's part of a
    // cluster-wide command sees them.
    for round in 0..20 {
        let a = format!("{{r{round}}}a");
        let b = format!("{{r{round}}}b");
        let cmds = vec![
            argv(&["WATCH", &a]),
            argv(&["SET", &a, "1"]),
            argv(&["SET", &b, "2"]),
            argv(&["DBSIZE"]),
            argv(&["FLUSHALL"]),
            argv(&["EXISTS", &a, &b]),
            argv(&["UNWATCH"]),
        ];
        assert_eq!(
            c.pipeline(&cmds),
            vec![ok(), ok(), ok(), Reply::Int(2), ok(), Reply::Int(0), ok()],
            "round {round}"
        );
    }
}

#[test]
fn unwatch_discard_and_reset_release_the_watch() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let mut other = m.conn();
    let mut admin = m.conn();
    assert_eq!(c.cmd(&["UNWATCH"]), ok(), "no watch: answered here");
    // UNWATCH: a later change no longer aborts.
    assert_eq!(c.cmd(&["WATCH", "u"]), ok());
    wait_watching(&mut admin, 1);
    assert_eq!(other.cmd(&["SET", "u", "1"]), ok());
    assert_eq!(c.cmd(&["UNWATCH"]), ok());
    wait_watching(&mut admin, 0);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "u", "2"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), arr(vec![ok()]));
    assert_eq!(c.cmd(&["SET", "elsewhere", "1"]), ok());
    // DISCARD leaves the watch too.
    assert_eq!(c.cmd(&["WATCH", "u"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["DISCARD"]), ok());
    assert_eq!(other.cmd(&["SET", "u", "3"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "u", "4"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), arr(vec![ok()]));
    // UNWATCH inside MULTI is queued, as on a node.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["UNWATCH"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), arr(vec![ok()]));
    // RESET.
    assert_eq!(c.cmd(&["WATCH", "u"]), ok());
    wait_watching(&mut admin, 1);
    assert_eq!(c.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    wait_watching(&mut admin, 0);
    assert_eq!(other.cmd(&["SET", "u", "5"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["GET", "u"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), arr(vec![bulk("5")]));
    assert_eq!(c.cmd(&["GET", "elsewhere"]), bulk("1"));
}

#[test]
fn a_client_that_leaves_frees_its_pin() {
    let (cluster, m) = cluster_and_mithril("");
    let mut admin = m.conn();
    let slot = key_slot(b"gone");
    let port = cluster.port_for_slot(slot);
    let blocked_on_node = || -> u64 {
        let f = info(&mut direct(port), "clients");
        f["blocked_clients"].parse().unwrap()
    };
    {
        let mut c = m.conn();
        assert_eq!(c.cmd(&["WATCH", "gone"]), ok());
        wait_watching(&mut admin, 1);
    }
    wait_watching(&mut admin, 0);
    // An idle pin goes back to the idle leases (after an UNWATCH for it):
    // clients coming and going reuse it rather than open one each.
    let mut probe = direct(port);
    let mut node_connections = || -> u64 {
        let f = info(&mut probe, "stats");
        f["total_connections_received"].parse().unwrap()
    };
    let before = node_connections();
    for _ in 0..30 {
        let mut c = m.conn();
        assert_eq!(c.cmd(&["WATCH", "gone"]), ok());
        assert_eq!(c.cmd(&["GET", "gone"]), Reply::Bulk(None));
        drop(c);
        wait_watching(&mut admin, 0);
    }
    let after = node_connections();
    assert!(after <= before + 2, "node connections {before} -> {after}");
    // Leaving with a command outstanding on the pin (a BLPOP of the
    // slot blocks the pinned connection): the connection is closed, so
    // the node forgets the block.
    {
        let mut c = m.conn();
        assert_eq!(c.cmd(&["WATCH", "gone"]), ok());
        c.send(&[b"BLPOP", b"{gone}list", b"0"]);
        wait_until("the BLPOP blocked on the node", WAIT, || {
            (blocked_on_node() == 1).then_some(())
        });
        assert_eq!(watching(&mut admin), 1);
    }
    wait_watching(&mut admin, 0);
    wait_until("the node forgot the block", WAIT, || {
        (blocked_on_node() == 0).then_some(())
    });
    // The freed connections serve new watches.
    let mut c = m.conn();
    let mut other = m.conn();
    let r = guarded_set(&mut c, "gone", "v", || {
        assert_eq!(other.cmd(&["SET", "gone", "w"]), ok());
    });
    assert_eq!(r, nil());
    assert_eq!(guarded_set(&mut c, "gone", "v", || {}), arr(vec![ok()]));
}

#[test]
fn a_pipelined_transaction_keeps_its_order() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let mut other = m.conn();
    for round in 0..50 {
        let k = format!("{{p{round}}}k");
        let n = format!("{{p{round}}}n");
        let v = format!("v{round}");
        assert_eq!(other.cmd(&["SET", &k, "old"]), ok());
        let cmds = vec![
            argv(&["WATCH", &k]),
            argv(&["GET", &k]),
            argv(&["MULTI"]),
            argv(&["SET", &k, &v]),
            argv(&["INCR", &n]),
            argv(&["EXEC"]),
            argv(&["GET", &k]),
            argv(&["SET", "elsewhere", &v]),
            argv(&["PING"]),
        ];
        let replies = c.pipeline(&cmds);
        assert_eq!(
            replies,
            vec![
                ok(),
                bulk("old"),
                ok(),
                Reply::Simple("QUEUED".into()),
                Reply::Simple("QUEUED".into()),
                arr(vec![ok(), Reply::Int(1)]),
                bulk(&v),
                ok(),
                Reply::Simple("PONG".into()),
            ],
            "round {round}"
        );
        // The same with a change between WATCH and EXEC, sent by the
        // client itself inside the pipeline (as Redis, its own write
        // counts).
        let cmds = vec![
            argv(&["WATCH", &k]),
            argv(&["SET", &k, "self"]),
            argv(&["MULTI"]),
            argv(&["INCR", &n]),
            argv(&["EXEC"]),
            argv(&["GET", &n]),
        ];
        assert_eq!(
            c.pipeline(&cmds),
            vec![
                ok(),
                ok(),
                ok(),
                Reply::Simple("QUEUED".into()),
                nil(),
                bulk("1")
            ],
            "round {round}"
        );
    }
}

#[test]
fn the_per_node_cap_gives_its_error() {
    raise_fd_limit();
    let (cluster, m) = cluster_and_mithril("");
    let cap = 512;
    let k = "{cap}k";
    let addr = format!(
        "127.0.0.1:{}",
        cluster.port_for_slot(key_slot(k.as_bytes()))
    );
    let mut held: Vec<Conn> = (0..cap)
        .map(|i| {
            let mut c = m.conn();
            assert_eq!(c.cmd(&["WATCH", k]), ok(), "watcher {i}");
            c
        })
        .collect();
    let mut c = m.conn();
    let e = c.cmd(&["WATCH", k]);
    assert_eq!(
        e,
        err(&format!(
            "ERR mithril: too many exclusive connections to {addr} for WATCH (at most 512 per node, shared with blocking commands)"
        ))
    );
    // A blocking command on that node meets the same cap.
    let e = c.cmd(&["BLPOP", "{cap}list", "1"]);
    assert!(e.as_error().contains("too many blocked clients"), "{e:?}");
    // Other nodes are not affected, and a released pin serves the next.
    let far = (0..)
        .map(|i| format!("far{i}"))
        .find(|x| {
            cluster.port_for_slot(key_slot(x.as_bytes()))
                != cluster.port_for_slot(key_slot(k.as_bytes()))
        })
        .unwrap();
    assert_eq!(c.cmd(&["WATCH", &far]), ok());
    assert_eq!(c.cmd(&["UNWATCH"]), ok());
    assert_eq!(held[0].cmd(&["UNWATCH"]), ok());
    assert_eq!(c.cmd(&["WATCH", k]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", k, "1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), arr(vec![ok()]));
    held.clear();
}

#[test]
fn a_slot_migrated_away_while_watching_makes_exec_nil() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let k = "{mig}k";
    let slot = key_slot(k.as_bytes());
    assert_eq!(c.cmd(&["SET", k, "before"]), ok());
    let target = cluster.other_master(slot).id.clone();
    let to = cluster.nodes.iter().position(|n| n.id == target).unwrap();
    let new_port = cluster.nodes[to].port;

    assert_eq!(c.cmd(&["WATCH", k]), ok());
    assert_eq!(c.cmd(&["GET", k]), bulk("before"));
    assert_eq!(cluster.migrate_slot(slot, to, 100), 1);
    // A read on the moved slot is followed (off the pin): the value.
    assert_eq!(c.cmd(&["GET", k]), bulk("before"));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", k, "mine"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), nil(), "never run on the old owner");
    assert_eq!(direct(new_port).cmd(&["GET", k]), bulk("before"));
    // The client's retry watches on the new owner, where it works.
    let r = guarded_set(&mut c, k, "mine", || {});
    assert_eq!(r, arr(vec![ok()]));
    assert_eq!(direct(new_port).cmd(&["GET", k]), bulk("mine"));
    // And a move between WATCH and EXEC with no command in between.
    let back = cluster
        .nodes
        .iter()
        .position(|n| n.id == cluster.other_master(slot).id)
        .unwrap();
    let r = guarded_set(&mut c, k, "again", || {
        assert_eq!(cluster.migrate_slot(slot, back, 100), 1);
    });
    assert_eq!(r, nil());
    assert_eq!(c.cmd(&["GET", k]), bulk("mine"));
    assert_eq!(guarded_set(&mut c, k, "again", || {}), arr(vec![ok()]));
    assert_eq!(c.cmd(&["GET", k]), bulk("again"));
}

/// Whether `python3 -c "import redis"` works.
fn python_redis() -> bool {
    Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn redis_py_transaction_against_a_concurrent_writer() {
    if !python_redis() {
        println!("note: python3 with the redis package is not available; skipping");
        return;
    }
    let cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    // One counter on each master.
    let counters = cluster.key_per_master("py:");
    let script = r#"
import sys, threading, redis, redis.cluster
port = int(sys.argv[1])
keys = sys.argv[2:]
N = 200
retries = 0
def writer(k):
    w = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(N):
        w.incr(k)
for k in keys:
    r = redis.Redis(host="127.0.0.1", port=port)
    r.set(k, 0)
    t = threading.Thread(target=writer, args=(k,))
    t.start()
    for _ in range(N):
        def add(pipe):
            global retries
            v = int(pipe.get(k))
            pipe.multi()
            pipe.set(k, v + 1)
        # transaction() retries on WatchError: count them through a wrapper.
        attempts = [0]
        def counted(pipe):
            attempts[0] += 1
            add(pipe)
        r.transaction(counted, k)
        retries += attempts[0] - 1
    t.join()
    got = int(r.get(k))
    assert got == 2 * N, (k, got)
# The same through RedisCluster, which sees mithril as a one-node cluster
# and keeps its WATCH and MULTI on one connection to it.
rc = redis.cluster.RedisCluster(host="127.0.0.1", port=port)
for k in keys:
    t = threading.Thread(target=writer, args=(k,))
    t.start()
    for _ in range(N):
        def add(pipe):
            v = int(pipe.get(k))
            pipe.multi()
            pipe.set(k, v + 1)
        rc.transaction(add, k)
    t.join()
    got = int(rc.get(k))
    assert got == 4 * N, (k, got)
print("retries", retries)
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(m.port.to_string())
        .args(counters.iter().map(|(k, _)| k))
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "redis-py script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("redis-py: {}", stdout.trim());
    assert!(stdout.starts_with("retries "), "{stdout}");
    // Every increment is on its master.
    for (k, port) in &counters {
        assert_eq!(direct(*port).cmd(&["GET", k]), bulk("800"), "{k}");
    }
}
