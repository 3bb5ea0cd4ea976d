//! Regression tests for the correctness issue's resource items, one or two
//! per item fixed: (P)UNSUBSCRIBE admitted against the reply window in
//! waves (item 4).
//!
//! Each test starts its own cluster and mithril (test hooks on: some look
//! at the worker's state through `MITHRIL-TEST SESSIONS`), with `threads
//! 1` so that every client shares one worker.

mod hostile_support;
mod support;

use hostile_support::*;
use std::io::Write;
use std::time::Duration;
use support::*;

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
