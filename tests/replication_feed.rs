//! SYNC and PSYNC answered by mithril: a replication feed merged from
//! every master's stream (issue 14's suite, cause E: the Tcl suite's
//! `attach_to_replication_stream`).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::{
    bin, cluster_and_mithril, ok, wait_until, ClusterSpec, Conn, Mithril, RedisCluster, Reply,
};

/// A client reading a replication stream the way the Tcl suite does.
struct Feed {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Feed {
    /// Send `first` (SYNC or PSYNC) and read up to the end of the RDB.
    /// Returns the feed, the lines before the RDB and the RDB.
    fn attach(addr: &str, first: &str) -> (Feed, Vec<String>, Vec<u8>) {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut f = Feed {
            stream,
            buf: Vec::new(),
        };
        f.stream
            .write_all(format!("{first}\r\n").as_bytes())
            .unwrap();
        let mut lines = Vec::new();
        let count = loop {
            let line = f.line();
            if let Some(n) = line.strip_prefix('$') {
                break n.parse::<usize>().unwrap();
            }
            assert!(
                line.is_empty() || line.starts_with("+FULLRESYNC"),
                "unexpected line before the RDB: {line:?}"
            );
            lines.push(line);
        };
        let rdb = f.take(count);
        (f, lines, rdb)
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk).expect("feed read");
        assert!(n > 0, "the feed closed");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let s = String::from_utf8_lossy(&line).into_owned();
                return s.trim_end_matches(['\r', '\n']).to_string();
            }
            self.fill();
        }
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill();
        }
        self.buf.drain(..n).collect()
    }

    /// The next propagated command, its name lowercased (as the suite's
    /// `read_from_replication_stream`).
    fn command(&mut self) -> Vec<String> {
        let head = self.line();
        let n: usize = head
            .strip_prefix('*')
            .unwrap_or_else(|| panic!("not an array: {head:?}"))
            .parse()
            .unwrap();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let h = self.line();
            let len: usize = h.strip_prefix('$').unwrap().parse().unwrap();
            let mut arg = String::from_utf8_lossy(&self.take(len + 2)[..len]).into_owned();
            if i == 0 {
                arg = arg.to_lowercase();
            }
            out.push(arg);
        }
        out
    }

    /// Whether anything more arrives within `wait`.
    fn quiet_for(&mut self, wait: Duration) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut one = [0u8; 1];
        let r = self.stream.read(&mut one);
        self.stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        match r {
            Ok(n) if n > 0 => {
                self.buf.push(one[0]);
                false
            }
            _ => true,
        }
    }
}

impl Feed {
    /// Every command that arrives within `dur`.
    fn commands_for(&mut self, dur: Duration) -> Vec<Vec<String>> {
        let end = std::time::Instant::now() + dur;
        let mut out = Vec::new();
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || self.quiet_for(left) {
                return out;
            }
            out.push(self.command());
        }
    }
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn connected_slaves(cluster: &RedisCluster) -> Vec<i64> {
    cluster
        .masters()
        .iter()
        .map(|n| {
            let info = n.conn().cmd(&["INFO", "replication"]).as_str().to_string();
            info.lines()
                .find_map(|l| l.strip_prefix("connected_slaves:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(-1)
        })
        .collect()
}

/// A plain (not cluster) redis-server in `dir`, answering PING.
struct Plain {
    child: std::process::Child,
    dir: std::path::PathBuf,
    addr: String,
}

impl Plain {
    fn start(dir: std::path::PathBuf) -> Plain {
        let port = support::free_port();
        let mut cmd = std::process::Command::new(support::redis_server_path());
        cmd.args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&dir)
        .args(["--dbfilename", "dump.rdb", "--logfile", "redis.log"]);
        let child = support::spawn_child(cmd).unwrap();
        let addr = format!("127.0.0.1:{port}");
        let mut c = wait_until("the server up", Duration::from_secs(10), || {
            Conn::try_connect(&addr).ok()
        });
        wait_until("PONG", Duration::from_secs(10), || {
            (c.cmd(&["PING"]).as_str() == "PONG").then_some(())
        });
        Plain { child, dir, addr }
    }

    fn conn(&self) -> Conn {
        Conn::connect(&self.addr)
    }
}

impl Drop for Plain {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        support::remove_temp_dir(&self.dir);
    }
}

/// The RDB loads in a real redis-server as an empty data set.
fn assert_loads_as_empty(rdb: &[u8]) {
    let dir = support::make_temp_dir();
    std::fs::write(dir.join("dump.rdb"), rdb).unwrap();
    let server = Plain::start(dir);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(0));
    let log = std::fs::read_to_string(server.dir.join("redis.log")).unwrap();
    assert!(log.contains("DB loaded from disk"), "{log}");
}

