//! mithril as a Unix daemon, driven through the real binary: `-d` with a
//! pidfile (and a second instance refused on it), start-up errors reported
//! by the parent of a daemon, SIGHUP after logrotate moved the file,
//! SIGTERM while a pipelined load is in flight, `shutdown-timeout`, and the
//! systemd notification socket.

mod support;

use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn one_master() -> RedisCluster {
    RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    })
}

/// True while `pid` runs (a zombie waiting for a reaper counts as gone).
fn running(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A daemon this test started (not our child): killed if still running
/// when the test ends, whatever way it ends.
struct Daemon {
    pid: u32,
}

impl Daemon {
    fn signal(&self, sig: libc::c_int) {
        if running(self.pid) {
            // SAFETY: kill(2) takes plain integers; the pid is the one the
            // daemon wrote, checked to be running.
            unsafe {
                libc::kill(self.pid as libc::pid_t, sig);
            }
        }
    }

    fn wait_gone(&self, timeout: Duration) {
        wait_until("the daemon to exit", timeout, || {
            (!running(self.pid)).then_some(())
        });
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_conf(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, body).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

fn ping(port: u16) -> bool {
    let Ok(mut c) = Conn::try_connect(&format!("127.0.0.1:{port}")) else {
        return false;
    };
    c.send(&[b"PING"]);
    matches!(c.try_read_reply(Duration::from_secs(2)), Ok(Reply::Simple(s)) if s == "PONG")
}

#[test]
fn daemonize_writes_a_locked_pidfile_and_removes_it_after_sigterm() {
    let cluster = one_master();
    let dir = make_temp_dir();
    let port = free_port();
    let pidfile = dir.join("mithril.pid");
    let log = dir.join("mithril.log");
    let conf = write_conf(
        &dir,
        "mithril.conf",
        &format!(
            "bind 127.0.0.1\nport {port}\ncluster-nodes {}\ndaemonize yes\npidfile {}\nlogfile {}\n",
            cluster.seeds().join(" "),
            pidfile.display(),
            log.display()
        ),
    );
    let started = Instant::now();
    let out = run_mithril(&["-c", conf.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "parent: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // The parent returns only once the child listens: no waiting needed.
    assert!(ping(port), "not serving when the parent returned");
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid: u32 = fs::read_to_string(&pidfile)
        .expect("pidfile written")
        .trim()
        .parse()
        .expect("pidfile holds a number");
    let daemon = Daemon { pid };
    assert!(running(pid));
    // Detached: a session of its own, not a child of ours.
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(
        fields[3],
        pid.to_string(),
        "session id is its own pid (setsid)"
    );
    assert_eq!(fields[4], "0", "no controlling terminal");
    assert_ne!(fields[1], std::process::id().to_string());
    assert_eq!(
        fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        Path::new("/")
    );
    assert_eq!(
        fs::read_link(format!("/proc/{pid}/fd/1")).unwrap(),
        Path::new("/dev/null")
    );

    let mut c = Conn::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(c.cmd(&["SET", "daemon:k", "v"]), Reply::Simple("OK".into()));
    assert_eq!(
        c.cmd(&["GET", "daemon:k"]),
        Reply::Bulk(Some(b"v".to_vec()))
    );
    drop(c);

    // A second instance on the same pidfile refuses, says why, and leaves
    // the file alone.
    let other = run_mithril(&[
        "-c",
        conf.to_str().unwrap(),
        "--port",
        &free_port().to_string(),
    ]);
    assert_eq!(other.status.code(), Some(1));
    let err = text(&other.stderr);
    assert!(
        err.contains(&format!("pidfile {} is locked", pidfile.display()))
            && err.contains(&format!("(pid {pid})")),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(&pidfile).unwrap().trim(),
        pid.to_string()
    );
    assert!(running(pid));

    daemon.signal(libc::SIGTERM);
    daemon.wait_gone(Duration::from_secs(15));
    assert!(!pidfile.exists(), "pidfile removed on exit");
    let log_text = fs::read_to_string(&log).unwrap();
    assert!(log_text.contains(&format!("{pid}:main")), "{log_text}");
    assert!(log_text.contains("mithril stopped"), "{log_text}");
    remove_temp_dir(&dir);
}

#[test]
fn a_daemon_that_cannot_start_makes_the_parent_fail_with_its_error() {
    let dir = make_temp_dir();
    let pidfile = dir.join("m.pid");
    // 192.0.2.1 (TEST-NET-1) is on no interface of this machine.
    let conf = write_conf(
        &dir,
        "m.conf",
        &format!(
            "bind 192.0.2.1\nprotected-mode no\nport {}\ncluster-nodes 127.0.0.1:1\npidfile {}\n",
            free_port(),
            pidfile.display()
        ),
    );
    let out = run_mithril(&["-d", "-c", conf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("cannot listen on 192.0.2.1"), "{err}");
    assert!(err.contains("did not start"), "{err}");
    assert!(!pidfile.exists(), "no pidfile left behind");
    remove_temp_dir(&dir);
}

#[test]
fn sighup_reopens_the_log_file_after_it_was_moved() {
    let cluster = one_master();
    let mut m = Mithril::start(bin(), &cluster.seeds(), "");
    let rotated = m.dir.join("mithril.log.1");
    fs::rename(&m.log_path, &rotated).unwrap();
    // Lines written before the signal still go to the moved file.
    assert!(ping(m.port));
    m.signal(libc::SIGHUP);
    wait_until("a new log file with lines", Duration::from_secs(10), || {
        fs::read_to_string(&m.log_path)
            .ok()
            .filter(|t| t.contains("log file reopened"))
    });
    let old = fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("SIGHUP: reopening the log file"), "{old}");
    assert!(!old.contains("log file reopened"), "{old}");
    // And later lines keep going to the new file.
    assert_eq!(m.stop(), Some(0));
    let new = fs::read_to_string(&m.log_path).unwrap();
    assert!(new.contains("mithril stopped"), "{new}");
    assert!(!fs::read_to_string(&rotated)
        .unwrap()
        .contains("mithril stopped"));
}

/// `(tx_queue, rx_queue)` of the TCP socket `local -> remote` on 127.0.0.1,
/// from /proc/net/tcp.
fn tcp_queues(local: u16, remote: u16) -> Option<(u64, u64)> {
    let table = fs::read_to_string("/proc/net/tcp").ok()?;
    let want_local = format!("0100007F:{local:04X}");
    let want_remote = format!("0100007F:{remote:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) == Some(&want_local.as_str()) && f.get(2) == Some(&want_remote.as_str()) {
            let (tx, rx) = f.get(4)?.split_once(':')?;
            Some((
                u64::from_str_radix(tx, 16).ok()?,
                u64::from_str_radix(rx, 16).ok()?,
            ))
        } else {
            None
        }
    })
}

#[test]
fn sigterm_answers_every_request_already_sent_then_exits_0() {
    const CLIENTS: usize = 4;
    const DEPTH: usize = 2000;
    let cluster = one_master();
    let dir = make_temp_dir();
    let pidfile = dir.join("m.pid");
    let mut m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("pidfile {}\n", pidfile.display()),
    );
    // In the foreground the pid is written once the first topology is in,
    // which can be a moment after the listener answers.
    wait_until_explained(
        "the pidfile to hold the pid",
        Duration::from_secs(10),
        || {
            let held = fs::read_to_string(&pidfile).unwrap_or_default();
            if held.trim() == m.pid.to_string() {
                Ok(())
            } else {
                Err(format!("pidfile holds {held:?}"))
            }
        },
    );
    // Hold every write on the node, so the requests are still in flight
    // when the signal arrives.
    let mut node = cluster.nodes[0].conn();
    assert_eq!(
        node.cmd(&["CLIENT", "PAUSE", "3000", "WRITE"]),
        Reply::Simple("OK".into())
    );
    let mut clients: Vec<Conn> = (0..CLIENTS).map(|_| m.conn()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let key = format!("drain:{i}");
        let one = encode_command(&[b"INCR", key.as_bytes()]);
        c.write_raw(&one.repeat(DEPTH)).unwrap();
    }
    // Wait until the proxy has read every byte sent: our send queues and
    // its receive queues are empty.
    wait_until_explained(
        "the proxy to read the pipelines",
        Duration::from_secs(5),
        || {
            for c in &clients {
                let ours = c.stream().local_addr().unwrap().port();
                let q_out = tcp_queues(ours, m.port);
                let q_in = tcp_queues(m.port, ours);
                match (q_out, q_in) {
                    (Some((0, _)), Some((_, 0))) => {}
                    other => return Err(format!("{ours}: {other:?}")),
                }
            }
            Ok(())
        },
    );
    let signalled = Instant::now();
    m.signal(libc::SIGTERM);
    // New connections are refused once the listener is closed.
    wait_until("the listener to close", Duration::from_secs(5), || {
        Conn::try_connect(&m.addr()).is_err().then_some(())
    });
    for (i, c) in clients.iter_mut().enumerate() {
        for n in 1..=DEPTH as i64 {
            match c.try_read_reply(Duration::from_secs(15)) {
                Ok(Reply::Int(v)) => assert_eq!(v, n, "client {i}: replies in order"),
                other => panic!("client {i}, request {n}: {other:?}"),
            }
        }
        assert!(
            c.is_closed(Duration::from_secs(10)),
            "closed after its last reply"
        );
    }
    let status = m.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0));
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "drained well before shutdown-timeout"
    );
    assert!(!pidfile.exists(), "pidfile removed");
    let mut node = cluster.nodes[0].conn();
    for i in 0..CLIENTS {
        assert_eq!(
            node.cmd(&["GET", &format!("drain:{i}")]),
            Reply::Bulk(Some(DEPTH.to_string().into_bytes()))
        );
    }
    remove_temp_dir(&dir);
}

