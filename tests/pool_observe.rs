//! Observability per pool and per server, against twemproxy itself: the
//! stats port's document beside a real nutcracker's for the same pool of
//! servers (same pool, server and field names; counts that move alike
//! under the same traffic, and a server ejected under auto-eject-hosts),
//! then Prometheus's `pool` label and INFO as a client of one pool sees
//! it, with two pools in one process.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// Pool lines for `set`'s servers, named `s0`, `s1`, ... as nutcracker's
/// `servers:` entries of [`nut_pool`] name them.
fn pool_lines(set: &StandaloneSet, name: &str, port: u16, extra: &[&str]) -> String {
    let mut conf = format!("pool {name} listen 127.0.0.1:{port}\npool {name} hash-tag {{}}\n");
    for i in 0..set.len() {
        conf.push_str(&format!(
            "pool {name} server 127.0.0.1:{}:1 s{i}\n",
            set.port(i)
        ));
    }
    for line in extra {
        conf.push_str(&format!("pool {name} {line}\n"));
    }
    conf
}

fn nut_pool(set: &StandaloneSet, extra: &[(&str, &str)]) -> NutPool {
    NutPool {
        hash: Some("fnv1a_64".into()),
        distribution: Some("ketama".into()),
        hash_tag: Some("{}".into()),
        servers: (0..set.len())
            .map(|i| format!("127.0.0.1:{}:1 s{i}", set.port(i)))
            .collect(),
        extra: extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// What a stats port writes to a new connection, parsed.
fn stats_json(port: u16) -> Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the stats port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw)
        .expect("the document, then the close");
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
}

fn parse(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
}

/// The document's shape: each key, and each object's keys, recursively
/// (`pool.s0.requests`), without the values.
fn shape(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Value::Object(m) = v {
        for (k, v) in m {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            shape(v, &path, out);
            out.insert(path);
        }
    }
}

/// A pool's or a server's field, as a number.
fn n(v: &Value, path: &[&str]) -> u64 {
    let mut at = v;
    for p in path {
        at = &at[*p];
    }
    at.as_u64()
        .unwrap_or_else(|| panic!("{} is not a number in {v}", path.join(".")))
}

/// `field` of every server of `pool`, by server name.
fn per_server(doc: &Value, pool: &str, field: &str) -> BTreeMap<String, u64> {
    doc[pool]
        .as_object()
        .unwrap_or_else(|| panic!("no pool {pool} in {doc}"))
        .iter()
        .filter(|(_, v)| v.is_object())
        .map(|(k, v)| (k.clone(), n(v, &[field])))
        .collect()
}

fn requests(doc: &Value, pool: &str) -> BTreeMap<String, u64> {
    per_server(doc, pool, "requests")
}

/// How much `field` of each server of `pool` grew from `start` to `now`.
fn delta(now: &Value, start: &Value, field: &str) -> BTreeMap<String, u64> {
    let before = per_server(start, "pool", field);
    per_server(now, "pool", field)
        .into_iter()
        .map(|(k, v)| {
            let b = before.get(&k).copied().unwrap_or(0);
            (k, v - b)
        })
        .collect()
}

fn total(r: &BTreeMap<String, u64>) -> u64 {
    r.values().sum()
}

