//! Tests of the file format, every directive, includes, validation, the
//! `CONFIG GET` views, rendering and the command line.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::cli::{self, Cli};
use super::*;

const ORIGIN: &str = "/etc/mithril/mithril.conf";

fn parse(text: &str) -> Config {
    match parse_str(text, ORIGIN) {
        Ok(cfg) => cfg,
        Err(e) => panic!("{text:?} failed: {e}"),
    }
}

fn error(text: &str) -> String {
    match parse_str(text, ORIGIN) {
        Ok(cfg) => panic!("{text:?} parsed: {cfg:?}"),
        Err(e) => e.to_string(),
    }
}

/// A fresh directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("mithril-config-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---- defaults ----------------------------------------------------------------

#[test]
fn defaults_are_the_documented_ones() {
    let cfg = Config::default();
    assert_eq!(
        cfg.bind,
        [
            BindAddr {
                addr: "127.0.0.1".into(),
                optional: false
            },
            BindAddr {
                addr: "::1".into(),
                optional: true
            }
        ]
    );
    assert_eq!(cfg.port, 7777);
    assert!(cfg.cluster_nodes.is_empty());
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS);
    assert_eq!(cfg.threads, cores);
    assert_eq!(cfg.maxclients, 10_000);
    assert_eq!(cfg.backend_conns, 1);
    assert_eq!(cfg.placement, Placement::LeastLoaded);
    assert_eq!(cfg.topology_refresh_secs, 10);
    assert_eq!(cfg.connect_timeout_ms, 1000);
    assert_eq!(cfg.proto_max_bulk_len, 67_108_864);
    assert_eq!(cfg.query_buffer_limit, 134_217_728);
    assert_eq!(cfg.output_limit_normal.hard, 268_435_456);
    assert_eq!(cfg.tcp_backlog, 511);
    assert_eq!(cfg.tcp_keepalive_secs, 300);
    assert_eq!(cfg.loglevel, LogLevel::Notice);
    assert_eq!(cfg.logfile, "");
    assert_eq!(cfg.config_file, None);
}

#[test]
fn each_table_default_parses_to_config_default() {
    for d in DIRECTIVES {
        if d.default.is_empty() {
            assert!(
                matches!(d.name, "include" | "cluster-nodes" | "user" | "pool"),
                "{} lacks a default",
                d.name
            );
            continue;
        }
        let cfg = parse(&format!("{} {}", d.name, d.default));
        assert_eq!(cfg, Config::default(), "default of {}", d.name);
    }
}

#[test]
fn table_names_are_lower_case_unique_and_runtime_ones_are_those_config_set_applies() {
    let mut names: Vec<&str> = DIRECTIVES.iter().map(|d| d.name).collect();
    assert!(names.iter().all(|n| *n == n.to_ascii_lowercase()));
    let runtime: Vec<&str> = DIRECTIVES
        .iter()
        .filter(|d| d.runtime_settable)
        .map(|d| d.name)
        .collect();
    // Exactly the directives local/config_cmd.rs knows how to apply live.
    assert_eq!(
        runtime,
        [
            "maxclients",
            "read-from-replicas",
            "connect-timeout",
            "backend-timeout",
            "proto-max-bulk-len",
            "query-buffer-limit",
            "client-output-high-water",
            "client-output-buffer-limit",
            "client-output-total-limit",
            "maxmemory",
            "reply-cache",
            "reply-cache-size",
            "reply-cache-max-age",
            "tracking-table-max-keys",
            "timeout",
            "loglevel",
            "slowlog-log-slower-than",
            "slowlog-max-len"
        ]
    );
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), DIRECTIVES.len());
}

// ---- the file format ------------------------------------------------------------

#[test]
fn blank_lines_comments_and_crlf() {
    let cfg = parse("\n# a comment\n   # indented\n\r\nport 8000   # trailing comment\r\n\n");
    assert_eq!(cfg.port, 8000);
    assert_eq!(parse("").port, 7777);
}

#[test]
fn directive_names_ignore_case() {
    let cfg =
        parse("PORT 8001\nCluster-Nodes 10.0.0.1:7000\nLogLevel WARNING\nPlacement Round-Robin");
    assert_eq!(cfg.port, 8001);
    assert_eq!(cfg.cluster_nodes, ["10.0.0.1:7000"]);
    assert_eq!(cfg.loglevel, LogLevel::Warning);
    assert_eq!(cfg.placement, Placement::RoundRobin);
}

#[test]
fn error_names_file_line_and_directive() {
    assert_eq!(
        error("# comment\n\nport 99999\n"),
        "/etc/mithril/mithril.conf:3: 'port 99999': port must be between 0 and 65535"
    );
    assert_eq!(
        error("port 1\nfoo bar\n"),
        "/etc/mithril/mithril.conf:2: unknown directive 'foo'"
    );
    // The trailing comment and indentation are not part of the quoted text.
    assert_eq!(
        error("  port  70000   # oops"),
        "/etc/mithril/mithril.conf:1: 'port  70000': port must be between 0 and 65535"
    );
    let e = parse_str("\n\nthreads lots", "x.conf").unwrap_err();
    assert_eq!(e.origin(), "x.conf");
    assert_eq!(e.line(), Some(3));
    assert_eq!(e.message(), "threads must be a number between 0 and 256");
}

#[test]
fn quoting_errors_are_located() {
    assert_eq!(
        error("port 1\nlogfile \"/var/log/m.log\n"),
        "/etc/mithril/mithril.conf:2: 'logfile \"/var/log/m.log': unbalanced quotes"
    );
    assert_eq!(
        error("logfile 'a'b"),
        "/etc/mithril/mithril.conf:1: 'logfile 'a'b': a closing quote must be followed by a space"
    );
}

