//! TLS toward the nodes (issue 29, item 2), with real processes: a CA and
//! certificates made by `openssl`, a cluster of Debian `redis-server`
//! nodes with a `tls-port`, `tls-cluster yes` and `tls-auth-clients yes`
//! (a client must show a certificate), and mithril with `tls-cluster yes`
//! and a client certificate of the same CA, seeded with the TLS ports.
//! - SET / GET on every master, MGET across them, a pipeline, a cached
//!   read invalidated by a write (the tracking connection), BLPOP woken by
//!   a push (a lease), SUBSCRIBE / PUBLISH (a subscriber connection), and
//!   a slot moved to another master while mithril's map still names the
//!   old one (the MOVED names a TLS port), a SYNC feed (a replication
//!   link to every master) that carries a write, at threads 1, 2 and 4 with
//!   connections placed on every worker; afterwards every connection
//!   mithril holds to a node is on the node's TLS port;
//! - a reload reads the client certificate's file again: after it holds a
//!   certificate of another CA, the next connection mithril opens (a
//!   subscriber's) is refused by the nodes while the open ones go on; a
//!   file that does not load fails the reload and changes nothing; the
//!   good certificate back, new connections work again;
//! - a node whose certificate does not carry `tls-server-name`, and nodes
//!   that want a client certificate mithril does not have, are refused:
//!   the client gets an error within its bound, never a hang, and the log
//!   names the reason;
//! - (item 3) a master stopped (SIGSTOP: its kernel still accepts TCP,
//!   nothing answers the handshake): a SYNC through mithril, whose link
//!   to it never finishes its handshake, is ended with an error naming
//!   the handshake within `tls-handshake-timeout`, not after the link's
//!   60 s load timeout, at threads 1, 2 and 4 with a feed on every worker.

mod support;

use std::io::{Read, Write};
use std::time::Duration;
use support::*;

/// mithril's node-side TLS lines: the CA, and the client certificate
/// (`client.crt`, clientAuth) when `cert`.
fn node_side(certs: &Certs, cert: bool) -> String {
    let mut s = format!(
        "tls-cluster yes\ntls-ca-cert-file {}\n",
        certs.path("ca.crt")
    );
    if cert {
        s.push_str(&format!(
            "tls-client-cert-file {}\ntls-client-key-file {}\n",
            certs.path("client.crt"),
            certs.path("client.key")
        ));
    }
    s
}

fn tls_cluster(certs: &Certs) -> RedisCluster {
    RedisCluster::start(ClusterSpec {
        tls: Some(certs.node_tls(AuthClients::Yes)),
        ..Default::default()
    })
}

