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

/// FLUSHALL / FLUSHDB inside MULTI: every master is emptied (the
/// transaction's node in it, the others just before), EXEC answers as a
/// node does, the null invalidation comes after EXEC's reply (Redis's
/// suite checks that), and the writer reads nothing of the old keys.
/// Under WATCH (whose nil could not undo the other masters') it is refused.
#[test]
fn a_flush_inside_multi_empties_every_master_and_invalidates_after_exec() {
    let (cluster, m) = cluster_and_mithril("threads 2");
    let mut c = tracking_conn(&m, &[]);
    let keys: Vec<String> = (0..30).map(|i| format!("ct:m{i}")).collect();
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v"]), ok());
    }
    for n in cluster.masters() {
        assert!(
            n.conn().cmd(&["DBSIZE"]).as_int() > 0,
            "keys on every master"
        );
    }
    for flush in [&["FLUSHDB"][..], &["FLUSHALL", "ASYNC"]] {
        assert_eq!(c.cmd(&["SET", "ct:a{t}", "1"]), ok());
        assert_eq!(c.cmd(&["GET", "ct:a{t}"]), bulk("1"));
        assert_eq!(c.cmd(&["MULTI"]), ok());
        assert_eq!(
            c.cmd(&["SET", "ct:b{t}", "2"]),
            Reply::Simple("QUEUED".into())
        );
        assert_eq!(c.cmd(flush), Reply::Simple("QUEUED".into()));
        c.send(&[b"EXEC"]);
        assert_eq!(c.read_reply(), Reply::Array(Some(vec![ok(), ok()])));
        assert_eq!(
            c.read_reply(),
            Reply::Push(vec![bulk("invalidate"), Reply::Null])
        );
        // A master's own null may reach mithril's tracker after the first
        // of these reads, and is then passed on: one more null at most per
        // master (a null only makes the client forget; see
        // doc/architecture.md, "Client tracking through the proxy").
        let mut late_nulls = 0;
        for k in &keys {
            c.send(&[b"GET", k.as_bytes()]);
            let mut r = c.read_reply();
            while r == Reply::Push(vec![bulk("invalidate"), Reply::Null]) {
                late_nulls += 1;
                r = c.read_reply();
            }
            assert_eq!(r, Reply::Null, "{k}");
        }
        assert!(late_nulls <= cluster.masters().len(), "{late_nulls} nulls");
        wait_until("every master empty", WAIT, || {
            cluster
                .masters()
                .iter()
                .all(|n| n.conn().cmd(&["DBSIZE"]).as_int() == 0)
                .then_some(())
        });
    }
    let mut w = m.conn();
    assert_eq!(w.cmd(&["WATCH", "ct:w"]), ok());
    assert_eq!(w.cmd(&["MULTI"]), ok());
    let e = w.cmd(&["FLUSHALL"]);
    assert!(e.as_error().contains("inside MULTI"), "{e:?}");
    assert!(w.cmd(&["EXEC"]).as_error().starts_with("EXECABORT"));
}

/// The first client to turn tracking on, in a mithril with no tracker up
/// yet, gets its OK once the trackers are: its very first read is tracked
/// (not invalidated at once), as on a node.
#[test]
fn the_first_read_after_tracking_on_is_tracked() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut c = m.conn();
    assert!(matches!(c.cmd(&["HELLO", "3"]), Reply::Map(_)));
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(c.cmd(&["GET", "ct:first"]), Reply::Null);
    no_push(&mut c);
    assert_eq!(m.conn().cmd(&["SET", "ct:first", "1"]), ok());
    assert_eq!(next_push(&mut c), invalidate("ct:first"));
}

