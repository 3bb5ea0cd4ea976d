//! Tests of the test harness itself (`tests/support`), against real
//! `redis-server` processes; mithril is not involved. If these fail, every
//! integration test that starts a cluster is suspect.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use support::*;

fn info_field(info: &Reply, field: &str) -> String {
    let text = info.as_str();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .trim()
        .to_string()
}

#[test]
fn three_masters_form_and_every_slot_is_owned() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    assert_eq!(cluster.nodes.len(), 3);
    assert_eq!(cluster.masters().len(), 3);
    let ids: HashSet<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    for n in &cluster.nodes {
        assert_eq!(n.id.len(), 40);
        assert!(n.id.bytes().all(|b| b.is_ascii_hexdigit()), "{}", n.id);
        let info = n.conn().cmd(&["CLUSTER", "INFO"]);
        assert_eq!(info_field(&info, "cluster_state"), "ok");
        assert_eq!(info_field(&info, "cluster_slots_assigned"), "16384");
        assert_eq!(info_field(&info, "cluster_known_nodes"), "3");
        assert_eq!(info_field(&info, "cluster_size"), "3");
    }
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    assert_eq!(
        cluster.slot_map(),
        vec![
            (0, 5460, ports[0]),
            (5461, 10921, ports[1]),
            (10922, 16383, ports[2])
        ]
    );
    assert_eq!(
        cluster.seeds(),
        ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
    );

    // port_for_slot agrees with the redirects Redis itself sends.
    for slot in [0u16, 5460, 5461, 10921, 10922, 16383, 777, 12345] {
        let key = key_for_slot(slot, "selftest:");
        let owner = cluster.port_for_slot(slot);
        let mut right = Conn::connect(&format!("127.0.0.1:{owner}"));
        assert_eq!(right.cmd(&["SET", &key, "v"]).as_str(), "OK");
        assert_eq!(right.cmd(&["GET", &key]).as_bulk(), Some(&b"v"[..]));
        let other = ports.iter().find(|&&p| p != owner).copied().unwrap_or(0);
        let reply = Conn::connect(&format!("127.0.0.1:{other}")).cmd(&["GET", &key]);
        assert_eq!(reply.as_error(), format!("MOVED {slot} 127.0.0.1:{owner}"));
    }
}

#[test]
fn masters_with_replicas_form_with_replicas_attached() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 2,
        replicas_per_master: 1,
        ..ClusterSpec::default()
    });
    assert_eq!(cluster.nodes.len(), 4);
    let masters: Vec<RedisNode> = cluster.masters().into_iter().cloned().collect();
    assert_eq!(masters.len(), 2);
    for (k, replica) in cluster.nodes[2..].iter().enumerate() {
        let master = &masters[k];
        assert_eq!(replica.master_of.as_deref(), Some(master.id.as_str()));
        let info = replica.conn().cmd(&["INFO", "replication"]);
        assert_eq!(info_field(&info, "role"), "slave");
        assert_eq!(info_field(&info, "master_port"), master.port.to_string());
        assert_eq!(info_field(&info, "master_link_status"), "up");
        let minfo = master.conn().cmd(&["INFO", "replication"]);
        assert_eq!(info_field(&minfo, "connected_slaves"), "1");

        // A write on the master reaches the replica.
        let slot = cluster
            .slot_map()
            .into_iter()
            .find(|&(_, _, p)| p == master.port)
            .map(|(a, _, _)| a)
            .unwrap_or_else(|| panic!("master {} owns no slot", master.port));
        let key = key_for_slot(slot, "repl:");
        let mut mc = master.conn();
        assert_eq!(mc.cmd(&["SET", &key, "copied"]).as_str(), "OK");
        assert_eq!(mc.cmd(&["WAIT", "1", "5000"]).as_int(), 1);
        let mut rc = replica.conn();
        assert_eq!(rc.cmd(&["READONLY"]).as_str(), "OK");
        assert_eq!(rc.cmd(&["GET", &key]).as_bulk(), Some(&b"copied"[..]));
    }
    // Every node sees the same replicas.
    for n in &cluster.nodes {
        let nodes = n.conn().cmd(&["CLUSTER", "NODES"]);
        let slaves = nodes
            .as_str()
            .lines()
            .filter(|l| l.contains("slave"))
            .count();
        assert_eq!(slaves, 2, "{}", nodes.as_str());
    }
}

