//! Issue 9, what an unauthenticated or hostile client can cost: brute-force
//! AUTH from one client does not slow the others, and a client that has not
//! authenticated cannot make the proxy buffer more than a small request
//! (Redis's pre-auth bounds: at most 10 arguments, bulks of at most 16384
//! bytes).

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const PASSWORD: &str = "the-right-password";

fn start(cluster: &RedisCluster) -> Mithril {
    Mithril::start_locked(
        bin(),
        &cluster.seeds(),
        // The caps on failed AUTH (issue 30) off: what is measured here
        // is the cost of answering a flood, not the caps.
        &format!(
            "requirepass {PASSWORD}\nthreads 2\nauth-max-failures 0\nauth-failures-per-source 0\n"
        ),
    )
}

fn authed(m: &Mithril) -> Conn {
    let mut c = m.conn();
    assert_eq!(c.cmd(&["AUTH", PASSWORD]), Reply::Simple("OK".into()));
    c
}

/// Round-trip times of `n` GETs, sorted.
fn latencies(c: &mut Conn, n: usize) -> Vec<Duration> {
    let mut out: Vec<Duration> = (0..n)
        .map(|i| {
            let key = format!("lat:{}", i % 16);
            let t = Instant::now();
            let r = c.cmd(&["GET", &key]);
            assert!(!r.is_error(), "{r:?}");
            t.elapsed()
        })
        .collect();
    out.sort();
    out
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[test]
fn brute_force_auth_does_not_slow_other_clients() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = start(&cluster);
    let mut victim = authed(&m);
    let _ = latencies(&mut victim, 200); // warm the connections up
    let before = latencies(&mut victim, 1000);

    // The attacker pipelines wrong passwords as fast as the proxy answers,
    // on two connections, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let tries = Arc::new(AtomicU64::new(0));
    let attackers: Vec<_> = (0..2)
        .map(|t| {
            let (stop, tries) = (stop.clone(), tries.clone());
            let mut c = m.conn();
            std::thread::spawn(move || {
                let batch: Vec<Vec<Vec<u8>>> = (0..256)
                    .map(|i| {
                        vec![
                            b"AUTH".to_vec(),
                            format!("guess-{t}-{i}-{}", "x".repeat(i % 64)).into_bytes(),
                        ]
                    })
                    .collect();
                while !stop.load(Ordering::Relaxed) {
                    for r in c.pipeline(&batch) {
                        assert_eq!(
                            r,
                            Reply::Error(
                                "WRONGPASS invalid username-password pair or user is disabled."
                                    .into()
                            )
                        );
                    }
                    tries.fetch_add(batch.len() as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Let the attack get going, then measure the victim under it.
    wait_until("the attack to start", Duration::from_secs(10), || {
        (tries.load(Ordering::Relaxed) >= 2048).then_some(())
    });
    let during = latencies(&mut victim, 1000);
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.join().unwrap();
    }
    let attempts = tries.load(Ordering::Relaxed);
    let (b50, b99) = (pct(&before, 0.5), pct(&before, 0.99));
    let (d50, d99) = (pct(&during, 0.5), pct(&during, 0.99));
    println!(
        "{attempts} wrong passwords; victim GET p50 {b50:?} -> {d50:?}, p99 {b99:?} -> {d99:?}"
    );
    // Generous bounds: the machine is shared and has two cores, and the
    // attacker's own load is real work; what must not happen is the victim
    // waiting behind the attacker's queue (hundreds of ms) or a lock-out.
    assert!(
        d50 <= (b50 * 20).max(Duration::from_millis(20)),
        "median {b50:?} -> {d50:?}"
    );
    assert!(
        d99 <= (b99 * 20).max(Duration::from_millis(100)),
        "p99 {b99:?} -> {d99:?}"
    );
    // Every attempt was counted, and the right password still works.
    let mut c = authed(&m);
    let text = c.cmd(&["INFO", "stats"]).as_str().to_string();
    let counted: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("acl_access_denied_auth:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(counted, attempts);
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn unauthenticated_clients_cannot_make_the_proxy_buffer_much() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = start(&cluster);

    // A bulk announced beyond 16384 bytes, or more than 10 arguments,
    // before AUTH: Redis's error, and the connection is closed before any
    // of it is buffered.
    for (header, error) in [
        (
            "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10000000\r\n".to_string(),
            "-ERR Protocol error: unauthenticated bulk length\r\n",
        ),
        (
            "*2\r\n$4\r\nAUTH\r\n$16385\r\n".to_string(),
            "-ERR Protocol error: unauthenticated bulk length\r\n",
        ),
        (
            "*11\r\n".to_string(),
            "-ERR Protocol error: unauthenticated multibulk length\r\n",
        ),
        (
            "*1000\r\n".to_string(),
            "-ERR Protocol error: unauthenticated multibulk length\r\n",
        ),
    ] {
        let mut c = m.conn();
        c.write_raw(header.as_bytes()).unwrap();
        let got = c.read_raw_until_closed(Duration::from_secs(10));
        assert_eq!(String::from_utf8_lossy(&got), error, "{header:?}");
    }

    // Now many clients at once, each announcing a 10 MB value and
    // streaming 1 MB of it as fast as it can: the proxy stops reading each
    // at the header, so its memory barely moves.
    let pid = m.pid;
    let base = rss_kb(pid);
    let clients = 64;
    let chunk = vec![b'x'; 64 * 1024];
    let mut socks: Vec<TcpStream> = Vec::new();
    for _ in 0..clients {
        let mut s = TcpStream::connect(m.addr()).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10000000\r\n");
        socks.push(s);
    }
    for s in &mut socks {
        for _ in 0..16 {
            // Refused and closed by the proxy: writes soon fail.
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
    }
    let grown = rss_kb(pid).saturating_sub(base);
    println!("{clients} clients x 1 MB announced-10 MB bulks: RSS +{grown} kB");
    // Without the bound each would hold its megabyte (64 MB); allow 8 MB
    // for everything else that moves in a live process.
    assert!(grown < 8 * 1024, "RSS grew by {grown} kB");
    drop(socks);

    // Under the bound, a half-sent request is held, but only that: 64
    // clients each with 15 kB of an unfinished 16 kB AUTH.
    let base = rss_kb(pid);
    let mut held: Vec<Conn> = Vec::new();
    for _ in 0..clients {
        let mut c = m.conn();
        c.write_raw(b"*2\r\n$4\r\nAUTH\r\n$16384\r\n").unwrap();
        c.write_raw(&vec![b'p'; 15 * 1024]).unwrap();
        held.push(c);
    }
    // Every one of them is still connected and still served once it ends
    // its request.
    let mut last = held.pop().unwrap();
    last.write_raw(&vec![b'p'; 1024]).unwrap();
    last.write_raw(b"\r\n").unwrap();
    assert_eq!(
        last.read_reply(),
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    let grown = rss_kb(pid).saturating_sub(base);
    println!("{clients} clients x 15 kB unfinished AUTH: RSS +{grown} kB");
    assert!(grown < 8 * 1024, "RSS grew by {grown} kB");

    // The bounds are for the unauthenticated only.
    let mut c = authed(&m);
    let big = vec![b'v'; 100_000];
    assert_eq!(
        c.cmd_bytes(&[b"SET", b"big", &big]),
        Reply::Simple("OK".into())
    );
    assert_eq!(c.cmd(&["STRLEN", "big"]), Reply::Int(100_000));
}
