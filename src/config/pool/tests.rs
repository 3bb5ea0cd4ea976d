//! The `pool` directive: settings, defaults, refusals, the pools served.

use super::*;
use crate::config::parse_str;

fn read(text: &str) -> Config {
    parse_str(text, "test.conf").unwrap_or_else(|e| panic!("{e}"))
}

fn refused(text: &str) -> String {
    let e = match parse_str(text, "test.conf") {
        Ok(cfg) => match crate::config::validate(&cfg) {
            Ok(()) => panic!("accepted: {text}"),
            Err(e) => e,
        },
        Err(e) => e,
    };
    e.to_string()
}

#[test]
fn a_ring_pool_takes_twemproxys_settings_and_defaults() {
    let cfg = read(
        "pool alpha listen 127.0.0.1:22121\n\
         pool alpha server 127.0.0.1:6379:1 one\n\
         pool alpha server 127.0.0.1:6380:3\n\
         pool alpha hash murmur\n\
         pool alpha hash-tag {}\n\
         pool alpha distribution modula\n\
         pool alpha auto-eject-hosts yes\n\
         pool alpha server-retry-timeout 2000\n\
         pool alpha server-failure-limit 1\n\
         pool alpha password s3cret\n\
         pool alpha db 3\n",
    );
    crate::config::validate(&cfg).unwrap();
    let [p] = cfg.pools.as_slice() else {
        panic!("{:?}", cfg.pools)
    };
    assert_eq!(p.listen, ["127.0.0.1:22121"]);
    assert_eq!(p.password, "s3cret");
    assert_eq!(p.db, 3);
    let PoolKind::Ring {
        servers,
        hash,
        hash_tag,
        distribution,
        auto_eject_hosts,
        server_retry_timeout_ms,
        server_failure_limit,
    } = &p.kind
    else {
        panic!("not a ring")
    };
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0].ring_name(), "one");
    assert_eq!(servers[1].ring_name(), "127.0.0.1:6380");
    assert_eq!(servers[1].weight, 3);
    assert_eq!(*hash, HashFn::Murmur);
    assert_eq!(*hash_tag, Some(*b"{}"));
    assert_eq!(*distribution, Distribution::Modula);
    assert!(*auto_eject_hosts);
    assert_eq!(*server_retry_timeout_ms, 2000);
    assert_eq!(*server_failure_limit, 1);
    // Without a top-level cluster, only the declared pool is served.
    assert_eq!(cfg.server_pools().len(), 1);
}

#[test]
fn the_top_level_cluster_is_the_default_pool_beside_declared_ones() {
    let cfg = read(
        "cluster-nodes 127.0.0.1:7000\nport 7777\nbind 127.0.0.1\n\
         pool beta listen 127.0.0.1:22122\npool beta cluster-nodes 127.0.0.1:8000\n",
    );
    crate::config::validate(&cfg).unwrap();
    let pools = cfg.server_pools();
    assert_eq!(pools.len(), 2);
    assert_eq!(pools[0].name, DEFAULT_POOL);
    assert_eq!(pools[0].listen, ["127.0.0.1:7777"]);
    assert!(pools[1].is_cluster());
    assert_eq!(pools[1].units(), CLUSTER_UNITS);
}

#[test]
fn pools_written_back_parse_to_the_same_pools() {
    let cfg = read(
        "pool a listen 127.0.0.1:1\npool a server 10.0.0.1:6379:2 x\n\
         pool a hash crc32a\npool a hash-tag \"[]\"\npool a timeout 400\n\
         pool b listen 127.0.0.1:2\npool b cluster-nodes 10.0.0.9:7000\n",
    );
    let text = crate::config::render(&cfg);
    let again = read(&text);
    assert_eq!(again.pools, cfg.pools, "{text}");
}

