//! SLOWLOG after deliberately slow commands, and CLIENT LIST / CLIENT KILL
//! across workers (issue 8).

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::*;

/// A script that keeps the node busy for `ms` milliseconds.
fn busy_script(ms: u64) -> String {
    format!(
        "local t = redis.call('TIME') \
         local start = t[1] * 1000000 + t[2] \
         while true do \
           local n = redis.call('TIME') \
           if n[1] * 1000000 + n[2] - start >= {} then break end \
         end \
         return 1",
        ms * 1000
    )
}

/// A one-master cluster and mithril with two workers in front of it.
fn one_master_two_workers(extra: &str) -> (RedisCluster, Mithril) {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), &format!("threads 2\n{extra}"));
    (cluster, m)
}

fn entries(r: &Reply) -> Vec<&[Reply]> {
    r.as_array().iter().map(|e| e.as_array()).collect()
}

fn args_of(e: &[Reply]) -> Vec<String> {
    e[3].as_array()
        .iter()
        .map(|a| a.as_str().to_string())
        .collect()
}

#[test]
fn slow_commands_are_logged_as_redis_logs_them() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 2\nslowlog-log-slower-than 15000\nslowlog-max-len 3\n",
    );
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).as_int(), 0);
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "slowpoke"]).as_str(), "OK");
    // Fast commands stay out.
    for i in 0..50 {
        c.cmd(&["SET", &format!("fast:{i}"), "v"]);
    }
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).as_int(), 0);

    let script = busy_script(30);
    let t0 = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(c.cmd(&["EVAL", &script, "1", "busy:key"]).as_int(), 1);
    let got = c.cmd(&["SLOWLOG", "GET"]);
    let list = entries(&got);
    assert_eq!(list.len(), 1, "{got:?}");
    let e = list[0];
    assert_eq!(e.len(), 6);
    let (id, when, micros) = (e[0].as_int(), e[1].as_int() as u64, e[2].as_int());
    assert!(id >= 0);
    assert!(when >= t0 && when <= t0 + 5, "{when} vs {t0}");
    assert!((30_000..5_000_000).contains(&micros), "{micros}");
    let args = args_of(e);
    assert_eq!(args.len(), 4);
    assert_eq!(args[0], "EVAL");
    // The script is longer than 128 bytes: trimmed as Redis trims.
    assert!(script.len() > 128);
    assert_eq!(
        args[1],
        format!("{}... ({} more bytes)", &script[..128], script.len() - 128)
    );
    assert_eq!(&args[2..], ["1", "busy:key"]);
    let me = c.stream().local_addr().unwrap().to_string();
    assert_eq!(e[4].as_str(), me);
    assert_eq!(e[5].as_str(), "slowpoke");

    // Many arguments: at most 32, the last saying how many more.
    let mut many = vec!["EVAL".to_string(), busy_script(20), "1".into(), "k".into()];
    many.extend((0..40).map(|i| i.to_string()));
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs).as_int(), 1);
    let got = c.cmd(&["SLOWLOG", "GET", "1"]);
    let list = entries(&got);
    assert_eq!(list.len(), 1);
    assert!(list[0][0].as_int() > id, "newest first, ids grow");
    let args = args_of(list[0]);
    assert_eq!(args.len(), 32);
    assert_eq!(args[30], "26");
    assert_eq!(args[31], "... (13 more arguments)");

    // Several workers log into one history of at most slowlog-max-len.
    let mut d = m.conn();
    for _ in 0..3 {
        assert_eq!(d.cmd(&["EVAL", &busy_script(20), "1", "other"]).as_int(), 1);
    }
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).as_int(), 3);
    let all = c.cmd(&["SLOWLOG", "GET", "-1"]);
    let ids: Vec<i64> = entries(&all).iter().map(|e| e[0].as_int()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    assert_eq!(entries(&c.cmd(&["SLOWLOG", "GET", "0"])).len(), 0);
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "-2"]).as_error(),
        "ERR count should be greater than or equal to -1"
    );
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "x"]).as_error(),
        "ERR count should be greater than or equal to -1"
    );
    assert!(c.cmd(&["SLOWLOG", "HELP"]).as_array().len() > 4);
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]).as_str(), "OK");
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).as_int(), 0);
    let st = c.cmd(&["INFO", "stats"]).as_str().to_string();
    assert!(st.contains("slowlog_entries_written:5\r\n"), "{st}");
}

