//! Issue 9, credentials to the cluster: a password-protected cluster served
//! with `backend-password` (routed requests, fan-outs, cluster-wide
//! commands, blocking leases, pub/sub, the topology), a clear start-up
//! error for a wrong or missing password, `backend-user`, and a password
//! changed while mithril runs (logged, answered as an error, retried).
//!
//! The harness builds the cluster over connections without AUTH, so the
//! password is set once the cluster is formed (`CONFIG SET requirepass`);
//! `masterauth` goes in through `ClusterSpec::extra_redis_conf`.

mod support;

use std::time::Duration;
use support::*;

const CLUSTER_PW: &str = "cluster-s3cret";

/// A 3-master cluster whose nodes require `CLUSTER_PW` from `default`.
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
        // It really is protected now.
        assert_eq!(
            n.conn().cmd(&["GET", "x"]),
            Reply::Error("NOAUTH Authentication required.".into())
        );
    }
    cluster
}

/// `GET key` straight from the node that owns it, authenticated with
/// `auth` (the harness's slot map needs an open node, so the owner is the
/// node that does not answer MOVED).
fn direct_get(cluster: &RedisCluster, key: &str, auth: &[&str]) -> Reply {
    let mut args = vec!["AUTH"];
    args.extend_from_slice(auth);
    for n in &cluster.nodes {
        let mut c = n.conn();
        assert_eq!(c.cmd(&args), ok());
        match c.cmd(&["GET", key]) {
            Reply::Error(e) if e.starts_with("MOVED") => continue,
            other => return other,
        }
    }
    panic!("no node owns {key}");
}

/// Starts mithril with `extra` and expects it to exit with status 1; its
/// output.
fn fails_to_start(cluster: &RedisCluster, extra: &str) -> String {
    let mut m = Mithril::spawn(bin(), &cluster.seeds(), extra);
    let status = m.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{}", m.stdio());
    format!("{}{}", m.stdio(), m.log())
}

#[test]
fn a_password_protected_cluster_is_served_with_backend_password() {
    let cluster = protected_cluster();

    // Without the password, or with a wrong one, the start fails and says
    // why, naming the node and its answer.
    let out = fails_to_start(&cluster, "");
    assert!(
        out.contains("requires a password") && out.contains("set backend-password"),
        "{out}"
    );
    let out = fails_to_start(&cluster, "backend-password wr0ng-guess\n");
    assert!(
        out.contains("refused mithril's credentials")
            && out.contains("WRONGPASS invalid username-password pair"),
        "{out}"
    );
    assert!(
        !out.contains("wr0ng-guess"),
        "the password stays out of the output: {out}"
    );
    let out = fails_to_start(
        &cluster,
        &format!("backend-user nobody\nbackend-password {CLUSTER_PW}\n"),
    );
    assert!(out.contains("WRONGPASS"), "{out}");
    assert!(
        !out.contains(CLUSTER_PW),
        "the password stays out of the output: {out}"
    );

    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("backend-password {CLUSTER_PW}\n"),
    );
    let mut c = m.conn();
    // Single-slot commands on every master.
    for i in 0..30 {
        let key = format!("bk:{i}");
        assert_eq!(c.cmd(&["SET", &key, &i.to_string()]), ok());
    }
    for i in 0..30 {
        let key = format!("bk:{i}");
        assert_eq!(c.cmd(&["GET", &key]), bulk(&i.to_string()));
        assert_eq!(
            direct_get(&cluster, &key, &[CLUSTER_PW]),
            bulk(&i.to_string())
        );
    }
    // A fan-out over slots, and a cluster-wide command.
    assert_eq!(
        c.cmd(&["MGET", "bk:0", "bk:1", "bk:2"]),
        Reply::Array(Some(vec![bulk("0"), bulk("1"), bulk("2")]))
    );
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(30));
    // A blocking command (its own leased connection).
    let mut pusher = m.conn();
    c.send(&[b"BLPOP", b"bk:list", b"10"]);
    assert_eq!(pusher.cmd(&["RPUSH", "bk:list", "item"]), Reply::Int(1));
    assert_eq!(
        c.read_reply(),
        Reply::Array(Some(vec![bulk("bk:list"), bulk("item")]))
    );
    // Pub/sub (a subscriber connection of its own).
    let mut sub = m.conn();
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "bk.chan"]),
        Reply::Array(Some(vec![
            bulk("subscribe"),
            bulk("bk.chan"),
            Reply::Int(1)
        ]))
    );
    let msg = wait_until("the message", Duration::from_secs(10), || {
        assert!(!pusher.cmd(&["PUBLISH", "bk.chan", "hello"]).is_error());
        sub.try_read_reply(Duration::from_millis(200)).ok()
    });
    assert_eq!(
        msg,
        Reply::Array(Some(vec![bulk("message"), bulk("bk.chan"), bulk("hello")]))
    );
    // A RESP3 subscriber: its connection answers AUTH and HELLO 3 first,
    // and neither answer reaches the client.
    let mut sub3 = m.conn();
    assert!(!sub3.cmd(&["HELLO", "3"]).is_error());
    assert_eq!(
        sub3.cmd(&["SUBSCRIBE", "bk.three"]),
        Reply::Push(vec![bulk("subscribe"), bulk("bk.three"), Reply::Int(1)])
    );
    let msg = wait_until("the RESP3 message", Duration::from_secs(10), || {
        assert!(!pusher.cmd(&["PUBLISH", "bk.three", "hi"]).is_error());
        sub3.try_read_reply(Duration::from_millis(200)).ok()
    });
    assert_eq!(
        msg,
        Reply::Push(vec![bulk("message"), bulk("bk.three"), bulk("hi")])
    );
    // The topology kept refreshing with the password too.
    let info = c.cmd(&["INFO", "cluster"]);
    assert!(!info.is_error(), "{info:?}");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "backend-password"]),
        Reply::Array(Some(vec![bulk("backend-password"), bulk("(hidden)")]))
    );
    assert!(
        !m.log().contains(CLUSTER_PW),
        "the password stays out of the log"
    );
}

