//! Mass attacks on resources (issue 5, item 5): 20,000 connections opened
//! at once, and clients that pipeline GETs of a 100 KB value without ever
//! reading. mithril's file descriptors and memory are measured from /proc.
//!
//! The file-descriptor limit of this machine's processes may be 20,000:
//! the connections are opened by two helper processes (this test binary
//! run again, `helper_hold_connections`), each with its own limit.

mod hostile_support;
mod support;

use hostile_support::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const HELPER_ADDR: &str = "HOSTILE_HELPER_ADDR";
const HELPER_CONNS: &str = "HOSTILE_HELPER_CONNS";
const MAXCLIENTS_ERR: &[u8] = b"-ERR max number of clients reached\r\n";

/// Run by `twenty_thousand_connections_...` in a child process: opens
/// `HOSTILE_HELPER_CONNS` connections, classifies each (served: PING gets
/// PONG; refused: the maxclients error, then a close), prints
/// `served=N refused=N other=N`, holds them until its stdin closes.
#[test]
#[ignore = "a helper process of twenty_thousand_connections_are_served_or_refused_and_given_back"]
fn helper_hold_connections() {
    let (Ok(addr), Ok(n)) = (std::env::var(HELPER_ADDR), std::env::var(HELPER_CONNS)) else {
        return;
    };
    let n: usize = n.parse().unwrap();
    let limit = raise_fd_limit();
    assert!(limit as usize > n + 64, "fd limit {limit} too low for {n}");
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let s = TcpStream::connect(&addr).unwrap();
        conns.push(s);
    }
    // Let the acceptor turn the excess away before asking anything.
    std::thread::sleep(Duration::from_millis(1500));
    let (mut served, mut refused, mut other) = (0, 0, 0);
    let mut buf = [0u8; 64];
    for s in &mut conns {
        s.set_nonblocking(true).unwrap();
        let early = s.read(&mut buf);
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        match early {
            Ok(k) if buf[..k] == *MAXCLIENTS_ERR => {
                let mut rest = [0u8; 8];
                match s.read(&mut rest) {
                    Ok(0) => refused += 1,
                    _ => other += 1,
                }
                continue;
            }
            Ok(_) => {
                other += 1;
                continue;
            }
            Err(_) => {}
        }
        if s.write_all(b"PING\r\n").is_err() {
            other += 1;
            continue;
        }
        let mut got = Vec::new();
        while got.len() < 7 {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => got.extend_from_slice(&buf[..k]),
            }
        }
        if got == b"+PONG\r\n" {
            served += 1;
        } else if got.starts_with(MAXCLIENTS_ERR) {
            refused += 1;
        } else {
            other += 1;
        }
    }
    println!("\nHOLDING served={served} refused={refused} other={other}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    drop(conns);
}

struct Helper {
    child: std::process::Child,
    /// The rest of its output, read to the end once it exits.
    rest: std::io::Lines<BufReader<std::process::ChildStdout>>,
    served: usize,
    refused: usize,
    other: usize,
}

