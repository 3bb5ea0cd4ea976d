//! Regression tests for the correctness issue's resource items, one or two
//! per item fixed: (P)UNSUBSCRIBE admitted against the reply window in
//! waves (item 4), one huge command not stalling its worker's other
//! clients (item 12), defaults under which one client cannot make mithril
//! hold more than a few hundred MB, and memory given back after a burst
//! (item 9), connections to a node that left the cluster closed (item 7).
//!
//! Each test starts its own cluster and mithril (test hooks on: some look
//! at the worker's state through `MITHRIL-TEST SESSIONS`), with `threads
//! 1` so that every client shares one worker.

mod hostile_support;
mod support;

use hostile_support::*;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

/// The tests of this file move hundreds of megabytes, or measure latency:
/// they run one at a time, so that one's load is not another's latency.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The reply window of one session (`MAX_OUTSTANDING`).
const WINDOW: u64 = 65_536;
/// Channels in the largest (P)UNSUBSCRIBE one request may carry: a request
/// holds at most 1,048,576 arguments, the command name among them.
const MOST_CHANNELS: usize = 1_048_575;

fn channel(i: usize) -> String {
    format!("ch:{i:07}")
}

/// `UNSUBSCRIBE` (or another command) of channels `from..to`, encoded.
fn unsubscribe_frame(cmd: &str, from: usize, to: usize) -> Vec<u8> {
    let names: Vec<String> = (from..to).map(channel).collect();
    let mut args: Vec<&[u8]> = vec![cmd.as_bytes()];
    args.extend(names.iter().map(|n| n.as_bytes()));
    encode_command(&args)
}

fn confirmation(kind: &str, ch: &str, count: i64) -> Reply {
    Reply::Array(Some(vec![bulk(kind), bulk(ch), Reply::Int(count)]))
}

/// Writes `frame` from another thread (mithril answers while it reads).
fn write_in_background(c: &Conn, frame: Vec<u8>) -> std::thread::JoinHandle<()> {
    let mut w = c.stream().try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(120))).unwrap();
    std::thread::spawn(move || w.write_all(&frame).expect("the request was written"))
}

/// RSS and the session's outstanding replies, the largest seen.
struct Watch {
    rss_kb: u64,
    outstanding: u64,
}

impl Watch {
    fn look(&mut self, m: &Mithril, probe: &mut Conn, id: u64) {
        self.rss_kb = self.rss_kb.max(rss_kb(m.pid));
        if let Some(f) = session(probe, id) {
            self.outstanding = self.outstanding.max(f["outstanding"]);
        }
    }
}

/// Item 4: a client that is subscribed to nothing sends two UNSUBSCRIBEs
/// of 1,000,000 channels each (2,000,000 arguments; one request carries at
/// most 1,048,576). Each channel is one confirmation: they are built in
/// waves no larger than the reply window, so mithril holds a small multiple
/// of the requests' size, and all of them arrive, in order.
#[test]
fn item4_unsubscribe_of_two_million_channels_is_answered_in_waves() {
    let _serial = one_at_a_time();
    let (_cluster, m) = setup("threads 1");
    let mut probe = m.conn();
    let mut c = m.conn();
    let id = client_id(&mut c);
    const HALF: usize = 1_000_000;
    let mut frame = unsubscribe_frame("UNSUBSCRIBE", 0, HALF);
    frame.extend_from_slice(&unsubscribe_frame("UNSUBSCRIBE", HALF, 2 * HALF));
    let request = frame.len() as u64;
    let rss0 = rss_kb(m.pid);
    let mut watch = Watch {
        rss_kb: rss0,
        outstanding: 0,
    };
    let writer = write_in_background(&c, frame);
    for i in 0..2 * HALF {
        let r = c.read_reply();
        assert_eq!(
            r,
            confirmation("unsubscribe", &channel(i), 0),
            "confirmation {i}"
        );
        if i % 20_000 == 0 {
            watch.look(&m, &mut probe, id);
        }
    }
    writer.join().unwrap();
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert!(
        watch.outstanding <= WINDOW,
        "{} replies outstanding at once",
        watch.outstanding
    );
    let grew = watch.rss_kb.saturating_sub(rss0) * 1024;
    assert!(
        grew < 3 * request,
        "RSS grew by {} MB for {} MB of requests",
        grew >> 20,
        request >> 20
    );
}

