//! Client-side caching through mithril (CLIENT TRACKING) against real
//! clusters: RESP3 pushes for keys read through the proxy, changed through
//! it and directly on a node; BCAST with a prefix; REDIRECT to a RESP2
//! subscriber; OPTIN with CLIENT CACHING YES; NOLOOP; FLUSHALL's null;
//! the table's bound; CLIENT TRACKINGINFO / GETREDIR and the errors as a
//! Redis node gives them.

mod support;

use std::time::Duration;
use support::*;

const WAIT: Duration = Duration::from_secs(5);
/// How long a push that must not come is waited for.
const QUIET: Duration = Duration::from_millis(300);

fn invalidate(key: &str) -> Reply {
    Reply::Push(vec![
        bulk("invalidate"),
        Reply::Array(Some(vec![bulk(key)])),
    ])
}

/// A RESP3 connection with `CLIENT TRACKING ON <opts>`, once the proxy's
/// trackers are up (before, a read is followed by its invalidation at
/// once: nothing could tell the client of a change).
fn tracking_conn(m: &Mithril, opts: &[&str]) -> Conn {
    let mut c = m.conn();
    assert!(matches!(c.cmd(&["HELLO", "3"]), Reply::Map(_)));
    let mut a = vec!["CLIENT", "TRACKING", "ON"];
    a.extend_from_slice(opts);
    assert_eq!(c.cmd(&a), ok());
    wait_ready(&mut c);
    c
}

/// Until a GET of a probe key and a PING come without a push.
fn wait_ready(c: &mut Conn) {
    wait_until("the trackers to be up", WAIT, || {
        let k = format!("probe:{}", random_u64());
        c.send(&[b"GET", k.as_bytes()]);
        c.send(&[b"PING"]);
        // The GET's reply, the PONG, and any push between them or before
        // (a BCAST client is sent the null as each tracker comes up).
        let mut pushes = 0;
        let mut replies = 0;
        while replies < 2 {
            match c.read_reply() {
                Reply::Push(_) => pushes += 1,
                _ => replies += 1,
            }
        }
        if pushes == 0 {
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(20));
        None
    });
}

fn next_push(c: &mut Conn) -> Reply {
    c.try_read_reply(WAIT)
        .unwrap_or_else(|e| panic!("no push came: {e}"))
}

/// Nothing is pushed within QUIET (a PING's PONG comes first).
fn no_push(c: &mut Conn) {
    std::thread::sleep(QUIET);
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn a_read_key_changed_through_mithril_or_on_the_node_is_pushed() {
    for conf in ["threads 1", "threads 2", "threads 2\nreply-cache yes"] {
        let (cluster, m) = cluster_and_mithril(conf);
        let mut w = m.conn();
        let mut c = tracking_conn(&m, &[]);
        let key = "ct:user:1";
        assert_eq!(w.cmd(&["SET", key, "v1"]), ok());
        assert_eq!(c.cmd(&["GET", key]), bulk("v1"));
        // A write through the proxy (from another connection, perhaps
        // another worker).
        assert_eq!(w.cmd(&["SET", key, "v2"]), ok());
        assert_eq!(next_push(&mut c), invalidate(key), "{conf}");
        // Read again, then a write directly on the node.
        assert_eq!(c.cmd(&["GET", key]), bulk("v2"));
        let mut node = cluster.node_for_slot(key_slot(key.as_bytes())).conn();
        assert_eq!(node.cmd(&["SET", key, "v3"]), ok());
        assert_eq!(next_push(&mut c), invalidate(key), "{conf}");
        // Once told, the key is not tracked until read again.
        assert_eq!(node.cmd(&["SET", key, "v4"]), ok());
        no_push(&mut c);
        // Any read command tracks its keys: HGET, and a cross-slot MGET.
        w.cmd(&["HSET", "ct:h", "f", "1"]);
        assert_eq!(c.cmd(&["HGET", "ct:h", "f"]), bulk("1"));
        let keys: Vec<String> = (0..6).map(|i| format!("{{ct{i}}}m")).collect();
        let mut mget = vec!["MGET"];
        mget.extend(keys.iter().map(String::as_str));
        c.cmd(&mget);
        w.cmd(&["HSET", "ct:h", "f", "2"]);
        assert_eq!(next_push(&mut c), invalidate("ct:h"), "{conf}");
        let mut n5 = cluster.node_for_slot(key_slot(keys[5].as_bytes())).conn();
        assert_eq!(n5.cmd(&["SET", &keys[5], "x"]), ok());
        assert_eq!(next_push(&mut c), invalidate(&keys[5]), "{conf}");
        // CLIENT TRACKING OFF: no more pushes.
        c.cmd(&["GET", key]);
        assert_eq!(c.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
        w.cmd(&["SET", key, "v5"]);
        no_push(&mut c);
    }
}

#[test]
fn a_read_of_a_migrated_slot_is_still_invalidated() {
    let (cluster, m) = cluster_and_mithril("threads 1");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &[]);
    let key = "ct:moved";
    w.cmd(&["SET", key, "1"]);
    let slot = key_slot(key.as_bytes());
    let port = cluster.port_for_slot(slot);
    let to = (0..cluster.nodes.len())
        .find(|&i| {
            cluster.nodes[i].port != port
                && cluster
                    .masters()
                    .iter()
                    .any(|n| n.port == cluster.nodes[i].port)
        })
        .expect("another master");
    cluster.migrate_slot(slot, to, 10);
    // Likely redirected (MOVED: sent again without the opt-in, so
    // followed by the null), or sent to the new owner opted in: either
    // way a change made on the new owner reaches the client.
    assert_eq!(c.cmd(&["GET", key]), bulk("1"));
    let mut node = cluster.nodes[to].conn();
    assert_eq!(node.cmd(&["SET", key, "2"]), ok());
    let p = next_push(&mut c);
    assert!(
        p == invalidate(key) || p == Reply::Push(vec![bulk("invalidate"), Reply::Null]),
        "{p:?}"
    );
}

#[test]
fn a_transaction_s_reads_are_tracked_as_rueidis_sends_them() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &["OPTIN"]);
    w.cmd(&["SET", "ct:tx", "a"]);
    let r = c.pipeline(&[
        argv(&["CLIENT", "CACHING", "YES"]),
        argv(&["MULTI"]),
        argv(&["PTTL", "ct:tx"]),
        argv(&["GET", "ct:tx"]),
        argv(&["EXEC"]),
    ]);
    assert_eq!(
        r[4],
        Reply::Array(Some(vec![Reply::Int(-1), bulk("a")])),
        "{r:?}"
    );
    w.cmd(&["SET", "ct:tx", "b"]);
    assert_eq!(next_push(&mut c), invalidate("ct:tx"));
}