#[test]
fn threshold_zero_logs_everything_and_negative_nothing() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "slowlog-log-slower-than 0\n");
    let mut c = m.conn();
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["PING"]);
    c.cmd(&["AUTH", "secret"]);
    let got = c.cmd(&["SLOWLOG", "GET"]);
    // As on a node, SLOWLOG is logged too, once it ran: RESET leaves its
    // own entry, GET does not see its own.
    let names: Vec<Vec<String>> = entries(&got).iter().map(|e| args_of(e)).collect();
    assert_eq!(
        names,
        [
            &["AUTH", "(redacted)"][..],
            &["PING"],
            &["SET", "a", "1"],
            &["SLOWLOG", "RESET"]
        ]
    );

    // A burst of slow requests: each worker writes at most slowlog-max-len
    // entries per tick (no more could be kept), and counts the rest.
    let burst: Vec<Vec<Vec<u8>>> = (0..3000)
        .map(|i| {
            vec![
                b"SET".to_vec(),
                format!("b:{i}").into_bytes(),
                b"v".to_vec(),
            ]
        })
        .collect();
    assert!(c.pipeline(&burst).iter().all(|r| r.as_str() == "OK"));
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).as_int(), 128);
    let st = c.cmd(&["INFO", "stats"]).as_str().to_string();
    let field = |k: &str| -> u64 {
        st.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .unwrap()
            .parse()
            .unwrap()
    };
    let (written, skipped) = (
        field("slowlog_entries_written"),
        field("slowlog_entries_skipped"),
    );
    assert!(skipped > 0, "{st}");
    // (The harness's readiness PING is in there too.)
    assert!(written + skipped >= 3003, "{st}");

    let off = Mithril::start(bin(), &cluster.seeds(), "slowlog-log-slower-than -1\n");
    let mut c = off.conn();
    assert_eq!(c.cmd(&["EVAL", &busy_script(20), "1", "k"]).as_int(), 1);
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).as_int(), 0);
}

#[test]
fn config_set_changes_the_slow_log_while_running() {
    // Off at start, two workers: the change must reach both.
    let (_cluster, m) = one_master_two_workers("slowlog-log-slower-than -1\n");
    let mut admin = m.conn();
    let get = |c: &mut Conn, name: &str| -> String {
        let r = c.cmd(&["CONFIG", "GET", name]);
        r.as_array()[1].as_str().to_string()
    };
    assert_eq!(get(&mut admin, "slowlog-log-slower-than"), "-1");
    let mut clients: Vec<Conn> = (0..4).map(|_| m.conn()).collect();
    for c in clients.iter_mut() {
        c.cmd(&["SET", "before", "1"]);
    }
    assert_eq!(admin.cmd(&["SLOWLOG", "LEN"]).as_int(), 0);

    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(get(&mut admin, "slowlog-log-slower-than"), "0");
    // Every worker picks it up within a tick (100 ms).
    let logged = wait_until_explained("every worker logs", Duration::from_secs(5), || {
        admin.cmd(&["SLOWLOG", "RESET"]);
        for (i, c) in clients.iter_mut().enumerate() {
            c.cmd(&["SET", &format!("after:{i}"), "1"]);
        }
        let got = admin.cmd(&["SLOWLOG", "GET", "100"]);
        let keys: std::collections::BTreeSet<String> = entries(&got)
            .iter()
            .map(|e| args_of(e))
            .filter(|a| a[0] == "SET")
            .map(|a| a[1].clone())
            .collect();
        if keys.len() == clients.len() {
            Ok(keys)
        } else {
            Err(format!("logged only {keys:?}"))
        }
    });
    assert!(logged.contains("after:0") && logged.contains("after:3"));

    // A shorter log drops the oldest entries at once.
    for i in 0..10 {
        clients[0].cmd(&["SET", &format!("more:{i}"), "1"]);
    }
    assert!(admin.cmd(&["SLOWLOG", "LEN"]).as_int() >= 10);
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "slowlog-max-len", "3"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(get(&mut admin, "slowlog-max-len"), "3");
    assert_eq!(admin.cmd(&["SLOWLOG", "LEN"]).as_int(), 3);
    // And keeps the newest three from then on.
    for i in 0..5 {
        clients[0].cmd(&["SET", &format!("last:{i}"), "1"]);
    }
    let newest = admin.cmd(&["SLOWLOG", "GET", "-1"]);
    let names: Vec<Vec<String>> = entries(&newest).iter().map(|e| args_of(e)).collect();
    assert_eq!(
        names,
        [
            ["SET", "last:4", "1"],
            ["SET", "last:3", "1"],
            ["SET", "last:2", "1"]
        ]
    );

    // A bad value changes nothing and says why, in Redis's form.
    let r = admin.cmd(&["CONFIG", "SET", "slowlog-max-len", "lots"]);
    assert!(
        r.as_error().starts_with(
            "ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - "
        ),
        "{r:?}"
    );
    assert_eq!(get(&mut admin, "slowlog-max-len"), "3");
    // Off again.
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(get(&mut admin, "slowlog-log-slower-than"), "-1");
}