/// Item 4, through the node: a subscribed client's confirmations come from
/// its subscriber connection, each into a ring slot reserved when its part
/// of the command is sent. A (P)UNSUBSCRIBE of 1,048,575 channels is sent
/// in waves the reply window admits.
#[test]
fn item4_a_subscribers_huge_unsubscribe_is_sent_in_waves() {
    let _serial = one_at_a_time();
    let (_cluster, m) = setup("threads 1");
    let mut probe = m.conn();
    let mut c = m.conn();
    let id = client_id(&mut c);
    // Subscribed to three of the channels named: the count falls at each.
    let held = [0, MOST_CHANNELS / 2, MOST_CHANNELS - 1];
    for (n, &i) in held.iter().enumerate() {
        let r = c.cmd(&["SUBSCRIBE", &channel(i)]);
        assert_eq!(r, confirmation("subscribe", &channel(i), n as i64 + 1));
    }
    let frame = unsubscribe_frame("UNSUBSCRIBE", 0, MOST_CHANNELS);
    let request = frame.len() as u64;
    let rss0 = rss_kb(m.pid);
    let mut watch = Watch {
        rss_kb: rss0,
        outstanding: 0,
    };
    let writer = write_in_background(&c, frame);
    let mut left = held.len() as i64;
    for i in 0..MOST_CHANNELS {
        if held.contains(&i) {
            left -= 1;
        }
        let r = c.read_reply();
        assert_eq!(
            r,
            confirmation("unsubscribe", &channel(i), left),
            "confirmation {i}"
        );
        if i % 20_000 == 0 {
            watch.look(&m, &mut probe, id);
        }
    }
    writer.join().unwrap();
    assert_eq!(
        session(&mut probe, id).unwrap()["subs"],
        0,
        "the mirror followed"
    );
    assert!(
        watch.outstanding <= WINDOW,
        "{} replies outstanding at once",
        watch.outstanding
    );
    let grew = watch.rss_kb.saturating_sub(rss0) * 1024;
    assert!(
        grew < 3 * request,
        "RSS grew by {} MB for a {} MB request",
        grew >> 20,
        request >> 20
    );
    // Patterns go the same way, and the client is served as before.
    let r = c.cmd(&["PSUBSCRIBE", "p:*"]);
    assert_eq!(r, confirmation("psubscribe", "p:*", 1));
    let frame = unsubscribe_frame("PUNSUBSCRIBE", 0, 100_000);
    let writer = write_in_background(&c, frame);
    for i in 0..100_000 {
        let r = c.read_reply();
        assert_eq!(r, confirmation("punsubscribe", &channel(i), 1), "{i}");
    }
    writer.join().unwrap();
    let r = c.cmd(&["PUNSUBSCRIBE"]);
    assert_eq!(r, confirmation("punsubscribe", "p:*", 0));
}

