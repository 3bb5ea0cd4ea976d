//! twemproxy and predixy configuration files given to the real binary: it
//! serves a real predixy Redis Cluster and twemproxy's pools of plain
//! servers from them, and `-t --print-config` turns them into native files
//! that read back to the same settings.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mithril::config::pool::{PoolKind, PoolSpec};
use mithril::hashkit::{sorted_order, HashFn, Ring};
use support::*;

/// The directive lines of a printed config (comments dropped).
fn directives(printed: &str) -> Vec<String> {
    printed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// `-t --print-config` of `file`: the printed text, checked to exit 0.
fn print_config(file: &Path) -> (String, String) {
    let o = run_mithril(&["-t", "--print-config", "-c", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}: {stderr}", file.display());
    (String::from_utf8_lossy(&o.stdout).into_owned(), stderr)
}

/// Prints `file` as a native config, checks that the printed file passes
/// `-t` and prints back to the same directives, and returns them.
fn round_trip(file: &Path, dir: &Path) -> Vec<String> {
    let (printed, _) = print_config(file);
    let native = dir.join(format!(
        "{}.native.conf",
        file.file_name().unwrap().to_string_lossy()
    ));
    fs::write(&native, &printed).unwrap();
    let (again, stderr) = print_config(&native);
    assert!(
        stderr.contains("syntax is ok") && !stderr.contains("warning"),
        "{stderr}"
    );
    assert_eq!(directives(&again), directives(&printed), "{printed}");
    directives(&printed)
}

/// Starts `mithril -c file` and waits until PING answers on `port`.
struct Proxy {
    child: std::process::Child,
    port: u16,
    out: PathBuf,
}

impl Proxy {
    fn start(file: &Path, port: u16, dir: &Path) -> Proxy {
        let out = dir.join(format!(
            "{}.out",
            file.file_name().unwrap().to_string_lossy()
        ));
        let f = fs::File::create(&out).unwrap();
        let mut cmd = Command::new(bin());
        cmd.arg("-c")
            .arg(file)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f);
        let mut p = Proxy {
            child: spawn_child(cmd).unwrap(),
            port,
            out,
        };
        let addr = format!("127.0.0.1:{port}");
        let ready = poll_until(Duration::from_secs(20), || {
            if let Ok(Some(st)) = p.child.try_wait() {
                panic!(
                    "mithril exited ({st}): {}",
                    fs::read_to_string(&p.out).unwrap_or_default()
                );
            }
            let mut c = Conn::try_connect(&addr).ok()?;
            c.send(&[b"PING"]);
            matches!(c.try_read_reply(Duration::from_secs(2)), Ok(Reply::Simple(s)) if s == "PONG")
                .then_some(())
        });
        assert!(
            ready.is_some(),
            "no PONG on {addr}: {}",
            fs::read_to_string(&p.out).unwrap_or_default()
        );
        p
    }

    fn conn(&self) -> Conn {
        Conn::connect(&format!("127.0.0.1:{}", self.port))
    }

    /// SIGTERM, then the exit code and what the process printed.
    fn stop(mut self) -> (Option<i32>, String) {
        // SAFETY: our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let status = wait_until("mithril to exit", Duration::from_secs(15), || {
            self.child.try_wait().ok().flatten()
        });
        (
            status.code(),
            fs::read_to_string(&self.out).unwrap_or_default(),
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serves(p: &Proxy, cluster: &RedisCluster, tag: &str) {
    let mut c = p.conn();
    for i in 0..50 {
        let key = format!("{tag}:{i}");
        assert_eq!(
            c.cmd(&["SET", &key, &i.to_string()]),
            Reply::Simple("OK".into())
        );
    }
    for i in 0..50 {
        let key = format!("{tag}:{i}");
        assert_eq!(
            c.cmd(&["GET", &key]),
            Reply::Bulk(Some(i.to_string().into_bytes()))
        );
        // And it really is in the cluster, on the slot's owner.
        let mut owner = Conn::connect(&format!(
            "127.0.0.1:{}",
            cluster.port_for_slot(key_slot(key.as_bytes()))
        ));
        assert_eq!(
            owner.cmd(&["GET", &key]),
            Reply::Bulk(Some(i.to_string().into_bytes()))
        );
    }
}

/// A twemproxy file of two pools: `leaf`, a redis pool over `servers`
/// listening on `port`, and `cache`, a memcached pool mithril skips.
fn nutcracker_yml(dir: &Path, port: u16, servers: &[String]) -> PathBuf {
    let servers: String = servers
        .iter()
        .enumerate()
        .map(|(i, s)| format!("   - {s}:1 server{i}\n"))
        .collect();
    let yml = dir.join("nutcracker.yml");
    fs::write(
        &yml,
        format!(
            "leaf:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n  hash_tag: \"{{}}\"\n  \
             distribution: ketama\n  timeout: 400\n  redis: true\n  server_connections: 2\n  \
             auto_eject_hosts: true\n  server_retry_timeout: 2000\n  server_failure_limit: 1\n  \
             servers:\n{servers}\
             cache:\n  listen: 127.0.0.1:{}\n  servers:\n   - 127.0.0.1:11211:1\n",
            port + 1
        ),
    )
    .unwrap();
    yml
}

#[test]
fn a_nutcracker_yml_checks_and_prints_as_pool_lines() {
    let dir = make_temp_dir();
    let port = free_port();
    let servers = ["127.0.0.1:6390".to_string(), "127.0.0.1:6391".to_string()];
    let yml = nutcracker_yml(&dir, port, &servers);
    let shown = yml.display().to_string();

    // -t: syntax ok, the skipped memcached pool named with file and line.
    let o = run_mithril(&["-t", "-c", &shown]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("configuration file {shown} (twemproxy (nutcracker) configuration) syntax is ok\n")
    );
    assert_eq!(
        stderr,
        format!(
            "mithril: warning: {shown}:15: pool 'cache' is a memcached pool (no 'redis: true'; \
             memcached is twemproxy's default): mithril speaks Redis; skipped\n"
        )
    );

    // --print-config: the pool lines, which read back to the same lines,
    // and no cluster.
    let printed = round_trip(&yml, &dir);
    let pool: Vec<&String> = printed.iter().filter(|l| l.starts_with("pool ")).collect();
    assert_eq!(
        pool,
        [
            format!("pool leaf listen 127.0.0.1:{port}"),
            "pool leaf server 127.0.0.1:6390:1 server0".to_string(),
            "pool leaf server 127.0.0.1:6391:1 server1".to_string(),
            "pool leaf hash-tag {}".to_string(),
            "pool leaf auto-eject-hosts yes".to_string(),
            "pool leaf server-retry-timeout 2000".to_string(),
            "pool leaf server-failure-limit 1".to_string(),
            "pool leaf timeout 400".to_string(),
            "pool leaf server-connections 2".to_string(),
        ]
        .iter()
        .collect::<Vec<_>>()
    );
    assert!(
        !printed.iter().any(|l| l.starts_with("cluster-nodes")),
        "{printed:#?}"
    );
    remove_temp_dir(&dir);
}

/// Traffic through the pools of a nutcracker.yml, each key on the server
/// twemproxy would have put it on.
#[test]
fn a_nutcracker_yml_serves_its_pools() {
    let set = StandaloneSet::start(3);
    let dir = make_temp_dir();
    let port = free_port();
    let servers: Vec<String> = (0..set.len())
        .map(|i| format!("127.0.0.1:{}", set.port(i)))
        .collect();
    let yml = nutcracker_yml(&dir, port, &servers);
    let pool = mithril::config::compat::read_file(&yml)
        .unwrap()
        .config
        .pools[0]
        .clone();
    let p = Proxy::start(&yml, port, &dir);
    let mut c = p.conn();
    for i in 0..50 {
        let key = format!("{{nc}}:{i}");
        assert_eq!(
            c.cmd(&["SET", &key, &i.to_string()]),
            Reply::Simple("OK".into())
        );
    }
    let (names, ring, hash, tag) = ring_of(&pool);
    for i in 0..50 {
        let key = format!("{{nc}}:{i}");
        assert_eq!(
            c.cmd(&["GET", &key]),
            Reply::Bulk(Some(i.to_string().into_bytes()))
        );
        // On the server twemproxy would have picked, by name.
        let at = ring.locate(hash, tag, key.as_bytes(), 0).unwrap();
        let server = names[at].trim_start_matches("server");
        let mut owner = set.conn(server.parse().unwrap());
        assert_eq!(
            owner.cmd(&["GET", &key]),
            Reply::Bulk(Some(i.to_string().into_bytes()))
        );
    }
    let (code, out) = p.stop();
    assert_eq!(code, Some(0), "{out}");
    // The skipped pool was named at start, once.
    assert_eq!(
        out.lines()
            .filter(|l| l.contains("pool 'cache' is a memcached pool"))
            .count(),
        1,
        "{out}"
    );
    remove_temp_dir(&dir);
}

/// twemproxy's own conf/nutcracker.yml, unchanged, starts mithril and
/// serves both of its redis pools (alpha: one server at 6379; beta: four
/// named servers at 6380-6383, hash tag "{}"), on the ports the file names.
/// A port already taken by a redis-server (a distribution's own on 6379)
/// is used as it is; one taken by anything else fails the test, naming it.
#[test]
fn twemproxys_own_nutcracker_yml_serves_every_redis_pool_unchanged() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/twemproxy_nutcracker.yml");
    let mut servers = Vec::new();
    for port in 6379..=6383u16 {
        match Standalone::start_on(port) {
            Some(s) => servers.push(s),
            None => {
                let mut c = Conn::try_connect(&format!("127.0.0.1:{port}"))
                    .unwrap_or_else(|e| panic!("port {port} taken, and not by a server: {e}"));
                c.send(&[b"PING"]);
                let r = c.try_read_reply(Duration::from_secs(2));
                assert!(
                    matches!(&r, Ok(Reply::Simple(s)) if s == "PONG"),
                    "port {port}, which the file names, is taken by something that is not a \
                     redis-server: {r:?}"
                );
            }
        }
    }
    let dir = make_temp_dir();
    let p = Proxy::start(&file, 22121, &dir);
    let mut alpha = p.conn();
    let mut beta = Conn::connect("127.0.0.1:22122");
    let pools = mithril::config::compat::read_file(&file)
        .unwrap()
        .config
        .pools;
    let (names, ring, hash, tag) = ring_of(&pools[1]);
    for i in 0..40 {
        let key = format!("mithril-compat:{{t{}}}:{i}", i % 7);
        assert_eq!(alpha.cmd(&["SET", &key, "a"]), Reply::Simple("OK".into()));
        assert_eq!(beta.cmd(&["SET", &key, "b"]), Reply::Simple("OK".into()));
        assert_eq!(alpha.cmd(&["GET", &key]), Reply::Bulk(Some(b"a".to_vec())));
        assert_eq!(beta.cmd(&["GET", &key]), Reply::Bulk(Some(b"b".to_vec())));
        // beta's key on the server twemproxy picks for it (server1..4 are
        // 6380..6383).
        let at = ring.locate(hash, tag, key.as_bytes(), 0).unwrap();
        let n: u16 = names[at].trim_start_matches("server").parse().unwrap();
        let mut owner = Conn::connect(&format!("127.0.0.1:{}", 6379 + n));
        assert_eq!(owner.cmd(&["GET", &key]), Reply::Bulk(Some(b"b".to_vec())));
        // alpha's on its only server.
        let mut one = Conn::connect("127.0.0.1:6379");
        assert_eq!(one.cmd(&["GET", &key]), Reply::Bulk(Some(b"a".to_vec())));
        for c in [&mut owner, &mut one] {
            let _ = c.cmd(&["DEL", &key]);
        }
    }
    let (code, out) = p.stop();
    assert_eq!(code, Some(0), "{out}");
    drop(servers);
    remove_temp_dir(&dir);
}

/// hashkit's ring for a ring pool: its server names in ring order, the
/// ring, its hash and hash tag.
fn ring_of(pool: &PoolSpec) -> (Vec<String>, Ring, HashFn, Option<[u8; 2]>) {
    let PoolKind::Ring {
        servers,
        hash,
        hash_tag,
        distribution,
        ..
    } = &pool.kind
    else {
        panic!("{} is not a ring pool", pool.name)
    };
    let names: Vec<String> = servers.iter().map(|s| s.ring_name()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let order = sorted_order(&refs);
    let sorted: Vec<(&str, u32)> = order
        .iter()
        .map(|&i| (refs[i], servers[i].weight))
        .collect();
    let ring = Ring::build(*distribution, &sorted, &vec![true; sorted.len()]);
    let names = order.iter().map(|&i| names[i].clone()).collect();
    (names, ring, *hash, *hash_tag)
}

#[test]
fn twemproxys_own_nutcracker_yml_checks_and_lists_its_redis_pools() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/twemproxy_nutcracker.yml");
    let shown = path.display().to_string();
    let o = run_mithril(&["-t", "-c", &shown]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // gamma, delta and omega have no `redis: true`: skipped, each named.
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 3, "{stderr}");
    for (w, (line, pool)) in warnings
        .iter()
        .zip([(29, "gamma"), (43, "delta"), (63, "omega")])
    {
        assert!(
            w.starts_with(&format!(
                "mithril: warning: {shown}:{line}: pool '{pool}' is a memcached pool"
            )),
            "{w}"
        );
    }
    let dir = make_temp_dir();
    let printed = round_trip(&path, &dir);
    let pools: Vec<&str> = printed
        .iter()
        .filter(|l| l.contains(" listen "))
        .map(String::as_str)
        .collect();
    assert_eq!(
        pools,
        [
            "pool alpha listen 127.0.0.1:22121",
            "pool beta listen 127.0.0.1:22122"
        ]
    );
    for want in [
        "pool alpha server 127.0.0.1:6379:1",
        "pool beta server 127.0.0.1:6383:1 server4",
        "pool beta hash-tag {}",
    ] {
        assert!(
            printed.iter().any(|l| l == want),
            "no {want:?} in {printed:#?}"
        );
    }
    remove_temp_dir(&dir);
}

#[test]
fn a_predixy_conf_with_includes_serves_the_cluster_and_prints_as_native() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let dir = make_temp_dir();
    let port = free_port();
    let servers: String = cluster
        .seeds()
        .iter()
        .map(|s| format!("        + {s}\n"))
        .collect();
    fs::create_dir_all(dir.join("conf.d")).unwrap();
    fs::write(
        dir.join("conf.d/cluster.conf"),
        format!(
            "ClusterServerPool {{\n    MasterReadPriority 60\n    StaticSlaveReadPriority 50\n    \
             DynamicSlaveReadPriority 50\n    RefreshInterval 2\n    ServerTimeout 500ms\n    \
             ServerFailureLimit 10\n    ServerRetryTimeout 1\n    KeepAlive 60\n    Servers {{\n{servers}    }}\n}}\n"
        ),
    )
    .unwrap();
    fs::write(
        dir.join("conf.d/auth.conf"),
        "Authority {\n    Auth {\n        Mode write\n    }\n    Auth \"admin pass\" {\n        Mode admin\n    }\n}\n",
    )
    .unwrap();
    let main = dir.join("predixy.conf");
    fs::write(
        &main,
        format!(
            "Name Leaf\nBind 127.0.0.1:{port}\nWorkerThreads 2\nClientTimeout 0\nLog {}\n\
             LogVerbSample 0\nLogDebugSample 0\nLogInfoSample 1\nLogNoticeSample 1\n\
             Include conf.d/auth.conf\nInclude conf.d/cluster.conf\n",
            dir.join("px.log").display()
        ),
    )
    .unwrap();
    let p = Proxy::start(&main, port, &dir);
    serves(&p, &cluster, "{px}");
    let (code, out) = p.stop();
    assert_eq!(code, Some(0), "{out}");
    // Authority became users (default: write, no password; auth1: admin),
    // and the start says so.
    assert!(
        out.contains("'Authority': mapped onto user lines: default (write), auth1 (admin)"),
        "{out}"
    );
    let log = fs::read_to_string(dir.join("px.log")).unwrap();
    assert!(log.contains("mithril stopped"), "Log became logfile: {log}");

    let printed = round_trip(&main, &dir);
    for want in [
        format!("port {port}"),
        "threads 2".to_string(),
        "topology-refresh-secs 2".to_string(),
        "connect-timeout 500".to_string(),
        "tcp-keepalive 60".to_string(),
        "loglevel notice".to_string(),
        format!("cluster-nodes {}", cluster.seeds().join(" ")),
    ] {
        assert!(printed.contains(&want), "no {want:?} in {printed:#?}");
    }
    remove_temp_dir(&dir);
}

