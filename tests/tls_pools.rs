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