#[test]
fn bad_pools_are_refused_with_a_reason() {
    let cases = [
        ("pool a listen 127.0.0.1:1\n", "no server"),
        ("pool a server 127.0.0.1:6379\n", "no listen address"),
        ("pool a listen 127.0.0.1:1\npool a server nonsense\n", "not HOST:PORT"),
        ("pool a listen 127.0.0.1:1\npool a server 127.0.0.1:1\npool a hash sha1\n", "hash must be one of"),
        ("pool a listen 127.0.0.1:1\npool a server 127.0.0.1:1\npool a distribution x\n", "distribution must be"),
        ("pool a listen 127.0.0.1:1\npool a server 127.0.0.1:1\npool a hash-tag {\n", "two characters"),
        ("pool a listen 127.0.0.1:1\npool a flavour x\n", "unknown setting"),
        ("pool a listen 127.0.0.1:1\npool a cluster-nodes 127.0.0.1:7000\npool a hash md5\n", "cluster pool"),
        ("pool a listen 127.0.0.1:1\npool a server 127.0.0.1:6379\npool a cluster-nodes 127.0.0.1:7000\n", "not two of them"),
        (
            "pool a listen 127.0.0.1:1\npool a server 127.0.0.1:6379 same\npool a server 127.0.0.1:6380 same\n",
            "two servers are named 'same'",
        ),
        (
            "pool a listen 127.0.0.1:1\npool a server 127.0.0.1:6379\n\
             pool b listen 127.0.0.1:1\npool b server 127.0.0.1:6380\n",
            "both listen on 127.0.0.1:1",
        ),
        ("", "no cluster-nodes given"),
        (
            "pool a tls-listen 127.0.0.1:2\npool a server 127.0.0.1:6379\n",
            "tls-listen needs tls-cert-file",
        ),
        (
            "pool a listen 127.0.0.1:1\npool a server 127.0.0.1:6379\n\
             pool b tls-listen 127.0.0.1:1\npool b server 127.0.0.1:6380\n\
             tls-cert-file c.pem\ntls-key-file k.pem\n",
            "both listen on 127.0.0.1:1",
        ),
    ];
    for (text, want) in cases {
        let e = refused(text);
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn too_many_units_for_one_process_are_refused() {
    let mut text = String::new();
    for i in 0..4 {
        text.push_str(&format!(
            "pool c{i} listen 127.0.0.1:{}\npool c{i} cluster-nodes 127.0.0.1:7000\n",
            1000 + i
        ));
    }
    assert!(
        refused(&text).contains("at most 65535"),
        "{}",
        refused(&text)
    );
}

#[test]
fn protected_mode_covers_pool_listeners_without_a_password() {
    let open = "pool a listen 0.0.0.0:6000\npool a server 127.0.0.1:6379\n";
    assert!(
        refused(open).contains("protected mode"),
        "{}",
        refused(open)
    );
    for ok in [
        format!("{open}pool a password pw\n"),
        format!("{open}protected-mode no\n"),
        "pool a listen 127.0.0.1:6000\npool a server 127.0.0.1:6379\n".to_string(),
        "pool a listen localhost:6000\npool a server 127.0.0.1:6379\n".to_string(),
    ] {
        crate::config::validate(&read(&ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

#[test]
fn a_group_pool_takes_predixys_settings_and_prints_back_the_same() {
    let text = "pool g listen 127.0.0.1:22121\n\
                pool g hash atol\n\
                pool g hash-tag {}\n\
                pool g distribution random\n\
                pool g group one 127.0.0.1:6379 127.0.0.1:6380\n\
                pool g group two\n\
                pool g sentinel 127.0.0.1:26379 127.0.0.1:26380\n\
                pool g sentinel-password sp\n\
                pool g master-read-priority 60\n\
                pool g replica-read-priority 50\n\
                pool g sentinel-replica-read-priority 70\n\
                pool g refresh-interval 250\n\
                pool g databases 16\n";
    let cfg = read(text);
    crate::config::validate(&cfg).unwrap();
    let PoolKind::Groups(g) = &cfg.pools[0].kind else {
        panic!("not a group pool: {:?}", cfg.pools[0].kind)
    };
    assert_eq!(g.hash, crate::hashkit::GroupHash::Atol);
    assert_eq!(g.hash_tag, Some(*b"{}"));
    assert!(g.random);
    assert_eq!(g.groups.len(), 2);
    assert_eq!(g.groups[0].servers, ["127.0.0.1:6379", "127.0.0.1:6380"]);
    assert!(g.groups[1].servers.is_empty());
    assert_eq!(g.sentinels.len(), 2);
    assert_eq!(
        (
            g.master_read_priority,
            g.replica_read_priority,
            g.sentinel_replica_read_priority
        ),
        (60, 50, 70)
    );
    assert_eq!(g.refresh_interval_ms, 250);
    assert_eq!(cfg.pools[0].databases(), 16);
    // Written back, the lines read as the same pool.
    let again = read(&pool_lines(&cfg).join("\n"));
    assert_eq!(again.pools, cfg.pools);
    // predixy's default: one database.
    let one = read("pool h listen 127.0.0.1:1\npool h group a 127.0.0.1:6379\n");
    assert_eq!(one.pools[0].databases(), 1);
}

#[test]
fn bad_group_pools_are_refused_with_a_reason() {
    let cases = [
        ("pool a listen 127.0.0.1:1\npool a group g\n", "has no address"),
        ("pool a listen 127.0.0.1:1\npool a hash atol\n", "no group"),
        ("pool a listen 127.0.0.1:1\npool a server 127.0.0.1:1\npool a group g 127.0.0.1:2\n", "not both"),
        ("pool a listen 127.0.0.1:1\npool a group g 127.0.0.1:2\npool a server 127.0.0.1:1\n", "pool of master-replica groups"),
        ("pool a listen 127.0.0.1:1\npool a group g 127.0.0.1:2\npool a distribution ketama\n", "modula or random"),
        ("pool a listen 127.0.0.1:1\npool a group g 127.0.0.1:2\npool a hash murmur\n", "crc16 or atol"),
        ("pool a listen 127.0.0.1:1\npool a hash murmur\npool a group g 127.0.0.1:2\n", "crc16 or atol"),
        ("pool a listen 127.0.0.1:1\npool a group g 127.0.0.1:2\npool a group g 127.0.0.1:3\n", "named twice"),
        ("pool a listen 127.0.0.1:1\npool a group g nonsense\n", "not HOST:PORT"),
        ("pool a listen 127.0.0.1:1\npool a group g 127.0.0.1:2\npool a master-read-priority 101\n", "between 0 and 100"),
        ("pool a listen 127.0.0.1:1\npool a cluster-nodes 127.0.0.1:2\npool a group g 127.0.0.1:2\n", "cluster pool"),
    ];
    for (text, want) in cases {
        let e = refused(text);
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn a_pool_may_listen_for_tls_only_and_prints_it_back() {
    let c = read(
        "pool a tls-listen 127.0.0.1:2\npool a server 127.0.0.1:6379\n\
         tls-cert-file c.pem\ntls-key-file k.pem\n",
    );
    let p = &c.server_pools()[0];
    assert!(p.listen.is_empty());
    assert_eq!(p.tls_listen, ["127.0.0.1:2"]);
    let again = read(&crate::config::render(&c));
    assert_eq!(again.server_pools()[0].tls_listen, ["127.0.0.1:2"]);
}
