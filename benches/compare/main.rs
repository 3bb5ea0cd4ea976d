//! `make bench`: mithril against a direct cluster connection, in one run.
//!
//! ```text
//!  3-master cluster (tests/support) <── redis-benchmark --cluster     "direct"
//!            ^
//!            └── mithril (release) <── redis-benchmark --threads M     "mithril"
//!
//!  (M = the masters: --cluster runs a client thread per master by itself)
//!
//!  floor.rs (a child: this executable) <── redis-benchmark --threads M  "floor"
//!  (GET workloads only: the cheapest server there is, a bound for mithril)
//!
//!  per workload: warm-up (sizes the runs) then ROUNDS x [direct, mithril]
//!  per run:      /proc CPU ticks of mithril and of the nodes, the nodes'
//!                error-reply count, before and after
//!
//!  then (tls.rs; TLS=0 leaves it out) the same for GET and SET over TLS
//!  on both sides, against a TLS cluster of its own, printed beside the
//!  plain ratios
//! ```
//!
//! Owns: the cluster (one at a time: the TLS table's comes after), the
//! mithril processes and every redis-benchmark child it starts (all
//! stopped before it returns; should it die, the support harness's
//! parent-death signal takes them down too), and one temp dir.
//! Invariants: direct and mithril runs of a workload alternate and use the
//! same request count; a run with errors contributes no figure and is
//! reported; the exit status is non-zero only for errors (a server that did
//! not start or died, a redis-benchmark run that failed), never for a figure.
//! Never: compare against a stored baseline, or judge a number.
//!
//! Settings come from the environment (see `Settings::from_env`); cargo's
//! own `--bench` argument is ignored.

#[path = "../../tests/support/mod.rs"]
mod support;

mod callgrind;
mod cpu;
mod floor;
mod rb;
mod tls;
mod vg;
mod zipf;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use rb::{Figures, RunSpec, Target, Test};
use support::{ClusterSpec, Conn, Mithril, RedisCluster, Reply};

/// Clients, value size and key space of every run (`-c`, `-d`, `-r`).
const CLIENTS: u32 = 50;
const DATA_SIZE: u32 = 32;
const KEYSPACE: u64 = 100_000;
/// Keys per MSET / MGET.
const MULTI_KEYS: usize = 10;
/// The key space of the GET run without locality (far larger than the
/// reply cache's budget).
const WIDE_KEYSPACE: u64 = 100_000_000;
/// The sides of a `SHARDING=1` run besides direct: mithril's `threads`
/// and `backend-sharding`.
const SHARDING_SIDES: &[(&str, u32, &str)] = &[
    ("t1-no", 1, "no"),
    ("t1-yes", 1, "yes"),
    ("t1-auto", 1, "auto"),
    ("t2-no", 2, "no"),
    ("t2-yes", 2, "yes"),
    ("t2-auto", 2, "auto"),
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Compare,
    Callgrind,
}

pub struct Settings {
    mode: Mode,
    rounds: usize,
    seconds: f64,
    /// Command names to run (`WORKLOADS=GET,SET`); empty means all.
    only: Vec<String>,
    mithril_bin: PathBuf,
    /// `threads` for mithril in compare mode; `None` keeps its default.
    threads: Option<u32>,
    callgrind_requests: u64,
    /// Requests per pipeline in callgrind mode (CALLGRIND_PIPELINE).
    callgrind_pipeline: u64,
    /// `CALLGRIND_CACHE=1`: mithril with `reply-cache yes`, reading 100
    /// keys (so nearly every GET is a hit): the instructions of a hit.
    callgrind_cache: bool,
    /// `CALLGRIND_SET=1`: the measured requests are SETs (a write's path,
    /// with the cache's hold and epoch when `CALLGRIND_CACHE=1`).
    callgrind_set: bool,
    /// `SHARDING=1`: GET and SET only, against direct, with threads 1 and
    /// 2 and each `backend-sharding` mode (SHARDING_SIDES).
    sharding: bool,
    /// `TLS=0` leaves out the TLS table (tls.rs), run by default after
    /// the plain ones (not with `SHARDING=1`).
    tls: bool,
    /// `TLS_CLUSTER=0`, for development: the TLS table's mithril reaches
    /// the nodes over plain TCP. The default is TLS on both sides.
    tls_cluster: bool,
}

fn env_parse<T: FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a valid value")),
        _ => Ok(default),
    }
}

