//! Issue 30, probed as a hostile user would: a cluster whose nodes require
//! a password, mithril holding the backend credentials, `user default
//! off`, an admin, a write user without key rules (`wr`), `app` (write,
//! `~app:*`), `ro` (read, `~app:*`) and users made with ACL SETUSER. Each
//! hole is refused with Redis's text, compared with a standalone Redis
//! 7.0 given the same users where Redis has one:
//! - revocation is immediate: a queued MULTI re-checked at EXEC, a live
//!   PSUBSCRIBE closed, a MONITOR and a replication feed closed;
//! - channels are closed by default (`acl-pubsub-default`);
//! - secrets never shown: SLOWLOG, MONITOR, CONFIG GET of a node password;
//! - AUTH with one argument names `default` only; failed AUTH capped per
//!   connection and per address, and logged with the user name;
//! - the smaller items: CLUSTER GETKEYSINSLOT / COUNTKEYSINSLOT, MEMORY
//!   PURGE, INFO, FUNCTION DUMP / LIST WITHCODE, ACL GETUSER, the metrics
//!   port's allow-list.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::*;

const CLUSTER_PW: &str = "cluster-s3cret";

const USERS: &str = "\
user default off
user admin on >adminpw mode admin allchannels
user wr on >wrpw mode write
user app on >apppw mode write ~app:* &app.*
user ro on >ropw mode read ~app:*
";

/// The users of `USERS`, written for a Redis node.
const REDIS_USERS: &[&[&str]] = &[
    &["default", "off", "resetpass"],
    &["admin", "on", ">adminpw", "~*", "&*", "+@all"],
    &["wr", "on", ">wrpw", "~*", "+@all", "-@admin", "-@dangerous"],
    &[
        "app",
        "on",
        ">apppw",
        "~app:*",
        "&app.*",
        "+@all",
        "-@admin",
        "-@dangerous",
    ],
    &[
        "ro",
        "on",
        ">ropw",
        "~app:*",
        "-@all",
        "+@read",
        "+@connection",
        "+subscribe",
        "+psubscribe",
    ],
];

fn noperm_cmd(name: &str) -> Reply {
    err(&format!(
        "NOPERM this user has no permissions to run the '{name}' command"
    ))
}

const NOPERM_CHANNEL: &str =
    "NOPERM this user has no permissions to access one of the channels used as arguments";

/// What EXEC answers for a queued command an ACL change refused.
fn noperm_exec(why: &str) -> Reply {
    err(&format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
         the EXEC call. This command is no longer allowed for the following reason: {why}"
    ))
}

/// A 3-master cluster whose nodes require `CLUSTER_PW`.
fn protected_cluster() -> RedisCluster {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec![format!("masterauth {CLUSTER_PW}")],
        ..ClusterSpec::default()
    });
    for n in &cluster.nodes {
        assert_eq!(
            n.conn().cmd(&["CONFIG", "SET", "requirepass", CLUSTER_PW]),
            ok()
        );
    }
    cluster
}

/// mithril with `USERS` (and `extra`) in front of a protected cluster.
fn start(extra: &str) -> (RedisCluster, Mithril) {
    let cluster = protected_cluster();
    let m = start_on(&cluster, extra);
    (cluster, m)
}

fn start_on(cluster: &RedisCluster, extra: &str) -> Mithril {
    Mithril::start_locked(
        bin(),
        &cluster.seeds(),
        &format!("backend-password {CLUSTER_PW}\n{USERS}{extra}"),
    )
}

/// A standalone Redis with the same users.
fn redis_with_users() -> Standalone {
    let r = Standalone::start();
    let mut c = r.conn();
    for u in REDIS_USERS {
        let mut args = vec!["ACL", "SETUSER"];
        args.extend_from_slice(u);
        assert_eq!(c.cmd(&args), ok(), "{u:?}");
    }
    r
}

fn login(addr: &str, user: &str, pass: &str) -> Conn {
    let mut c = Conn::connect(addr);
    assert_eq!(c.cmd(&["AUTH", user, pass]), ok(), "AUTH {user}");
    c
}