/// `field=value` pairs of one CLIENT LIST line.
fn line_fields(line: &str) -> std::collections::HashMap<String, String> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn list(c: &mut Conn, args: &[&str]) -> Vec<std::collections::HashMap<String, String>> {
    let mut a = vec!["CLIENT", "LIST"];
    a.extend_from_slice(args);
    let text = c.cmd(&a).as_str().to_string();
    assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
    text.lines().map(line_fields).collect()
}

#[test]
fn client_list_and_kill_span_every_worker() {
    let (_cluster, m) = one_master_two_workers("placement round-robin\n");
    let mut conns: Vec<Conn> = (0..4).map(|_| m.conn()).collect();
    let mut ids = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        assert_eq!(
            c.cmd(&["CLIENT", "SETNAME", &format!("c{i}")]).as_str(),
            "OK"
        );
        ids.push(c.cmd(&["CLIENT", "ID"]).as_int());
    }
    let lines = list(&mut conns[0], &[]);
    assert_eq!(lines.len(), 4, "{lines:?}");
    let mut names: Vec<&str> = lines.iter().map(|l| l["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["c0", "c1", "c2", "c3"]);
    let mut workers: Vec<&str> = lines.iter().map(|l| l["worker"].as_str()).collect();
    workers.sort_unstable();
    workers.dedup();
    assert_eq!(workers, ["0", "1"], "clients on both workers");
    for l in &lines {
        let i = l["name"][1..].parse::<usize>().unwrap();
        assert_eq!(l["id"], ids[i].to_string());
        assert_eq!(
            l["addr"],
            conns[i].stream().local_addr().unwrap().to_string()
        );
        assert_eq!(l["laddr"], m.addr());
        assert_eq!(l["flags"], "N");
        assert_eq!(l["user"], "default");
    }
    // The line of CLIENT INFO is the line of CLIENT LIST.
    let own = conns[0].cmd(&["CLIENT", "INFO"]).as_str().to_string();
    let own = line_fields(own.trim_end());
    assert_eq!(own["id"], ids[0].to_string());
    assert_eq!(
        own["worker"],
        lines.iter().find(|l| l["name"] == "c0").unwrap()["worker"]
    );

    // Filters.
    let one = list(&mut conns[0], &["ID", &ids[2].to_string(), "999999"]);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["name"], "c2");
    assert_eq!(list(&mut conns[0], &["TYPE", "normal"]).len(), 4);
    assert_eq!(list(&mut conns[0], &["TYPE", "pubsub"]).len(), 0);
    conns[3].send(&[b"SUBSCRIBE", b"chan"]);
    let confirm = conns[3].read_reply();
    assert_eq!(confirm.as_array()[0].as_str(), "subscribe");
    let subs = list(&mut conns[0], &["TYPE", "pubsub"]);
    assert_eq!(subs.len(), 1);
    assert_eq!(subs[0]["name"], "c3");
    assert_eq!(subs[0]["sub"], "1");
    assert_eq!(list(&mut conns[0], &["TYPE", "master"]).len(), 0);
    for (args, err) in [
        (&["TYPE", "foo"][..], "ERR Unknown client type 'foo'"),
        (&["ID", "abc"], "ERR Invalid client ID"),
        (&["TYPE"], "ERR syntax error"),
        (&["foo", "bar"], "ERR syntax error"),
    ] {
        let mut a = vec!["CLIENT", "LIST"];
        a.extend_from_slice(args);
        assert_eq!(conns[0].cmd(&a).as_error(), err, "{args:?}");
    }

    // KILL by id, on whichever worker the victim lives.
    let victim = ids[1].to_string();
    assert_eq!(conns[0].cmd(&["CLIENT", "KILL", "ID", &victim]).as_int(), 1);
    assert!(conns[1].is_closed(Duration::from_secs(5)));
    assert_eq!(conns[0].cmd(&["CLIENT", "KILL", "ID", &victim]).as_int(), 0);
    // The old form: by address, +OK or an error.
    let addr2 = conns[2].stream().local_addr().unwrap().to_string();
    assert_eq!(conns[0].cmd(&["CLIENT", "KILL", &addr2]).as_str(), "OK");
    assert!(conns[2].is_closed(Duration::from_secs(5)));
    assert_eq!(
        conns[0].cmd(&["CLIENT", "KILL", &addr2]).as_error(),
        "ERR No such client"
    );
    // The subscriber, by type and address together.
    let addr3 = conns[3].stream().local_addr().unwrap().to_string();
    assert_eq!(
        conns[0]
            .cmd(&["CLIENT", "KILL", "TYPE", "pubsub", "ADDR", &addr3])
            .as_int(),
        1
    );
    assert!(conns[3].is_closed(Duration::from_secs(5)));
    for (args, err) in [
        (&["ID", "0"][..], "ERR client-id should be greater than 0"),
        (&["ID", "x"], "ERR client-id should be greater than 0"),
        (&["TYPE", "foo"], "ERR Unknown client type 'foo'"),
        (&["USER", "bob"], "ERR No such user 'bob'"),
        (&["SKIPME", "maybe"], "ERR syntax error"),
        (&["NOSUCH", "x"], "ERR syntax error"),
        (&["ID", "1", "SKIPME"], "ERR syntax error"),
    ] {
        let mut a = vec!["CLIENT", "KILL"];
        a.extend_from_slice(args);
        assert_eq!(conns[0].cmd(&a).as_error(), err, "{args:?}");
    }
    // SKIPME yes (the default) spares the caller; no does not, and the
    // caller still gets its reply before the connection closes. The extra
    // connection has sent nothing: it counts from its connect on, as on a
    // node (correctness.rs, item 14).
    let mut extra = m.conn();
    let me = conns[0].cmd(&["CLIENT", "ID"]).as_int().to_string();
    assert_eq!(
        conns[0]
            .cmd(&["CLIENT", "KILL", "USER", "default"])
            .as_int(),
        1,
        "everyone but the caller: the extra connection"
    );
    assert!(extra.is_closed(Duration::from_secs(5)));
    assert_eq!(
        conns[0]
            .cmd(&["CLIENT", "KILL", "ID", &me, "SKIPME", "no"])
            .as_int(),
        1
    );
    assert!(conns[0].is_closed(Duration::from_secs(5)));
    let mut last = m.conn();
    let left = list(&mut last, &[]);
    assert_eq!(left.len(), 1, "{left:?}");
}