impl Settings {
    /// `MODE` (compare | callgrind), `ROUNDS` (3), `BENCH_SECONDS` (6),
    /// `WORKLOADS` (all), `MITHRIL_BIN` (the release build cargo made),
    /// `MITHRIL_THREADS` (mithril's default), `CALLGRIND_REQUESTS` (20000),
    /// `TLS` (1), `TLS_CLUSTER` (1).
    fn from_env() -> Result<Settings, String> {
        let mode = match std::env::var("MODE").unwrap_or_default().trim() {
            "" | "compare" => Mode::Compare,
            "callgrind" => Mode::Callgrind,
            other => return Err(format!("MODE={other:?}: expected compare or callgrind")),
        };
        let rounds: usize = env_parse("ROUNDS", 3)?;
        let seconds: f64 = env_parse("BENCH_SECONDS", 6.0)?;
        if rounds == 0 || !(0.1..=3600.0).contains(&seconds) {
            return Err("ROUNDS must be >= 1 and BENCH_SECONDS within 0.1..3600".into());
        }
        let only = std::env::var("WORKLOADS")
            .unwrap_or_default()
            .split(',')
            .map(|w| w.trim().to_ascii_uppercase())
            .filter(|w| !w.is_empty())
            .collect();
        let bin = std::env::var_os("MITHRIL_BIN")
            .filter(|v| !v.is_empty())
            .map_or_else(
                || PathBuf::from(env!("CARGO_BIN_EXE_mithril")),
                PathBuf::from,
            );
        // Absolute, because the support harness starts mithril in a temp dir.
        let mithril_bin = std::fs::canonicalize(&bin)
            .map_err(|e| format!("no mithril binary at {} ({e})", bin.display()))?;
        let threads = match std::env::var("MITHRIL_THREADS") {
            Ok(v) if !v.trim().is_empty() => Some(
                v.trim()
                    .parse()
                    .map_err(|_| format!("MITHRIL_THREADS={v:?} is not a number"))?,
            ),
            _ => None,
        };
        let callgrind_requests = env_parse("CALLGRIND_REQUESTS", 20_000)?;
        if callgrind_requests == 0 {
            return Err("CALLGRIND_REQUESTS must be >= 1".into());
        }
        Ok(Settings {
            mode,
            rounds,
            seconds,
            only,
            mithril_bin,
            threads,
            callgrind_requests,
            callgrind_pipeline: env_parse("CALLGRIND_PIPELINE", 1)?.max(1),
            callgrind_cache: env_parse("CALLGRIND_CACHE", 0u8)? != 0,
            callgrind_set: env_parse("CALLGRIND_SET", 0u8)? != 0,
            sharding: env_parse("SHARDING", 0u8)? != 0,
            tls: env_parse("TLS", 1u8)? != 0,
            tls_cluster: env_parse("TLS_CLUSTER", 1u8)? != 0,
        })
    }
}

/// One row of the comparison: the same command at the same depth, sent
/// directly to the cluster and through mithril.
struct Workload {
    command: &'static str,
    pipeline: u32,
    /// `-r`: keys the run draws from.
    keyspace: u64,
    direct: Test,
    mithril: Test,
    /// Requests of each warm-up run, which sizes the measured runs.
    warmup_requests: u64,
}

impl Workload {
    fn label(&self) -> String {
        format!("{} -P {}", self.command, self.pipeline)
    }
}

/// `CMD key:<tag>__rand_int__ [value] ...` with `MULTI_KEYS` keys. `tag` is
/// `"{tag}:"` for the direct form: redis-benchmark `--cluster` replaces
/// `{tag}` with a hash tag of a slot the client's node owns, so all keys of
/// one command share a slot. Without it the keys land on random slots.
fn multi_key(cmd: &str, tag: &str, with_values: bool) -> Test {
    let value = "x".repeat(DATA_SIZE as usize);
    let mut words = vec![cmd.to_string()];
    for _ in 0..MULTI_KEYS {
        words.push(format!("key:{tag}__rand_int__"));
        if with_values {
            words.push(value.clone());
        }
    }
    Test::Custom(words)
}

/// SET before GET and MSET before MGET, so the reads mostly find keys.
fn workloads() -> Vec<Workload> {
    let mut w = Vec::new();
    for (command, builtin) in [("SET", "set"), ("GET", "get")] {
        for (pipeline, warmup_requests) in [(1, 20_000), (16, 200_000)] {
            w.push(Workload {
                command,
                pipeline,
                keyspace: KEYSPACE,
                direct: Test::Builtin(builtin),
                mithril: Test::Builtin(builtin),
                warmup_requests,
            });
        }
    }
    for (command, with_values) in [("MSET", true), ("MGET", false)] {
        w.push(Workload {
            command,
            pipeline: 1,
            keyspace: KEYSPACE,
            direct: multi_key(command, "{tag}:", with_values),
            mithril: multi_key(command, "", with_values),
            warmup_requests: 10_000,
        });
    }
    // GET without locality: a key space far larger than the cache.
    w.push(Workload {
        command: "GETWIDE",
        pipeline: 1,
        keyspace: WIDE_KEYSPACE,
        direct: Test::Builtin("get"),
        mithril: Test::Builtin("get"),
        warmup_requests: 20_000,
    });
    // 90% GET / 10% SET on Zipf-distributed keys (benches/compare/zipf.rs).
    w.push(Workload {
        command: "ZIPF",
        pipeline: 1,
        keyspace: KEYSPACE,
        direct: Test::Zipf { set_percent: 10 },
        mithril: Test::Zipf { set_percent: 10 },
        warmup_requests: 20_000,
    });
    w
}

#[derive(Clone, Copy, PartialEq)]
enum SideKind {
    Direct,
    Mithril,
    /// mithril with `reply-cache yes`.
    Cached,
    /// SHARDING_SIDES[i].
    Sharded(usize),
    /// floor.rs: a server that answers GET with a constant and does
    /// nothing else (GET workloads only).
    Floor,
}

impl SideKind {
    fn name(self) -> &'static str {
        match self {
            SideKind::Direct => "direct",
            SideKind::Mithril => "mithril",
            SideKind::Cached => "cached",
            SideKind::Sharded(i) => SHARDING_SIDES[i].0,
            SideKind::Floor => "floor",
        }
    }
}

