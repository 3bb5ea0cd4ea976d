//! The connection-level commands mithril answers itself: AUTH / HELLO /
//! RESET and the NOAUTH gate, CLIENT, CONFIG, INFO and the small ones
//! (TIME, LOLWUT, ACL WHOAMI, READONLY, ...).
//!
//! Error texts are compared with a live Redis: a cluster node for the
//! no-password cases, a standalone `redis-server --requirepass` for the
//! password cases (its HELLO map says "standalone", so maps are compared
//! key by key, not byte for byte).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::*;

const PASSWORD: &str = "s3cret-pw";

/// A standalone redis-server with a password, killed on drop.
struct Standalone {
    port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl Standalone {
    fn start(password: &str) -> Standalone {
        let dir = make_temp_dir();
        for _ in 0..5 {
            let port = free_port();
            let mut cmd = Command::new(redis_server_path());
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args([
                    "--requirepass",
                    password,
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = spawn_child(cmd).expect("cannot start redis-server");
            let up = poll_until(Duration::from_secs(10), || {
                if let Ok(Some(_)) = child.try_wait() {
                    return Some(false);
                }
                let mut c = Conn::try_connect(&format!("127.0.0.1:{port}")).ok()?;
                c.send(&[b"PING"]);
                match c.try_read_reply(Duration::from_secs(2)).ok()? {
                    Reply::Error(e) if e.starts_with("NOAUTH") => Some(true),
                    _ => None,
                }
            });
            if up == Some(true) {
                return Standalone { port, child, dir };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("cannot start a standalone redis-server");
    }

    fn conn(&self) -> Conn {
        Conn::connect(&format!("127.0.0.1:{}", self.port))
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_temp_dir(&self.dir);
    }
}

/// The keys of a HELLO reply (map or flat array), and the map itself.
fn hello_fields(r: &Reply) -> Vec<(String, Reply)> {
    let pairs: Vec<(Reply, Reply)> = match r {
        Reply::Map(kv) => kv.clone(),
        Reply::Array(Some(v)) => v.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect(),
        other => panic!("HELLO answered {other:?}"),
    };
    pairs
        .into_iter()
        .map(|(k, v)| (k.as_str().to_string(), v))
        .collect()
}

fn field<'a>(fields: &'a [(String, Reply)], name: &str) -> &'a Reply {
    &fields
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
        .1
}

/// Sends the same commands to both and requires the same replies.
fn same(ours: &mut Conn, live: &mut Conn, cmds: &[&[&str]]) {
    for c in cmds {
        let (o, l) = (ours.cmd(c), live.cmd(c));
        assert_eq!(o, l, "{c:?}");
    }
}

#[test]
fn auth_flows_match_redis_with_a_password() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start_locked(
        bin(),
        &cluster.seeds(),
        &format!("requirepass {PASSWORD}\n"),
    );
    let live = Standalone::start(PASSWORD);

    // Before AUTH: only AUTH, HELLO, QUIT and RESET run; lookup and arity
    // errors come first, as in Redis.
    let (mut o, mut l) = (m.conn(), live.conn());
    same(
        &mut o,
        &mut l,
        &[
            &["GET", "x"],
            &["PING"],
            &["CLIENT", "ID"],
            &["COMMAND", "COUNT"],
            &["CLUSTER", "SLOTS"],
            &["nosuchcommand", "a"],
            &["GET"],
            &["CLIENT", "nosuch"],
            &["HELLO", "3"],
            &["HELLO", "3", "AUTH", "default", "wrong"],
            &["HELLO", "4"],
            &["AUTH", "wrong"],
            &["AUTH", "default", "wrong"],
            &["AUTH", "nosuchuser", PASSWORD],
            &["AUTH", "a", "b", "c"],
            &["RESET"],
            &["GET", "x"],
            &["AUTH", PASSWORD],
            &["ACL", "WHOAMI"],
            &["ECHO", "hi"],
            // A failed attempt does not undo an earlier success.
            &["AUTH", "wrong"],
            &["PING"],
            &["RESET"],
            &["PING"],
            &["AUTH", "default", PASSWORD],
            &["PING"],
        ],
    );
    // Routed commands work once authenticated.
    assert_eq!(o.cmd(&["SET", "auth:k", "v"]), ok());
    assert_eq!(o.cmd(&["GET", "auth:k"]).as_bulk(), Some(&b"v"[..]));

    // HELLO AUTH authenticates and switches protocol in one go.
    for proto in ["2", "3"] {
        let (mut o, mut l) = (m.conn(), live.conn());
        let args = [
            "HELLO", proto, "AUTH", "default", PASSWORD, "SETNAME", "app",
        ];
        let (ho, hl) = (hello_fields(&o.cmd(&args)), hello_fields(&l.cmd(&args)));
        let keys = |f: &[(String, Reply)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&ho), keys(&hl));
        assert_eq!(field(&ho, "proto"), field(&hl, "proto"));
        assert_eq!(field(&ho, "mode").as_str(), "cluster");
        same(&mut o, &mut l, &[&["CLIENT", "GETNAME"], &["PING"]]);
    }

    // QUIT works unauthenticated and closes the connection.
    let mut q = m.conn();
    assert_eq!(q.cmd(&["QUIT"]), ok());
    assert!(q.is_closed(Duration::from_secs(5)));

    // The password never shows.
    let mut o = m.conn();
    assert_eq!(o.cmd(&["AUTH", PASSWORD]), ok());
    let got = o.cmd(&["CONFIG", "GET", "requirepass"]);
    assert_eq!(
        got,
        Reply::Array(Some(vec![
            Reply::Bulk(Some(b"requirepass".to_vec())),
            Reply::Bulk(Some(b"(hidden)".to_vec())),
        ]))
    );
    let all = format!("{:?}", o.cmd(&["CONFIG", "GET", "*"]));
    assert!(!all.contains(PASSWORD), "{all}");
}

#[test]
fn connection_commands_without_a_password() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    // The node's level, so that CONFIG GET loglevel agrees.
    let m = Mithril::start(bin(), &cluster.seeds(), "loglevel notice\n");
    let node = &cluster.nodes[0];
    let (mut o, mut l) = (m.conn(), node.conn());
    same(
        &mut o,
        &mut l,
        &[
            &["AUTH", "anything"],
            &["AUTH", "default", "anything"],
            &["AUTH", "nosuchuser", "anything"],
            &["HELLO", "4"],
            &["HELLO", "1"],
            &["HELLO", "-1"],
            &["HELLO", "abc"],
            &["HELLO", "3", "foo"],
            &["HELLO", "3", "AUTH", "default"],
            &["HELLO", "3", "SETNAME"],
            &["HELLO", "3", "SETNAME", "a b"],
            &["HELLO", "3", "AUTH", "nosuchuser", "x"],
            &["CLIENT", "SETNAME", "a b"],
            &["CLIENT", "SETNAME", "caf\u{e9}"],
            &["CLIENT", "GETNAME"],
            &["CLIENT", "SETNAME", "app-1"],
            &["CLIENT", "GETNAME"],
            &["CLIENT", "SETNAME", ""],
            &["CLIENT", "GETNAME"],
            &["CLIENT", "SETNAME"],
            &["CLIENT", "NO-EVICT", "on"],
            &["CLIENT", "NO-EVICT", "maybe"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "nosuch"],
            &["ACL", "WHOAMI"],
            &["ASKING"],
            &["READONLY"],
            &["READWRITE"],
            &["SELECT", "0"],
            &["CONFIG", "SET", "nosuch", "1"],
            &["CONFIG", "SET", "loglevel"],
            &["CONFIG", "SET", "loglevel", "notice", "maxclients"],
            &["CONFIG", "SET", "loglevel", "notice", "LOGLEVEL", "notice"],
            &["CONFIG", "SET", "loglevel", "notice", "nosuch", "1"],
            &["CONFIG", "GET"],
            &["CONFIG", "GET", "nosuch"],
            &["CONFIG", "GET", "LOGLEVEL"],
            &["CONFIG", "GET", "loglevel", "loglevel"],
            &["CONFIG", "RESETSTAT"],
            &["INFO", "nosuchsection"],
            &["INFO", "keyspace"],
            &["CLUSTER", "KEYSLOT", "foo"],
            &["CLUSTER", "KEYSLOT", "{user1000}.following"],
            &["CLUSTER", "KEYSLOT"],
            &["CLUSTER", "nosuch"],
            &["CLUSTER", "REPLICAS", "nosuchnode"],
            &["CLUSTER", "LINKS"],
        ],
    );
    // The same checks after HELLO 3 on both.
    let hello = ["HELLO", "3"];
    let (ho, hl) = (hello_fields(&o.cmd(&hello)), hello_fields(&l.cmd(&hello)));
    assert_eq!(ho.len(), hl.len());
    for ((ko, vo), (kl, vl)) in ho.iter().zip(&hl) {
        assert_eq!(ko, kl);
        match ko.as_str() {
            // The masters' version (issue 14: the face tells the truth),
            // so it equals the live node's: the generic arm.
            "id" => assert_eq!(*vo, o.cmd(&["CLIENT", "ID"])),
            _ => assert_eq!(vo, vl, "HELLO 3 field {ko}"),
        }
    }
    same(
        &mut o,
        &mut l,
        &[
            &["CLIENT", "GETNAME"],
            &["CONFIG", "GET", "nosuch"],
            &["INFO", "nosuchsection"],
        ],
    );
    // The cluster section starts as a node's, then adds the proxy's view.
    let node_cluster = l.cmd(&["INFO", "cluster"]);
    let ours = o.cmd(&["INFO", "cluster"]);
    assert!(
        ours.as_str().starts_with(node_cluster.as_str()),
        "{ours:?} vs {node_cluster:?}"
    );
    let args = [
        "HELLO", "2", "AUTH", "default", "x", "AUTH", "default", "y", "SETNAME", "n2",
    ];
    let (ho, hl) = (hello_fields(&o.cmd(&args)), hello_fields(&l.cmd(&args)));
    assert_eq!(field(&ho, "proto"), &Reply::Int(2));
    assert_eq!(field(&ho, "proto"), field(&hl, "proto"));
    same(
        &mut o,
        &mut l,
        &[
            &["CLIENT", "GETNAME"],
            &["RESET"],
            &["CLIENT", "GETNAME"],
            &["PING"],
        ],
    );

