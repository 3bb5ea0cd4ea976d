//! `make bench MODE=callgrind`: mithril's instructions per request, a figure
//! that machine noise does not move.
//!
//! ```text
//!  prefill the key space directly on the nodes (so every GET hits)
//!  run:      valgrind --tool=callgrind mithril (threads 1), settled for S
//!            <── redis-benchmark -c 1 -P 1 -n N -t get   (takes T seconds)
//!            stop (SIGTERM) -> Ir_run
//!  baseline: the same mithril under callgrind, idle for S + T seconds
//!            stop -> Ir_idle
//!  Ir/request = (Ir_run - Ir_idle) / N
//! ```
//!
//! Both runs pay the same start-up (config, topology discovery, thread
//! start), the same ready check, timers and topology refreshes over the same
//! length of time, and the same shutdown; the difference is what the
//! requests cost. The settling time S lets the first ticks run before the
//! first request (with `reply-cache yes`, the cache turns on at a worker's
//! first tick: a GET before it is forwarded, not looked up, and how many
//! of those a run had varied with start-up's timing under valgrind). Ir
//! counts user-space instructions only (valgrind does not see the kernel),
//! so syscall cost is not in it.
//!
//! Owns: its cluster, two mithril-under-valgrind processes (one at a time),
//! their wrapper scripts and callgrind output files in one temp dir, which
//! is kept (its path is printed) so `callgrind_annotate` can be rerun.
//! Never: report a figure from a run that had errors or whose callgrind file
//! is missing.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::rb::{self, RunSpec, Target, Test};
use crate::support::{ClusterSpec, Mithril, RedisCluster};
use crate::vg::{prefill, stop_and_read, wrapper_script};
use crate::{Settings, DATA_SIZE, KEYSPACE};

/// How long mithril runs before the first request (see the module doc):
/// several ticks (100 ms each) and the trackers' connections, under
/// valgrind.
const SETTLE: Duration = Duration::from_secs(2);

/// Functions listed from `callgrind_annotate`.
const TOP_FUNCTIONS: usize = 15;

pub fn run(settings: &Settings) -> Result<(), String> {
    let valgrind = Command::new("valgrind")
        .arg("--version")
        .output()
        .map_err(|e| {
            format!("cannot run valgrind ({e}); install it (apt-get install -y valgrind)")
        })?;
    let requests = settings.callgrind_requests;
    println!(
        "{}; {requests} GETs at -P {} from one client; mithril threads 1",
        String::from_utf8_lossy(&valgrind.stdout).trim(),
        settings.callgrind_pipeline
    );
    let dir = crate::bench_dir()?;
    eprintln!("bench: starting a 3-master cluster...");
    let cluster = RedisCluster::start(ClusterSpec::default());
    prefill(&cluster, KEYSPACE, DATA_SIZE)?;
    println!(
        "prefilled key:000000000000..key:{:012} ({DATA_SIZE}-byte values) on the nodes",
        KEYSPACE - 1
    );

    let run_out = dir.join("callgrind.run.out");
    let idle_out = dir.join("callgrind.idle.out");
    let name = if settings.callgrind_set { "set" } else { "get" };
    let (conf, keyspace) = if settings.callgrind_cache {
        println!("reply-cache yes, 100 keys: the GETs after the first 100 are hits");
        ("threads 1\nloglevel notice\nreply-cache yes\n", 100)
    } else {
        ("threads 1\nloglevel notice\n", KEYSPACE)
    };

    let wrapper = wrapper_script(&dir, "run", &settings.mithril_bin, &run_out)?;
    let mut m = Mithril::start(&wrapper, &cluster.seeds(), conf);
    std::thread::sleep(SETTLE);
    let spec = RunSpec {
        target: Target::Plain {
            port: m.port,
            threads: 1,
        },
        clients: 1,
        requests,
        pipeline: settings.callgrind_pipeline as u32,
        data_size: DATA_SIZE,
        keyspace,
        test: Test::Builtin(name),
        tls_ca: None,
    };
    println!("run:      redis-benchmark {}", spec.args().join(" "));
    let out = rb::run(&spec, &dir, Duration::from_secs(900));
    let length = out.wall;
    let run_ir = stop_and_read(&mut m, &run_out);
    if !out.errors.is_empty() {
        return Err(format!(
            "the {name} workload under callgrind failed:\n  {}",
            out.errors.join("\n  ")
        ));
    }
    let run_ir = run_ir?;
    let rps = out.figures.map_or(0.0, |f| f.rps);
    println!(
        "run:      {run_ir} Ir in mithril; workload took {:.1} s ({rps:.0} req/s under valgrind)",
        length.as_secs_f64()
    );

    let wrapper = wrapper_script(&dir, "idle", &settings.mithril_bin, &idle_out)?;
    let mut m = Mithril::start(&wrapper, &cluster.seeds(), conf);
    // The baseline's whole point is to sit idle for as long as the run
    // took, settling included.
    std::thread::sleep(SETTLE + length);
    let idle_ir = stop_and_read(&mut m, &idle_out)?;
    println!(
        "baseline: {idle_ir} Ir in mithril, idle for {:.1} s",
        length.as_secs_f64()
    );
    drop(cluster);

    let per_request = run_ir.saturating_sub(idle_ir) as f64 / requests as f64;
    println!(
        "\nmethod: Ir/request = (Ir of the run - Ir of an idle baseline of the same length) / \
         requests; both under `valgrind --tool=callgrind`, user space only, start-up and \
         shutdown included in both and so cancelled"
    );
    println!("\ntop {TOP_FUNCTIONS} functions by Ir (self) in the run, from callgrind_annotate:");
    match annotate(&run_out) {
        Ok(lines) => {
            for l in lines {
                println!("  {l}");
            }
        }
        Err(e) => println!("  (callgrind_annotate failed: {e})"),
    }
    println!("callgrind files kept in {}", dir.display());
    println!(
        "\nir_per_request {} {} {per_request:.0}",
        name.to_uppercase(),
        settings.callgrind_pipeline
    );
    Ok(())
}

/// The function lines of `callgrind_annotate`, most expensive first.
fn annotate(out: &Path) -> Result<Vec<String>, String> {
    let o = Command::new("callgrind_annotate")
        .arg("--inclusive=no")
        .arg(out)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<String> = text
        .lines()
        .skip_while(|l| !l.contains("file:function"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .take(TOP_FUNCTIONS)
        .map(str::to_string)
        .collect();
    Ok(lines)
}