#[test]
fn the_stats_port_matches_nutcrackers_for_the_same_servers() {
    let mut set = StandaloneSet::start(3);
    // A server leaves on its first failure and stays out for the test.
    let nut = Nutcracker::start(
        &nut_pool(
            &set,
            &[
                ("auto_eject_hosts", "true"),
                ("server_failure_limit", "1"),
                ("server_retry_timeout", "600000"),
            ],
        )
        .body(),
    );
    let (port, stats_port) = (free_port(), free_port());
    // nutcracker's pool is named `pool`: so is mithril's.
    let conf = format!(
        "port {port}\nthreads 2\nstats-port {stats_port}\n{}",
        pool_lines(
            &set,
            "pool",
            port,
            &[
                "auto-eject-hosts yes",
                "server-failure-limit 1",
                "server-retry-timeout 600000"
            ]
        )
    );
    let m = Mithril::start(bin(), &[], &conf);

    // Same keys, same pool, same servers, same fields.
    let ours = stats_json(stats_port);
    let theirs = parse(&nut.stats());
    let (mut a, mut b) = (BTreeSet::new(), BTreeSet::new());
    shape(&ours, "", &mut a);
    shape(&theirs, "", &mut b);
    assert_eq!(a, b, "mithril's document has nutcracker's shape");
    assert_eq!(ours["service"], "nutcracker");
    for s in ["s0", "s1", "s2"] {
        assert!(ours["pool"][s].is_object(), "{s} in {ours}");
    }

    // The same traffic through both: 100 SETs from one client each.
    let (start_ours, start_theirs) = (stats_json(stats_port), parse(&nut.stats()));
    let mut c = m.conn();
    let mut d = nut.conn();
    for i in 0..100 {
        let k = format!("key:{i}");
        assert_eq!(c.cmd(&["SET", &k, "v"]), ok());
        assert_eq!(d.cmd(&["SET", &k, "v"]), ok());
    }
    let grew = |doc: &Value, start: &Value, by: u64| {
        total(&requests(doc, "pool")) >= total(&requests(start, "pool")) + by
    };
    let ours = wait_until(
        "mithril to count 100 requests",
        Duration::from_secs(10),
        || {
            let d = stats_json(stats_port);
            grew(&d, &start_ours, 100).then_some(d)
        },
    );
    let theirs = wait_until(
        "nutcracker to count 100 requests",
        Duration::from_secs(10),
        || {
            let d = parse(&nut.stats());
            grew(&d, &start_theirs, 100).then_some(d)
        },
    );
    // The ring puts each key on the same server in both, and both forward
    // the client's bytes as they are: each server got the same requests,
    // of the same bytes, and answered them alike.
    for field in ["requests", "request_bytes", "responses", "response_bytes"] {
        assert_eq!(
            delta(&ours, &start_ours, field),
            delta(&theirs, &start_theirs, field),
            "{field} per server"
        );
    }
    assert_eq!(n(&ours, &["pool", "client_connections"]), 1);
    assert_eq!(n(&theirs, &["pool", "client_connections"]), 1);

    // An MGET over the three servers: one part per server, in both.
    let mut on: Vec<Vec<Vec<u8>>> = Vec::new();
    for i in 0..set.len() {
        on.push(set.servers[i].keys());
    }
    assert!(
        on.iter().all(|keys| !keys.is_empty()),
        "100 keys reach every server: {:?}",
        on.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let keys: Vec<String> = on
        .iter()
        .map(|k| String::from_utf8(k[0].clone()).unwrap())
        .collect();
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let (before_ours, before_theirs) = (ours, theirs);
    assert_eq!(c.cmd(&mget).as_array().len(), 3);
    assert_eq!(d.cmd(&mget).as_array().len(), 3);
    let ours = wait_until(
        "mithril to count the MGET's parts",
        Duration::from_secs(10),
        || {
            let d = stats_json(stats_port);
            grew(&d, &before_ours, 3).then_some(d)
        },
    );
    let theirs = wait_until(
        "nutcracker to count the MGET's parts",
        Duration::from_secs(10),
        || {
            let d = parse(&nut.stats());
            grew(&d, &before_theirs, 3).then_some(d)
        },
    );
    let one_each: BTreeMap<String, u64> = ["s0", "s1", "s2"]
        .iter()
        .map(|s| (s.to_string(), 1))
        .collect();
    assert_eq!(delta(&ours, &before_ours, "requests"), one_each);
    assert_eq!(delta(&theirs, &before_theirs, "requests"), one_each);
    // mithril counts the parts it sent (nutcracker 0.5.0 counts none).
    assert_eq!(
        n(&ours, &["pool", "fragments"]),
        n(&before_ours, &["pool", "fragments"]) + 3
    );

    // Both clients leave: their EOFs are counted, none is open.
    let eof_ours = n(&ours, &["pool", "client_eof"]);
    let eof_theirs = n(&theirs, &["pool", "client_eof"]);
    drop(c);
    drop(d);
    wait_until(
        "mithril to see its client leave",
        Duration::from_secs(10),
        || {
            let d = stats_json(stats_port);
            (n(&d, &["pool", "client_eof"]) == eof_ours + 1
                && n(&d, &["pool", "client_connections"]) == 0)
                .then_some(())
        },
    );
    wait_until(
        "nutcracker to see its client leave",
        Duration::from_secs(10),
        || {
            let d = parse(&nut.stats());
            (n(&d, &["pool", "client_eof"]) == eof_theirs + 1
                && n(&d, &["pool", "client_connections"]) == 0)
                .then_some(())
        },
    );

    // A server dies: both eject it (its connections see the EOF; mithril
    // also probes it), and say when.
    let victim = "s2";
    set.kill(2);
    let mut c = m.conn();
    let mut d = nut.conn();
    let key = keys[2].clone();
    let ejected = |doc: &Value| {
        n(doc, &["pool", "server_ejects"]) >= 1
            && n(doc, &["pool", victim, "server_ejected_at"]) > 0
    };
    let ours = wait_until(
        "mithril to eject the dead server",
        Duration::from_secs(15),
        || {
            let _ = c.cmd(&["GET", &key]);
            let doc = stats_json(stats_port);
            ejected(&doc).then_some(doc)
        },
    );
    let theirs = wait_until(
        "nutcracker to eject the dead server",
        Duration::from_secs(15),
        || {
            let _ = d.cmd(&["GET", &key]);
            let doc = parse(&nut.stats());
            ejected(&doc).then_some(doc)
        },
    );
    for doc in [&ours, &theirs] {
        assert_eq!(n(doc, &["pool", "server_ejects"]), 1, "{doc}");
        let at = n(doc, &["pool", victim, "server_ejected_at"]);
        // Unix microseconds, not seconds or milliseconds.
        assert!(at > 1_600_000_000_000_000, "{at}");
        for live in ["s0", "s1"] {
            assert_eq!(n(doc, &["pool", live, "server_ejected_at"]), 0);
        }
    }
    let ours = wait_until(
        "mithril's connections to the dead server to close",
        Duration::from_secs(10),
        || {
            let doc = stats_json(stats_port);
            (n(&doc, &["pool", victim, "server_connections"]) == 0).then_some(doc)
        },
    );
    assert!(
        n(&ours, &["pool", victim, "server_eof"]) + n(&ours, &["pool", victim, "server_err"]) >= 1,
        "{ours}"
    );
    // Its keys moved to the servers left, in both.
    for (who, conn) in [("mithril", &mut c), ("nutcracker", &mut d)] {
        wait_until(
            &format!("{who} to place the dead server's key elsewhere"),
            Duration::from_secs(10),
            || (conn.cmd(&["SET", &key, "again"]) == ok()).then_some(()),
        );
        assert_eq!(conn.cmd(&["GET", &key]), bulk("again"));
    }
}

/// `GET /metrics` on `port`: the body.
fn metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (_, body) = raw.split_once("\r\n\r\n").expect("a head");
    body.to_string()
}

