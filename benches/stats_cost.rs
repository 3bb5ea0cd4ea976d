//! What statistics cost (issue 8): the same release binary twice, one with
//! `stats yes` (the default) and one with `stats no`, in one run.
//!
//! ```text
//!  3-master cluster, keys prefilled
//!   ├── mithril A: stats yes ◄─┐  redis-benchmark -t get -P 16 -c 50,
//!   └── mithril B: stats no  ◄─┘  A and B alternated (ABBA...), ROUNDS times
//!  per run: requests/s, and mithril's CPU time per request (/proc/PID/stat)
//!
//!  MODE=callgrind: each of A and B alone under valgrind (threads 1),
//!  20,000 GETs from one client at -P 1 and at -P 16, minus an idle run of
//!  the same length: instructions per GET with and without statistics.
//! ```
//!
//! Prints figures and ratios; never fails on a number (only on errors).
//! Settings: ROUNDS (7), REQUESTS (400000 per run), MITHRIL_THREADS (1),
//! PARALLEL (1: load the sides at the same time instead of in turn),
//! CALLGRIND_REQUESTS (20000), CALLGRIND_CLIENTS (1), MODE, MITHRIL_BIN,
//! BASELINE_BIN (a build without statistics, measured as a third side).

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "compare/cpu.rs"]
#[allow(dead_code)]
mod cpu;
#[path = "compare/rb.rs"]
#[allow(dead_code)]
mod rb;
#[path = "compare/vg.rs"]
mod vg;

use rb::{RunSpec, Target, Test};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use support::{ClusterSpec, Mithril, RedisCluster};
use vg::{prefill, stop_and_read, wrapper_script};

const KEYSPACE: u64 = 100_000;
const DATA_SIZE: u32 = 32;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("!!! stats_cost: {e}");
            ExitCode::FAILURE
        }
    }
}

fn mithril_bin() -> PathBuf {
    std::env::var_os("MITHRIL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/mithril"))
}

