//! Issue 32, item 7: one budget for the output held for every client
//! (`client-output-total-limit`), and `maxclients` fitted to the
//! descriptor limit at start.
//!
//! Twenty clients that never read each ask for a 16 MB value: each stays
//! under the per-client hard limit (256mb), so only the process-wide
//! budget bounds the sum. Past it the client holding the most is closed,
//! until the sum is back under the budget; a small non-reading client
//! holding far less stays. Run at `threads 1`, `2` and `4` (the
//! clients spread over every worker by the acceptor's placement). The
//! tests run one at a time: each moves hundreds of megabytes.

mod hostile_support;
mod support;

use hostile_support::*;
use std::net::TcpStream;
use std::time::Duration;
use support::*;

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const MB: u64 = 1024 * 1024;
/// The budget the tests set.
const BUDGET: u64 = 64 * MB;
/// The large value each of the twenty asks for.
const VALUE: usize = 16 << 20;
const CLIENTS: usize = 20;

/// `connected_clients` of INFO clients (every worker's).
fn connected_clients(probe: &mut Conn) -> usize {
    let text = probe.cmd(&["INFO", "clients"]).as_str().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no connected_clients in {text}"))
}

/// Reads `n` bytes, or until the peer closed (or `timeout`); whether it
/// closed first.
fn read_up_to(s: &mut TcpStream, n: usize, timeout: Duration) -> (Vec<u8>, bool) {
    use std::io::Read;
    let deadline = std::time::Instant::now() + timeout;
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(
            !left.is_zero(),
            "read {got} of {n} bytes before the deadline"
        );
        s.set_read_timeout(Some(left)).ok();
        match s.read(&mut out[got..]) {
            Ok(0) => {
                out.truncate(got);
                return (out, true);
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                out.truncate(got);
                return (out, true);
            }
        }
    }
    (out, false)
}

/// The output held for every client, summed over the workers (each
/// worker's header carries the sum it sees).
fn output_held(probe: &mut Conn) -> u64 {
    sessions(probe).0["output_held"]
}

