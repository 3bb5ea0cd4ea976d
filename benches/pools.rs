//! `make bench` (second part): a pool of three standalone redis-servers
//! behind mithril and behind nutcracker (twemproxy 0.5.0), the peer a
//! twemproxy user would otherwise run, in one run.
//!
//! ```text
//!  3 redis-servers (tests/support) <── nutcracker (ketama, fnv1a_64) <── redis-benchmark  "nutcracker"
//!          ^    ^    ^
//!          └────┴────┴──────────── mithril (release, same pool) <── redis-benchmark       "mithril"
//!
//!  per workload: a warm-up that sizes the runs, then ROUNDS x [nutcracker, mithril]
//!  per run:      /proc CPU ticks of the proxy, of the servers and of the client
//! ```
//!
//! Workloads: GET and SET at `-P 1` and `-P 16`, MGET of 10 keys, 50
//! clients, 32-byte values over 100,000 keys; mithril at its default
//! threads with the reply cache off (its default). Printed per workload:
//! the median requests/s of each side, the ratio, and CPU microseconds per
//! request of the proxy, the servers and the client, with the ceiling
//! those imply on this machine (cores / CPU per request).
//!
//! Owns the servers, both proxies and every redis-benchmark child (stopped
//! before it returns; the support harness's parent-death signal takes
//! them down should it die). Never judges a figure: the exit status is
//! non-zero only when something failed to run.
//!
//! Settings: ROUNDS (3), BENCH_SECONDS (5), WORKLOADS (all: GET,SET,MGET),
//! MITHRIL_BIN, MITHRIL_THREADS, MITHRIL_CONF (more configuration lines).

#[path = "../tests/support/mod.rs"]
mod support;

// Shared with `compare`, which uses more of them.
#[allow(dead_code)]
#[path = "compare/cpu.rs"]
mod cpu;
#[allow(dead_code)]
#[path = "compare/rb.rs"]
mod rb;

use std::process::ExitCode;
use std::time::Duration;

#[path = "pools/groups.rs"]
mod groups;

use rb::{RunSpec, Target, Test};
use support::{Mithril, NutPool, Nutcracker, StandaloneSet};

const CLIENTS: u32 = 50;
const DATA_SIZE: u32 = 32;
const KEYSPACE: u64 = 100_000;
const MULTI_KEYS: usize = 10;

struct Workload {
    label: String,
    command: &'static str,
    pipeline: u32,
    test: Test,
    warmup: u64,
}

