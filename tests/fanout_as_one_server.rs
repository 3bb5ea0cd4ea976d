//! Cross-slot fan-outs answer exactly what one server would: MSET with a
//! key but no value is refused whole, nothing written.

mod support;

use std::path::Path;
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
    // MSETNX is not fanned out: in one slot the node refuses the odd
    // count itself; across slots the node it goes to refuses the slots
    // first (what a cluster node answers), and nothing is written either.
    assert_eq!(c.cmd(&["MSETNX", "{one}a", "1", "{one}b"]), arity("msetnx"));
    assert_eq!(
        c.cmd(&["MSETNX", a, "1", b]),
        err("CROSSSLOT Keys in request don't hash to the same slot")
    );
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
