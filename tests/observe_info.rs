//! INFO's sections against real traffic through a real 3-master cluster
//! (issue 8): command and latency statistics, the stats counters (redirects
//! after a live migration included), the keyspace summed from the masters,
//! the cluster and backends sections, and CONFIG RESETSTAT.

mod support;

use std::collections::HashMap;
use support::*;

/// `field:value` lines of an INFO text.
fn fields(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn info(c: &mut Conn, section: &str) -> HashMap<String, String> {
    fields(c.cmd(&["INFO", section]).as_str())
}

fn num(f: &HashMap<String, String>, k: &str) -> u64 {
    f.get(k)
        .unwrap_or_else(|| panic!("no {k} in {f:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{k} is not a number: {f:?}"))
}

/// `a=1,b=2` pairs of one INFO value.
fn pairs(v: &str) -> HashMap<String, String> {
    v.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn commandstats_latencystats_and_stats_follow_traffic() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 2\n");
    let mut c = m.conn();
    let mut other = m.conn();
    // 100 keys, then 1,000 GETs in pipelines of 100, from one client.
    let sets: Vec<Vec<Vec<u8>>> = (0..100)
        .map(|i| argv(&["SET", &format!("k:{i}"), "v"]))
        .collect();
    assert!(c.pipeline(&sets).iter().all(|r| r.as_str() == "OK"));
    for round in 0..10 {
        let gets: Vec<Vec<Vec<u8>>> = (0..100)
            .map(|i| argv(&["GET", &format!("k:{}", (i + round) % 100)]))
            .collect();
        assert!(c.pipeline(&gets).iter().all(|r| r.as_str() == "v"));
    }
    // One failed GET (wrong type), one rejected (arity), one unknown.
    c.cmd(&["RPUSH", "list", "x"]);
    assert!(c.cmd(&["GET", "list"]).as_error().starts_with("WRONGTYPE"));
    assert!(c
        .cmd(&["GET"])
        .as_error()
        .contains("wrong number of arguments"));
    assert!(c.cmd(&["NOSUCHCMD"]).is_error());

    // Asked from another connection (possibly on the other worker): INFO
    // has every worker publish first, so the figures are exact.
    let cs = info(&mut other, "commandstats");
    let get = pairs(&cs["cmdstat_get"]);
    assert_eq!(get["calls"], "1001", "{get:?}");
    assert_eq!(get["failed_calls"], "1");
    assert_eq!(get["rejected_calls"], "1");
    let usec: u64 = get["usec"].parse().unwrap();
    let per_call: f64 = get["usec_per_call"].parse().unwrap();
    assert!((per_call - usec as f64 / 1001.0).abs() < 0.01, "{get:?}");
    assert_eq!(pairs(&cs["cmdstat_set"])["calls"], "100");
    assert_eq!(pairs(&cs["cmdstat_rpush"])["calls"], "1");
    assert!(!cs.keys().any(|k| k.contains("nosuchcmd")));
    // Redis's exact layout for one line.
    let text = other.cmd(&["INFO", "commandstats"]).as_str().to_string();
    let line = text
        .lines()
        .find(|l| l.starts_with("cmdstat_set:"))
        .unwrap();
    let shape = regex_like(line);
    assert_eq!(
        shape,
        "cmdstat_set:calls=N,usec=N,usec_per_call=N.N,rejected_calls=N,failed_calls=N"
    );

    let ls = info(&mut other, "latencystats");
    let lat = pairs(&ls["latency_percentiles_usec_get"]);
    let p = |k: &str| lat[k].parse::<f64>().unwrap();
    assert!(p("p50") <= p("p99") && p("p99") <= p("p99.9"), "{lat:?}");
    assert!(lat["p50"].ends_with(".000"), "{lat:?}");
    assert!(p("p99.9") < 5_000_000.0, "{lat:?}");

    let st = info(&mut other, "stats");
    assert!(num(&st, "total_commands_processed") >= 1104);
    assert!(num(&st, "total_net_input_bytes") > 1000 * 20);
    assert!(num(&st, "total_net_output_bytes") > 1000 * 7);
    assert!(num(&st, "total_connections_received") >= 2);
    assert_eq!(num(&st, "total_rejected_commands"), 2, "{st:?}");
    assert!(num(&st, "total_error_replies") >= 3);
    assert_eq!(num(&st, "redirects_moved"), 0);
    assert_eq!(num(&st, "backend_errors"), 0);

    let cl = info(&mut other, "clients");
    assert_eq!(num(&cl, "connected_clients"), 2);
    assert_eq!(num(&cl, "blocked_clients"), 0);
    assert!(num(&cl, "backend_connections") >= 3, "{cl:?}");

    let mem = info(&mut other, "memory");
    assert!(num(&mem, "used_memory_rss") > 1_000_000, "{mem:?}");
    assert_eq!(num(&mem, "maxmemory"), 0);

    let clu = info(&mut other, "cluster");
    assert_eq!(num(&clu, "cluster_enabled"), 1);
    assert_eq!(num(&clu, "cluster_masters"), 3);
    assert_eq!(num(&clu, "cluster_replicas"), 0);
    assert_eq!(num(&clu, "cluster_slots_served"), 16384);
    assert!(num(&clu, "topology_epoch") >= 1);
    assert!(num(&clu, "topology_refreshes") >= 1);

    let be = info(&mut other, "backends");
    let lines: Vec<HashMap<String, String>> = (0..3)
        .map(|i| pairs(be.get(&format!("backend{i}")).expect("three backends")))
        .collect();
    let mut ports: Vec<u16> = cluster.masters().iter().map(|n| n.port).collect();
    ports.sort_unstable();
    let mut seen: Vec<u16> = lines
        .iter()
        .map(|l| l["addr"].rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, ports);
    let mut requests = 0;
    for l in &lines {
        assert_eq!(l["role"], "master");
        assert_eq!(l["errors"], "0");
        assert_eq!(l["in_flight"], "0");
        assert_eq!(l["requests"], l["responses"], "{l:?}");
        assert!(l["avg_latency_usec"].parse::<f64>().unwrap() > 0.0, "{l:?}");
        requests += l["requests"].parse::<u64>().unwrap();
    }
    // Every routed request reached a node (plus INFO KEYSPACE parts).
    assert!(requests >= 1102, "{requests}");

    // The default INFO and its sections, in Redis's order.
    let all = other.cmd(&["INFO", "everything"]).as_str().to_string();
    let titles: Vec<&str> = all.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        titles,
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Commandstats",
            "# Errorstats",
            "# Latencystats",
            "# Cluster",
            "# Keyspace",
            "# Backends",
            "# Pipes",
            "# Replycache"
        ]
    );

    // CONFIG RESETSTAT clears the counters on every worker.
    assert_eq!(other.cmd(&["CONFIG", "RESETSTAT"]).as_str(), "OK");
    let cs = info(&mut c, "commandstats");
    assert!(!cs.contains_key("cmdstat_get"), "{cs:?}");
    assert!(!cs.contains_key("cmdstat_set"), "{cs:?}");
    let st = info(&mut c, "stats");
    assert_eq!(num(&st, "total_rejected_commands"), 0);
    assert_eq!(num(&st, "total_connections_received"), 0);
    // Only the INFO commands since the reset (a handful, not 1,100).
    assert!(num(&st, "total_commands_processed") < 10, "{st:?}");
    assert!(num(&st, "total_net_input_bytes") < 1000, "{st:?}");
}

