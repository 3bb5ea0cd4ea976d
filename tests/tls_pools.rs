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
//!   old one is closed, a plain client keeps its connection.

mod support;

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
