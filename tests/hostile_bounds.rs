//! Per-session bounds and slow readers (issue 5, items 1 and 2): the reply
//! window of 65,536 with pause and resume, the subscription cap, the MULTI
//! queue bound, the push window, the output high-water mark, the output
//! limits of `client-output-buffer-limit`, and a slow client that shares
//! its backend connections with a fast one.
//!
//! mithril runs with `threads 1` so that every client, and the probe that
//! reads the worker's state through `MITHRIL-TEST SESSIONS`, share one
//! worker (and, with `backend-conns 1`, one connection per node).

mod hostile_support;
mod support;

use hostile_support::*;
use std::io::Write;
use std::time::{Duration, Instant};
use support::*;

const MAX_OUTSTANDING: u64 = 65_536;

#[test]
fn the_reply_window_stops_at_65536_and_resumes_in_order() {
    let (cluster, m) = setup("threads 1\nbackend-timeout 0");
    let mut probe = m.conn();
    let mut c = m.conn();
    let id = client_id(&mut c);
    let counter = tagged("counter");
    // Small replies first: the window opens to its full size.
    let pings: Vec<Vec<Vec<u8>>> = (0..300).map(|_| vec![b"PING".to_vec()]).collect();
    assert!(c
        .pipeline(&pings)
        .iter()
        .all(|r| *r == Reply::Simple("PONG".into())));
    assert_eq!(
        session(&mut probe, id).unwrap()["window"],
        MAX_OUTSTANDING,
        "small replies open the whole window"
    );

    // Freeze the node that owns the counter: every request stays pending.
    let port = cluster.port_for_slot(key_slot(counter.as_bytes()));
    let mut node = Conn::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(
        node.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]),
        Reply::Simple("OK".into())
    );
    const N: usize = 100_000;
    let flood = repeat_cmd(&[b"INCR", counter.as_bytes()], N);
    let mut writer = c.stream().try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&flood));

    let f = wait_until_explained(
        "the session to stop at the reply window",
        Duration::from_secs(20),
        || {
            let f = session(&mut probe, id).ok_or("session gone")?;
            if f["paused"] == 1 && f["outstanding"] == MAX_OUTSTANDING {
                Ok(f)
            } else {
                Err(format!("{f:?}"))
            }
        },
    );
    assert_eq!(f["backlog"], 1, "requests wait in the read buffer: {f:?}");
    // What was read and not dispatched is one read's worth at most.
    assert!(f["rbuf"] <= 320 * 1024, "{f:?}");
    // It stays there: nothing more is dispatched while paused.
    std::thread::sleep(Duration::from_millis(300));
    let again = session(&mut probe, id).unwrap();
    assert_eq!(again["outstanding"], MAX_OUTSTANDING, "{again:?}");
    assert_eq!(again["paused"], 1);

    // Thaw the node: every reply comes back, in order, nothing lost.
    assert_eq!(node.cmd(&["CLIENT", "UNPAUSE"]), Reply::Simple("OK".into()));
    for i in 1..=N as i64 {
        let r = c.read_reply();
        assert_eq!(r, Reply::Int(i), "reply {i}");
    }
    sender.join().unwrap().unwrap();
    let end = session(&mut probe, id).unwrap();
    assert_eq!(
        (end["paused"], end["outstanding"], end["rbuf"]),
        (0, 0, 0),
        "{end:?}"
    );
}

#[test]
fn subscriptions_are_capped_at_32768() {
    let (_cluster, m) = setup("threads 1");
    let mut s = m.conn();
    let mut total = 0usize;
    for batch in 0..8 {
        let mut args: Vec<Vec<u8>> = vec![b"SUBSCRIBE".to_vec()];
        args.extend((0..4096).map(|i| format!("ch:{batch}:{i}").into_bytes()));
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        s.send(&refs);
        for _ in 0..4096 {
            total += 1;
            let r = s.read_reply();
            let a = r.as_array();
            assert_eq!(a[0].as_str(), "subscribe");
            assert_eq!(a[2].as_int(), total as i64);
        }
    }
    assert_eq!(total, 32_768);
    let r = s.cmd(&["SUBSCRIBE", "one-too-many"]);
    assert_eq!(
        r.as_error(),
        "ERR mithril: too many subscriptions for one client (32768)"
    );
    // Still subscribed to all of them, and still served.
    let r = s.cmd(&["PING"]);
    assert_eq!(r.as_array()[0].as_str(), "pong");
}