fn serves_every_path_over_tls(threads: usize) {
    let certs = Certs::make();
    let cluster = tls_cluster(&certs);
    let conf = format!(
        "threads {threads}\nplacement round-robin\nreply-cache yes\n{}",
        node_side(&certs, true)
    );
    let m = Mithril::start(bin(), &cluster.tls_seeds(), &conf);
    let keys = cluster.key_per_master("tlsn");
    assert_eq!(keys.len(), 3);

    // Connections in turn on every worker (round-robin placement).
    for round in 0..threads * 2 {
        let mut c = m.conn();
        let value = format!("v{round}");
        for (k, _) in &keys {
            assert_eq!(c.cmd(&["SET", k, &value]).as_str(), "OK");
            assert_eq!(c.cmd(&["GET", k]).as_bulk(), Some(value.as_bytes()));
        }
        let mut mget = vec!["MGET"];
        mget.extend(keys.iter().map(|(k, _)| k.as_str()));
        let got = c.cmd(&mget);
        let got: Vec<_> = got.as_array().iter().map(|r| r.as_bulk()).collect();
        assert_eq!(got, vec![Some(value.as_bytes()); 3], "MGET across masters");
        let cmds: Vec<Vec<Vec<u8>>> = (0..200)
            .map(|i| {
                let k = format!("{{p{round}}}{i}").into_bytes();
                if i % 2 == 0 {
                    vec![b"SET".to_vec(), k, b"x".to_vec()]
                } else {
                    vec![
                        b"GET".to_vec(),
                        format!("{{p{round}}}{}", i - 1).into_bytes(),
                    ]
                }
            })
            .collect();
        for (i, r) in c.pipeline(&cmds).iter().enumerate() {
            if i % 2 == 0 {
                assert_eq!(r.as_str(), "OK", "pipelined SET {i}");
            } else {
                assert_eq!(r.as_bulk(), Some(&b"x"[..]), "pipelined GET {i}");
            }
        }
        // A cached read, then a write through another connection: the
        // invalidation comes back over the tracking connection.
        let (k, _) = &keys[round % 3];
        c.cmd(&["GET", k]);
        c.cmd(&["GET", k]);
        let mut w = m.conn();
        let newer = format!("w{round}");
        assert_eq!(w.cmd(&["SET", k, &newer]).as_str(), "OK");
        wait_until(
            "the write seen by the cached reader",
            Duration::from_secs(5),
            || (c.cmd(&["GET", k]).as_bulk() == Some(newer.as_bytes())).then_some(()),
        );
    }

    // A lease: BLPOP woken by a push from another connection.
    let mut blocked = m.conn();
    blocked.send(&[b"BLPOP", b"tlsn:list", b"10"]);
    let mut pusher = m.conn();
    wait_until("BLPOP woken", Duration::from_secs(8), || {
        pusher.cmd(&["RPUSH", "tlsn:list", "item"]);
        blocked.try_read_reply(Duration::from_millis(300)).ok()
    })
    .as_array()
    .iter()
    .map(|r| r.as_bulk().map(<[u8]>::to_vec))
    .eq([Some(b"tlsn:list".to_vec()), Some(b"item".to_vec())])
    .then_some(())
    .expect("BLPOP's reply names the list and the item");

    // A subscriber connection.
    let mut sub = m.conn();
    let r = sub.cmd(&["SUBSCRIBE", "tlsn:ch"]);
    assert_eq!(r.as_array()[0].as_bulk(), Some(&b"subscribe"[..]));
    let mut publisher = m.conn();
    wait_until("the subscriber counted", Duration::from_secs(5), || {
        (publisher.cmd(&["PUBLISH", "tlsn:ch", "hello"]).as_int() == 1).then_some(())
    });
    let msg = sub.read_reply();
    assert_eq!(msg.as_array()[2].as_bulk(), Some(&b"hello"[..]));

    // A slot moved behind mithril's back: the node it asks answers MOVED
    // with the new owner's TLS port (it asks over TLS), which mithril
    // follows; a plain port would not answer a handshake.
    let (k0, _) = &keys[0];
    let slot = key_slot(k0.as_bytes());
    let to = cluster.other_master(slot).clone();
    let to_idx = cluster.nodes.iter().position(|n| n.id == to.id).unwrap();
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", k0, "before"]).as_str(), "OK");
    cluster.migrate_slot(slot, to_idx, 100);
    assert_eq!(c.cmd(&["GET", k0]).as_bulk(), Some(&b"before"[..]));
    assert_eq!(c.cmd(&["SET", k0, "after"]).as_str(), "OK");
    assert_eq!(to.conn().cmd(&["GET", k0]).as_bulk(), Some(&b"after"[..]));

    // A replication feed: SYNC through mithril opens a link over TLS to
    // every master; a write through mithril then reaches the feed.
    let mut feed = std::net::TcpStream::connect(m.addr()).unwrap();
    feed.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    feed.write_all(b"SYNC\r\n").unwrap();
    let mut stream = Vec::new();
    let mut w = m.conn();
    wait_until(
        "a write seen on the SYNC feed",
        Duration::from_secs(20),
        || {
            w.cmd(&["SET", "tlsn:feed", "marker-over-tls"]);
            let mut chunk = [0u8; 16 * 1024];
            if let Ok(n) = feed.read(&mut chunk) {
                stream.extend_from_slice(&chunk[..n]);
            }
            stream
                .windows(b"marker-over-tls".len())
                .any(|x| x == b"marker-over-tls")
                .then_some(())
        },
    );
    drop(feed);

    // Every connection mithril holds to a node is on its TLS port.
    for node in cluster.masters() {
        let tls_port = node.tls_port.unwrap();
        let ports = client_local_ports(&mut node.conn());
        assert!(
            ports.contains(&tls_port),
            "node {}: mithril connected on its TLS port {tls_port}: {ports:?}",
            node.port
        );
        assert!(
            ports.iter().all(|&p| p == tls_port),
            "node {}: no connection on its plain port: {ports:?}",
            node.port
        );
    }
}