#[test]
fn quoted_arguments() {
    assert_eq!(
        parse(r#"logfile "/var/log/my proxy.log""#).logfile,
        "/var/log/my proxy.log"
    );
    assert_eq!(parse(r"logfile '/tmp/it\'s'").logfile, "/tmp/it's");
    assert_eq!(parse(r#"logfile "\x2ftmp\x2fa\tb""#).logfile, "/tmp/a\tb");
    assert_eq!(parse("logfile \"\"").logfile, "");
    assert_eq!(parse("logfile \"/x\"\nlogfile ''").logfile, "");
    assert_eq!(parse("port \"8002\"").port, 8002);
    assert_eq!(
        parse("cluster-nodes 'a:1' \"b:2\"").cluster_nodes,
        ["a:1", "b:2"]
    );
    assert_eq!(
        error(r#"logfile "\xff""#),
        "/etc/mithril/mithril.conf:1: 'logfile \"\\xff\"': logfile: argument is not valid UTF-8"
    );
}

#[test]
fn last_setting_wins() {
    let cfg = parse(
        "port 8000\nport 8001\nloglevel debug\nloglevel warning\nbind 10.0.0.1\nbind 10.0.0.2 -::1",
    );
    assert_eq!(cfg.port, 8001);
    assert_eq!(cfg.loglevel, LogLevel::Warning);
    assert_eq!(
        cfg.bind,
        [
            BindAddr {
                addr: "10.0.0.2".into(),
                optional: false
            },
            BindAddr {
                addr: "::1".into(),
                optional: true
            }
        ]
    );
}

#[test]
fn cluster_nodes_lines_accumulate() {
    let cfg = parse(
        "cluster-nodes 10.0.0.1:7000\ncluster-nodes 10.0.0.2:7000 10.0.0.3:7000\ncluster-nodes 10.0.0.1:7000",
    );
    assert_eq!(
        cfg.cluster_nodes,
        ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"]
    );
}

#[test]
fn arity_errors() {
    assert_eq!(
        error("port"),
        "/etc/mithril/mithril.conf:1: 'port': port takes exactly one argument, got 0"
    );
    assert_eq!(
        error("port 1 2"),
        "/etc/mithril/mithril.conf:1: 'port 1 2': port takes exactly one argument, got 2"
    );
    assert_eq!(
        error("cluster-nodes"),
        "/etc/mithril/mithril.conf:1: 'cluster-nodes': cluster-nodes takes at least 1 argument(s), got 0"
    );
    let seventeen = vec!["127.0.0.1"; 17].join(" ");
    assert!(error(&format!("bind {seventeen}")).ends_with("bind takes 1 to 16 arguments, got 17"));
    assert_eq!(
        error("logfile"),
        "/etc/mithril/mithril.conf:1: 'logfile': logfile takes exactly one argument, got 0"
    );
}

// ---- every directive ------------------------------------------------------------

/// Asserts that `line` fails with `message`, located on line 1 of ORIGIN.
fn rejects(line: &str, message: &str) {
    assert_eq!(error(line), format!("{ORIGIN}:1: '{line}': {message}"));
}

#[test]
fn bind() {
    let cfg = parse("bind * -::* 192.168.1.10 -fe80::1");
    let shown: Vec<String> = cfg.bind.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["*", "-::*", "192.168.1.10", "-fe80::1"]);
    let ips: Vec<String> = cfg
        .bind
        .iter()
        .map(|b| b.ip().unwrap().to_string())
        .collect();
    assert_eq!(ips, ["0.0.0.0", "::", "192.168.1.10", "fe80::1"]);
    assert!(cfg.bind[1].optional && !cfg.bind[2].optional);
    let hint =
        "(write literal addresses, '*' for every IPv4 address or '::*' for every IPv6 address)";
    rejects(
        "bind localhost",
        &format!("bind: 'localhost' is not an IP address {hint}"),
    );
    rejects(
        "bind 127.0.0.1 -",
        &format!("bind: '-' is not an IP address {hint}"),
    );
    rejects(
        "bind 256.0.0.1",
        &format!("bind: '256.0.0.1' is not an IP address {hint}"),
    );
    rejects(
        "bind --::1",
        &format!("bind: '--::1' is not an IP address {hint}"),
    );
    // A failed bind line leaves the previous value alone.
    assert_eq!(
        parse_str("bind 10.0.0.1\nbind x", "t").unwrap_err().line(),
        Some(2)
    );
}

#[test]
fn port() {
    assert_eq!(parse("port 1").port, 1);
    assert_eq!(parse("port 65535").port, 65535);
    // 0 is no plain listener, which needs a TLS one (as in Redis):
    // `validate` says so (cli_errors, test_config_report).
    assert_eq!(parse("port 0").port, 0);
    rejects("port 65536", "port must be between 0 and 65535");
    rejects(
        "port 99999999999999999999999",
        "port must be between 0 and 65535",
    );
    rejects("port -1", "port must be a number between 0 and 65535");
    rejects("port 80a", "port must be a number between 0 and 65535");
    rejects("port ''", "port must be a number between 0 and 65535");
}

#[test]
fn cluster_nodes() {
    let cfg = parse("cluster-nodes 127.0.0.1:7000 [::1]:7001 redis-1.internal:7002 node_a:1");
    assert_eq!(
        cfg.cluster_nodes,
        [
            "127.0.0.1:7000",
            "[::1]:7001",
            "redis-1.internal:7002",
            "node_a:1"
        ]
    );
    let shape = "is not HOST:PORT (e.g. 127.0.0.1:7000 or [::1]:7000)";
    rejects(
        "cluster-nodes 7000",
        &format!("cluster-nodes: '7000' {shape}"),
    );
    rejects(
        "cluster-nodes :7000",
        &format!("cluster-nodes: ':7000' {shape}"),
    );
    rejects(
        "cluster-nodes a b:1",
        &format!("cluster-nodes: 'a' {shape}"),
    );
    rejects(
        "cluster-nodes [::1:7000",
        &format!("cluster-nodes: '[::1:7000' {shape}"),
    );
    rejects(
        "cluster-nodes ::1:7000",
        "cluster-nodes: '::1:7000': write IPv6 addresses in brackets, e.g. [::1]:7000",
    );
    rejects(
        "cluster-nodes [zz]:7000",
        "cluster-nodes: '[zz]:7000': 'zz' is not an IPv6 address",
    );
    rejects(
        "cluster-nodes host:0",
        "'host:0': cluster-nodes port must be between 1 and 65535",
    );
    rejects(
        "cluster-nodes host:",
        "'host:': cluster-nodes port must be a number between 1 and 65535",
    );
    // A bad seed anywhere on the line adds none of the line's seeds.
    let e = parse_str("cluster-nodes a:1\ncluster-nodes b:2 c", "t").unwrap_err();
    assert_eq!(e.line(), Some(2));
}

#[test]
fn threads() {
    assert_eq!(parse("threads 4").threads, 4);
    assert_eq!(parse("threads 256").threads, 256);
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS);
    assert_eq!(parse("threads 0").threads, cores);
    assert_ne!(parse("threads 0").threads, 0);
    rejects("threads 257", "threads must be between 0 and 256");
    rejects("threads auto", "threads must be a number between 0 and 256");
}

#[test]
fn maxclients() {
    assert_eq!(parse("maxclients 1").maxclients, 1);
    assert_eq!(parse("maxclients 50000").maxclients, 50_000);
    rejects("maxclients 0", "maxclients must be between 1 and 1000000");
    rejects(
        "maxclients 1000001",
        "maxclients must be between 1 and 1000000",
    );
}

#[test]
fn backend_conns() {
    assert_eq!(parse("backend-conns 64").backend_conns, 64);
    assert_eq!(parse("backend-conns 2").backend_conns, 2);
    rejects("backend-conns 0", "backend-conns must be between 1 and 64");
    rejects("backend-conns 65", "backend-conns must be between 1 and 64");
}

#[test]
fn placement() {
    assert_eq!(
        parse("placement round-robin").placement,
        Placement::RoundRobin
    );
    assert_eq!(
        parse("placement LEAST-LOADED").placement,
        Placement::LeastLoaded
    );
    rejects(
        "placement random",
        "placement must be least-loaded or round-robin",
    );
    assert_eq!(
        "round-robin".parse::<Placement>(),
        Ok(Placement::RoundRobin)
    );
    assert_eq!(Placement::LeastLoaded.to_string(), "least-loaded");
}

#[test]
fn topology_refresh_secs() {
    assert_eq!(parse("topology-refresh-secs 1").topology_refresh_secs, 1);
    assert_eq!(
        parse("topology-refresh-secs 86400").topology_refresh_secs,
        86_400
    );
    rejects(
        "topology-refresh-secs 0",
        "topology-refresh-secs must be between 1 and 86400",
    );
    rejects(
        "topology-refresh-secs 86401",
        "topology-refresh-secs must be between 1 and 86400",
    );
}

#[test]
fn connect_timeout() {
    assert_eq!(parse("connect-timeout 100").connect_timeout_ms, 100);
    assert_eq!(parse("connect-timeout 60000").connect_timeout_ms, 60_000);
    rejects(
        "connect-timeout 99",
        "connect-timeout must be between 100 and 60000",
    );
    rejects(
        "connect-timeout 1s",
        "connect-timeout must be a number between 100 and 60000",
    );
}

#[test]
fn proto_max_bulk_len() {
    assert_eq!(
        parse("proto-max-bulk-len 1mb").proto_max_bulk_len,
        1_048_576
    );
    assert_eq!(
        parse("proto-max-bulk-len 64MB").proto_max_bulk_len,
        67_108_864
    );
    assert_eq!(
        parse("proto-max-bulk-len 2000000").proto_max_bulk_len,
        2_000_000
    );
    assert_eq!(parse("proto-max-bulk-len 2m").proto_max_bulk_len, 2_000_000);
    rejects(
        "proto-max-bulk-len 1m",
        "proto-max-bulk-len must be at least 1mb (1048576 bytes)",
    );
    rejects(
        "proto-max-bulk-len 1023kb",
        "proto-max-bulk-len must be at least 1mb (1048576 bytes)",
    );
    rejects(
        "proto-max-bulk-len lots",
        "proto-max-bulk-len must be a size such as 512mb, 64k or 1048576",
    );
    rejects(
        "proto-max-bulk-len 9000000000gb",
        "proto-max-bulk-len must be at most 9223372036854775807 bytes",
    );
}

#[test]
fn query_buffer_limit() {
    assert_eq!(parse("query-buffer-limit 2gb").query_buffer_limit, 2 << 30);
    assert_eq!(
        parse("query-buffer-limit 1g").query_buffer_limit,
        1_000_000_000
    );
    rejects(
        "query-buffer-limit 512k",
        "query-buffer-limit must be at least 1mb (1048576 bytes)",
    );
    rejects(
        "query-buffer-limit 1tb",
        "query-buffer-limit must be a size such as 512mb, 64k or 1048576",
    );
}

#[test]
fn tcp_backlog() {
    assert_eq!(parse("tcp-backlog 4096").tcp_backlog, 4096);
    assert_eq!(parse("tcp-backlog 2147483647").tcp_backlog, i32::MAX);
    rejects(
        "tcp-backlog 0",
        "tcp-backlog must be between 1 and 2147483647",
    );
    rejects(
        "tcp-backlog 2147483648",
        "tcp-backlog must be between 1 and 2147483647",
    );
}

#[test]
fn tcp_keepalive() {
    assert_eq!(parse("tcp-keepalive 0").tcp_keepalive_secs, 0);
    assert_eq!(parse("tcp-keepalive 60").tcp_keepalive_secs, 60);
    rejects(
        "tcp-keepalive 32768",
        "tcp-keepalive must be between 0 and 32767",
    );
}

#[test]
fn loglevel() {
    for (word, level, filter) in [
        ("debug", LogLevel::Debug, log::LevelFilter::Trace),
        ("verbose", LogLevel::Verbose, log::LevelFilter::Debug),
        ("notice", LogLevel::Notice, log::LevelFilter::Info),
        ("warning", LogLevel::Warning, log::LevelFilter::Warn),
        ("nothing", LogLevel::Nothing, log::LevelFilter::Off),
    ] {
        assert_eq!(parse(&format!("loglevel {word}")).loglevel, level);
        assert_eq!(level.to_string(), word);
        assert_eq!(word.to_uppercase().parse::<LogLevel>(), Ok(level));
        assert_eq!(level.to_log_filter(), filter);
    }
    rejects(
        "loglevel info",
        "loglevel must be one of debug, verbose, notice, warning, nothing",
    );
}

#[test]
fn logfile() {
    assert_eq!(
        parse("logfile /var/log/mithril.log").logfile,
        "/var/log/mithril.log"
    );
    assert_eq!(parse("logfile \"\"").logfile, "");
}

#[test]
fn include_outside_a_file_is_refused_by_the_setter() {
    let mut cfg = Config::default();
    let include = lookup("include").unwrap();
    assert_eq!(
        include.set(&mut cfg, &["x.conf"]),
        Err("include is only valid inside a configuration file".to_string())
    );
    assert_eq!(include.value(&cfg), None);
}

// ---- include ---------------------------------------------------------------------

#[test]
fn include_resolves_against_the_including_files_directory() {
    let dir = TempDir::new("rel");
    dir.write(
        "conf.d/extra.conf",
        "port 8100\ninclude more/last.conf\ncluster-nodes b:2\n",
    );
    dir.write("conf.d/more/last.conf", "loglevel warning\n");
    let main = dir.write(
        "main.conf",
        "cluster-nodes a:1\nport 8000\ninclude conf.d/extra.conf\nthreads 3\n",
    );
    let cfg = parse_file(&main).unwrap();
    assert_eq!(cfg.port, 8100, "the include comes after port 8000 and wins");
    assert_eq!(cfg.loglevel, LogLevel::Warning);
    assert_eq!(cfg.cluster_nodes, ["a:1", "b:2"]);
    assert_eq!(cfg.threads, 3);
    assert_eq!(cfg.config_file.as_deref(), Some(main.as_path()));
    assert!(validate(&cfg).is_ok());
}

#[test]
fn include_absolute_and_quoted_paths() {
    let dir = TempDir::new("abs");
    let other = dir.write("with space.conf", "port 8200\n");
    let main = dir.write("main.conf", &format!("include \"{}\"\n", other.display()));
    assert_eq!(parse_file(&main).unwrap().port, 8200);
    // From parse_str an absolute include works too.
    assert_eq!(
        parse_str(&format!("include '{}'", other.display()), "text")
            .unwrap()
            .port,
        8200
    );
}

#[test]
fn include_order_and_last_wins_across_files() {
    let dir = TempDir::new("order");
    dir.write("a.conf", "port 9001\n");
    let main = dir.write("main.conf", "include a.conf\nport 9000\n");
    assert_eq!(parse_file(&main).unwrap().port, 9000);
    let main = dir.write("main2.conf", "port 9000\ninclude a.conf\n");
    assert_eq!(parse_file(&main).unwrap().port, 9001);
}

#[test]
fn errors_inside_an_include_name_the_included_file() {
    let dir = TempDir::new("inner");
    dir.write("bad.conf", "\nport nope\n");
    let main = dir.write("main.conf", "include bad.conf\n");
    let e = parse_file(&main).unwrap_err();
    let bad = dir.path().join("bad.conf");
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: 'port nope': port must be a number between 0 and 65535",
            bad.display()
        )
    );
}