/// What one clean run measured.
struct Sample {
    figures: Figures,
    requests: u64,
    mithril_ticks: Option<u64>,
    node_ticks: Option<u64>,
    /// redis-benchmark's own CPU.
    client_ticks: Option<u64>,
    /// The reply cache's hits and lookups during the run (cached side).
    cache: Option<(u64, u64)>,
    /// Frames and writes toward the nodes during the run, and the pipes'
    /// state after it (INFO pipes).
    frames: Option<(u64, u64)>,
    state: Option<String>,
    /// The machine's idle and stolen time during the run.
    machine: Option<cpu::Machine>,
}

/// One side (direct or mithril) of one workload.
#[derive(Default)]
struct Side {
    samples: Vec<Sample>,
    failed_runs: usize,
    total_runs: usize,
    errors: Vec<String>,
}

impl Side {
    fn median(&self, f: impl Fn(&Figures) -> f64) -> Option<f64> {
        let mut v: Vec<f64> = self.samples.iter().map(|s| f(&s.figures)).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => v.get(n / 2).copied(),
            _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    }

    /// Pooled CPU microseconds per request: all ticks of the clean runs over
    /// all their requests (ticks are 10 ms, so pooling beats a median).
    fn cpu_us_per_request(&self, ticks: impl Fn(&Sample) -> Option<u64>) -> Option<f64> {
        let mut total_ticks = 0u64;
        let mut total_requests = 0u64;
        for s in &self.samples {
            total_ticks += ticks(s)?;
            total_requests += s.requests;
        }
        (total_requests > 0)
            .then(|| total_ticks as f64 / cpu::ticks_per_sec() * 1e6 / total_requests as f64)
    }

    /// Frames per write toward the nodes over the clean runs.
    fn frames_per_write(&self) -> Option<f64> {
        let (mut f, mut w) = (0u64, 0u64);
        for s in &self.samples {
            let (a, b) = s.frames?;
            f += a;
            w += b;
        }
        (w > 0).then(|| f as f64 / w as f64)
    }

    /// The machine's idle and steal shares over the clean runs, pooled.
    fn machine(&self) -> Option<(f64, f64)> {
        let mut m = cpu::Machine::default();
        for s in &self.samples {
            m = m.add(s.machine?);
        }
        m.shares()
    }

    /// The pipes' state after each clean run, where it changed (auto).
    fn states(&self) -> String {
        let mut v: Vec<&str> = Vec::new();
        for s in &self.samples {
            if let Some(st) = s.state.as_deref() {
                if v.last() != Some(&st) {
                    v.push(st);
                }
            }
        }
        v.join(">")
    }

    /// The reply cache's hit ratio over the clean runs.
    fn hit_ratio(&self) -> Option<f64> {
        let (mut hits, mut lookups) = (0u64, 0u64);
        for s in &self.samples {
            let (h, l) = s.cache?;
            hits += h;
            lookups += l;
        }
        (lookups > 0).then(|| hits as f64 / lookups as f64)
    }

    /// Records one run (warm-ups included); only measured clean runs keep
    /// their sample.
    fn record(&mut self, sample: Option<Sample>, errors: Vec<String>, keep: bool) {
        self.total_runs += 1;
        match sample {
            Some(s) if keep => self.samples.push(s),
            Some(_) => {}
            None => {
                self.failed_runs += 1;
                push_unique(&mut self.errors, errors);
            }
        }
    }
}

/// A workload with both sides measured.
struct Measured {
    workload: Workload,
    requests: u64,
    sides: Vec<(SideKind, Side)>,
}

impl Measured {
    fn side(&self, kind: SideKind) -> Option<&Side> {
        self.sides.iter().find(|(k, _)| *k == kind).map(|(_, s)| s)
    }

    /// `kind`'s median req/s over `base`'s.
    fn ratio_to(&self, kind: SideKind, base: SideKind) -> Option<f64> {
        let d = self.side(base)?.median(|f| f.rps)?;
        let m = self.side(kind)?.median(|f| f.rps)?;
        (d > 0.0).then(|| m / d)
    }

    fn ratio(&self) -> Option<f64> {
        self.ratio_to(SideKind::Mithril, SideKind::Direct)
    }

    /// The columns of `shared_header` for side `i`: its medians, its CPU
    /// per request and the ceiling they allow, the machine's idle and
    /// steal, its clean runs (the workload and its request count on the
    /// first side's line only).
    fn shared_cells(&self, i: usize, rounds: usize) -> String {
        let (kind, s) = (self.sides[i].0, &self.sides[i].1);
        let (name, requests) = if i == 0 {
            (self.workload.label(), self.requests.to_string())
        } else {
            (String::new(), String::new())
        };
        let mithril_cpu = match kind {
            SideKind::Direct => None,
            _ => s.cpu_us_per_request(|x| x.mithril_ticks),
        };
        let nodes = s.cpu_us_per_request(|x| x.node_ticks);
        let client = s.cpu_us_per_request(|x| x.client_ticks);
        // The physical limit: every process shares the cores. (What the
        // hypervisor stole is shown beside it, not taken off: it varies
        // from run to run, and the rate is a median.)
        let ceiling = match (nodes, client) {
            (Some(n), Some(c)) => {
                let total = n + c + mithril_cpu.unwrap_or(0.0);
                (total > 0.0).then(|| cpu::nproc() as f64 * 1e6 / total)
            }
            _ => None,
        };
        let rps = s.median(|f| f.rps);
        let of_ceiling = match (rps, ceiling) {
            (Some(x), Some(c)) if c > 0.0 => Some(x / c),
            _ => None,
        };
        let machine = s.machine();
        format!(
            "{:<12} {:>9} {:<8} {:>11} {:>8} {:>8} {:>12} {:>10} {:>11} {:>9} {:>7} {:>5} {:>6} {:>6}",
            name,
            requests,
            kind.name(),
            fmt_opt(rps, 0),
            fmt_opt(s.median(|f| f.p50_ms), 3),
            fmt_opt(s.median(|f| f.p99_ms), 3),
            if kind == SideKind::Direct {
                "-".to_string()
            } else {
                fmt_opt(mithril_cpu, 2)
            },
            fmt_opt(nodes, 2),
            fmt_opt(client, 2),
            fmt_opt(ceiling, 0),
            fmt_opt(of_ceiling, 2),
            machine.map_or_else(|| "-".to_string(), |m| format!("{:.0}%", m.0)),
            machine.map_or_else(|| "-".to_string(), |m| format!("{:.0}%", m.1)),
            format!("{}/{rounds}", s.samples.len()),
        )
    }
}

