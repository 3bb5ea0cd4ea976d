//! Pub/sub over a real cluster of three masters: sharded pub/sub
//! (SSUBSCRIBE / SUNSUBSCRIBE to the master of each channel's slot, their
//! confirmations and counts in RESP2 and RESP3, CROSSSLOT, a slot moved
//! under a subscriber without the client noticing) and keyspace
//! notifications heard from every master, a new one included.

mod support;

use std::time::{Duration, Instant};
use support::*;

/// One name `<prefix>:<n>` whose slot each master owns, in master order.
fn name_per_master(cluster: &RedisCluster, prefix: &str) -> Vec<String> {
    cluster
        .key_per_master(prefix)
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// The direct connection to the master that owns `name`'s slot.
fn owner(cluster: &RedisCluster, name: &str) -> Conn {
    cluster.owner_conn(name)
}

/// Wait until `PUBSUB <which> ch` on `c` counts `n` subscribers.
fn wait_numsub(c: &mut Conn, which: &str, ch: &str, n: i64, what: &str) {
    wait_until(what, Duration::from_secs(10), || {
        let r = c.cmd(&["PUBSUB", which, ch]);
        (r.as_array().get(1) == Some(&Reply::Int(n))).then_some(())
    });
}

fn arr(items: Vec<Reply>) -> Reply {
    Reply::Array(Some(items))
}

/// A pub/sub frame in RESP2 (`*3`) or RESP3 (`>3`).
fn frame(resp3: bool, items: Vec<Reply>) -> Reply {
    if resp3 {
        Reply::Push(items)
    } else {
        arr(items)
    }
}

fn conf(kind: &str, ch: &str, n: i64) -> Reply {
    arr(vec![bulk(kind), bulk(ch), Reply::Int(n)])
}

/// The elements of a pub/sub frame, whichever protocol.
fn items(r: &Reply) -> Vec<Reply> {
    match r {
        Reply::Push(v) => v.clone(),
        Reply::Array(Some(v)) => v.clone(),
        other => panic!("not a pub/sub frame: {other:?}"),
    }
}

/// Nothing more is waiting for `c` (up to a PING's answer): the frames
/// read before the pong.
fn drain_to_pong(c: &mut Conn) -> Vec<Reply> {
    c.send(&[b"PING", b"fence"]);
    let mut before = Vec::new();
    loop {
        let r = c.read_reply();
        let is_pong = match &r {
            Reply::Array(Some(v)) => v.first() == Some(&bulk("pong")),
            Reply::Bulk(Some(b)) => b == b"fence",
            _ => false,
        };
        if is_pong {
            return before;
        }
        before.push(r);
    }
}

fn smessage(resp3: bool, ch: &str, msg: &str) -> Reply {
    frame(resp3, vec![bulk("smessage"), bulk(ch), bulk(msg)])
}

/// SSUBSCRIBE to a channel on each master, then SPUBLISH through mithril
/// and on the owning node; the confirmations count shard channels only,
/// as Redis does, in RESP2 and RESP3; a bare SUNSUBSCRIBE names every
/// shard channel, then answers Redis's null confirmation.
fn sharded_round(resp3: bool, extra_conf: &str) {
    let (cluster, m) = cluster_and_mithril(extra_conf);
    let channels = name_per_master(&cluster, "shard");
    let mut sub = m.conn();
    if resp3 {
        let hello = sub.cmd(&["HELLO", "3"]);
        assert!(matches!(hello, Reply::Map(_)), "{hello:?}");
    }
    let mut publisher = m.conn();
    // A plain subscription counts apart from the shard channels.
    sub.send(&[b"SUBSCRIBE", b"plain"]);
    assert_eq!(
        sub.read_reply(),
        frame(resp3, items(&conf("subscribe", "plain", 1)))
    );
    for (i, ch) in channels.iter().enumerate() {
        sub.send(&[b"SSUBSCRIBE", ch.as_bytes()]);
        let want = frame(resp3, items(&conf("ssubscribe", ch, i as i64 + 1)));
        assert_eq!(sub.read_reply(), want, "{ch}");
    }
    // Two of one slot (a hash tag) in one command, pipelined behind it a
    // third on another: confirmations in order, counted.
    sub.send(&[b"SSUBSCRIBE", b"{tag}a", b"{tag}b"]);
    sub.send(&[b"SSUBSCRIBE", b"{tag}a"]);
    for (ch, n) in [("{tag}a", 4), ("{tag}b", 5), ("{tag}a", 5)] {
        assert_eq!(
            sub.read_reply(),
            frame(resp3, items(&conf("ssubscribe", ch, n)))
        );
    }
    // CLIENT LIST counts them apart too.
    let list = publisher.cmd(&["CLIENT", "LIST"]);
    assert!(
        list.as_str()
            .lines()
            .any(|l| l.contains(" sub=1 psub=0 ssub=5 ")),
        "{}",
        list.as_str()
    );
    // Across slots: the node's CROSSSLOT, nothing subscribed.
    sub.send(&[
        b"SSUBSCRIBE",
        channels[0].as_bytes(),
        channels[1].as_bytes(),
    ]);
    assert_eq!(
        sub.read_reply(),
        Reply::Error("CROSSSLOT Keys in request don't hash to the same slot".into())
    );
    if !resp3 {
        // The RESP2 subscribed context holds for shard channels too.
        assert_eq!(
            sub.cmd(&["GET", "x"]).as_error(),
            "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        );
    }
    // The shard's subscriber counts, through mithril and on the owner.
    for (i, ch) in channels.iter().enumerate() {
        let msg = format!("via-mithril-{i}");
        assert_eq!(
            publisher.cmd(&["SPUBLISH", ch, &msg]),
            Reply::Int(1),
            "{ch}"
        );
        assert_eq!(sub.read_reply(), smessage(resp3, ch, &msg));
        let msg = format!("direct-{i}");
        assert_eq!(
            owner(&cluster, ch).cmd(&["SPUBLISH", ch, &msg]),
            Reply::Int(1)
        );
        assert_eq!(sub.read_reply(), smessage(resp3, ch, &msg));
    }
    // SHARDNUMSUB sums the masters: each channel lives on one.
    let numsub = publisher.cmd(&[
        "PUBSUB",
        "SHARDNUMSUB",
        &channels[0],
        &channels[2],
        "nobody",
    ]);
    let want: Vec<(Reply, Reply)> = vec![
        (bulk(&channels[0]), Reply::Int(1)),
        (bulk(&channels[2]), Reply::Int(1)),
        (bulk("nobody"), Reply::Int(0)),
    ];
    let got: Vec<(Reply, Reply)> = match numsub {
        Reply::Array(Some(v)) => v.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        other => panic!("SHARDNUMSUB: {other:?}"),
    };
    assert_eq!(got, want);
    // SUNSUBSCRIBE one: the count of shard channels left.
    sub.send(&[b"SUNSUBSCRIBE", channels[0].as_bytes()]);
    assert_eq!(
        sub.read_reply(),
        frame(resp3, items(&conf("sunsubscribe", &channels[0], 4)))
    );
    assert_eq!(
        publisher.cmd(&["SPUBLISH", &channels[0], "gone"]),
        Reply::Int(0)
    );
    // One it does not have: the count unchanged.
    sub.send(&[b"SUNSUBSCRIBE", b"never"]);
    assert_eq!(
        sub.read_reply(),
        frame(resp3, items(&conf("sunsubscribe", "never", 4)))
    );
    // Bare: every shard channel it has, counting down, none twice.
    sub.send(&[b"SUNSUBSCRIBE"]);
    let mut left: Vec<String> = vec![
        channels[1].clone(),
        channels[2].clone(),
        "{tag}a".into(),
        "{tag}b".into(),
    ];
    for n in (0..4).rev() {
        let got = items(&sub.read_reply());
        assert_eq!(got[0], bulk("sunsubscribe"));
        assert_eq!(got[2], Reply::Int(n));
        let ch = got[1].as_str().to_string();
        let at = left
            .iter()
            .position(|c| *c == ch)
            .unwrap_or_else(|| panic!("{ch} twice or unknown"));
        left.remove(at);
    }
    // Again: Redis's null confirmation with a count of 0.
    sub.send(&[b"SUNSUBSCRIBE"]);
    let null = if resp3 {
        Reply::Null
    } else {
        Reply::Bulk(None)
    };
    assert_eq!(
        sub.read_reply(),
        frame(resp3, vec![bulk("sunsubscribe"), null, Reply::Int(0)])
    );
    for ch in &channels {
        assert_eq!(publisher.cmd(&["SPUBLISH", ch, "x"]), Reply::Int(0), "{ch}");
        assert_eq!(
            owner(&cluster, ch)
                .cmd(&["PUBSUB", "SHARDNUMSUB", ch])
                .as_array()[1],
            Reply::Int(0)
        );
    }
    // The plain channel is still there, and still counted alone.
    assert_eq!(publisher.cmd(&["PUBLISH", "plain", "still"]), Reply::Int(1));
    assert_eq!(
        sub.read_reply(),
        frame(resp3, vec![bulk("message"), bulk("plain"), bulk("still")])
    );
    sub.send(&[b"UNSUBSCRIBE"]);
    assert_eq!(
        sub.read_reply(),
        frame(resp3, items(&conf("unsubscribe", "plain", 0)))
    );
    assert!(drain_to_pong(&mut sub).is_empty());
    // Out of the subscribed context.
    assert_eq!(sub.cmd(&["SET", "after", "1"]), ok());
}

#[test]
fn ssubscribe_on_every_master_resp2() {
    sharded_round(false, "");
}

#[test]
fn ssubscribe_on_every_master_resp3() {
    sharded_round(true, "");
}

/// The same with the workers sharing one pipe per node (SPUBLISH and
/// SHARDNUMSUB go over the pipes; subscriber connections stay the
/// session's own).
#[test]
fn ssubscribe_on_every_master_with_shared_pipes() {
    sharded_round(false, "threads 2\nbackend-sharding yes");
}

/// Never subscribed: SUNSUBSCRIBE answers as a node does, with or without
/// channels, and across slots it is CROSSSLOT too.
#[test]
fn sunsubscribe_when_subscribed_to_nothing() {
    let (_cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    assert_eq!(
        c.cmd(&["SUNSUBSCRIBE"]),
        arr(vec![bulk("sunsubscribe"), Reply::Bulk(None), Reply::Int(0)])
    );
    c.send(&[b"SUNSUBSCRIBE", b"{t}a", b"{t}b"]);
    assert_eq!(c.read_reply(), conf("sunsubscribe", "{t}a", 0));
    assert_eq!(c.read_reply(), conf("sunsubscribe", "{t}b", 0));
    assert_eq!(
        c.cmd(&["SUNSUBSCRIBE", "a", "b"]),
        Reply::Error("CROSSSLOT Keys in request don't hash to the same slot".into())
    );
    assert_eq!(
        c.cmd(&["SSUBSCRIBE"]),
        Reply::Error("ERR wrong number of arguments for 'ssubscribe' command".into())
    );
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
}

/// A slot moves under a shard subscriber: the old owner's SUNSUBSCRIBE is
/// swallowed, the channel is subscribed on the new owner, and SPUBLISH
/// (through mithril or on the new owner) reaches the client, which never
/// saw a confirmation it did not ask for.
#[test]
fn ssubscribe_follows_a_slot_moved_under_it() {
    let (cluster, m) = cluster_and_mithril("");
    let ch = name_per_master(&cluster, "moving")[0].clone();
    let slot = key_slot(ch.as_bytes());
    let stay = name_per_master(&cluster, "staying")[1].clone();
    let mut sub = m.conn();
    sub.send(&[b"SSUBSCRIBE", ch.as_bytes()]);
    assert_eq!(sub.read_reply(), conf("ssubscribe", &ch, 1));
    sub.send(&[b"SSUBSCRIBE", stay.as_bytes()]);
    assert_eq!(sub.read_reply(), conf("ssubscribe", &stay, 2));
    let mut publisher = m.conn();
    assert_eq!(publisher.cmd(&["SPUBLISH", &ch, "before"]), Reply::Int(1));
    assert_eq!(sub.read_reply(), smessage(false, &ch, "before"));
    // A key in the slot, so the move has something to carry.
    assert_eq!(publisher.cmd(&["SET", &ch, "v"]), ok());
    let from = cluster.port_for_slot(slot);
    let to = (0..3)
        .find(|&i| cluster.nodes[i].master_of.is_none() && cluster.nodes[i].port != from)
        .unwrap();
    cluster.migrate_slot(slot, to, 10);
    let new_owner = cluster.nodes[to].port;
    assert_eq!(cluster.port_for_slot(slot), new_owner);
    // The new owner gets the subscription, unseen by the client.
    let mut direct = Conn::connect(&format!("127.0.0.1:{new_owner}"));
    wait_numsub(
        &mut direct,
        "SHARDNUMSUB",
        &ch,
        1,
        "the subscription on the new owner",
    );
    let mut old = Conn::connect(&format!("127.0.0.1:{from}"));
    assert_eq!(
        old.cmd(&["PUBSUB", "SHARDNUMSUB", &ch]).as_array()[1],
        Reply::Int(0)
    );
    assert_eq!(publisher.cmd(&["SPUBLISH", &ch, "after"]), Reply::Int(1));
    assert_eq!(direct.cmd(&["SPUBLISH", &ch, "direct"]), Reply::Int(1));
    assert_eq!(
        publisher.cmd(&["SPUBLISH", &stay, "unmoved"]),
        Reply::Int(1)
    );
    // Exactly these, in order, and no sunsubscribe before them.
    assert_eq!(sub.read_reply(), smessage(false, &ch, "after"));
    assert_eq!(sub.read_reply(), smessage(false, &ch, "direct"));
    assert_eq!(sub.read_reply(), smessage(false, &stay, "unmoved"));
    assert!(drain_to_pong(&mut sub).is_empty());
    // The client's own SUNSUBSCRIBE still counts right and reaches the
    // new owner.
    sub.send(&[b"SUNSUBSCRIBE", ch.as_bytes()]);
    assert_eq!(sub.read_reply(), conf("sunsubscribe", &ch, 1));
    wait_numsub(
        &mut direct,
        "SHARDNUMSUB",
        &ch,
        0,
        "the new owner unsubscribed",
    );
}

/// Turn keyspace notifications on, on a node.
fn notify_on(port: u16) {
    let mut c = Conn::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        ok()
    );
}

/// Read frames until `want` are all seen (any order), within 10 s; each
/// exactly once.
fn expect_all(c: &mut Conn, mut want: Vec<Reply>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !want.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = c
            .try_read_reply(left)
            .unwrap_or_else(|e| panic!("still waiting for {want:?}: {e}"));
        let at = want
            .iter()
            .position(|w| *w == r)
            .unwrap_or_else(|| panic!("unexpected {r:?}, waiting for {want:?}"));
        want.remove(at);
    }
}

fn pmessage(pattern: &str, ch: &str, msg: &str) -> Reply {
    arr(vec![bulk("pmessage"), bulk(pattern), bulk(ch), bulk(msg)])
}

/// PSUBSCRIBE `__keyspace@0__:*` and SUBSCRIBE `__keyevent@0__:del`
/// through mithril hear the keys of all three masters, once each, with
/// one confirmation each; `*` hears them too, and a PUBLISH only once.
#[test]
fn keyspace_events_from_every_master() {
    let (cluster, m) = cluster_and_mithril("");
    for n in cluster.masters() {
        notify_on(n.port);
    }
    let keys = name_per_master(&cluster, "ks");
    let mut sub = m.conn();
    sub.send(&[b"PSUBSCRIBE", b"__keyspace@0__:*"]);
    assert_eq!(sub.read_reply(), conf("psubscribe", "__keyspace@0__:*", 1));
    sub.send(&[b"SUBSCRIBE", b"__keyevent@0__:del", b"news"]);
    assert_eq!(sub.read_reply(), conf("subscribe", "__keyevent@0__:del", 2));
    assert_eq!(sub.read_reply(), conf("subscribe", "news", 3));
    assert!(drain_to_pong(&mut sub).is_empty(), "one confirmation each");
    let mut c = m.conn();
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v"]), ok());
    }
    expect_all(
        &mut sub,
        keys.iter()
            .map(|k| pmessage("__keyspace@0__:*", &format!("__keyspace@0__:{k}"), "set"))
            .collect(),
    );
    for k in &keys {
        assert_eq!(c.cmd(&["DEL", k]), Reply::Int(1));
    }
    let mut want: Vec<Reply> = Vec::new();
    for k in &keys {
        want.push(pmessage(
            "__keyspace@0__:*",
            &format!("__keyspace@0__:{k}"),
            "del",
        ));
        want.push(arr(vec![
            bulk("message"),
            bulk("__keyevent@0__:del"),
            bulk(k),
        ]));
    }
    expect_all(&mut sub, want);
    assert_eq!(c.cmd(&["PUBLISH", "news", "once"]), Reply::Int(1));
    assert_eq!(
        sub.read_reply(),
        arr(vec![bulk("message"), bulk("news"), bulk("once")])
    );
    assert!(drain_to_pong(&mut sub).is_empty(), "no copies");
    assert_eq!(
        sub.cmd(&["PUNSUBSCRIBE"]),
        conf("punsubscribe", "__keyspace@0__:*", 2)
    );
    sub.send(&[b"UNSUBSCRIBE"]);
    let mut counts: Vec<Reply> = (0..2)
        .map(|_| items(&sub.read_reply())[2].clone())
        .collect();
    counts.sort_by_key(|r| r.as_int());
    assert_eq!(counts, vec![Reply::Int(0), Reply::Int(1)]);

    // `*`: keyspace events from every master, other messages once.
    let mut all = m.conn();
    all.send(&[b"PSUBSCRIBE", b"*"]);
    assert_eq!(all.read_reply(), conf("psubscribe", "*", 1));
    assert_eq!(c.cmd(&["PUBLISH", "news", "twice?"]), Reply::Int(1));
    assert_eq!(all.read_reply(), pmessage("*", "news", "twice?"));
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "w"]), ok());
    }
    let mut want: Vec<Reply> = Vec::new();
    for k in &keys {
        want.push(pmessage("*", &format!("__keyspace@0__:{k}"), "set"));
        want.push(pmessage("*", "__keyevent@0__:set", k));
    }
    expect_all(&mut all, want);
    assert!(drain_to_pong(&mut all).is_empty(), "no copies");
    // Unsubscribing leaves no master with a pattern or channel of theirs.
    assert_eq!(all.cmd(&["PUNSUBSCRIBE"]), conf("punsubscribe", "*", 0));
    for n in cluster.masters() {
        let mut d = Conn::connect(&format!("127.0.0.1:{}", n.port));
        wait_until(
            "the masters' subscriptions gone",
            Duration::from_secs(5),
            || {
                let numpat = d.cmd(&["PUBSUB", "NUMPAT"]);
                let channels = d.cmd(&["PUBSUB", "CHANNELS"]);
                (numpat == Reply::Int(0) && channels.as_array().is_empty()).then_some(())
            },
        );
    }
    assert_eq!(all.cmd(&["SET", "back", "1"]), ok());
}

