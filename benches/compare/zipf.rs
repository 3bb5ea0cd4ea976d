//! A small load generator for the mixed workload redis-benchmark cannot
//! send: GET and SET on Zipf-distributed keys, one request in flight per
//! client (`-P 1`), to mithril or directly to the cluster (each key to the
//! master owning its slot, as a cluster client does).
//!
//! Runs as a child process of the bench (the bench's own executable with
//! `MITHRIL_BENCH_ZIPF` set), so its CPU is counted like redis-benchmark's,
//! and prints redis-benchmark's CSV so the same parser reads it.
//!
//! Arguments (in `MITHRIL_BENCH_ZIPF`, space separated):
//! `cluster|plain PORT CLIENTS REQUESTS KEYS SET_PERCENT DATA_SIZE`.
//! Keys follow Zipf with exponent 0.99 over `zipf:0 .. zipf:KEYS-1`.

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use crate::support::key_slot;

struct Spec {
    cluster: bool,
    port: u16,
    clients: usize,
    requests: u64,
    keys: usize,
    set_percent: u64,
    data_size: usize,
}

fn parse(args: &str) -> Option<Spec> {
    let w: Vec<&str> = args.split_whitespace().collect();
    Some(Spec {
        cluster: *w.first()? == "cluster",
        port: w.get(1)?.parse().ok()?,
        clients: w.get(2)?.parse().ok()?,
        requests: w.get(3)?.parse().ok()?,
        keys: w.get(4)?.parse().ok()?,
        set_percent: w.get(5)?.parse().ok()?,
        data_size: w.get(6)?.parse().ok()?,
    })
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Cumulative Zipf(0.99) weights of ranks 1..=n, scaled to u64.
fn zipf_cdf(n: usize) -> Vec<u64> {
    let weights: Vec<f64> = (1..=n).map(|r| 1.0 / (r as f64).powf(0.99)).collect();
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    weights
        .iter()
        .map(|w| {
            acc += w / total;
            (acc.min(1.0) * u64::MAX as f64) as u64
        })
        .collect()
}

/// Slot → master port, from CLUSTER SLOTS of the node at `port`.
fn slot_map(port: u16) -> Vec<u16> {
    let mut c = crate::support::Conn::connect(&format!("127.0.0.1:{port}"));
    let mut map = vec![port; 16384];
    if let crate::support::Reply::Array(Some(ranges)) = c.cmd(&["CLUSTER", "SLOTS"]) {
        for r in ranges {
            let items = r.as_array();
            let (Some(lo), Some(hi), Some(node)) = (items.first(), items.get(1), items.get(2))
            else {
                continue;
            };
            let p = node.as_array().get(1).map_or(port, |p| p.as_int() as u16);
            for s in lo.as_int()..=hi.as_int() {
                map[s as usize] = p;
            }
        }
    }
    map
}

/// Whether `buf` starts with one complete reply (of the kinds GET and
/// SET get), and its length.
fn reply_len(buf: &[u8]) -> Option<usize> {
    let eol = buf.windows(2).position(|w| w == b"\r\n")?;
    match buf.first()? {
        b'$' => {
            let n: i64 = std::str::from_utf8(&buf[1..eol]).ok()?.parse().ok()?;
            if n < 0 {
                return Some(eol + 2);
            }
            let end = eol + 2 + n as usize + 2;
            (buf.len() >= end).then_some(end)
        }
        _ => Some(eol + 2),
    }
}

struct Client {
    conns: Vec<(u16, TcpStream)>,
    waiting: Option<(usize, Instant)>,
    rbuf: Vec<u8>,
}

/// Runs the load and prints the CSV; the exit status says whether it ran.
pub fn run_child(args: &str) -> std::process::ExitCode {
    let Some(spec) = parse(args) else {
        eprintln!("zipf: bad arguments {args:?}");
        return std::process::ExitCode::from(2);
    };
    let map = if spec.cluster {
        slot_map(spec.port)
    } else {
        vec![spec.port; 16384]
    };
    let mut ports: Vec<u16> = map.clone();
    ports.sort_unstable();
    ports.dedup();
    let cdf = zipf_cdf(spec.keys);
    let keys: Vec<String> = (0..spec.keys).map(|i| format!("zipf:{i}")).collect();
    let key_port: Vec<usize> = keys
        .iter()
        .map(|k| {
            let p = map[key_slot(k.as_bytes()) as usize];
            ports.iter().position(|x| *x == p).unwrap_or(0)
        })
        .collect();
    let value = "v".repeat(spec.data_size);
    let mut poll = Poll::new().expect("poll");
    let mut clients: Vec<Client> = Vec::with_capacity(spec.clients);
    for c in 0..spec.clients {
        let mut conns = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let addr: SocketAddr = format!("127.0.0.1:{p}").parse().expect("addr");
            let std = std::net::TcpStream::connect(addr).expect("connect");
            std.set_nodelay(true).ok();
            std.set_nonblocking(true).ok();
            let mut s = TcpStream::from_std(std);
            poll.registry()
                .register(&mut s, Token(c * 16 + i), Interest::READABLE)
                .expect("register");
            conns.push((*p, s));
        }
        clients.push(Client {
            conns,
            waiting: None,
            rbuf: Vec::with_capacity(4096),
        });
    }
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut lat_us: Vec<u32> = Vec::with_capacity(spec.requests as usize);
    let mut sent = 0u64;
    let mut frame = Vec::with_capacity(256);
    let mut send = |c: &mut Client, rng: &mut Rng, sent: &mut u64| {
        let r = rng.next();
        let rank = cdf.partition_point(|&x| x < r).min(keys.len() - 1);
        let key = &keys[rank];
        frame.clear();
        if rng.next() % 100 < spec.set_percent {
            frame.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                    key.len(),
                    value.len()
                )
                .as_bytes(),
            );
        } else {
            frame.extend_from_slice(
                format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).as_bytes(),
            );
        }
        let i = key_port[rank];
        c.conns[i].1.write_all(&frame).expect("write");
        c.waiting = Some((i, Instant::now()));
        *sent += 1;
    };
    let start = Instant::now();
    for c in clients.iter_mut() {
        if sent < spec.requests {
            send(c, &mut rng, &mut sent);
        }
    }
    let mut events = Events::with_capacity(1024);
    let mut buf = [0u8; 16384];
    while (lat_us.len() as u64) < spec.requests {
        poll.poll(&mut events, None).expect("poll");
        for ev in events.iter() {
            let (ci, ni) = (ev.token().0 / 16, ev.token().0 % 16);
            let c = &mut clients[ci];
            loop {
                match c.conns[ni].1.read(&mut buf) {
                    Ok(0) => {
                        eprintln!("zipf: connection closed by the server");
                        return std::process::ExitCode::FAILURE;
                    }
                    Ok(n) => c.rbuf.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        eprintln!("zipf: read error: {e}");
                        return std::process::ExitCode::FAILURE;
                    }
                }
            }
            while let Some(len) = reply_len(&c.rbuf) {
                if c.rbuf[0] == b'-' {
                    eprintln!(
                        "zipf: error reply {}",
                        String::from_utf8_lossy(&c.rbuf[..len]).trim_end()
                    );
                    return std::process::ExitCode::FAILURE;
                }
                c.rbuf.drain(..len);
                if let Some((_, t)) = c.waiting.take() {
                    lat_us.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                }
                if sent < spec.requests {
                    send(c, &mut rng, &mut sent);
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    lat_us.sort_unstable();
    let pct =
        |p: f64| lat_us[((lat_us.len() as f64 * p) as usize).min(lat_us.len() - 1)] as f64 / 1000.0;
    let avg = lat_us.iter().map(|&x| x as f64).sum::<f64>() / lat_us.len() as f64 / 1000.0;
    println!("\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"");
    println!(
        "\"ZIPF\",\"{:.2}\",\"{avg:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\"",
        lat_us.len() as f64 / secs,
        pct(0.0),
        pct(0.5),
        pct(0.95),
        pct(0.99),
        pct(1.0)
    );
    std::process::ExitCode::SUCCESS
}