#[test]
fn a_queued_transaction_is_checked_again_at_exec() {
    let cluster = protected_cluster();
    let redis = redis_with_users();
    // The change is made on one connection, the transaction queued on
    // another: at 1, 2 and 4 workers.
    let ms: Vec<Mithril> = [1, 2, 4]
        .iter()
        .map(|n| start_on(&cluster, &format!("threads {n}\n")))
        .collect();
    let addrs = ms.iter().map(Mithril::addr).chain([redis.addr()]);
    for addr in addrs {
        let mut admin = login(&addr, "admin", "adminpw");
        let rules = [
            "on",
            ">u1pw",
            "~app:*",
            "&app.*",
            "+@all",
            "-@admin",
            "-@dangerous",
        ];
        let mut set = vec!["ACL", "SETUSER", "u1", "reset"];
        set.extend_from_slice(&rules);
        assert_eq!(admin.cmd(&set), ok());
        let mut u1 = login(&addr, "u1", "u1pw");
        assert_eq!(u1.cmd(&["MULTI"]), ok());
        assert_eq!(
            u1.cmd(&["SET", "app:{t}1", "x"]),
            Reply::Simple("QUEUED".into())
        );
        assert_eq!(
            u1.cmd(&["SADD", "app:{t}s", "m"]),
            Reply::Simple("QUEUED".into())
        );
        assert_eq!(
            u1.cmd(&["PUBLISH", "app.x", "m"]),
            Reply::Simple("QUEUED".into())
        );
        assert_eq!(u1.cmd(&["GET", "app:{t}1"]), Reply::Simple("QUEUED".into()));
        // The rights change while the transaction waits.
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "u1", "-sadd", "resetchannels"]),
            ok()
        );
        assert_eq!(
            u1.cmd(&["EXEC"]),
            Reply::Array(Some(vec![
                ok(),
                noperm_exec("no permission to execute the command or subcommand"),
                noperm_exec("no permission to access one of the channels used as arguments"),
                bulk("x"),
            ])),
            "{addr}"
        );
        // Keys: every command refused, nothing written.
        assert_eq!(u1.cmd(&["MULTI"]), ok());
        assert_eq!(
            u1.cmd(&["SET", "app:{t}2", "y"]),
            Reply::Simple("QUEUED".into())
        );
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "u1", "resetkeys", "~other:*"]),
            ok()
        );
        assert_eq!(
            u1.cmd(&["EXEC"]),
            Reply::Array(Some(vec![noperm_exec(
                "no permission to touch the specified keys"
            )])),
            "{addr}"
        );
        assert_eq!(admin.cmd(&["EXISTS", "app:{t}2"]), Reply::Int(0));
        assert_eq!(admin.cmd(&["EXISTS", "app:{t}s"]), Reply::Int(0));
        // Refusals at EXEC are in ACL LOG, context multi.
        let log = admin.cmd(&["ACL", "LOG", "1"]);
        let text = format!("{log:?}");
        assert!(
            text.contains("multi") && text.contains("app:{t}2"),
            "{text}"
        );
    }
}

#[test]
fn a_subscriber_monitor_and_feed_that_lose_their_right_are_closed() {
    let cluster = protected_cluster();
    for n in &cluster.nodes {
        let mut c = n.conn();
        assert_eq!(c.cmd(&["AUTH", CLUSTER_PW]), ok());
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"]),
            ok()
        );
    }
    // The change and the sessions it closes on any worker.
    for threads in [1, 2, 4] {
        let m = start_on(&cluster, &format!("threads {threads}\n"));
        revocation_closes(&m.addr());
    }
}