fn twenty_clients_that_never_read(threads: usize) {
    let _serial = one_at_a_time();
    // Twenty 16 MB GETs on one node connection keep the node silent
    // while it copies them: longer than the default 5 s on a loaded
    // machine. The budget is what is tested.
    let (_cluster, m) = setup(&format!(
        "threads {threads}\nbackend-timeout 120000\nclient-output-total-limit 64mb"
    ));
    let key = tagged("budget");
    let small_key = tagged("budget-small");
    let mut probe = m.conn();
    let value = vec![b'b'; VALUE];
    assert_eq!(probe.cmd_bytes(&[b"SET", key.as_bytes(), &value]), ok());
    drop(value);
    let small = vec![b's'; 1 << 20];
    assert_eq!(
        probe.cmd_bytes(&[b"SET", small_key.as_bytes(), &small]),
        ok()
    );
    let rss0 = rss_kb(m.pid);
    let peak = PeakRss::start(m.pid);
    // One client holding 1 MB that does not read either: never the
    // largest, so never closed.
    let mut modest = RawClient::new(raw_with(&m, Some(4096)));
    modest.send(&[b"GET", small_key.as_bytes()]);
    let mut clients: Vec<RawClient> = (0..CLIENTS)
        .map(|_| {
            let mut c = RawClient::new(raw_with(&m, Some(4096)));
            c.send(&[b"GET", key.as_bytes()]);
            c
        })
        .collect();
    // At most BUDGET / VALUE of them can be held at once: the others are
    // closed. Each kernel socket takes a little of its reply, so a few
    // more may fit.
    let most_open = (BUDGET / VALUE as u64) as usize + 2;
    // Counted on mithril's side: a client closed after part of its
    // reply was written still has bytes to read, so its socket does not
    // look closed until it reads them.
    wait_until_explained(
        "the clients past the budget to be closed",
        Duration::from_secs(120),
        || {
            let open = connected_clients(&mut probe).saturating_sub(2);
            let held = output_held(&mut probe);
            if open <= most_open && held <= BUDGET {
                Ok(())
            } else {
                Err(format!("{open} of {CLIENTS} open, {} MB held", held >> 20))
            }
        },
    );
    let peak = peak.stop();
    let held = output_held(&mut probe);
    let grew = peak.saturating_sub(rss0) * 1024;
    println!(
        "threads {threads}: RSS grew by {} MB at most (budget {} MB); {} MB held for clients now",
        grew >> 20,
        BUDGET >> 20,
        held >> 20
    );
    assert!(held <= BUDGET, "{} MB held", held >> 20);
    // The budget, plus a reply being read from a node and one that
    // pushed the sum over before its worker looked, per worker.
    let bound = BUDGET + (threads as u64 + 2) * VALUE as u64 + 32 * MB;
    assert!(
        grew <= bound,
        "RSS grew by {} MB, more than {} MB",
        grew >> 20,
        bound >> 20
    );
    assert!(m.log().contains("client-output-total-limit"));
    // The clients left are served in full once they read; the others
    // were cut (some after part of their reply).
    let open = connected_clients(&mut probe) - 2;
    let reply = format!("${VALUE}\r\n").len() + VALUE + 2;
    let mut served = 0;
    for c in clients.iter_mut() {
        let (got, eof) = read_up_to(&mut c.s, reply, Duration::from_secs(60));
        if !eof {
            assert_eq!(got.len(), reply);
            assert!(got.ends_with(b"bbbb\r\n"));
            served += 1;
        }
    }
    // (Replies still on their way when the sum was first back under the
    // budget may have cut one or two more since.)
    assert!(
        (1..=most_open).contains(&served) && served <= open,
        "{served} served in full, {open} were open"
    );
    // The client holding 1 MB was never the largest: it was kept.
    let small_reply = format!("${}\r\n", 1 << 20).len() + (1 << 20) + 2;
    let got = read_exact_within(&mut modest.s, small_reply, Duration::from_secs(60));
    assert!(got.ends_with(b"ssss\r\n"));
    assert_eq!(probe.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn issue32_twenty_clients_that_never_read_stay_within_the_budget_threads_1() {
    twenty_clients_that_never_read(1);
}

#[test]
fn issue32_twenty_clients_that_never_read_stay_within_the_budget_threads_2() {
    twenty_clients_that_never_read(2);
}

#[test]
fn issue32_twenty_clients_that_never_read_stay_within_the_budget_threads_4() {
    twenty_clients_that_never_read(4);
}

/// A script that starts mithril under descriptor limit `limits` (shell
/// `ulimit` words), without the right to raise it again when run as root
/// (Redis raises the hard limit too when it may).
fn limited_bin(dir: &std::path::Path, limits: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("mithril-limited");
    let script = format!(
        "#!/bin/sh\n{limits} || exit 111\nif [ \"$(id -u)\" = 0 ] && command -v setpriv >/dev/null; then\n  \
         exec setpriv --bounding-set -sys_resource {bin} \"$@\"\nfi\nexec {bin} \"$@\"\n",
        bin = bin().display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn config_maxclients(c: &mut Conn) -> u64 {
    let r = c.cmd(&["CONFIG", "GET", "maxclients"]);
    r.as_array()[1].as_str().parse().unwrap()
}

/// Item 7: with a descriptor limit of 160 that mithril may not raise,
/// `maxclients` (10000) is lowered at start to what the limit leaves
/// after the reserve for the nodes, the log says so in Redis's words, and
/// the client past it gets Redis's error while the clients in keep being
/// served by every master (the workers' node connections still fit).
#[test]
fn issue32_maxclients_is_fitted_to_a_descriptor_limit_it_cannot_raise() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let dir = std::env::temp_dir().join(format!("mithril-fds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrapper = limited_bin(&dir, "ulimit -Sn 160 && ulimit -Hn 160");
    let m = Mithril::start(&wrapper, &cluster.seeds(), "threads 2");
    let log = m.log();
    assert!(
        log.contains("You requested maxclients of 10000 requiring at least"),
        "{log}"
    );
    assert!(log.contains("maxclients has been reduced to"), "{log}");
    let mut probe = m.conn();
    let fitted = config_maxclients(&mut probe);
    assert!(fitted > 0 && fitted < 160, "maxclients {fitted}");
    assert!(log.contains(&format!("maxclients has been reduced to {fitted} ")));
    // Every client the fitted maxclients admits (the probe is one).
    let mut clients: Vec<Conn> = (1..fitted).map(|_| m.conn()).collect();
    let mut extra = RawClient::new(raw(&m));
    assert_eq!(
        extra.read_reply(),
        Reply::Error("ERR max number of clients reached".into())
    );
    // Keys on every master, through two workers' connections.
    for (i, c) in clients.iter_mut().enumerate().take(8) {
        let key = format!("fd-key-{i}");
        assert_eq!(c.cmd(&["SET", &key, "v"]), ok());
        assert_eq!(c.cmd(&["GET", &key]), Reply::Bulk(Some(b"v".to_vec())));
    }
    assert_eq!(probe.cmd(&["PING"]), Reply::Simple("PONG".into()));
    drop(m);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 7: a soft limit below what `maxclients` needs, under a hard
/// limit that allows it, is raised, and the log says so as Redis's does.
#[test]
fn issue32_a_low_soft_descriptor_limit_is_raised_for_maxclients() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let dir = std::env::temp_dir().join(format!("mithril-fds-soft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hard: u64 = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "ulimit -Hn"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .parse()
    .unwrap_or(u64::MAX);
    if hard < 12_000 {
        eprintln!("skipped: the hard descriptor limit ({hard}) is too low to raise to");
        return;
    }
    let wrapper = limited_bin(&dir, "ulimit -Sn 160");
    let m = Mithril::start(&wrapper, &cluster.seeds(), "threads 2");
    let log = m.log();
    assert!(
        log.contains("Increased maximum number of open files to")
            && log.contains("(it was originally set to 160)"),
        "{log}"
    );
    assert_eq!(config_maxclients(&mut m.conn()), 10_000);
    drop(m);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 7: a limit that leaves no room for any client after the reserve
/// is a start-up error naming the limit needed.
#[test]
fn issue32_a_descriptor_limit_below_the_reserve_is_a_start_error() {
    let dir = std::env::temp_dir().join(format!("mithril-fds-low-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrapper = limited_bin(&dir, "ulimit -Sn 40 && ulimit -Hn 40");
    let mut m = Mithril::spawn(&wrapper, &["127.0.0.1:1".to_string()], "threads 2");
    let st = m.wait_exit(Duration::from_secs(30));
    assert!(!st.success());
    let text = m.log() + &m.stdio();
    assert!(
        text.contains("Your current 'ulimit -n' of 40 is not enough for the server to start"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