/// A master added to the cluster, given a slot, is heard too once the
/// map shows it.
#[test]
fn keyspace_events_from_a_new_master() {
    let cluster_spec = ClusterSpec::default();
    let mut cluster = RedisCluster::start(cluster_spec);
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    for n in cluster.masters() {
        notify_on(n.port);
    }
    let mut sub = m.conn();
    sub.send(&[b"PSUBSCRIBE", b"__key*__:*"]);
    assert_eq!(sub.read_reply(), conf("psubscribe", "__key*__:*", 1));
    let new = cluster.add_master();
    notify_on(cluster.nodes[new].port);
    let key = "newmaster:key";
    let slot = key_slot(key.as_bytes());
    cluster.migrate_slot(slot, new, 10);
    let mut c = m.conn();
    // SET through mithril until the event arrives (mithril learns the new
    // master from the map, which the SET's MOVED refreshes).
    let want_space = pmessage("__key*__:*", &format!("__keyspace@0__:{key}"), "set");
    let want_event = pmessage("__key*__:*", "__keyevent@0__:set", key);
    let deadline = Instant::now() + Duration::from_secs(15);
    'heard: loop {
        assert!(Instant::now() < deadline, "no event from the new master");
        assert_eq!(c.cmd(&["SET", key, "v"]), ok());
        while let Ok(r) = sub.try_read_reply(Duration::from_millis(200)) {
            if r == want_space {
                break 'heard;
            }
        }
    }
    // Steady now: one SET, one event of each kind, no more.
    drain_to_pong(&mut sub);
    assert_eq!(c.cmd(&["SET", key, "w"]), ok());
    expect_all(&mut sub, vec![want_space, want_event]);
    assert!(drain_to_pong(&mut sub).is_empty(), "no copies");
    assert_eq!(cluster.port_for_slot(slot), cluster.nodes[new].port);
}

