//! Helpers for the `hostile_*` tests: starting mithril with its test hooks,
//! looking at its sessions through `MITHRIL-TEST SESSIONS`, and raw sockets
//! for clients that misbehave (its process figures from /proc come from
//! `tests/support`).
//!
//! Owns nothing but what it creates per call. Never: talk to anything but
//! 127.0.0.1, or read another process's /proc entries than the mithril it
//! is given.

#![allow(dead_code)]

use crate::support::*;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Once;
use std::time::{Duration, Instant};

/// Makes every mithril this test binary starts accept the test-only
/// commands (a debug build reads `MITHRIL_TEST_HOOKS=1` at start). Set once,
/// before the first mithril is spawned; the children inherit it.
pub fn enable_hooks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var("MITHRIL_TEST_HOOKS", "1"));
}

/// A 3-master cluster and mithril in front of it, with the test hooks on.
pub fn setup(extra: &str) -> (RedisCluster, Mithril) {
    enable_hooks();
    cluster_and_mithril(extra)
}

/// Like `setup`, for a mithril with `requirepass` (ready once PING gets
/// NOAUTH: see `Mithril::start_locked`).
pub fn setup_with_password(extra: &str) -> (RedisCluster, Mithril) {
    enable_hooks();
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start_locked(bin(), &cluster.seeds(), extra);
    (cluster, m)
}

/// One line of `MITHRIL-TEST SESSIONS`, as numbers by name.
pub type Fields = HashMap<String, u64>;

fn fields(line: &str) -> Fields {
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// The worker header (`buffered`, `used_memory`, `obuf_closes`, ...) and
/// one entry per session of the worker `probe` is on.
pub fn sessions(probe: &mut Conn) -> (Fields, Vec<Fields>) {
    let r = probe.cmd(&["MITHRIL-TEST", "SESSIONS"]);
    let lines: Vec<String> = r
        .as_array()
        .iter()
        .map(|l| l.as_str().to_string())
        .collect();
    let header = lines.first().map(|l| fields(l)).unwrap_or_default();
    (header, lines.iter().skip(1).map(|l| fields(l)).collect())
}

/// The entry of client `id`, if that session is open.
pub fn session(probe: &mut Conn, id: u64) -> Option<Fields> {
    sessions(probe)
        .1
        .into_iter()
        .find(|f| f.get("id") == Some(&id))
}

pub fn client_id(c: &mut Conn) -> u64 {
    c.cmd(&["CLIENT", "ID"]).as_int() as u64
}

/// A raw client connection (no RESP parsing on its own) for clients that
/// misbehave. With `rcvbuf`, its receive buffer is set before connecting,
/// so the kernel holds little of what the proxy sends a client that does
/// not read. (Set after connecting, a buffer smaller than a segment makes
/// the sender fall back to zero-window probes: minutes per megabyte.)
pub fn raw_with(m: &Mithril, rcvbuf: Option<usize>) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let addr: std::net::SocketAddr = m.addr().parse().unwrap();
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    if let Some(n) = rcvbuf {
        sock.set_recv_buffer_size(n).unwrap();
    }
    sock.connect(&addr.into())
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let s: TcpStream = sock.into();
    s.set_nodelay(true).ok();
    s
}

pub fn raw(m: &Mithril) -> TcpStream {
    raw_with(m, None)
}

/// A RESP client over a raw socket (see `raw_with`), parsing replies with
/// the test support's own parser.
pub struct RawClient {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    pub fn new(s: TcpStream) -> RawClient {
        RawClient { s, buf: Vec::new() }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        self.s.write_all(&encode_command(args)).unwrap();
    }

    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
        self.send(&a);
        self.read_reply()
    }

    pub fn read_reply(&mut self) -> Reply {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some((r, used)) = parse_reply(&self.buf).unwrap() {
                self.buf.drain(..used);
                return r;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no reply within 20 s");
            self.s.set_read_timeout(Some(left)).ok();
            match self.s.read(&mut chunk) {
                Ok(0) => panic!("connection closed while waiting for a reply"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut
                        || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }
}

/// Writes as much of `data` as the peer takes within `patience` (the
/// socket is switched to non-blocking). Returns the bytes written and
/// whether the peer closed or reset the connection.
pub fn write_while_taken(s: &mut TcpStream, data: &[u8], patience: Duration) -> (usize, bool) {
    s.set_nonblocking(true).ok();
    let deadline = Instant::now() + patience;
    let mut done = 0;
    let mut idle_since = Instant::now();
    while done < data.len() && Instant::now() < deadline {
        match s.write(&data[done..]) {
            Ok(0) => return (done, true),
            Ok(n) => {
                done += n;
                idle_since = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // The peer stopped taking bytes for a while: it is done.
                if idle_since.elapsed() > Duration::from_millis(500) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return (done, true),
        }
    }
    s.set_nonblocking(false).ok();
    (done, false)
}

/// Reads until the peer closes (or `timeout` passes); returns the bytes and
/// whether it closed.
pub fn read_until_closed(s: &mut TcpStream, timeout: Duration) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (out, false);
        }
        s.set_read_timeout(Some(left.min(Duration::from_millis(200))))
            .ok();
        match s.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return (out, true),
        }
    }
}

/// Reads exactly `n` bytes (or panics after `timeout`).
pub fn read_exact_within(s: &mut TcpStream, n: usize, timeout: Duration) -> Vec<u8> {
    let deadline = Instant::now() + timeout;
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "read {got} of {n} bytes before the deadline"
        );
        s.set_read_timeout(Some(left)).ok();
        match s.read(&mut out[got..]) {
            Ok(0) => panic!("connection closed after {got} of {n} bytes"),
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(e) => panic!("read failed after {got} of {n} bytes: {e}"),
        }
    }
    out
}

/// `n` copies of a RESP command, as one buffer.
pub fn repeat_cmd(args: &[&[u8]], n: usize) -> Vec<u8> {
    let one = encode_command(args);
    let mut out = Vec::with_capacity(one.len() * n);
    for _ in 0..n {
        out.extend_from_slice(&one);
    }
    out
}

/// The same key on the same node for every test: a hash tag.
pub fn tagged(name: &str) -> String {
    format!("{{hostile}}{name}")
}