fn workloads() -> Vec<Workload> {
    let mut w = Vec::new();
    for (command, builtin) in [("SET", "set"), ("GET", "get")] {
        for (pipeline, warmup) in [(1u32, 20_000u64), (16, 200_000)] {
            w.push(Workload {
                label: format!("{command} -P {pipeline}"),
                command,
                pipeline,
                test: Test::Builtin(builtin),
                warmup,
            });
        }
    }
    let mut words = vec!["MGET".to_string()];
    for _ in 0..MULTI_KEYS {
        words.push("key:__rand_int__".to_string());
    }
    w.push(Workload {
        label: "MGET x10 -P 1".to_string(),
        command: "MGET",
        pipeline: 1,
        test: Test::Custom(words),
        warmup: 10_000,
    });
    w
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// One clean run: req/s and the CPU ticks of proxy, servers and client.
struct Run {
    rps: f64,
    requests: u64,
    proxy: u64,
    servers: u64,
    client: u64,
    /// The machine's idle and stolen time during the run.
    machine: Option<cpu::Machine>,
}

fn run_once(
    port: u16,
    proxy_pid: u32,
    server_pids: &[u32],
    w: &Workload,
    requests: u64,
    dir: &std::path::Path,
) -> Result<Run, String> {
    let spec = RunSpec {
        target: Target::Plain { port, threads: 1 },
        clients: CLIENTS,
        requests,
        pipeline: w.pipeline,
        data_size: DATA_SIZE,
        keyspace: KEYSPACE,
        test: w.test.clone(),
        tls_ca: None,
    };
    let p0 = cpu::cpu_ticks(proxy_pid);
    let s0 = cpu::cpu_ticks_sum(server_pids);
    let c0 = cpu::reaped_children_ticks();
    let m0 = cpu::Machine::now();
    let out = rb::run(&spec, dir, Duration::from_secs(300));
    let machine = cpu::Machine::now().zip(m0).map(|(a, b)| a.since(b));
    let c1 = cpu::reaped_children_ticks();
    let (p1, s1) = (cpu::cpu_ticks(proxy_pid), cpu::cpu_ticks_sum(server_pids));
    let figures = out.figures.ok_or_else(|| out.errors.join("; "))?;
    Ok(Run {
        rps: figures.rps,
        requests,
        proxy: p1.zip(p0).map_or(0, |(a, b)| a.saturating_sub(b)),
        servers: s1.zip(s0).map_or(0, |(a, b)| a.saturating_sub(b)),
        client: c1.saturating_sub(c0),
        machine,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Pooled CPU microseconds per request of one column.
fn us_per_req(runs: &[Run], ticks: impl Fn(&Run) -> u64) -> f64 {
    let t: u64 = runs.iter().map(&ticks).sum();
    let r: u64 = runs.iter().map(|x| x.requests).sum();
    if r == 0 {
        return 0.0;
    }
    t as f64 / cpu::ticks_per_sec() * 1e6 / r as f64
}

/// One proxy under test: where clients connect, its PID, its servers'.
struct Side {
    port: u16,
    pid: u32,
    servers: Vec<u32>,
}

/// `w` through `a` and `b`, ROUNDS times each, interleaved, sized by a
/// warm-up through `a`; prints one row. False when a run failed.
fn side_by_side(
    w: &Workload,
    rounds: usize,
    seconds: f64,
    a: &Side,
    b: &Side,
    cores: usize,
    dir: &std::path::Path,
) -> bool {
    let warm = match run_once(a.port, a.pid, &a.servers, w, w.warmup, dir) {
        Ok(r) => r,
        Err(e) => {
            println!("{:<14} warm-up failed: {e}", w.label);
            return false;
        }
    };
    let requests = ((warm.rps * seconds) as u64).max(1000);
    let mut ok = true;
    let (mut n_runs, mut m_runs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (who, side) in [("a", a), ("b", b)] {
            match run_once(side.port, side.pid, &side.servers, w, requests, dir) {
                Ok(r) if who == "a" => n_runs.push(r),
                Ok(r) => m_runs.push(r),
                Err(e) => {
                    println!("{:<14} {who} run failed: {e}", w.label);
                    ok = false;
                }
            }
        }
    }
    let n = median(n_runs.iter().map(|r| r.rps).collect());
    let mm = median(m_runs.iter().map(|r| r.rps).collect());
    let cols = |runs: &[Run]| {
        (
            us_per_req(runs, |r| r.proxy),
            us_per_req(runs, |r| r.servers),
            us_per_req(runs, |r| r.client),
        )
    };
    let (np, ns, nc) = cols(&n_runs);
    let (mp, ms, mc) = cols(&m_runs);
    let ceiling = |p: f64, s: f64, c: f64| {
        let t = p + s + c;
        if t > 0.0 {
            cores as f64 * 1e6 / t
        } else {
            0.0
        }
    };
    let mut machine = cpu::Machine::default();
    for r in n_runs.iter().chain(&m_runs) {
        if let Some(x) = r.machine {
            machine = machine.add(x);
        }
    }
    let (idle, steal) = machine.shares().unwrap_or((0.0, 0.0));
    println!(
            "{:<14} {:>11.0} {:>11.0} {:>6.2}   {:>6.2}/{:>6.2}/{:>6.2}   {:>6.2}/{:>6.2}/{:>6.2}   {:>7.0}  {:>4.0}%/{:>3.0}%",
            w.label,
            n,
            mm,
            if n > 0.0 { mm / n } else { 0.0 },
            np,
            ns,
            nc,
            mp,
            ms,
            mc,
            ceiling(mp, ms, mc),
            idle,
            steal
        );
    ok
}

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--list") {
        return ExitCode::SUCCESS;
    }
    let rounds: usize = env("ROUNDS", 3).max(1);
    let seconds: f64 = env("BENCH_SECONDS", 5.0);
    let only: Vec<String> = std::env::var("WORKLOADS")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_uppercase())
        .filter(|s| !s.is_empty())
        .collect();
    let bin = std::env::var_os("MITHRIL_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_mithril")));
    let bin = match std::fs::canonicalize(&bin) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("no mithril binary at {} ({e})", bin.display());
            return ExitCode::FAILURE;
        }
    };
    let set = StandaloneSet::start(3);
    let servers: Vec<String> = (0..3)
        .map(|i| format!("127.0.0.1:{}:1 server{i}", set.port(i)))
        .collect();
    let nut = Nutcracker::start(
        &NutPool {
            hash: Some("fnv1a_64".into()),
            distribution: Some("ketama".into()),
            servers: servers.clone(),
            ..Default::default()
        }
        .body(),
    );
    let port = support::free_port();
    let mut conf = format!("port {port}\npool bench listen 127.0.0.1:{port}\nloglevel notice\n");
    if let Ok(t) = std::env::var("MITHRIL_THREADS") {
        conf.push_str(&format!("threads {t}\n"));
    }
    // MITHRIL_CONF: more lines for mithril's configuration, `\n`
    // separated (e.g. `backend-sharding yes`), to compare settings.
    if let Ok(more) = std::env::var("MITHRIL_CONF") {
        conf.push_str(&more.replace("\\n", "\n"));
        conf.push('\n');
    }
    for s in &servers {
        conf.push_str(&format!("pool bench server {s}\n"));
    }
    let m = Mithril::start(&bin, &[], &conf);
    let server_pids: Vec<u32> = set.servers.iter().map(|s| s.pid).collect();
    let dir = support::make_temp_dir();
    let cores = cpu::nproc();
    println!(
        "pools: 3 standalone redis-servers, nutcracker 0.5.0 vs mithril ({}), {rounds} rounds of ~{seconds} s, load {}",
        bin.display(),
        cpu::loadavg()
    );
    println!(
        "{:<14} {:>11} {:>11} {:>6}   {:>22}   {:>22}   {:>7}  {:>9}",
        "workload",
        "nutcracker",
        "mithril",
        "ratio",
        "nutcracker us/req p/s/c",
        "mithril us/req p/s/c",
        "ceiling",
        "idle/steal"
    );
    let mut failed = false;
    let nut_side = Side {
        port: nut.port,
        pid: nut.pid,
        servers: server_pids.clone(),
    };
    let m_side = Side {
        port: m.port,
        pid: m.pid,
        servers: server_pids.clone(),
    };
    for w in workloads() {
        if !only.is_empty() && !only.iter().any(|o| o == w.command) {
            continue;
        }
        failed |= !side_by_side(&w, rounds, seconds, &nut_side, &m_side, cores, &dir);
    }
    println!("us/req p/s/c: CPU microseconds per request of the proxy, the servers and redis-benchmark; ceiling: mithril's req/s bound on {cores} cores at that CPU; idle/steal: the machine's during the runs");
    drop((m, nut, set));
    if std::env::var("GROUPS").map_or(true, |v| v != "0") {
        failed |= !groups::section(&bin, &only, rounds, seconds, cores, &dir);
    }
    support::remove_temp_dir(&dir);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