/// A master failed over to its replica: the promoted node gets the
/// keyspace subscription once the map shows it, and the demoted one's
/// events (a replica applies the writes too) are not heard twice.
#[test]
fn keyspace_events_after_a_failover() {
    let mut cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    for n in &cluster.nodes {
        notify_on(n.port);
    }
    let keys = name_per_master(&cluster, "fo");
    let mut sub = m.conn();
    sub.send(&[b"SUBSCRIBE", b"__keyevent@0__:set"]);
    assert_eq!(sub.read_reply(), conf("subscribe", "__keyevent@0__:set", 1));
    let mut c = m.conn();
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "1"]), ok());
    }
    let event = |k: &str| arr(vec![bulk("message"), bulk("__keyevent@0__:set"), bulk(k)]);
    expect_all(&mut sub, keys.iter().map(|k| event(k)).collect());
    // Fail over the master of the second key.
    let slot = key_slot(keys[1].as_bytes());
    let old_port = cluster.node_for_slot(slot).port;
    let replica = cluster.fail_over(slot);
    let mut promoted = cluster.nodes[replica].conn();
    // A write through mithril meets the new map (MOVED), which the
    // subscriber follows.
    assert_eq!(c.cmd(&["SET", &keys[1], "2"]), ok());
    let ch = "__keyevent@0__:set";
    wait_numsub(
        &mut promoted,
        "NUMSUB",
        ch,
        1,
        "the promoted master subscribed",
    );
    drain_to_pong(&mut sub);
    // And the demoted one, a replica now, lost it.
    let mut demoted = Conn::connect(&format!("127.0.0.1:{old_port}"));
    wait_numsub(
        &mut demoted,
        "NUMSUB",
        ch,
        0,
        "the demoted master unsubscribed",
    );
    // Now every key's event arrives once, the failed-over one included.
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "3"]), ok());
    }
    expect_all(&mut sub, keys.iter().map(|k| event(k)).collect());
    let extra = drain_to_pong(&mut sub);
    assert!(extra.is_empty(), "no copies: {extra:?}");
}