/// A real redis-server made a replica of mithril (REPLICAOF): it takes
/// the empty RDB, then applies the writes sent to every master.
#[test]
fn a_real_replica_follows_every_master_through_mithril() {
    let (cluster, m) = cluster_and_mithril("");
    let replica = Plain::start(support::make_temp_dir());
    let mut r = replica.conn();
    let addr = m.addr();
    let (host, port) = addr.rsplit_once(':').unwrap();
    assert_eq!(r.cmd(&["REPLICAOF", host, port]), ok());
    wait_until("the replica's link up", Duration::from_secs(20), || {
        let info = r.cmd(&["INFO", "replication"]).as_str().to_string();
        info.contains("master_link_status:up").then_some(())
    });
    let mut c = m.conn();
    let keys = cluster.key_per_master("real:");
    for (i, (k, _)) in keys.iter().enumerate() {
        assert_eq!(c.cmd(&["SET", k, &i.to_string()]), ok());
    }
    let (k0, _) = &keys[0];
    let counter = format!("{{{k0}}}:n");
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", &counter]).as_str(), "QUEUED");
    assert_eq!(c.cmd(&["INCR", &counter]).as_str(), "QUEUED");
    assert_eq!(c.cmd(&["EXEC"]).as_array().len(), 2);
    wait_until(
        "every write on the replica",
        Duration::from_secs(10),
        || {
            let all = keys
                .iter()
                .enumerate()
                .all(|(i, (k, _))| r.cmd(&["GET", k]) == support::bulk(&i.to_string()));
            (all && r.cmd(&["GET", &counter]) == support::bulk("2")).then_some(())
        },
    );
    assert_eq!(r.cmd(&["DBSIZE"]), Reply::Int(4));
    // A later write follows too.
    assert_eq!(c.cmd(&["DEL", k0]), Reply::Int(1));
    wait_until("the DEL on the replica", Duration::from_secs(10), || {
        (r.cmd(&["EXISTS", k0]) == Reply::Int(0)).then_some(())
    });
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), ok());
    wait_until("the replicas gone", Duration::from_secs(10), || {
        (connected_slaves(&cluster) == vec![0, 0, 0]).then_some(())
    });
}

/// SYNC through mithril: an empty RDB a server loads, then the SETs sent to
/// keys of all three masters, in the order they were sent, with one SELECT
/// first; a MULTI/EXEC on one master arrives as one block.
#[test]
fn sync_feeds_an_rdb_then_every_master_s_writes_in_order() {
    let (cluster, m) = cluster_and_mithril("");
    let mut c = m.conn();
    let keys = cluster.key_per_master("feed:");
    assert_eq!(keys.len(), 3);
    let (mut feed, lines, rdb) = Feed::attach(&m.addr(), "SYNC");
    assert!(lines.iter().all(String::is_empty), "{lines:?}");
    assert_eq!(&rdb[..9], b"REDIS0010");
    assert_loads_as_empty(&rdb);
    // Round robin over the masters, twice.
    let mut sent = Vec::new();
    for round in 0..2 {
        for (k, _) in &keys {
            let v = format!("v{round}");
            assert_eq!(c.cmd(&["SET", k, &v]), ok());
            sent.push(cmd(&["set", k, &v]));
        }
    }
    assert_eq!(feed.command(), cmd(&["select", "0"]));
    for want in &sent {
        assert_eq!(&feed.command(), want);
    }
    // A transaction on one master, while the others are written to from
    // another client: its block is whole.
    let (k0, _) = &keys[0];
    let tag = format!("{{{k0}}}");
    let mut other = m.conn();
    let writer = {
        let others: Vec<String> = keys[1..].iter().map(|(k, _)| k.clone()).collect();
        std::thread::spawn(move || {
            for i in 0..200 {
                for k in &others {
                    assert_eq!(other.cmd(&["SET", k, &i.to_string()]), ok());
                }
            }
        })
    };
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for i in 0..20 {
        let k = format!("{tag}:{i}");
        assert_eq!(c.cmd(&["SET", &k, "x"]).as_str(), "QUEUED");
    }
    let exec = c.cmd(&["EXEC"]);
    assert_eq!(exec.as_array().len(), 20);
    writer.join().unwrap();
    let mut seen_multi = false;
    let mut others = 0;
    while !seen_multi || others < 400 {
        let got = feed.command();
        assert_ne!(got[0], "select", "a second select: {got:?}");
        if got[0] == "multi" {
            for i in 0..20 {
                assert_eq!(feed.command(), cmd(&["set", &format!("{tag}:{i}"), "x"]));
            }
            assert_eq!(feed.command(), cmd(&["exec"]));
            seen_multi = true;
        } else {
            assert_eq!(got[0], "set", "{got:?}");
            others += 1;
        }
    }
    assert!(feed.quiet_for(Duration::from_millis(300)));
    drop(m);
}