#[test]
fn include_of_a_missing_file() {
    let dir = TempDir::new("missing");
    let main = dir.write("main.conf", "port 1\ninclude nothere.conf\n");
    let e = parse_file(&main).unwrap_err();
    assert_eq!(e.origin(), main.display().to_string());
    assert_eq!(e.line(), Some(2));
    let want = format!(
        "'include nothere.conf': cannot read {}",
        dir.path().join("nothere.conf").display()
    );
    assert!(e.to_string().contains(&want), "{e}");
    let e = parse_str("include", "t").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t:1: 'include': include takes exactly one path"
    );
    let e = parse_str("include ''", "t").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t:1: 'include ''': include needs a file name"
    );
}

#[test]
fn include_of_an_unreadable_path_is_located_at_the_include_line() {
    let dir = TempDir::new("dir");
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    let main = dir.write("main.conf", "port 1\ninclude sub\n");
    let e = parse_file(&main).unwrap_err();
    assert_eq!(e.origin(), main.display().to_string());
    assert_eq!(e.line(), Some(2));
    let want = format!("cannot read {}: ", dir.path().join("sub").display());
    assert!(e.message().starts_with(&want), "{e}");
}

#[test]
fn include_cycles_are_errors() {
    let dir = TempDir::new("cycle");
    dir.write("b.conf", "port 2\ninclude a.conf\n");
    let a = dir.write("a.conf", "port 1\ninclude b.conf\n");
    let e = parse_file(&a).unwrap_err();
    let canon = |n: &str| {
        std::fs::canonicalize(dir.path().join(n))
            .unwrap()
            .display()
            .to_string()
    };
    assert_eq!(e.origin(), dir.path().join("b.conf").display().to_string());
    assert_eq!(e.line(), Some(2));
    assert_eq!(
        e.message(),
        format!(
            "include cycle: {} -> {} -> {}",
            canon("a.conf"),
            canon("b.conf"),
            canon("a.conf")
        )
    );
    let own = dir.write("self.conf", "include self.conf\n");
    assert!(parse_file(&own)
        .unwrap_err()
        .message()
        .starts_with("include cycle: "));
}