/// The header of the columns every table starts with (`shared_cells`).
fn shared_header() -> String {
    format!(
        "{:<12} {:>9} {:<8} {:>11} {:>8} {:>8} {:>12} {:>10} {:>11} {:>9} {:>7} {:>5} {:>6} {:>6}",
        "workload",
        "requests",
        "side",
        "req/s",
        "p50 ms",
        "p99 ms",
        "mithril us/r",
        "nodes us/r",
        "client us/r",
        "ceiling",
        "of ceil",
        "idle",
        "steal",
        "clean",
    )
}

/// Everything a run needs to reach.
struct Bench<'a> {
    settings: &'a Settings,
    cluster: &'a RedisCluster,
    /// Every side but direct, with its mithril.
    proxies: &'a mut [(SideKind, Mithril)],
    /// The floor server (compare mode), its pid and port.
    floor: Option<(u32, u16)>,
    dir: &'a Path,
    /// The TLS table's runs (tls.rs): every side over TLS.
    tls: Option<tls::Targets>,
}

impl Bench<'_> {
    fn node_pids(&self) -> Vec<u32> {
        self.cluster.masters().iter().map(|n| n.pid).collect()
    }

    fn proxy(&mut self, side: SideKind) -> Option<&mut Mithril> {
        self.proxies
            .iter_mut()
            .find(|(k, _)| *k == side)
            .map(|(_, m)| m)
    }

    /// The sides of workload `w`: direct, every mithril, and the floor
    /// where its constant reply is the right answer (GET).
    fn sides(&self, w: &Workload) -> Vec<SideKind> {
        let floor = (self.floor.is_some() && w.command == "GET").then_some(SideKind::Floor);
        std::iter::once(SideKind::Direct)
            .chain(self.proxies.iter().map(|(k, _)| *k))
            .chain(floor)
            .collect()
    }

    /// The pid and port of the server a side talks to (none: direct).
    fn server(&self, side: SideKind) -> Option<(u32, u16)> {
        match side {
            SideKind::Floor => self.floor,
            _ => self
                .proxies
                .iter()
                .find(|(k, _)| *k == side)
                .map(|(_, m)| (m.pid, m.port)),
        }
    }

    fn spec(&self, w: &Workload, side: SideKind, requests: u64) -> RunSpec {
        let tls = self.tls.as_ref();
        let (target, test) = match self.server(side).map(|s| s.1) {
            None => (
                Target::Cluster {
                    port: self.cluster.masters().first().map_or(0, |n| {
                        if tls.is_some() {
                            n.peer_port()
                        } else {
                            n.port
                        }
                    }),
                },
                w.direct.clone(),
            ),
            Some(port) => (
                Target::Plain {
                    port: tls.map_or(port, |t| t.mithril_port),
                    // As many client threads as the direct side's
                    // `--cluster` run has (one per master).
                    threads: self.cluster.masters().len() as u32,
                },
                w.mithril.clone(),
            ),
        };
        RunSpec {
            target,
            clients: CLIENTS,
            requests,
            pipeline: w.pipeline,
            data_size: DATA_SIZE,
            keyspace: w.keyspace,
            test,
            tls_ca: tls.map(|t| t.ca.clone()),
        }
    }

    /// One run with its CPU and error accounting. `Err` for a fatal error
    /// (mithril or a node is gone).
    fn measure(
        &mut self,
        w: &Workload,
        side: SideKind,
        requests: u64,
        label: &str,
    ) -> Result<(Option<Sample>, Vec<String>), String> {
        let spec = self.spec(w, side, requests);
        let nodes = self.node_pids();
        let timeout = Duration::from_secs_f64((self.settings.seconds * 20.0).max(60.0));
        // The default side runs `backend-sharding auto` (the default) too:
        // its decision is reported per run as the sharding sides' are.
        let pipes = matches!(side, SideKind::Sharded(_) | SideKind::Mithril);
        let cached = side == SideKind::Cached;
        let pid = self.server(side).map(|s| s.0);
        let proxy = self.proxy(side).map(|m| &*m);
        let k0 = proxy.filter(|_| cached).and_then(cache_counts);
        let f0 = proxy.filter(|_| pipes).and_then(pipe_counts);
        let m0 = pid.and_then(cpu::cpu_ticks);
        let n0 = cpu::cpu_ticks_sum(&nodes);
        let e0 = node_error_replies(self.cluster)?;
        let c0 = cpu::reaped_children_ticks();
        let w0 = cpu::Machine::now();
        let out = rb::run(&spec, self.dir, timeout);
        let w1 = cpu::Machine::now();
        let c1 = cpu::reaped_children_ticks();
        let m1 = pid.and_then(cpu::cpu_ticks);
        let n1 = cpu::cpu_ticks_sum(&nodes);
        let e1 = node_error_replies(self.cluster)?;
        let (mut k1, mut f1) = (None, None);
        if let Some(proxy) = self.proxy(side) {
            k1 = if cached { cache_counts(proxy) } else { None };
            f1 = if pipes { pipe_counts(proxy) } else { None };
            if let Some(st) = proxy.exit_status() {
                return Err(format!(
                    "mithril exited ({st}) during {} {label}; its log:\n{}",
                    w.label(),
                    support::tail_file(&proxy.log_path, 30)
                ));
            }
        }
        let mut errors = out.errors;
        if e1 > e0 {
            errors.push(format!(
                "the cluster nodes sent {} error replies (INFO stats total_error_replies)",
                e1 - e0
            ));
        }
        let delta = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        let mithril_ticks = delta(m0, m1);
        let node_ticks = delta(n0, n1);
        let client_ticks = delta(Some(c0), Some(c1));
        let mut line = format!(
            "  {label:<9} {:<10} {:<8} n={:<9}",
            w.label(),
            side.name(),
            requests
        );
        let sample = match out.figures {
            Some(f) if errors.is_empty() => {
                line += &format!(
                    " {:>10.0} req/s  p50 {:>7.3} ms  p99 {:>7.3} ms  {:>5.1} s",
                    f.rps,
                    f.p50_ms,
                    f.p99_ms,
                    out.wall.as_secs_f64()
                );
                if side != SideKind::Direct {
                    if let Some(t) = mithril_ticks {
                        line += &format!(
                            "  {} cpu {:.2} s",
                            if side == SideKind::Floor {
                                "floor"
                            } else {
                                "mithril"
                            },
                            cpu::ticks_to_duration(t).as_secs_f64()
                        );
                    }
                }
                let machine = match (w0, w1) {
                    (Some(a), Some(b)) => Some(b.since(a)),
                    _ => None,
                };
                if let Some((idle, steal)) = machine.and_then(cpu::Machine::shares) {
                    line += &format!("  idle {idle:.0}% steal {steal:.0}%");
                }
                let cache = match (k0, k1) {
                    (Some((h0, l0)), Some((h1, l1))) => Some((h1 - h0, l1 - l0)),
                    _ => None,
                };
                if let Some((h, l)) = cache {
                    if l > 0 {
                        line += &format!("  hits {:.1}%", h as f64 * 100.0 / l as f64);
                    }
                }
                let frames = match (&f0, &f1) {
                    (Some(a), Some(b)) => Some((b.0 - a.0, b.1 - a.1)),
                    _ => None,
                };
                if let Some((fr, wr)) = frames {
                    if wr > 0 {
                        line += &format!("  {:.1} frames/write", fr as f64 / wr as f64);
                    }
                }
                let state = f1.as_ref().map(|x| x.2.clone());
                let auto = match side {
                    SideKind::Sharded(i) => SHARDING_SIDES[i].2 == "auto",
                    _ => f1.as_ref().is_some_and(|x| x.4),
                };
                if let (true, Some(st)) = (auto, &state) {
                    line += &format!("  pipes {st}");
                    // What auto measured: its last decision and each
                    // worker's last sample.
                    if let Some(detail) = f1.as_ref().map(|x| &x.3) {
                        line += &format!("\n            auto: {detail}");
                    }
                }
                Some(Sample {
                    figures: f,
                    requests,
                    mithril_ticks,
                    node_ticks,
                    client_ticks,
                    cache,
                    frames,
                    state,
                    machine,
                })
            }
            _ => {
                line += "  !!! ERRORS:";
                for e in &errors {
                    line += &format!("\n      !!! {e}");
                }
                None
            }
        };
        println!("{line}");
        let _ = std::io::stdout().flush();
        Ok((sample, errors))
    }

    /// Every key the reads name exists before the first run, whatever
    /// WORKLOADS runs before them: a GET of an absent key costs a node
    /// about half of a real one and is a nil the cache keeps, so
    /// `WORKLOADS=GET` alone measured other work. Sets each key about ten
    /// times, pipelined: directly, whose `--cluster` keys carry a hash tag
    /// of the client's node, and through the first proxy (plain keys; the
    /// proxies share the cluster).
    fn populate(&mut self) {
        let Some(set) = workloads().into_iter().find(|w| w.command == "SET") else {
            return;
        };
        let first = self.proxies.first().map(|(k, _)| *k);
        for side in std::iter::once(SideKind::Direct).chain(first) {
            let mut spec = self.spec(&set, side, 10 * KEYSPACE);
            spec.pipeline = 32;
            let out = rb::run(&spec, self.dir, Duration::from_secs(120));
            println!(
                "  key space: {} SETs at -P 32 on the {} side ({})",
                10 * KEYSPACE,
                side.name(),
                if out.errors.is_empty() {
                    "clean"
                } else {
                    "with errors"
                }
            );
        }
    }

    /// Reads of a key space the cache can hold: read every key about ten
    /// times first (pipelined, so it is quick), as a long-running proxy
    /// would have; the measured runs then see the steady hit ratio.
    fn warm_cache(&mut self, w: &Workload) {
        let reads = matches!(&w.mithril, Test::Builtin("get"))
            || matches!(&w.mithril, Test::Custom(words) if words.first().is_some_and(|c| c == "MGET"));
        if !reads || w.keyspace > KEYSPACE {
            return;
        }
        let mut spec = self.spec(w, SideKind::Cached, 10 * w.keyspace);
        spec.pipeline = 32;
        let out = rb::run(&spec, self.dir, Duration::from_secs(120));
        println!(
            "  cache warm-up: {} reads at -P 32 on the cached side ({})",
            10 * w.keyspace,
            if out.errors.is_empty() {
                "clean"
            } else {
                "with errors"
            }
        );
    }

    fn run_workload(&mut self, w: Workload) -> Result<Measured, String> {
        let rounds = self.settings.rounds;
        let tls = if self.tls.is_some() { "TLS " } else { "" };
        println!("\n== {tls}{} ==", w.label());
        let kinds = self.sides(&w);
        let mut sides: Vec<(SideKind, Side)> =
            kinds.iter().map(|k| (*k, Side::default())).collect();
        if kinds.contains(&SideKind::Cached) {
            self.warm_cache(&w);
        }
        // Warm-up: fills the key space, opens connections, and sizes the runs.
        let mut warm_rps = Vec::new();
        for (kind, side) in sides.iter_mut() {
            let (sample, errors) = self.measure(&w, *kind, w.warmup_requests, "warm-up")?;
            if let Some(s) = &sample {
                if !matches!(kind, SideKind::Cached | SideKind::Floor) {
                    warm_rps.push(s.figures.rps);
                }
            }
            side.record(sample, errors, false);
        }
        let requests = if warm_rps.is_empty() {
            w.warmup_requests
        } else {
            let mean = warm_rps.iter().sum::<f64>() / warm_rps.len() as f64;
            round_2sig(mean * self.settings.seconds).max(u64::from(CLIENTS * w.pipeline))
        };
        for kind in &kinds {
            let args = self.spec(&w, *kind, requests).args();
            let tool = match w.direct {
                Test::Zipf { .. } => "zipf",
                _ => "redis-benchmark",
            };
            println!("  {:<7} {tool} {}", kind.name(), args.join(" "));
        }
        for round in 1..=rounds {
            let label = format!("{round}/{rounds}");
            for (kind, side) in sides.iter_mut() {
                let (sample, errors) = self.measure(&w, *kind, requests, &label)?;
                side.record(sample, errors, true);
            }
        }
        Ok(Measured {
            workload: w,
            requests,
            sides,
        })
    }
}