/// `tracking_total_keys`, `_items` and `_prefixes` in INFO stats, as
/// Redis's suite reads them.
#[test]
fn info_counts_tracked_keys_items_and_prefixes() {
    let (_cluster, m) = cluster_and_mithril("threads 2");
    let stat = |c: &mut Conn, name: &str| -> i64 {
        let text = c.cmd(&["INFO", "stats"]).as_str().to_string();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name}"))
            .trim()
            .parse()
            .unwrap()
    };
    let mut admin = m.conn();
    let mut a = tracking_conn(&m, &[]);
    let mut b = tracking_conn(&m, &[]);
    // The probe reads of tracking_conn are in the table already. (Not
    // flushed away here: a master's null reaching a tracker after the
    // reads below would clear what they add.)
    let keys0 = stat(&mut admin, "tracking_total_keys");
    let items0 = stat(&mut admin, "tracking_total_items");
    assert!(keys0 >= 2 && items0 == keys0, "{keys0} {items0}");
    for k in ["ct:i1", "ct:i2"] {
        a.cmd(&["GET", k]);
    }
    b.cmd(&["GET", "ct:i1"]);
    let (keys, items) = (
        stat(&mut admin, "tracking_total_keys") - keys0,
        stat(&mut admin, "tracking_total_items") - items0,
    );
    // Sessions on two workers count a key once each.
    assert!((2..=3).contains(&keys), "{keys}");
    assert_eq!(items, 3);
    assert_eq!(stat(&mut admin, "tracking_total_prefixes"), 0);
    let mut p = tracking_conn(&m, &["BCAST", "PREFIX", "ct:p:", "PREFIX", "ct:q:"]);
    assert_eq!(stat(&mut admin, "tracking_total_prefixes"), 2);
    assert_eq!(p.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(stat(&mut admin, "tracking_total_prefixes"), 0);
    // A change takes the key's pairs out.
    assert_eq!(admin.cmd(&["SET", "ct:i1", "x"]), ok());
    assert_eq!(next_push(&mut a), invalidate("ct:i1"));
    assert_eq!(next_push(&mut b), invalidate("ct:i1"));
    assert_eq!(stat(&mut admin, "tracking_total_items"), items0 + 1);
    assert_eq!(stat(&mut admin, "tracking_total_keys"), keys0 + 1);
    // A flush empties the table.
    assert_eq!(admin.cmd(&["FLUSHALL"]), ok());
    wait_until("the table to be empty", WAIT, || {
        (stat(&mut admin, "tracking_total_items") == 0
            && stat(&mut admin, "tracking_total_keys") == 0)
            .then_some(())
    });
}

