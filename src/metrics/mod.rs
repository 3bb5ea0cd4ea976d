//! The metrics endpoints, served from a thread of their own (never from a
//! worker): `metrics-port` answers `GET /metrics` with the Prometheus text
//! format over a minimal HTTP/1.1 responder, and `stats-port` writes
//! twemproxy's stats JSON to every connection and closes it (what
//! `nutcracker -s` does, so `nc host 22222` works).
//!
//! ```text
//!  metrics thread: mio Poll ─┬─ metrics listener ─► conn: read head ─► 200 / 404 ─► close
//!                            └─ stats listener   ─► conn: write JSON ─► close
//!  both render from the workers' published snapshots (crate::stats::Hub)
//! ```
//!
//! Bounds: at most [`MAX_CONNS`] connections at once (more are closed at
//! accept), a request head of at most [`MAX_HEAD`] bytes (more gets 431),
//! and [`DEADLINE`] per connection from accept to close. One response per
//! connection (`Connection: close`).
//!
//! Who may ask: the ports listen on `metrics-bind` / `stats-bind`
//! (loopback unless configured), and, when `metrics-allow` lists
//! addresses or CIDR blocks, a connection from any other address is
//! closed at accept, unanswered. There is no password: what they show is
//! counters and the backends' addresses (see mithril.conf(5)).
//!
//! Never: block (every socket is non-blocking), read a worker's live
//! counters, or keep running after the proxy started shutting down.

pub mod prometheus;
pub mod twemproxy;

use crate::config::Config;
use crate::shared::Shared;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use slab::Slab;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections open at once.
pub const MAX_CONNS: usize = 64;
/// Longest request head accepted.
pub const MAX_HEAD: usize = 8192;
/// Longest a connection may stay open.
pub const DEADLINE: Duration = Duration::from_secs(5);

const METRICS: Token = Token(usize::MAX - 1);
const STATS: Token = Token(usize::MAX - 2);

/// The bound listeners (none, one or both).
pub struct Listeners {
    metrics: Option<TcpListener>,
    stats: Option<TcpListener>,
}

fn listen(what: &str, ip: &str, port: u16) -> Result<Option<TcpListener>, String> {
    if port == 0 {
        return Ok(None);
    }
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("{what}: '{ip}' is not an IP address"))?;
    let addr = SocketAddr::new(ip, port);
    let l = crate::upgrade::listen(addr, 128)
        .map_err(|e| format!("cannot listen on {addr} for {what}: {e}"))?;
    log::info!(target: "mithril::metrics", "{what} on {addr}");
    Ok(Some(l))
}

/// Bind the configured ports (before any worker starts, so a port in use
/// stops the start-up with a clear error).
pub fn bind(cfg: &Config) -> Result<Listeners, String> {
    Ok(Listeners {
        metrics: listen("metrics endpoint", &cfg.metrics_bind, cfg.metrics_port)?,
        stats: listen("twemproxy stats port", &cfg.stats_bind, cfg.stats_port)?,
    })
}

impl Listeners {
    /// Serve them from a new thread (no thread when both are off).
    pub fn spawn(self, shared: Arc<Shared>) -> io::Result<()> {
        if self.metrics.is_none() && self.stats.is_none() {
            return Ok(());
        }
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                if let Err(e) = serve(self, &shared) {
                    log::error!(target: "mithril::metrics", "metrics endpoints stopped: {e}");
                }
            })?;
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the request head (metrics port only).
    Head,
    /// Writing the response.
    Write,
    /// Response written and write side shut: read until EOF, then close
    /// (closing with unread input would reset the connection and could
    /// destroy the response on its way).
    Drain,
}

struct Conn {
    stream: TcpStream,
    phase: Phase,
    head: Vec<u8>,
    out: Vec<u8>,
    off: usize,
    deadline: Instant,
}

/// What to do with a connection after some I/O.
enum Next {
    Keep,
    Close,
}