/// Frames and writes toward the nodes so far, the pipes' state, what
/// `auto` last decided and measured (its decision in words, and each
/// worker's busy share: the time it ran plus the time it waited for a
/// core), and whether the mode is `auto`, from INFO pipes.
fn pipe_counts(m: &Mithril) -> Option<(u64, u64, String, String, bool)> {
    let mut c = Conn::try_connect(&m.addr()).ok()?;
    let text = match c.cmd(&["INFO", "pipes"]) {
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => return None,
    };
    let field = |name: &str| -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    };
    let state = format!(
        "{} ({} on pipes)",
        field("pipes_state")?,
        field("pipes_sessions")?
    );
    let workers: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let (name, v) = l.strip_prefix("pipes_")?.split_once(':')?;
            let w = name.strip_prefix("worker")?;
            let get = |k: &str| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                    .unwrap_or("?")
                    .trim()
                    .to_string()
            };
            Some(format!(
                "w{w} busy {} (ran {} + waited {}) {} f/w",
                get("busy"),
                get("ran"),
                get("waited"),
                get("frames_per_write")
            ))
        })
        .collect();
    let detail = format!(
        "{}; last sample: {}",
        field("pipes_last_decision")?,
        workers.join(", ")
    );
    Some((
        field("backend_frames")?.parse().ok()?,
        field("backend_writes")?.parse().ok()?,
        state,
        detail,
        field("backend_sharding")? == "auto",
    ))
}

