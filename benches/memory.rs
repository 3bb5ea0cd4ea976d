//! The memory benchmark (issue 5): mithril's resident size with many idle
//! clients, and under clients that pipeline big GETs without reading.
//! Figures only; it never fails on a number (`make bench-memory`, or
//! `cargo bench --bench memory`; `MITHRIL_BIN` picks another binary).
//!
//! 1. Idle clients: RSS before and after 10,000 (`IDLE_CLIENTS`) clients
//!    connect and stay silent; then after each sent one PING (which gives
//!    the session a read buffer) and again once the idle sweep gave those
//!    buffers back. Per connection = growth / clients. Kernel socket
//!    buffers are not in RSS.
//! 2. The flood: `FLOOD_CLIENTS` (4) clients each try to pipeline 2,000,000
//!    GETs of a 100 KB value (200 GB of replies each) and never read, for
//!    `FLOOD_SECONDS` (20). Peak RSS against what the configuration allows
//!    per session (client-output-high-water, the reply window, one read),
//!    at the default high-water mark and at 1mb.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::*;

fn rss_kb(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Waits until RSS has not moved by more than 64 kB for half a second.
fn settled_rss(pid: u32) -> u64 {
    let mut last = rss_kb(pid);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = rss_kb(pid);
        if now.abs_diff(last) <= 64 || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

fn idle_clients(bin: &std::path::Path, cluster: &RedisCluster, n: usize) {
    let m = Mithril::start(
        bin,
        &cluster.seeds(),
        "loglevel warning\nmaxclients 100000\ntcp-backlog 4096",
    );
    let mut warm = m.conn();
    assert_eq!(warm.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let base = settled_rss(m.pid);
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        match TcpStream::connect(m.addr()) {
            Ok(s) => conns.push(s),
            Err(e) => {
                println!("idle: connect failed after {} clients: {e}", conns.len());
                break;
            }
        }
    }
    // The last one answers once every earlier one has been taken in.
    let mut last = m.conn();
    assert_eq!(last.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let silent = settled_rss(m.pid);
    for s in &mut conns {
        let _ = s.write_all(b"PING\r\n");
    }
    let mut buf = [0u8; 7];
    for s in &mut conns {
        use std::io::Read;
        let _ = s.read_exact(&mut buf);
    }
    let pinged = rss_kb(m.pid);
    // The sweep gives idle sessions' buffers back after 2 s.
    std::thread::sleep(Duration::from_secs(4));
    let swept = settled_rss(m.pid);
    let k = conns.len() as f64;
    let per = |rss: u64| (rss.saturating_sub(base) as f64) * 1024.0 / k;
    println!("idle clients: {} connections", conns.len());
    println!("  RSS baseline                {base:>8} kB");
    println!(
        "  connected, silent           {silent:>8} kB   {:>7.0} bytes per connection",
        per(silent)
    );
    println!(
        "  after one PING each         {pinged:>8} kB   {:>7.0} bytes per connection",
        per(pinged)
    );
    println!(
        "  idle 4 s later (swept)      {swept:>8} kB   {:>7.0} bytes per connection",
        per(swept)
    );
    println!(
        "  target: under 10 KB per idle connection: {}",
        if per(silent).max(per(swept)) < 10_240.0 {
            "met"
        } else {
            "NOT met"
        }
    );
}

fn flood(bin: &std::path::Path, cluster: &RedisCluster, hw_conf: &str, hw: u64) {
    let clients = env_usize("FLOOD_CLIENTS", 4);
    let seconds = env_usize("FLOOD_SECONDS", 20) as u64;
    let gets = 2_000_000usize;
    let m = Mithril::start(
        bin,
        &cluster.seeds(),
        &format!("loglevel warning\n{hw_conf}"),
    );
    let mut c = m.conn();
    let key = "{bench}big";
    let value = vec![b'x'; 100 * 1024];
    assert_eq!(
        c.cmd_bytes(&[b"SET", key.as_bytes(), &value]),
        Reply::Simple("OK".into())
    );
    let base = settled_rss(m.pid);
    let one = encode_command(&[b"GET", key.as_bytes()]);
    let slice: Vec<u8> = one.repeat(10_000);
    let stop_at = Instant::now() + Duration::from_secs(seconds);
    let mut writers = Vec::new();
    let mut socks = Vec::new();
    for _ in 0..clients {
        let s = TcpStream::connect(m.addr()).unwrap();
        let mut w = s.try_clone().unwrap();
        socks.push(s);
        let slice = slice.clone();
        let one_len = one.len();
        writers.push(std::thread::spawn(move || {
            w.set_write_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut sent = 0usize;
            while sent < gets && Instant::now() < stop_at {
                match w.write(&slice) {
                    Ok(n) => sent += n,
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
            sent / one_len
        }));
    }
    let mut peak = 0;
    while Instant::now() < stop_at {
        peak = peak.max(rss_kb(m.pid));
        std::thread::sleep(Duration::from_millis(50));
    }
    let taken: Vec<usize> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let still = rss_kb(m.pid);
    // PING still answered by a client that reads.
    let t = Instant::now();
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let ping = t.elapsed();
    drop(socks);
    let reply = value.len() as u64 + 16;
    let per_session = hw + hw.max(16 * reply) + reply + 320 * 1024;
    let grew = peak.saturating_sub(base);
    println!(
        "flood ({hw_conf}): {clients} clients x {gets} GETs of 100 KB, not reading, {seconds} s"
    );
    println!("  requests written per client  {taken:?} (the rest never left the client)");
    println!("  RSS baseline {base} kB, peak {peak} kB (+{grew} kB), at the end {still} kB");
    println!(
        "  configured bound per session {} kB, x {clients} = {} kB; growth / bound = {:.2}",
        per_session / 1024,
        per_session * clients as u64 / 1024,
        grew as f64 * 1024.0 / (per_session * clients as u64) as f64
    );
    println!("  a reading client's PING during the flood: {ping:?}");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let bin = std::env::var_os("MITHRIL_BIN")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_mithril")),
            PathBuf::from,
        );
    let bin = std::fs::canonicalize(&bin).expect("the mithril binary");
    let limit = raise_fd_limit();
    let idle = env_usize("IDLE_CLIENTS", 10_000).min(limit.saturating_sub(200) as usize);
    println!("mithril memory benchmark ({})", bin.display());
    let cluster = RedisCluster::start(ClusterSpec::default());
    idle_clients(&bin, &cluster, idle);
    flood(
        &bin,
        &cluster,
        "# default client-output-high-water 4mb",
        4 << 20,
    );
    flood(&bin, &cluster, "client-output-high-water 1mb", 1 << 20);
}