#[test]
fn bcast_pushes_every_change_under_a_prefix() {
    let (cluster, m) = cluster_and_mithril("threads 2");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &["BCAST", "PREFIX", "ctb:"]);
    // Until every master's tracker has BCAST on: a write under the prefix
    // on each is heard
    // (the null each tracker sends as it comes up is skipped).
    for (slot, _, _) in cluster.slot_map() {
        let k = key_for_slot(slot, "ctb:probe:");
        wait_until("the trackers to hear every key", WAIT, || {
            w.cmd(&["SET", &k, "x"]);
            loop {
                match c.try_read_reply(Duration::from_millis(200)) {
                    Ok(p) if p == invalidate(&k) => return Some(()),
                    Ok(_) => continue,
                    Err(_) => return None,
                }
            }
        });
    }
    // Nothing read: BCAST hears of every key under the prefix.
    w.cmd(&["SET", "other:1", "x"]);
    w.cmd(&["SET", "ctb:1", "x"]);
    assert_eq!(next_push(&mut c), invalidate("ctb:1"));
    let mut node = cluster.node_for_slot(key_slot(b"ctb:2")).conn();
    node.cmd(&["SET", "other:2", "x"]);
    node.cmd(&["SET", "ctb:2", "x"]);
    assert_eq!(next_push(&mut c), invalidate("ctb:2"));
    no_push(&mut c);
    // NOLOOP: the client's own writes are not pushed to it; others' are.
    assert_eq!(
        c.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]),
        ok()
    );
    assert_eq!(c.cmd(&["SET", "ctb:3", "x"]), ok());
    no_push(&mut c);
    w.cmd(&["SET", "ctb:3", "y"]);
    assert_eq!(next_push(&mut c), invalidate("ctb:3"));
}

#[test]
fn bcast_right_after_ok_misses_nothing() {
    // No reply cache: the trackers open at CLIENT TRACKING, and the read
    // and the write below race their BCAST.
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut w = m.conn();
    let mut c = m.conn();
    c.cmd(&["HELLO", "3"]);
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON", "BCAST"]), ok());
    // A null may come before the GET's reply (a tracker came up): it
    // says nothing about the GET.
    c.send(&[b"GET", b"ctw:1"]);
    loop {
        match c.read_reply() {
            Reply::Push(_) => continue,
            r => break assert_eq!(r, Reply::Null),
        }
    }
    w.cmd(&["SET", "ctw:1", "x"]);
    // Either the write was heard, or the client is told to start over.
    let p = next_push(&mut c);
    assert!(
        p == invalidate("ctw:1") || p == Reply::Push(vec![bulk("invalidate"), Reply::Null]),
        "{p:?}"
    );
}

