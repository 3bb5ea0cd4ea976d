//! `make run`: a throwaway Redis Cluster on 127.0.0.1 with mithril in front.
//!
//! ```text
//! cargo run --release --example devcluster -- --mithril target/release/mithril \
//!     [--port 7777] [--masters 3] [--replicas 0]
//! ```
//!
//! Starts the cluster with the test harness, writes a mithril config beside
//! it, runs mithril in the foreground with this terminal's stdio, and when
//! mithril exits stops every redis-server it started and removes the temp dir.
//!
//! Signals: SIGINT, SIGTERM and SIGHUP are blocked here and taken by a
//! `sigwait` thread, so none of them kills us before the cleanup. A terminal's
//! Ctrl-C reaches mithril directly (same foreground group; the redis nodes sit
//! in their own groups and do not see it); SIGTERM or SIGHUP sent to us is
//! passed on to mithril as SIGTERM. A signal that arrives while the cluster is
//! still forming stops everything as soon as it has formed. Should we die
//! anyway, the children go with us (parent-death signal, see `spawn_child`).
//! Never: touch a process it did not start.

#[path = "../tests/support/mod.rs"]
mod support;

use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use support::{spawn_child, ClusterSpec, RedisCluster};

/// PID of the running mithril, 0 before it starts.
static MITHRIL_PID: AtomicI32 = AtomicI32::new(0);
/// Set once a stop signal arrived.
static STOP: AtomicBool = AtomicBool::new(false);

/// Blocks SIGINT/SIGTERM/SIGHUP in this thread (so in every thread started
/// after it) and starts the thread that `sigwait`s for them. Call first in
/// `main`, before any other thread exists. Children start with an empty mask
/// (`spawn_child` clears it between fork and exec).
fn take_stop_signals() {
    // SAFETY: sigset_t is plain data that sigemptyset initialises; the calls
    // only read and write that set and this thread's mask.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: waits on a valid, initialised set.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                continue;
            }
            STOP.store(true, Ordering::SeqCst);
            // Ctrl-C already reached mithril through the terminal.
            if sig != libc::SIGINT {
                forward_stop();
            }
        });
    if let Err(e) = spawned {
        eprintln!("devcluster: cannot start the signal thread: {e}");
    }
}

/// SIGTERM to mithril if it is running.
fn forward_stop() {
    let pid = MITHRIL_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill on the PID of the child we started and have not reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

const USAGE: &str = "usage: devcluster --mithril PATH [--port 7777] [--masters 3] [--replicas 0]";

struct Args {
    mithril: PathBuf,
    port: u16,
    masters: usize,
    replicas: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut mithril = None;
    let (mut port, mut masters, mut replicas) = (7777u16, 3usize, 0usize);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |_| format!("{flag}: not a valid number: {value}");
        match flag.as_str() {
            "--mithril" => mithril = Some(PathBuf::from(&value)),
            "--port" => port = value.parse().map_err(bad)?,
            "--masters" => masters = value.parse().map_err(bad)?,
            "--replicas" => replicas = value.parse().map_err(bad)?,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    let mithril = mithril.ok_or("--mithril PATH is required")?;
    if !(1..=16384).contains(&masters) {
        return Err("--masters must be between 1 and 16384".into());
    }
    Ok(Args {
        mithril,
        port,
        masters,
        replicas,
    })
}

fn main() -> ExitCode {
    take_stop_signals();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("devcluster: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if !args.mithril.is_file() {
        eprintln!(
            "devcluster: no mithril binary at {} (build it with `cargo build --release`)",
            args.mithril.display()
        );
        return ExitCode::FAILURE;
    }
    // Checked up front so a busy port costs no cluster start. Another process
    // could still take it before mithril binds; mithril then says so itself.
    if let Err(e) = TcpListener::bind(("127.0.0.1", args.port)) {
        eprintln!(
            "devcluster: port {} on 127.0.0.1 is not available ({e}); is another mithril or \
             redis running? Pick another with --port (make run PORT=...).",
            args.port
        );
        return ExitCode::FAILURE;
    }

    eprintln!(
        "devcluster: starting {} master(s) with {} replica(s) each...",
        args.masters, args.replicas
    );
    let cluster = RedisCluster::start(ClusterSpec {
        masters: args.masters,
        replicas_per_master: args.replicas,
        ..ClusterSpec::default()
    });
    let slot_map = cluster.slot_map();

    let conf_path = cluster.dir.join("mithril.conf");
    let conf = format!(
        "bind 127.0.0.1\nport {}\ncluster-nodes {}\nloglevel notice\nlogfile \"\"\n",
        args.port,
        cluster.seeds().join(" ")
    );
    if let Err(e) = std::fs::write(&conf_path, conf) {
        eprintln!("devcluster: cannot write {}: {e}", conf_path.display());
        return ExitCode::FAILURE;
    }

    println!("mithril dev cluster (files in {})", cluster.dir.display());
    for n in &cluster.nodes {
        let role = match &n.master_of {
            None => {
                let ranges: Vec<String> = slot_map
                    .iter()
                    .filter(|&&(_, _, p)| p == n.port)
                    .map(|&(a, b, _)| format!("{a}-{b}"))
                    .collect();
                format!("master  slots {}", ranges.join(","))
            }
            Some(m) => {
                let port = cluster
                    .nodes
                    .iter()
                    .find(|x| &x.id == m)
                    .map_or(0, |x| x.port);
                format!("replica of 127.0.0.1:{port}")
            }
        };
        println!("  redis 127.0.0.1:{:<5}  pid {:<7} {role}", n.port, n.pid);
    }
    println!("  mithril config: {}", conf_path.display());
    println!(
        "mithril on 127.0.0.1:{p}; try `redis-cli -p {p}`. Ctrl-C stops mithril, then the cluster.",
        p = args.port
    );

    if STOP.load(Ordering::SeqCst) {
        eprintln!("devcluster: interrupted; stopping the cluster");
        drop(cluster);
        return ExitCode::from(130);
    }
    let mut cmd = Command::new(&args.mithril);
    cmd.arg("-c").arg(&conf_path);
    let mut child = match spawn_child(cmd) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("devcluster: cannot run {}: {e}", args.mithril.display());
            return ExitCode::FAILURE;
        }
    };
    MITHRIL_PID.store(
        libc::pid_t::try_from(child.id()).unwrap_or(0),
        Ordering::SeqCst,
    );
    if STOP.load(Ordering::SeqCst) {
        // A signal came between the spawn and the line above.
        forward_stop();
    }
    let waited = child.wait();
    MITHRIL_PID.store(0, Ordering::SeqCst);
    let status = match waited {
        Ok(st) => st,
        Err(e) => {
            eprintln!("devcluster: waiting for mithril failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "devcluster: mithril exited ({status}); stopping {} redis-server node(s)",
        cluster.nodes.len()
    );
    drop(cluster);
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