#[test]
fn the_example_files_check_and_print() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat");
    let dir = make_temp_dir();
    for (file, format, warned) in [
        (
            "nutcracker.yml",
            "twemproxy (nutcracker) configuration",
            true,
        ),
        (
            "twemproxy_nutcracker.yml",
            "twemproxy (nutcracker) configuration",
            true,
        ),
        (
            "nutcracker_two_pools.yml",
            "twemproxy (nutcracker) configuration",
            false,
        ),
        ("predixy/predixy.conf", "predixy configuration", true),
        ("predixy_sentinel.conf", "predixy configuration", false),
    ] {
        let path = root.join(file);
        let o = run_mithril(&["-t", "-c", path.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(
            stdout,
            format!(
                "configuration file {} ({format}) syntax is ok\n",
                path.display()
            )
        );
        let (printed, _) = print_config(&path);
        assert!(
            printed.contains(&format!("# translated from {format}")),
            "{printed}"
        );
        assert_eq!(printed.contains("# warning: "), warned, "{printed}");
        round_trip(&path, &dir);
    }
    for (file, needle) in [
        ("nutcracker_memcached.yml", "no pool mithril can serve"),
        (
            "nutcracker_hash_tag.yml",
            "hash_tag must be exactly two characters",
        ),
        ("predixy_no_group.conf", "defines no Group"),
    ] {
        let path = root.join(file);
        let o = run_mithril(&["-t", "-c", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{file}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(&format!("{}:", path.display())), "{stderr}");
        assert!(stderr.contains(needle), "{file}: {stderr}");
    }
    remove_temp_dir(&dir);
}

/// `mithril -t` and nutcracker 0.5.0's own `-t` on the same files: what
/// nutcracker refuses, mithril refuses, but for YAML syntax nutcracker
/// does not take and for `reuseport` (a key newer than 0.5.0); what it
/// accepts, mithril accepts, as long as a redis pool on TCP is left.
#[test]
fn nutcracker_and_mithril_agree_on_what_a_file_may_say() {
    let base = "p:\n  listen: 127.0.0.1:22121\n  redis: true\n  servers:\n   - 127.0.0.1:6379:1\n";
    let with = |extra: &str| format!("{base}{extra}");
    let other = |pool: &str| format!("{base}{pool}");
    let cases: Vec<(String, bool, bool)> = vec![
        // Both accept.
        (base.to_string(), true, true),
        (with("  hash: murmur\n  distribution: modula\n  hash_tag: \":$\"\n"), true, true),
        (with("  timeout: 0\n  backlog: 64\n  redis_db: 2\n  redis_auth: pw\n"), true, true),
        (with("  server_retry_timeout: 0\n  server_failure_limit: 0\n"), true, true),
        (with("  client_connections: 5\n  tcpkeepalive: true\n  preconnect: true\n"), true, true),
        (base.replace("6379:1", "06379:1"), true, true),
        (base.replace("127.0.0.1:22121", "localhost:22121"), true, true),
        (other("m:\n  listen: 127.0.0.1:22122\n  servers:\n   - 127.0.0.1:11211:1\n"), true, true),
        (other("u:\n  listen: /tmp/mithril-nc-test.sock 0600\n  redis: true\n  servers:\n   - 127.0.0.1:6380:1\n"), true, true),
        // Both refuse.
        (with("  frob: 1\n"), false, false),
        (with("  timeout: -1\n"), false, false),
        (with("  redis: yes\n"), false, false),
        (with("  hash: FNV1A_64\n"), false, false),
        (with("  distribution: Ketama\n"), false, false),
        (with("  hash_tag: abc\n"), false, false),
        (with("  server_connections: 0\n"), false, false),
        (with("  redis_auth:\n"), false, false),
        (with("  listen: 127.0.0.1:22122\n"), false, false),
        (base.replace("6379:1", "6379:0"), false, false),
        (base.replace("6379:1", "6379"), false, false),
        (base.replace("6379:1", "0:1"), false, false),
        (base.replace("6379:1", "6379:1 my name"), false, false),
        (base.replace("   - 127.0.0.1:6379:1\n", "   - 127.0.0.1:6379:1 a\n   - 127.0.0.1:6380:1 a\n"), false, false),
        (base.replace("  listen: 127.0.0.1:22121\n", ""), false, false),
        (base.replace("  servers:\n   - 127.0.0.1:6379:1\n", ""), false, false),
        (other("q:\n  listen: 127.0.0.1:22121\n  redis: true\n  servers:\n   - 127.0.0.1:6380:1\n"), false, false),
        (other("m:\n  listen: 127.0.0.1:22122\n  redis_auth: pw\n  servers:\n   - 127.0.0.1:11211:1\n"), false, false),
        ("p: 1\n".to_string(), false, false),
        // mithril reads more YAML than nutcracker, and reuseport.
        (format!("---\n{base}"), false, true),
        ("p: {listen: 127.0.0.1:22121, redis: true, servers: [127.0.0.1:6379:1]}\n".to_string(), false, true),
        (with("  reuseport: true\n"), false, true),
        // Nothing mithril can serve.
        (base.replace("  redis: true\n", ""), true, false),
        (base.replace("127.0.0.1:22121", "/tmp/mithril-nc-test.sock"), true, false),
    ];
    let dir = make_temp_dir();
    let yml = dir.join("parity.yml");
    for (text, nutcracker_ok, mithril_ok) in cases {
        fs::write(&yml, &text).unwrap();
        let nc = Command::new(nutcracker_path())
            .arg("-t")
            .arg("-c")
            .arg(&yml)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            nc.status.success(),
            nutcracker_ok,
            "nutcracker -t on {text:?}: {}",
            String::from_utf8_lossy(&nc.stderr)
        );
        let m = run_mithril(&["-t", "-c", yml.to_str().unwrap()]);
        assert_eq!(
            m.status.success(),
            mithril_ok,
            "mithril -t on {text:?}: {}",
            String::from_utf8_lossy(&m.stderr)
        );
    }
    remove_temp_dir(&dir);
}
