//! Upgrades without dropping a client (`mithril --upgrade`): a second
//! process started on the same configuration takes the listening sockets
//! of the running one through `upgrade-socket`, the old one stops
//! accepting, serves the clients it has until they leave, and exits 0; the
//! pidfile names the new one. Under load: `redis-benchmark` running across
//! the hand-over finishes with every request answered, and a client that
//! connects afresh for every request is never refused. At threads 1, 2
//! and 4 (the drain involves every worker).

mod support;

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::*;

/// A mithril process of this test, killed if still running at the end.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        kill_and_reap(&mut self.0);
    }
}

fn kill_and_reap(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

fn start(conf: &Path, upgrade: bool) -> Proc {
    let mut cmd = Command::new(bin());
    if upgrade {
        cmd.arg("--upgrade");
    }
    cmd.arg("-c")
        .arg(conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Proc(spawn_child(cmd).expect("start mithril"))
}

fn pid_in(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn upgrade_under_load(threads: usize) {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 2,
        ..ClusterSpec::default()
    });
    let dir = make_temp_dir();
    let port = free_port();
    let conf = dir.join("mithril.conf");
    let pidfile = dir.join("mithril.pid");
    fs::write(
        &conf,
        format!(
            "bind 127.0.0.1\nport {port}\ncluster-nodes {}\nthreads {threads}\n\
             upgrade-socket {}\npidfile {}\nlogfile {}\nshutdown-timeout 20\n",
            cluster.seeds()[0],
            dir.join("upgrade.sock").display(),
            pidfile.display(),
            dir.join("mithril.log").display(),
        ),
    )
    .unwrap();
    let mut old = start(&conf, false);
    let addr = format!("127.0.0.1:{port}");
    wait_until("the old process serves", Duration::from_secs(20), || {
        let mut c = Conn::try_connect(&addr).ok()?;
        (c.cmd(&["PING"]) == Reply::Simple("PONG".into()) && pid_in(&pidfile) == Some(old.0.id()))
            .then_some(())
    });

    // Load on long-lived connections: redis-benchmark, 20 clients.
    let bench_out = dir.join("bench.out");
    let bench = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-c", "20", "-n", "150000", "-t", "set,get", "-q", "-r", "1000",
        ])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&bench_out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-benchmark (Debian: redis-tools)");
    let mut bench = Proc(bench);
    // And a client that connects afresh for every request.
    let stop = Arc::new(AtomicBool::new(false));
    let fresh = {
        let (stop, addr) = (stop.clone(), addr.clone());
        thread::spawn(move || {
            let (mut ok_n, mut failures) = (0u64, Vec::new());
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let key = format!("fresh:{i}");
                match Conn::try_connect(&addr) {
                    Ok(mut c) => {
                        match c.try_pipeline(&[argv(&["SET", &key, "v"]), argv(&["GET", &key])]) {
                            Ok(r) if r[0] == ok() && r[1] == bulk("v") => ok_n += 1,
                            Ok(r) => failures.push(format!("{r:?}")),
                            Err(e) => failures.push(e.to_string()),
                        }
                    }
                    Err(e) => failures.push(format!("connect: {e}")),
                }
            }
            (ok_n, failures)
        })
    };
    thread::sleep(Duration::from_millis(300));

    let started = Instant::now();
    let new = start(&conf, true);
    wait_until(
        "the pidfile to name the new process",
        Duration::from_secs(30),
        || (pid_in(&pidfile) == Some(new.0.id())).then_some(()),
    );
    let handed = started.elapsed();
    // The old one stops once its clients are gone.
    let status = wait_until("the old process to exit", Duration::from_secs(60), || {
        old.0.try_wait().ok().flatten()
    });
    assert!(status.success(), "old process: {status}");
    let status = wait_until(
        "redis-benchmark to finish",
        Duration::from_secs(120),
        || bench.0.try_wait().ok().flatten(),
    );
    let out = fs::read_to_string(&bench_out).unwrap_or_default();
    let mut err = String::new();
    if let Some(mut e) = bench.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(status.success(), "redis-benchmark: {status}\n{out}\n{err}");
    assert!(out.contains("SET:") && out.contains("GET:"), "{out}");
    assert!(
        !out.to_lowercase().contains("error") && !err.to_lowercase().contains("error"),
        "{out}\n{err}"
    );
    // New connections went on being served across the hand-over.
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (served, failures) = fresh.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(served > 20, "fresh connections served: {served}");
    // The new process serves alone now.
    let mut c = Conn::connect(&addr);
    assert_eq!(c.cmd(&["SET", "after", "1"]), ok());
    let log = fs::read_to_string(dir.join("mithril.log")).unwrap_or_default();
    assert!(log.contains("took over from the old process"), "{log}");
    eprintln!(
        "threads {threads}: pidfile named the new process {} ms after it started; \
         redis-benchmark: {}; {served} fresh connections, none refused",
        handed.as_millis(),
        out.lines()
            .filter_map(|l| l.rsplit('\r').next())
            .filter(|l| l.contains("requests per second"))
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(new);
    remove_temp_dir(&dir);
}

#[test]
fn an_upgrade_under_load_drops_no_client_threads_1() {
    upgrade_under_load(1);
}

#[test]
fn an_upgrade_under_load_drops_no_client_threads_2() {
    upgrade_under_load(2);
}

#[test]
fn an_upgrade_under_load_drops_no_client_threads_4() {
    upgrade_under_load(4);
}

/// A pool on `port` (its one server need not run), with `extra` lines.
fn small_conf(path: &Path, port: u16, extra: &str) {
    fs::write(
        path,
        format!("port {port}\npool p listen 127.0.0.1:{port}\npool p server 127.0.0.1:1\n{extra}"),
    )
    .unwrap();
}

/// `mithril ARGS` exits 1 saying `needle`.
fn refused(args: &[&str], needle: &str) {
    let o = run_mithril(args);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(text.contains(needle), "{text}");
}

#[test]
fn upgrade_refusals_say_why() {
    let dir = make_temp_dir();
    let port = free_port();
    let conf = dir.join("m.conf");
    let sock = dir.join("up.sock");
    let with_sock = format!("upgrade-socket {}\n", sock.display());
    small_conf(&conf, port, &with_sock);
    // Nothing runs yet: --upgrade has nobody to take over from.
    let c = conf.to_str().unwrap();
    refused(
        &["--upgrade", "-c", c],
        "no mithril answers on the upgrade socket",
    );
    // One runs: a second without --upgrade is refused on the socket.
    let _first = start(&conf, false);
    wait_until("the first process serves", Duration::from_secs(20), || {
        Conn::try_connect(&format!("127.0.0.1:{port}"))
            .ok()
            .map(|_| ())
    });
    wait_until("the upgrade socket", Duration::from_secs(10), || {
        sock.exists().then_some(())
    });
    let other = dir.join("other.conf");
    small_conf(&other, free_port(), &with_sock);
    refused(
        &["-c", other.to_str().unwrap()],
        "another mithril listens there",
    );
    // Without upgrade-socket, --upgrade says what is missing.
    let bare = dir.join("bare.conf");
    small_conf(&bare, free_port(), "");
    refused(
        &["--upgrade", "-c", bare.to_str().unwrap()],
        "needs upgrade-socket",
    );
    remove_temp_dir(&dir);
}
