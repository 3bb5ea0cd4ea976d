//! The compat readers on example files written in each project's style
//! (tests/compat/), and format detection.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::{parse_str, render, validate, BindAddr, LogLevel};

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
    assert_eq!((r.format, r.config.port), (Format::Nutcracker, 9999));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nutcracker_pool_maps_onto_directives() {
    let r = read_ok("nutcracker.yml");
    let c = &r.config;
    assert_eq!(r.format, Format::Nutcracker);
    assert_eq!(
        c.bind,
        [BindAddr {
            addr: "127.0.0.1".into(),
            optional: false
        }]
    );
    assert_eq!(c.port, 22121);
    assert_eq!(
        c.cluster_nodes,
        ["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]
    );
    assert_eq!(c.connect_timeout_ms, 400);
    assert_eq!(c.tcp_backlog, 1024);
    assert_eq!(c.maxclients, 2048);
    assert_eq!(c.backend_conns, 2);
    assert_eq!(
        c.config_file.as_deref(),
        Some(example("nutcracker.yml").as_path())
    );
    // One warning per setting without a meaning, each naming file and line.
    let file = example("nutcracker.yml").display().to_string();
    for (line, key) in [
        (7, "hash: fnv1a_64"),
        (9, "distribution: ketama"),
        (12, "preconnect: true"),
        (17, "auto_eject_hosts: true"),
        (18, "server_retry_timeout: 2000"),
        (19, "server_failure_limit: 3"),
    ] {
        let want = format!("{file}:{line}: '{key}': ");
        assert!(
            r.warnings.iter().filter(|w| w.starts_with(&want)).count() == 1,
            "no single warning {want:?} in {:#?}",
            r.warnings
        );
    }
    // redis_auth: twemproxy's clients give it, and so do its connections
    // to the servers.
    assert_eq!(c.requirepass, "s3cr3t");
    assert_eq!(c.backend_password, "s3cr3t");
    assert!(!r.warnings.iter().any(|w| w.contains("s3cr3t")));
    assert!(!has_warning(&r, "hash_tag"));
    assert!(!has_warning(&r, "'listen"));
    assert!(!has_warning(&r, "'servers"));
}

#[test]
fn nutcracker_refusals_say_why() {
    let e = read_err("nutcracker_memcached.yml");
    assert_eq!(e.line(), Some(8));
    assert!(
        e.message().contains("memcached pool") && e.message().contains("Redis Cluster"),
        "{e}"
    );

    let e = read_err("nutcracker_two_pools.yml");
    assert_eq!(e.line(), Some(11));
    assert!(
        e.message().contains("2 pools are defined (beta, gamma)"),
        "{e}"
    );

    let e = read_err("nutcracker_hash_tag.yml");
    assert_eq!(e.line(), Some(4));
    assert!(e.message().contains("only hash_tag \"{}\" is valid"), "{e}");
    assert!(
        e.to_string()
            .contains("nutcracker_hash_tag.yml:4: 'hash_tag: :$'"),
        "{e}"
    );
}

#[test]
fn nutcracker_small_cases() {
    let dir = std::env::temp_dir().join(format!("mithril-nc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        read_file(&p)
    };
    let base = "p:\n  listen: 0.0.0.0:6000\n  redis: true\n  servers:\n   - 10.0.0.1:7000:1\n";
    let r = run(
        "a.yml",
        &format!("{base}  client_connections: 0\n  timeout: 5\n  tcpkeepalive: false\n"),
    )
    .unwrap();
    assert_eq!(r.config.maxclients, 1_000_000);
    assert_eq!(r.config.connect_timeout_ms, 100);
    assert_eq!(r.config.tcp_keepalive_secs, 0);
    assert_eq!(r.config.bind[0].addr, "0.0.0.0");
    assert!(r.warnings.iter().any(|w| w.contains("using 100")));
    let e = run(
        "b.yml",
        "p:\n  listen: /tmp/x.sock 0666\n  redis: true\n  servers:\n   - a:1:1\n",
    )
    .unwrap_err();
    assert!(e.message().contains("TCP only"), "{e}");
    let e = run("c.yml", &format!("{base}  redis_db: 3\n")).unwrap_err();
    assert_eq!(e.line(), Some(6));
    let e = run("d.yml", "p:\n  listen: 127.0.0.1:6000\n  redis: true\n").unwrap_err();
    assert!(e.message().contains("no servers"), "{e}");
    let e = run("e.yml", &format!("{base}  redis: maybe\n")).unwrap_err();
    assert!(
        e.message().contains("given twice") || e.message().contains("true or false"),
        "{e}"
    );
    let e = run("f.yml", "# nothing but a comment\np:\n").unwrap_err();
    assert!(
        e.message().contains("memcached") || e.message().contains("mapping"),
        "{e}"
    );
    let r = run("g.yml", "p:\n  listen: 127.0.0.1:6000\n  redis: true\n  servers:\n   - 10.0.0.1:7000:5 x\n  frob: 1\n").unwrap();
    assert!(r.warnings.iter().any(|w| w.contains("weights are ignored")));
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("'frob' is not a twemproxy setting")));
    let _ = std::fs::remove_dir_all(&dir);
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
            "default on nopass ~* &* mode read".to_string(),
            format!(
                "auth1 on #{} ~* &* mode admin",
                hash("#a complex password#")
            ),
            format!(
                "auth2 on #{} %R~app:* %R~cache:* %R~shared:* %W~app:* &* mode write",
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
    let e = read_err("predixy_sentinel.conf");
    assert_eq!(e.line(), Some(3));
    assert!(
        e.message().contains("SentinelServerPool cannot be fronted"),
        "{e}"
    );
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
    assert!(e.message().contains("Redis Cluster only"), "{e}");
    let e = run("b.conf", "WorkerThreads 2\nFrobnicate 1\n").unwrap_err();
    assert_eq!(e.line(), Some(2));
    let e = run("c.conf", "WorkerThreads 2\n").unwrap_err();
    assert!(e.message().contains("no ClusterServerPool"), "{e}");
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
    for rel in ["nutcracker.yml", "predixy/predixy.conf"] {
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
    let nc = "p:\n  listen: 0.0.0.0:6000\n  redis: true\n  servers:\n   - 10.0.0.1:7000:1\n";
    assert!(exposed(&run("a.yml", nc)));
    // With redis_auth its clients had to AUTH: nothing to keep open.
    let r = run("b.yml", &format!("{nc}  redis_auth: pw\n"));
    assert!(r.config.protected_mode && !exposed(&r));
    assert_eq!(r.config.requirepass, "pw");
    let r = run("c.yml", &nc.replace("0.0.0.0", "127.0.0.1"));
    assert!(r.config.protected_mode && !exposed(&r));

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
    assert!(users[0].starts_with("auth1 on #") && users[0].ends_with(" ~a:* ~b:* &* mode write"));
    assert_eq!(users[1], "default off ~* &* mode read");
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
    assert_eq!(users[0], "default on nopass ~* &* mode read");
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