/// The value of the sample `name` with exactly these labels.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

/// The sum of the samples of `family` whose labels include `label`.
fn sum_with(body: &str, family: &str, label: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(label))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

fn info_fields(c: &mut Conn, section: &str) -> BTreeMap<String, String> {
    c.cmd(&["INFO", section])
        .as_str()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim_end().to_string()))
        .collect()
}

/// Two ring pools in one process, `alpha` (3 servers, on mithril's port)
/// and `beta` (2), with the metrics and stats ports, and one client of
/// each (kept open) that wrote 20 and 5 keys; alpha's also read its 20
/// with one MGET.
struct TwoPools {
    _alpha: StandaloneSet,
    _beta: StandaloneSet,
    _m: Mithril,
    a: Conn,
    b: Conn,
    pa: u16,
    pb: u16,
    metrics_port: u16,
    stats_port: u16,
}

fn two_pools() -> TwoPools {
    let alpha = StandaloneSet::start(3);
    let beta = StandaloneSet::start(2);
    let (pa, pb, metrics_port, stats_port) = (free_port(), free_port(), free_port(), free_port());
    let conf = format!(
        "port {pa}\nmetrics-port {metrics_port}\nstats-port {stats_port}\n{}{}",
        pool_lines(&alpha, "alpha", pa, &[]),
        pool_lines(&beta, "beta", pb, &[])
    );
    let m = Mithril::start(bin(), &[], &conf);
    let mut a = m.conn();
    let mut b = Conn::connect(&format!("127.0.0.1:{pb}"));
    for i in 0..20 {
        assert_eq!(a.cmd(&["SET", &format!("a:{i}"), "v"]), ok());
    }
    for i in 0..5 {
        assert_eq!(b.cmd(&["SET", &format!("b:{i}"), "v"]), ok());
    }
    let keys: Vec<String> = (0..20).map(|i| format!("a:{i}")).collect();
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    assert_eq!(a.cmd(&mget).as_array().len(), 20);
    TwoPools {
        _alpha: alpha,
        _beta: beta,
        _m: m,
        a,
        b,
        pa,
        pb,
        metrics_port,
        stats_port,
    }
}