#[test]
fn serves_every_path_over_tls_threads_1() {
    serves_every_path_over_tls(1);
}

#[test]
fn serves_every_path_over_tls_threads_2() {
    serves_every_path_over_tls(2);
}

#[test]
fn serves_every_path_over_tls_threads_4() {
    serves_every_path_over_tls(4);
}

/// A GET through `m` is refused (an error, within the deadline) and the
/// log names `reason`.
fn refused_with(m: &Mithril, reason: &str) {
    let mut c = m.conn();
    c.send(&[b"GET", b"tlsn:refused"]);
    let r = c
        .try_read_reply(Duration::from_secs(15))
        .expect("an answer within 15 s, not a hang");
    assert!(r.is_error(), "an error reply: {r:?}");
    wait_until(
        &format!("the log names '{reason}'"),
        Duration::from_secs(10),
        || m.log().contains(reason).then_some(()),
    );
}

#[test]
fn nodes_whose_certificate_or_demand_do_not_match_are_refused_with_the_reason() {
    let certs = Certs::make();
    let cluster = tls_cluster(&certs);
    // The nodes' certificate names 127.0.0.1 and localhost only.
    let wrong_name = format!(
        "{}tls-server-name redis.example.com\nconnect-timeout 1000\n",
        node_side(&certs, true)
    );
    let m = Mithril::start(bin(), &cluster.tls_seeds(), &wrong_name);
    refused_with(&m, "not valid for name");
    drop(m);
    // The nodes ask for a client certificate; mithril has none.
    let no_cert = format!("{}connect-timeout 1000\n", node_side(&certs, false));
    let m = Mithril::start(bin(), &cluster.tls_seeds(), &no_cert);
    refused_with(&m, "CertificateRequired");
    // The name a seed's host gives is checked too: localhost is on the
    // certificate, so a seed written so serves.
    let by_host: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("localhost:{}", n.tls_port.unwrap()))
        .collect();
    let m = Mithril::start(bin(), &by_host, &node_side(&certs, true));
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "tlsn:host", "1"]).as_str(), "OK");
}

/// Whether SUBSCRIBE through `m` gets a working subscriber connection
/// (one mithril opens for it, with the client certificate in force now).
fn subscriber_works(m: &Mithril, channel: &str) -> bool {
    let mut sub = m.conn();
    sub.send(&[b"SUBSCRIBE", channel.as_bytes()]);
    let Ok(r) = sub.try_read_reply(Duration::from_secs(10)) else {
        return false;
    };
    if r.is_error() {
        return false;
    }
    let mut p = m.conn();
    poll_until(Duration::from_secs(5), || {
        (p.cmd(&["PUBLISH", channel, "x"]).as_int() == 1).then_some(())
    })
    .is_some()
        && sub
            .try_read_reply(Duration::from_secs(5))
            .is_ok_and(|r| !r.is_error())
}

