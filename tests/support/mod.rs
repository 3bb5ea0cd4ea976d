//! Shared support for integration tests and the dev-cluster example: real
//! `redis-server` cluster nodes on free ports, a tiny blocking RESP client that
//! shares no code with mithril, a slot calculator of its own, a handle that
//! runs the mithril binary against a cluster, plain redis-servers with
//! twemproxy's nutcracker in front (the placement oracle), and the
//! certificates of the TLS tests (`certs.rs`: a CA by `openssl`).
//!
//! Owns: every process it starts (redis nodes, plain servers, mithril,
//! nutcracker) and every temp dir it creates. Invariants: each child is started
//! from one long-lived spawner thread with a parent-death signal, so nothing
//! outlives the test process even when it is killed; every wait has a deadline
//! (`wait_until`), and the only sleeping in this module happens inside
//! `poll_until`. Never: sleep a fixed time to "let things settle", talk to
//! anything but 127.0.0.1, or reuse mithril's own code (a test must not verify
//! the proxy with the proxy's parser).
//!
//! Used as `mod support;` from each file in `tests/`, and by
//! `examples/devcluster.rs` through `#[path = "../tests/support/mod.rs"]`.

// Each test binary uses only part of this module.
#![allow(dead_code, unused_imports)]

mod certs;
mod cluster;
pub mod load;
mod mithril;
mod process;
mod resp;
mod rng;
mod sentinel;
mod slots;
mod standalone;

pub use certs::{Certs, SERVER_EXT};
pub use cluster::{AuthClients, ClusterSpec, NodeTls, RedisCluster, RedisNode};
pub use mithril::{
    client_local_ports, command_calls, info_text_field, run_mithril, start_from_file, FromFile,
    Mithril,
};
pub use process::{
    fd_count, pid_alive, raise_fd_limit, rss_kb, spawn_child, status_kb, try_rss_kb, PeakRss,
    Stopped,
};
pub use resp::{argv, bulk, encode_command, err, ok, parse_reply, Conn, Reply};
pub use rng::Rng;
pub use sentinel::{Sentinel, SentinelSet};
pub use slots::{crc16_xmodem, key_for_slot, key_slot};
pub use standalone::{nutcracker_path, NutPool, Nutcracker, Standalone, StandaloneSet};

use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Ports are taken from this window so that both the port and its cluster bus
/// port (port + 10000) stay below Linux's default ephemeral range (32768+),
/// where outgoing connections would otherwise compete for them.
const PORT_LOW: u16 = 12000;
const PORT_HIGH: u16 = 22000;

/// The mithril binary cargo built for this test or bench. Cargo names it
/// in `CARGO_BIN_EXE_mithril` for integration tests and benches only: the
/// dev-cluster example, which includes this module too, has no such binary
/// and must not call this.
pub fn bin() -> &'static Path {
    match option_env!("CARGO_BIN_EXE_mithril") {
        Some(path) => Path::new(path),
        None => panic!("support::bin(): CARGO_BIN_EXE_mithril is set only for tests and benches"),
    }
}

/// A 3-master cluster (no replicas) with mithril in front of it, `extra_conf`
/// appended to mithril's config: where most proxy tests start.
pub fn cluster_and_mithril(extra_conf: &str) -> (RedisCluster, Mithril) {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), extra_conf);
    (cluster, m)
}

/// The worker a connection is served by (the `worker=` field of its
/// CLIENT INFO line).
pub fn worker_of(c: &mut Conn) -> String {
    let line = c.cmd(&["CLIENT", "INFO"]).as_str().to_string();
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("worker="))
        .unwrap_or_else(|| panic!("no worker= in {line:?}"))
        .to_string()
}