#[test]
fn backend_user_and_a_password_changed_while_running() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    // A user for the proxy; default locked with another password.
    for n in &cluster.nodes {
        let mut c = n.conn();
        assert_eq!(
            c.cmd(&[
                "ACL",
                "SETUSER",
                "proxy",
                "on",
                ">proxy-pw",
                "~*",
                "&*",
                "+@all"
            ]),
            ok()
        );
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "requirepass", "not-for-mithril"]),
            ok()
        );
    }
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "backend-user proxy\nbackend-password proxy-pw\n",
    );
    let mut c = m.conn();
    for i in 0..10 {
        assert_eq!(c.cmd(&["SET", &format!("u:{i}"), "v"]), ok());
    }
    assert_eq!(
        direct_get(&cluster, "u:3", &["proxy", "proxy-pw"]),
        bulk("v")
    );

    // The cluster's password changes under mithril, and its connections
    // go: new ones are refused, the clients get the node's answer as an
    // error, and the log says what happened.
    let set_pw = |pw: &str| {
        for n in &cluster.nodes {
            let mut a = n.conn();
            assert_eq!(a.cmd(&["AUTH", "not-for-mithril"]), ok());
            let rule = format!(">{pw}");
            assert_eq!(
                a.cmd(&["ACL", "SETUSER", "proxy", "resetpass", &rule]),
                ok()
            );
            assert!(!a.cmd(&["CLIENT", "KILL", "USER", "proxy"]).is_error());
        }
    };
    set_pw("changed-pw");
    let refused = wait_until(
        "a refusal to reach the client",
        Duration::from_secs(10),
        || {
            match c.cmd(&["GET", "u:1"]) {
                Reply::Error(e) if e.contains("refused mithril's credentials") => Some(e),
                Reply::Error(_) => None,
                other => {
                    // A reply from a connection opened before the change.
                    assert_eq!(other, bulk("v"));
                    None
                }
            }
        },
    );
    assert!(refused.contains("WRONGPASS"), "{refused}");
    wait_until("the refusal in the log", Duration::from_secs(10), || {
        m.log()
            .contains("refused mithril's credentials")
            .then_some(())
    });
    // Put the password back: after the backoff, requests flow again.
    set_pw("proxy-pw");
    wait_until("mithril to reconnect", Duration::from_secs(20), || {
        (c.cmd(&["GET", "u:1"]) == bulk("v")).then_some(())
    });
    for i in 0..10 {
        assert_eq!(c.cmd(&["GET", &format!("u:{i}")]), bulk("v"));
    }
}