fn revocation_closes(addr: &str) {
    let addr = addr.to_string();
    let mut admin = login(&addr, "admin", "adminpw");
    assert_eq!(
        admin.cmd(&[
            "ACL",
            "SETUSER",
            "u2",
            "on",
            ">u2pw",
            "~app:*",
            "+@all",
            "&app.*",
            "&__keyspace@0__:secret*",
        ]),
        ok()
    );
    // A pattern subscription to keyspace events, and a channel.
    let mut sub = login(&addr, "u2", "u2pw");
    assert!(!sub
        .cmd(&["PSUBSCRIBE", "__keyspace@0__:secret*"])
        .is_error());
    let mut chan = login(&addr, "u2", "u2pw");
    assert!(!chan.cmd(&["SUBSCRIBE", "app.news"]).is_error());
    // It hears while it may.
    let heard = wait_until("the first keyspace event", Duration::from_secs(10), || {
        assert_eq!(admin.cmd(&["SET", "secret:a", "1"]), ok());
        sub.try_read_reply(Duration::from_millis(200)).ok()
    });
    assert!(format!("{heard:?}").contains("secret:a"), "{heard:?}");
    // The right goes: the pattern subscriber is closed, and nothing
    // published after the change's OK reaches it.
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "u2", "resetchannels", "&app.*"]),
        ok()
    );
    assert_eq!(admin.cmd(&["SET", "secret:b", "2"]), ok());
    let rest = sub.read_raw_until_closed(Duration::from_secs(10));
    assert!(
        sub.is_closed(Duration::from_secs(1)),
        "the subscriber was closed"
    );
    assert!(
        !String::from_utf8_lossy(&rest).contains("secret:b"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    // The channel subscriber keeps what it still may hear.
    assert!(!admin.cmd(&["PUBLISH", "app.news", "hello"]).is_error());
    assert_eq!(
        chan.read_reply(),
        Reply::Array(Some(vec![bulk("message"), bulk("app.news"), bulk("hello")]))
    );

    // MONITOR, until its user may no longer run it.
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "mon", "on", ">monpw", "~*", "&*", "+@all"]),
        ok()
    );
    let mut mon = login(&addr, "mon", "monpw");
    assert_eq!(mon.cmd(&["MONITOR"]), ok());
    assert_eq!(admin.cmd(&["GET", "app:seen"]), Reply::Bulk(None));
    while !mon.read_reply().as_str().contains("app:seen") {}
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "mon", "-monitor"]), ok());
    assert_eq!(admin.cmd(&["GET", "app:unseen"]), Reply::Bulk(None));
    let rest = mon.read_raw_until_closed(Duration::from_secs(10));
    assert!(
        mon.is_closed(Duration::from_secs(1)),
        "the monitor was closed"
    );
    assert!(!String::from_utf8_lossy(&rest).contains("app:unseen"));

    // A replication feed (SYNC), until its user is cut to reads.
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "rep", "on", ">reppw", "~*", "&*", "+@all"]),
        ok()
    );
    let mut feed = TcpStream::connect(&addr).unwrap();
    feed.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    feed.write_all(b"AUTH rep reppw\r\nSYNC\r\n").unwrap();
    let mut got = Vec::new();
    let read_until = |feed: &mut TcpStream, got: &mut Vec<u8>, what: &str| -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut chunk = [0u8; 16384];
        while Instant::now() < deadline {
            if String::from_utf8_lossy(got).contains(what) {
                return true;
            }
            match feed.read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return false,
            }
        }
        false
    };
    wait_until_explained("the feed carries writes", Duration::from_secs(30), || {
        assert_eq!(admin.cmd(&["SET", "feed:before", "1"]), ok());
        match read_until(&mut feed, &mut got, "feed:before") {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&got).escape_debug().to_string()),
        }
    });
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "rep", "-@all", "+@read"]),
        ok()
    );
    assert_eq!(admin.cmd(&["SET", "feed:after", "1"]), ok());
    // Read to the close: it must come, without the write made after.
    feed.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut after = Vec::new();
    let closed = loop {
        let mut chunk = [0u8; 16384];
        match feed.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => after.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    assert!(closed, "the feed was not closed");
    assert!(
        !String::from_utf8_lossy(&after).contains("feed:after"),
        "the feed went on after its right was taken"
    );
}

