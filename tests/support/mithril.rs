//! Runs the mithril binary for a test: config file, process, log.
//!
//! Owns: one mithril process and a temp dir holding `mithril.conf`,
//! `mithril.log` and `stdio.log` (its stdout and stderr). Invariants: the
//! process is reaped exactly once (by `stop`, `wait_exit` or `Drop`); the port
//! recorded is the last `port` line of the config actually written. Never:
//! signal anything but its own PID.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use super::process::{kill_and_reap, signal_child, spawn_child, terminate_all};
use super::resp::{Conn, Reply};
use super::{free_port, make_temp_dir, poll_until, remove_temp_dir, tail_file};

const READY_DEADLINE: Duration = Duration::from_secs(20);
const STOP_DEADLINE: Duration = Duration::from_secs(10);
const PORT_ATTEMPTS: usize = 5;

pub struct Mithril {
    pub port: u16,
    pub pid: u32,
    pub conf_path: PathBuf,
    pub log_path: PathBuf,
    pub dir: PathBuf,
    /// stdout and stderr of the process.
    pub stdio_path: PathBuf,
    child: Option<Child>,
    status: Option<ExitStatus>,
}

enum NotReady {
    PortInUse,
    Failed(String),
}

/// What PING must get for the proxy to count as ready.
#[derive(Clone, Copy)]
enum Ready {
    /// `+PONG`: clients may run commands at once.
    Pong,
    /// `-NOAUTH ...`: clients must authenticate first.
    NoAuth,
}

impl Mithril {
    /// Writes a config in a fresh temp dir (`bind 127.0.0.1`, a free `port`,
    /// `cluster-nodes <seeds>`, `logfile <dir>/mithril.log`, `loglevel
    /// verbose`, then `extra_conf`, whose lines win), starts `bin -c <conf>`
    /// and waits (20 s) until PING answers PONG. If the port was snatched by
    /// another process meanwhile, it retries on another port.
    pub fn start(bin: &Path, seeds: &[String], extra_conf: &str) -> Mithril {
        Mithril::start_until(bin, seeds, extra_conf, Ready::Pong)
    }

    /// Like `start`, for a mithril whose clients must authenticate first
    /// (`requirepass`, or a user line that locks `default`): ready once
    /// PING is answered with NOAUTH.
    pub fn start_locked(bin: &Path, seeds: &[String], extra_conf: &str) -> Mithril {
        Mithril::start_until(bin, seeds, extra_conf, Ready::NoAuth)
    }

    fn start_until(bin: &Path, seeds: &[String], extra_conf: &str, want: Ready) -> Mithril {
        let mut m = Mithril::spawn(bin, seeds, extra_conf);
        for _ in 0..PORT_ATTEMPTS {
            match m.ready(READY_DEADLINE, want) {
                Ok(()) => return m,
                Err(NotReady::Failed(why)) => panic!("{why}"),
                Err(NotReady::PortInUse) if last_port(extra_conf).is_some() => {
                    panic!("mithril: port {} (set in extra_conf) is in use", m.port)
                }
                Err(NotReady::PortInUse) => {
                    let port = free_port();
                    m.launch(bin, seeds, extra_conf, port);
                }
            }
        }
        panic!("mithril: every port tried was taken by another process");
    }

    /// Like `start` but returns at once, without waiting for PING (for tests
    /// of start-up failures). See `wait_ready` and `wait_exit`.
    pub fn spawn(bin: &Path, seeds: &[String], extra_conf: &str) -> Mithril {
        let dir = make_temp_dir();
        let mut m = Mithril {
            port: 0,
            pid: 0,
            conf_path: dir.join("mithril.conf"),
            log_path: dir.join("mithril.log"),
            stdio_path: dir.join("stdio.log"),
            dir,
            child: None,
            status: None,
        };
        m.launch(bin, seeds, extra_conf, free_port());
        m
    }