#[test]
fn prometheus_and_the_stats_port_label_every_pool_and_server() {
    let t = two_pools();
    // Prometheus: the backends and the pool counters carry their pool.
    let body = wait_until(
        "the metrics to show both pools' SETs",
        Duration::from_secs(10),
        || {
            let body = metrics(t.metrics_port);
            let ra = sum_with(&body, "mithril_backend_requests_total", "pool=\"alpha\"");
            let rb = sum_with(&body, "mithril_backend_requests_total", "pool=\"beta\"");
            (ra >= 21.0 && rb == 5.0).then_some(body)
        },
    );
    let servers = |pool: &str| {
        body.lines()
            .filter(|l| {
                l.starts_with("mithril_backend_requests_total{")
                    && l.contains(&format!("pool=\"{pool}\""))
            })
            .count()
    };
    assert_eq!((servers("alpha"), servers("beta")), (3, 2), "{body}");
    assert!(sample(&body, "mithril_fanout_parts_total{pool=\"alpha\"}").unwrap() >= 2.0);
    assert_eq!(
        sample(&body, "mithril_fanout_parts_total{pool=\"beta\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&body, "mithril_pool_clients{pool=\"alpha\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&body, "mithril_pool_clients{pool=\"beta\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&body, "mithril_pool_servers{pool=\"alpha\"}"),
        Some(3.0)
    );
    assert_eq!(
        sample(&body, "mithril_pool_servers_live{pool=\"beta\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(&body, "mithril_server_ejections_total{pool=\"beta\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&body, "mithril_cluster_masters{pool=\"alpha\"}"),
        Some(3.0)
    );
    // Each family once, announced before its samples.
    let mut families = BTreeSet::new();
    for l in body.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = l.split(' ').nth(2).unwrap();
        assert!(families.insert(name.to_string()), "{name} twice");
    }
    for l in body.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| families.contains(*f)))
            .unwrap_or(name);
        assert!(families.contains(family), "no TYPE for {name}");
    }

    // The stats port: one object per pool, by name.
    let doc = stats_json(t.stats_port);
    assert_eq!(n(&doc, &["alpha", "client_connections"]), 1);
    assert!(doc["alpha"]["s2"].is_object() && doc["beta"]["s1"].is_object());
    assert!(doc["beta"]["s2"].is_null(), "beta has two servers");
}

#[test]
fn info_shows_a_client_its_own_pool() {
    let mut t = two_pools();
    // INFO: a client of a ring pool sees one standalone server: its
    // pool's mode, port and keys, and every pool in `backends`.
    let server = info_fields(&mut t.b, "server");
    assert_eq!(server["redis_mode"], "standalone");
    assert_eq!(server["tcp_port"], t.pb.to_string());
    assert_eq!(info_fields(&mut t.b, "cluster")["cluster_enabled"], "0");
    assert!(info_fields(&mut t.b, "keyspace")["db0"].starts_with("keys=5,"));
    assert!(info_fields(&mut t.a, "keyspace")["db0"].starts_with("keys=20,"));
    let be = info_fields(&mut t.a, "backends");
    assert_eq!(
        be["pool0"],
        format!(
            "name=alpha,kind=ring,listen=127.0.0.1:{},servers=3,servers_live=3,server_ejects=0,clients=1",
            t.pa
        )
    );
    assert!(be["pool1"].starts_with("name=beta,kind=ring,"), "{be:?}");
    let on_beta = be
        .iter()
        .filter(|(k, v)| k.starts_with("backend") && v.ends_with(",pool=beta"))
        .count();
    assert_eq!(on_beta, 2, "{be:?}");
}
