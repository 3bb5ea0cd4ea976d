//! Issue 32 (5): what one client sees of another's commands keeps the
//! order a single Redis server gives them, at every thread count.
//!
//! - A subscriber confirmed for keyspace notifications hears the events of
//!   a write made right after, on every master: the confirmation waits for
//!   every master's (the suite's "Keyspace notifications" tests, where a
//!   write on a master whose subscription was not yet made lost its event
//!   and the subscriber waited for ever).
//! - Clients blocked on one key from different workers are served in the
//!   order their commands arrived at mithril (the suite's "BRPOPLPUSH with
//!   multiple blocked clients", where the second client's command reached
//!   the node first, was served, and the first waited for ever).

mod support;

use std::time::Duration;
use support::*;

fn with_debug() -> RedisCluster {
    RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["enable-debug-command yes".into()],
        ..Default::default()
    })
}

/// For each master in turn, busy (DEBUG SLEEP) while a new subscriber
/// subscribes through mithril: once the client has its confirmation, a SET
/// of a key of that master publishes an event the subscriber receives.
fn keyevents_reach_a_confirmed_subscriber(threads: usize) {
    let cluster = with_debug();
    let m = Mithril::start(bin(), &cluster.seeds(), &format!("threads {threads}"));
    let mut r = m.conn();
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "notify-keyspace-events", "E$"]),
        ok()
    );
    for (key, port) in cluster.key_per_master("ke:") {
        for pattern in [false, true] {
            let mut busy = cluster
                .nodes
                .iter()
                .find(|n| n.port == port)
                .unwrap()
                .conn();
            busy.send(&[b"DEBUG", b"SLEEP", b"0.3"]);
            let mut sub = m.conn();
            let (confirmed, event) = match pattern {
                true => (
                    sub.cmd(&["PSUBSCRIBE", "*"]),
                    vec![
                        bulk("pmessage"),
                        bulk("*"),
                        bulk("__keyevent@0__:set"),
                        bulk(&key),
                    ],
                ),
                false => (
                    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:set"]),
                    vec![bulk("message"), bulk("__keyevent@0__:set"), bulk(&key)],
                ),
            };
            assert!(!confirmed.is_error(), "{confirmed:?}");
            assert_eq!(r.cmd(&["SET", &key, "v"]), ok());
            let got = sub.try_read_reply(Duration::from_secs(5));
            assert_eq!(
                got.ok(),
                Some(Reply::Array(Some(event))),
                "threads {threads}, {key} on :{port}, {}",
                if pattern { "PSUBSCRIBE *" } else { "SUBSCRIBE" }
            );
            assert_eq!(busy.read_reply(), ok());
        }
    }
}

#[test]
fn keyevents_reach_a_confirmed_subscriber_threads_1() {
    keyevents_reach_a_confirmed_subscriber(1);
}

#[test]
fn keyevents_reach_a_confirmed_subscriber_threads_2() {
    keyevents_reach_a_confirmed_subscriber(2);
}

#[test]
fn keyevents_reach_a_confirmed_subscriber_threads_4() {
    keyevents_reach_a_confirmed_subscriber(4);
}

/// The suite's "BRPOPLPUSH with multiple blocked clients", many times over,
/// with new clients each time as the suite makes them: the first blocked
/// client is served first (WRONGTYPE: its target is a string), so the
/// second gets the element. Served the other way round, the first would
/// wait for ever (timeout 0): a reply not there in 10 s is that hang.
fn brpoplpush_with_multiple_blocked_clients(threads: usize, rounds: usize) {
    let (_cluster, m) = cluster_and_mithril(&format!("threads {threads}"));
    let mut r = m.conn();
    for round in 0..rounds {
        let mut rd1 = m.conn();
        let mut rd2 = m.conn();
        assert!(!r
            .cmd(&["DEL", "blist{t}", "target1{t}", "target2{t}"])
            .is_error());
        assert_eq!(r.cmd(&["SET", "target1{t}", "nolist"]), ok());
        rd1.send(&[b"BRPOPLPUSH", b"blist{t}", b"target1{t}", b"0"]);
        rd2.send(&[b"BRPOPLPUSH", b"blist{t}", b"target2{t}", b"0"]);
        assert_eq!(r.cmd(&["LPUSH", "blist{t}", "foo"]), Reply::Int(1));
        let first = rd1.try_read_reply(Duration::from_secs(10));
        assert!(
            matches!(&first, Ok(Reply::Error(e)) if e.starts_with("WRONGTYPE")),
            "threads {threads}, round {round}: the first blocked client got {first:?}"
        );
        assert_eq!(
            rd2.read_reply(),
            bulk("foo"),
            "threads {threads}, round {round}"
        );
        assert_eq!(r.cmd(&["LINDEX", "target2{t}", "0"]), bulk("foo"));
    }
}

#[test]
fn blocked_clients_are_served_in_arrival_order_threads_2() {
    brpoplpush_with_multiple_blocked_clients(2, 100);
}

#[test]
fn blocked_clients_are_served_in_arrival_order_threads_4() {
    brpoplpush_with_multiple_blocked_clients(4, 100);
}