    /// (Re)writes the config for `port` and starts the process.
    fn launch(&mut self, bin: &Path, seeds: &[String], extra_conf: &str, port: u16) {
        use std::os::unix::process::CommandExt;
        if let Some(mut old) = self.child.take() {
            kill_and_reap(&mut old);
        }
        // No seeds: the test's own lines declare the pools (the top-level
        // `port` then names the listener the readiness PING goes to).
        let seeds_line = if seeds.is_empty() {
            String::new()
        } else {
            format!("cluster-nodes {}\n", seeds.join(" "))
        };
        let mut conf = format!(
            "bind 127.0.0.1\nport {port}\n{seeds_line}logfile {}\nloglevel verbose\n",
            conf_word(&self.log_path.display().to_string()),
        );
        // MITHRIL_TEST_CONF: lines put in every test's config before the
        // test's own (a later directive wins, so what a test sets itself
        // holds), to run a whole suite again in another mode, e.g.
        // `backend-sharding yes` with `threads 4` (make test).
        if let Ok(more) = std::env::var("MITHRIL_TEST_CONF") {
            conf.push_str(&more.replace("\\n", "\n"));
            conf.push('\n');
        }
        conf.push_str(extra_conf);
        if !conf.ends_with('\n') {
            conf.push('\n');
        }
        fs::write(&self.conf_path, &conf)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", self.conf_path.display()));
        self.port = last_port(&conf).unwrap_or(port);
        let open = || {
            File::options()
                .create(true)
                .append(true)
                .open(&self.stdio_path)
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.stdio_path.display()))
        };
        let mut cmd = Command::new(bin);
        cmd.arg("-c")
            .arg(&self.conf_path)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(open())
            .stderr(open())
            .process_group(0);
        let child =
            spawn_child(cmd).unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        self.pid = child.id();
        self.child = Some(child);
        self.status = None;
    }

    fn ready(&mut self, timeout: Duration, want: Ready) -> Result<(), NotReady> {
        let addr = self.addr();
        let outcome = poll_until(timeout, || {
            if let Some(status) = self.exit_status() {
                let text = format!("{}\n{}", self.stdio(), tail_file(&self.log_path, 50));
                return Some(if text.contains("already in use") {
                    Err(NotReady::PortInUse)
                } else {
                    Err(NotReady::Failed(format!(
                        "mithril exited ({status}) before answering PING on {addr}:\n{text}"
                    )))
                });
            }
            let mut c = Conn::try_connect(&addr).ok()?;
            c.send(&[b"PING"]);
            match (want, c.try_read_reply(Duration::from_secs(2)).ok()?) {
                (Ready::Pong, Reply::Simple(s)) if s == "PONG" => Some(Ok(())),
                (Ready::NoAuth, Reply::Error(e)) if e.starts_with("NOAUTH") => Some(Ok(())),
                _ => None,
            }
        });
        outcome.unwrap_or_else(|| {
            Err(NotReady::Failed(format!(
                "mithril did not answer PING on {addr} within {timeout:?}; log tail:\n{}",
                tail_file(&self.log_path, 50)
            )))
        })
    }

    /// Waits (20 s) until PING answers PONG; panics with the log otherwise.
    pub fn wait_ready(&mut self) {
        match self.ready(READY_DEADLINE, Ready::Pong) {
            Ok(()) => {}
            Err(NotReady::PortInUse) => panic!("mithril: port {} is in use", self.port),
            Err(NotReady::Failed(why)) => panic!("{why}"),
        }
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

    /// Rewrites the configuration file whole (a rename): the lines that
    /// start with `drop` removed, `add` appended; then CONFIG RELOAD on
    /// `c`, and waits until the log has one more `marker` line followed by
    /// a `topology epoch` line (the topology thread logs the change, then
    /// the new map once it is in force). Nothing may be left pending.
    pub fn reload_lines(&self, c: &mut Conn, drop: &str, add: &[String], marker: &str) {
        let text = fs::read_to_string(&self.conf_path).expect("read the config");
        let mut lines: Vec<&str> = text.lines().filter(|l| !l.starts_with(drop)).collect();
        lines.extend(add.iter().map(String::as_str));
        let next = self.dir.join("next.conf");
        fs::write(&next, lines.join("\n") + "\n").expect("write the config");
        fs::rename(&next, &self.conf_path).expect("rename the config");
        let seen = self.log().matches(marker).count();
        assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), Reply::Simple("OK".into()));
        super::wait_until("the change published", Duration::from_secs(10), || {
            let log = self.log();
            let (at, _) = log.match_indices(marker).nth(seen)?;
            log[at..].contains("topology epoch").then_some(())
        });
        assert_eq!(info_text_field(c, "server", "config_pending_restart"), "");
    }

    /// What the process wrote to stdout and stderr.
    pub fn stdio(&self) -> String {
        fs::read(&self.stdio_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Sends `sig` (e.g. `libc::SIGHUP`) to the process if it still runs.
    pub fn signal(&mut self, sig: libc::c_int) {
        if self.exit_status().is_none() {
            if let Some(c) = &self.child {
                signal_child(c, sig);
            }
        }
    }

    /// The exit status if the process has ended (reaping it), else `None`.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.status = Some(st);
                    self.child = None;
                }
            }
        }
        self.status
    }

    /// Waits for the process to end by itself; panics after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let what = format!("mithril (pid {}) to exit", self.pid);
        super::wait_until(&what, timeout, || self.exit_status())
    }

    /// SIGTERM, wait up to 10 s (then SIGKILL), and return the exit code
    /// (`None` if a signal ended it).
    pub fn stop(&mut self) -> Option<i32> {
        if let Some(mut c) = self.child.take() {
            self.status = terminate_all(&mut [&mut c], STOP_DEADLINE).pop().flatten();
        }
        self.status.and_then(|s| s.code())
    }
}

