//! Redis Sentinel processes (`redis-server --sentinel`) watching groups of
//! plain servers: the Sentinel half of predixy's deployments.
//!
//! ```text
//!  SentinelSet::start(n, &[(name, master port)]) ──> n sentinels, each
//!      `sentinel monitor NAME 127.0.0.1 PORT quorum`, down-after 1000 ms,
//!      failover-timeout 10000 ms; ready once every sentinel knows the
//!      others and every master's replicas
//! ```
//!
//! Owns: every process it starts, one temp dir each (the sentinel rewrites
//! its config file there). Every wait has a deadline. Never: signal a PID
//! it did not start, or bind anything but 127.0.0.1.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::process::{spawn_child, terminate_all};
use super::resp::{Conn, Reply};
use super::{free_port, make_temp_dir, redis_server_path, remove_temp_dir, tail_file, wait_until};

/// A fresh directory in memory (`/dev/shm`) when there is one, else a
/// temp dir: a sentinel rewrites and fsyncs its configuration file at
/// every event, and on a busy disk (a CI machine building while it tests)
/// one fsync was seen to stall a sentinel for 37 s in the middle of a
/// failover.
fn memory_dir() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        return make_temp_dir();
    }
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = shm.join(format!("mithril-sentinel-{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    match fs::create_dir_all(&dir) {
        Ok(()) => dir,
        Err(_) => make_temp_dir(),
    }
}

/// One sentinel.
pub struct Sentinel {
    pub port: u16,
    /// Its `tls-port` (`SentinelSet::start_tls`).
    pub tls_port: Option<u16>,
    dir: PathBuf,
    child: Option<Child>,
}

impl Sentinel {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(&self.addr())
    }
}

/// Several sentinels watching the same masters.
pub struct SentinelSet {
    pub sentinels: Vec<Sentinel>,
    /// (master name, replicas expected) as given to `start`.
    groups: Vec<(String, usize)>,
}

impl SentinelSet {
    /// Starts `n` sentinels monitoring `groups` (name, master port,
    /// replicas it has) with quorum `n / 2 + 1`, and waits until each knows
    /// the other sentinels and every group's replicas.
    pub fn start(n: usize, groups: &[(&str, u16, usize)]) -> SentinelSet {
        SentinelSet::start_tls(n, groups, None)
    }

    /// Like `start`; with `tls` (the lines that name a certificate, its
    /// key and CA, and `tls-auth-clients`), each sentinel also has a
    /// `tls-port` and reaches the masters and the other sentinels over
    /// TLS (`tls-replication yes`: `groups` then give the masters' TLS
    /// ports).
    pub fn start_tls(n: usize, groups: &[(&str, u16, usize)], tls: Option<&str>) -> SentinelSet {
        let mut set = SentinelSet {
            sentinels: Vec::new(),
            groups: groups.iter().map(|(g, _, r)| (g.to_string(), *r)).collect(),
        };
        for _ in 0..n {
            let port = free_port();
            let dir = memory_dir();
            let mut conf = String::new();
            let _ = writeln!(conf, "port {port}\nbind 127.0.0.1\nprotected-mode no");
            let _ = writeln!(conf, "daemonize no\ndir {:?}", dir.display().to_string());
            let tls_port = tls.map(|lines| {
                let tls_port = free_port();
                let _ = writeln!(conf, "tls-port {tls_port}\ntls-replication yes\n{lines}");
                tls_port
            });
            let _ = writeln!(
                conf,
                "logfile {:?}",
                dir.join("sentinel.log").display().to_string()
            );
            for (name, master, _) in groups {
                let _ = writeln!(
                    conf,
                    "sentinel monitor {name} 127.0.0.1 {master} {}",
                    n / 2 + 1
                );
                let _ = writeln!(conf, "sentinel down-after-milliseconds {name} 1000");
                let _ = writeln!(conf, "sentinel failover-timeout {name} 10000");
                let _ = writeln!(conf, "sentinel parallel-syncs {name} 1");
            }
            let path = dir.join("sentinel.conf");
            fs::write(&path, conf).expect("write sentinel.conf");
            let out = File::create(dir.join("stdio.log")).expect("stdio");
            let mut cmd = Command::new(redis_server_path());
            cmd.arg(&path)
                .arg("--sentinel")
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("dup"))
                .stderr(out);
            let child = spawn_child(cmd).expect("start a sentinel");
            set.sentinels.push(Sentinel {
                port,
                tls_port,
                dir,
                child: Some(child),
            });
        }
        set.wait_settled(n);
        set
    }

    /// Every sentinel answers, knows the n - 1 others and each group's
    /// replicas.
    fn wait_settled(&self, n: usize) {
        for s in &self.sentinels {
            for (name, replicas) in &self.groups {
                wait_until(
                    &format!("sentinel {} to know {name}", s.addr()),
                    Duration::from_secs(30),
                    || {
                        let mut c = Conn::try_connect(&s.addr()).ok()?;
                        let others = c.cmd(&["SENTINEL", "sentinels", name]);
                        let reps = c.cmd(&["SENTINEL", "replicas", name]);
                        (matches!(&others, Reply::Array(Some(v)) if v.len() + 1 >= n)
                            && matches!(&reps, Reply::Array(Some(v)) if v.len() >= *replicas))
                        .then_some(())
                    },
                );
            }
        }
    }

    pub fn addrs(&self) -> Vec<String> {
        self.sentinels.iter().map(Sentinel::addr).collect()
    }

    /// Their TLS addresses (`start_tls`).
    pub fn tls_addrs(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .filter_map(|s| Some(format!("127.0.0.1:{}", s.tls_port?)))
            .collect()
    }

    /// The master address the first sentinel names for `name`.
    pub fn master_of(&self, name: &str) -> String {
        let r = self.sentinels[0]
            .conn()
            .cmd(&["SENTINEL", "get-master-addr-by-name", name]);
        let parts = r.as_array();
        format!("{}:{}", parts[0].as_str(), parts[1].as_str())
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        let mut running: Vec<&mut Child> = self
            .sentinels
            .iter_mut()
            .filter_map(|s| s.child.as_mut())
            .collect();
        terminate_all(&mut running, Duration::from_secs(3));
        for s in &self.sentinels {
            if std::thread::panicking() {
                eprintln!(
                    "--- sentinel :{} log tail ---\n{}",
                    s.port,
                    tail_file(&s.dir.join("sentinel.log"), 15)
                );
            }
            remove_temp_dir(&s.dir);
        }
    }
}