/// `cmdstat_set:calls=100,usec=12,usec_per_call=0.12,...` with every run
/// of digits as `N`.
fn regex_like(line: &str) -> String {
    let mut out = String::new();
    let mut in_num = false;
    for ch in line.chars() {
        if ch.is_ascii_digit() {
            if !in_num {
                out.push('N');
            }
            in_num = true;
        } else {
            in_num = false;
            out.push(ch);
        }
    }
    out
}

#[test]
fn keyspace_is_summed_from_the_masters() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["INFO", "keyspace"]).as_str(), "# Keyspace\r\n");
    let mut cmds = Vec::new();
    for i in 0..300 {
        if i % 3 == 0 {
            cmds.push(argv(&["SET", &format!("ks:{i}"), "v", "EX", "1000"]));
        } else {
            cmds.push(argv(&["SET", &format!("ks:{i}"), "v"]));
        }
    }
    assert!(c.pipeline(&cmds).iter().all(|r| r.as_str() == "OK"));
    let ks = fields(c.cmd(&["INFO", "keyspace"]).as_str());
    let db0 = pairs(&ks["db0"]);
    assert_eq!(db0["keys"], "300", "{db0:?}");
    assert_eq!(db0["expires"], "100", "{db0:?}");
    // avg_ttl is each node's estimate, made by its expire cycle: once
    // every master has one, mithril's is their weighted mean.
    wait_until(
        "every master to estimate avg_ttl",
        std::time::Duration::from_secs(10),
        || {
            cluster
                .masters()
                .iter()
                .all(|n| {
                    let f = fields(n.conn().cmd(&["INFO", "keyspace"]).as_str());
                    pairs(&f["db0"])["avg_ttl"] != "0"
                })
                .then_some(())
        },
    );
    let db0 = pairs(&fields(c.cmd(&["INFO", "keyspace"]).as_str())["db0"]);
    let ttl: u64 = db0["avg_ttl"].parse().unwrap();
    assert!(ttl > 900_000 && ttl <= 1_000_000, "{db0:?}");
    // The same sums the masters give one by one.
    let mut keys = 0;
    for n in cluster.masters() {
        let f = fields(n.conn().cmd(&["INFO", "keyspace"]).as_str());
        keys += pairs(&f["db0"])["keys"].parse::<u64>().unwrap();
    }
    assert_eq!(keys, 300);
    // A bare INFO carries it too, last of the default sections.
    let text = c.cmd(&["INFO"]).as_str().to_string();
    assert!(
        text.contains("\r\n\r\n# Keyspace\r\ndb0:keys=300,expires=100,avg_ttl="),
        "{text}"
    );
    // RESP3 too.
    c.cmd(&["HELLO", "3"]);
    match c.cmd(&["INFO", "keyspace"]) {
        Reply::Verbatim(v) => assert!(v.contains("db0:keys=300,"), "{v}"),
        other => panic!("INFO in RESP3: {other:?}"),
    }
}

