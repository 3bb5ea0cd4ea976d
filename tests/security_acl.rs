//! Issue 9, users and permissions, against a real cluster and the real
//! binary: each mode against each command class, key patterns on
//! multi-key commands and fan-outs, a transaction refused at queue time,
//! channel patterns, the NOPERM texts compared with a Redis node that has
//! the same user, ACL WHOAMI / USERS / LIST, the INFO counters, protected
//! mode at start.

mod support;

use std::time::Duration;
use support::*;

fn noperm_cmd(name: &str) -> Reply {
    err(&format!(
        "NOPERM this user has no permissions to run the '{name}' command"
    ))
}

const NOPERM_KEY: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";
const NOPERM_CHANNEL: &str =
    "NOPERM this user has no permissions to access one of the channels used as arguments";

const USERS: &str = "\
user default off
user reader on >r-pw mode read
user writer on >w-pw mode write ~app:* &news.*
user admin on >a-pw mode admin
user split on >s-pw mode write %R~pub:* %W~app:*
";

/// A connection to `m` logged in as `user`.
fn login(m: &Mithril, user: &str, pass: &str) -> Conn {
    let mut c = m.conn();
    assert_eq!(c.cmd(&["AUTH", user, pass]), ok(), "AUTH {user}");
    c
}

/// The `name:value` of an INFO section.
fn info_field(c: &mut Conn, section: &str, name: &str) -> i64 {
    let text = c.cmd(&["INFO", section]).as_str().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// mithril with USERS in front of `cluster` (a locked proxy: ready once
/// PING gets NOAUTH).
fn start(cluster: &RedisCluster) -> Mithril {
    Mithril::start_locked(bin(), &cluster.seeds(), USERS)
}

#[test]
fn each_mode_against_each_command_class() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = start(&cluster);

    // Nobody is served before AUTH; AUTH with a password alone names
    // `default` only, as in Redis (issue 30: `auth-any-user yes` is for
    // predixy's clients).
    let mut c = m.conn();
    assert_eq!(
        c.cmd(&["GET", "app:1"]),
        err("NOAUTH Authentication required.")
    );
    assert_eq!(
        c.cmd(&["ACL", "WHOAMI"]),
        err("NOAUTH Authentication required.")
    );
    assert_eq!(
        c.cmd(&["AUTH", "r-pw"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(c.cmd(&["AUTH", "reader", "r-pw"]), ok());
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), bulk("reader"));
    let info = c.cmd(&["CLIENT", "INFO"]);
    assert!(info.as_str().contains(" user=reader "), "{info:?}");

    // read: reads, connection and introspection; no writes, no admin.
    let mut r = login(&m, "reader", "r-pw");
    assert_eq!(r.cmd(&["GET", "app:1"]), Reply::Bulk(None));
    assert_eq!(r.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert!(!r.cmd(&["CLUSTER", "SLOTS"]).is_error());
    assert!(!r.cmd(&["INFO", "server"]).is_error());
    assert!(!r.cmd(&["DBSIZE"]).is_error());
    for (cmd, name) in [
        (&["SET", "app:1", "x"][..], "set"),
        (&["DEL", "app:1"], "del"),
        (&["PUBLISH", "news.a", "m"], "publish"),
        (&["EVAL", "return 1", "0"], "eval"),
        (&["FLUSHALL"], "flushall"),
        (&["CONFIG", "SET", "loglevel", "debug"], "config|set"),
        (&["CONFIG", "GET", "port"], "config|get"),
        (&["CLIENT", "KILL", "ID", "1"], "client|kill"),
        (&["ACL", "LIST"], "acl|list"),
        (&["KEYS", "*"], "keys"),
    ] {
        assert_eq!(r.cmd(cmd), noperm_cmd(name), "{cmd:?}");
    }

    // write: reads and writes within ~app:*; no admin.
    let mut w = login(&m, "writer", "w-pw");
    assert_eq!(w.cmd(&["SET", "app:1", "one"]), ok());
    assert_eq!(w.cmd(&["SET", "app:2", "two"]), ok());
    assert_eq!(w.cmd(&["GET", "app:1"]), bulk("one"));
    assert_eq!(w.cmd(&["FLUSHALL"]), noperm_cmd("flushall"));
    assert_eq!(
        w.cmd(&["CLIENT", "KILL", "ID", "1"]),
        noperm_cmd("client|kill")
    );
    assert_eq!(
        w.cmd(&["CONFIG", "SET", "loglevel", "debug"]),
        noperm_cmd("config|set")
    );
    // Every key of a multi-key command, hence of every fan-out part.
    assert_eq!(w.cmd(&["GET", "other"]), err(NOPERM_KEY));
    assert_eq!(w.cmd(&["MGET", "app:1", "other:2"]), err(NOPERM_KEY));
    assert_eq!(
        w.cmd(&["MSET", "app:3", "x", "other:2", "y"]),
        err(NOPERM_KEY)
    );
    assert_eq!(w.cmd(&["DEL", "app:1", "other:2"]), err(NOPERM_KEY));
    assert_eq!(w.cmd(&["EXISTS", "app:1", "other:2"]), err(NOPERM_KEY));
    // ...and nothing of the refused command reached the cluster.
    assert_eq!(w.cmd(&["GET", "app:3"]), Reply::Bulk(None));
    // Allowed keys in different slots still fan out.
    assert_ne!(key_slot(b"app:1"), key_slot(b"app:2"));
    assert_eq!(
        w.cmd(&["MGET", "app:1", "app:2"]),
        Reply::Array(Some(vec![bulk("one"), bulk("two")]))
    );
    // No script call: it would run with the backend user's rights.
    assert_eq!(w.cmd(&["EVAL", "return 1", "0"]), noperm_cmd("eval"));

    // %R~ / %W~: read and write patterns by the command's mode.
    let mut s = login(&m, "split", "s-pw");
    assert_eq!(s.cmd(&["GET", "pub:1"]), Reply::Bulk(None));
    assert_eq!(s.cmd(&["GET", "app:1"]), err(NOPERM_KEY));
    assert_eq!(s.cmd(&["SET", "app:9", "v"]), ok());
    assert_eq!(s.cmd(&["SET", "pub:1", "v"]), err(NOPERM_KEY));

    // admin: everything.
    let mut a = login(&m, "admin", "a-pw");
    assert_eq!(a.cmd(&["CONFIG", "SET", "loglevel", "verbose"]), ok());
    assert_eq!(a.cmd(&["GET", "other"]), Reply::Bulk(None));
    assert_eq!(a.cmd(&["SET", "other", "o"]), ok());
    assert_eq!(
        a.cmd(&["ACL", "USERS"]),
        Reply::Array(Some(
            ["admin", "default", "reader", "split", "writer"]
                .iter()
                .map(|u| bulk(u))
                .collect()
        ))
    );
    let list = a.cmd(&["ACL", "LIST"]);
    let lines: Vec<&str> = list.as_array().iter().map(Reply::as_str).collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    let writer = lines
        .iter()
        .find(|l| l.starts_with("user writer "))
        .unwrap();
    // SHA-256 of "w-pw", as `echo -n w-pw | sha256sum` prints it.
    let w_hash = sha256_hex("w-pw");
    assert_eq!(
        *writer,
        format!("user writer on #{w_hash} ~app:* &news.* mode write")
    );
    assert!(lines.iter().all(|l| !l.contains("-pw")), "{lines:?}");
    assert_eq!(lines[1], "user default off ~* resetchannels mode read");
    let users = a.cmd(&["CONFIG", "GET", "user"]);
    assert!(!format!("{users:?}").contains("-pw"), "{users:?}");
    assert_eq!(a.cmd(&["FLUSHALL"]), ok());
    assert_eq!(a.cmd(&["GET", "other"]), Reply::Bulk(None));

    // A failed AUTH keeps the session's user; counters count.
    assert_eq!(
        w.cmd(&["AUTH", "writer", "nope"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(w.cmd(&["ACL", "WHOAMI"]), bulk("writer"));
    assert_eq!(
        w.cmd(&["HELLO", "3", "AUTH", "nobody", "x"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    // (with the one-argument AUTH of reader's password above)
    assert_eq!(info_field(&mut a, "stats", "acl_access_denied_auth"), 3);
    assert!(info_field(&mut a, "stats", "acl_access_denied_cmd") >= 14);
    assert!(info_field(&mut a, "stats", "acl_access_denied_key") >= 6);
    // RESET: back to default, which is off here.
    assert_eq!(w.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    assert_eq!(
        w.cmd(&["GET", "app:1"]),
        err("NOAUTH Authentication required.")
    );
}

#[test]
fn transactions_and_channels() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = start(&cluster);
    let mut w = login(&m, "writer", "w-pw");

    // One forbidden command in a transaction: refused when queued, and the
    // whole transaction is discarded at EXEC.
    assert_eq!(w.cmd(&["SET", "app:{t}1", "before"]), ok());
    assert_eq!(w.cmd(&["MULTI"]), ok());
    assert_eq!(
        w.cmd(&["SET", "app:{t}1", "inside"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(w.cmd(&["SET", "other{t}", "x"]), err(NOPERM_KEY));
    assert_eq!(w.cmd(&["FLUSHALL"]), noperm_cmd("flushall"));
    assert_eq!(
        w.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    let mut owner = Conn::connect(&format!(
        "127.0.0.1:{}",
        cluster.port_for_slot(key_slot(b"app:{t}1"))
    ));
    assert_eq!(owner.cmd(&["GET", "app:{t}1"]), bulk("before"));
    assert_eq!(owner.cmd(&["EXISTS", "other{t}"]), Reply::Int(0));
    // An allowed transaction runs.
    assert_eq!(w.cmd(&["MULTI"]), ok());
    assert_eq!(
        w.cmd(&["SET", "app:{t}1", "after"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(w.cmd(&["EXEC"]), Reply::Array(Some(vec![ok()])));
    assert_eq!(owner.cmd(&["GET", "app:{t}1"]), bulk("after"));

    // Channels: &news.* for SUBSCRIBE and PUBLISH; PSUBSCRIBE must give
    // that very pattern.
    let mut sub = login(&m, "writer", "w-pw");
    assert_eq!(sub.cmd(&["SUBSCRIBE", "other"]), err(NOPERM_CHANNEL));
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "news.a", "other"]),
        err(NOPERM_CHANNEL)
    );
    assert_eq!(sub.cmd(&["PSUBSCRIBE", "news.s*"]), err(NOPERM_CHANNEL));
    assert_eq!(sub.cmd(&["PSUBSCRIBE", "*"]), err(NOPERM_CHANNEL));
    assert_eq!(w.cmd(&["PUBLISH", "other", "m"]), err(NOPERM_CHANNEL));
    assert_eq!(
        sub.cmd(&["PSUBSCRIBE", "news.*"]),
        Reply::Array(Some(vec![
            bulk("psubscribe"),
            bulk("news.*"),
            Reply::Int(1)
        ]))
    );
    // The subscription works end to end.
    let message = wait_until("the message to arrive", Duration::from_secs(10), || {
        assert!(!w.cmd(&["PUBLISH", "news.sport", "goal"]).is_error());
        sub.try_read_reply(Duration::from_millis(200)).ok()
    });
    assert_eq!(
        message,
        Reply::Array(Some(vec![
            bulk("pmessage"),
            bulk("news.*"),
            bulk("news.sport"),
            bulk("goal"),
        ]))
    );
    // A read user may subscribe to its channels; without a channel rule
    // it has none (acl-pubsub-default resetchannels, issue 30).
    let mut r = login(&m, "reader", "r-pw");
    assert_eq!(r.cmd(&["SUBSCRIBE", "anything"]), err(NOPERM_CHANNEL));
    let mut a = login(&m, "admin", "a-pw");
    assert_eq!(
        a.cmd(&[
            "ACL",
            "SETUSER",
            "readchan",
            "on",
            ">rc-pw",
            "~*",
            "allchannels",
            "-@all",
            "+@read",
            "+subscribe",
        ]),
        ok()
    );
    let mut rc = login(&m, "readchan", "rc-pw");
    assert_eq!(
        rc.cmd(&["SUBSCRIBE", "anything"]),
        Reply::Array(Some(vec![
            bulk("subscribe"),
            bulk("anything"),
            Reply::Int(1)
        ]))
    );
    assert!(info_field(&mut a, "stats", "acl_access_denied_channel") >= 5);
}

/// The NOPERM texts are Redis's: the same refusals from a cluster node
/// that has the same user, made with ACL SETUSER.
#[test]
fn noperm_texts_match_a_redis_node_with_the_same_user() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = start(&cluster);
    let mut node = cluster.nodes[0].conn();
    assert_eq!(
        node.cmd(&[
            "ACL",
            "SETUSER",
            "writer",
            "on",
            ">w-pw",
            "~app:*",
            "resetchannels",
            "&news.*",
            "+@all",
            "-@admin",
            "-@dangerous",
        ]),
        ok()
    );
    let mut live = cluster.nodes[0].conn();
    assert_eq!(live.cmd(&["AUTH", "writer", "w-pw"]), ok());
    let mut ours = login(&m, "writer", "w-pw");
    for cmd in [
        &["FLUSHALL"][..],
        &["CONFIG", "SET", "loglevel", "debug"],
        &["CLIENT", "KILL", "ID", "1"],
        &["GET", "other"],
        &["MGET", "app:1", "other"],
        &["PUBLISH", "other", "m"],
        &["SUBSCRIBE", "other"],
        &["PSUBSCRIBE", "news.s*"],
        &["AUTH", "writer", "wrong"],
        &["AUTH", "nobody", "w-pw"],
    ] {
        let (o, l) = (ours.cmd(cmd), live.cmd(cmd));
        assert!(o.is_error(), "{cmd:?}: {o:?}");
        assert_eq!(o, l, "{cmd:?}");
    }
    assert_eq!(
        info_field(
            &mut login(&m, "admin", "a-pw"),
            "stats",
            "acl_access_denied_auth"
        ),
        2,
        "both failed logins are counted (the INFO field is Redis 7.2's; 7.0 has none)"
    );
}

#[test]
fn protected_mode_refuses_an_open_non_loopback_start() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let mut m = Mithril::spawn(bin(), &cluster.seeds(), "bind 0.0.0.0\n");
    let status = m.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1));
    let out = m.stdio();
    assert!(
        out.contains("refusing to listen on 0.0.0.0") && out.contains("'protected-mode no'"),
        "{out}"
    );
    // -t says the same.
    let o = run_mithril(&["-t", "-c", m.conf_path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("protected mode"));
    // With a password it starts (still on loopback here: the harness talks
    // to 127.0.0.1 only).
    let m = Mithril::start_locked(
        bin(),
        &cluster.seeds(),
        "bind 127.0.0.1\nrequirepass pw\nuser ops on >ops mode admin\n",
    );
    let mut c = m.conn();
    assert_eq!(c.cmd(&["AUTH", "pw"]), ok());
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), bulk("default"));
    assert_eq!(c.cmd(&["AUTH", "ops", "ops"]), ok());
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), bulk("ops"));
    // No password in clear anywhere the proxy shows its settings.
    let all = format!("{:?}", c.cmd(&["CONFIG", "GET", "*"]));
    assert!(!all.contains("\"pw\"") && !all.contains(" >ops"), "{all}");
    assert!(!m.log().contains(">ops"));
}

/// SHA-256 in hex, computed by the system's sha256sum (not by mithril).
fn sha256_hex(s: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn scripting_follows_the_modes() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let users = "\
user default off
user reader on >r-pw mode read
user app on >p-pw mode write
user limited on >l-pw mode write ~app:*
user admin on >a-pw mode admin
";
    let m = Mithril::start_locked(bin(), &cluster.seeds(), users);
    let lib = "#!lua name=acl\n\
        redis.register_function{function_name='ro_get', callback=function(k, a) return redis.call('get', k[1]) end, flags={'no-writes'}}\n\
        redis.register_function('rw_set', function(k, a) return redis.call('set', k[1], a[1]) end)";
    let get = "return redis.call('get', KEYS[1])";
    let mut a = login(&m, "admin", "a-pw");
    let sha = a.cmd(&["SCRIPT", "LOAD", get]).as_str().to_string();
    assert_eq!(a.cmd(&["FUNCTION", "LOAD", lib]), bulk("acl"));

    // No script call but an admin's: a script runs on the node with the
    // backend user's rights (issue 30, tests/security_scripts.rs). read:
    // looking, nothing that writes or loads.
    let mut r = login(&m, "reader", "r-pw");
    assert_eq!(
        r.cmd(&["SCRIPT", "EXISTS", &sha]),
        Reply::Array(Some(vec![Reply::Int(1)]))
    );
    assert!(!r.cmd(&["FUNCTION", "LIST"]).is_error());
    for (cmd, name) in [
        (&["EVALSHA_RO", &sha, "1", "k"][..], "evalsha_ro"),
        (&["EVAL_RO", get, "1", "k"], "eval_ro"),
        (&["FCALL_RO", "ro_get", "1", "k"], "fcall_ro"),
        (&["EVALSHA", &sha, "1", "k"], "evalsha"),
        (&["EVAL", get, "1", "k"], "eval"),
        (&["FCALL", "rw_set", "1", "k", "v"], "fcall"),
        (&["SCRIPT", "LOAD", get], "script|load"),
        (&["FUNCTION", "LOAD", lib], "function|load"),
    ] {
        assert_eq!(r.cmd(cmd), noperm_cmd(name), "{cmd:?}");
    }

    // write: loads (redis-py loads on NOSCRIPT), but no call, and nothing
    // that flushes, deletes or kills what every client relies on.
    let mut p = login(&m, "app", "p-pw");
    assert_eq!(p.cmd(&["SCRIPT", "LOAD", get]), bulk(&sha));
    for (cmd, name) in [
        (&["FCALL", "rw_set", "1", "k", "v"][..], "fcall"),
        (&["EVALSHA", &sha, "1", "k"], "evalsha"),
        (&["SCRIPT", "FLUSH"], "script|flush"),
        (&["SCRIPT", "KILL"], "script|kill"),
        (&["FUNCTION", "DELETE", "acl"], "function|delete"),
        (&["FUNCTION", "FLUSH"], "function|flush"),
        (&["FUNCTION", "KILL"], "function|kill"),
        (&["FUNCTION", "RESTORE", "x"], "function|restore"),
    ] {
        assert_eq!(p.cmd(cmd), noperm_cmd(name), "{cmd:?}");
    }

    // Limited keys: no call either; loading one runs nothing.
    let mut l = login(&m, "limited", "l-pw");
    for (cmd, name) in [
        (&["EVALSHA_RO", &sha, "1", "app:1"][..], "evalsha_ro"),
        (&["EVALSHA", &sha, "1", "app:1"], "evalsha"),
        (&["FCALL_RO", "ro_get", "1", "app:1"], "fcall_ro"),
    ] {
        assert_eq!(l.cmd(cmd), noperm_cmd(name), "{cmd:?}");
    }
    assert_eq!(l.cmd(&["SCRIPT", "LOAD", get]), bulk(&sha));

    // admin: everything.
    assert_eq!(a.cmd(&["EVALSHA_RO", &sha, "1", "k"]), Reply::Bulk(None));
    assert_eq!(a.cmd(&["FCALL", "rw_set", "1", "k", "v"]), ok());
    assert_eq!(a.cmd(&["FCALL_RO", "ro_get", "1", "k"]), bulk("v"));
    // admin: everything.
    assert_eq!(a.cmd(&["SCRIPT", "FLUSH"]), ok());
    assert_eq!(a.cmd(&["FUNCTION", "DELETE", "acl"]), ok());
}

/// A one-master cluster (its node is the one to compare with) and mithril
/// with USERS in front of it.
fn one_master() -> (RedisCluster, Mithril) {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = start(&cluster);
    (cluster, m)
}

/// ACL SETUSER through mithril against a Redis node given the same rules:
/// the same replies to the same commands, GETUSER alike, Redis's error
/// texts, an edit seen by a session already logged in, and DELUSER
/// closing the deleted user's connections, as on the node.
#[test]
fn setuser_through_mithril_matches_a_node_with_the_same_rules() {
    let (cluster, m) = one_master();
    let mut a = login(&m, "admin", "a-pw");
    let mut node = cluster.nodes[0].conn();
    let both = |a: &mut Conn, node: &mut Conn, cmd: &[&str]| {
        let (o, l) = (a.cmd(cmd), node.cmd(cmd));
        assert_eq!(o, l, "{cmd:?}");
        o
    };
    let rules = [
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">b-pw",
        "~app:*",
        "%R~pub:*",
        "resetchannels",
        "&news.*",
        "-@all",
        "+@read",
        "+set",
        "+config|get",
        "+publish",
    ];
    assert_eq!(both(&mut a, &mut node, &rules), ok());
    // GETUSER alike: flags, digest, keys, channels; the command rules are
    // the same words (Redis rewrites their order).
    let getuser = |c: &mut Conn| {
        let mut fields = c.cmd(&["ACL", "GETUSER", "bob"]).as_array().to_vec();
        let mut words: Vec<String> = fields[5].as_str().split(' ').map(String::from).collect();
        words.sort();
        fields[5] = bulk(&words.join(" "));
        Reply::Array(Some(fields))
    };
    let described = getuser(&mut a);
    assert_eq!(described, getuser(&mut node));
    assert!(format!("{described:?}").contains(&sha256_hex("b-pw")));
    assert_eq!(
        both(&mut a, &mut node, &["ACL", "GETUSER", "nobody"]),
        Reply::Bulk(None)
    );
    for bad in [
        &["ACL", "SETUSER", "bob", "+nosuch"][..],
        &["ACL", "SETUSER", "bob", "<never-set"],
        &["ACL", "SETUSER", "bob", "#abc"],
        &["ACL", "SETUSER", "bob", "allkeys", "~x"],
        &["ACL", "SETUSER", "bob", "bogus"],
        &["ACL", "SETUSER", "a b", "on"],
        &["ACL", "DELUSER", "default"],
        &["ACL", "CAT", "nosuch"],
    ] {
        assert!(both(&mut a, &mut node, bad).is_error(), "{bad:?}");
    }
    // The failed edits changed nothing.
    assert_eq!(getuser(&mut a), described);
    assert_eq!(getuser(&mut node), described);
    assert_eq!(
        both(&mut a, &mut node, &["ACL", "CAT"]),
        a.cmd(&["ACL", "CAT"])
    );
    let cat = |c: &mut Conn| {
        let mut v: Vec<String> = c
            .cmd(&["ACL", "CAT", "scripting"])
            .as_array()
            .iter()
            .map(|r| r.as_str().to_string())
            .collect();
        v.sort();
        v
    };
    let (mine, theirs) = (cat(&mut a), cat(&mut node));
    assert!(
        theirs.len() > 10 && theirs.iter().all(|n| mine.contains(n)),
        "{mine:?} {theirs:?}"
    );

    let mut ours = login(&m, "bob", "b-pw");
    let mut live = cluster.nodes[0].conn();
    assert_eq!(live.cmd(&["AUTH", "bob", "b-pw"]), ok());
    let probes: &[&[&str]] = &[
        &["SET", "app:1", "v"],
        &["GET", "app:1"],
        &["GET", "pub:1"],
        &["SET", "pub:1", "v"],
        &["GET", "other"],
        &["HSET", "app:h", "f", "v"],
        &["DEL", "app:1"],
        &["CONFIG", "SET", "maxclients", "10"],
        &["PUBLISH", "news.a", "m"],
        &["PUBLISH", "other", "m"],
        &["ACL", "WHOAMI"],
    ];
    for cmd in probes {
        let (o, l) = (ours.cmd(cmd), live.cmd(cmd));
        assert_eq!(o, l, "{cmd:?}");
    }
    assert_eq!(ours.cmd(&["GET", "app:1"]), bulk("v"));

    // An edit reaches a session already logged in, at its next command.
    let edit = ["ACL", "SETUSER", "bob", "-get", "+del"];
    assert_eq!(both(&mut a, &mut node, &edit), ok());
    for cmd in [&["GET", "app:1"][..], &["DEL", "pub:1"]] {
        let (o, l) = (ours.cmd(cmd), live.cmd(cmd));
        assert_eq!(o, l, "{cmd:?}");
    }
    assert_eq!(ours.cmd(&["GET", "app:1"]), noperm_cmd("get"));
    // (One keyspace behind both: the second DEL finds nothing.)
    assert_eq!(ours.cmd(&["DEL", "app:1"]), Reply::Int(1));
    assert_eq!(live.cmd(&["DEL", "app:1"]), Reply::Int(0));
    // A new password, the old one removed.
    assert_eq!(
        both(
            &mut a,
            &mut node,
            &["ACL", "SETUSER", "bob", ">new", "<b-pw"]
        ),
        ok()
    );
    let mut fresh = m.conn();
    assert_eq!(
        fresh.cmd(&["AUTH", "bob", "b-pw"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(fresh.cmd(&["AUTH", "bob", "new"]), ok());
    // ACL LIST shows the edited user, no clear password.
    let list = format!("{:?}", a.cmd(&["ACL", "LIST"]));
    assert!(
        list.contains(&format!("user bob on #{}", sha256_hex("new"))),
        "{list}"
    );
    assert!(!list.contains("b-pw") && !list.contains(">new"), "{list}");

    // DELUSER: one deleted, the unknown one not counted; bob's sessions
    // are closed, as the node closes its own.
    assert_eq!(
        both(&mut a, &mut node, &["ACL", "DELUSER", "bob", "nobody"]),
        Reply::Int(1)
    );
    assert!(live.is_closed(Duration::from_secs(5)));
    ours.send(&[b"PING"]);
    assert!(ours.is_closed(Duration::from_secs(5)));
    fresh.send(&[b"PING"]);
    assert!(fresh.is_closed(Duration::from_secs(5)));
    assert_eq!(
        m.conn().cmd(&["AUTH", "bob", "new"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    // Admin's own session is untouched.
    assert_eq!(a.cmd(&["ACL", "WHOAMI"]), bulk("admin"));
}

/// A user made by ACL SETUSER with scripting granted by its rules (Redis's
/// own suite logs in such a user) is refused script calls all the same
/// when its keys are limited: the script would run with the backend
/// user's rights (issue 30); its other commands are checked as usual.
#[test]
fn setuser_scripting_grant_runs_no_script_with_limited_keys() {
    let (_cluster, m) = one_master();
    let mut a = login(&m, "admin", "a-pw");
    assert_eq!(
        a.cmd(&[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">123",
            "+@scripting",
            "+set",
            "~x*"
        ]),
        ok()
    );
    let mut b = login(&m, "bob", "123");
    let set = "return redis.call('set', KEYS[1], ARGV[1])";
    assert_eq!(b.cmd(&["EVAL", set, "1", "xa", "1"]), noperm_cmd("eval"));
    assert_eq!(b.cmd(&["EVAL", set, "1", "ya", "1"]), noperm_cmd("eval"));
    assert!(!b.cmd(&["SCRIPT", "LOAD", set]).is_error());
    assert_eq!(b.cmd(&["SET", "xb", "1"]), ok());
    assert_eq!(b.cmd(&["GET", "xb"]), noperm_cmd("get"));
    // The configuration's mode user with limited keys: still refused.
    let mut w = login(&m, "writer", "w-pw");
    assert_eq!(w.cmd(&["EVAL", set, "1", "app:1", "1"]), noperm_cmd("eval"));
}

/// ACL LOG through mithril against a node that saw the same refusals:
/// the same entries (reason, context, object, user, count), newest first,
/// grouped alike, a count argument, RESET.
#[test]
fn acl_log_matches_a_node_that_saw_the_same_refusals() {
    let (cluster, m) = one_master();
    let mut a = login(&m, "admin", "a-pw");
    let mut node = cluster.nodes[0].conn();
    let rules = [
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">b-pw",
        "~app:*",
        "resetchannels",
        "&news.*",
        "-@all",
        "+get",
        "+set",
        "+publish",
        "+multi",
        "+exec",
        "+discard",
    ];
    assert_eq!(a.cmd(&rules), ok());
    assert_eq!(node.cmd(&rules), ok());
    assert_eq!(node.cmd(&["ACL", "LOG", "RESET"]), ok());
    assert_eq!(a.cmd(&["ACL", "LOG"]), Reply::Array(Some(vec![])));
    let mut ours = login(&m, "bob", "b-pw");
    let mut live = cluster.nodes[0].conn();
    assert_eq!(live.cmd(&["AUTH", "bob", "b-pw"]), ok());
    for c in [&mut ours, &mut live] {
        for cmd in [
            &["GET", "other"][..],
            &["GET", "other"],
            &["HSET", "app:h", "f", "v"],
            &["PUBLISH", "elsewhere", "m"],
            &["AUTH", "bob", "wrong"],
            &["MULTI"],
            &["SET", "secret", "v"],
            &["DISCARD"],
        ] {
            c.cmd(cmd);
        }
    }
    // Fields but the age and the client's line.
    let entries = |c: &mut Conn, args: &[&str]| -> Vec<Vec<Reply>> {
        c.cmd(args)
            .as_array()
            .iter()
            .map(|e| {
                let f = e.as_array();
                assert_eq!(f[10], bulk("age-seconds"));
                assert_eq!(f[12], bulk("client-info"));
                assert!(f[13].as_str().contains("user="), "{f:?}");
                f[..10].to_vec()
            })
            .collect()
    };
    let ours_log = entries(&mut a, &["ACL", "LOG"]);
    assert_eq!(ours_log, entries(&mut node, &["ACL", "LOG"]));
    assert_eq!(ours_log.len(), 5, "{ours_log:?}");
    // Newest first: the key refused inside MULTI; the two GETs grouped.
    assert_eq!(ours_log[0][5], bulk("multi"));
    assert_eq!(ours_log[0][7], bulk("secret"));
    assert_eq!(ours_log[4][1], Reply::Int(2));
    assert_eq!(entries(&mut a, &["ACL", "LOG", "2"]).len(), 2);
    assert_eq!(entries(&mut a, &["ACL", "LOG", "0"]).len(), 0);
    assert!(a.cmd(&["ACL", "LOG", "x"]).is_error());
    assert_eq!(a.cmd(&["ACL", "LOG", "RESET"]), ok());
    assert_eq!(a.cmd(&["ACL", "LOG"]), Reply::Array(Some(vec![])));
}
