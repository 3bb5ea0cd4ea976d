//! Plain (non-cluster) `redis-server` processes, and twemproxy's
//! `nutcracker` in front of them: the oracle for where a pool puts a key.
//!
//! ```text
//!  StandaloneSet::start(n) ──> n servers, each answering INFO with our PID
//!  Nutcracker::start(pool body) ──> nutcracker.yml (listen: a free port)
//!                                   nutcracker -c yml -s <stats> -i 100 -a 127.0.0.1 -o log
//!                                   ──> PING through it answers PONG
//! ```
//!
//! Owns: every process it starts and one temp dir per process (a server's
//! `redis.conf` and `redis.log`; nutcracker's `nutcracker.yml`,
//! `nutcracker.log` and `stdio.log`). Invariants: a handle's child is
//! `Some` exactly while its process runs; servers keep nothing on disk
//! (`save ""`, `appendonly no`); every wait has a deadline. Never: signal
//! a PID it did not start, or bind anything but 127.0.0.1.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::process::{kill_and_reap, spawn_child, terminate_all};
use super::resp::{Conn, Reply};
use super::{free_port, make_temp_dir, poll_until, redis_server_path, remove_temp_dir, tail_file};

const BOOT_DEADLINE: Duration = Duration::from_secs(15);
const STOP_GRACE: Duration = Duration::from_secs(3);
const PORT_ATTEMPTS: usize = 5;

enum BootError {
    PortInUse,
    Failed(String),
}

/// One plain `redis-server` on 127.0.0.1 with its own temp dir.
pub struct Standalone {
    pub port: u16,
    /// The PID of the current process (the last one after `kill`).
    pub pid: u32,
    pub dir: PathBuf,
    child: Option<Child>,
    /// `redis.conf` lines after the harness's own (`start_with`).
    extra: String,
}

impl Standalone {
    /// Starts one server on a free port and waits until it answers.
    pub fn start() -> Standalone {
        Standalone::start_with("")
    }

    /// `start` with `extra` lines in its `redis.conf` (a `tls-port` and
    /// its files, say), after the harness's own.
    pub fn start_with(extra: &str) -> Standalone {
        let mut s = Standalone::spawn_with(free_port(), extra);
        s.boot_with_port_retries();
        s
    }

    /// Starts one server on `port` (a configuration that names its
    /// servers' ports) and waits until it answers; `None` when the port is
    /// taken.
    pub fn start_on(port: u16) -> Option<Standalone> {
        let mut s = Standalone::spawn(port);
        match s.boot() {
            Ok(()) => Some(s),
            Err(BootError::PortInUse) => {
                s.kill();
                None
            }
            Err(BootError::Failed(why)) => panic!("{why}"),
        }
    }

    /// Writes the config for `port` in a fresh temp dir and starts the
    /// process, without waiting.
    fn spawn(port: u16) -> Standalone {
        Standalone::spawn_with(port, "")
    }