#[test]
fn shutdown_timeout_bounds_the_drain() {
    let cluster = one_master();
    let mut m = Mithril::start(bin(), &cluster.seeds(), "shutdown-timeout 1\n");
    let mut node = cluster.nodes[0].conn();
    assert_eq!(
        node.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]),
        Reply::Simple("OK".into())
    );
    let mut c = m.conn();
    c.send(&[b"SET", b"held", b"1"]);
    // Let the request reach the node (it is held there).
    wait_until(
        "the SET to reach the node",
        Duration::from_secs(5),
        || match node.cmd(&["CLIENT", "LIST"]) {
            Reply::Bulk(Some(list)) => String::from_utf8_lossy(&list)
                .contains("cmd=set")
                .then_some(()),
            _ => None,
        },
    );
    let t = Instant::now();
    m.signal(libc::SIGTERM);
    let status = m.wait_exit(Duration::from_secs(10));
    let took = t.elapsed();
    node.cmd(&["CLIENT", "UNPAUSE"]);
    assert_eq!(status.code(), Some(0));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "exited after {took:?}, expected about 1 s"
    );
    assert!(c.is_closed(Duration::from_secs(5)));
}

#[test]
fn notify_socket_gets_ready_then_stopping() {
    let cluster = one_master();
    let dir = make_temp_dir();
    let sock_path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let port = free_port();
    let conf = write_conf(
        &dir,
        "m.conf",
        // daemonize is ignored under a service manager.
        &format!(
            "bind 127.0.0.1\nport {port}\ncluster-nodes {}\ndaemonize yes\n",
            cluster.seeds().join(" ")
        ),
    );
    let stdio = fs::File::create(dir.join("stdio.log")).unwrap();
    let mut cmd = Command::new(bin());
    cmd.arg("-c")
        .arg(&conf)
        .env("NOTIFY_SOCKET", &sock_path)
        .stdin(Stdio::null())
        .stdout(stdio.try_clone().unwrap())
        .stderr(stdio);
    let mut child = spawn_child(cmd).unwrap();
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("READY=1 within 20 s");
    assert_eq!(&buf[..n], b"READY=1");
    // Ready means serving, topology loaded.
    let mut c = Conn::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(c.cmd(&["SET", "notify:k", "1"]), Reply::Simple("OK".into()));
    assert_eq!(child.try_wait().unwrap(), None, "stayed in the foreground");
    // SAFETY: our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let n = sock.recv(&mut buf).expect("STOPPING=1");
    assert_eq!(&buf[..n], b"STOPPING=1");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let out = fs::read_to_string(dir.join("stdio.log")).unwrap();
    assert!(out.contains("daemonize ignored"), "{out}");
    remove_temp_dir(&dir);
}