fn spawn_helper(addr: &str, n: usize) -> std::process::Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([
        "helper_hold_connections",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(HELPER_ADDR, addr)
    .env(HELPER_CONNS, n.to_string())
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    spawn_child(cmd).unwrap()
}

fn wait_helper(mut child: std::process::Child) -> Helper {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let line = loop {
        match lines.next() {
            // libtest may have printed the test's name on the same line.
            Some(Ok(l)) if l.contains("HOLDING ") => {
                break l[l.find("HOLDING ").unwrap_or(0)..].to_string()
            }
            Some(Ok(_)) => continue,
            _ => panic!("the helper ended without a report"),
        }
    };
    let num = |k: &str| -> usize {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
            .unwrap()
    };
    Helper {
        served: num("served"),
        refused: num("refused"),
        other: num("other"),
        child,
        rest: lines,
    }
}

#[test]
fn twenty_thousand_connections_are_served_or_refused_and_given_back() {
    let (_cluster, m) = setup("threads 1\ntcp-backlog 4096\nloglevel notice");
    let mut probe = m.conn();
    // The probe's backend connection opens before the baseline.
    assert_eq!(probe.cmd(&["GET", &tagged("x")]).as_bulk(), None);
    let fd0 = fd_count(m.pid);
    let rss0 = rss_kb(m.pid);
    let started = Instant::now();
    let a = spawn_helper(&m.addr(), 10_000);
    let b = spawn_helper(&m.addr(), 10_000);
    let mut helpers = [wait_helper(a), wait_helper(b)];
    let served: usize = helpers.iter().map(|h| h.served).sum();
    let refused: usize = helpers.iter().map(|h| h.refused).sum();
    let other: usize = helpers.iter().map(|h| h.other).sum();
    eprintln!(
        "20000 connections in {:?}: served {served}, refused {refused}, other {other}; \
         mithril fds {} -> {}, RSS {rss0} kB -> {} kB",
        started.elapsed(),
        fd0,
        fd_count(m.pid),
        rss_kb(m.pid)
    );
    assert_eq!(other, 0, "every connection was served or refused");
    assert_eq!(served + refused, 20_000);
    // maxclients 10000, the probe holds one.
    assert!(served <= 9_999, "{served}");
    assert!(served >= 5_000, "{served}");
    // Each served connection holds one descriptor in mithril, no more.
    let held = fd_count(m.pid);
    assert!(held <= fd0 + served + 8, "{held} fds for {served} clients");
    assert!(held >= fd0 + served, "{held} fds for {served} clients");
    // Everyone else is still served meanwhile.
    assert_eq!(probe.cmd(&["GET", &tagged("x")]).as_bulk(), None);

    // Release them all: every descriptor and admission ticket comes back.
    for h in &mut helpers {
        drop(h.child.stdin.take());
    }
    for h in &mut helpers {
        for _ in h.rest.by_ref() {}
        assert!(h.child.wait().unwrap().success());
    }
    wait_until_explained(
        "the descriptors to be given back",
        Duration::from_secs(20),
        || {
            let n = fd_count(m.pid);
            if n == fd0 {
                Ok(())
            } else {
                Err(format!("{n} fds, {fd0} before"))
            }
        },
    );
    let info = probe.cmd(&["INFO", "clients"]);
    assert!(
        info.as_str().contains("connected_clients:1\r\n"),
        "{}",
        info.as_str()
    );
    assert_eq!(sessions(&mut probe).1.len(), 1);
    let mut again = m.conn();
    assert_eq!(again.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn clients_that_pipeline_big_gets_without_reading_hold_bounded_memory() {
    // Four clients each try to pipeline 2 million GETs of a 100 KB value
    // (200 GB of replies each) and never read. What mithril may hold for
    // each is set by the configuration: client-output-high-water (4mb by
    // default) in unsent output plus one window of replies in flight (at
    // most the larger of the high-water mark and 16 replies), plus one
    // read's worth of requests (256 KiB).
    let hw: u64 = 4 * 1024 * 1024;
    let (_cluster, m) = setup("threads 1\nloglevel notice");
    let mut probe = m.conn();
    let key = tagged("big");
    let value = vec![b'x'; 100 * 1024];
    assert_eq!(
        probe.cmd_bytes(&[b"SET", key.as_bytes(), &value]),
        Reply::Simple("OK".into())
    );
    assert_eq!(
        probe.cmd(&["GET", &key]).as_bulk().map(<[u8]>::len),
        Some(100 * 1024)
    );
    let rss0 = rss_kb(m.pid);
    const CLIENTS: usize = 4;
    const GETS: usize = 2_000_000;
    let one = encode_command(&[b"GET", key.as_bytes()]);
    let mut writers = Vec::new();
    let mut socks = Vec::new();
    for _ in 0..CLIENTS {
        let s = raw_with(&m, Some(4096));
        let mut w = s.try_clone().unwrap();
        socks.push(s);
        let one = one.clone();
        writers.push(std::thread::spawn(move || {
            // Written in slices of 10,000 requests until mithril stops
            // taking them (the write times out) or they are all out.
            w.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
            let slice: Vec<u8> = one.repeat(10_000);
            let mut sent = 0;
            while sent < GETS {
                if w.write_all(&slice).is_err() {
                    break;
                }
                sent += 10_000;
            }
            sent
        }));
    }
    // Sample mithril's RSS while the flood stands.
    let mut peak = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(6) {
        peak = peak.max(rss_kb(m.pid));
        std::thread::sleep(Duration::from_millis(50));
    }
    let sent: Vec<usize> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let (_, all) = sessions(&mut probe);
    let flooders: Vec<_> = all.iter().filter(|f| f["unsent"] > 0).collect();
    assert_eq!(flooders.len(), CLIENTS, "{all:?}");
    let reply = value.len() as u64 + 16;
    let per_session = hw + hw.max(16 * reply) + reply + 320 * 1024;
    for f in &flooders {
        assert_eq!(f["paused"], 1, "{f:?}");
        assert!(f["unsent"] + f["rbuf"] <= per_session, "{f:?}");
    }
    // RSS: each session's bound, twice over for buffers shared with
    // replies already sliced out of the backend's reads, and 16 MB for the
    // allocator and the backend connection.
    let ceiling_kb = (2 * CLIENTS as u64 * per_session) / 1024 + 16 * 1024;
    let grew = peak.saturating_sub(rss0);
    eprintln!(
        "flood: requests written {sent:?} (of {GETS} each); RSS {rss0} kB -> peak {peak} kB \
         (+{grew} kB, ceiling +{ceiling_kb} kB); per session {:?}",
        flooders
            .iter()
            .map(|f| (f["unsent"], f["rbuf"], f["outstanding"]))
            .collect::<Vec<_>>()
    );
    assert!(
        grew <= ceiling_kb,
        "RSS grew by {grew} kB, ceiling {ceiling_kb} kB"
    );
    // Not bounded by the flood: far fewer requests were taken than sent.
    assert!(sent.iter().all(|&n| n < GETS));
    // Others are served throughout.
    assert_eq!(probe.cmd(&["PING"]), Reply::Simple("PONG".into()));
    drop(socks);
    wait_until("the flooders to be gone", Duration::from_secs(20), || {
        (sessions(&mut probe).1.len() == 1).then_some(())
    });
    wait_until(
        "their bytes to be given back",
        Duration::from_secs(5),
        || (sessions(&mut probe).0["buffered"] < 64 * 1024).then_some(()),
    );
}