    fn spawn_with(port: u16, extra: &str) -> Standalone {
        let mut s = Standalone {
            port,
            pid: 0,
            dir: make_temp_dir(),
            child: None,
            extra: extra.to_string(),
        };
        s.write_conf();
        s.launch();
        s
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(&self.addr())
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    fn write_conf(&self) {
        let mut conf = String::new();
        let _ = writeln!(conf, "port {}", self.port);
        conf.push_str("bind 127.0.0.1\nprotected-mode no\ndaemonize no\n");
        conf.push_str("save \"\"\nappendonly no\n");
        let _ = writeln!(conf, "dir {:?}", self.dir.display().to_string());
        let _ = writeln!(conf, "logfile {:?}", self.log_path().display().to_string());
        conf.push_str(&self.extra);
        let path = self.dir.join("redis.conf");
        fs::write(&path, conf).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// Starts the process from the config already written (own process
    /// group, so a terminal's Ctrl-C does not reach it).
    fn launch(&mut self) {
        use std::os::unix::process::CommandExt;
        let stdio_path = self.dir.join("stdio.log");
        let open = || {
            File::options()
                .create(true)
                .append(true)
                .open(&stdio_path)
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", stdio_path.display()))
        };
        let mut cmd = Command::new(redis_server_path());
        cmd.arg(self.dir.join("redis.conf"))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(open())
            .stderr(open())
            .process_group(0);
        let child = spawn_child(cmd)
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", redis_server_path().display()));
        self.pid = child.id();
        self.child = Some(child);
    }

    /// Waits until the server answers INFO with our child's PID (so a
    /// stranger on the port is never taken for it).
    fn boot(&mut self) -> Result<(), BootError> {
        let port = self.port;
        let log = self.log_path();
        let stdio = self.dir.join("stdio.log");
        let Some(child) = self.child.as_mut() else {
            return Err(BootError::Failed("the server is not running".into()));
        };
        let want = format!("process_id:{}\r\n", child.id());
        let outcome = poll_until(BOOT_DEADLINE, || {
            if let Ok(Some(status)) = child.try_wait() {
                let text = format!("{}\n{}", tail_file(&log, 20), tail_file(&stdio, 20));
                return Some(if text.contains("already in use") {
                    Err(BootError::PortInUse)
                } else {
                    Err(BootError::Failed(format!(
                        "redis-server on port {port} exited ({status}); log:\n{text}"
                    )))
                });
            }
            let mut c = Conn::try_connect(&format!("127.0.0.1:{port}")).ok()?;
            c.send(&[b"INFO", b"server"]);
            match c.try_read_reply(Duration::from_secs(2)).ok()? {
                Reply::Bulk(Some(info)) if String::from_utf8_lossy(&info).contains(&want) => {
                    Some(Ok(()))
                }
                _ => None,
            }
        });
        outcome.unwrap_or_else(|| {
            Err(BootError::Failed(format!(
                "redis-server on port {port} did not answer within {BOOT_DEADLINE:?}; log:\n{}",
                tail_file(&log, 20)
            )))
        })
    }

    fn boot_with_port_retries(&mut self) {
        for _ in 0..PORT_ATTEMPTS {
            match self.boot() {
                Ok(()) => return,
                Err(BootError::Failed(why)) => panic!("{why}"),
                Err(BootError::PortInUse) => {
                    // Someone took the port between free_port and bind.
                    self.kill();
                    self.port = free_port();
                    self.write_conf();
                    self.launch();
                }
            }
        }
        panic!("redis-server: every port tried was taken by another process");
    }

    /// SIGKILLs the server and reaps it (`pid` keeps the old PID).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child);
        }
    }

    /// Starts the server again on the same port and waits until it
    /// answers (empty: nothing was persisted).
    pub fn restart(&mut self) {
        assert!(
            !self.is_running(),
            "restart: :{} is still running",
            self.port
        );
        self.launch();
        match self.boot() {
            Ok(()) => {}
            Err(BootError::PortInUse) => panic!("restart: port {} was taken meanwhile", self.port),
            Err(BootError::Failed(why)) => panic!("restart: {why}"),
        }
    }

    /// Every key the server holds (KEYS *), as bytes.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        match self.conn().cmd(&["KEYS", "*"]) {
            Reply::Array(Some(items)) => items
                .iter()
                .map(|k| k.as_bulk().unwrap_or_default().to_vec())
                .collect(),
            other => panic!("KEYS * on {} answered {other:?}", self.addr()),
        }
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate_all(&mut [&mut c], STOP_GRACE);
        }
        if std::thread::panicking() {
            eprintln!(
                "--- redis-server :{} log tail ---\n{}",
                self.port,
                tail_file(&self.log_path(), 10)
            );
        }
        remove_temp_dir(&self.dir);
    }
}

/// Several plain servers, started side by side.
pub struct StandaloneSet {
    pub servers: Vec<Standalone>,
}

