//! One `redis-benchmark` run: its command line, its process, its figures.
//!
//! ```text
//!  Run ──spawn──> redis-benchmark ... --csv   (stdout, stderr -> files)
//!      <─wait (deadline, then SIGKILL)─
//!      ──parse──> Figures { rps, p50, p99 }   or   errors
//! ```
//!
//! Owns: the redis-benchmark child of the current run (started with the
//! support harness's parent-death signal, reaped before `run` returns) and
//! the two output files it writes in the directory it is given.
//! Invariants: a run that exited non-zero, printed an error line, or gave no
//! CSV row has a non-empty `errors` and no figures are taken from it.
//! Never: decide anything from a number; that is the caller's business.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{poll_until, spawn_child};

/// Where the requests go.
#[derive(Clone, Debug)]
pub enum Target {
    /// `--cluster` against a node of the cluster (redis-benchmark reads the
    /// slot map and sends each request to the node that owns its key).
    Cluster { port: u16 },
    /// A single server (mithril) on 127.0.0.1, loaded from `threads`
    /// client threads (`--threads` when above 1). In `--cluster` mode
    /// redis-benchmark runs one thread per master on its own, so a side by
    /// side comparison gives the proxied side as many.
    Plain { port: u16, threads: u32 },
}

/// What one run does.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub target: Target,
    pub clients: u32,
    pub requests: u64,
    pub pipeline: u32,
    pub data_size: u32,
    pub keyspace: u64,
    /// `-t NAME` for a built-in test, or a custom command (with its args).
    pub test: Test,
    /// `--tls --cacert FILE`: TLS, the server checked against the CA in
    /// FILE (redis-benchmark and redis-cli only: zipf.rs speaks plain
    /// TCP). `None`: plain TCP.
    pub tls_ca: Option<String>,
}

#[derive(Clone, Debug)]
pub enum Test {
    Builtin(&'static str),
    Custom(Vec<String>),
    /// GET and SET on Zipf-distributed keys, `SET` this percent of the
    /// time, from the bench's own load generator (`zipf.rs`).
    Zipf {
        set_percent: u32,
    },
}

/// The figures redis-benchmark printed (latencies in milliseconds).
#[derive(Clone, Copy, Debug, Default)]
pub struct Figures {
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug)]
pub struct Outcome {
    /// `Some` only for a clean run.
    pub figures: Option<Figures>,
    /// Why the run is not clean (empty when it is).
    pub errors: Vec<String>,
    pub wall: Duration,
}

impl RunSpec {
    pub fn args(&self) -> Vec<String> {
        if let Test::Zipf { set_percent } = self.test {
            let (cluster, port) = match self.target {
                Target::Cluster { port } => (true, port),
                Target::Plain { port, .. } => (false, port),
            };
            // What zipf.rs parses: target, port, clients, requests, keys,
            // SET percent, value size.
            let a = format!(
                "{} {port} {} {} {} {set_percent} {}",
                if cluster { "cluster" } else { "plain" },
                self.clients,
                self.requests,
                self.keyspace,
                self.data_size
            );
            return a.split(' ').map(str::to_string).collect();
        }
        let mut a: Vec<String> = Vec::new();
        if let Some(ca) = &self.tls_ca {
            a.extend(["--tls".into(), "--cacert".into(), ca.clone()]);
        }
        let port = match self.target {
            Target::Cluster { port } => {
                a.push("--cluster".into());
                port
            }
            Target::Plain { port, threads } => {
                if threads > 1 {
                    a.push("--threads".into());
                    a.push(threads.to_string());
                }
                port
            }
        };
        a.extend([
            "-h".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ]);
        for (flag, v) in [
            ("-c", u64::from(self.clients)),
            ("-n", self.requests),
            ("-P", u64::from(self.pipeline)),
            ("-d", u64::from(self.data_size)),
            ("-r", self.keyspace),
        ] {
            a.push(flag.into());
            a.push(v.to_string());
        }
        a.push("--csv".into());
        match &self.test {
            Test::Builtin(name) => {
                a.push("-t".into());
                a.push((*name).into());
            }
            Test::Custom(words) => a.extend(words.iter().cloned()),
            Test::Zipf { .. } => {}
        }
        a
    }
}