#[test]
fn a_transaction_queues_at_most_query_buffer_limit_bytes() {
    let (_cluster, m) = setup("threads 1\nquery-buffer-limit 1mb\nproto-max-bulk-len 1mb");
    let mut c = m.conn();
    let key = tagged("txn");
    let value = vec![b'v'; 200 * 1024];
    assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
    // Five frames of ~200 KiB fit in 1 MiB; the sixth does not.
    for _ in 0..5 {
        let r = c.cmd_bytes(&[b"SET", key.as_bytes(), &value]);
        assert_eq!(r, Reply::Simple("QUEUED".into()));
    }
    let r = c.cmd_bytes(&[b"SET", key.as_bytes(), &value]);
    assert_eq!(
        r.as_error(),
        "ERR mithril: transaction too large (query-buffer-limit)"
    );
    assert_eq!(
        c.cmd(&["EXEC"]).as_error(),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(c.cmd(&["GET", &key]).as_bulk(), None, "nothing ran");
}

#[test]
fn a_subscriber_that_does_not_read_holds_at_most_the_push_window() {
    // Pub/sub output limits off: only the window bounds the subscriber.
    let (_cluster, m) = setup("threads 1\nclient-output-buffer-limit pubsub 0 0 0");
    let mut probe = m.conn();
    let mut sub = RawClient::new(raw_with(&m, Some(4096)));
    let id = sub.cmd(&["CLIENT", "ID"]).as_int() as u64;
    let r = sub.cmd(&["SUBSCRIBE", "news"]);
    assert_eq!(r.as_array()[2].as_int(), 1);
    let mut publisher = m.conn();
    const N: usize = 100_000;
    let cmds: Vec<Vec<Vec<u8>>> = (0..N)
        .map(|i| {
            vec![
                b"PUBLISH".to_vec(),
                b"news".to_vec(),
                format!("{i:08}").into_bytes(),
            ]
        })
        .collect();
    for r in publisher.pipeline(&cmds) {
        assert_eq!(r, Reply::Int(1));
    }
    // The window fills to 4,096 frames and mithril stops reading the
    // subscriber connection; it reads again only once fewer than half are
    // left. The kernel may still take some of the queued frames after that
    // (its socket buffers grow), so the backlog settles between half the
    // window and the window, and stays there while the client reads nothing.
    let settled = |probe: &mut Conn| -> Result<u64, String> {
        let a = session(probe, id).ok_or("session gone")?["pushes"];
        std::thread::sleep(Duration::from_millis(300));
        let b = session(probe, id).ok_or("session gone")?["pushes"];
        assert!(a <= 4096 && b <= 4096, "past the window: {a}, {b}");
        if a == b && b >= 2048 {
            Ok(b)
        } else {
            Err(format!("backlog {a} then {b}"))
        }
    };
    let held = wait_until_explained(
        "the subscriber's push window to fill and settle",
        // Generous: the other tests of this file run alongside on 2 cores.
        Duration::from_secs(60),
        || settled(&mut probe),
    );
    assert!((2048..=4096).contains(&held), "{held}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(session(&mut probe, id).unwrap()["pushes"], held);
    // Reading drains the window, the node's buffer refills it: every
    // message arrives, in order.
    for i in 0..N {
        let r = sub.read_reply();
        let a = r.as_array();
        assert_eq!(a[0].as_str(), "message");
        assert_eq!(a[2].as_str(), format!("{i:08}"), "message {i}");
    }
    assert_eq!(session(&mut probe, id).unwrap()["pushes"], 0);
}

/// A client that pipelines GETs of a 100 KB value and does not read.
fn flood_big_gets(m: &Mithril, key: &str, n: usize) -> std::net::TcpStream {
    let mut s = raw_with(m, Some(4096));
    let flood = repeat_cmd(&[b"GET", key.as_bytes()], n);
    let (_, closed) = write_while_taken(&mut s, &flood, Duration::from_secs(5));
    assert!(!closed, "mithril closed the flooding client");
    s
}

#[test]
fn output_past_the_high_water_mark_stops_dispatch_until_half_drained() {
    let hw: u64 = 1024 * 1024;
    let (_cluster, m) = setup(&format!("threads 1\nclient-output-high-water {hw}"));
    let mut probe = m.conn();
    let key = tagged("big");
    let value = vec![b'x'; 100 * 1024];
    let mut setter = m.conn();
    assert_eq!(
        setter.cmd_bytes(&[b"SET", key.as_bytes(), &value]),
        Reply::Simple("OK".into())
    );
    const N: usize = 2000;
    let mut s = flood_big_gets(&m, &key, N);
    // The flooder: the session that is neither the probe nor the setter.
    let known = [client_id(&mut probe), client_id(&mut setter)];
    let id = wait_until("the flooder's session", Duration::from_secs(10), || {
        sessions(&mut probe)
            .1
            .iter()
            .filter_map(|f| f.get("id").copied())
            .find(|id| !known.contains(id))
    });
    // It stops: paused, and nothing changes any more while the client
    // does not read.
    let mut last = None;
    let f = wait_until_explained("the flooder to settle", Duration::from_secs(10), || {
        let f = session(&mut probe, id).ok_or("session gone")?;
        let settled = f["paused"] == 1 && last.as_ref() == Some(&f);
        last = Some(f.clone());
        std::thread::sleep(Duration::from_millis(200));
        if settled {
            Ok(f)
        } else {
            Err(format!("{f:?}"))
        }
    });
    // What it holds: up to the high-water mark in unsent output, plus what
    // one window holds (hw / 100 KB replies, or the 16 of the first batch,
    // sent before any reply showed its size), plus the reply that crossed
    // the mark; and one read's worth of requests.
    let reply = value.len() as u64 + 16;
    let bound = hw + hw.max(16 * reply) + reply;
    assert!(f["unsent"] <= bound, "{f:?}");
    assert!(f["unsent"] >= hw / 2, "it did fill up: {f:?}");
    assert!(f["outstanding"] <= hw / reply + 16, "{f:?}");
    assert!(f["rbuf"] <= 320 * 1024, "{f:?}");
    assert_eq!(f["backlog"], 1, "{f:?}");
    // The client reads: every reply arrives, complete and in order.
    let one = format!("${}\r\n", value.len()).into_bytes();
    let per = one.len() + value.len() + 2;
    for i in 0..N {
        let got = read_exact_within(&mut s, per, Duration::from_secs(20));
        assert!(got.starts_with(&one), "reply {i}");
    }
    let end = session(&mut probe, id).unwrap();
    assert_eq!((end["paused"], end["unsent"]), (0, 0), "{end:?}");
}

#[test]
fn a_slow_client_never_stalls_others_on_its_backend_connections() {
    let (_cluster, m) = setup("threads 1\nbackend-conns 1");
    let mut probe = m.conn();
    let key = tagged("big");
    let value = vec![b'x'; 100 * 1024];
    let mut fast = m.conn();
    assert_eq!(
        fast.cmd_bytes(&[b"SET", key.as_bytes(), &value]),
        Reply::Simple("OK".into())
    );
    let _slow = flood_big_gets(&m, &key, 5000);
    // The fast client talks to the same node (same hash tag), over the
    // same backend connection, while the slow one's replies pile up.
    let small = tagged("small");
    let mut worst = Duration::ZERO;
    let started = Instant::now();
    for i in 0..1000 {
        let t = Instant::now();
        assert_eq!(
            fast.cmd(&["SET", &small, &i.to_string()]),
            Reply::Simple("OK".into())
        );
        assert_eq!(fast.cmd(&["GET", &small]).as_str(), i.to_string());
        worst = worst.max(t.elapsed());
    }
    assert!(
        worst < Duration::from_millis(500),
        "worst round trip {worst:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    // And the slow client is indeed stuck behind its own output.
    let (_, all) = sessions(&mut probe);
    let slow = all
        .iter()
        .find(|f| f["unsent"] > 0)
        .expect("the slow client");
    assert_eq!(slow["paused"], 1, "{slow:?}");
}

#[test]
fn client_output_buffer_limit_closes_and_counts() {
    // normal: hard 2mb (the high-water mark is higher, so output does get
    // there); pubsub: hard 256kb.
    let (_cluster, m) = setup(
        "threads 1\nclient-output-high-water 8mb\n\
         client-output-buffer-limit normal 2mb 0 0 pubsub 256kb 0 0",
    );
    let mut probe = m.conn();
    let key = tagged("big");
    let value = vec![b'x'; 100 * 1024];
    let mut setter = m.conn();
    assert_eq!(
        setter.cmd_bytes(&[b"SET", key.as_bytes(), &value]),
        Reply::Simple("OK".into())
    );
    let mut s = raw_with(&m, Some(4096));
    let flood = repeat_cmd(&[b"GET", key.as_bytes()], 1000);
    let _ = write_while_taken(&mut s, &flood, Duration::from_secs(5));
    wait_until("the flooder to be closed", Duration::from_secs(10), || {
        (sessions(&mut probe).0["obuf_closes"] == 1).then_some(())
    });
    let (_, closed) = read_until_closed(&mut s, Duration::from_secs(20));
    assert!(closed);
    assert!(
        m.log()
            .contains("passed the client-output-buffer-limit (hard)"),
        "{}",
        m.log()
    );

    // A subscriber that does not read: 64 messages of 10 KB pass 256 KB.
    let mut sub = RawClient::new(raw_with(&m, Some(4096)));
    assert_eq!(sub.cmd(&["SUBSCRIBE", "feed"]).as_array()[2].as_int(), 1);
    let mut publisher = m.conn();
    let msg = "m".repeat(10 * 1024);
    for _ in 0..600 {
        publisher.send(&[b"PUBLISH", b"feed", msg.as_bytes()]);
    }
    for _ in 0..600 {
        publisher.read_reply();
    }
    wait_until(
        "the subscriber to be closed",
        Duration::from_secs(10),
        || (sessions(&mut probe).0["obuf_closes"] == 2).then_some(()),
    );
    let (_, closed) = read_until_closed(&mut sub.s, Duration::from_secs(20));
    assert!(closed);
    // Everyone else is still served.
    assert_eq!(setter.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn the_soft_output_limit_needs_its_seconds() {
    let (_cluster, m) = setup(
        "threads 1\nclient-output-high-water 8mb\n\
         client-output-buffer-limit normal 0 1mb 2",
    );
    let mut probe = m.conn();
    let key = tagged("big");
    let value = vec![b'x'; 100 * 1024];
    let mut setter = m.conn();
    assert_eq!(
        setter.cmd_bytes(&[b"SET", key.as_bytes(), &value]),
        Reply::Simple("OK".into())
    );
    let s = flood_big_gets(&m, &key, 100);
    wait_until(
        "output over the soft limit",
        Duration::from_secs(10),
        || {
            let (_, all) = sessions(&mut probe);
            all.iter().any(|f| f["unsent"] >= 1024 * 1024).then_some(())
        },
    );
    let over_at = Instant::now();
    // Over the soft limit, but not for 2 seconds yet: still open.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(sessions(&mut probe).0["obuf_closes"], 0);
    wait_until(
        "the soft limit to close it",
        Duration::from_secs(10),
        || (sessions(&mut probe).0["obuf_closes"] == 1).then_some(()),
    );
    assert!(over_at.elapsed() >= Duration::from_secs(2));
    assert!(m
        .log()
        .contains("passed the client-output-buffer-limit (soft)"));
    drop(s);
}

#[test]
fn a_slow_clients_small_replies_do_not_pin_shared_backend_buffers() {
    // A client that never reads gets 2 KB replies, each arriving in the
    // same backend read as another client's 64 KB reply. Were its replies
    // kept as slices of those reads, each would keep a whole read buffer
    // alive: the thousands the kernel does not take, hundreds of MB.
    let (_cluster, m) = setup("threads 1\nbackend-conns 1\nloglevel notice");
    let small = tagged("small");
    let big = tagged("big");
    let mut fast = m.conn();
    let value = vec![b'b'; 64 * 1024];
    assert_eq!(
        fast.cmd_bytes(&[b"SET", big.as_bytes(), &value]),
        Reply::Simple("OK".into())
    );
    assert_eq!(
        fast.cmd(&["SET", &small, &"s".repeat(2000)]),
        Reply::Simple("OK".into())
    );
    let mut slow = raw_with(&m, Some(4096));
    let get_small = encode_command(&[b"GET", small.as_bytes()]);
    let rss0 = rss_kb(m.pid);
    for _ in 0..4000 {
        slow.write_all(&get_small).unwrap();
        let r = fast.cmd(&["GET", &big]);
        assert_eq!(r.as_bulk().map(<[u8]>::len), Some(value.len()));
    }
    let mut probe = m.conn();
    let (_, all) = sessions(&mut probe);
    let waiting: u64 = all.iter().map(|f| f["unsent"]).sum();
    assert!(
        waiting > 100 * 1024,
        "the slow client's replies wait: {all:?}"
    );
    let grew = rss_kb(m.pid).saturating_sub(rss0);
    assert!(
        grew < 48 * 1024,
        "RSS grew by {grew} kB for {waiting} bytes of replies"
    );
    drop(slow);
}

#[test]
fn idle_sessions_give_back_the_buffers_they_grew() {
    let (_cluster, m) = setup("threads 1");
    let mut probe = m.conn();
    let mut c = m.conn();
    let id = client_id(&mut c);
    // A big request: the read buffer it grew leaves with it, at once.
    let big = "e".repeat(2 * 1024 * 1024);
    assert_eq!(c.cmd(&["ECHO", &big]).as_str().len(), big.len());
    let after = session(&mut probe, id).unwrap();
    assert!(after["rbufcap"] < 1024 * 1024, "{after:?}");
    // A deep pipeline: the read buffer and the reply ring grow.
    let pings: Vec<Vec<Vec<u8>>> = (0..20_000).map(|_| vec![b"PING".to_vec()]).collect();
    assert_eq!(c.pipeline(&pings).len(), 20_000);
    let grown = session(&mut probe, id).unwrap();
    assert!(grown["rbufcap"] >= 64 * 1024, "{grown:?}");
    // About two seconds idle, and a sweep later, the buffers are gone.
    let f = wait_until_explained(
        "the buffers to be given back",
        Duration::from_secs(6),
        || {
            let f = session(&mut probe, id).ok_or("gone")?;
            if f["rbufcap"] == 0 {
                Ok(f)
            } else {
                Err(format!("{f:?}"))
            }
        },
    );
    assert_eq!((f["rbuf"], f["outstanding"]), (0, 0));
    // And the session works as before.
    assert_eq!(c.cmd(&["ECHO", "again"]).as_str(), "again");
}

#[test]
fn a_client_that_pipelines_then_half_closes_gets_every_reply() {
    // More requests than the first window (16) lets out at once: the rest
    // wait in the read buffer while the client has already sent its EOF.
    let (_cluster, m) = setup("threads 1");
    let key = tagged("half-closed");
    let mut s = raw(&m);
    const N: i64 = 3000;
    s.write_all(&repeat_cmd(&[b"INCR", key.as_bytes()], N as usize))
        .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let (bytes, closed) = read_until_closed(&mut s, Duration::from_secs(20));
    assert!(closed, "closed after the last reply");
    let mut at = 0;
    for i in 1..=N {
        let (r, used) = parse_reply(&bytes[at..])
            .unwrap()
            .unwrap_or_else(|| panic!("reply {i} missing ({} bytes in all)", bytes.len()));
        assert_eq!(r, Reply::Int(i));
        at += used;
    }
    assert_eq!(at, bytes.len(), "nothing after the last reply");
}