/// redis-py's test_client_kill_filter_by_user: CLIENT KILL USER names any
/// user the ACL knows (made with ACL SETUSER or by a `user` line) and
/// closes only that user's connections, on every worker; SKIPME spares the
/// caller only.
#[test]
fn client_kill_user_closes_that_users_connections_on_every_worker() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    for threads in [1, 2, 4] {
        let m = Mithril::start(
            bin(),
            &cluster.seeds(),
            &format!("threads {threads}\nuser fileuser on >filepw ~* &* +@all\n"),
        );
        let mut admin = m.conn();
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "made", "on", ">madepw", "~*", "&*", "+@all"]),
            ok()
        );
        let login = |user: &str, pass: &str| {
            let mut c = m.conn();
            assert_eq!(c.cmd(&["AUTH", user, pass]), ok());
            c
        };
        let mut made: Vec<Conn> = (0..4).map(|_| login("made", "madepw")).collect();
        let mut file: Vec<Conn> = (0..3).map(|_| login("fileuser", "filepw")).collect();
        assert_eq!(
            admin.cmd(&["CLIENT", "KILL", "USER", "made"]),
            Reply::Int(4),
            "threads {threads}"
        );
        for c in &mut made {
            assert!(c.is_closed(Duration::from_secs(5)), "threads {threads}");
        }
        // `default` is the admin's own user here: SKIPME spares it, and
        // nobody else is `default`.
        assert_eq!(
            admin.cmd(&["CLIENT", "KILL", "USER", "default", "SKIPME", "yes"]),
            Reply::Int(0),
            "threads {threads}"
        );
        for c in &mut file {
            assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
        }
        assert_eq!(
            admin.cmd(&["CLIENT", "KILL", "USER", "nosuch"]).as_error(),
            "ERR No such user 'nosuch'"
        );
        assert_eq!(
            admin.cmd(&["CLIENT", "KILL", "USER", "fileuser", "SKIPME", "no"]),
            Reply::Int(3)
        );
    }
}