/// A CONFIG SET of tracking-table-max-keys holds from the very next read.
#[test]
fn a_new_table_bound_holds_from_the_next_read() {
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut admin = m.conn();
    let mut c = tracking_conn(&m, &[]);
    let keys = |a: &mut Conn| -> i64 {
        let text = a.cmd(&["INFO", "stats"]).as_str().to_string();
        text.lines()
            .find_map(|l| l.strip_prefix("tracking_total_keys:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let set = |a: &mut Conn, n: &str| {
        assert_eq!(
            a.cmd(&["CONFIG", "SET", "tracking-table-max-keys", n]),
            ok()
        );
    };
    set(&mut admin, "1");
    c.cmd(&["GET", "ct:b1"]);
    c.cmd(&["GET", "ct:b2"]);
    // (Each eviction is pushed to the client.)
    assert_eq!(keys(&mut admin), 1);
    set(&mut admin, "1000");
    c.send(&[b"GET", b"ct:b3"]);
    c.send(&[b"GET", b"ct:b4"]);
    c.send(&[b"PING"]);
    let mut replies = Vec::new();
    while replies.last() != Some(&Reply::Simple("PONG".into())) {
        replies.push(c.read_reply());
    }
    assert_eq!(keys(&mut admin), 3, "{replies:?}");
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

fn invalidate_keys(keys: &[&str]) -> Reply {
    Reply::Push(vec![
        bulk("invalidate"),
        Reply::Array(Some(keys.iter().map(|k| bulk(k)).collect())),
    ])
}

/// The keys of an invalidation: a RESP3 push, or (`resp2`) a message
/// on `__redis__:invalidate`.
fn pushed_keys(p: &Reply, resp2: bool) -> Option<&Reply> {
    match p {
        Reply::Push(v) if !resp2 => v.get(1),
        Reply::Array(Some(v)) if resp2 => v.get(2),
        _ => None,
    }
}

/// Until a write of `mark` (by `w`) is heard by each of `listeners`
/// (`true`: a RESP2 subscriber): their BCAST is on at every node. What
/// came before is dropped (up to a write of another key, `mark` +
/// ":sync", heard by all).
fn wait_bcast(w: &mut Conn, listeners: &mut [(&mut Conn, bool)], mark: &str) {
    let alone = Reply::Array(Some(vec![bulk(mark)]));
    for (c, resp2) in listeners.iter_mut() {
        wait_until("BCAST to be on", WAIT, || {
            w.cmd(&["SET", mark, "x"]);
            loop {
                match c.try_read_reply(Duration::from_millis(200)) {
                    Ok(p) if pushed_keys(&p, *resp2) == Some(&alone) => return Some(()),
                    Ok(_) => continue,
                    Err(_) => return None,
                }
            }
        });
    }
    let sync = format!("{mark}:sync");
    assert_eq!(w.cmd(&["SET", &sync, "x"]), ok());
    for (c, resp2) in listeners.iter_mut() {
        pushes_until(c, &sync, *resp2);
    }
}

#[test]
fn bcast_after_default_reads_hears_each_write_once() {
    // M2 of the suite's findings (unit/tracking, "The connection gets
    // invalidation messages about all the keys"): keys read in the default
    // mode are tracked by the node for the shared connection, toward the
    // tracker. Once the client is in BCAST, a write of them must come as
    // the node's BCAST batch alone: mithril's BCAST shared the tracker
    // with those table invalidations and pushed `[a]` first, then `[a b
    // c]`, and the client was one message behind from then on.
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &[]);
    let keys = ["m2:a{t}", "m2:b{t}", "m2:c{t}"];
    let mut mget = vec!["MGET"];
    mget.extend(keys);
    assert_eq!(c.cmd(&mget).as_array().len(), 3);
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON", "BCAST"]), ok());
    wait_bcast(&mut w, &mut [(&mut c, false)], "m2:mark{t}");
    let mut mset = vec!["MSET"];
    for k in keys {
        mset.extend([k, "1"]);
    }
    assert_eq!(w.cmd(&mset), ok());
    assert_eq!(next_push(&mut c), invalidate_keys(&keys));
    assert_eq!(w.cmd(&["SET", "m2:d{t}", "1"]), ok());
    assert_eq!(next_push(&mut c), invalidate("m2:d{t}"));
    no_push(&mut c);
    // Back to the default mode: a read is pushed once, not twice (the
    // BCAST tracker, if still open, speaks to BCAST clients only).
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
    let mut d = tracking_conn(&m, &[]);
    assert_eq!(d.cmd(&["GET", "m2:e{t}"]), Reply::Null);
    assert_eq!(w.cmd(&["SET", "m2:e{t}", "1"]), ok());
    assert_eq!(next_push(&mut d), invalidate("m2:e{t}"));
    no_push(&mut d);
}

/// Every push `c` gets until the one of `mark` (included).
fn pushes_until(c: &mut Conn, mark: &str, resp2: bool) -> Vec<Reply> {
    let mut got = Vec::new();
    loop {
        let p = next_push(c);
        let done = pushed_keys(&p, resp2)
            .is_some_and(|k| matches!(k, Reply::Array(Some(v)) if v.contains(&bulk(mark))));
        got.push(p);
        if done {
            return got;
        }
    }
}

/// BCAST listeners with prefixes, NOLOOP and a REDIRECT to a RESP2
/// subscriber, then writes of several keys per command: what each
/// listener got after each step (`server` is mithril or a node).
fn bcast_script(conn: &dyn Fn() -> Conn) -> Vec<Vec<Reply>> {
    let mark = "z:mark{t}";
    let mut w = conn();
    let mut c = conn();
    c.cmd(&["HELLO", "3"]);
    // c read, in the default mode, keys the steps write (as the suite's
    // MGET before BCAST): not news to it once in BCAST.
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    wait_ready(&mut c);
    let read = [
        "MGET", "a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}", "c:1{t}", "a:own{t}",
    ];
    assert_eq!(c.cmd(&read).as_array().len(), 6);
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
    let on = ["CLIENT", "TRACKING", "ON", "BCAST"];
    let with = |more: &[&'static str]| [&on[..], more].concat();
    assert_eq!(
        c.cmd(&with(&["PREFIX", "b:", "PREFIX", "a:", "PREFIX", "z:"])),
        ok()
    );
    let mut n = conn();
    n.cmd(&["HELLO", "3"]);
    assert_eq!(
        n.cmd(&with(&["NOLOOP", "PREFIX", "a:", "PREFIX", "z:"])),
        ok()
    );
    let mut e = conn();
    e.cmd(&["HELLO", "3"]);
    assert_eq!(e.cmd(&on), ok());
    let mut s = conn();
    let id = s.cmd(&["CLIENT", "ID"]).as_int().to_string();
    assert_eq!(
        s.cmd(&["SUBSCRIBE", "__redis__:invalidate"])
            .as_array()
            .len(),
        3
    );
    let mut q = conn();
    let redirect = [
        "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", &id, "PREFIX", "a:", "PREFIX", "z:",
    ];
    assert_eq!(q.cmd(&redirect), ok());
    wait_bcast(
        &mut w,
        &mut [
            (&mut c, false),
            (&mut n, false),
            (&mut e, false),
            (&mut s, true),
        ],
        mark,
    );
    let k = |s: &str| format!("{s}{{t}}");
    type Step<'a> = (bool, Vec<Vec<String>>);
    let steps: Vec<Step> = vec![
        // (by the NOLOOP client, commands)
        (
            false,
            vec![vec![
                "MSET".into(),
                k("c:1"),
                "1".into(),
                k("b:2"),
                "1".into(),
                k("a:2"),
                "1".into(),
                k("a:1"),
                "1".into(),
                k("x:1"),
                "1".into(),
                k("b:1"),
                "1".into(),
            ]],
        ),
        (
            false,
            vec![vec![
                "MSET".into(),
                k("a:1"),
                "1".into(),
                k("a:1"),
                "2".into(),
            ]],
        ),
        (false, vec![vec!["DEL".into(), k("a:1"), k("b:1"), k("zz")]]),
        (true, vec![vec!["SET".into(), k("a:own"), "1".into()]]),
        (false, vec![vec!["SET".into(), k("a:oth"), "1".into()]]),
        (
            true,
            vec![vec![
                "MSET".into(),
                k("a:own"),
                "2".into(),
                k("a:x"),
                "2".into(),
            ]],
        ),
        (
            false,
            vec![
                vec!["MULTI".into()],
                vec!["SET".into(), k("a:m"), "1".into()],
                vec!["SET".into(), k("a:own"), "3".into()],
                vec!["EXEC".into()],
            ],
        ),
        (
            true,
            vec![
                vec!["MULTI".into()],
                vec!["SET".into(), k("a:m"), "2".into()],
                vec!["SET".into(), k("a:own"), "4".into()],
                vec!["EXEC".into()],
            ],
        ),
        // The suite's "lazy expired keys": the NOLOOP client's own key
        // expires at its own read, in the batch of its write; the node
        // sends that deletion (nobody's write) to it.
        (
            true,
            vec![
                vec!["MULTI".into()],
                vec!["SET".into(), k("a:e"), "1".into(), "PX".into(), "1".into()],
                vec!["SET".into(), k("a:e2"), "1".into()],
                vec!["DEBUG".into(), "SLEEP".into(), "0.1".into()],
                vec!["GET".into(), k("a:e")],
                vec!["EXEC".into()],
            ],
        ),
        (
            false,
            vec![
                vec!["MULTI".into()],
                vec!["INCR".into(), k("b:9")],
                vec!["INCR".into(), k("a:9")],
                vec!["INCR".into(), k("c:9")],
                vec!["EXEC".into()],
            ],
        ),
    ];
    let mut out = Vec::new();
    for (by_noloop, cmds) in &steps {
        let who = if *by_noloop { &mut n } else { &mut w };
        for a in cmds {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let r = who.cmd(&a);
            assert!(
                !matches!(r, Reply::Error(_) | Reply::Push(_)),
                "{a:?}: {r:?}"
            );
        }
        assert_eq!(w.cmd(&["SET", mark, "x"]), ok());
        out.push(pushes_until(&mut c, mark, false));
        out.push(pushes_until(&mut n, mark, false));
        out.push(pushes_until(&mut e, mark, false));
        out.push(pushes_until(&mut s, mark, true));
    }
    out
}

#[test]
fn bcast_batches_are_the_node_s_with_one_master() {
    // One master: through mithril, every BCAST listener gets exactly the
    // messages the node gives its own clients (one per prefix, its keys
    // sorted, the prefixes in order; NOLOOP leaving out the listener's own
    // writes), whatever the command wrote.
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        extra_redis_conf: vec!["enable-debug-command yes".into()],
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 2");
    let node = cluster.masters()[0];
    let want = bcast_script(&|| node.conn());
    let got = bcast_script(&|| m.conn());
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "step {}, listener {}", i / 4, i % 4);
    }
}

#[test]
fn a_script_s_keys_are_tracked_only_if_it_reads() {
    // unit/tracking's "Tracking only occurs for scripts when a command
    // calls a read-only command": the node tracks a script's declared
    // keys if the script calls a read command. mithril sent scripts
    // without the opt-in, so nothing came and the unit waited for ever.
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &[]);
    let mset = ["MSET", "s:2{t}", "2", "s:1{t}", "2"];
    let keys = ["2", "s:1{t}", "s:2{t}"];
    let run = |c: &mut Conn, how: &str, body: &str| {
        let mut a = vec![how, body];
        a.extend(keys);
        let r = c.cmd(&a);
        assert!(!r.is_error(), "{a:?}: {r:?}");
    };
    run(&mut c, "EVAL", "redis.call('set', 's:3{t}', 'bar')");
    assert_eq!(w.cmd(&mset), ok());
    no_push(&mut c);
    run(&mut c, "EVAL", "redis.call('get', 's:3{t}')");
    assert_eq!(w.cmd(&mset), ok());
    assert_eq!(next_push(&mut c), invalidate("s:2{t}"));
    assert_eq!(next_push(&mut c), invalidate("s:1{t}"));
    run(&mut c, "EVAL_RO", "redis.call('ping')");
    assert_eq!(w.cmd(&mset), ok());
    no_push(&mut c);
    run(&mut c, "EVAL_RO", "redis.call('get', 's:1{t}')");
    assert_eq!(w.cmd(&mset), ok());
    assert_eq!(next_push(&mut c), invalidate("s:2{t}"));
    assert_eq!(next_push(&mut c), invalidate("s:1{t}"));
    // EVALSHA too (its body loaded through mithril).
    let sha = c.cmd(&["SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"]);
    let sha = sha.as_str().to_string();
    assert_eq!(c.cmd(&["EVALSHA", &sha, "1", "s:1{t}"]), bulk("2"));
    assert_eq!(w.cmd(&["SET", "s:1{t}", "3"]), ok());
    assert_eq!(next_push(&mut c), invalidate("s:1{t}"));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn bcast_after_default_mode_hears_a_write_before_the_next_reply() {
    // unit/tracking's "After switching from normal tracking to BCAST
    // mode, no invalidation message is produced for pre-BCAST keys": the
    // push of another client's write comes before the PONG of a PING sent
    // once that write was answered.
    let (_cluster, m) = cluster_and_mithril("");
    let mut w = m.conn();
    let mut c = tracking_conn(&m, &[]);
    for i in 0..5 {
        let k = format!("pb:{i}");
        assert_eq!(w.cmd(&["SET", &k, "1"]), ok());
        c.cmd(&["GET", &k]);
        assert_eq!(c.cmd(&["CLIENT", "TRACKING", "off"]), ok());
        assert_eq!(c.cmd(&["CLIENT", "TRACKING", "on", "BCAST"]), ok());
        assert_eq!(w.cmd(&["INCR", &k]), Reply::Int(2));
        c.send(&[b"PING"]);
        assert_eq!(c.read_reply(), invalidate(&k), "round {i}");
        assert_eq!(c.read_reply(), Reply::Simple("PONG".into()), "round {i}");
        assert_eq!(c.cmd(&["CLIENT", "TRACKING", "off"]), ok());
        assert_eq!(c.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    }
}

#[test]
fn tracking_off_and_on_again_reads_with_the_trackers_up() {
    // unit/tracking's "Tracking invalidation message is not interleaved
    // with transaction response" turns tracking off and on, then reads: the
    // trackers closed at the first tick without a tracking client, so that
    // read went before they were up again and was invalidated at once (a
    // push Redis never sends), which shifted the client's replies.
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut c = tracking_conn(&m, &[]);
    for i in 0..3 {
        assert_eq!(c.cmd(&["CLIENT", "TRACKING", "off"]), ok());
        // Ticks (every 100 ms) pass with no tracking client.
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(c.cmd(&["CLIENT", "TRACKING", "on"]), ok());
        let k = format!("ct:again:{i}");
        c.send(&[b"GET", k.as_bytes()]);
        c.send(&[b"PING"]);
        assert_eq!(c.read_reply(), Reply::Null, "round {i}");
        assert_eq!(c.read_reply(), Reply::Simple("PONG".into()), "round {i}");
    }
}

#[test]
fn a_write_queued_in_multi_is_told_after_exec() {
    // unit/tracking's "Tracking invalidation message is not interleaved
    // with transaction response": the client's own INCR of a key it read,
    // queued in MULTI, is told behind EXEC's reply (it runs then), not
    // behind its QUEUED.
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut c = tracking_conn(&m, &[]);
    assert_eq!(c.cmd(&["MSET", "tx:a{t}", "1", "tx:b{t}", "2"]), ok());
    assert_eq!(c.cmd(&["GET", "tx:a{t}"]), bulk("1"));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "tx:a{t}"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["GET", "tx:b{t}"]), Reply::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Array(Some(vec![Reply::Int(2), bulk("2")]))
    );
    assert_eq!(next_push(&mut c), invalidate("tx:a{t}"));
    // DISCARD: told behind DISCARD's OK.
    assert_eq!(c.cmd(&["GET", "tx:a{t}"]), bulk("2"));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "tx:a{t}"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["DISCARD"]), ok());
    assert_eq!(next_push(&mut c), invalidate("tx:a{t}"));
    no_push(&mut c);
}