#[test]
fn a_second_sigterm_exits_at_once_and_removes_the_pidfile() {
    let cluster = one_master();
    let dir = make_temp_dir();
    let pidfile = dir.join("m.pid");
    let mut m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("shutdown-timeout 60\npidfile {}\n", pidfile.display()),
    );
    let mut node = cluster.nodes[0].conn();
    assert_eq!(
        node.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]),
        Reply::Simple("OK".into())
    );
    let mut c = m.conn();
    c.send(&[b"SET", b"held", b"1"]);
    wait_until(
        "the SET to reach the node",
        Duration::from_secs(5),
        || match node.cmd(&["CLIENT", "LIST"]) {
            Reply::Bulk(Some(list)) => String::from_utf8_lossy(&list)
                .contains("cmd=set")
                .then_some(()),
            _ => None,
        },
    );
    m.signal(libc::SIGTERM);
    wait_until("the drain to begin", Duration::from_secs(5), || {
        m.log().contains("shutting down").then_some(())
    });
    assert!(m.exit_status().is_none(), "still draining");
    let t = Instant::now();
    m.signal(libc::SIGTERM);
    let status = m.wait_exit(Duration::from_secs(5));
    node.cmd(&["CLIENT", "UNPAUSE"]);
    assert_eq!(status.code(), Some(0));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(!pidfile.exists(), "pidfile removed on the fast way out too");
    remove_temp_dir(&dir);
}