impl StandaloneSet {
    /// Starts `n` servers (all spawned first, then each waited for).
    pub fn start(n: usize) -> StandaloneSet {
        let mut set = StandaloneSet {
            servers: (0..n).map(|_| Standalone::spawn(free_port())).collect(),
        };
        // From here on a panic drops `set`, which stops what was started.
        for s in &mut set.servers {
            s.boot_with_port_retries();
        }
        set
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn port(&self, i: usize) -> u16 {
        self.servers[i].port
    }

    pub fn conn(&self, i: usize) -> Conn {
        self.servers[i].conn()
    }

    pub fn kill(&mut self, i: usize) {
        self.servers[i].kill();
    }

    pub fn restart(&mut self, i: usize) {
        self.servers[i].restart();
    }

    /// Waits (10 s) until server `i` has no client but the connection that
    /// asks: a proxy's connections to it are all closed.
    pub fn wait_no_clients(&self, i: usize, what: &str) {
        let mut c = self.conn(i);
        super::wait_until(what, Duration::from_secs(10), || {
            (super::info_text_field(&mut c, "clients", "connected_clients") == "1").then_some(())
        });
    }

    /// FLUSHALL on every running server.
    pub fn flush_all(&self) {
        for s in self.servers.iter().filter(|s| s.is_running()) {
            let reply = s.conn().cmd(&["FLUSHALL"]);
            assert!(
                matches!(&reply, Reply::Simple(ok) if ok == "OK"),
                "FLUSHALL on {} answered {reply:?}",
                s.addr()
            );
        }
    }
}

impl Drop for StandaloneSet {
    fn drop(&mut self) {
        // Stop them together rather than one grace period after another.
        let mut running: Vec<&mut Child> = self
            .servers
            .iter_mut()
            .filter_map(|s| s.child.as_mut())
            .collect();
        terminate_all(&mut running, STOP_GRACE);
        for s in &mut self.servers {
            s.child = None;
        }
    }
}

/// The `nutcracker` binary: `$NUTCRACKER` if set, else the first on
/// `PATH` or in the system directories. Panics with an install hint.
pub fn nutcracker_path() -> PathBuf {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("NUTCRACKER").filter(|p| !p.is_empty()) {
                return PathBuf::from(p);
            }
            let path = std::env::var_os("PATH").unwrap_or_default();
            let fallback = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"];
            std::env::split_paths(&path)
                .chain(fallback.map(PathBuf::from))
                .map(|dir| dir.join("nutcracker"))
                .find(|p| p.is_file())
                .unwrap_or_else(|| {
                    panic!(
                        "nutcracker not found on PATH or in /usr/sbin; the placement tests \
                         compare with twemproxy itself. Install it with \
                         `sudo apt-get install -y nutcracker` (Debian's is 0.5.0), or point \
                         NUTCRACKER at a binary."
                    )
                })
        })
        .clone()
}

/// One pool's settings for a `nutcracker.yml`; `body()` gives the text
/// `Nutcracker::start` takes. Unset fields are left to nutcracker's
/// defaults (fnv1a_64, ketama, no hash tag).
#[derive(Clone, Debug, Default)]
pub struct NutPool {
    pub hash: Option<String>,
    pub distribution: Option<String>,
    /// Two characters, written quoted (`"{}"`).
    pub hash_tag: Option<String>,
    /// `servers:` entries as nutcracker reads them: `host:port:weight [name]`.
    pub servers: Vec<String>,
    /// Any other directive, `(key, value)` written as `key: value`:
    /// `auto_eject_hosts`, `server_retry_timeout`, `server_failure_limit`,
    /// `timeout`, ...
    pub extra: Vec<(String, String)>,
}

impl NutPool {
    /// The pool's directives, unindented, without `listen:`; `redis:
    /// true` first (nutcracker speaks memcached otherwise).
    pub fn body(&self) -> String {
        let mut out = String::from("redis: true\n");
        if let Some(h) = &self.hash {
            let _ = writeln!(out, "hash: {h}");
        }
        if let Some(d) = &self.distribution {
            let _ = writeln!(out, "distribution: {d}");
        }
        if let Some(t) = &self.hash_tag {
            let _ = writeln!(out, "hash_tag: {}", yaml_quoted(t));
        }
        for (k, v) in &self.extra {
            let _ = writeln!(out, "{k}: {v}");
        }
        out.push_str("servers:\n");
        for s in &self.servers {
            let _ = writeln!(out, " - {s}");
        }
        out
    }
}

/// A YAML double-quoted scalar.
fn yaml_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A running nutcracker with one pool.
pub struct Nutcracker {
    pub port: u16,
    pub stats_port: u16,
    pub pid: u32,
    pub dir: PathBuf,
    pub conf_path: PathBuf,
    pub log_path: PathBuf,
    child: Option<Child>,
}