/// PSYNC is answered with a full resynchronisation, as Redis 7.0.15
/// answers `PSYNC ? -1`: `+FULLRESYNC <40 hex> <offset>`, then the RDB.
#[test]
fn psync_gets_a_full_resync() {
    let (cluster, m) = cluster_and_mithril("");
    let (mut feed, lines, rdb) = Feed::attach(&m.addr(), "PSYNC ? -1");
    let first = &lines[0];
    let parts: Vec<&str> = first.split(' ').collect();
    assert_eq!(parts.len(), 3, "{first}");
    assert_eq!(parts[0], "+FULLRESYNC");
    assert_eq!(parts[1].len(), 40);
    assert!(parts[1].bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
    assert_eq!(parts[2], "0");
    assert_eq!(&rdb[..9], b"REDIS0010");
    let (k, _) = &cluster.key_per_master("psync:")[1];
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", k, "1"]), ok());
    assert_eq!(c.cmd(&["DEL", k]), Reply::Int(1));
    assert_eq!(feed.command(), cmd(&["select", "0"]));
    assert_eq!(feed.command(), cmd(&["set", k, "1"]));
    assert_eq!(feed.command(), cmd(&["del", k]));
}

/// The masters' PINGs (their link keepalives) reach the feed when it was
/// quiet for a second: a replica hears the link is alive, not once per
/// master.
#[test]
fn masters_pings_reach_the_feed_at_most_once_a_second() {
    let (cluster, m) = cluster_and_mithril("");
    let (mut feed, _, _) = Feed::attach(&m.addr(), "SYNC");
    for n in cluster.masters() {
        assert_eq!(
            n.conn()
                .cmd(&["CONFIG", "SET", "repl-ping-replica-period", "1"]),
            ok()
        );
    }
    let got = feed.commands_for(Duration::from_millis(4500));
    let pings = got.iter().filter(|c| c[0] == "ping").count();
    // Three masters ping about 12 times in 4.5 s.
    assert!((2..=5).contains(&pings), "{pings} pings: {got:?}");
    assert!(
        got.iter().all(|c| c[0] == "ping" || c[0] == "select"),
        "{got:?}"
    );
}

/// SYNC needs admin rights: another user gets the NOPERM a node gives.
#[test]
fn sync_needs_admin_rights() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start_locked(
        bin(),
        &cluster.seeds(),
        "user default off\nuser writer on >w-pw mode write\nuser boss on >b-pw mode admin\n",
    );
    let mut c = m.conn();
    assert_eq!(c.cmd(&["AUTH", "writer", "w-pw"]), ok());
    for args in [&["SYNC"][..], &["PSYNC", "?", "-1"]] {
        let name = args[0].to_lowercase();
        assert_eq!(
            c.cmd(args).as_error(),
            format!("NOPERM this user has no permissions to run the '{name}' command")
        );
    }
    assert_eq!(c.cmd(&["PING"]).as_str(), "PONG");
    // The admin gets the feed.
    let mut raw = TcpStream::connect(m.addr()).unwrap();
    raw.write_all(b"AUTH boss b-pw\r\n").unwrap();
    let mut okbuf = [0u8; 5];
    raw.read_exact(&mut okbuf).unwrap();
    assert_eq!(&okbuf, b"+OK\r\n");
    raw.write_all(b"SYNC\r\n").unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 256];
    while !got.windows(4).any(|w| w == b"$18\r") {
        let n = raw.read(&mut chunk).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&chunk[..n]);
    }
}

/// Closing the feed's client closes its links: the masters'
/// `connected_slaves` goes back to 0. SIGTERM closes an open feed too.
#[test]
fn closing_the_client_releases_the_masters() {
    let (cluster, mut m) = cluster_and_mithril("");
    assert_eq!(connected_slaves(&cluster), vec![0, 0, 0]);
    let (feed, _, _) = Feed::attach(&m.addr(), "SYNC");
    wait_until("a replica on every master", Duration::from_secs(10), || {
        (connected_slaves(&cluster) == vec![1, 1, 1]).then_some(())
    });
    drop(feed);
    wait_until("the replicas gone", Duration::from_secs(10), || {
        (connected_slaves(&cluster) == vec![0, 0, 0]).then_some(())
    });
    // Another one, then SIGTERM: the feed closes and mithril exits.
    let (mut feed, _, _) = Feed::attach(&m.addr(), "SYNC");
    wait_until("a replica on every master", Duration::from_secs(10), || {
        (connected_slaves(&cluster) == vec![1, 1, 1]).then_some(())
    });
    m.signal(libc::SIGTERM);
    let status = m.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    let mut rest = Vec::new();
    let _ = feed.stream.read_to_end(&mut rest);
    wait_until("the replicas gone", Duration::from_secs(10), || {
        (connected_slaves(&cluster) == vec![0, 0, 0]).then_some(())
    });
}