#[test]
fn channels_are_closed_by_default() {
    let (_cluster, m) = start("");
    let redis = redis_with_users();
    for addr in [m.addr(), redis.addr()] {
        // ro has no channel rule: no channel, keyspace events included.
        let mut ro = login(&addr, "ro", "ropw");
        assert_eq!(
            ro.cmd(&["PSUBSCRIBE", "__keyspace@0__:secret*"]),
            err(NOPERM_CHANNEL),
            "{addr}"
        );
        assert_eq!(ro.cmd(&["SUBSCRIBE", "anything"]), err(NOPERM_CHANNEL));
        let mut app = login(&addr, "app", "apppw");
        assert!(!app.cmd(&["SUBSCRIBE", "app.news"]).is_error());
        // A user made at run time starts without channels.
        let mut admin = login(&addr, "admin", "adminpw");
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "fresh", "on", "nopass", "+@all"]),
            ok()
        );
        let u = admin.cmd(&["ACL", "GETUSER", "fresh"]);
        let items = u.as_array();
        let at = items.iter().position(|i| *i == bulk("channels")).unwrap();
        assert_eq!(items[at + 1], bulk(""), "{addr}");
    }
    // acl-pubsub-default allchannels opens them, as in Redis.
    let (_c2, open) = start("acl-pubsub-default allchannels\n");
    let mut ro = login(&open.addr(), "ro", "ropw");
    assert!(!ro.cmd(&["SUBSCRIBE", "anything"]).is_error());
}

#[test]
fn secrets_are_never_shown() {
    let (_cluster, m) = start("");
    let addr = m.addr();
    let mut admin = login(&addr, "admin", "adminpw");
    let mut mon = login(&addr, "admin", "adminpw");
    assert_eq!(mon.cmd(&["MONITOR"]), ok());
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        ok()
    );
    assert_eq!(
        admin.cmd(&[
            "ACL",
            "SETUSER",
            "tmpu",
            "on",
            ">SUPERSECRETPW",
            "~*",
            "+@all"
        ]),
        ok()
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "masterauth", CLUSTER_PW]),
        ok()
    );
    let mut t = Conn::connect(&addr);
    assert_eq!(t.cmd(&["AUTH", "tmpu", "SUPERSECRETPW"]), ok());
    assert_eq!(t.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let slow = format!("{:?}", admin.cmd(&["SLOWLOG", "GET", "-1"]));
    for secret in ["SUPERSECRETPW", CLUSTER_PW] {
        assert!(!slow.contains(secret), "{secret} in SLOWLOG: {slow}");
    }
    assert!(slow.contains("(redacted)"), "{slow}");
    // MONITOR saw the AUTH, redacted, and the PING after it.
    let mut lines = String::new();
    while !lines.to_lowercase().contains("\"ping\"") {
        lines.push_str(mon.read_reply().as_str());
    }
    let lines = lines.to_lowercase();
    assert!(!lines.contains("supersecretpw"), "{lines}");
    assert!(
        lines.contains("\"auth\" \"(redacted)\" \"(redacted)\""),
        "{lines}"
    );
    // A node's password is hidden as backend-password is.
    let got = admin.cmd(&["CONFIG", "GET", "masterauth"]);
    assert_eq!(
        got,
        Reply::Array(Some(vec![bulk("masterauth"), bulk("(hidden)")]))
    );
    let all = format!("{:?}", admin.cmd(&["CONFIG", "GET", "*"]));
    assert!(!all.contains(CLUSTER_PW), "node password in CONFIG GET *");
    // ACL LOG holds no password of a failed login.
    let mut bad = Conn::connect(&addr);
    assert!(bad.cmd(&["AUTH", "tmpu", "SUPERSECRETPW-wrong"]).is_error());
    let log = format!("{:?}", admin.cmd(&["ACL", "LOG"]));
    assert!(!log.contains("SUPERSECRETPW"), "{log}");
    assert!(!m.log().contains("SUPERSECRETPW"), "a password in the log");
}