fn run() -> Result<(), String> {
    let bin = mithril_bin();
    if !bin.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release` first",
            bin.display()
        ));
    }
    println!("{}", rb::version()?);
    let dir = std::env::temp_dir().join(format!("mithril-stats-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    eprintln!("stats_cost: starting a 3-master cluster...");
    let cluster = RedisCluster::start(ClusterSpec::default());
    prefill(&cluster, KEYSPACE, DATA_SIZE)?;
    let mode = std::env::var("MODE").unwrap_or_default();
    if mode.trim() == "callgrind" {
        return callgrind(&cluster, &bin, &dir);
    }
    throughput(&cluster, &bin, &dir)
}

fn throughput(cluster: &RedisCluster, bin: &Path, dir: &Path) -> Result<(), String> {
    let rounds = env_num("ROUNDS", 7) as usize;
    let requests = env_num("REQUESTS", 400_000);
    let threads = env_num("MITHRIL_THREADS", 1);
    let conf = |stats: &str| format!("threads {threads}\nloglevel notice\n{stats}");
    // (label, process): stats on, stats off, and with BASELINE_BIN a build
    // without statistics at all.
    let mut sides: Vec<(&str, Mithril)> = vec![
        (
            "on",
            Mithril::start(bin, &cluster.seeds(), &conf("stats yes\n")),
        ),
        (
            "off",
            Mithril::start(bin, &cluster.seeds(), &conf("stats no\n")),
        ),
    ];
    if let Some(b) = std::env::var_os("BASELINE_BIN") {
        sides.push((
            "base",
            Mithril::start(Path::new(&b), &cluster.seeds(), &conf("")),
        ));
    }
    let spec = |port: u16| RunSpec {
        target: Target::Plain { port, threads: 1 },
        clients: 50,
        requests,
        pipeline: 16,
        data_size: DATA_SIZE,
        keyspace: KEYSPACE,
        test: Test::Builtin("get"),
        tls_ca: None,
    };
    println!(
        "GET -P 16 -c 50, {requests} requests per run, {rounds} rounds, mithril threads {threads}; \
         load before: {}",
        cpu::loadavg()
    );
    // Warm every side up (connections, buffers, page cache of the binary).
    for (_, m) in &sides {
        let mut s = spec(m.port);
        s.requests = requests / 4;
        let o = rb::run(&s, dir, Duration::from_secs(300));
        if !o.errors.is_empty() {
            return Err(o.errors.join("; "));
        }
    }
    let n = sides.len();
    let mut rps: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut cpu_us: Vec<Vec<f64>> = vec![Vec::new(); n];
    // PARALLEL=1: every side is loaded at the same time (one
    // redis-benchmark each), so they share whatever else the machine does
    // in that moment; their CPU per request is then compared like for like.
    let parallel = env_num("PARALLEL", 0) == 1;
    println!(
        "round  side  req/s      mithril us/req{}",
        if parallel {
            "   (sides loaded together)"
        } else {
            ""
        }
    );
    for r in 0..rounds {
        if parallel {
            let t0: Vec<u64> = sides
                .iter()
                .map(|(_, m)| cpu_ns(m.pid).unwrap_or(0))
                .collect();
            let outcomes: Vec<rb::Outcome> = std::thread::scope(|sc| {
                let handles: Vec<_> = sides
                    .iter()
                    .enumerate()
                    .map(|(i, (_, m))| {
                        let d = dir.join(format!("side{i}"));
                        let sp = spec(m.port);
                        sc.spawn(move || rb::run(&sp, &d, Duration::from_secs(600)))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("bench thread"))
                    .collect()
            });
            for (i, o) in outcomes.into_iter().enumerate() {
                let t1 = cpu_ns(sides[i].1.pid).ok_or("cannot read mithril's CPU time")?;
                let Some(f) = o.figures else {
                    return Err(format!("run failed: {}", o.errors.join("; ")));
                };
                let us = (t1 - t0[i]) as f64 / 1e3 / requests as f64;
                println!("{r:>5}  {:<4}  {:>9.0}  {us:.3}", sides[i].0, f.rps);
                rps[i].push(f.rps);
                cpu_us[i].push(us);
            }
            continue;
        }
        // Rotate the order so no side always runs first.
        for k in 0..n {
            let i = (r + k) % n;
            let (label, m) = &sides[i];
            let t0 = cpu_ns(m.pid).ok_or("cannot read mithril's CPU time")?;
            let o = rb::run(&spec(m.port), dir, Duration::from_secs(600));
            let t1 = cpu_ns(m.pid).ok_or("cannot read mithril's CPU time")?;
            let Some(f) = o.figures else {
                return Err(format!("run failed: {}", o.errors.join("; ")));
            };
            let us = (t1 - t0) as f64 / 1e3 / requests as f64;
            println!("{r:>5}  {label:<4}  {:>9.0}  {us:.3}", f.rps);
            rps[i].push(f.rps);
            cpu_us[i].push(us);
        }
    }
    // Paired: each round's on/off (and on/base) ratio, runs adjacent in
    // time, so slow drifts of the machine's load cancel out.
    let paired = |a: usize, b: usize, v: &[Vec<f64>]| {
        let mut r: Vec<f64> = v[a].iter().zip(&v[b]).map(|(x, y)| x / y).collect();
        median(&mut r)
    };
    // The spread of the per-round ratios (first and third quartile).
    let quartiles = |a: usize, b: usize, v: &[Vec<f64>]| {
        let mut r: Vec<f64> = v[a].iter().zip(&v[b]).map(|(x, y)| x / y).collect();
        r.sort_by(|x, y| x.total_cmp(y));
        let q = |f: f64| r.get(((r.len() - 1) as f64 * f).round() as usize).copied();
        (q(0.25).unwrap_or(f64::NAN), q(0.75).unwrap_or(f64::NAN))
    };
    let spread = (quartiles(0, 1, &rps), quartiles(0, 1, &cpu_us));
    let pr_off = (paired(0, 1, &rps), paired(0, 1, &cpu_us));
    let pr_base = (n == 3).then(|| (paired(0, 2, &rps), paired(0, 2, &cpu_us)));
    let med: Vec<(f64, f64)> = (0..n)
        .map(|i| (median(&mut rps[i]), median(&mut cpu_us[i])))
        .collect();
    println!();
    for (i, (label, _)) in sides.iter().enumerate() {
        println!(
            "median {label:<4}  {:>9.0} req/s  {:.3} us/req of mithril CPU",
            med[i].0, med[i].1
        );
    }
    let (on, off) = (med[0], med[1]);
    println!(
        "statistics (on vs off): throughput {:+.2} %, CPU per request {:+.2} %",
        (on.0 / off.0 - 1.0) * 100.0,
        (on.1 / off.1 - 1.0) * 100.0
    );
    println!(
        "  median of per-round ratios: throughput {:+.2} % (IQR {:+.2} .. {:+.2}), \
         CPU per request {:+.2} % (IQR {:+.2} .. {:+.2})",
        (pr_off.0 - 1.0) * 100.0,
        (spread.0 .0 - 1.0) * 100.0,
        (spread.0 .1 - 1.0) * 100.0,
        (pr_off.1 - 1.0) * 100.0,
        (spread.1 .0 - 1.0) * 100.0,
        (spread.1 .1 - 1.0) * 100.0
    );
    if let Some(p) = pr_base {
        println!(
            "  on vs baseline, median of per-round ratios: throughput {:+.2} %, CPU per request {:+.2} %",
            (p.0 - 1.0) * 100.0,
            (p.1 - 1.0) * 100.0
        );
    }
    if n == 3 {
        let base = med[2];
        println!(
            "against the baseline build: on {:+.2} % req/s, {:+.2} % CPU; off {:+.2} % req/s, {:+.2} % CPU",
            (on.0 / base.0 - 1.0) * 100.0,
            (on.1 / base.1 - 1.0) * 100.0,
            (off.0 / base.0 - 1.0) * 100.0,
            (off.1 / base.1 - 1.0) * 100.0
        );
    }
    println!("load after: {}  (nproc {})", cpu::loadavg(), cpu::nproc());
    Ok(())
}

/// CPU time of every thread of `pid` in nanoseconds, from the scheduler's
/// own accounting (`/proc/PID/task/*/schedstat`, first field): exact, where
/// `/proc/PID/stat` counts 10 ms ticks.
fn cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = t.ok()?.path().join("schedstat");
        let text = std::fs::read_to_string(path).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Instructions per GET with statistics on and off, under callgrind.
fn callgrind(cluster: &RedisCluster, bin: &Path, dir: &Path) -> Result<(), String> {
    let requests = env_num("CALLGRIND_REQUESTS", 20_000);
    let clients = env_num("CALLGRIND_CLIENTS", 1) as u32;
    println!("callgrind: {requests} GETs from {clients} client(s), mithril threads 1");
    // BASELINE_BIN: also measure a build without statistics at all (an
    // older commit), to see what the `stats no` switch itself leaves.
    let baseline = std::env::var_os("BASELINE_BIN").map(PathBuf::from);
    let mut sides = vec!["yes", "no"];
    if baseline.is_some() {
        sides.push("base");
    }
    let mut table = Vec::new();
    for pipeline in [1u32, 16] {
        for &stats in &sides {
            let (bin, conf) = match (stats, &baseline) {
                ("base", Some(b)) => (b.as_path(), "threads 1\nloglevel notice\n".to_string()),
                // Under valgrind every request takes milliseconds: keep the
                // slow log's check but not its entries.
                _ => (
                    bin,
                    format!(
                        "threads 1\nloglevel notice\nstats {stats}\n\
                         slowlog-log-slower-than 100000000\n"
                    ),
                ),
            };
            let tag = format!("p{pipeline}-{stats}");
            let run_out = dir.join(format!("callgrind.{tag}.run.out"));
            let script = wrapper_script(dir, &format!("{tag}-run"), bin, &run_out)?;
            let mut m = Mithril::start(&script, &cluster.seeds(), &conf);
            let spec = RunSpec {
                target: Target::Plain {
                    port: m.port,
                    threads: 1,
                },
                clients,
                requests,
                pipeline,
                data_size: DATA_SIZE,
                keyspace: KEYSPACE,
                test: Test::Builtin("get"),
                tls_ca: None,
            };
            let o = rb::run(&spec, dir, Duration::from_secs(900));
            let length = o.wall;
            let run_ir = stop_and_read(&mut m, &run_out)?;
            if !o.errors.is_empty() {
                return Err(o.errors.join("; "));
            }
            let idle_out = dir.join(format!("callgrind.{tag}.idle.out"));
            let script = wrapper_script(dir, &format!("{tag}-idle"), bin, &idle_out)?;
            let mut m = Mithril::start(&script, &cluster.seeds(), &conf);
            std::thread::sleep(length);
            let idle_ir = stop_and_read(&mut m, &idle_out)?;
            let per = run_ir.saturating_sub(idle_ir) as f64 / requests as f64;
            println!(
                "-P {pipeline:<2} stats {stats:<3}: {run_ir} Ir run, {idle_ir} Ir idle ({:.1} s): {per:.0} Ir/GET",
                length.as_secs_f64()
            );
            table.push((pipeline, stats, per));
        }
    }
    println!();
    for pipeline in [1u32, 16] {
        let get = |s: &str| {
            table
                .iter()
                .find(|t| t.0 == pipeline && t.1 == s)
                .map(|t| t.2)
                .unwrap_or(f64::NAN)
        };
        let (on, off) = (get("yes"), get("no"));
        println!(
            "ir_per_get -P {pipeline}: stats on {on:.0}, off {off:.0}, statistics {:+.0} Ir ({:+.2} %)",
            on - off,
            (on / off - 1.0) * 100.0
        );
        if baseline.is_some() {
            let base = get("base");
            println!(
                "ir_per_get -P {pipeline}: baseline build {base:.0}: stats off {:+.0} Ir, stats on {:+.0} Ir ({:+.2} %)",
                off - base,
                on - base,
                (on / base - 1.0) * 100.0
            );
        }
    }
    println!("callgrind files in {}", dir.display());
    Ok(())
}