/// A feed that never reads is closed at `client-output-buffer-limit
/// replica` (its links with it); other clients are served meanwhile.
#[test]
fn a_feed_that_never_reads_is_cut_at_its_limit() {
    let (cluster, m) = cluster_and_mithril("client-output-buffer-limit replica 1mb 0 0\n");
    let (mut feed, _, _) = Feed::attach(&m.addr(), "SYNC");
    wait_until("a replica on every master", Duration::from_secs(10), || {
        (connected_slaves(&cluster) == vec![1, 1, 1]).then_some(())
    });
    let mut c = m.conn();
    let big = "x".repeat(128 * 1024);
    let keys = cluster.key_per_master("cut:");
    // Up to 24mb into the stream, never read: past 1mb plus what the
    // sockets hold.
    let mut cut = false;
    for round in 0..64 {
        for (k, _) in &keys {
            assert_eq!(c.cmd(&["SET", &format!("{k}{round}"), &big]), ok());
        }
        if connected_slaves(&cluster) == vec![0, 0, 0] {
            cut = true;
            break;
        }
    }
    if !cut {
        wait_until("the feed cut", Duration::from_secs(10), || {
            (connected_slaves(&cluster) == vec![0, 0, 0]).then_some(())
        });
    }
    assert_eq!(c.cmd(&["PING"]).as_str(), "PONG");
    let first = format!("{}0", keys[0].0);
    assert_eq!(
        c.cmd(&["GET", &first]).as_bulk().map(<[u8]>::len),
        Some(big.len())
    );
    let info = c.cmd(&["INFO", "stats"]).as_str().to_string();
    assert!(
        info.contains("evicted_clients_output_buffer:1\r\n"),
        "{info}"
    );
    // Its socket reaches its end (what was written before the cut, then
    // the close).
    feed.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = feed.stream.read_to_end(&mut rest);
}

/// Toward a password-protected cluster the links authenticate with
/// `backend-password`, as mithril's other connections do.
#[test]
fn the_links_authenticate_with_backend_password() {
    const PW: &str = "feed-s3cret";
    let cluster = RedisCluster::start(ClusterSpec::default());
    // The harness reads the slot map over connections without AUTH.
    let keys = cluster.key_per_master("pw:");
    for n in &cluster.nodes {
        assert_eq!(n.conn().cmd(&["CONFIG", "SET", "requirepass", PW]), ok());
    }
    let m = Mithril::start(bin(), &cluster.seeds(), &format!("backend-password {PW}\n"));
    let (mut feed, _, rdb) = Feed::attach(&m.addr(), "SYNC");
    assert_eq!(&rdb[..9], b"REDIS0010");
    let mut c = m.conn();
    for (k, _) in &keys {
        assert_eq!(c.cmd(&["SET", k, "1"]), ok());
    }
    assert_eq!(feed.command(), cmd(&["select", "0"]));
    for (k, _) in &keys {
        assert_eq!(feed.command(), cmd(&["set", k, "1"]));
    }
}

/// A master that refuses the link's SYNC (here its user may not run it):
/// the client gets an error where the RDB's header would be, then the
/// close, and the other masters' links go too.
#[test]
fn a_master_refusing_sync_ends_the_feed_with_its_reason() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let setuser = "ACL SETUSER feeder on >f-pw ~* &* +@all -sync -psync";
    let setuser: Vec<&str> = setuser.split(' ').collect();
    for n in &cluster.nodes {
        assert_eq!(n.conn().cmd(&setuser), ok());
    }
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "backend-user feeder\nbackend-password f-pw\n",
    );
    assert_eq!(m.conn().cmd(&["SET", "k", "v"]), ok());
    let mut c = Conn::connect(&m.addr());
    c.write_raw(b"SYNC\r\n").unwrap();
    let got =
        String::from_utf8_lossy(&c.read_raw_until_closed(Duration::from_secs(10))).into_owned();
    let got = got.trim_start_matches('\n');
    assert!(got.starts_with("-ERR mithril: "), "{got:?}");
    assert!(got.contains("refused SYNC: NOPERM"), "{got:?}");
    assert!(
        got.ends_with("\r\n") && got.matches("\r\n").count() == 1,
        "{got:?}"
    );
    wait_until("the replicas gone", Duration::from_secs(10), || {
        (connected_slaves(&cluster) == vec![0, 0, 0]).then_some(())
    });
    assert_eq!(m.conn().cmd(&["GET", "k"]), support::bulk("v"));
}