/// The reply cache's (hits, lookups) so far, from INFO replycache.
fn cache_counts(m: &Mithril) -> Option<(u64, u64)> {
    let mut c = Conn::try_connect(&m.addr()).ok()?;
    let text = match c.cmd(&["INFO", "replycache"]) {
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => return None,
    };
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("reply_cache_hits")?, field("reply_cache_lookups")?))
}

fn push_unique(into: &mut Vec<String>, from: Vec<String>) {
    for e in from {
        if !into.contains(&e) {
            into.push(e);
        }
    }
}

/// `x` rounded to two significant digits (at least 1).
fn round_2sig(x: f64) -> u64 {
    if !x.is_finite() || x < 1.0 {
        return 1;
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 1).max(1.0);
    ((x / scale).round() * scale) as u64
}

/// A fresh `<temp>/mithril-bench-<pid>-<random>` for redis-benchmark's
/// output and callgrind files. Not the harness's `mithril-test-*` name: on
/// this shared machine other sessions clear those away while we run.
fn bench_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!(
        "mithril-bench-{}-{:08x}",
        std::process::id(),
        support::random_u64() as u32
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Sum of `total_error_replies` over the masters.
fn node_error_replies(cluster: &RedisCluster) -> Result<u64, String> {
    let mut sum = 0;
    for n in cluster.masters() {
        let mut c = Conn::try_connect(&n.addr())
            .map_err(|e| format!("cluster node {} does not answer: {e}", n.addr()))?;
        let text = match c.cmd(&["INFO", "stats"]) {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            other => return Err(format!("INFO stats on {}: {other:?}", n.addr())),
        };
        sum += text
            .lines()
            .find_map(|l| l.strip_prefix("total_error_replies:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(sum)
}

fn fmt_opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.decimals$}"))
}

fn print_table(results: &[Measured], settings: &Settings) {
    println!(
        "\n== results: medians of {} runs per side; -c {CLIENTS} -d {DATA_SIZE} -r {KEYSPACE} \
         (GETWIDE -r {WIDE_KEYSPACE}); CPU columns pool all clean runs ==",
        settings.rounds
    );
    println!(
        "{} {:>7} {:>8} {:>7}  {:<5}",
        shared_header(),
        "ratio",
        "hits",
        "f/write",
        "pipes"
    );
    for r in results {
        for (i, (kind, s)) in r.sides.iter().enumerate() {
            let ratio = match kind {
                SideKind::Direct => String::new(),
                k => fmt_opt(r.ratio_to(*k, SideKind::Direct), 2),
            };
            let hits = s
                .hit_ratio()
                .map_or_else(String::new, |h| format!("{:.1}%", h * 100.0));
            println!(
                "{} {:>7} {:>8} {:>7}  {}",
                r.shared_cells(i, settings.rounds),
                ratio,
                hits,
                fmt_opt(s.frames_per_write(), 1),
                match kind {
                    SideKind::Sharded(i) if SHARDING_SIDES[*i].2 == "auto" => s.states(),
                    // The default side's pipes (auto unless MITHRIL_CONF
                    // says otherwise; INFO says "local" or "shared" then).
                    SideKind::Mithril => s.states(),
                    _ => String::new(),
                },
            );
        }
    }
    println!(
        "(MSET/MGET: direct sends its {MULTI_KEYS} keys in one slot, the only form --cluster can \
         send; mithril's {MULTI_KEYS} keys are spread over slots. cached = a second mithril with \
         reply-cache yes; hits = its hit ratio over the measured runs. floor = \
         benches/compare/floor.rs, a server that answers every GET with a constant and does \
         nothing else (its CPU in the mithril column): what the kernel charges any server for the \
         client's side, so no proxy can cost less or go faster here. ZIPF = 90% GET / 10% SET \
         on Zipf(0.99) keys at -P 1 from benches/compare/zipf.rs, one client thread on both \
         sides. redis-benchmark has one client thread per master on both sides (--cluster \
         starts them itself; the mithril sides get --threads). us/r = CPU microseconds per \
         request, user+system: mithril and the nodes from /proc/PID/stat, the client \
         from getrusage of the reaped child. With every process on the same cores, req/s is \
         bounded by cores / (sum of the three us/r): the ceiling column, and the figure's \
         share of it. idle and steal = the \
         machine's idle CPU and the CPU taken by the hypervisor during the clean runs, from \
         /proc/stat: idle well above 0 means the figure was bound by latency, not CPU; steal \
         lowers the share of the ceiling a figure can reach. \
         SHARDING=1: tN-MODE = mithril with threads N and backend-sharding MODE; \
         f/write = frames per write on the connections to the nodes; pipes = auto's state after \
         each measured run (the default mithril side runs backend-sharding auto too); each run's \
         `auto:` line gives its last decision and each worker's last 100 ms sample: busy = the \
         share of the time it wanted a core, ran + waited runnable (schedstat's run delay).)"
    );
}

/// Prints every error loudly; returns how many runs failed.
/// `title` goes before each workload's name ("TLS ").
fn print_errors(results: &[Measured], title: &str) -> usize {
    let failed: usize = results
        .iter()
        .flat_map(|r| r.sides.iter().map(|(_, s)| s.failed_runs))
        .sum();
    if failed == 0 {
        return 0;
    }
    println!("\n!!!!!!!! ERRORS: {failed} run(s) failed; their figures are left out !!!!!!!!");
    for r in results {
        for (kind, s) in &r.sides {
            let name = kind.name();
            if s.failed_runs > 0 {
                println!(
                    "!!! {title}{} {name}: {} of {} run(s) failed (warm-up included):",
                    r.workload.label(),
                    s.failed_runs,
                    s.total_runs,
                );
                for e in &s.errors {
                    println!("!!!     {e}");
                }
            }
        }
    }
    failed
}

fn compare(settings: &Settings) -> Result<usize, String> {
    let load_before = cpu::loadavg();
    let dir = bench_dir()?;
    eprintln!("bench: starting a 3-master cluster...");
    let cluster = RedisCluster::start(ClusterSpec::default());
    let mut conf = String::from("loglevel notice\n");
    if let Some(t) = settings.threads {
        conf += &format!("threads {t}\n");
    }
    let mut proxies: Vec<(SideKind, Mithril)> = Vec::new();
    let start = |extra: &str| Mithril::start(&settings.mithril_bin, &cluster.seeds(), extra);
    if settings.sharding {
        for (i, (_, threads, mode)) in SHARDING_SIDES.iter().enumerate() {
            let extra = format!("loglevel notice\nthreads {threads}\nbackend-sharding {mode}\n");
            proxies.push((SideKind::Sharded(i), start(&extra)));
        }
    } else {
        proxies.push((SideKind::Mithril, start(&conf)));
        proxies.push((SideKind::Cached, start(&format!("{conf}reply-cache yes\n"))));
    }
    let threads = settings.threads.unwrap_or(cpu::nproc() as u32);
    let mut floor = if settings.sharding {
        None
    } else {
        Some(floor::start(threads)?)
    };
    println!(
        "cluster: {} masters on ports {}; mithril: {} (threads {})",
        cluster.masters().len(),
        cluster
            .masters()
            .iter()
            .map(|n| n.port.to_string())
            .collect::<Vec<_>>()
            .join(","),
        proxies
            .iter()
            .map(|(k, m)| format!("{} pid {} port {}", k.name(), m.pid, m.port))
            .collect::<Vec<_>>()
            .join(", "),
        settings
            .threads
            .map_or_else(|| "default: one per core".to_string(), |t| t.to_string()),
    );
    let mut results = Vec::new();
    {
        let mut bench = Bench {
            settings,
            cluster: &cluster,
            proxies: &mut proxies,
            floor: floor.as_ref().map(|(c, port)| (c.id(), *port)),
            dir: &dir,
            tls: None,
        };
        bench.populate();
        for w in workloads() {
            if !settings.only.is_empty() && !settings.only.iter().any(|o| o == w.command) {
                continue;
            }
            if settings.sharding && !matches!(w.command, "GET" | "SET") {
                continue;
            }
            results.push(bench.run_workload(w)?);
        }
    }
    for (_, m) in proxies.iter_mut() {
        m.stop();
    }
    if let Some((mut c, _)) = floor.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
    drop(cluster);
    print_table(&results, settings);
    let mut failed = print_errors(&results, "");

    // The TLS table, after the plain one is printed: a TLS side that
    // cannot start (a panic in the harness) costs only its own table.
    let mut tls_error = None;
    let mut tls_results = Vec::new();
    if settings.tls && !settings.sharding {
        let run =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tls::run(settings, &dir)));
        match run {
            Ok(Ok(r)) => tls_results = r,
            Ok(Err(e)) => tls_error = Some(e),
            Err(panic) => {
                tls_error = Some(
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "it panicked".into()),
                )
            }
        }
        tls::print_table(&tls_results, &results, settings);
        failed += print_errors(&tls_results, "TLS ");
        if let Some(e) = &tls_error {
            println!("\n!!!!!!!! the TLS table did not run to its end: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let load_after = cpu::loadavg();
    println!(
        "\nmachine: nproc {}; loadavg (1/5/15 min) before {load_before}, after {load_after}",
        cpu::nproc()
    );
    for r in &results {
        let fmt = |x: Option<f64>| x.map_or_else(|| "n/a".into(), |x| format!("{x:.2}"));
        if !settings.sharding {
            println!(
                "ratio {} {} {}",
                r.workload.command,
                r.workload.pipeline,
                fmt(r.ratio())
            );
        }
        // `ratio-SIDE COMMAND PIPELINE RATIO-TO-DIRECT`
        let to_direct = |kind: SideKind| {
            format!(
                "ratio-{} {} {} {}",
                kind.name(),
                r.workload.command,
                r.workload.pipeline,
                fmt(r.ratio_to(kind, SideKind::Direct))
            )
        };
        if settings.sharding {
            for (kind, _) in r.sides.iter().skip(1) {
                println!("{}", to_direct(*kind));
            }
            continue;
        }
        println!(
            "{} (to uncached {}; hits {})",
            to_direct(SideKind::Cached),
            fmt(r.ratio_to(SideKind::Cached, SideKind::Mithril)),
            r.side(SideKind::Cached)
                .and_then(Side::hit_ratio)
                .map_or_else(|| "n/a".into(), |h| format!("{:.1}%", h * 100.0))
        );
        if r.side(SideKind::Floor).is_some() {
            println!(
                "{} (cached to floor {})",
                to_direct(SideKind::Floor),
                fmt(r.ratio_to(SideKind::Cached, SideKind::Floor)),
            );
        }
    }
    tls::print_ratios(&tls_results, &results);
    match tls_error {
        Some(e) => Err(format!("the TLS table: {e}")),
        None => Ok(failed),
    }
}

fn main() -> ExitCode {
    // The bench's own load generator and floor server, run as children
    // (see zipf.rs and floor.rs).
    if let Ok(a) = std::env::var("MITHRIL_BENCH_ZIPF") {
        return zipf::run_child(&a);
    }
    if let Ok(a) = std::env::var("MITHRIL_BENCH_FLOOR") {
        return floor::run_child(&a);
    }
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::from(2);
        }
    };
    let version = match rb::version() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "mithril bench, mode {:?}: {version}; mithril {}; nproc {}; loadavg {}",
        settings.mode,
        settings.mithril_bin.display(),
        cpu::nproc(),
        cpu::loadavg()
    );
    let outcome = match settings.mode {
        Mode::Compare => {
            println!(
                "ROUNDS={} BENCH_SECONDS={} WORKLOADS={}",
                settings.rounds,
                settings.seconds,
                if settings.only.is_empty() {
                    "all".to_string()
                } else {
                    settings.only.join(",")
                }
            );
            compare(&settings)
        }
        Mode::Callgrind => callgrind::run(&settings).map(|()| 0),
    };
    match outcome {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("bench: {failed} run(s) had errors (reported above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