/// Runs redis-benchmark once and waits at most `timeout` for it (then kills
/// it and reports the run as failed). Output goes to `dir/rb.out`, `dir/rb.err`.
pub fn run(spec: &RunSpec, dir: &Path, timeout: Duration) -> Outcome {
    let started = Instant::now();
    let mut errors = Vec::new();
    let out_path = dir.join("rb.out");
    let err_path = dir.join("rb.err");
    // Recreated each time: a directory in the shared temp dir can vanish.
    let files = std::fs::create_dir_all(dir)
        .and_then(|()| File::create(&out_path))
        .and_then(|o| Ok((o, File::create(&err_path)?)));
    let (out, err) = match files {
        Ok(f) => f,
        Err(e) => {
            return Outcome {
                figures: None,
                errors: vec![format!(
                    "cannot create output files in {}: {e}",
                    dir.display()
                )],
                wall: started.elapsed(),
            }
        }
    };
    let mut cmd = match spec.test {
        Test::Zipf { .. } if spec.tls_ca.is_some() => {
            return Outcome {
                figures: None,
                errors: vec!["zipf.rs speaks no TLS".into()],
                wall: started.elapsed(),
            }
        }
        // The bench's own executable, as the load generator.
        Test::Zipf { .. } => {
            let mut c = Command::new(std::env::current_exe().unwrap_or_default());
            c.env("MITHRIL_BENCH_ZIPF", spec.args().join(" "));
            c
        }
        _ => {
            let mut c = Command::new("redis-benchmark");
            c.args(spec.args());
            c
        }
    };
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let mut child = match spawn_child(cmd) {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                figures: None,
                errors: vec![format!("cannot run redis-benchmark: {e}")],
                wall: started.elapsed(),
            }
        }
    };
    let status = poll_until(timeout, || child.try_wait().ok().flatten());
    let wall = started.elapsed();
    match status {
        Some(st) if st.success() => {}
        Some(st) => errors.push(format!("redis-benchmark exited with {st}")),
        None => {
            // SIGKILL to our own child, then reap it.
            let _ = child.kill();
            let _ = child.wait();
            errors.push(format!(
                "redis-benchmark did not finish within {timeout:?} and was killed"
            ));
        }
    }
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    for line in stdout.lines().chain(stderr.lines()) {
        let lower = line.to_ascii_lowercase();
        if (lower.contains("error") || lower.contains("could not connect"))
            && !errors.iter().any(|e| e == line)
            && errors.len() < 8
        {
            errors.push(line.to_string());
        }
    }
    let figures = parse_csv(&stdout);
    if figures.is_none() {
        errors.push("redis-benchmark printed no CSV result row".into());
    }
    Outcome {
        figures: if errors.is_empty() { figures } else { None },
        errors,
        wall,
    }
}

/// The row after redis-benchmark's CSV header
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
/// "p95_latency_ms","p99_latency_ms","max_latency_ms"`. The test name of a
/// custom command is the command line itself, so fields are taken from the end.
pub fn parse_csv(stdout: &str) -> Option<Figures> {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("\"test\""));
    let header: Vec<&str> = lines.next()?.split(',').map(unquote).collect();
    let row = lines.find(|l| l.starts_with('"'))?;
    let fields: Vec<&str> = row.split(',').map(unquote).collect();
    // Align the row's last fields with the header's.
    let skip = fields.len().checked_sub(header.len() - 1)?;
    let value = |name: &str| -> Option<f64> {
        let i = header.iter().position(|h| *h == name)?;
        fields.get((skip + i).checked_sub(1)?)?.parse().ok()
    };
    Some(Figures {
        rps: value("rps")?,
        p50_ms: value("p50_latency_ms")?,
        p99_ms: value("p99_latency_ms")?,
    })
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches('"')
}

/// `redis-benchmark --version`, or why it cannot be run.
pub fn version() -> Result<String, String> {
    let out = Command::new("redis-benchmark")
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run redis-benchmark ({e}); it comes with redis-tools"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