/// A process-wide random u64 (std seeds `RandomState` from the OS).
pub fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// A port on 127.0.0.1 where both `port` and `port + 10000` (the cluster bus)
/// can be bound right now, and which this process has not handed out before.
/// The scan starts at a random offset so that test binaries running side by
/// side rarely try the same ports; callers that start a server still treat a
/// bind failure as "pick another port" (see `RedisCluster::start`).
pub fn free_port() -> u16 {
    static GIVEN: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let span = PORT_HIGH - PORT_LOW;
    if NEXT.load(Ordering::Relaxed) == 0 {
        let start = PORT_LOW + (random_u64() % u64::from(span)) as u16;
        let _ = NEXT.compare_exchange(0, start, Ordering::Relaxed, Ordering::Relaxed);
    }
    let given = GIVEN.get_or_init(|| Mutex::new(HashSet::new()));
    for _ in 0..span {
        let candidate = NEXT
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
                Some(if p + 1 >= PORT_HIGH { PORT_LOW } else { p + 1 })
            })
            .unwrap_or(PORT_LOW);
        let mut set = given.lock().unwrap_or_else(|e| e.into_inner());
        if set.contains(&candidate) {
            continue;
        }
        let both_free = TcpListener::bind(("127.0.0.1", candidate)).is_ok()
            && TcpListener::bind(("127.0.0.1", candidate + 10000)).is_ok();
        if both_free {
            set.insert(candidate);
            return candidate;
        }
    }
    panic!("free_port: no free port pair in {PORT_LOW}..{PORT_HIGH} (+10000) on 127.0.0.1");
}

/// Calls `f` until it returns `Some`, sleeping 1 ms, then 2, 4, ... up to 50 ms
/// between calls; `None` once `timeout` has passed (after a last call at the
/// deadline). The one place in this module that sleeps.
pub fn poll_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Polls `f` (1 ms backoff doubling to 50 ms) until it returns `Some`, and
/// panics naming `what` if `timeout` passes first.
pub fn wait_until<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    match poll_until(timeout, f) {
        Some(v) => v,
        None => panic!("timed out after {timeout:?} waiting for: {what}"),
    }
}

/// Like `wait_until`, but `f` explains why it is not done yet, and the panic
/// message carries the last explanation.
pub fn wait_until_explained<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> T {
    let mut last = String::from("(never checked)");
    let got = poll_until(timeout, || match f() {
        Ok(v) => Some(v),
        Err(why) => {
            last = why;
            None
        }
    });
    match got {
        Some(v) => v,
        None => panic!("timed out after {timeout:?} waiting for: {what}; last state: {last}"),
    }
}

/// The `redis-server` binary: `$REDIS_SERVER` if set, else the first one on
/// `PATH` (or in the usual system directories). Panics with an install hint.
pub fn redis_server_path() -> PathBuf {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("REDIS_SERVER").filter(|p| !p.is_empty()) {
                let p = PathBuf::from(p);
                assert!(
                    is_executable(&p),
                    "REDIS_SERVER={} is not an executable file",
                    p.display()
                );
                return p;
            }
            let path = std::env::var_os("PATH").unwrap_or_default();
            let fallback = ["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from);
            std::env::split_paths(&path)
                .chain(fallback)
                .map(|dir| dir.join("redis-server"))
                .find(|p| is_executable(p))
                .unwrap_or_else(|| {
                    panic!(
                        "redis-server not found on PATH; the integration tests start real \
                         Redis Cluster nodes. Install it with \
                         `sudo apt-get install -y redis-server redis-tools` (`make test` does \
                         this by itself when run as root), or point REDIS_SERVER at a binary."
                    )
                })
        })
        .clone()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A fresh directory `<temp>/mithril-test-<pid>-<n>` (a stale one left by an
/// earlier process with the same pid is removed first).
pub fn make_temp_dir() -> PathBuf {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mithril-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create temp dir {}: {e}", dir.display()));
    dir
}

/// Removes a temp dir made by `make_temp_dir`, unless `MITHRIL_KEEP_TEST_DIRS`
/// is set, in which case its path is printed instead.
pub fn remove_temp_dir(dir: &Path) {
    if std::env::var_os("MITHRIL_KEEP_TEST_DIRS").is_some() {
        eprintln!("MITHRIL_KEEP_TEST_DIRS: keeping {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The last `n` lines of a file, or a note saying it could not be read.
pub fn tail_file(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}