fn serve(mut l: Listeners, shared: &Shared) -> io::Result<()> {
    let mut poll = Poll::new()?;
    if let Some(m) = l.metrics.as_mut() {
        poll.registry().register(m, METRICS, Interest::READABLE)?;
    }
    if let Some(s) = l.stats.as_mut() {
        poll.registry().register(s, STATS, Interest::READABLE)?;
    }
    let mut events = Events::with_capacity(64);
    let mut conns: Slab<Conn> = Slab::with_capacity(MAX_CONNS);
    loop {
        match poll.poll(&mut events, Some(Duration::from_millis(500))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if shared.shutting_down.load(Ordering::Acquire) {
            return Ok(());
        }
        let now = Instant::now();
        for ev in events.iter() {
            let token = ev.token();
            if token == METRICS || token == STATS {
                let listener = if token == METRICS {
                    l.metrics.as_ref()
                } else {
                    l.stats.as_ref()
                };
                let Some(listener) = listener else { continue };
                accept_all(listener, token == STATS, &poll, &mut conns, shared, now);
                continue;
            }
            let k = token.0;
            let next = match conns.get_mut(k) {
                Some(c) => progress(c, shared),
                None => continue,
            };
            if let Next::Close = next {
                close(&poll, &mut conns, k);
            }
        }
        let late: Vec<usize> = conns
            .iter()
            .filter(|(_, c)| now >= c.deadline)
            .map(|(k, _)| k)
            .collect();
        for k in late {
            close(&poll, &mut conns, k);
        }
    }
}

/// Whether `metrics-allow` lets `ip` in (an empty list lets everyone
/// that reaches the bound address in).
fn allowed(allow: &[String], ip: IpAddr) -> bool {
    allow.is_empty()
        || allow
            .iter()
            .filter_map(|w| crate::config::values::parse_cidr(w))
            .any(|net| crate::config::values::in_cidr(ip, net))
}

fn accept_all(
    listener: &TcpListener,
    stats_port: bool,
    poll: &Poll,
    conns: &mut Slab<Conn>,
    shared: &Shared,
    now: Instant,
) {
    loop {
        let (mut stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::debug!(target: "mithril::metrics", "accept failed: {e}");
                return;
            }
        };
        if conns.len() >= MAX_CONNS || !allowed(&shared.config.metrics_allow, peer.ip()) {
            continue; // dropped: closed at once
        }
        let entry = conns.vacant_entry();
        let k = entry.key();
        if poll
            .registry()
            .register(
                &mut stream,
                Token(k),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            continue;
        }
        let mut c = Conn {
            stream,
            phase: Phase::Head,
            head: Vec::new(),
            out: Vec::new(),
            off: 0,
            deadline: now + DEADLINE,
        };
        if stats_port {
            c.out = twemproxy::render(shared).into_bytes();
            c.phase = Phase::Write;
        }
        let next = progress(&mut c, shared);
        entry.insert(c);
        if let Next::Close = next {
            close(poll, conns, k);
        }
    }
}

fn close(poll: &Poll, conns: &mut Slab<Conn>, k: usize) {
    if let Some(mut c) = conns.try_remove(k) {
        let _ = poll.registry().deregister(&mut c.stream);
    }
}

/// Advance a connection as far as its socket allows.
fn progress(c: &mut Conn, shared: &Shared) -> Next {
    if c.phase == Phase::Head {
        let mut buf = [0u8; 2048];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    c.head.extend_from_slice(&buf[..n]);
                    if let Some(resp) = respond(&c.head, shared) {
                        c.out = resp;
                        c.phase = Phase::Write;
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
        }
    }
    if c.phase == Phase::Write {
        while c.off < c.out.len() {
            match c.stream.write(&c.out[c.off..]) {
                Ok(0) => return Next::Close,
                Ok(n) => c.off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
        }
        let _ = c.stream.shutdown(Shutdown::Write);
        c.phase = Phase::Drain;
        c.deadline = c.deadline.min(Instant::now() + Duration::from_secs(1));
    }
    let mut buf = [0u8; 2048];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return Next::Close,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Next::Close,
        }
    }
}

/// The response to a request head, once it is complete (`None`: not yet).
fn respond(head: &[u8], shared: &Shared) -> Option<Vec<u8>> {
    let end = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| head.windows(2).position(|w| w == b"\n\n"));
    if end.is_none() {
        if head.len() > MAX_HEAD {
            return Some(plain(
                431,
                "Request Header Fields Too Large",
                "head too large\n",
                false,
            ));
        }
        return None;
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    if (method == "GET" || head_only) && path == "/metrics" {
        let body = prometheus::render(shared);
        return Some(response(
            200,
            "OK",
            "text/plain; version=0.0.4; charset=utf-8",
            body.as_bytes(),
            head_only,
        ));
    }
    Some(plain(
        404,
        "Not Found",
        "not found; try GET /metrics\n",
        head_only,
    ))
}

fn plain(code: u16, reason: &str, body: &str, head_only: bool) -> Vec<u8> {
    response(
        code,
        reason,
        "text/plain; charset=utf-8",
        body.as_bytes(),
        head_only,
    )
}

fn response(code: u16, reason: &str, ctype: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}
