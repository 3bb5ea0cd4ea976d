//! TLS for a pool of standalone servers (issue 29, items 1 and 2): a
//! pool's own TLS listener (`pool NAME tls-listen HOST:PORT`, the
//! top-level certificate) beside its plain one, and its servers reached
//! over TLS (`tls-cluster yes`) when they run with a `tls-port` and
//! `tls-auth-clients yes`. With real processes: a CA and certificates by
//! `openssl`, two Debian `redis-server`s, Debian's `redis-cli --tls` as
//! the client, at threads 1, 2 and 4 with every redis-cli run a new
//! connection placed on the workers in turn.
//! - keys written through the pool's TLS listener are read back through
//!   its plain one, and are on the servers (each of them has some);
//! - every connection mithril holds to a server is on its TLS port;
//! - a reload moves the pool's `tls-listen`: the new address serves, the
//!   old one is closed, a plain client keeps its connection;
//! - (item 3) a server that accepts TCP and never answers the TLS
//!   handshake, with `backend-timeout 0`: the GETs it would serve get an
//!   error within `tls-handshake-timeout` instead of hanging, on every
//!   worker, and a client of the same worker keeps being served by the
//!   healthy server while another waits on the silent one.

mod support;

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::*;

fn pool_over_tls_both_sides(threads: usize) {
    let certs = Certs::make();
    let node = certs.node_tls(AuthClients::Yes);
    let servers: Vec<(Standalone, u16)> = (0..2)
        .map(|_| {
            let tls_port = free_port();
            let s = Standalone::start_with(&format!(
                "tls-port {tls_port}\ntls-cert-file {}\ntls-key-file {}\n\
                 tls-ca-cert-file {}\ntls-auth-clients yes\n",
                node.cert_file, node.key_file, node.ca_cert_file
            ));
            (s, tls_port)
        })
        .collect();
    let (plain, tls) = (free_port(), free_port());
    let mut conf = format!(
        "threads {threads}\nplacement round-robin\nport {plain}\n\
         pool p listen 127.0.0.1:{plain}\npool p tls-listen 127.0.0.1:{tls}\n\
         pool p hash md5\npool p distribution ketama\n\
         tls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-auth-clients no\n\
         tls-cluster yes\ntls-client-cert-file {}\ntls-client-key-file {}\n",
        certs.path("server.crt"),
        certs.path("server.key"),
        certs.path("ca.crt"),
        certs.path("client.crt"),
        certs.path("client.key"),
    );
    for (i, (_, tls_port)) in servers.iter().enumerate() {
        conf.push_str(&format!("pool p server 127.0.0.1:{tls_port}:1 s{i}\n"));
    }
    let m = Mithril::start(bin(), &[], &conf);

    let keys: Vec<String> = (0..24).map(|i| format!("tlsp:{threads}:{i}")).collect();
    for k in &keys {
        let out = certs.cli(tls, false, &["SET", k, &format!("v-{k}")], None);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "OK",
            "SET {k} through the pool's TLS listener: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut c = m.conn();
    for k in &keys {
        assert_eq!(
            c.cmd(&["GET", k]).as_bulk(),
            Some(format!("v-{k}").as_bytes()),
            "{k} read back through the plain listener"
        );
    }
    let on_servers: Vec<i64> = servers
        .iter()
        .map(|(s, _)| s.conn().cmd(&["DBSIZE"]).as_int())
        .collect();
    assert_eq!(on_servers.iter().sum::<i64>(), keys.len() as i64);
    assert!(
        on_servers.iter().all(|&n| n > 0),
        "both servers have keys: {on_servers:?}"
    );

    for (s, tls_port) in &servers {
        let ports = client_local_ports(&mut s.conn());
        assert!(!ports.is_empty(), "mithril holds connections to {}", s.port);
        assert!(
            ports.iter().all(|p| p == tls_port),
            "every connection on the TLS port {tls_port}: {ports:?}"
        );
    }
}

#[test]
fn pool_over_tls_both_sides_threads_1() {
    pool_over_tls_both_sides(1);
}

#[test]
fn pool_over_tls_both_sides_threads_2() {
    pool_over_tls_both_sides(2);
}

#[test]
fn pool_over_tls_both_sides_threads_4() {
    pool_over_tls_both_sides(4);
}

/// `pool p tls-listen` moved by a reload: the new address serves TLS
/// clients, the old one is closed, and a plain client of the pool keeps
/// its connection; at threads 1, 2 and 4.
#[test]
fn a_reload_moves_a_pools_tls_listener() {
    let certs = Certs::make();
    let server = Standalone::start();
    for threads in [1, 2, 4] {
        let (plain, old_tls, new_tls) = (free_port(), free_port(), free_port());
        let pool = |tls: u16| {
            format!(
                "threads {threads}\nport {plain}\npool p listen 127.0.0.1:{plain}\n\
                 pool p tls-listen 127.0.0.1:{tls}\npool p server {}:1 s0\n{}",
                server.addr(),
                certs.conf(0, "no").replace("tls-port 0\n", ""),
            )
        };
        let m = Mithril::start(bin(), &[], &pool(old_tls));
        let set = |port: u16, k: &str| {
            let out = certs.cli(port, false, &["SET", k, "1"], None);
            String::from_utf8_lossy(&out.stdout).trim() == "OK"
        };
        assert!(
            set(old_tls, "tlsp:old"),
            "threads {threads}: the first TLS listener"
        );
        let mut c = m.conn();
        assert_eq!(c.cmd(&["GET", "tlsp:old"]).as_bulk(), Some(&b"1"[..]));

        let conf = std::fs::read_to_string(&m.conf_path).unwrap();
        let moved = conf.replace(
            &format!("tls-listen 127.0.0.1:{old_tls}"),
            &format!("tls-listen 127.0.0.1:{new_tls}"),
        );
        std::fs::write(&m.conf_path, moved).unwrap();
        assert_eq!(c.cmd(&["CONFIG", "RELOAD"]).as_str(), "OK");
        wait_until(
            "the new TLS listener",
            std::time::Duration::from_secs(10),
            || set(new_tls, "tlsp:new").then_some(()),
        );
        wait_until(
            "the old TLS listener closed",
            std::time::Duration::from_secs(10),
            || {
                Conn::try_connect(&format!("127.0.0.1:{old_tls}"))
                    .is_err()
                    .then_some(())
            },
        );
        assert_eq!(
            c.cmd(&["GET", "tlsp:new"]).as_bulk(),
            Some(&b"1"[..]),
            "plain kept"
        );
    }
}

/// A Sentinel pool over TLS on both of its sides toward the back: a
/// master with a `tls-port`, three sentinels with theirs (reaching the
/// master and each other over TLS, `tls-auth-clients yes`), and mithril
/// with `tls-cluster yes` and `tls-sentinel yes` given one sentinel's TLS
/// address: it learns the other two from it, finds the master through
/// them and writes there, and every sentinel has mithril's watcher
/// (PSUBSCRIBE) on its TLS port.
fn sentinel_pool_over_tls(threads: usize) {
    let certs = Certs::make();
    let node = certs.node_tls(AuthClients::Yes);
    let tls_lines = format!(
        "tls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-auth-clients yes",
        node.cert_file, node.key_file, node.ca_cert_file
    );
    let master_tls = free_port();
    let master = Standalone::start_with(&format!("tls-port {master_tls}\n{tls_lines}\n"));
    let sentinels = SentinelSet::start_tls(3, &[("shard001", master_tls, 0)], Some(&tls_lines));
    let port = free_port();
    let conf = format!(
        "threads {threads}\nport {port}\npool s listen 127.0.0.1:{port}\npool s group shard001\n\
         pool s sentinel {}\npool s refresh-interval 200\n\
         tls-cluster yes\ntls-sentinel yes\ntls-ca-cert-file {}\n\
         tls-client-cert-file {}\ntls-client-key-file {}\n",
        sentinels.tls_addrs()[0],
        certs.path("ca.crt"),
        certs.path("client.crt"),
        certs.path("client.key"),
    );
    let m = Mithril::start(bin(), &[], &conf);
    wait_until(
        "the other sentinels learnt over TLS",
        std::time::Duration::from_secs(10),
        || (m.log().matches("learnt from the others").count() == 2).then_some(()),
    );
    let mut clients: Vec<Conn> = (0..2 * threads).map(|_| m.conn()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let v = format!("v{i}");
        assert_eq!(c.cmd(&["SET", "sk", &v]), ok(), "threads {threads}");
        assert_eq!(master.conn().cmd(&["GET", "sk"]), bulk(&v));
    }
    for s in &sentinels.sentinels {
        let tls_port = s.tls_port.unwrap();
        wait_until(
            &format!("mithril's watcher on sentinel {}'s TLS port", s.port),
            std::time::Duration::from_secs(10),
            || {
                let list = s.conn().cmd(&["CLIENT", "LIST"]);
                let text = String::from_utf8_lossy(list.as_bulk()?).into_owned();
                text.lines()
                    .any(|l| {
                        l.contains(&format!("laddr=127.0.0.1:{tls_port}"))
                            && l.contains("cmd=psubscribe")
                    })
                    .then_some(())
            },
        );
    }
}

#[test]
fn sentinel_pool_over_tls_threads_1() {
    sentinel_pool_over_tls(1);
}

#[test]
fn sentinel_pool_over_tls_threads_2() {
    sentinel_pool_over_tls(2);
}

#[test]
fn sentinel_pool_over_tls_threads_4() {
    sentinel_pool_over_tls(4);
}

/// A "server" that accepts TCP connections and never sends a byte: each
/// connection is held open, what arrives on it unread, until it is
/// dropped.
struct Silent {
    port: u16,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (accepted, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (count, flag) = (accepted.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        held.push(conn);
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Silent {
            port,
            accepted,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `tls-handshake-timeout` in the test, and what a reply may take past it.
const HANDSHAKE_MS: u64 = 1000;
const SLACK: Duration = Duration::from_secs(3);

/// The error a refused connect gives (CLUSTERDOWN: the request never
/// reached the server), the handshake named as the reason.
fn refused_for_the_handshake(r: &Reply) -> bool {
    r.is_error()
        && r.as_error().starts_with("CLUSTERDOWN ")
        && r.as_error().contains("TLS handshake not finished in time")
}

/// A ring pool of a TLS server and a silent one, `backend-timeout 0`: no
/// GET waits past the handshake bound (plus a tick and slack), every
/// worker's connection to the silent server fails as a refused connect
/// would, and the healthy server keeps serving the same worker meanwhile.
fn a_server_that_never_handshakes_fails_in_time(threads: usize) {
    let certs = Certs::make();
    let node = certs.node_tls(AuthClients::Yes);
    let tls_port = free_port();
    let _healthy = Standalone::start_with(&format!(
        "tls-port {tls_port}\ntls-cert-file {}\ntls-key-file {}\n\
         tls-ca-cert-file {}\ntls-auth-clients yes\n",
        node.cert_file, node.key_file, node.ca_cert_file
    ));
    let silent = Silent::start();
    let plain = free_port();
    let conf = format!(
        "threads {threads}\nplacement round-robin\nport {plain}\n\
         pool p listen 127.0.0.1:{plain}\npool p hash md5\npool p distribution ketama\n\
         pool p server 127.0.0.1:{tls_port}:1 s0\npool p server 127.0.0.1:{}:1 s1\n\
         backend-timeout 0\ntls-handshake-timeout {HANDSHAKE_MS}\n\
         tls-cluster yes\ntls-ca-cert-file {}\n\
         tls-client-cert-file {}\ntls-client-key-file {}\n",
        silent.port,
        certs.path("ca.crt"),
        certs.path("client.crt"),
        certs.path("client.key"),
    );
    let m = Mithril::start(bin(), &[], &conf);
    let within = Duration::from_millis(HANDSHAKE_MS) + SLACK;

    // Every key's GET pipelined on two connections per worker, all sent
    // before any is read: each is answered within the bound, nil from
    // the healthy server, an error naming the handshake from the other.
    let keys: Vec<String> = (0..24).map(|i| format!("tlshs:{threads}:{i}")).collect();
    let gets: Vec<u8> = keys
        .iter()
        .flat_map(|k| {
            let mut f = format!("*2\r\n$3\r\nGET\r\n${}\r\n", k.len()).into_bytes();
            f.extend_from_slice(k.as_bytes());
            f.extend_from_slice(b"\r\n");
            f
        })
        .collect();
    let mut conns: Vec<Conn> = (0..threads * 2).map(|_| m.conn()).collect();
    let sent = Instant::now();
    for c in conns.iter_mut() {
        c.write_raw(&gets).unwrap();
    }
    let mut on_silent: Option<Vec<bool>> = None;
    for (i, c) in conns.iter_mut().enumerate() {
        let mut here = Vec::new();
        for k in &keys {
            let left = within.saturating_sub(sent.elapsed());
            let r = c.try_read_reply(left).unwrap_or_else(|e| {
                panic!("threads {threads}, connection {i}: GET {k} not answered within {within:?} ({e})")
            });
            if r.is_error() {
                assert!(
                    refused_for_the_handshake(&r),
                    "threads {threads}: GET {k}: {r:?}"
                );
            } else {
                assert_eq!(r.as_bulk(), None, "threads {threads}: GET {k}");
            }
            here.push(r.is_error());
        }
        match &on_silent {
            None => on_silent = Some(here),
            Some(first) => assert_eq!(first, &here, "threads {threads}: the same keys fail"),
        }
    }
    let on_silent = on_silent.unwrap();
    let silent_key = keys
        .iter()
        .zip(&on_silent)
        .find(|(_, &s)| s)
        .map(|(k, _)| k);
    let healthy_key = keys
        .iter()
        .zip(&on_silent)
        .find(|(_, &s)| !s)
        .map(|(k, _)| k);
    let (Some(silent_key), Some(healthy_key)) = (silent_key, healthy_key) else {
        panic!("threads {threads}: keys on both servers: {on_silent:?}");
    };
    assert!(
        silent.accepted.load(Ordering::Relaxed) >= threads,
        "every worker reached the silent server over TCP (the handshake is what failed)"
    );

    // On each worker: one client waits on the silent server (past the
    // set's backoff, a GET that is not answered at once) while another
    // writes and reads on the healthy one.
    let mut by_worker: std::collections::BTreeMap<String, Vec<Conn>> = Default::default();
    for mut c in (0..threads * 2).map(|_| m.conn()) {
        by_worker.entry(worker_of(&mut c)).or_default().push(c);
    }
    assert_eq!(by_worker.len(), threads, "connections on every worker");
    for (w, pair) in by_worker.iter_mut() {
        let [waiting, served, ..] = pair.as_mut_slice() else {
            panic!("threads {threads}: two connections on worker {w}");
        };
        let since = wait_until(
            "a GET waiting on the silent server",
            Duration::from_secs(10),
            || {
                waiting.send(&[b"GET", silent_key.as_bytes()]);
                let t = Instant::now();
                match waiting.try_read_reply(Duration::from_millis(200)) {
                    Err(e) if e.kind() == ErrorKind::TimedOut => Some(t),
                    Err(e) => panic!("worker {w}: {e}"),
                    // The set's backoff after the last failure: again.
                    Ok(r) => {
                        assert!(r.is_error(), "worker {w}: {r:?}");
                        None
                    }
                }
            },
        );
        let value = format!("v-{w}");
        assert_eq!(served.cmd(&["SET", healthy_key, &value]).as_str(), "OK");
        assert_eq!(
            served.cmd(&["GET", healthy_key]).as_bulk(),
            Some(value.as_bytes()),
            "threads {threads}, worker {w}: the healthy server serves meanwhile"
        );
        let r = waiting
            .try_read_reply(within.saturating_sub(since.elapsed()))
            .unwrap_or_else(|e| panic!("threads {threads}, worker {w}: not a hang ({e})"));
        assert!(
            refused_for_the_handshake(&r),
            "threads {threads}, worker {w}: {r:?}"
        );
    }
    let mut c = m.conn();
    assert_eq!(c.cmd(&["PING"]).as_str(), "PONG");
}

#[test]
fn a_server_that_never_handshakes_fails_in_time_threads_1() {
    a_server_that_never_handshakes_fails_in_time(1);
}

#[test]
fn a_server_that_never_handshakes_fails_in_time_threads_2() {
    a_server_that_never_handshakes_fails_in_time(2);
}

#[test]
fn a_server_that_never_handshakes_fails_in_time_threads_4() {
    a_server_that_never_handshakes_fails_in_time(4);
}

/// A server added by a reload under a host name, whose certificate names
/// only that host (no IP address): the name nodes are verified against
/// is chosen again from the new file (its first host-name server), so
/// the new server's keys are served from every worker, and the first
/// server, whose certificate names `localhost` too, still is.
fn a_server_added_under_a_host_name_is_verified_by_it(threads: usize) {
    let certs = Certs::make();
    let node = certs.node_tls(AuthClients::No);
    certs.sign(
        "dnsonly",
        "localhost",
        "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    );
    let tls_server = |cert: &str, key: &str| {
        let tls_port = free_port();
        let s = Standalone::start_with(&format!(
            "tls-port {tls_port}\ntls-cert-file {cert}\ntls-key-file {key}\n\
             tls-ca-cert-file {}\ntls-auth-clients no\n",
            node.ca_cert_file
        ));
        (s, tls_port)
    };
    let (a, a_tls) = tls_server(&node.cert_file, &node.key_file);
    let (b, b_tls) = tls_server(&certs.path("dnsonly.crt"), &certs.path("dnsonly.key"));
    let port = free_port();
    let conf = format!(
        "threads {threads}\nport {port}\npool p listen 127.0.0.1:{port}\npool p hash md5\n\
         tls-cluster yes\ntls-ca-cert-file {}\npool p server 127.0.0.1:{a_tls}:1 s0\n",
        node.ca_cert_file
    );
    let m = Mithril::start(bin(), &[], &conf);
    let mut clients: Vec<Conn> = (0..2 * threads).map(|_| m.conn()).collect();
    m.reload_lines(
        &mut clients[0],
        "pool p server ",
        &[
            format!("pool p server 127.0.0.1:{a_tls}:1 s0"),
            format!("pool p server localhost:{b_tls}:1 s1"),
        ],
        "servers now",
    );
    let keys: Vec<String> = (0..40).map(|i| format!("hn:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        let c = &mut clients[i % (2 * threads)];
        assert_eq!(c.cmd(&["SET", k, k]), ok(), "threads {threads}: SET {k}");
    }
    let on = |s: &Standalone| s.conn().cmd(&["DBSIZE"]).as_int();
    assert_eq!(on(&a) + on(&b), keys.len() as i64);
    assert!(on(&b) > 0, "threads {threads}: the server added has keys");
}

#[test]
fn a_server_added_under_a_host_name_is_verified_by_it_threads_1() {
    a_server_added_under_a_host_name_is_verified_by_it(1);
}

#[test]
fn a_server_added_under_a_host_name_is_verified_by_it_threads_2() {
    a_server_added_under_a_host_name_is_verified_by_it(2);
}

#[test]
fn a_server_added_under_a_host_name_is_verified_by_it_threads_4() {
    a_server_added_under_a_host_name_is_verified_by_it(4);
}