impl Nutcracker {
    /// Writes `pool:` with `listen: 127.0.0.1:<free port>` followed by
    /// `body` (the pool's other directives, one per line, indented here;
    /// see `NutPool::body`), starts nutcracker on it with a free stats
    /// port, and waits (15 s) until PING through it answers PONG.
    pub fn start(body: &str) -> Nutcracker {
        let dir = make_temp_dir();
        let mut n = Nutcracker {
            port: 0,
            stats_port: 0,
            pid: 0,
            conf_path: dir.join("nutcracker.yml"),
            log_path: dir.join("nutcracker.log"),
            dir,
            child: None,
        };
        for _ in 0..PORT_ATTEMPTS {
            n.launch(body, free_port(), free_port());
            match n.ready() {
                Ok(()) => return n,
                Err(BootError::Failed(why)) => panic!("{why}"),
                Err(BootError::PortInUse) => {}
            }
        }
        panic!("nutcracker: every port tried was taken by another process");
    }

    fn launch(&mut self, body: &str, port: u16, stats_port: u16) {
        use std::os::unix::process::CommandExt;
        if let Some(mut old) = self.child.take() {
            kill_and_reap(&mut old);
        }
        let mut yml = format!("pool:\n  listen: 127.0.0.1:{port}\n");
        for line in body.lines() {
            let _ = writeln!(yml, "  {line}");
        }
        fs::write(&self.conf_path, &yml)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", self.conf_path.display()));
        let stdio_path = self.dir.join("stdio.log");
        let stdio = || {
            File::options()
                .create(true)
                .append(true)
                .open(&stdio_path)
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", stdio_path.display()))
        };
        let mut cmd = Command::new(nutcracker_path());
        // Stats aggregated every 100 ms (nutcracker's default is 30 s), so
        // `stats()` follows traffic as closely as mithril's stats port.
        cmd.arg("-c")
            .arg(&self.conf_path)
            .arg("-s")
            .arg(stats_port.to_string())
            .arg("-i")
            .arg("100")
            .arg("-a")
            .arg("127.0.0.1")
            .arg("-o")
            .arg(&self.log_path)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(stdio())
            .stderr(stdio())
            .process_group(0);
        let child = spawn_child(cmd)
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", nutcracker_path().display()));
        self.port = port;
        self.stats_port = stats_port;
        self.pid = child.id();
        self.child = Some(child);
    }

    fn ready(&mut self) -> Result<(), BootError> {
        let addr = self.addr();
        let log_path = self.log_path.clone();
        let yml = fs::read_to_string(&self.conf_path).unwrap_or_default();
        let Some(child) = self.child.as_mut() else {
            return Err(BootError::Failed("nutcracker is not running".into()));
        };
        let outcome = poll_until(BOOT_DEADLINE, || {
            if let Ok(Some(status)) = child.try_wait() {
                let text = tail_file(&log_path, 30);
                return Some(if text.contains("already in use") {
                    Err(BootError::PortInUse)
                } else {
                    Err(BootError::Failed(format!(
                        "nutcracker exited ({status}) before answering PING on {addr}; \
                         config:\n{yml}\nlog:\n{text}"
                    )))
                });
            }
            let mut c = Conn::try_connect(&addr).ok()?;
            c.send(&[b"PING"]);
            match c.try_read_reply(Duration::from_secs(2)).ok()? {
                Reply::Simple(s) if s == "PONG" => Some(Ok(())),
                _ => None,
            }
        });
        outcome.unwrap_or_else(|| {
            Err(BootError::Failed(format!(
                "nutcracker did not answer PING on {addr} within {BOOT_DEADLINE:?}; log:\n{}",
                tail_file(&self.log_path, 30)
            )))
        })
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(&self.addr())
    }

    /// The log file's contents (empty if it does not exist yet).
    pub fn log(&self) -> String {
        fs::read(&self.log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The stats JSON nutcracker sends to a connection on its stats port.
    pub fn stats(&self) -> String {
        use std::io::Read;
        let addr = format!("127.0.0.1:{}", self.stats_port);
        let mut s = std::net::TcpStream::connect(&addr)
            .unwrap_or_else(|e| panic!("cannot connect to nutcracker stats {addr}: {e}"));
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    pub fn conf_text(&self) -> String {
        fs::read_to_string(&self.conf_path).unwrap_or_default()
    }
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_and_reap(&mut c);
        }
        if std::thread::panicking() {
            eprintln!(
                "--- nutcracker {} config ---\n{}--- log tail ({}) ---\n{}",
                self.addr(),
                self.conf_text(),
                self.log_path.display(),
                tail_file(&self.log_path, 30)
            );
        }
        remove_temp_dir(&self.dir);
    }
}