/// The node ports a CLUSTER SLOTS reply in redis-cli's JSON names
/// (`[[first, last, [ip, port, id, {..}], ...], ...]`), sorted.
fn ports_in_slots_json(text: &str) -> Vec<u16> {
    let v: serde_json::Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let mut ports: Vec<u16> = v
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {text}"))
        .iter()
        .flat_map(|range| range.as_array().into_iter().flatten().skip(2))
        .filter_map(|node| node.get(1)?.as_u64())
        .map(|p| u16::try_from(p).expect("a port"))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[test]
fn a_tls_cluster_names_its_tls_ports_over_tls_and_its_plain_ports_over_plain() {
    let certs = Certs::make();
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 2,
        replicas_per_master: 1,
        tls: Some(certs.node_tls(AuthClients::Yes)),
        ..ClusterSpec::default()
    });
    let tls: Vec<u16> = cluster.nodes.iter().filter_map(|n| n.tls_port).collect();
    let plain: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    assert_eq!(tls.len(), 4);
    let masters_tls: Vec<u16> = cluster.masters().iter().map(|n| n.peer_port()).collect();
    // Over TLS (with the client certificate tls-auth-clients yes asks
    // for): TLS ports only, every master's among them (Redis 7.0 leaves
    // out a replica whose replication offset is still 0).
    for n in &cluster.nodes {
        let port = n.tls_port.expect("a TLS port");
        let o = certs.cli(port, true, &["--json", "CLUSTER", "SLOTS"], None);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "redis-cli on :{port}: {o:?}");
        let listed = ports_in_slots_json(&text);
        assert!(
            listed.iter().all(|p| tls.contains(p))
                && masters_tls.iter().all(|p| listed.contains(p)),
            "over TLS from :{port}: {listed:?}, TLS ports {tls:?}, plain {plain:?}"
        );
        // No certificate: refused.
        let o = certs.cli(port, false, &["PING"], None);
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("PONG"),
            "served without a certificate: {o:?}"
        );
    }
    // Over a plain connection: the plain ports.
    let masters: Vec<u16> = cluster.slot_map().iter().map(|&(_, _, p)| p).collect();
    assert!(masters.iter().all(|p| plain.contains(p)), "{masters:?}");
    // The replicas follow their masters over TLS (tls-replication yes).
    for replica in cluster.nodes.iter().filter(|n| n.master_of.is_some()) {
        let master = cluster
            .nodes
            .iter()
            .find(|m| Some(&m.id) == replica.master_of.as_ref())
            .expect("its master");
        let info = replica.conn().cmd(&["INFO", "replication"]);
        assert_eq!(info_field(&info, "master_link_status"), "up");
        assert_eq!(
            info_field(&info, "master_port"),
            master.peer_port().to_string()
        );
    }
}