#[test]
fn including_the_same_file_twice_is_not_a_cycle() {
    let dir = TempDir::new("twice");
    dir.write("seeds.conf", "cluster-nodes a:1\n");
    let main = dir.write("main.conf", "include seeds.conf\ninclude seeds.conf\n");
    assert_eq!(parse_file(&main).unwrap().cluster_nodes, ["a:1"]);
}

#[test]
fn include_depth_is_limited_to_sixteen() {
    let dir = TempDir::new("depth");
    // level0.conf is the main file; levelN.conf is included N deep.
    let chain = |deepest: usize| {
        for n in 0..deepest {
            dir.write(
                &format!("level{n}.conf"),
                &format!("include level{}.conf\n", n + 1),
            );
        }
        dir.write(
            &format!("level{deepest}.conf"),
            &format!("port {}\n", 1000 + deepest),
        );
        dir.path().join("level0.conf")
    };
    assert_eq!(parse_file(&chain(16)).unwrap().port, 1016);
    let e = parse_file(&chain(17)).unwrap_err();
    assert_eq!(
        e.origin(),
        dir.path().join("level16.conf").display().to_string()
    );
    assert_eq!(e.message(), "includes nest deeper than 16 levels");
}

#[test]
fn missing_main_file() {
    let dir = TempDir::new("nofile");
    let path = dir.path().join("absent.conf");
    let e = parse_file(&path).unwrap_err();
    assert_eq!(e.origin(), path.display().to_string());
    assert_eq!(e.line(), None);
    assert!(
        e.message().starts_with("cannot read configuration file: "),
        "{e}"
    );
}