/// RESET, and a client going away, leave no subscription on any node:
/// every subscriber connection of the session is closed.
#[test]
fn reset_and_disconnect_leave_nothing_on_any_node() {
    let (cluster, m) = cluster_and_mithril("");
    let channels = name_per_master(&cluster, "gone");
    let masters: Vec<u16> = cluster.masters().iter().map(|n| n.port).collect();
    let subscribe_all = |c: &mut Conn| {
        for (i, ch) in channels.iter().enumerate() {
            c.send(&[b"SSUBSCRIBE", ch.as_bytes()]);
            assert_eq!(c.read_reply(), conf("ssubscribe", ch, i as i64 + 1));
        }
        c.send(&[b"PSUBSCRIBE", b"__keyevent@0__:*"]);
        assert_eq!(c.read_reply(), conf("psubscribe", "__keyevent@0__:*", 1));
    };
    // What every master holds: its shard channel and the pattern.
    let held = |n: i64| {
        for (port, ch) in masters.iter().zip(&channels) {
            let mut d = Conn::connect(&format!("127.0.0.1:{port}"));
            wait_numsub(&mut d, "SHARDNUMSUB", ch, n, "the shard channel");
            wait_until("the pattern", Duration::from_secs(10), || {
                (d.cmd(&["PUBSUB", "NUMPAT"]) == Reply::Int(n)).then_some(())
            });
        }
    };
    let mut c = m.conn();
    subscribe_all(&mut c);
    held(1);
    assert_eq!(c.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    held(0);
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    subscribe_all(&mut c);
    held(1);
    drop(c);
    held(0);
}

/// SSUBSCRIBE of two channels of a slot that moved while mithril's map
/// still has the old owner: that node refuses the command with one MOVED,
/// which answers both channels; the client gets both confirmations and
/// the channels are subscribed on the new owner.
#[test]
fn ssubscribe_on_a_stale_map_follows_moved() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "topology-refresh-secs 3600");
    let (a, b) = ("{stale}a", "{stale}b");
    let slot = key_slot(a.as_bytes());
    let mut c = m.conn();
    // mithril has its map; then the slot moves behind its back.
    assert_eq!(c.cmd(&["SET", "warm", "1"]), ok());
    let from = cluster.port_for_slot(slot);
    let to = (0..3).find(|&i| cluster.nodes[i].port != from).unwrap();
    cluster.migrate_slot(slot, to, 10);
    let mut sub = m.conn();
    sub.send(&[b"SSUBSCRIBE", a.as_bytes(), b.as_bytes()]);
    assert_eq!(sub.read_reply(), conf("ssubscribe", a, 1));
    assert_eq!(sub.read_reply(), conf("ssubscribe", b, 2));
    let mut owner = cluster.nodes[to].conn();
    wait_numsub(&mut owner, "SHARDNUMSUB", a, 1, "a on the new owner");
    wait_numsub(&mut owner, "SHARDNUMSUB", b, 1, "b on the new owner");
    assert_eq!(owner.cmd(&["SPUBLISH", b, "hi"]), Reply::Int(1));
    assert_eq!(sub.read_reply(), smessage(false, b, "hi"));
    assert!(drain_to_pong(&mut sub).is_empty());
}

