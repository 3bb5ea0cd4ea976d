//! The one-node cluster face: CLUSTER INFO / MYID / NODES / SLOTS / SHARDS
//! compared in structure with real cluster nodes (same fields, same order,
//! same types), the node id's stability, the announce directives, the
//! state following the topology's coverage, and cluster-aware clients
//! (redis-cli -c, redis-py's RedisCluster) working through mithril.

mod support;

use std::process::Command;
use std::time::Duration;
use support::*;

/// The shape of a reply: types all the way down, map keys by name, scalar
/// values left out.
fn shape(r: &Reply) -> String {
    match r {
        Reply::Simple(_) => "simple".into(),
        Reply::Error(_) => "error".into(),
        Reply::Int(_) => "int".into(),
        Reply::Bulk(Some(_)) => "bulk".into(),
        Reply::Bulk(None) => "nil".into(),
        Reply::Array(None) => "nil-array".into(),
        Reply::Array(Some(v)) => format!("[{}]", v.iter().map(shape).collect::<Vec<_>>().join(",")),
        Reply::Set(v) => format!("~[{}]", v.iter().map(shape).collect::<Vec<_>>().join(",")),
        Reply::Push(v) => format!(">[{}]", v.iter().map(shape).collect::<Vec<_>>().join(",")),
        Reply::Map(kv) => format!(
            "{{{}}}",
            kv.iter()
                .map(|(k, v)| format!("{}:{}", k.as_str(), shape(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Reply::Double(_) => "double".into(),
        Reply::Bool(_) => "bool".into(),
        Reply::Null => "null".into(),
        Reply::Verbatim(v) => format!("verbatim:{}", &v[..3]),
        Reply::BigNumber(_) => "bignum".into(),
        Reply::Attribute(..) => "attribute".into(),
    }
}

fn conn3(addr: &str) -> Conn {
    let mut c = Conn::connect(addr);
    assert!(matches!(c.cmd(&["HELLO", "3"]), Reply::Map(_)));
    c
}

/// `field` names of a CLUSTER INFO text, in order.
fn info_fields(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect()
}

fn info_value(text: &str, k: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{k}:")))
        .unwrap_or_else(|| panic!("no {k} in {text}"))
        .to_string()
}

#[test]
fn cluster_replies_have_the_shapes_of_real_nodes() {
    let one = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let three = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &three.seeds(), "");
    let mport = m.port;

    for proto in [2, 3] {
        let open = |addr: &str| {
            if proto == 3 {
                conn3(addr)
            } else {
                Conn::connect(addr)
            }
        };
        let mut o = open(&m.addr());
        let mut single = open(&one.nodes[0].addr());
        let mut real = open(&three.nodes[0].addr());

        // HELLO: a cluster node's map, field for field (id and version aside).
        let h = |c: &mut Conn| c.cmd(&["HELLO", &proto.to_string()]);
        let (ho, hr) = (h(&mut o), h(&mut real));
        assert_eq!(shape(&ho), shape(&hr), "RESP{proto} HELLO");

        // CLUSTER INFO: exactly the fields of a one-node cluster, in order,
        // and those of a bigger cluster's node in the same relative order.
        let (io, is, ir) = (
            o.cmd(&["CLUSTER", "INFO"]),
            single.cmd(&["CLUSTER", "INFO"]),
            real.cmd(&["CLUSTER", "INFO"]),
        );
        assert_eq!(shape(&io), shape(&is), "RESP{proto} CLUSTER INFO type");
        let (fo, fs, fr) = (
            info_fields(io.as_str()),
            info_fields(is.as_str()),
            info_fields(ir.as_str()),
        );
        assert_eq!(fo, fs);
        let in_real: Vec<&String> = fr.iter().filter(|f| fo.contains(f)).collect();
        assert_eq!(in_real, fo.iter().collect::<Vec<_>>());
        assert_eq!(info_value(io.as_str(), "cluster_state"), "ok");
        assert_eq!(info_value(io.as_str(), "cluster_known_nodes"), "1");
        assert_eq!(info_value(io.as_str(), "cluster_size"), "1");
        assert_eq!(info_value(io.as_str(), "cluster_slots_assigned"), "16384");
        assert_eq!(info_value(io.as_str(), "cluster_slots_ok"), "16384");

        // MYID: 40 hex digits, the id the other replies use.
        let id = o.cmd(&["CLUSTER", "MYID"]).as_str().to_string();
        assert_eq!(
            shape(&o.cmd(&["CLUSTER", "MYID"])),
            shape(&real.cmd(&["CLUSTER", "MYID"]))
        );
        assert!(
            id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        let shard = o.cmd(&["CLUSTER", "MYSHARDID"]).as_str().to_string();
        assert!(shard.len() == 40 && shard != id, "{shard}");

        // NODES: one line laid out like a real node's own line.
        let (no, nr) = (
            o.cmd(&["CLUSTER", "NODES"]),
            real.cmd(&["CLUSTER", "NODES"]),
        );
        assert_eq!(shape(&no), shape(&nr));
        let mine = no.as_str();
        assert!(
            mine.ends_with('\n') && mine.lines().count() == 1,
            "{mine:?}"
        );
        let real_own = nr
            .as_str()
            .lines()
            .find(|l| l.contains("myself"))
            .unwrap()
            .to_string();
        let (fo, fr): (Vec<&str>, Vec<&str>) = (
            mine.trim_end().split(' ').collect(),
            real_own.split(' ').collect(),
        );
        assert_eq!(fo.len(), fr.len(), "{mine:?} vs {real_own:?}");
        assert_eq!(fo[0], id);
        assert_eq!(fo[1], format!("127.0.0.1:{mport}@{}", mport + 10000));
        assert_eq!(
            fr[1],
            format!(
                "127.0.0.1:{}@{}",
                three.nodes[0].port,
                three.nodes[0].port + 10000
            )
        );
        assert_eq!(&fo[2..4], &fr[2..4]); // "myself,master -"
        assert_eq!(&fo[4..6], ["0", "0"]);
        assert_eq!(fo[7], fr[7]); // connected
        assert_eq!(fo[8], "0-16383");

        // SLOTS: one range, same entry layout as each of the real ranges.
        let (so, sr) = (
            o.cmd(&["CLUSTER", "SLOTS"]),
            real.cmd(&["CLUSTER", "SLOTS"]),
        );
        assert_eq!(so.as_array().len(), 1);
        for e in sr.as_array() {
            assert_eq!(
                shape(&so.as_array()[0]),
                shape(e),
                "RESP{proto} CLUSTER SLOTS"
            );
        }
        let e = so.as_array()[0].as_array();
        assert_eq!((e[0].as_int(), e[1].as_int()), (0, 16383));
        let n = e[2].as_array();
        assert_eq!(n[0].as_str(), "127.0.0.1");
        assert_eq!(n[1].as_int(), i64::from(mport));
        assert_eq!(n[2].as_str(), id);

        // SHARDS: same keys in the same order and types as a real shard.
        let (sho, shr) = (
            o.cmd(&["CLUSTER", "SHARDS"]),
            real.cmd(&["CLUSTER", "SHARDS"]),
        );
        assert_eq!(sho.as_array().len(), 1);
        for e in shr.as_array() {
            assert_eq!(
                shape(&sho.as_array()[0]),
                shape(e),
                "RESP{proto} CLUSTER SHARDS"
            );
        }
        let text = format!("{sho:?}");
        for want in [&id[..], "127.0.0.1", "master", "online"] {
            assert!(text.contains(want), "{want} missing from {text}");
        }

        // LINKS, KEYSLOT, REPLICAS like a node.
        assert_eq!(
            o.cmd(&["CLUSTER", "LINKS"]),
            single.cmd(&["CLUSTER", "LINKS"])
        );
        for key in ["a", "foo", "{tag}x", "", "\u{e9}t\u{e9}"] {
            assert_eq!(
                o.cmd(&["CLUSTER", "KEYSLOT", key]),
                real.cmd(&["CLUSTER", "KEYSLOT", key]),
                "{key:?}"
            );
        }
        assert_eq!(o.cmd(&["CLUSTER", "REPLICAS", &id]).as_array().len(), 0);
        assert_eq!(o.cmd(&["CLUSTER", "SLAVES", &id]).as_array().len(), 0);

        // What would manage a real cluster is refused.
        for c in [
            &["CLUSTER", "MEET", "127.0.0.1", "7000"][..],
            &["CLUSTER", "ADDSLOTS", "1"],
            &["CLUSTER", "SETSLOT", "1", "STABLE"],
            &["CLUSTER", "FAILOVER"],
            &["CLUSTER", "RESET"],
            &["CLUSTER", "FORGET", &id],
            &["CLUSTER", "REPLICATE", &id],
            &["CLUSTER", "COUNT-FAILURE-REPORTS", &id],
            &["CLUSTER", "SAVECONFIG"],
            &["CLUSTER", "BUMPEPOCH"],
        ] {
            let e = o.cmd(c);
            assert!(e.as_error().contains("not supported"), "{c:?}: {e:?}");
        }
    }
}

#[test]
fn node_id_is_stable_and_announce_directives_apply() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let port = free_port();
    let fixed = format!("port {port}\ntopology-refresh-secs 1\n");
    let mut m = Mithril::start(bin(), &cluster.seeds(), &fixed);
    let id = m.conn().cmd(&["CLUSTER", "MYID"]).as_str().to_string();
    assert_eq!(m.stop(), Some(0));
    let m = Mithril::start(bin(), &cluster.seeds(), &fixed);
    let mut c = m.conn();
    assert_eq!(
        c.cmd(&["CLUSTER", "MYID"]).as_str(),
        id,
        "same port, same id"
    );

    let announced = Mithril::start(
        bin(),
        &cluster.seeds(),
        "cluster-announce-ip 10.9.8.7\ncluster-announce-port 6390\n",
    );
    let mut a = announced.conn();
    let other = a.cmd(&["CLUSTER", "MYID"]).as_str().to_string();
    assert_ne!(other, id);
    let nodes = a.cmd(&["CLUSTER", "NODES"]).as_str().to_string();
    assert_eq!(
        nodes,
        format!("{other} 10.9.8.7:6390@16390 myself,master - 0 0 0 connected 0-16383\n")
    );
    let slots = a.cmd(&["CLUSTER", "SLOTS"]);
    let node = slots.as_array()[0].as_array()[2].as_array();
    assert_eq!((node[0].as_str(), node[1].as_int()), ("10.9.8.7", 6390));
    let shards = format!("{:?}", a.cmd(&["CLUSTER", "SHARDS"]));
    assert!(
        shards.contains("10.9.8.7") && shards.contains("6390"),
        "{shards}"
    );

    // A slot no shard serves: the face reports the cluster down.
    let mut node = cluster.nodes[0].conn();
    assert_eq!(
        node.cmd(&["CLUSTER", "DELSLOTS", "0"]),
        Reply::Simple("OK".into())
    );
    wait_until(
        "mithril to see slot 0 unserved",
        Duration::from_secs(20),
        || {
            let info = c.cmd(&["CLUSTER", "INFO"]).as_str().to_string();
            (info_value(&info, "cluster_state") == "fail").then_some(info)
        },
    );
    let info = c.cmd(&["CLUSTER", "INFO"]).as_str().to_string();
    assert_eq!(info_value(&info, "cluster_slots_ok"), "16383");
    assert_eq!(info_value(&info, "cluster_slots_fail"), "1");
    assert_eq!(info_value(&info, "cluster_slots_assigned"), "16384");
}

fn have(tool: &str, args: &[&str]) -> bool {
    Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn cluster_aware_clients_work_through_mithril() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let port = m.port.to_string();

    // redis-cli in cluster mode.
    if have("redis-cli", &["--version"]) {
        let cli = |args: &[&str]| -> String {
            let out = Command::new("redis-cli")
                .args(["-c", "-h", "127.0.0.1", "-p", &port])
                .args(args)
                .output()
                .expect("redis-cli");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        for (k, v) in [("cli:a", "1"), ("cli:b", "2"), ("cli:c", "3")] {
            assert_eq!(cli(&["set", k, v]), "OK");
            assert_eq!(cli(&["get", k]), v);
            let owner = cluster.port_for_slot(key_slot(k.as_bytes()));
            let mut direct = Conn::connect(&format!("127.0.0.1:{owner}"));
            assert_eq!(direct.cmd(&["GET", k]).as_bulk(), Some(v.as_bytes()));
        }
        let keyslot = cli(&["cluster", "keyslot", "cli:a"]);
        assert_eq!(keyslot, key_slot(b"cli:a").to_string());
    } else {
        println!("note: redis-cli is not installed; skipping its part");
    }

    // redis-py's RedisCluster, RESP2 and RESP3.
    if !python_redis() {
        println!(
            "note: python3 with the redis package is not available; skipping the redis-py part"
        );
        return;
    }
    let script = r#"
import sys, time
from redis.cluster import RedisCluster
port = int(sys.argv[1])
# redis-py 5+ takes protocol= (and 8 negotiates RESP3 by default); older
# releases (Debian's python3-redis) speak RESP2 only.
import redis
major = int(redis.__version__.split(".")[0])
def connect(proto):
    if major >= 5:
        return RedisCluster(host="127.0.0.1", port=port, protocol=proto)
    return RedisCluster(host="127.0.0.1", port=port)
for proto in ([2, 3] if major >= 5 else [2]):
    rc = connect(proto)
    nodes = rc.get_nodes()
    assert len(nodes) == 1 and nodes[0].port == port, nodes
    t = "{py%d}" % proto
    assert rc.set(t + "a", "1") and rc.set(t + "b", "2")
    assert rc.get(t + "a") == b"1", rc.get(t + "a")
    assert rc.mget(t + "a", t + "b", t + "none") == [b"1", b"2", None]
    assert rc.set("py:other%d" % proto, "x") and rc.get("py:other%d" % proto) == b"x"
    assert rc.keyslot(t + "a") == rc.cluster_keyslot(t + "a")
    assert rc.hset(t + "h", mapping={"f": "v", "g": "w"}) == 2
    assert rc.hgetall(t + "h") == {b"f": b"v", b"g": b"w"}, rc.hgetall(t + "h")
    pipe = rc.pipeline()
    pipe.set(t + "p", "9").incr(t + "p").get(t + "p")
    assert pipe.execute() == [True, 10, b"10"]
    assert rc.ping()
    info = rc.cluster_info()
    assert info["cluster_state"] == "ok", info
    # Pub/sub through the one-node face: a message published on the
    # proxy reaches a subscriber on the proxy.
    ps = rc.pubsub()
    ps.subscribe("py:chan%d" % proto)
    deadline = time.time() + 10
    msg = None
    while msg is None or msg["type"] != "subscribe":
        msg = ps.get_message(timeout=1.0)
        assert time.time() < deadline, "no subscribe confirmation"
    assert rc.publish("py:chan%d" % proto, "hello") == 1
    msg = None
    while msg is None:
        msg = ps.get_message(timeout=1.0)
        assert time.time() < deadline, "no message"
    assert msg["type"] == "message" and msg["data"] == b"hello", msg
    ps.close()
    rc.close()
print("redis-py ok")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&port)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "redis-py script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "redis-py ok");
}

/// Whether `python3 -c "import redis.cluster"` works, installing the
/// package once when it is missing: from PyPI with pip (also where the
/// system Python is marked externally managed), else Debian's
/// python3-redis when we are root.
fn python_redis() -> bool {
    let ok = || have("python3", &["-c", "import redis.cluster"]);
    if ok() {
        return true;
    }
    println!("note: installing the redis package for python3");
    for extra in [&[][..], &["--break-system-packages"][..]] {
        let _ = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "redis"])
            .args(extra)
            .status();
        if ok() {
            return true;
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "python3-redis"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
    }
    ok()
}