// ---- validate ------------------------------------------------------------------------

#[test]
fn validate_cross_field_checks() {
    let e = validate(&Config::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "configuration: no cluster-nodes given: name at least one node of the Redis Cluster, \
         e.g. 'cluster-nodes 127.0.0.1:7000'"
    );
    let mut cfg = parse("cluster-nodes a:1");
    assert!(validate(&cfg).is_ok());
    cfg.config_file = Some(PathBuf::from("/etc/m.conf"));
    cfg.query_buffer_limit = 1 << 20;
    assert_eq!(
        validate(&cfg).unwrap_err().to_string(),
        "/etc/m.conf: proto-max-bulk-len (67108864) is larger than query-buffer-limit (1048576): \
         a bulk string that size could never be received"
    );
    let mut cfg = parse("cluster-nodes a:1");
    cfg.threads = 0;
    assert!(validate(&cfg).is_err());
    let mut cfg = parse("cluster-nodes a:1");
    cfg.bind.clear();
    assert!(validate(&cfg).is_err());
    let mut cfg = parse("cluster-nodes a:1");
    cfg.bind.push(BindAddr {
        addr: "nope".into(),
        optional: true,
    });
    assert_eq!(
        validate(&cfg).unwrap_err().message(),
        "bind: 'nope' is not an IP address"
    );
}

// ---- CONFIG GET views and render -------------------------------------------------------

#[test]
fn get_shows_redis_style_values() {
    let cfg = parse("cluster-nodes a:1 b:2\nproto-max-bulk-len 64mb\nthreads 2");
    assert_eq!(get(&cfg, "bind").as_deref(), Some("127.0.0.1 -::1"));
    assert_eq!(get(&cfg, "port").as_deref(), Some("7777"));
    assert_eq!(get(&cfg, "cluster-nodes").as_deref(), Some("a:1 b:2"));
    assert_eq!(get(&cfg, "threads").as_deref(), Some("2"));
    assert_eq!(get(&cfg, "proto-max-bulk-len").as_deref(), Some("67108864"));
    assert_eq!(
        get(&cfg, "query-buffer-limit").as_deref(),
        Some("134217728")
    );
    assert_eq!(get(&cfg, "placement").as_deref(), Some("least-loaded"));
    assert_eq!(get(&cfg, "LOGLEVEL").as_deref(), Some("notice"));
    assert_eq!(get(&cfg, "logfile").as_deref(), Some(""));
    assert_eq!(get(&cfg, "tcp-keepalive").as_deref(), Some("300"));
    assert_eq!(get(&cfg, "include"), None);
    assert_eq!(get(&cfg, "nosuch"), None);
    assert_eq!(
        get(&Config::default(), "cluster-nodes").as_deref(),
        Some("")
    );
}

#[test]
fn matching_uses_case_insensitive_globs() {
    let cfg = parse("cluster-nodes a:1\nthreads 2");
    let names = |glob: &str| -> Vec<&str> {
        matching(&cfg, glob.as_bytes())
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(names("tcp-*"), ["tcp-backlog", "tcp-keepalive"]);
    assert_eq!(names("TCP-*"), ["tcp-backlog", "tcp-keepalive"]);
    assert_eq!(names("*conn*"), ["backend-conns", "connect-timeout"]);
    assert_eq!(names("log*"), ["loglevel", "logfile"]);
    // Computed from the table, so new directives do not break the test.
    let bp: Vec<&str> = DIRECTIVES
        .iter()
        .map(|d| d.name)
        .filter(|n| n.starts_with('b') || n.starts_with('p'))
        .collect();
    assert!(bp.contains(&"bind") && bp.contains(&"port"));
    assert_eq!(names("[bp]*"), bp);
    assert_eq!(names("include"), Vec::<&str>::new());
    assert_eq!(names("nomatch*"), Vec::<&str>::new());
    assert_eq!(names("*").len(), DIRECTIVES.len() - 1);
    assert_eq!(matching(&cfg, b"port"), [("port", "7777".to_string())]);
    assert_eq!(matching(&cfg, b"threads"), [("threads", "2".to_string())]);
}

#[test]
fn render_parses_back_to_the_same_config() {
    let odd = parse(
        "bind * -::*\nport 1234\ncluster-nodes [::1]:7000 a:1\ncluster-nodes b:2\nthreads 3\n\
         maxclients 5\nbackend-conns 4\nplacement round-robin\ntopology-refresh-secs 60\n\
         connect-timeout 250\nproto-max-bulk-len 1536kb\nquery-buffer-limit 1048577\n\
         tcp-backlog 128\ntcp-keepalive 0\nloglevel debug\nlogfile \"/var/log/odd \\\"name\\\".log\"",
    );
    for cfg in [Config::default(), parse("cluster-nodes a:1"), odd] {
        let text = render(&cfg);
        let back = parse_str(&text, "rendered").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, cfg, "{text}");
    }
}