/// A subscriber connection to a node other than home is lost (the node
/// kills its pub/sub clients): the session stays, and its shard channel
/// and keyspace subscription there are made again within a few seconds.
#[test]
fn a_lost_subscriber_connection_is_made_again() {
    let (cluster, m) = cluster_and_mithril("");
    let home = cluster.port_for_slot(0);
    let channels = name_per_master(&cluster, "lost");
    let mut sub = m.conn();
    for (i, ch) in channels.iter().enumerate() {
        sub.send(&[b"SSUBSCRIBE", ch.as_bytes()]);
        assert_eq!(sub.read_reply(), conf("ssubscribe", ch, i as i64 + 1));
    }
    sub.send(&[b"SUBSCRIBE", b"__keyevent@0__:set"]);
    assert_eq!(sub.read_reply(), conf("subscribe", "__keyevent@0__:set", 1));
    let (port, ch) = cluster
        .masters()
        .iter()
        .map(|n| n.port)
        .zip(channels.iter())
        .find(|(p, _)| *p != home)
        .unwrap();
    let mut node = Conn::connect(&format!("127.0.0.1:{port}"));
    let killed = node.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_eq!(killed, Reply::Int(1), "mithril's one connection there");
    wait_numsub(&mut node, "SHARDNUMSUB", ch, 1, "the shard channel again");
    wait_numsub(
        &mut node,
        "NUMSUB",
        "__keyevent@0__:set",
        1,
        "the keyspace channel again",
    );
    assert_eq!(node.cmd(&["SPUBLISH", ch, "back"]), Reply::Int(1));
    assert_eq!(sub.read_reply(), smessage(false, ch, "back"));
    let key = name_per_master(&cluster, "lostkey")
        .into_iter()
        .find(|k| cluster.port_for_slot(key_slot(k.as_bytes())) == port)
        .unwrap();
    notify_on(port);
    assert_eq!(node.cmd(&["SET", &key, "v"]), ok());
    assert_eq!(
        sub.read_reply(),
        arr(vec![
            bulk("message"),
            bulk("__keyevent@0__:set"),
            bulk(&key)
        ])
    );
    assert!(drain_to_pong(&mut sub).is_empty());
}