#[test]
fn config_set_changes_the_table_bound() {
    // unit/tracking's clean_all sets tracking-table-max-keys with CONFIG
    // SET: mithril refused it (immutable), and every test after failed.
    let (_cluster, m) = cluster_and_mithril("threads 1");
    let mut a = m.conn();
    let mut c = tracking_conn(&m, &[]);
    for k in ["cb:1", "cb:2", "cb:3"] {
        c.cmd(&["GET", k]);
    }
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]),
        ok()
    );
    assert_eq!(
        a.cmd(&["CONFIG", "GET", "tracking-table-max-keys"]),
        Reply::Array(Some(vec![bulk("tracking-table-max-keys"), bulk("2")]))
    );
    // The table held the probe and three keys: the two oldest go (at the
    // next tick), their clients told.
    let first = next_push(&mut c);
    let probe = first.as_array()[1].as_array()[0].as_str().to_string();
    assert!(probe.starts_with("probe:"), "{first:?}");
    assert_eq!(next_push(&mut c), invalidate("cb:1"));
    no_push(&mut c);
    // Reads past the new bound evict the oldest.
    c.send(&[b"GET", b"cb:4"]);
    assert_eq!(c.read_reply(), invalidate("cb:2"));
    assert_eq!(c.read_reply(), Reply::Null);
}