#[test]
fn render_writes_sizes_with_units_and_quotes_empty_strings() {
    let mut cfg = parse("cluster-nodes a:1");
    cfg.config_file = Some(PathBuf::from("/etc/mithril/mithril.conf"));
    let text = render(&cfg);
    assert!(text.starts_with(&format!(
        "# mithril configuration, written by mithril {}\n",
        env!("CARGO_PKG_VERSION")
    )));
    assert!(text.contains("\n# read from /etc/mithril/mithril.conf\n"));
    for line in [
        "bind 127.0.0.1 -::1",
        "cluster-nodes a:1",
        "proto-max-bulk-len 64mb",
        "query-buffer-limit 128mb",
        "logfile \"\"",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing from\n{text}"
        );
    }
    assert!(!text.contains("include"));
    assert!(render(&Config::default())
        .lines()
        .any(|l| l == "# cluster-nodes (not set)"));
}

// ---- the command line ---------------------------------------------------------------

fn cli(args: &[&str]) -> Cli {
    match <Cli as argh::FromArgs>::from_args(&["mithril"], args) {
        Ok(cli) => cli,
        Err(e) => panic!("{args:?}: {}", e.output),
    }
}

#[test]
fn cli_parses_every_flag() {
    let c = cli(&[
        "-c",
        "/etc/m.conf",
        "-t",
        "--port",
        "9000",
        "--bind",
        "10.0.0.1",
        "--bind",
        "-::1",
    ]);
    assert_eq!(c.config, Some(PathBuf::from("/etc/m.conf")));
    assert!(c.test_config);
    assert_eq!(c.port.as_deref(), Some("9000"));
    assert_eq!(c.bind, ["10.0.0.1", "-::1"]);
    assert!(!c.version);
    assert_eq!(c.config_path, None);
    let c = cli(&["--config", "a.conf", "--test-config", "--version"]);
    assert_eq!(c.config, Some(PathBuf::from("a.conf")));
    assert!(c.test_config && c.version);
    let c = cli(&["/etc/mithril/mithril.conf"]);
    assert_eq!(
        c.config_path,
        Some(PathBuf::from("/etc/mithril/mithril.conf"))
    );
    assert!(
        <Cli as argh::FromArgs>::from_args(&["mithril"], &["-v"]).is_err(),
        "-v needs a value"
    );
    assert!(<Cli as argh::FromArgs>::from_args(&["mithril"], &["a", "b"]).is_err());
}

#[test]
fn flags_override_the_file() {
    let dir = TempDir::new("cli");
    let file = dir.write(
        "m.conf",
        "cluster-nodes a:1\nport 8000\nbind 10.0.0.1 10.0.0.2\nloglevel warning\nprotected-mode no\n",
    );
    let f = file.to_str().unwrap();
    let cfg = cli::load(&cli(&["-c", f])).unwrap();
    assert_eq!(
        (cfg.port, cfg.bind.len(), cfg.loglevel),
        (8000, 2, LogLevel::Warning)
    );
    assert_eq!(cfg.config_file.as_deref(), Some(file.as_path()));
    let cfg = cli::load(&cli(&[
        "-c",
        f,
        "--port",
        "9000",
        "--bind",
        "127.0.0.2",
        "--bind",
        "-::1",
    ]))
    .unwrap();
    assert_eq!(cfg.port, 9000);
    assert_eq!(
        cfg.bind,
        [
            BindAddr {
                addr: "127.0.0.2".into(),
                optional: false
            },
            BindAddr {
                addr: "::1".into(),
                optional: true
            }
        ]
    );
    assert_eq!(
        cfg.loglevel,
        LogLevel::Warning,
        "settings without a flag keep the file's value"
    );
    // The positional file works like -c; naming the same file twice is fine.
    assert_eq!(cli::load(&cli(&[f, "--port", "9001"])).unwrap().port, 9001);
    assert_eq!(cli::load(&cli(&["-c", f, f])).unwrap().port, 8000);
}

#[test]
fn cli_errors() {
    let dir = TempDir::new("clierr");
    let file = dir.write("m.conf", "cluster-nodes a:1\n");
    let f = file.to_str().unwrap();
    assert_eq!(
        cli::load(&cli(&["-c", f, "--port", "0"]))
            .unwrap_err()
            .to_string(),
        format!("{f}: port must be between 1 and 65535 (0 only with a tls-port)")
    );
    assert_eq!(
        cli::load(&cli(&["-c", f, "--bind", "1.2.3.4", "--bind", "nope"])).unwrap_err().to_string(),
        "command line: '--bind 1.2.3.4 --bind nope': bind: 'nope' is not an IP address (write literal \
         addresses, '*' for every IPv4 address or '::*' for every IPv6 address)"
    );
    let other = dir.write("other.conf", "cluster-nodes a:1\n");
    let e = cli::load(&cli(&["-c", f, other.to_str().unwrap()])).unwrap_err();
    assert_eq!(e.origin(), "command line");
    assert!(
        e.message().starts_with("two configuration files given"),
        "{e}"
    );
    // No file: defaults only, which lack cluster-nodes.
    assert!(cli::load(&cli(&[]))
        .unwrap_err()
        .message()
        .starts_with("no cluster-nodes given"));
    // The file is validated after the flags are applied.
    let big = dir.write("big.conf", "cluster-nodes a:1\nquery-buffer-limit 1mb\n");
    assert!(cli::load(&cli(&["-c", big.to_str().unwrap()]))
        .unwrap_err()
        .message()
        .contains("larger than query-buffer-limit"));
}