#[test]
fn auth_with_one_argument_names_default_and_guessing_is_capped() {
    let (_cluster, m) = start("auth-failures-per-source 40\n");
    let redis = redis_with_users();
    let wrongpass = err("WRONGPASS invalid username-password pair or user is disabled.");
    for addr in [m.addr(), redis.addr()] {
        // app's password alone does not log in as app.
        let mut c = Conn::connect(&addr);
        assert_eq!(c.cmd(&["AUTH", "apppw"]), wrongpass, "{addr}");
        assert_eq!(
            c.cmd(&["GET", "app:x"]),
            err("NOAUTH Authentication required.")
        );
    }
    // A failed login is logged with the user name.
    let log = wait_until("the failed login's line", Duration::from_secs(10), || {
        let log = m.log();
        log.contains("refused for user 'default'").then_some(log)
    });
    assert!(!log.contains("apppw"), "a password in the log");

    // Per connection: the 10th failure closes it; what was pipelined
    // after is never answered.
    let mut c = Conn::connect(&m.addr());
    let mut frames: Vec<Vec<u8>> = (0..12)
        .map(|i| encode_command(&[b"AUTH", b"app", format!("guess{i}").as_bytes()]))
        .collect();
    frames.push(encode_command(&[b"AUTH", b"app", b"apppw"]));
    for f in &frames {
        c.write_raw(f).unwrap();
    }
    let rest = c.read_raw_until_closed(Duration::from_secs(10));
    let text = String::from_utf8_lossy(&rest);
    assert_eq!(text.matches("-WRONGPASS").count(), 10, "{text}");
    assert!(!text.contains("+OK"), "{text}");

    // Per address: once it failed 40 times in a second, even the right
    // password is refused unchecked until the second ends. (A round that
    // straddles a second boundary proves nothing: try again.) The count is
    // process-wide: the connections land on every worker.
    let throttled =
        err("ERR mithril: too many failed AUTH attempts from this address, try again later");
    for threads in [1, 2, 4] {
        let m = start_on(
            &_cluster,
            &format!("threads {threads}\nauth-failures-per-source 40\n"),
        );
        wait_until("an address throttled", Duration::from_secs(60), || {
            for _ in 0..5 {
                let mut g = Conn::connect(&m.addr());
                let cmds: Vec<Vec<Vec<u8>>> =
                    (0..9).map(|_| argv(&["AUTH", "app", "nope"])).collect();
                let _ = g.try_pipeline(&cmds);
            }
            let mut right = Conn::connect(&m.addr());
            let r = right.cmd(&["AUTH", "app", "apppw"]);
            (r == throttled).then_some(())
        });
    }
}

#[test]
fn smaller_items_follow_redis_or_are_stricter() {
    let metrics = free_port();
    let (_cluster, m) = start(&format!(
        "metrics-port {metrics}\nmetrics-allow 10.0.0.0/8\n"
    ));
    let addr = m.addr();
    let mut ro = login(&addr, "ro", "ropw");
    for (args, name) in [
        (
            &["CLUSTER", "GETKEYSINSLOT", "1", "10"][..],
            "cluster|getkeysinslot",
        ),
        (
            &["CLUSTER", "COUNTKEYSINSLOT", "1"],
            "cluster|countkeysinslot",
        ),
        (&["MEMORY", "PURGE"], "memory|purge"),
        (&["FUNCTION", "DUMP"], "function|dump"),
        (&["FUNCTION", "LIST", "WITHCODE"], "function|list"),
    ] {
        assert_eq!(ro.cmd(args), noperm_cmd(name), "{args:?}");
    }
    assert!(!ro.cmd(&["FUNCTION", "LIST"]).is_error());
    // INFO: the counters, not where things are.
    let info = ro.cmd(&["INFO", "everything"]).as_str().to_string();
    assert!(!info.contains("# Backends"), "{info}");
    assert!(info.contains("\r\nexecutable:\r\n") && info.contains("\r\nconfig_file:\r\n"));
    let mut admin = login(&addr, "admin", "adminpw");
    let info = admin.cmd(&["INFO", "everything"]).as_str().to_string();
    assert!(info.contains("# Backends"));
    // ACL GETUSER shows what ro may run, in Redis's words.
    let u = admin.cmd(&["ACL", "GETUSER", "ro"]);
    let items = u.as_array();
    let at = items.iter().position(|i| *i == bulk("commands")).unwrap();
    let cmds = items[at + 1].as_str().to_string();
    assert!(cmds.starts_with("-@all +"), "{cmds}");
    assert!(
        cmds.contains(" +get ") && !cmds.contains(" +set "),
        "{cmds}"
    );
    assert!(!cmds.contains("mode"), "{cmds}");
    // The metrics port answers only the allowed addresses.
    let mut c = TcpStream::connect(("127.0.0.1", metrics)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut body = Vec::new();
    let _ = c.read_to_end(&mut body);
    assert!(body.is_empty(), "{}", String::from_utf8_lossy(&body));
}