#[test]
fn key_slot_matches_cluster_keyslot() {
    // Reference values of the CRC16 used by Redis Cluster.
    // CRC16/XMODEM("123456789") is 0x31C3, below 16384.
    assert_eq!(key_slot(b"123456789"), 0x31c3);
    assert_eq!(key_slot(b"foo"), 12182);
    assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));

    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let mut c = cluster.nodes[0].conn();
    let seed = random_u64() | 1;
    let mut rng = Rng(seed);
    let mut keys: Vec<Vec<u8>> = [
        "",
        "{}",
        "{a}b",
        "a{}{b}",
        "{{a}}",
        "{a",
        "a}",
        "}{a}",
        "{}a",
        "a{b}c{d}",
        "{a}{b}",
        "{{}}",
        "{ }",
        "foo{bar}{zap}",
        "{bar",
        "foo{}",
        "{user1000}.followers",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let alphabet = b"{}ab\x00\xff:z";
    while keys.len() < 1000 {
        let len = rng.below(12) as usize;
        let key: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(3) == 0 {
                    rng.next() as u8
                } else {
                    alphabet[rng.below(alphabet.len() as u64) as usize]
                }
            })
            .collect();
        keys.push(key);
    }
    let cmds: Vec<Vec<Vec<u8>>> = keys
        .iter()
        .map(|k| vec![b"CLUSTER".to_vec(), b"KEYSLOT".to_vec(), k.clone()])
        .collect();
    let replies = c.pipeline(&cmds);
    for (k, r) in keys.iter().zip(&replies) {
        assert_eq!(
            i64::from(key_slot(k)),
            r.as_int(),
            "key {:?} (seed {seed})",
            k.escape_ascii().to_string()
        );
    }

    // key_for_slot finds keys that Redis agrees on.
    let slots: Vec<u16> = [0u16, 1, 8191, 16383]
        .into_iter()
        .chain((0..40).map(|_| rng.below(16384) as u16))
        .collect();
    for slot in slots {
        let key = key_for_slot(slot, "kfs:");
        assert!(key.starts_with("kfs:"));
        assert_eq!(key_slot(key.as_bytes()), slot);
        assert_eq!(
            c.cmd(&["CLUSTER", "KEYSLOT", &key]).as_int(),
            i64::from(slot)
        );
    }
    let tagged = key_for_slot(key_slot(b"tag"), "{tag}");
    assert_eq!(key_slot(tagged.as_bytes()), key_slot(b"tag"));
}

#[test]
fn killed_node_restarts_and_rejoins() {
    let mut cluster = RedisCluster::start(ClusterSpec::default());
    let before = cluster.slot_map();
    let old = cluster.nodes[1].clone();
    cluster.kill(1);
    assert!(!pid_alive(old.pid), "pid {} survived kill", old.pid);
    assert!(!cluster.is_running(1));
    assert!(Conn::try_connect(&old.addr()).is_err());

    cluster.restart(1);
    let new = cluster.nodes[1].clone();
    assert_ne!(new.pid, old.pid);
    assert_eq!(new.port, old.port);
    assert!(pid_alive(new.pid));
    cluster.wait_healthy(Duration::from_secs(20));
    // Same identity (nodes.conf kept), same slots.
    assert_eq!(new.conn().cmd(&["CLUSTER", "MYID"]).as_str(), old.id);
    assert_eq!(cluster.slot_map(), before);
    let key = key_for_slot(before[1].0, "back:");
    let mut c = new.conn();
    assert_eq!(c.cmd(&["SET", &key, "1"]).as_str(), "OK");
    assert_eq!(c.cmd(&["GET", &key]).as_bulk(), Some(&b"1"[..]));
}

#[test]
fn killed_master_fails_over_to_its_replica_and_returns_as_replica() {
    let mut cluster = RedisCluster::start(ClusterSpec {
        masters: 3,
        replicas_per_master: 1,
        node_timeout_ms: 1000,
        ..ClusterSpec::default()
    });
    let (old_master, replica) = (cluster.nodes[0].clone(), cluster.nodes[3].clone());
    assert_eq!(replica.master_of.as_deref(), Some(old_master.id.as_str()));
    assert_eq!(cluster.port_for_slot(0), old_master.port);

    cluster.kill(0);
    // Healthy again only once the replica owns the dead master's slots.
    cluster.wait_healthy(Duration::from_secs(30));
    assert_eq!(cluster.port_for_slot(0), replica.port);
    cluster.refresh_roles();
    let masters: Vec<u16> = cluster.masters().iter().map(|n| n.port).collect();
    assert_eq!(
        masters,
        vec![cluster.nodes[1].port, cluster.nodes[2].port, replica.port]
    );

    cluster.restart(0);
    cluster.wait_healthy(Duration::from_secs(30));
    cluster.refresh_roles();
    assert_eq!(
        cluster.nodes[0].master_of.as_deref(),
        Some(replica.id.as_str())
    );
    assert_eq!(cluster.masters().len(), 3);
    let info = cluster.nodes[0].conn().cmd(&["INFO", "replication"]);
    assert_eq!(info_field(&info, "role"), "slave");
    assert_eq!(info_field(&info, "master_port"), replica.port.to_string());
}