#[test]
fn redirects_are_counted_through_a_migration() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    // A long refresh period: only redirects tell mithril about the moves.
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 1\ntopology-refresh-secs 3600\n",
    );
    let mut c = m.conn();
    let st = info(&mut c, "stats");
    assert_eq!(num(&st, "redirects_moved"), 0);
    assert_eq!(num(&st, "redirects_ask"), 0);

    // MOVED: the slot of k1 moves to another master behind mithril's back.
    let k1 = "{moved}k";
    assert_eq!(c.cmd(&["SET", k1, "one"]).as_str(), "OK");
    let slot = key_slot(k1.as_bytes());
    let from = cluster.port_for_slot(slot);
    let to = (0..cluster.nodes.len())
        .find(|&i| cluster.nodes[i].master_of.is_none() && cluster.nodes[i].port != from)
        .unwrap();
    assert_eq!(cluster.migrate_slot(slot, to, 10), 1);
    assert_eq!(c.cmd(&["GET", k1]).as_str(), "one");
    let st = info(&mut c, "stats");
    assert!(num(&st, "redirects_moved") >= 1, "{st:?}");

    // ASK: a slot half migrated, its key already on the target.
    let k2 = "{ask}k";
    assert_eq!(c.cmd(&["SET", k2, "two"]).as_str(), "OK");
    let slot = key_slot(k2.as_bytes());
    let src = cluster.node_for_slot(slot);
    let dst = cluster.other_master(slot);
    let s = slot.to_string();
    let ok = |r: Reply| assert_eq!(r.as_str(), "OK");
    ok(dst
        .conn()
        .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &src.id]));
    ok(src
        .conn()
        .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst.id]));
    let port = dst.port.to_string();
    ok(src
        .conn()
        .cmd(&["MIGRATE", "127.0.0.1", &port, k2, "0", "5000"]));
    let before = num(&info(&mut c, "stats"), "redirects_ask");
    assert_eq!(c.cmd(&["GET", k2]).as_str(), "two");
    let after = num(&info(&mut c, "stats"), "redirects_ask");
    assert_eq!(after, before + 1);
    for n in [dst, src] {
        ok(n.conn().cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &dst.id]));
    }
    assert!(num(&info(&mut c, "stats"), "redirects_moved") >= 1);
}