    // Immutable and invalid values: the node's texts, mithril's names.
    assert_eq!(
        o.cmd(&["CONFIG", "SET", "THREADS", "4"]),
        err("ERR CONFIG SET failed (possibly related to argument 'THREADS') - can't set immutable config")
    );
    assert_eq!(
        l.cmd(&["CONFIG", "SET", "DAEMONIZE", "yes"]),
        err("ERR CONFIG SET failed (possibly related to argument 'DAEMONIZE') - can't set immutable config")
    );
    assert_eq!(
        o.cmd(&["CONFIG", "SET", "LOGLEVEL", "loud"]),
        err("ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning, nothing")
    );
    // CONFIG SET shows in CONFIG GET; several patterns at once.
    assert_eq!(o.cmd(&["CONFIG", "SET", "loglevel", "WARNING"]), ok());
    let got = o.cmd(&["CONFIG", "GET", "log*", "port", "loglevel"]);
    let pairs: Vec<(String, String)> = got
        .as_array()
        .chunks(2)
        .map(|c| (c[0].as_str().to_string(), c[1].as_str().to_string()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("loglevel".to_string(), "warning".to_string()),
            ("logfile".to_string(), m.log_path.display().to_string()),
            ("port".to_string(), m.port.to_string()),
        ]
    );
    assert_eq!(o.cmd(&["CONFIG", "SET", "loglevel", "verbose"]), ok());
    assert_eq!(
        o.cmd(&["CONFIG", "GET", "requirepass"]).as_array()[1].as_str(),
        ""
    );
    // CONFIG REWRITE writes the loglevel just set over the file's lines.
    assert_eq!(o.cmd(&["CONFIG", "REWRITE"]), ok());
    let conf = std::fs::read_to_string(&m.conf_path).expect("read the config");
    assert!(conf.contains("\nloglevel verbose\n"), "{conf}");
    assert!(!conf.contains("loglevel notice"), "{conf}");

