//! Reload under load (issue 29, item 4's test), with real processes: a
//! cluster, mithril with a `tls-port` beside its plain port, and Debian's
//! `redis-benchmark` (20 clients, SET and GET, `-P 1`) on the plain port,
//! plus a smaller one over TLS, running while the configuration file is
//! reloaded twice, by SIGHUP and by CONFIG RELOAD, each reload adding a
//! user, changing a limit, adding a seed and swapping the TLS certificate
//! for one signed by a new CA; then a broken file, reloaded both ways.
//! At 1, 2 and 4 threads:
//! - each benchmark exits 0 with no error line and reports every request
//!   it sent as completed; INFO counts no client evicted or refused, and
//!   at least as many commands as the benchmarks sent;
//! - after each reload the new user can AUTH, CONFIG GET shows the new
//!   limit, the log names the new seeds, and a new handshake verifies with
//!   only the new CA (and no longer with the previous one);
//! - the broken file is refused with its file:line and changes nothing:
//!   the limit, the users and the certificate stay as the last good
//!   reload left them;
//! - the benchmarks were still running after the last reload (the reloads
//!   really happened under load).
//!
//! The figures (requests, errors, dropped connections) are printed with
//! `eprintln!` (`cargo test --test reload_under_load -- --nocapture`).

mod support;

use std::fs;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::*;

const WAIT: Duration = Duration::from_secs(20);
/// Requests per test (SET, then GET) of the plain benchmark: enough to
/// outlast the reloads even on a busy machine (the proxy is a debug build
/// here).
const REQUESTS: u64 = 100_000;
/// And of the TLS one (4 clients).
const TLS_REQUESTS: u64 = 8_000;