/// Item 12: while one client's UNSUBSCRIBE of 1,048,575 channels is being
/// answered, another client of the same worker is served as usual: the
/// huge command is done a bounded piece per loop turn.
#[test]
fn item12_a_huge_unsubscribe_does_not_stall_its_workers_other_clients() {
    let _serial = one_at_a_time();
    let (_cluster, m) = setup("threads 1");
    let c = m.conn();
    let mut pinger = m.conn();
    assert_eq!(pinger.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let frame = unsubscribe_frame("UNSUBSCRIBE", 0, MOST_CHANNELS);
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let pings = std::thread::spawn(move || {
        let mut worst = Duration::ZERO;
        let mut n = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            assert_eq!(pinger.cmd(&["PING"]), Reply::Simple("PONG".into()));
            worst = worst.max(t.elapsed());
            n += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        (worst, n)
    });
    let writer = write_in_background(&c, frame);
    // Every confirmation has the same length: read them in big chunks and
    // compare bytes (parsing a million replies would take CPU time from
    // mithril, which shares the machine with this test).
    let one = |i: usize| {
        let ch = channel(i);
        format!(
            "*3\r\n$11\r\nunsubscribe\r\n${}\r\n{ch}\r\n:0\r\n",
            ch.len()
        )
        .into_bytes()
    };
    let per = one(0).len();
    let mut s = c.stream().try_clone().unwrap();
    const BATCH: usize = 10_000;
    for from in (0..MOST_CHANNELS).step_by(BATCH) {
        let to = (from + BATCH).min(MOST_CHANNELS);
        let got = read_exact_within(&mut s, (to - from) * per, Duration::from_secs(60));
        let want: Vec<u8> = (from..to).flat_map(one).collect();
        assert!(got == want, "confirmations {from} to {to}");
    }
    writer.join().unwrap();
    done.store(true, Ordering::Relaxed);
    let (worst, n) = pings.join().unwrap();
    assert!(n > 10, "only {n} PINGs during the UNSUBSCRIBE");
    // Generous: mithril is a debug build here, sharing the machine with
    // this test's clients, the nodes and the other tests; the defect held
    // every other client for 1.3 s, and a loaded 2-core machine has been
    // seen to hold one PING 124 ms without it.
    assert!(
        worst < Duration::from_millis(400),
        "a PING took {worst:?} while the UNSUBSCRIBE ran ({n} PINGs)"
    );
}

const MB: u64 = 1024 * 1024;

/// Waits (20 s) until mithril's RSS is back within `slack` of `start`
/// (kB), while `ping` keeps every client busy (none of them goes idle, so
/// the idle sweep alone would give nothing back).
fn wait_rss_back(m: &Mithril, start: u64, slack: u64, mut ping: impl FnMut()) {
    wait_until_explained(
        "RSS to come back near its start",
        Duration::from_secs(20),
        || {
            ping();
            std::thread::sleep(Duration::from_millis(100));
            let now = rss_kb(m.pid);
            if now <= start + slack {
                Ok(())
            } else {
                Err(format!(
                    "RSS {} MB, {} MB at the start",
                    now >> 10,
                    start >> 10
                ))
            }
        },
    );
}

/// Item 9: with the defaults, one request of 600 MB (75 arguments of 8 MB)
/// is refused as soon as it is known not to fit query-buffer-limit
/// (128mb), before the rest of it is read, and what it held is given back.
#[test]
fn item9_a_600mb_request_is_refused_early_with_the_defaults() {
    let _serial = one_at_a_time();
    let (_cluster, m) = setup("threads 1");
    let key = tagged("600mb");
    let mut good = m.conn();
    assert_eq!(good.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let rss0 = rss_kb(m.pid);
    let peak = PeakRss::start(m.pid);
    let value = vec![b'v'; 8 << 20];
    let mut s = raw(&m);
    let mut w = s.try_clone().unwrap();
    let head = format!("*77\r\n$5\r\nRPUSH\r\n${}\r\n{key}\r\n", key.len());
    let writer = std::thread::spawn(move || {
        let mut written = 0u64;
        let arg = format!("${}\r\n", value.len());
        let mut parts: Vec<&[u8]> = vec![head.as_bytes()];
        for _ in 0..75 {
            parts.extend([arg.as_bytes(), &value[..], b"\r\n"]);
        }
        for p in parts {
            if w.write_all(p).is_err() {
                break;
            }
            written += p.len() as u64;
        }
        written
    });
    let (got, closed) = read_until_closed(&mut s, Duration::from_secs(60));
    let written = writer.join().unwrap();
    let peak = peak.stop();
    assert!(
        closed,
        "the connection stays open: {:?}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR mithril: closing the connection, its request is larger than query-buffer-limit\r\n"
    );
    assert!(
        written < 300 * MB,
        "{} MB of the request taken",
        written >> 20
    );
    let grew = peak.saturating_sub(rss0) * 1024;
    assert!(grew < 200 * MB, "RSS grew by {} MB", grew >> 20);
    assert_eq!(good.cmd(&["LLEN", &key]), Reply::Int(0), "nothing ran");
    wait_rss_back(&m, rss0, 16 * 1024, || {
        assert_eq!(good.cmd(&["PING"]), Reply::Simple("PONG".into()));
    });
}

/// Item 9: a burst of large but allowed traffic (a 60 MB SET, then eight
/// clients that GET the 60 MB value and are slow to read it) takes memory
/// while it lasts and gives it back after it, though every client stays
/// connected and busy.
#[test]
fn item9_memory_taken_by_a_large_burst_is_given_back() {
    let _serial = one_at_a_time();
    // As below: eight 60 MB GETs on one node connection keep the node
    // silent while it copies them, longer than 5 s on a loaded machine.
    let (_cluster, m) = setup("threads 1\nbackend-timeout 120000");
    let key = tagged("blob");
    let value = vec![b'b'; 60 << 20];
    let mut writer = m.conn();
    assert_eq!(writer.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let rss0 = rss_kb(m.pid);
    assert_eq!(writer.cmd_bytes(&[b"SET", key.as_bytes(), &value]), ok());
    const READERS: usize = 8;
    let mut readers: Vec<RawClient> = (0..READERS)
        .map(|_| {
            let mut r = RawClient::new(raw_with(&m, Some(4096)));
            r.send(&[b"GET", key.as_bytes()]);
            r
        })
        .collect();
    // Each reply is held for its slow reader.
    wait_until_explained(
        "the replies to be held for their readers",
        Duration::from_secs(60),
        || {
            let now = rss_kb(m.pid);
            if now >= rss0 + READERS as u64 * 50 * 1024 {
                Ok(())
            } else {
                Err(format!("RSS {} MB", now >> 10))
            }
        },
    );
    let reply = format!("${}\r\n", value.len()).len() + value.len() + 2;
    for r in &mut readers {
        let got = read_exact_within(&mut r.s, reply, Duration::from_secs(60));
        assert!(got.ends_with(b"bbbb\r\n"));
    }
    wait_rss_back(&m, rss0, 32 * 1024, || {
        for r in &mut readers {
            assert_eq!(r.cmd(&["PING"]), Reply::Simple("PONG".into()));
        }
        assert_eq!(writer.cmd(&["PING"]), Reply::Simple("PONG".into()));
    });
}

/// Item 9: one client pipelines sixteen GETs of a 60 MB value and reads
/// nothing. They all go in its first batch, before any reply showed its
/// size, so the dispatch window cannot hold them back: the default hard
/// output limit of normal clients (256mb) is what bounds what mithril
/// holds for it.
#[test]
fn item9_one_client_cannot_make_mithril_hold_a_gigabyte_of_replies() {
    let _serial = one_at_a_time();
    // The node runs all sixteen GETs, copying 960 MB of replies, before it
    // writes a byte: on a loaded machine that silence outlasted the
    // default backend-timeout (5 s), which then failed the connection
    // before the client reached its limit. The limit is what is tested.
    let (_cluster, m) = setup("threads 1\nbackend-timeout 120000");
    let key = tagged("blob");
    let value = vec![b'b'; 60 << 20];
    let mut probe = m.conn();
    assert_eq!(probe.cmd_bytes(&[b"SET", key.as_bytes(), &value]), ok());
    drop(value);
    let rss0 = rss_kb(m.pid);
    let peak = PeakRss::start(m.pid);
    let mut s = raw_with(&m, Some(4096));
    s.write_all(&repeat_cmd(&[b"GET", key.as_bytes()], 16))
        .unwrap();
    wait_until(
        "the client to be cut at the hard output limit",
        Duration::from_secs(60),
        || (sessions(&mut probe).0["obuf_closes"] == 1).then_some(()),
    );
    let (_, closed) = read_until_closed(&mut s, Duration::from_secs(60));
    assert!(closed);
    // The replies it asked for still come from the node (960 MB in all)
    // and are dropped as they arrive.
    wait_rss_back(&m, rss0, 32 * 1024, || {
        assert_eq!(probe.cmd(&["PING"]), Reply::Simple("PONG".into()));
    });
    let grew = peak.stop().saturating_sub(rss0) * 1024;
    assert!(grew < 512 * MB, "RSS grew by {} MB", grew >> 20);
    assert!(m
        .log()
        .contains("passed the client-output-buffer-limit (hard)"));
}

/// The topology mithril routes with, as its log last said.
fn routing_masters(m: &Mithril) -> Option<usize> {
    let log = m.log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("now routing with topology epoch"))?;
    let (_, rest) = line.split_once(" (")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Traffic that opens a pooled connection and leaves an idle lease on
/// each of `masters`' nodes (a SET, and a BLPOP that times out).
fn touch_every_master(c: &mut Conn, cluster: &RedisCluster, masters: &[usize]) {
    for &i in masters {
        let port = cluster.nodes[i].port;
        let slot = (0..16384u16)
            .find(|&s| cluster.port_for_slot(s) == port)
            .expect("a slot of the node");
        let key = key_for_slot(slot, "touch");
        assert_eq!(c.cmd(&["SET", &key, "v"]), ok(), "SET on node {i}");
        let r = c.cmd(&["BLPOP", &key, "0.01"]);
        assert!(r.is_error() || matches!(r, Reply::Array(None)), "{r:?}");
    }
}

/// Item 7: a node removed from the cluster (its slots moved away, then
/// forgotten by every other node, the process still running, as in a
/// scale-in before its machine goes) leaves no connection open in
/// mithril: its pooled connection and its idle lease are closed, and
/// mithril's descriptor count comes back to what a fresh proxy's is.
#[test]
fn item7_connections_to_a_removed_node_are_closed() {
    let _serial = one_at_a_time();
    enable_hooks();
    // A master that gives away its last slot stays a master (Redis 7
    // would make it a replica of the node that took the slot).
    let mut cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["cluster-allow-replica-migration no".into()],
        ..ClusterSpec::default()
    });
    let seeds = cluster.seeds();
    let conf = "threads 1\ntopology-refresh-secs 1";
    let m = Mithril::start(bin(), &seeds, conf);
    let mut c = m.conn();
    let gone = cluster.add_master();
    let slot = key_slot(b"{item7}");
    cluster.migrate_slot(slot, gone, 100);
    wait_until(
        "mithril to route with 4 masters",
        Duration::from_secs(20),
        || (routing_masters(&m) == Some(4)).then_some(()),
    );
    touch_every_master(&mut c, &cluster, &[gone]);
    // Scale in: the slot goes back, the node forgets the cluster and the
    // cluster forgets the node. Its process (and so its end of every
    // connection) stays up.
    cluster.migrate_slot(slot, 0, 100);
    let old_id = cluster.nodes[gone].id.clone();
    let mut node = cluster.nodes[gone].conn();
    assert_eq!(node.cmd(&["CLUSTER", "RESET", "HARD"]), ok());
    for i in 0..gone {
        let r = cluster.nodes[i].conn().cmd(&["CLUSTER", "FORGET", &old_id]);
        assert_eq!(r, ok(), "FORGET on node {i}");
    }
    wait_until(
        "mithril to route with 3 masters",
        Duration::from_secs(20),
        || (routing_masters(&m) == Some(3)).then_some(()),
    );
    let rest: Vec<usize> = (0..gone).collect();
    touch_every_master(&mut c, &cluster, &rest);
    // A fresh proxy, the same configuration and the same traffic.
    let fresh = Mithril::start(bin(), &seeds, conf);
    let mut f = fresh.conn();
    touch_every_master(&mut f, &cluster, &rest);
    wait_until_explained(
        "mithril's descriptors to come back to a fresh proxy's",
        Duration::from_secs(20),
        || {
            let (old, new) = (fd_count(m.pid), fd_count(fresh.pid));
            if old == new {
                Ok(())
            } else {
                Err(format!("{old} descriptors, a fresh proxy {new}"))
            }
        },
    );
    // And it still serves every slot.
    for i in 0..64u16 {
        let key = key_for_slot(i * 256, "after");
        assert_eq!(c.cmd(&["SET", &key, "v"]), ok(), "{key}");
    }
    drop(node);
}