#[test]
fn drop_stops_every_node_and_removes_the_dir() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        replicas_per_master: 1,
        ..ClusterSpec::default()
    });
    let pids: Vec<u32> = cluster.nodes.iter().map(|n| n.pid).collect();
    let dir = cluster.dir.clone();
    assert!(pids.iter().all(|&p| pid_alive(p)));
    assert!(dir.is_dir());
    drop(cluster);
    for p in pids {
        assert!(!pid_alive(p), "redis-server pid {p} is still there");
    }
    if std::env::var_os("MITHRIL_KEEP_TEST_DIRS").is_none() {
        assert!(!dir.exists(), "{} was not removed", dir.display());
    }
}

#[test]
fn free_ports_are_distinct_and_bindable() {
    let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
    let unique: HashSet<u16> = ports.iter().copied().collect();
    assert_eq!(unique.len(), ports.len());
    // (Whether they are still free a moment later depends on every other
    // process on the machine, so that is not asserted here: free_port
    // checked both binds when it chose them.)
    for p in ports {
        assert!(p < 55535, "port {p} leaves no room for the bus port");
        assert!(
            (1024..32768 - 10000).contains(&p),
            "port {p} is outside the non-ephemeral range"
        );
    }
}

#[test]
fn wait_until_returns_the_value() {
    let mut calls = 0;
    let v = wait_until("three calls", Duration::from_secs(5), || {
        calls += 1;
        (calls == 3).then_some(calls * 10)
    });
    assert_eq!(v, 30);
}

#[test]
#[should_panic(expected = "waiting for: something that never happens")]
fn wait_until_panics_with_what_on_deadline() {
    wait_until(
        "something that never happens",
        Duration::from_millis(30),
        || None::<()>,
    );
}

#[test]
fn resp_parser_reads_every_type_at_every_split() {
    let wire: &[u8] = b"+OK\r\n-ERR bad\r\n:-42\r\n$3\r\na\r\n\r\n$-1\r\n*-1\r\n\
*2\r\n:1\r\n$0\r\n\r\n%1\r\n+k\r\n#t\r\n~2\r\n,1.5\r\n,-inf\r\n>2\r\n+message\r\n_\r\n\
#f\r\n=8\r\ntxt:hey!\r\n(12345678901234567890\r\n!5\r\nOOPS!\r\n|1\r\n+ttl\r\n:3\r\n:7\r\n";
    let expected = vec![
        Reply::Simple("OK".into()),
        Reply::Error("ERR bad".into()),
        Reply::Int(-42),
        Reply::Bulk(Some(b"a\r\n".to_vec())),
        Reply::Bulk(None),
        Reply::Array(None),
        Reply::Array(Some(vec![Reply::Int(1), Reply::Bulk(Some(vec![]))])),
        Reply::Map(vec![(Reply::Simple("k".into()), Reply::Bool(true))]),
        Reply::Set(vec![Reply::Double(1.5), Reply::Double(f64::NEG_INFINITY)]),
        Reply::Push(vec![Reply::Simple("message".into()), Reply::Null]),
        Reply::Bool(false),
        Reply::Verbatim("txt:hey!".into()),
        Reply::BigNumber("12345678901234567890".into()),
        Reply::Error("OOPS!".into()),
        Reply::Attribute(
            vec![(Reply::Simple("ttl".into()), Reply::Int(3))],
            Box::new(Reply::Int(7)),
        ),
    ];
    let mut got = Vec::new();
    let mut pos = 0;
    while pos < wire.len() {
        // Every proper prefix of the next reply is incomplete, never an error.
        let (reply, used) = parse_reply(&wire[pos..])
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("incomplete at {pos}"));
        for cut in 0..used {
            assert_eq!(
                parse_reply(&wire[pos..pos + cut]),
                Ok(None),
                "cut {cut} at {pos}"
            );
        }
        got.push(reply);
        pos += used;
    }
    assert_eq!(got, expected);
    assert_eq!(got[11].as_str(), "hey!");
    assert!(parse_reply(b"?what\r\n").is_err());
    assert!(parse_reply(b":12x\r\n").is_err());
    assert!(parse_reply(b"$3\r\nabcd\r\n").is_err());
    assert_eq!(
        encode_command(&[b"SET", b"k", b""]),
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".to_vec()
    );
}