/// A redis-benchmark run, killed (by its own PID) if the test fails first.
struct Bench {
    child: Child,
    out: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl Bench {
    fn start(
        dir: &std::path::Path,
        name: &str,
        port: u16,
        clients: u32,
        n: u64,
        tls: &[String],
    ) -> Bench {
        let (out, err) = (
            dir.join(format!("{name}.out")),
            dir.join(format!("{name}.err")),
        );
        let mut cmd = Command::new("redis-benchmark");
        cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-c", &clients.to_string(), "-n", &n.to_string()])
            .args(["-t", "set,get", "-P", "1", "-r", "10000"])
            .args(tls)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("create the output file"))
            .stderr(fs::File::create(&err).expect("create the error file"));
        let child = spawn_child(cmd).expect("redis-benchmark runs (Debian: redis-tools)");
        Bench { child, out, err }
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the end: (exit status, stdout, stderr).
    fn finish(&mut self) -> (std::process::ExitStatus, String, String) {
        let status = wait_until(
            "redis-benchmark to finish",
            Duration::from_secs(600),
            || self.child.try_wait().ok().flatten(),
        );
        (
            status,
            fs::read_to_string(&self.out).unwrap_or_default(),
            fs::read_to_string(&self.err).unwrap_or_default(),
        )
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// How many requests the benchmark's report says test `name` (SET, GET)
/// completed ("====== SET ======" then "  N requests completed in ...").
fn completed(out: &str, name: &str) -> u64 {
    let head = format!("====== {name} ======");
    let at = out
        .rfind(&head)
        .unwrap_or_else(|| panic!("no {name} report in:\n{out}"));
    out[at..]
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_suffix(" seconds")?
                .split_once(" requests completed in ")?
                .0
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no count in the {name} report:\n{}", &out[at..]))
}

/// The lines of `text` that mention an error, whatever the case.
fn error_lines(text: &str) -> Vec<String> {
    text.split(['\n', '\r'])
        .filter(|l| l.to_lowercase().contains("error"))
        .map(str::to_string)
        .collect()
}

fn stat(c: &mut Conn, section: &str, name: &str) -> u64 {
    let v = info_text_field(c, section, name);
    v.parse()
        .unwrap_or_else(|_| panic!("INFO {section} {name}: {v:?}"))
}

/// The value CONFIG GET shows for `name`.
fn config_get(c: &mut Conn, name: &str) -> String {
    let r = c.cmd(&["CONFIG", "GET", name]);
    let items = r.as_array();
    assert_eq!(items.len(), 2, "CONFIG GET {name}: {r:?}");
    items[1].as_str().to_string()
}

/// Replaces `to` by `from`'s content as the documentation asks: a new
/// file renamed over the old one.
fn replace_file(from: &str, to: &str) {
    let tmp = format!("{to}.new");
    fs::copy(from, &tmp).expect("copy");
    fs::rename(&tmp, to).expect("rename");
}

/// Writes the configuration file whole (a rename: a reload never sees
/// half a file).
fn write_conf(m: &Mithril, text: &str) {
    let next = m.dir.join("next.conf");
    fs::write(&next, text).expect("write the config");
    fs::rename(&next, &m.conf_path).expect("rename the config");
}

/// Waits until INFO counts `n` reloads done.
fn wait_reloads(c: &mut Conn, n: u64) {
    wait_until("the reload", WAIT, || {
        (stat(c, "server", "config_reloads") >= n).then_some(())
    });
}

/// One reload's changes: a user (password `USERpw`), `maxclients`, a
/// seed, and the certificate `CERT.crt` (CN `CERT.mithril.test`) that
/// only `ca` verifies.
struct Step<'a> {
    user: &'a str,
    maxclients: &'a str,
    seed: &'a str,
    cert: &'a str,
    ca: &'a str,
    /// The CA of the certificate it replaces.
    old_ca: &'a str,
}

impl Step<'_> {
    /// Swaps the certificate and writes `prev` plus this step's lines as
    /// the configuration file; returns the file's text.
    fn write(&self, m: &Mithril, certs: &Certs, prev: &str) -> String {
        let (user, max, seed) = (self.user, self.maxclients, self.seed);
        replace_file(
            &certs.path(&format!("{}.crt", self.cert)),
            &certs.path("live.crt"),
        );
        replace_file(
            &certs.path(&format!("{}.key", self.cert)),
            &certs.path("live.key"),
        );
        let text = format!(
            "{prev}user {user} on >{user}pw ~* +@all\nmaxclients {max}\ncluster-nodes {seed}\n"
        );
        write_conf(m, &text);
        text
    }

    /// What the reload must have put in force: the user logs in, CONFIG
    /// GET shows the limit, the log names the seed among the seeds, a new
    /// handshake verifies with the new CA alone and no longer with the
    /// previous one.
    fn check(&self, m: &Mithril, certs: &Certs, tls_port: u16) {
        let mut c = m.conn();
        let pass = format!("{}pw", self.user);
        assert_eq!(
            c.cmd(&["AUTH", self.user, &pass]),
            ok(),
            "AUTH {}",
            self.user
        );
        assert_eq!(config_get(&mut c, "maxclients"), self.maxclients);
        let log = m.log();
        assert!(
            log.lines()
                .any(|l| l.contains("seeds now") && l.contains(self.seed)),
            "no 'seeds now ... {}' in the log:\n{log}",
            self.seed
        );
        let cn = format!("{}.mithril.test", self.cert);
        let (verified, text) = certs.handshake(tls_port, self.ca);
        assert!(
            verified && text.contains(&cn),
            "with {} only: {text}",
            self.ca
        );
        let (verified, text) = certs.handshake(tls_port, self.old_ca);
        assert!(
            !verified,
            "the previous CA {} still verifies: {text}",
            self.old_ca
        );
    }
}

fn reload_under_load(threads: usize) {
    let certs = Certs::make();
    certs.new_ca("ca2", "mithril second CA");
    certs.sign_by("ca2", "second", "second.mithril.test", SERVER_EXT);
    certs.new_ca("ca3", "mithril third CA");
    certs.sign_by("ca3", "third", "third.mithril.test", SERVER_EXT);
    // The TLS benchmark trusts the three CAs: its GET clients connect
    // after the swaps.
    let bundle: String = ["ca.crt", "ca2.crt", "ca3.crt"]
        .iter()
        .map(|f| fs::read_to_string(certs.path(f)).expect("read a CA"))
        .collect();
    fs::write(certs.path("bundle.crt"), bundle).expect("write the bundle");
    let (live_crt, live_key) = (certs.path("live.crt"), certs.path("live.key"));
    replace_file(&certs.path("server.crt"), &live_crt);
    replace_file(&certs.path("server.key"), &live_key);

    let cluster = RedisCluster::start(ClusterSpec::default());
    let seeds = cluster.seeds();
    let tls_port = free_port();
    let conf = format!(
        "threads {threads}\n{}tls-cert-file {live_crt}\ntls-key-file {live_key}\n",
        certs.conf(tls_port, "no")
    );
    let mut m = Mithril::start(bin(), &seeds[..1], &conf);
    let base = fs::read_to_string(&m.conf_path).expect("read the config");
    let mut admin = m.conn();
    let before = |c: &mut Conn| {
        (
            stat(c, "stats", "total_commands_processed"),
            stat(c, "stats", "evicted_clients"),
            stat(c, "stats", "rejected_connections"),
        )
    };
    let (commands0, evicted0, rejected0) = before(&mut admin);

    let started = std::time::Instant::now();
    let mut plain = Bench::start(&m.dir, "plain", m.port, 20, REQUESTS, &[]);
    let tls_args: Vec<String> = ["--tls", "--cacert", &certs.path("bundle.crt")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut tls = Bench::start(&m.dir, "tls", tls_port, 4, TLS_REQUESTS, &tls_args);
    // Under way: the proxy is answering the benchmark's requests.
    wait_until("the benchmark under way", WAIT, || {
        (stat(&mut admin, "stats", "total_commands_processed") > commands0 + 2_000).then_some(())
    });

    // 1. SIGHUP, then 2. CONFIG RELOAD: each a user, a limit, a seed and
    // the certificate of a new CA.
    let steps = [
        ("alice", "777", &seeds[1], "second", "ca2.crt", "ca.crt"),
        ("bob", "888", &seeds[2], "third", "ca3.crt", "ca2.crt"),
    ];
    let mut text = base.clone();
    for (i, (user, maxclients, seed, cert, ca, old_ca)) in steps.into_iter().enumerate() {
        let step = Step {
            user,
            maxclients,
            seed,
            cert,
            ca,
            old_ca,
        };
        text = step.write(&m, &certs, &text);
        if i == 0 {
            m.signal(libc::SIGHUP);
            wait_reloads(&mut admin, 1);
        } else {
            assert_eq!(admin.cmd(&["CONFIG", "RELOAD"]), ok());
        }
        step.check(&m, &certs, tls_port);
    }
    let alice = m.conn().cmd(&["AUTH", "alice", "alicepw"]);
    assert_eq!(alice, ok(), "alice stays");

    // 3. A broken file, both ways: refused, nothing changes.
    let broken =
        format!("{text}user carol on >carolpw ~* +@all\nmaxclients 999\nno-such-directive 1\n");
    write_conf(&m, &broken);
    let r = admin.cmd(&["CONFIG", "RELOAD"]);
    assert!(
        r.is_error() && r.as_error().contains("mithril.conf:"),
        "the broken file's reload: {r:?}"
    );
    m.signal(libc::SIGHUP);
    wait_until("the SIGHUP's refusal", WAIT, || {
        (stat(&mut admin, "server", "config_reload_failures") >= 2).then_some(())
    });
    assert_eq!(config_get(&mut admin, "maxclients"), "888");
    assert_eq!(m.conn().cmd(&["AUTH", "bob", "bobpw"]), ok());
    assert!(m.conn().cmd(&["AUTH", "carol", "carolpw"]).is_error());
    let (verified, text) = certs.handshake(tls_port, "ca3.crt");
    assert!(verified && text.contains("third.mithril.test"), "{text}");
    let reloads = stat(&mut admin, "server", "config_reloads");
    let failures = stat(&mut admin, "server", "config_reload_failures");
    assert_eq!((reloads, failures), (2, 2));

    // Everything above happened while the benchmark ran.
    assert!(
        plain.running(),
        "redis-benchmark ended before the last reload: raise REQUESTS"
    );
    let clients_during = stat(&mut admin, "clients", "connected_clients");
    let reloads_at = started.elapsed();

    let (status, out, err) = plain.finish();
    let bench_took = started.elapsed();
    let errors = [error_lines(&out), error_lines(&err)].concat();
    assert!(status.success(), "redis-benchmark: {status}\n{out}\n{err}");
    assert!(
        errors.is_empty(),
        "redis-benchmark's error lines: {errors:?}"
    );
    let (sets, gets) = (completed(&out, "SET"), completed(&out, "GET"));
    assert_eq!((sets, gets), (REQUESTS, REQUESTS), "{out}");

    let (tls_status, tls_out, tls_err) = tls.finish();
    let tls_errors = [error_lines(&tls_out), error_lines(&tls_err)].concat();
    assert!(
        tls_status.success(),
        "redis-benchmark --tls: {tls_status}\n{tls_out}\n{tls_err}"
    );
    assert!(
        tls_errors.is_empty(),
        "redis-benchmark --tls: {tls_errors:?}"
    );
    let (tls_sets, tls_gets) = (completed(&tls_out, "SET"), completed(&tls_out, "GET"));
    assert_eq!(
        (tls_sets, tls_gets),
        (TLS_REQUESTS, TLS_REQUESTS),
        "{tls_out}"
    );

    let (commands1, evicted1, rejected1) = before(&mut admin);
    let sent = 2 * (REQUESTS + TLS_REQUESTS);
    assert!(
        commands1 - commands0 >= sent,
        "INFO counts {} commands, the benchmarks sent {sent}",
        commands1 - commands0
    );
    let dropped = (evicted1 - evicted0) + (rejected1 - rejected0);
    assert_eq!(dropped, 0, "evicted or refused clients");
    eprintln!(
        "reload under load, threads {threads}: 2 reloads applied (SIGHUP, CONFIG RELOAD: a user, \
         maxclients, a seed, a certificate each) and 2 broken files refused while \
         redis-benchmark ran; plain (-c 20 -P 1): SET {sets} + GET {gets} requests answered, \
         {} errors; TLS (-c 4): SET {tls_sets} + GET {tls_gets} answered, {} errors; proxy: \
         {} commands, {dropped} connections dropped (evicted {}, refused {}), \
         {clients_during} clients connected after the last reload; the reloads were over \
         {:.1} s into the benchmark's {:.1} s",
        errors.len(),
        tls_errors.len(),
        commands1 - commands0,
        evicted1 - evicted0,
        rejected1 - rejected0,
        reloads_at.as_secs_f64(),
        bench_took.as_secs_f64(),
    );
    m.stop();
}

#[test]
fn a_reload_under_load_drops_nothing_threads_1() {
    reload_under_load(1);
}

#[test]
fn a_reload_under_load_drops_nothing_threads_2() {
    reload_under_load(2);
}

#[test]
fn a_reload_under_load_drops_nothing_threads_4() {
    reload_under_load(4);
}