    // What only mithril answers.
    assert_eq!(o.cmd(&["CLIENT", "SETINFO", "LIB-NAME", "mylib"]), ok());
    assert_eq!(o.cmd(&["CLIENT", "SETINFO", "lib-ver", "1.2.3"]), ok());
    assert_eq!(
        o.cmd(&["CLIENT", "SETINFO", "lib-name", "my lib"]),
        err("ERR lib-name cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        o.cmd(&["CLIENT", "SETINFO", "color", "red"]),
        err("ERR Unrecognized option 'color'")
    );
    assert_eq!(o.cmd(&["CLIENT", "NO-TOUCH", "on"]), ok());
    // PAUSE and UNPAUSE go to the masters (admin_passthrough.rs); a
    // client that is not blocked is not unblocked.
    assert_eq!(o.cmd(&["CLIENT", "PAUSE", "10"]), ok());
    assert_eq!(o.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(o.cmd(&["CLIENT", "UNBLOCK", "1"]), Reply::Int(0));
    // Users change at run time with SETUSER (security_acl.rs); what keeps
    // them across restarts is the configuration file.
    let e = o.cmd(&["ACL", "SAVE"]);
    assert!(e.as_error().starts_with("ERR mithril: "), "{e:?}");
    assert!(e.as_error().contains("'user' lines"), "{e:?}");
    assert_eq!(
        o.cmd(&["ACL", "USERS"]),
        Reply::Array(Some(vec![Reply::Bulk(Some(b"default".to_vec()))]))
    );
    // TIME is the wall clock.
    let t = o.cmd(&["TIME"]);
    let secs: u64 = t.as_array()[0].as_str().parse().unwrap();
    let micros: u64 = t.as_array()[1].as_str().parse().unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 2 && micros < 1_000_000, "{t:?}");
    assert_eq!(
        o.cmd(&["LOLWUT"]).as_str(),
        format!("mithril ver. {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// Splits a CLIENT INFO line into its `key=value` fields, in order.
fn client_fields(line: &str) -> Vec<(String, String)> {
    assert!(line.ends_with('\n'), "{line:?}");
    line.trim_end()
        .split(' ')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("{kv:?} in {line:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn client_info_and_info_sections() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 2\n");
    let mut o = m.conn();
    let id = o.cmd(&["CLIENT", "ID"]).as_int();
    assert_eq!(o.cmd(&["CLIENT", "SETNAME", "app-7"]), ok());
    assert_eq!(o.cmd(&["CLIENT", "SETINFO", "lib-name", "tester"]), ok());
    let line = o.cmd(&["CLIENT", "INFO"]).as_str().to_string();
    let f = client_fields(&line);
    let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp",
            "lib-name",
            "lib-ver",
            "worker"
        ]
    );
    let get = |k: &str| f.iter().find(|(n, _)| n == k).unwrap().1.clone();
    assert_eq!(get("id"), id.to_string());
    assert_eq!(get("addr"), o.stream().local_addr().unwrap().to_string());
    assert_eq!(get("laddr"), m.addr());
    assert_eq!(get("name"), "app-7");
    assert_eq!(get("cmd"), "client|info");
    assert_eq!(get("resp"), "2");
    assert_eq!(get("lib-name"), "tester");
    assert_eq!(get("lib-ver"), "");
    assert_eq!(get("user"), "default");
    assert!(get("worker") == "0" || get("worker") == "1", "{line}");
    // RESP3: a verbatim string, resp=3.
    let _ = o.cmd(&["HELLO", "3"]);
    match o.cmd(&["CLIENT", "INFO"]) {
        Reply::Verbatim(v) => {
            assert!(v.starts_with("txt:"));
            assert!(v.contains(" resp=3 "), "{v}");
        }
        other => panic!("CLIENT INFO in RESP3: {other:?}"),
    }

    // INFO: Redis's layout, mithril's values.
    let mut p = m.conn();
    let text = p.cmd(&["INFO"]).as_str().to_string();
    let titles: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
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
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    assert!(text.contains("\r\n\r\n# Clients\r\n"), "{text:?}");
    // The version the nodes run, not one of mithril's own.
    let node_info = cluster.nodes[0].conn().cmd(&["INFO", "server"]);
    let node_version = node_info
        .as_str()
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap()
        .trim()
        .to_string();
    assert!(!node_version.is_empty());
    for want in [
        &format!("redis_version:{node_version}\r\n"),
        "redis_mode:cluster\r\n",
        &format!("tcp_port:{}\r\n", m.port),
        &format!("process_id:{}\r\n", m.pid),
        &format!("mithril_version:{}\r\n", env!("CARGO_PKG_VERSION")),
        "threads:2\r\n",
        &format!("config_file:{}\r\n", m.conf_path.display()),
        "cluster_enabled:1\r\n",
        "maxclients:10000\r\n",
    ] {
        assert!(text.contains(want), "{want:?} missing from {text}");
    }
    let value = |text: &str, k: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .unwrap_or_else(|| panic!("no {k} in {text}"))
            .to_string()
    };
    assert_eq!(value(&text, "run_id").len(), 40);
    assert!(value(&text, "connected_clients").parse::<u64>().unwrap() >= 2);
    let before: u64 = value(&text, "total_commands_processed").parse().unwrap();
    assert!(before >= 5, "{before}");
    for _ in 0..10 {
        p.cmd(&["PING"]);
    }
    let after = wait_until(
        "the command counter to move",
        Duration::from_secs(5),
        || {
            let t = p.cmd(&["INFO", "stats"]).as_str().to_string();
            let n: u64 = value(&t, "total_commands_processed").parse().unwrap();
            (n >= before + 10).then_some(n)
        },
    );
    assert!(after >= before + 10);
    // Sections in Redis's order, whatever the order asked; case ignored.
    let two = p
        .cmd(&["INFO", "CLUSTER", "server", "nosuch"])
        .as_str()
        .to_string();
    assert!(
        two.starts_with("# Server\r\n")
            && two.contains("\r\n\r\n# Cluster\r\ncluster_enabled:1\r\n")
            && !two.contains("# Clients")
    );
    for (all, sections) in [("all", 15), ("everything", 15), ("default", 10)] {
        let t = p.cmd(&["INFO", all]).as_str().to_string();
        assert_eq!(
            t.lines().filter(|l| l.starts_with('#')).count(),
            sections,
            "{all}"
        );
    }
    let _ = p.cmd(&["HELLO", "3"]);
    match p.cmd(&["INFO", "cluster"]) {
        Reply::Verbatim(v) => assert!(v.starts_with("txt:# Cluster\r\ncluster_enabled:1\r\n")),
        other => panic!("INFO in RESP3: {other:?}"),
    }
}
