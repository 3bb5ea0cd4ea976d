//! The compat readers on example files written in each project's style
//! (tests/compat/), and format detection.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::pool::{PoolKind, PoolSpec, ServerSpec};
use crate::config::{parse_str, render, validate, LogLevel};
use crate::hashkit::{Distribution, HashFn};

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/compat")
        .join(rel)
}

fn read_ok(rel: &str) -> Read {
    let r = read_file(&example(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    validate(&r.config).unwrap_or_else(|e| panic!("{rel}: {e}"));
    r
}

fn read_err(rel: &str) -> ConfigError {
    match read_file(&example(rel)) {
        Ok(r) => panic!("{rel} loaded: {:?}", r.config),
        Err(e) => e,
    }
}

fn has_warning(r: &Read, needle: &str) -> bool {
    r.warnings.iter().any(|w| w.contains(needle))
}

#[test]
fn detection_is_by_content() {
    assert_eq!(
        detect(b"# x\nalpha:\n  listen: 1.2.3.4:1\n"),
        Format::Nutcracker
    );
    assert_eq!(detect(b"---\npool:\n"), Format::Nutcracker);
    assert_eq!(detect(b"--- # pools\npool:\n"), Format::Nutcracker);
    assert_eq!(detect(b"%YAML 1.1\n---\n"), Format::Nutcracker);
    assert_eq!(
        detect(b"{alpha: {listen: 127.0.0.1:1}}\n"),
        Format::Nutcracker
    );
    assert_eq!(detect(b"\xef\xbb\xbfalpha:\n"), Format::Nutcracker);
    assert_eq!(detect(b"my pool:\n  listen: a:1\n"), Format::Nutcracker);
    assert_eq!(detect(b"requirepass pw:\n"), Format::Native);
    assert_eq!(detect(b"Bind 127.0.0.1:7617\n"), Format::Predixy);
    assert_eq!(
        detect(b"Include cluster.conf\nWorkerThreads 2\n"),
        Format::Predixy
    );
    assert_eq!(detect(b"ClusterServerPool {\n}\n"), Format::Predixy);
    assert_eq!(detect(b"bind [::1]:7617\n"), Format::Predixy);
    assert_eq!(detect(b"bind 127.0.0.1 -::1\nport 7000\n"), Format::Native);
    assert_eq!(detect(b"bind ::ffff:1.2.3.4\n"), Format::Native);
    assert_eq!(detect(b"cluster-nodes 127.0.0.1:7000\n"), Format::Native);
    assert_eq!(
        detect(b"pool a server 127.0.0.1:6379:1 x\n"),
        Format::Native
    );
    assert_eq!(detect(b"include other.conf\n"), Format::Native);
    assert_eq!(detect(b""), Format::Native);
    // The extension does not matter.
    let dir = std::env::temp_dir().join(format!("mithril-compat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let odd = dir.join("proxy.conf");
    std::fs::write(
        &odd,
        "p:\n  listen: 127.0.0.1:9999\n  redis: true\n  servers:\n   - 10.0.0.1:7000:1\n",
    )
    .unwrap();
    let r = read_file(&odd).unwrap();
    assert_eq!(r.format, Format::Nutcracker);
    assert_eq!(r.config.pools[0].listen, ["127.0.0.1:9999"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The ring pool a `servers:` list and settings make, for comparing.
fn ring(
    name: &str,
    listen: &str,
    servers: &[(&str, u16, u32, Option<&str>)],
    edit: impl FnOnce(&mut PoolSpec),
) -> PoolSpec {
    let mut p = PoolSpec::ring(name);
    p.listen = vec![listen.to_string()];
    if let PoolKind::Ring { servers: s, .. } = &mut p.kind {
        *s = servers
            .iter()
            .map(|&(host, port, weight, alias)| ServerSpec {
                host: host.to_string(),
                port,
                weight,
                alias: alias.map(str::to_string),
            })
            .collect();
    }
    edit(&mut p);
    p
}

/// A ring pool's own settings: hash, hash tag, distribution, ejection,
/// retry timeout, failure limit.
type RingSettings<'a> = (
    &'a mut HashFn,
    &'a mut Option<[u8; 2]>,
    &'a mut Distribution,
    &'a mut bool,
    &'a mut u64,
    &'a mut u32,
);

fn ring_settings(p: &mut PoolSpec) -> RingSettings<'_> {
    let PoolKind::Ring {
        hash,
        hash_tag,
        distribution,
        auto_eject_hosts,
        server_retry_timeout_ms,
        server_failure_limit,
        ..
    } = &mut p.kind
    else {
        panic!("not a ring pool")
    };
    (
        hash,
        hash_tag,
        distribution,
        auto_eject_hosts,
        server_retry_timeout_ms,
        server_failure_limit,
    )
}

#[test]
fn a_nutcracker_pool_becomes_a_ring_pool() {
    let r = read_ok("nutcracker.yml");
    let c = &r.config;
    assert_eq!(r.format, Format::Nutcracker);
    let want = ring(
        "sessions",
        "127.0.0.1:22121",
        &[
            ("127.0.0.1", 7000, 1, Some("node-a")),
            ("127.0.0.1", 7001, 1, Some("node-b")),
            ("127.0.0.1", 7002, 1, Some("node-c")),
        ],
        |p| {
            p.timeout_ms = 400;
            p.backlog = 1024;
            p.preconnect = true;
            p.password = "s3cr3t".into();
            p.server_connections = 2;
            let (_, tag, _, eject, retry, limit) = ring_settings(p);
            *tag = Some(*b"{}");
            *eject = true;
            *retry = 2000;
            *limit = 3;
        },
    );
    assert_eq!(c.pools, [want]);
    // No top-level setting: no cluster, the globals at their defaults.
    let mut globals = c.clone();
    globals.pools.clear();
    globals.config_file = None;
    assert_eq!(globals, crate::config::Config::default());
    assert_eq!(
        c.config_file.as_deref(),
        Some(example("nutcracker.yml").as_path())
    );
    // hash, distribution, auto_eject_hosts... mean what they meant: no
    // warning. client_connections draws one, naming file and line.
    let file = example("nutcracker.yml").display().to_string();
    assert_eq!(r.warnings.len(), 1, "one warning only: {:#?}", r.warnings);
    assert!(
        r.warnings[0].starts_with(&format!(
            "{file}:15: 'client_connections: 2048': nutcracker 0.5.0 reads"
        )),
        "{:#?}",
        r.warnings
    );
    assert!(!r.warnings.iter().any(|w| w.contains("s3cr3t")));
}

#[test]
fn twemproxys_own_example_keeps_its_redis_pools() {
    let r = read_ok("twemproxy_nutcracker.yml");
    let file = example("twemproxy_nutcracker.yml").display().to_string();
    let alpha = ring(
        "alpha",
        "127.0.0.1:22121",
        &[("127.0.0.1", 6379, 1, None)],
        |p| {
            let (_, _, _, eject, retry, limit) = ring_settings(p);
            *eject = true;
            *retry = 2000;
            *limit = 1;
        },
    );
    let beta = ring(
        "beta",
        "127.0.0.1:22122",
        &[
            ("127.0.0.1", 6380, 1, Some("server1")),
            ("127.0.0.1", 6381, 1, Some("server2")),
            ("127.0.0.1", 6382, 1, Some("server3")),
            ("127.0.0.1", 6383, 1, Some("server4")),
        ],
        |p| {
            p.timeout_ms = 400;
            *ring_settings(p).1 = Some(*b"{}");
        },
    );
    assert_eq!(r.config.pools, [alpha, beta]);
    // gamma, delta and omega have no `redis: true`: memcached pools.
    let skipped: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| w.contains("is a memcached pool"))
        .collect();
    assert_eq!(skipped.len(), 3, "{:#?}", r.warnings);
    for (w, (line, pool)) in skipped
        .iter()
        .zip([(29, "gamma"), (43, "delta"), (63, "omega")])
    {
        assert!(
            w.starts_with(&format!("{file}:{line}: pool '{pool}' is a memcached pool")),
            "{w}"
        );
        assert!(w.ends_with("mithril speaks Redis; skipped"), "{w}");
    }
    assert_eq!(r.warnings.len(), 3, "{:#?}", r.warnings);
}

#[test]
fn nutcracker_refusals_say_why() {
    // A file with nothing mithril can serve is refused, and says why.
    let e = read_err("nutcracker_memcached.yml");
    assert_eq!(e.line(), None);
    assert!(
        e.message().contains("no pool mithril can serve")
            && e.message()
                .contains(":8: pool 'alpha' is a memcached pool (redis: false)"),
        "{e}"
    );

    let e = read_err("nutcracker_hash_tag.yml");
    assert_eq!(e.line(), Some(4));
    assert!(e.message().contains("exactly two characters"), "{e}");
    assert!(
        e.to_string()
            .contains("nutcracker_hash_tag.yml:4: 'hash_tag: {user}'"),
        "{e}"
    );

    // Two pools, once refused, are two pools.
    let r = read_ok("nutcracker_two_pools.yml");
    let names: Vec<&str> = r.config.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["beta", "gamma"]);
    assert!(r.warnings.is_empty(), "{:#?}", r.warnings);
}

/// Writes `text` to a file of its own (tests run side by side) and reads
/// it.
fn read_text(name: &str, text: &str) -> Result<Read, ConfigError> {
    static FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mithril-nc-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    let r = read_file(&p);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

const BASE: &str = "p:\n  listen: 0.0.0.0:6000\n  redis: true\n  servers:\n   - 10.0.0.1:7000:1\n";

#[test]
fn nutcracker_settings_map_one_by_one() {
    let r = read_text(
        "a.yml",
        &format!(
            "{BASE}  hash: murmur\n  distribution: modula\n  hash_tag: \":$\"\n  timeout: 5\n  \
             backlog: 64\n  preconnect: false\n  redis_db: 3\n  redis_auth: \"p w\"\n  \
             server_connections: 4\n  auto_eject_hosts: true\n  server_retry_timeout: 0\n  \
             server_failure_limit: 0\n  tcpkeepalive: true\n  client_connections: 0\n  \
             reuseport: true\n"
        ),
    )
    .unwrap();
    let want = ring("p", "0.0.0.0:6000", &[("10.0.0.1", 7000, 1, None)], |p| {
        p.timeout_ms = 5;
        p.backlog = 64;
        p.db = 3;
        p.password = "p w".into();
        p.server_connections = 4;
        p.tcp_keepalive = true;
        let (hash, tag, dist, eject, retry, limit) = ring_settings(p);
        *hash = HashFn::Murmur;
        *dist = Distribution::Modula;
        *tag = Some(*b":$");
        *eject = true;
        *retry = 1;
        *limit = 1;
    });
    assert_eq!(r.config.pools, [want]);
    for (line, needle) in [
        (
            16,
            "'server_retry_timeout: 0': an ejected server is retried after 1 ms",
        ),
        (17, "'server_failure_limit: 0': written as 1"),
        (19, "'client_connections: 0': nutcracker 0.5.0 reads"),
        (20, "'reuseport: true': ignored"),
    ] {
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains(&format!(".yml:{line}: {needle}"))),
            "no {line}: {needle} in {:#?}",
            r.warnings
        );
    }
    assert_eq!(r.warnings.len(), 4, "{:#?}", r.warnings);

    // Over 64 server connections: 64, said.
    let r = read_text("b.yml", &format!("{BASE}  server_connections: 100\n")).unwrap();
    assert_eq!(r.config.pools[0].server_connections, 64);
    assert!(has_warning(&r, "using 64"));
    // Flow style, quoting, anchors and aliases read as libyaml reads them.
    let r = read_text(
        "c.yml",
        "defaults: &d {listen: '127.0.0.1:1', redis: \"true\", servers: [a:1:1, \"b:2:3 two\"]}\n\
         other: {listen: 127.0.0.1:2, redis: true, servers: *s}\n\
         third:\n  listen: 127.0.0.1:3\n  redis: true\n  servers: &s\n   - c:3:1\n",
    );
    // `*s` names an anchor set after it: refused with its line.
    let e = r.unwrap_err();
    assert_eq!(e.line(), Some(2), "{e}");
    let r = read_text(
        "d.yml",
        "# pools\n---\nfirst:\n  listen: 127.0.0.1:3\n  redis: true\n  servers: &s\n   - c:3:1\n\
         second: {listen: 127.0.0.1:1, redis: \"true\", servers: [a:1:1, \"b:2:3 two\"]}\n\
         third: {listen: 127.0.0.1:2, redis: true, servers: *s}\n",
    )
    .unwrap();
    let servers = |p: &PoolSpec| match &p.kind {
        PoolKind::Ring { servers, .. } => servers
            .iter()
            .map(|s| (s.addr(), s.weight, s.alias.clone()))
            .collect::<Vec<_>>(),
        _ => panic!(),
    };
    assert_eq!(r.config.pools.len(), 3);
    assert_eq!(
        servers(&r.config.pools[1]),
        [
            ("a:1".to_string(), 1, None),
            ("b:2".to_string(), 3, Some("two".to_string()))
        ]
    );
    assert_eq!(servers(&r.config.pools[2]), servers(&r.config.pools[0]));
}

#[test]
fn nutcracker_servers_keep_twemproxys_names() {
    let r = read_text(
        "a.yml",
        "p:\n  listen: 127.0.0.1:6000\n  redis: true\n  servers:\n   - 127.0.0.1:06379:1\n   \
         - cache:11211:2\n   - ::1:6380:1\n   - 10.0.0.1:6381:1 ten:one\n",
    )
    .unwrap();
    let PoolKind::Ring { servers, .. } = &r.config.pools[0].kind else {
        panic!()
    };
    let got: Vec<(String, String)> = servers.iter().map(|s| (s.addr(), s.ring_name())).collect();
    assert_eq!(
        got,
        [
            ("127.0.0.1:6379".into(), "127.0.0.1:06379".into()),
            ("cache:11211".into(), "cache".into()),
            ("[::1]:6380".into(), "::1:6380".into()),
            ("10.0.0.1:6381".into(), "ten:one".into()),
        ]
    );
    // Where the address alone would not give twemproxy's name, the name is
    // written out, and the warning says so.
    assert!(has_warning(
        &r,
        ":5: '- 127.0.0.1:06379:1': keys are placed by twemproxy's name"
    ));
    assert!(has_warning(&r, ":7: '- ::1:6380:1': keys are placed"));
    assert_eq!(r.warnings.len(), 2, "{:#?}", r.warnings);
}

#[test]
fn nutcracker_pools_mithril_cannot_serve_are_skipped() {
    let r = read_text(
        "a.yml",
        &format!(
            "{BASE}sock:\n  listen: /tmp/x.sock 0666\n  redis: true\n  servers:\n   - a:1:1\n\
             remote:\n  listen: 127.0.0.1:6001\n  redis: true\n  servers:\n   - a:1:1\n   \
             - /tmp/redis.sock:1\nmc:\n  listen: 127.0.0.1:6002\n  servers:\n   - a:1:1\n"
        ),
    )
    .unwrap();
    let names: Vec<&str> = r.config.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["p"]);
    for needle in [
        ":7: pool 'sock' listens on a unix socket",
        ":16: pool 'remote' has a server on a unix socket",
        ":17: pool 'mc' is a memcached pool (no 'redis: true'",
    ] {
        assert!(
            has_warning(&r, needle),
            "no {needle:?} in {:#?}",
            r.warnings
        );
    }
    // A pool name a pool line does not take is made one, and said.
    let r = read_text("b.yml", &BASE.replace("p:", "my pool/1:")).unwrap();
    assert_eq!(r.config.pools[0].name, "my_pool_1");
    assert!(has_warning(&r, ":1: 'my pool/1:': pool names are"));
    let e = read_text(
        "c.yml",
        &format!(
            "{}{}",
            BASE.replace("p:", "p_:"),
            BASE.replace("p:", "p!:").replace("6000", "6001")
        ),
    )
    .unwrap_err();
    assert_eq!(e.line(), Some(6));
    assert!(
        e.message()
            .contains("pools 'p_' (line 1) and 'p!' are both named 'p_'"),
        "{e}"
    );
}

#[test]
fn nutcracker_refuses_what_nutcracker_refuses() {
    for (text, line, needle) in [
        (
            "p:\n  listen: 127.0.0.1:6000\n  redis: true\n",
            Some(1),
            "no servers",
        ),
        (
            "p:\n  redis: true\n  servers:\n   - a:1:1\n",
            Some(1),
            "no listen",
        ),
        (&format!("{BASE}  redis_db: x\n"), Some(6), "whole number"),
        (&format!("{BASE}  timeout: -1\n"), Some(6), "whole number"),
        (
            &format!("{BASE}  preconnect: yes\n"),
            Some(6),
            "true or false",
        ),
        (&format!("{BASE}  redis: false\n"), Some(6), "given twice"),
        (
            &format!("{BASE}  frob: 1\n"),
            Some(6),
            "not a twemproxy pool setting",
        ),
        (
            &format!("{BASE}  hash: FNV1A_64\n"),
            Some(6),
            "hash must be one of",
        ),
        (
            &format!("{BASE}  distribution: Ketama\n"),
            Some(6),
            "distribution must be",
        ),
        (
            &format!("{BASE}  server_connections: 0\n"),
            Some(6),
            "cannot be 0",
        ),
        (
            &format!("{BASE}  timeout: 99999999999\n"),
            Some(6),
            "timeout must be between",
        ),
        (&format!("{BASE}  redis_auth:\n"), Some(6), "has no value"),
        (
            &format!("{BASE}  listen: 127.0.0.1:6001\n"),
            Some(6),
            "given twice",
        ),
        (&BASE.replace("7000:1", "7000:0"), Some(5), "weight is 0"),
        (
            &BASE.replace("7000:1", "7000"),
            Some(5),
            "a server is host:port:weight",
        ),
        (&BASE.replace("7000:1", "70000:1"), Some(5), "is not a port"),
        (
            &BASE.replace("10.0.0.1:7000:1", "a:1:1 x\n   - b:2:1 x"),
            Some(6),
            "same name, 'x'",
        ),
        (
            &BASE.replace("0.0.0.0:6000", "/tmp/s 999"),
            Some(2),
            "not a file permission",
        ),
        (
            &BASE.replace("0.0.0.0:6000", "127.0.0.1:99999"),
            Some(2),
            "listen",
        ),
        (
            &BASE.replace("redis: true", "redis: false\n  redis_auth: pw"),
            Some(4),
            "only valid in a redis pool",
        ),
        (
            &format!("{BASE}q:\n  listen: 0.0.0.0:6000\n  redis: true\n  servers:\n   - a:1:1\n"),
            Some(7),
            "both listen on 0.0.0.0:6000",
        ),
        (&format!("{BASE}{BASE}"), Some(6), "'p' is given twice"),
        ("p: 1\n", Some(1), "must be a mapping"),
        ("p:\n", Some(1), "no settings"),
        ("%YAML 1.1\n---\n# nothing\n", None, "no pool is defined"),
        ("a: 1\n---\nb: 2\n", Some(2), "second YAML document"),
        ("p:\n  listen: [a, b]\n", Some(2), "single value"),
        ("p:\n  servers: a:1:1\n", Some(2), "must be a list"),
        ("p:\n  <<: {a: b}\n", Some(2), "merge keys"),
    ] {
        let e = match read_text("x.yml", text) {
            Ok(r) => panic!("{text:?} was read: {:?}", r.config.pools),
            Err(e) => e,
        };
        assert_eq!(e.line(), line, "{text:?}: {e}");
        assert!(e.to_string().contains(needle), "{text:?}: {e}");
        assert!(
            !e.to_string().contains("pw\n") && !e.to_string().contains("'pw'"),
            "{e}"
        );
    }
}

#[test]
fn predixy_files_map_onto_directives() {
    let r = read_ok("predixy/predixy.conf");
    let c = &r.config;
    assert_eq!(r.format, Format::Predixy);
    assert_eq!(c.bind[0].addr, "127.0.0.1");
    assert_eq!(c.port, 7617);
    assert_eq!(c.threads, 4);
    assert_eq!(c.logfile, "./predixy.log");
    assert_eq!(c.loglevel, LogLevel::Notice);
    assert_eq!(
        c.cluster_nodes,
        ["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]
    );
    assert_eq!(c.topology_refresh_secs, 1);
    assert_eq!(c.connect_timeout_ms, 1000);
    assert_eq!(c.tcp_keepalive_secs, 120);
    assert_eq!(c.timeout_secs, 300, "ClientTimeout");
    assert!(r.warnings.iter().all(|w| !w.contains("ClientTimeout")));
    let cluster = example("predixy/cluster.conf").display().to_string();
    let main = example("predixy/predixy.conf").display().to_string();
    for want in [
        format!("{main}:6: 'Name PredixyExample': ignored"),
        format!("{main}:28: 'LogRotate 1d': ignored"),
        format!("{main}:33: 'LogInfoSample 10000': mithril logs every message"),
        format!("{cluster}:3: 'MasterReadPriority 60': ignored"),
        format!("{cluster}:8: 'ServerFailureLimit 10': ignored"),
        format!(
            "{}:2: 'Authority': mapped onto user lines: ",
            example("predixy/auth.conf").display()
        ),
        format!(
            "{}:2: 'LatencyMonitor all': ignored",
            example("predixy/latency.conf").display()
        ),
    ] {
        assert!(
            r.warnings.iter().any(|w| w.starts_with(&want)),
            "no warning {want:?} in {:#?}",
            r.warnings
        );
    }
    let auth = r.warnings.iter().find(|w| w.contains("Authority")).unwrap();
    assert!(
        auth.contains(
            "default (read), auth1 (admin), auth2 (write reads app: cache: shared: writes app:)"
        ),
        "{auth}"
    );
    // Issue 30: who may no longer call scripts is named.
    assert!(
        auth.ends_with("; default, auth2 may not call scripts (EVAL, EVALSHA, FCALL): through mithril only a user with every right may, as a script runs with the proxy's backend credentials"),
        "{auth}"
    );
    assert!(
        !auth.contains("complex password") && !auth.contains("writer"),
        "secrets stay out of warnings: {auth}"
    );
    // The users themselves.
    let users: Vec<String> = c.users.iter().map(|u| u.canonical()).collect();
    let hash = |p: &str| crate::config::sha256::hex(&crate::config::sha256::digest(p.as_bytes()));
    assert_eq!(
        users,
        [
            "default on nopass ~* mode read".to_string(),
            format!("auth1 on #{} ~* mode admin", hash("#a complex password#")),
            format!(
                "auth2 on #{} %R~app:* %R~cache:* %R~shared:* %W~app:* mode write",
                hash("writer")
            ),
        ]
    );
    // --print-config writes them with their passwords as given.
    let printed = render(c);
    assert!(
        printed.contains("user auth1 on \">#a complex password#\" mode admin\n"),
        "{printed}"
    );
    assert_eq!(parse_str(&printed, "printed").unwrap().users, c.users);
    // MaxMemory 0 and the Log*Sample defaults are predixy's own defaults:
    // only the sampling that mithril cannot do is mentioned.
    assert!(r.warnings.iter().all(|w| !w.contains("LogVerbSample")));
    assert!(r.warnings.iter().all(|w| !w.contains("MaxMemory")));
}

#[test]
fn predixy_refusals_say_why() {
    let e = read_err("predixy_no_group.conf");
    assert_eq!(e.line(), Some(2));
    assert!(e.message().contains("defines no Group"), "{e}");
    let dir = std::env::temp_dir().join(format!("mithril-px-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        read_file(&p)
    };
    let e = run(
        "a.conf",
        "WorkerThreads 2\nStandaloneServerPool {\n  RefreshMethod fixed\n}\n",
    )
    .unwrap_err();
    assert!(e.message().contains("defines no Group"), "{e}");
    let e = run(
        "s.conf",
        "SentinelServerPool {\n  Hash crc16\n  Group g {\n  }\n}\n",
    )
    .unwrap_err();
    assert!(e.message().contains("needs a Sentinels"), "{e}");
    let e = run("b.conf", "WorkerThreads 2\nFrobnicate 1\n").unwrap_err();
    assert_eq!(e.line(), Some(2));
    let e = run("c.conf", "WorkerThreads 2\n").unwrap_err();
    assert!(e.message().contains("no server pool is defined"), "{e}");
    let e = run(
        "d.conf",
        "Bind /tmp/predixy\nClusterServerPool {\n Servers {\n + a:1\n }\n}\n",
    )
    .unwrap_err();
    assert!(e.message().contains("TCP only"), "{e}");
    let e = run("e.conf", "Include e.conf\nWorkerThreads 1\n").unwrap_err();
    assert!(e.message().contains("include cycle"), "{e}");
    // No Bind: predixy's default address, so clients still find the proxy.
    let r = run("f.conf", "WorkerThreads 1\nClusterServerPool {\n  Servers {\n    + 10.0.0.1:7000\n  }\n  RefreshInterval 1500ms\n}\n").unwrap();
    assert_eq!(
        (r.config.bind[0].addr.as_str(), r.config.port),
        ("0.0.0.0", 7617)
    );
    assert_eq!(r.config.topology_refresh_secs, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn printed_configs_parse_back_to_the_same_meaning() {
    for rel in [
        "nutcracker.yml",
        "twemproxy_nutcracker.yml",
        "nutcracker_two_pools.yml",
        "predixy/predixy.conf",
    ] {
        let r = read_ok(rel);
        let text = render(&r.config);
        let back = parse_str(&text, "printed").unwrap_or_else(|e| panic!("{rel}: {e}\n{text}"));
        let mut want = r.config.clone();
        want.config_file = None;
        assert_eq!(back, want, "{rel}:\n{text}");
    }
}

#[test]
fn open_foreign_proxies_keep_their_exposure_with_a_warning() {
    let dir = std::env::temp_dir().join(format!("mithril-exp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let r = read_file(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut c = r.config.clone();
        c.cluster_nodes = vec!["10.0.0.1:7000".into()];
        validate(&c).unwrap_or_else(|e| panic!("{name}: {e}"));
        r
    };
    let exposed = |r: &Read| {
        !r.config.protected_mode && r.warnings.iter().any(|w| w.contains("'protected-mode no'"))
    };
    // A twemproxy pool open beyond loopback keeps its exposure, with the
    // warning; one with a password (redis_auth) needs nothing.
    let nc = "p:\n  listen: 0.0.0.0:6000\n  redis: true\n  servers:\n   - 10.0.0.1:7000:1\n";
    let r = run("a.yml", nc);
    assert!(exposed(&r));
    assert_eq!(r.config.pools[0].listen, ["0.0.0.0:6000"]);
    let r = run("b.yml", &format!("{nc}  redis_auth: pw\n"));
    assert!(r.config.protected_mode && r.warnings.is_empty());

    let pool = "ClusterServerPool {\n  Servers {\n    + 10.0.0.1:7000\n  }\n}\n";
    // predixy's default Bind is 0.0.0.0:7617.
    assert!(exposed(&run("a.conf", pool)));
    // Every Auth has a password: clients must AUTH, default is off.
    let r = run(
        "b.conf",
        &format!(
            "{pool}Authority {{\n  Auth pw {{\n    Mode write\n    KeyPrefix a: b:\n  }}\n}}\n"
        ),
    );
    assert!(r.config.protected_mode && !exposed(&r));
    let users: Vec<String> = r.config.users.iter().map(|u| u.canonical()).collect();
    assert_eq!(users.len(), 2);
    assert!(users[0].starts_with("auth1 on #") && users[0].ends_with(" ~a:* ~b:* mode write"));
    assert_eq!(users[1], "default off ~* mode read");
    let acl = crate::acl::Acl::from_config(&r.config);
    assert!(acl.password_required());
    assert_eq!(acl.authenticate(None, b"pw").unwrap().name, "auth1");
    // A password-less Auth is what clients get: open again.
    let r = run(
        "c.conf",
        &format!("{pool}Authority {{\n  Auth {{\n    Mode read\n  }}\n  Auth pw {{\n    Mode admin\n  }}\n  Auth pw {{\n    Mode write\n  }}\n}}\n"),
    );
    assert!(exposed(&r));
    let users: Vec<String> = r.config.users.iter().map(|u| u.canonical()).collect();
    // The later Auth of a password replaces the earlier one, as in predixy.
    assert_eq!(users[0], "default on nopass ~* mode read");
    assert!(
        users[1].starts_with("auth1 on #") && users[1].ends_with("mode write"),
        "{users:?}"
    );
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("replaced by the Auth with the same password")));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The predixy Authority example of mithril.conf(5) translates to the
/// user lines the page shows.
#[test]
fn the_manual_authority_example_is_what_the_translation_makes() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("man/mithril.conf.5"))
            .unwrap();
    let block = |start: &str| -> String {
        let from = page.find(start).unwrap();
        let body = &page[from..];
        let end = body.find(".EE").unwrap();
        body[..end].replace("\\-", "-")
    };
    let authority = block("Authority {\n");
    let users = block("user default on nopass mode read ~public:*");
    let dir = std::env::temp_dir().join(format!("mithril-man-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("predixy.conf");
    std::fs::write(
        &p,
        format!("Bind 127.0.0.1:7617\nClusterServerPool {{\n  Servers {{\n    + 10.0.0.1:7000\n  }}\n}}\n{authority}"),
    )
    .unwrap();
    let r = read_file(&p).unwrap();
    let native = parse_str(&users, "man page").unwrap();
    assert_eq!(r.config.users, native.users, "{users}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_skipped_pool_is_held_to_nutcrackers_rules_only() {
    // mithril's own bounds (a day of timeout, 64 connections) do not stop
    // a file over a pool it skips, nor does that pool draw more warnings.
    let r = read_text(
        "a.yml",
        &format!(
            "{BASE}mc:\n  listen: 127.0.0.1:6001\n  timeout: 999999999\n  \
             server_connections: 100\n  reuseport: true\n  servers:\n   - 127.0.0.1:011211:1\n"
        ),
    )
    .unwrap();
    assert_eq!(r.config.pools.len(), 1);
    // (BASE's pool listens beyond loopback without a password: that one
    // warning is the protected mode's, not the skipped pool's.)
    let warnings: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| !w.contains("protected-mode"))
        .collect();
    assert_eq!(warnings.len(), 1, "{:#?}", r.warnings);
    assert!(r.warnings[0].contains("pool 'mc' is a memcached pool"));
    // What nutcracker refuses still stops it.
    let e = read_text(
        "b.yml",
        &format!("{BASE}mc:\n  listen: 127.0.0.1:6001\n  timeout: x\n  servers:\n   - a:1:1\n"),
    )
    .unwrap_err();
    assert_eq!(e.line(), Some(8), "{e}");
}

#[test]
fn odd_values_print_and_read_back() {
    let r = read_text(
        "a.yml",
        "'p.1':\n  listen: '[::1]:6000'\n  redis: true\n  redis_auth: \"a b\\\"c#d\"\n  \
         hash_tag: \"#'\"\n  servers:\n   - '127.0.0.1:06379:1 x\"y\\z'\n   - ::1:7000:3\n",
    )
    .unwrap();
    let text = render(&r.config);
    let back = parse_str(&text, "printed").unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.pools, r.config.pools, "{text}");
    assert_eq!(back.pools[0].password, "a b\"c#d");
}

#[test]
fn predixys_sentinel_pool_becomes_a_pool_of_groups() {
    let r = read_file(&example("predixy_sentinel.conf")).unwrap();
    let printed = render(&r.config);
    for line in [
        "pool default listen 127.0.0.1:7617\n",
        "pool default hash crc16\n",
        "pool default hash-tag {}\n",
        "pool default databases 16\n",
        "pool default group shard001\n",
        "pool default sentinel 10.2.2.2:7500 10.2.2.3:7500\n",
        "pool default master-read-priority 60\n",
    ] {
        assert!(printed.contains(line), "{line:?} missing from:\n{printed}");
    }
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}