#[test]
fn a_reload_puts_a_new_client_certificate_in_force_for_new_connections() {
    let certs = Certs::make();
    let stranger = Certs::make(); // another CA: the nodes do not trust it
    let cluster = tls_cluster(&certs);
    let dir = make_temp_dir();
    let (crt, key) = (dir.join("mithril.crt"), dir.join("mithril.key"));
    let install = |from: &Certs| {
        std::fs::copy(from.path("client.crt"), &crt).unwrap();
        std::fs::copy(from.path("client.key"), &key).unwrap();
    };
    install(&certs);
    let conf = format!(
        "tls-cluster yes\ntls-ca-cert-file {}\ntls-client-cert-file {}\n\
         tls-client-key-file {}\nconnect-timeout 1000\n",
        certs.path("ca.crt"),
        crt.display(),
        key.display()
    );
    let m = Mithril::start(bin(), &cluster.tls_seeds(), &conf);
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "tlsn:r", "1"]).as_str(), "OK");
    assert!(subscriber_works(&m, "tlsn:before"), "a subscriber before");

    install(&stranger);
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]).as_str(), "OK");
    assert!(
        !subscriber_works(&m, "tlsn:stranger"),
        "a new connection with the other CA's certificate is refused"
    );
    assert_eq!(
        c.cmd(&["GET", "tlsn:r"]).as_bulk(),
        Some(&b"1"[..]),
        "open ones go on"
    );

    std::fs::write(&key, "not a key").unwrap();
    let r = c.cmd(&["CONFIG", "RELOAD"]);
    assert!(
        r.is_error(),
        "a key that does not load fails the reload: {r:?}"
    );
    assert!(r.as_error().contains("tls-client-key-file"), "{r:?}");

    install(&certs);
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]).as_str(), "OK");
    assert!(
        subscriber_works(&m, "tlsn:after"),
        "the good certificate back"
    );
    remove_temp_dir(&dir);
}

/// A master that accepts TCP and never finishes a handshake: each SYNC
/// through mithril (one per worker, round-robin placement) gets its
/// opening newline, then an error naming the handshake, and is closed,
/// all within `tls-handshake-timeout` and some slack; `backend-timeout 0`.
#[test]
fn a_feed_link_that_never_handshakes_ends_the_feed_in_time() {
    const HANDSHAKE_MS: u64 = 1000;
    let certs = Certs::make();
    // Slow failure detection: the stopped master stays a master in the
    // cluster's view (and mithril's map) for the whole test.
    let cluster = RedisCluster::start(ClusterSpec {
        tls: Some(certs.node_tls(AuthClients::Yes)),
        node_timeout_ms: 60_000,
        ..Default::default()
    });
    let master = cluster.masters()[0];
    let stopped_at = format!("127.0.0.1:{}", master.tls_port.unwrap());
    for threads in [1, 2, 4] {
        let conf = format!(
            "threads {threads}\nplacement round-robin\nbackend-timeout 0\n\
             tls-handshake-timeout {HANDSHAKE_MS}\n{}",
            node_side(&certs, true)
        );
        let m = Mithril::start(bin(), &cluster.tls_seeds(), &conf);
        let paused = Stopped::stop(master.pid);
        let mut feeds: Vec<Conn> = (0..threads).map(|_| m.conn()).collect();
        let asked = std::time::Instant::now();
        for f in feeds.iter_mut() {
            f.write_raw(b"SYNC\r\n").unwrap();
        }
        let within = Duration::from_millis(HANDSHAKE_MS) + Duration::from_secs(3);
        for (i, f) in feeds.iter_mut().enumerate() {
            let got = f.read_raw_until_closed(within.saturating_sub(asked.elapsed()));
            let got = String::from_utf8_lossy(&got);
            assert!(
                got.contains(&format!(
                    "-ERR mithril: the TLS handshake with {stopped_at} did not finish in time"
                )),
                "threads {threads}, feed {i}: ended within {within:?} by the handshake: {got:?}"
            );
        }
        drop(paused);
        // The master back: a new feed gets its RDB (every link handshook).
        let mut again = m.conn();
        again.write_raw(b"SYNC\r\n").unwrap();
        let mut got = Vec::new();
        wait_until(
            "a SYNC served once the master is back",
            Duration::from_secs(20),
            || {
                got.extend(again.read_raw_until_closed(Duration::from_millis(300)));
                let text = String::from_utf8_lossy(&got);
                assert!(!text.contains("-ERR"), "threads {threads}: {text:?}");
                text.contains("REDIS").then_some(())
            },
        );
    }
}