#[test]
fn test_config_report() {
    let dir = TempDir::new("t");
    let good = dir.write("good.conf", "cluster-nodes a:1\n");
    let bad = dir.write("bad.conf", "cluster-nodes a:1\nport 0\n");
    let g = good.to_str().unwrap();
    let b = bad.to_str().unwrap();
    assert_eq!(
        cli::test_report(&cli(&["-t", "-c", g])),
        (0, format!("configuration file {g} syntax is ok"))
    );
    assert_eq!(
        cli::test_report(&cli(&["-t", b])),
        (1, format!("mithril: {b}: port must be between 1 and 65535 (0 only with a tls-port)\nconfiguration file {b} test failed"))
    );
    // A bad flag fails the test too.
    assert_eq!(cli::test_report(&cli(&["-t", g, "--port", "x"])).0, 1);
    assert_eq!(cli::run_test(&cli(&["-t", g])), 0);
    assert_eq!(cli::run_test(&cli(&["-t", b])), 1);
}

#[test]
fn version() {
    assert_eq!(
        cli::version_string(),
        format!("mithril {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn twemproxy_spellings_are_normalized() {
    let n = |args: &[&str]| -> Vec<String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        cli::normalize_args(&args)
    };
    assert_eq!(
        n(&["-v6", "-dt", "-cfile"]),
        ["-v", "6", "-d", "-t", "-c", "file"]
    );
    assert_eq!(
        n(&[
            "--conf-file=a.yml",
            "--verbose=7",
            "--pid-file",
            "p",
            "--output=o",
            "--test-conf"
        ]),
        ["-c", "a.yml", "-v", "7", "-p", "p", "-o", "o", "-t"]
    );
    assert_eq!(n(&["-h"]), ["--help"]);
    assert_eq!(n(&["-?"]), ["--help"]);
    // Our own flags and values that merely start with '-' are left alone.
    assert_eq!(
        n(&[
            "--bind",
            "-::1",
            "--port",
            "7000",
            "-t",
            "--print-config",
            "x.conf"
        ]),
        [
            "--bind",
            "-::1",
            "--port",
            "7000",
            "-t",
            "--print-config",
            "x.conf"
        ]
    );
    assert_eq!(n(&["--", "-d"]), ["--", "-d"]);
    assert_eq!(n(&["--bind=::1"]), ["--bind", "::1"]);
    // -dx is not a bundle of known switches: argh gets it as written.
    assert_eq!(n(&["-dx"]), ["-dx"]);
}

#[test]
fn twemproxy_verbosity_maps_onto_loglevels() {
    let levels: Vec<LogLevel> = (0..=11)
        .map(|v: u8| cli::verbosity(&v.to_string()).unwrap())
        .collect();
    use LogLevel::*;
    assert_eq!(
        levels,
        [
            Warning, Warning, Warning, Warning, Warning, Notice, Notice, Verbose, Verbose, Debug,
            Debug, Debug
        ]
    );
    assert!(cli::verbosity("12").is_err());
    assert!(cli::verbosity("-1").is_err());
    assert!(cli::verbosity("x").is_err());
}

// ---- security: users, protected mode, backend credentials -------------------

#[test]
fn user_lines_accumulate_and_render_as_written() {
    let cfg = parse(
        "user alice on >s3cret mode write ~app:*\nuser bob off\n\
         user \"carol\" on \"#30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4\" mode admin\n",
    );
    let names: Vec<&str> = cfg.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["alice", "bob", "carol"]);
    let text = render(&cfg);
    // --print-config is a migration aid: the rules as given.
    assert!(
        text.lines()
            .any(|l| l == "user alice on >s3cret mode write ~app:*"),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "user bob off"), "{text}");
    assert_eq!(parse_str(&text, "rendered").unwrap(), cfg);
    assert!(render(&Config::default())
        .lines()
        .any(|l| l == "# user (not set)"));
    let e = error("user alice on\nuser alice off\n");
    assert!(e.contains(":2: ") && e.contains("defined twice"), "{e}");
}

#[test]
fn config_get_hides_passwords() {
    let cfg = parse(
        "requirepass rp\nbackend-user px\nbackend-password bp\n\
         user alice on >s3cret mode write ~app:*\nuser bob on nopass\n",
    );
    assert_eq!(get(&cfg, "requirepass").as_deref(), Some("(hidden)"));
    assert_eq!(get(&cfg, "backend-password").as_deref(), Some("(hidden)"));
    assert_eq!(get(&cfg, "backend-user").as_deref(), Some("px"));
    let users = get(&cfg, "user").unwrap();
    assert!(!users.contains("s3cret"), "{users}");
    assert_eq!(
        users,
        format!(
            "alice on #{} ~app:* mode write; bob on nopass ~* mode read",
            crate::config::sha256::hex(&crate::config::sha256::digest(b"s3cret"))
        )
    );
    assert_eq!(
        get(&Config::default(), "backend-password").as_deref(),
        Some("")
    );
    assert_eq!(get(&Config::default(), "user").as_deref(), Some(""));
    assert_eq!(
        get(&Config::default(), "protected-mode").as_deref(),
        Some("yes")
    );
    // Nothing in clear in any CONFIG GET value.
    for (_, v) in matching(&cfg, b"*") {
        assert!(
            !v.contains("s3cret") && !v.contains("bp") && v != "rp",
            "{v}"
        );
    }
}