#[test]
fn redirect_reaches_a_resp2_subscriber_of_redis_invalidate() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut r = m.conn();
    let id = r.cmd(&["CLIENT", "ID"]).as_int().to_string();
    let sub = r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    assert_eq!(sub.as_array()[0], bulk("subscribe"));
    let mut c = m.conn();
    assert_eq!(
        c.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"]),
        err("ERR The client ID you want redirect to does not exist")
    );
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]), ok());
    assert_eq!(
        c.cmd(&["CLIENT", "GETREDIR"]),
        Reply::Int(id.parse().unwrap())
    );
    let mut w = m.conn();
    // Until the trackers are up, a read is invalidated at once.
    wait_until("the trackers to be up", WAIT, || {
        let k = format!("ct:probe:{}", random_u64());
        c.cmd(&["GET", &k]);
        match r.try_read_reply(Duration::from_millis(100)) {
            Ok(_) => None,
            Err(_) => Some(()),
        }
    });
    w.cmd(&["SET", "ct:r", "1"]);
    assert_eq!(c.cmd(&["GET", "ct:r"]), bulk("1"));
    w.cmd(&["SET", "ct:r", "2"]);
    assert_eq!(
        r.try_read_reply(WAIT).expect("the message"),
        Reply::Array(Some(vec![
            bulk("message"),
            bulk("__redis__:invalidate"),
            Reply::Array(Some(vec![bulk("ct:r")])),
        ]))
    );
    // The target leaves: the redirect is broken.
    drop(r);
    std::thread::sleep(Duration::from_millis(100));
    c.cmd(&["GET", "ct:r"]);
    w.cmd(&["SET", "ct:r", "3"]);
    wait_until("broken_redirect", WAIT, || {
        let info = c.cmd(&["CLIENT", "TRACKINGINFO"]);
        info.as_array()
            .get(1)
            .is_some_and(|f| f.as_array().contains(&bulk("broken_redirect")))
            .then_some(())
    });
}

fn worker_of(c: &mut Conn) -> String {
    let info = c.cmd(&["CLIENT", "INFO"]);
    let line = info.as_str().to_string();
    line.split(' ')
        .find_map(|f| f.strip_prefix("worker="))
        .unwrap_or_else(|| panic!("no worker= in {line}"))
        .trim()
        .to_string()
}

#[test]
fn redirect_reaches_a_target_on_another_worker() {
    let (_cluster, m) = cluster_and_mithril("threads 2");
    let mut r = m.conn();
    r.cmd(&["HELLO", "3"]);
    let id = r.cmd(&["CLIENT", "ID"]).as_int().to_string();
    let home = worker_of(&mut r);
    // A tracking client on the other worker.
    let mut c = (0..32)
        .map(|_| m.conn())
        .find_map(|mut c| (worker_of(&mut c) != home).then_some(c))
        .expect("a connection on the other worker");
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]), ok());
    let mut w = m.conn();
    wait_until("the trackers to be up", WAIT, || {
        let k = format!("ct:probe:{}", random_u64());
        c.cmd(&["GET", &k]);
        match r.try_read_reply(Duration::from_millis(100)) {
            Ok(_) => None,
            Err(_) => Some(()),
        }
    });
    c.cmd(&["GET", "ct:x"]);
    w.cmd(&["SET", "ct:x", "1"]);
    assert_eq!(next_push(&mut r), invalidate("ct:x"));
    // The target leaves: the redirect is broken.
    drop(r);
    std::thread::sleep(Duration::from_millis(100));
    c.cmd(&["GET", "ct:x"]);
    w.cmd(&["SET", "ct:x", "2"]);
    wait_until("broken_redirect", WAIT, || {
        let info = c.cmd(&["CLIENT", "TRACKINGINFO"]);
        info.as_array()
            .get(1)
            .is_some_and(|f| f.as_array().contains(&bulk("broken_redirect")))
            .then_some(())
    });
}

#[test]
fn optin_tracks_only_after_caching_yes() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &["OPTIN"]);
    w.cmd(&["SET", "ct:a", "1"]);
    w.cmd(&["SET", "ct:b", "1"]);
    c.cmd(&["GET", "ct:a"]);
    assert_eq!(c.cmd(&["CLIENT", "CACHING", "YES"]), ok());
    c.cmd(&["GET", "ct:b"]);
    // The flag lasted one command.
    c.cmd(&["GET", "ct:c"]);
    w.cmd(&["SET", "ct:a", "2"]);
    w.cmd(&["SET", "ct:c", "2"]);
    w.cmd(&["SET", "ct:b", "2"]);
    assert_eq!(next_push(&mut c), invalidate("ct:b"));
    no_push(&mut c);
}