#[test]
fn bcast_follows_a_failover_to_the_new_master() {
    // The BCAST trackers follow the masters like the default ones: after a
    // failover, a write on the new master is heard by a BCAST client.
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 1\ntopology-refresh-secs 1",
    );
    let mut w = m.conn();
    let mut c = m.conn();
    c.cmd(&["HELLO", "3"]);
    assert_eq!(
        c.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "fo:"]),
        ok()
    );
    for (slot, _, _) in cluster.slot_map() {
        wait_bcast(
            &mut w,
            &mut [(&mut c, false)],
            &key_for_slot(slot, "fo:mark:"),
        );
    }
    let key = "fo:key";
    cluster.fail_over(key_slot(key.as_bytes()));
    let port = cluster.port_for_slot(key_slot(key.as_bytes()));
    let mut node = Conn::connect(&format!("127.0.0.1:{port}"));
    // Once mithril's BCAST tracker is on the new master, its writes are
    // heard (a null may come as it comes up).
    wait_until(
        "the new master's writes to be heard",
        Duration::from_secs(20),
        || {
            assert_eq!(node.cmd(&["SET", key, "x"]), ok());
            loop {
                match c.try_read_reply(Duration::from_millis(200)) {
                    Ok(p) if p == invalidate(key) => return Some(()),
                    Ok(_) => continue,
                    Err(_) => return None,
                }
            }
        },
    );
}