impl Drop for Mithril {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_and_reap(&mut c);
        }
        if std::thread::panicking() {
            eprintln!(
                "--- mithril {} log tail ({}) ---\n{}",
                self.addr(),
                self.log_path.display(),
                tail_file(&self.log_path, 50)
            );
            let stdio = self.stdio();
            if !stdio.trim().is_empty() {
                eprintln!(
                    "--- mithril stdout/stderr tail ---\n{}",
                    tail_file(&self.stdio_path, 20)
                );
            }
        }
        remove_temp_dir(&self.dir);
    }
}

/// Runs `bin()` with `args` to the end, standard input closed, and returns
/// its status and what it printed: for `-t`, `-V`, `--print-config` and
/// start-up failures.
pub fn run_mithril(args: &[&str]) -> Output {
    Command::new(super::bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run mithril: {e}"))
}

/// The value of the last `port` directive in a config text.
fn last_port(conf: &str) -> Option<u16> {
    conf.lines().rev().find_map(|l| {
        let mut w = l.split_whitespace();
        match (w.next(), w.next()) {
            (Some(k), Some(v)) if k.eq_ignore_ascii_case("port") => v.parse().ok(),
            _ => None,
        }
    })
}

/// A config word, quoted only if it has to be.
fn conf_word(s: &str) -> String {
    if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"' || c == '#') {
        format!("{s:?}")
    } else {
        s.to_string()
    }
}

/// A mithril started by [`start_from_file`], killed and reaped when the
/// test ends.
pub struct FromFile(pub Child);

impl Drop for FromFile {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin -c conf` alone (a nutcracker.yml, a predixy.conf or a
/// file of mithril's own that names its listener), in the file's
/// directory with its output in `stdio.log` there, and waits until a
/// connection to `port` passes `ready`; panics if it exits first.
pub fn start_from_file(
    bin: &Path,
    conf: &Path,
    port: u16,
    ready: impl Fn(&mut Conn) -> bool,
) -> (FromFile, Conn) {
    let dir = conf.parent().expect("the file's directory");
    let out = File::create(dir.join("stdio.log")).expect("stdio");
    let mut cmd = Command::new(bin);
    cmd.arg("-c")
        .arg(conf)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out);
    let mut child = FromFile(spawn_child(cmd).expect("start mithril"));
    let c = super::wait_until("mithril to answer", Duration::from_secs(20), || {
        if let Ok(Some(st)) = child.0.try_wait() {
            panic!("mithril exited ({st})");
        }
        let mut c = Conn::try_connect(&format!("127.0.0.1:{port}")).ok()?;
        ready(&mut c).then_some(c)
    });
    (child, c)
}

/// The local ports of the client connections the server behind `c` has,
/// but for `c` itself (the one running CLIENT LIST): which of its ports
/// (plain or TLS) a proxy connected to.
pub fn client_local_ports(c: &mut Conn) -> Vec<u16> {
    let list = c.cmd(&["CLIENT", "LIST"]);
    let text = String::from_utf8_lossy(list.as_bulk().unwrap_or_default()).to_string();
    text.lines()
        .filter(|l| !l.contains("cmd=client|list"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("laddr="))
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| p.parse().ok())
        })
        .collect()
}

/// How many times the server behind `c` ran `command` (lower case, as
/// INFO commandstats names it): its `cmdstat_<command>:calls`, 0 if none.
pub fn command_calls(c: &mut Conn, command: &str) -> i64 {
    let info = c.cmd(&["INFO", "commandstats"]);
    let text = String::from_utf8_lossy(info.as_bulk().unwrap_or_default()).into_owned();
    let prefix = format!("cmdstat_{command}:calls=");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The `name:value` field of INFO `section`, as text.
pub fn info_text_field(c: &mut Conn, section: &str, name: &str) -> String {
    let text = c.cmd(&["INFO", section]).as_str().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .to_string()
}