#[test]
fn noloop_spares_the_writer_its_own_changes() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &["NOLOOP"]);
    c.cmd(&["SET", "ct:n", "1"]);
    c.cmd(&["GET", "ct:n"]);
    assert_eq!(c.cmd(&["SET", "ct:n", "2"]), ok());
    no_push(&mut c);
    c.cmd(&["GET", "ct:n"]);
    w.cmd(&["SET", "ct:n", "3"]);
    assert_eq!(next_push(&mut c), invalidate("ct:n"));
    // Without NOLOOP the writer is told, after its write's reply.
    let mut d = tracking_conn(&m, &[]);
    d.cmd(&["GET", "ct:n"]);
    assert_eq!(d.cmd(&["SET", "ct:n", "4"]), ok());
    assert_eq!(next_push(&mut d), invalidate("ct:n"));
}

#[test]
fn flushall_sends_the_null_invalidation() {
    let (_cluster, m) = cluster_and_mithril("threads 2");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &[]);
    c.cmd(&["GET", "ct:f"]);
    assert_eq!(w.cmd(&["FLUSHALL"]), ok());
    assert_eq!(
        next_push(&mut c),
        Reply::Push(vec![bulk("invalidate"), Reply::Null])
    );
}

#[test]
fn the_table_bound_invalidates_the_oldest_keys() {
    // One worker's share of the bound: 3 keys. The last probe of
    // tracking_conn holds one of them.
    let (_cluster, m) = cluster_and_mithril("threads 1\ntracking-table-max-keys 3");
    let mut c = tracking_conn(&m, &[]);
    for k in ["ct:k1", "ct:k2"] {
        c.cmd(&["GET", k]);
    }
    no_push(&mut c);
    // A fourth key: the oldest (the probe) is invalidated, before the
    // reply (Redis, too, makes room before it runs the command).
    c.send(&[b"GET", b"ct:k3"]);
    let p = c.read_reply();
    let probe = p.as_array()[1].as_array()[0].as_str().to_string();
    assert!(probe.starts_with("probe:"), "{p:?}");
    assert_eq!(c.read_reply(), Reply::Null);
    c.send(&[b"GET", b"ct:k4"]);
    assert_eq!(c.read_reply(), invalidate("ct:k1"));
    assert_eq!(c.read_reply(), Reply::Null);
}

/// The replies of a sequence of tracking commands, with client ids
/// replaced (they differ between mithril and a node).
fn tracking_script(c: &mut Conn) -> Vec<Reply> {
    let script: &[&[&str]] = &[
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "CACHING", "YES"],
        &["CLIENT", "TRACKING", "maybe"],
        &["CLIENT", "TRACKING", "on", "bogus"],
        &["CLIENT", "TRACKING", "on", "prefix", "a"],
        &["CLIENT", "TRACKING", "on", "optin", "optout"],
        &["CLIENT", "TRACKING", "on", "bcast", "optin"],
        &["CLIENT", "TRACKING", "on", "redirect", "x"],
        &["CLIENT", "TRACKING", "on", "redirect", "987654"],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "ab",
        ],
        &["CLIENT", "TRACKING", "on", "optin"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "CACHING", "maybe"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "on", "optout"],
        &["CLIENT", "TRACKING", "on", "bcast"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "b", "noloop"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "a"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "bc"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "optout", "noloop"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
    ];
    script.iter().map(|a| c.cmd(a)).collect()
}

#[test]
fn trackinginfo_getredir_and_the_errors_are_redis_s() {
    let (cluster, m) = cluster_and_mithril("threads 1");
    for resp3 in [false, true] {
        let mut node = cluster.masters()[0].conn();
        let mut c = m.conn();
        if resp3 {
            node.cmd(&["HELLO", "3"]);
            c.cmd(&["HELLO", "3"]);
        }
        let want = tracking_script(&mut node);
        let got = tracking_script(&mut c);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "step {i} (resp3 {resp3})");
        }
        // REDIRECT: the id given is the one shown.
        let id = c.cmd(&["CLIENT", "ID"]).as_int();
        let mut d = m.conn();
        assert_eq!(
            d.cmd(&["CLIENT", "TRACKING", "on", "redirect", &id.to_string()]),
            ok()
        );
        assert_eq!(d.cmd(&["CLIENT", "GETREDIR"]), Reply::Int(id));
        let info = d.cmd(&["CLIENT", "TRACKINGINFO"]);
        assert_eq!(info.as_array()[3], Reply::Int(id));
        // INFO counts it (published at the next tick).
        wait_until("tracking_clients:1", WAIT, || {
            let i = c.cmd(&["INFO", "clients"]);
            let text = match &i {
                Reply::Verbatim(v) => v.clone(),
                r => r.as_str().to_string(),
            };
            text.contains("tracking_clients:1\r\n").then_some(())
        });
    }
}