#[test]
fn errors_on_password_lines_mask_the_password() {
    let e = error("user alice on >hunter2 mode root\n");
    assert!(e.contains("'user alice on >*** mode root'"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");
    let e = error("requirepass a b\n");
    assert!(
        e.contains("'requirepass ***'") && !e.contains(" a b"),
        "{e}"
    );
    let e = error("backend-password a b\n");
    assert!(e.contains("'backend-password ***'"), "{e}");
}

#[test]
fn forgetting_client_passwords_keeps_the_users() {
    let mut cfg = parse(
        "cluster-nodes a:1\nrequirepass rp\nbackend-password bp\nuser alice on >s3cret mode write\n",
    );
    let before = crate::acl::Acl::from_config(&cfg);
    cfg.forget_client_passwords();
    assert_eq!(cfg.requirepass, "");
    assert_eq!(cfg.backend_password, "bp");
    let text = render(&cfg);
    assert!(!text.contains("s3cret") && !text.contains("rp\n"), "{text}");
    let after = crate::acl::Acl::from_config(&cfg);
    let alice = |a: &crate::acl::Acl| a.authenticate(Some(b"alice"), b"s3cret").is_ok();
    assert!(alice(&before) && alice(&after));
}

#[test]
fn validation_of_security_settings() {
    let ok =
        |t: &str| validate(&parse(&format!("cluster-nodes a:1\n{t}"))).map_err(|e| e.to_string());
    // Loopback needs nothing.
    assert!(ok("").is_ok());
    assert!(ok("bind 127.0.0.1 ::1").is_ok());
    // Beyond loopback: a password, a locked default, or protected-mode no.
    for open in [
        "bind *",
        "bind 10.0.0.1",
        "bind 127.0.0.1 ::*",
        "bind 0.0.0.0",
    ] {
        let e = ok(open).unwrap_err();
        assert!(
            e.contains("protected mode") && e.contains("protected-mode no"),
            "{open}: {e}"
        );
    }
    assert!(ok("bind *\nrequirepass x").is_ok());
    assert!(ok("bind *\nprotected-mode no").is_ok());
    assert!(ok("bind *\nuser default on >pw").is_ok());
    assert!(ok("bind *\nuser default off\nuser app on >pw").is_ok());
    assert!(ok("bind *\nuser default on nopass mode read").is_err());
    assert!(ok("bind *\nuser app on >pw").is_err());
    // Credentials to the cluster.
    assert!(ok("backend-user u")
        .unwrap_err()
        .contains("backend-password"));
    assert!(ok("backend-user u\nbackend-password p").is_ok());
    // One way to set default's password.
    assert!(ok("requirepass x\nuser default on >y")
        .unwrap_err()
        .contains("requirepass"));
}

#[test]
fn output_limits_have_a_replica_class() {
    let d = Config::default();
    assert_eq!(d.output_limit_replica.hard, 256 * 1024 * 1024);
    assert_eq!(d.output_limit_replica.soft, 64 * 1024 * 1024);
    assert_eq!(d.output_limit_replica.soft_secs, 60);
    let cfg = parse("client-output-buffer-limit replica 1mb 0 0\n");
    assert_eq!(cfg.output_limit_replica.hard, 1024 * 1024);
    assert_eq!(cfg.output_limit_replica.soft, 0);
    // The other classes keep theirs.
    assert_eq!(cfg.output_limit_normal, d.output_limit_normal);
    let cfg = parse("client-output-buffer-limit slave 2mb 1mb 5 pubsub 3mb 0 0\n");
    assert_eq!(cfg.output_limit_replica.hard, 2 * 1024 * 1024);
    assert_eq!(cfg.output_limit_replica.soft_secs, 5);
    assert_eq!(cfg.output_limit_pubsub.hard, 3 * 1024 * 1024);
    let e = error("client-output-buffer-limit master 1mb 0 0\n");
    assert!(e.contains("use normal, pubsub or replica"), "{e}");
}

#[test]
fn metrics_allow_takes_addresses_and_cidr_blocks() {
    use crate::config::values::{in_cidr, parse_cidr};
    let cfg = parse("metrics-allow 10.0.0.0/8 ::1 192.168.1.7\n");
    assert_eq!(cfg.metrics_allow, ["10.0.0.0/8", "::1", "192.168.1.7"]);
    assert!(error("metrics-allow 10.0.0.0/33\n").contains("metrics-allow"));
    assert!(error("metrics-allow host\n").contains("not an IP address"));
    let net = parse_cidr("10.0.0.0/8").unwrap();
    assert!(in_cidr("10.1.2.3".parse().unwrap(), net));
    assert!(!in_cidr("11.0.0.1".parse().unwrap(), net));
    // A v4-mapped v6 client counts as its v4 address.
    assert!(in_cidr("::ffff:10.9.9.9".parse().unwrap(), net));
    let one = parse_cidr("::1").unwrap();
    assert!(in_cidr("::1".parse().unwrap(), one));
    assert!(!in_cidr("127.0.0.1".parse().unwrap(), one));
    assert!(in_cidr(
        "1.2.3.4".parse().unwrap(),
        parse_cidr("0.0.0.0/0").unwrap()
    ));
    assert_eq!(parse_cidr("10.0.0.0/"), None);
}

#[test]
fn client_output_total_limit() {
    assert_eq!(
        Config::default().client_output_total_limit,
        512 * 1024 * 1024
    );
    assert_eq!(
        parse("client-output-total-limit 64mb").client_output_total_limit,
        64 * 1024 * 1024
    );
    assert_eq!(
        parse("client-output-total-limit 0").client_output_total_limit,
        0
    );
    let e = error("client-output-total-limit lots\n");
    assert!(e.contains("client-output-total-limit"), "{e}");
}

/// What a configuration reload compares: a secret by its clear value, and
/// a pool by all its lines, not only what CONFIG GET shows.
#[test]
fn reload_comparison_sees_secrets_and_whole_pools() {
    let base = "cluster-nodes 127.0.0.1:7000\nbackend-password one\n\
                pool p server 127.0.0.1:6379:1\npool p listen 127.0.0.1:22121\n";
    let a = parse_str(base, "a").unwrap();
    let b = parse_str(
        &base.replace("backend-password one", "backend-password two"),
        "b",
    )
    .unwrap();
    let c = parse_str(&base.replace(":6379:1", ":6380:1"), "c").unwrap();
    let d = |n: &str| lookup(n).unwrap();
    assert_eq!(
        d("backend-password").value(&a),
        d("backend-password").value(&b)
    );
    assert!(!d("backend-password").same_in(&a, &b));
    assert!(d("backend-password").same_in(&a, &a.clone()));
    assert_eq!(d("pool").value(&a), d("pool").value(&c));
    assert!(!d("pool").same_in(&a, &c));
    assert!(DIRECTIVES.iter().all(|x| x.same_in(&a, &a.clone())));
    assert!(d("include").same_in(&a, &b));
}
