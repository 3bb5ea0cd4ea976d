//! TLS toward clients (issue 29, items 1 and 3), with real processes: a
//! CA, a server and a client certificate made by `openssl` in a temp dir,
//! a real cluster, mithril with a `tls-port` beside its plain port, and
//! Debian's `redis-cli --tls` as the client.
//! - SET / GET and a pipeline (`redis-cli --pipe`) through the TLS port,
//!   and a reply larger than rustls's buffers, at 1, 2 and 4 threads, each
//!   redis-cli run a new connection placed on some worker; what TLS
//!   clients wrote is read back through the plain port;
//! - `tls-auth-clients yes` refuses a client without a certificate and
//!   serves one with; `optional` serves both; `port 0` leaves only TLS;
//! - garbage that is not TLS is closed at once, a silent client and a half
//!   handshake within `tls-handshake-timeout` (plus a tick), while another
//!   TLS client keeps working;
//! - `tls-key-file-pass` and an encrypted key are refused with a message
//!   that says why;
//! - a certificate renewed in place is used by every handshake after a
//!   CONFIG RELOAD, whichever worker takes it (1, 2 and 4 threads), while
//!   a connection opened before goes on; a key that does not load fails
//!   the reload and changes nothing;
//! - a `bind` address added by a reload gets its TLS listener beside the
//!   plain one; removed, both stop and the TLS clients that came through
//!   it drain, on every worker (1, 2 and 4 threads);
//! - a TLS client that asks for 64 MiB and reads nothing is cut at
//!   `client-output-buffer-limit` as a plain one is; one that reads gets a
//!   deep pipeline of large replies whole and in order (rustls as the
//!   client here: redis-cli cannot pipeline without reading);
//! - `tls-auth-clients-user CN`: a certificate whose common name is a user
//!   that is on logs the client in as that user, on any worker; other
//!   names, a user that is off and no certificate leave it unauthenticated
//!   (NOAUTH under requirepass); it needs a client certificate asked for.

mod support;

use std::fs;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `mithril -t` of a file with a seed and `lines`: whether it is valid,
/// and what it printed.
fn test_config(certs: &Certs, lines: &str) -> (bool, String) {
    let conf = certs.dir.join("test.conf");
    fs::write(&conf, format!("cluster-nodes 127.0.0.1:7000\n{lines}")).expect("write the config");
    let out = run_mithril(&["-t", "-c", &conf.display().to_string()]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn start(certs: &Certs, threads: usize, auth: &str, more: &str) -> (RedisCluster, Mithril, u16) {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let tls_port = free_port();
    let conf = format!("threads {threads}\n{}{more}", certs.conf(tls_port, auth));
    let m = Mithril::start(bin(), &cluster.seeds(), &conf);
    (cluster, m, tls_port)
}

#[test]
fn set_get_and_a_pipeline_through_the_tls_port_at_1_2_and_4_threads() {
    let certs = Certs::make();
    for threads in [1, 2, 4] {
        let (_cluster, m, port) = start(&certs, threads, "yes", "");
        // Each run is a new connection, placed on some worker.
        for i in 0..2 * threads {
            let key = format!("tls:{threads}:{i}");
            let set = certs.cli(port, true, &["SET", &key, &format!("v{i}")], None);
            assert_eq!(stdout(&set), "OK", "threads {threads}: {set:?}");
            let get = certs.cli(port, true, &["GET", &key], None);
            assert_eq!(stdout(&get), format!("v{i}"), "threads {threads}: {get:?}");
        }
        // A pipeline: every command written at once, the replies counted.
        let mut stream = Vec::new();
        for i in 0..1000 {
            let (k, v) = (format!("p:{threads}:{i}"), format!("{i}"));
            stream.extend(encode_command(&[b"SET", k.as_bytes(), v.as_bytes()]));
            stream.extend(encode_command(&[b"GET", k.as_bytes()]));
        }
        let file = certs.dir.join("pipe.resp");
        fs::write(&file, &stream).expect("write the pipeline");
        let pipe = certs.cli(port, true, &["--pipe"], Some(&file));
        let text = format!("{}{}", stdout(&pipe), String::from_utf8_lossy(&pipe.stderr));
        assert!(
            text.contains("errors: 0, replies: 2000"),
            "threads {threads}: {text}"
        );
        // A reply larger than rustls's 64 KiB buffer: it leaves in parts.
        let big = "x".repeat(300_000);
        let file = certs.dir.join("big.txt");
        fs::write(&file, &big).expect("write the value");
        let set = certs.cli(port, true, &["-x", "SET", "tls:big"], Some(&file));
        assert_eq!(stdout(&set), "OK", "{set:?}");
        let get = certs.cli(port, true, &["GET", "tls:big"], None);
        assert_eq!(stdout(&get).len(), big.len(), "threads {threads}");
        // What TLS clients wrote, read through the plain port.
        let mut c = m.conn();
        assert_eq!(c.cmd(&["GET", &format!("p:{threads}:999")]), bulk("999"));
        assert_eq!(c.cmd(&["STRLEN", "tls:big"]).as_int(), 300_000);
    }
}

#[test]
fn mutual_tls_refuses_a_client_without_a_certificate_unless_optional() {
    let certs = Certs::make();
    let (_cluster, _m, port) = start(&certs, 2, "yes", "");
    let with = certs.cli(port, true, &["PING"], None);
    assert_eq!(stdout(&with), "PONG", "{with:?}");
    for _ in 0..4 {
        let without = certs.cli(port, false, &["PING"], None);
        assert!(
            !stdout(&without).contains("PONG"),
            "served without a certificate: {without:?}"
        );
    }
    drop(_m);
    let (_cluster, m, port) = start(&certs, 2, "optional", "");
    for cert in [true, false] {
        let o = certs.cli(port, cert, &["PING"], None);
        assert_eq!(stdout(&o), "PONG", "optional, cert {cert}: {o:?}");
    }
    drop(m);
    // No certificate asked at all; and port 0: only the TLS listener, at
    // 1, 2 and 4 threads (each redis-cli run a new connection, placed on
    // the workers in turn, writing and reading back a key).
    let cluster = RedisCluster::start(ClusterSpec::default());
    for threads in [1, 2, 4] {
        let port = free_port();
        let plain = free_port();
        let conf = format!(
            "threads {threads}\nplacement round-robin\n{}port 0\n",
            certs.conf(port, "no")
        );
        let mut m = Mithril::spawn(bin(), &cluster.seeds(), &conf);
        let ready = poll_until(Duration::from_secs(20), || {
            (stdout(&certs.cli(port, false, &["PING"], None)) == "PONG").then_some(())
        });
        assert!(ready.is_some(), "no PONG over TLS with port 0: {}", m.log());
        for i in 0..threads * 2 {
            let key = format!("port0:{threads}:{i}");
            let set = certs.cli(port, false, &["SET", &key, "v"], None);
            assert_eq!(stdout(&set), "OK", "threads {threads}: {set:?}");
            let get = certs.cli(port, false, &["GET", &key], None);
            assert_eq!(stdout(&get), "v", "threads {threads}: {get:?}");
        }
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", plain)).is_err()
                && m.log().contains("(TLS)"),
            "a plain listener with port 0"
        );
        m.stop();
    }
}

#[test]
fn garbage_silence_and_half_handshakes_are_closed_within_their_bound() {
    let certs = Certs::make();
    for threads in [1, 2, 4] {
        let (_cluster, _m, port) = start(&certs, threads, "no", "tls-handshake-timeout 1000\n");
        let addr = format!("127.0.0.1:{port}");
        let opened = Instant::now();
        // Not TLS at all: refused at its first record.
        let mut garbage = Conn::connect(&addr);
        garbage
            .write_raw(b"*1\r\n$4\r\nPING\r\n")
            .expect("write garbage");
        // Silent; and a ClientHello's record header with half its body.
        let mut silent = Conn::connect(&addr);
        let mut half = Conn::connect(&addr);
        let mut hello = vec![
            0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0xfc, 0x03, 0x03,
        ];
        hello.extend([0u8; 100]);
        half.write_raw(&hello).expect("write half a hello");
        assert!(
            garbage.is_closed(Duration::from_millis(900)),
            "threads {threads}: garbage still open"
        );
        // Meanwhile another TLS client is served.
        let o = certs.cli(port, false, &["PING"], None);
        assert_eq!(stdout(&o), "PONG", "threads {threads}: {o:?}");
        for (what, c) in [("silent", &mut silent), ("half handshake", &mut half)] {
            assert!(
                c.is_closed(Duration::from_secs(5)),
                "threads {threads}: {what} still open"
            );
            let after = opened.elapsed();
            assert!(
                after >= Duration::from_millis(900) && after < Duration::from_secs(3),
                "threads {threads}: {what} closed after {after:?}, bound 1 s"
            );
        }
        let o = certs.cli(port, false, &["PING"], None);
        assert_eq!(stdout(&o), "PONG", "threads {threads}: {o:?}");
    }
}

#[test]
fn an_encrypted_key_and_its_password_are_refused_with_the_reason() {
    let certs = Certs::make();
    let more = format!(
        "{}tls-key-file-pass secret\n",
        certs.conf(free_port(), "no")
    );
    let (valid, text) = test_config(&certs, &more);
    assert!(!valid, "{text}");
    assert!(
        text.contains("tls-key-file-pass is not supported"),
        "{text}"
    );
    assert!(text.contains("cannot decrypt"), "{text}");

    // The key itself encrypted: the start stops, naming the file.
    let enc = certs.path("enc.key");
    let o = Command::new("openssl")
        .args(["pkey", "-in", &certs.path("server.key"), "-aes256"])
        .args(["-passout", "pass:secret", "-out", &enc])
        .output()
        .expect("openssl");
    assert!(o.status.success(), "{o:?}");
    let cluster = RedisCluster::start(ClusterSpec::default());
    let more = format!("{}tls-key-file {enc}\n", certs.conf(free_port(), "no"));
    let mut m = Mithril::spawn(bin(), &cluster.seeds(), &more);
    let status = m.wait_exit(Duration::from_secs(20));
    assert!(!status.success());
    let said = format!("{}{}", m.stdio(), m.log());
    assert!(said.contains("the key is encrypted"), "{said}");
}

/// What `openssl s_client` says of a handshake with `port` (the server's
/// certificate subject among it), and whether the chain verified.
fn peer_subject(certs: &Certs, port: u16) -> (bool, String) {
    certs.handshake(port, "ca.crt")
}

/// A TLS connection held open across a reload: `openssl s_client`
/// speaking Redis's inline protocol, its output lines read by a thread.
struct Held {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Held {
    fn open(certs: &Certs, port: u16) -> Held {
        Held::open_at(certs, &format!("127.0.0.1:{port}"))
    }

    /// Like `open`, with `addr` (`HOST:PORT`).
    fn open_at(certs: &Certs, addr: &str) -> Held {
        let mut cmd = Command::new("openssl");
        cmd.args(["s_client", "-quiet", "-crlf", "-connect", addr])
            .args(["-CAfile", &certs.path("ca.crt")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = spawn_child(cmd).expect("start openssl s_client");
        let out = child.stdout.take().expect("its stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line.trim_end().to_string()).is_err() {
                    break;
                }
            }
        });
        Held { child, lines }
    }

    /// Sends an inline command and returns the next reply line.
    fn cmd(&mut self, line: &str) -> String {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("its stdin");
        writeln!(stdin, "{line}").expect("write to s_client");
        stdin.flush().expect("flush");
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no reply to {line:?} on the held connection: {e}"))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Replaces `to` by `from`'s content the way the documentation asks: a
/// new file renamed over the old one.
fn replace_file(from: &str, to: &str) {
    let tmp = format!("{to}.new");
    fs::copy(from, &tmp).expect("copy");
    fs::rename(&tmp, to).expect("rename");
}

#[test]
fn a_certificate_renewed_in_place_is_used_by_the_next_handshake_after_a_reload() {
    let certs = Certs::make();
    certs.sign("renewed", "renewed.mithril.test", SERVER_EXT);
    for threads in [1, 2, 4] {
        // Each round starts from the first certificate.
        replace_file(&certs.path("server.crt"), &certs.path("live.crt"));
        replace_file(&certs.path("server.key"), &certs.path("live.key"));
        let (_cluster, m, port) = start(
            &certs,
            threads,
            "no",
            &format!(
                "tls-cert-file {}\ntls-key-file {}\n",
                certs.path("live.crt"),
                certs.path("live.key")
            ),
        );
        let (verified, before) = peer_subject(&certs, port);
        assert!(
            verified && !before.contains("renewed.mithril.test"),
            "{before}"
        );
        let mut held = Held::open(&certs, port);
        assert_eq!(held.cmd("SET held 1"), "+OK", "threads {threads}");

        replace_file(&certs.path("renewed.crt"), &certs.path("live.crt"));
        replace_file(&certs.path("renewed.key"), &certs.path("live.key"));
        let mut admin = m.conn();
        assert_eq!(admin.cmd(&["CONFIG", "RELOAD"]), ok(), "threads {threads}");
        // Every new handshake, whichever worker takes it.
        for _ in 0..2 * threads {
            let (verified, after) = peer_subject(&certs, port);
            assert!(
                verified && after.contains("renewed.mithril.test"),
                "{after}"
            );
        }
        // The connection opened before the reload goes on.
        assert_eq!(held.cmd("GET held"), "$1", "threads {threads}");
        assert_eq!(
            held.lines
                .recv_timeout(Duration::from_secs(10))
                .ok()
                .as_deref(),
            Some("1")
        );

        // A key that does not load fails the reload: nothing changes.
        fs::write(certs.path("live.key.new"), "not a key\n").expect("write");
        fs::rename(certs.path("live.key.new"), certs.path("live.key")).expect("rename");
        let r = admin.cmd(&["CONFIG", "RELOAD"]);
        assert!(
            r.is_error() && r.as_error().contains("tls-key-file"),
            "threads {threads}: {r:?}"
        );
        let (verified, still) = peer_subject(&certs, port);
        assert!(
            verified && still.contains("renewed.mithril.test"),
            "{still}"
        );
        assert_eq!(held.cmd("PING"), "+PONG");
    }
}

/// A TLS client of mithril's own making (rustls, as a client), for what
/// redis-cli cannot do: pipeline without reading.
fn rustls_client(
    certs: &Certs,
    port: u16,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use std::sync::Arc;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(certs.path("ca.crt")).expect("CA") {
        roots.add(c.expect("CA cert")).expect("add CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).expect("client");
    let sock = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    rustls::StreamOwned::new(conn, sock)
}

/// A client connection, plain or TLS.
trait ReadWrite: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> ReadWrite for T {}

/// `connected_clients` of INFO clients.
fn connected_clients(probe: &mut Conn) -> u64 {
    info_text_field(probe, "clients", "connected_clients")
        .parse()
        .unwrap_or(u64::MAX)
}

#[test]
fn a_tls_client_that_does_not_read_is_cut_at_its_output_limit_as_a_plain_one() {
    use std::io::{Read, Write};
    let certs = Certs::make();
    let (_cluster, m, port) = start(
        &certs,
        2,
        "no",
        "client-output-buffer-limit normal 4mb 0 0\n",
    );
    let big = "v".repeat(1 << 20);
    let mut probe = m.conn();
    assert_eq!(probe.cmd(&["SET", "big", &big]), ok());
    for tls in [false, true] {
        let mut c: Box<dyn ReadWrite> = if tls {
            Box::new(rustls_client(&certs, port))
        } else {
            let s = std::net::TcpStream::connect(("127.0.0.1", m.port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            Box::new(s)
        };
        c.write_all(b"PING\r\n").expect("PING");
        let mut pong = [0u8; 7];
        c.read_exact(&mut pong).expect("PONG");
        assert_eq!(connected_clients(&mut probe), 2);
        // 64 MiB of replies asked for, none read until mithril cut it.
        let gets: Vec<u8> = (0..64)
            .flat_map(|_| encode_command(&[b"GET", b"big"]))
            .collect();
        c.write_all(&gets).expect("the GETs");
        wait_until(
            "the client past its output limit to be closed",
            Duration::from_secs(20),
            || (connected_clients(&mut probe) == 1).then_some(()),
        );
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        let end = loop {
            match c.read(&mut buf) {
                Ok(0) => break "EOF".to_string(),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break e.to_string(),
            }
        };
        // The limit, plus what the kernel's socket buffers took.
        assert!(got < 12 << 20, "tls {tls}: {got} bytes read, then {end}");
        let o = certs.cli(port, false, &["PING"], None);
        assert_eq!(stdout(&o), "PONG", "{o:?}");
    }
}

#[test]
fn a_deep_pipeline_of_large_replies_arrives_whole_and_in_order_over_tls() {
    use std::io::{Read, Write};
    let certs = Certs::make();
    let (_cluster, m, port) = start(&certs, 2, "no", "");
    let mut probe = m.conn();
    let values: Vec<String> = (0..8)
        .map(|i| format!("{i}").repeat(((i + 1) * 131_072) + i))
        .collect();
    for (i, v) in values.iter().enumerate() {
        assert_eq!(probe.cmd(&["SET", &format!("big:{i}"), v]), ok());
    }
    let mut tls = rustls_client(&certs, port);
    // 64 GETs, 36 MiB of replies, in one write; read once all are sent.
    let gets: Vec<u8> = (0..64)
        .flat_map(|j| encode_command(&[b"GET", format!("big:{}", j % 8).as_bytes()]))
        .collect();
    tls.write_all(&gets).expect("the GETs");
    for j in 0..64 {
        let v = &values[j % 8];
        let want = format!("${}\r\n{v}\r\n", v.len());
        let mut got = vec![0u8; want.len()];
        tls.read_exact(&mut got)
            .unwrap_or_else(|e| panic!("reply {j}: {e}"));
        assert!(got == want.as_bytes(), "reply {j} differs");
    }
    tls.write_all(b"PING\r\n").expect("PING");
    let mut pong = [0u8; 7];
    tls.read_exact(&mut pong).expect("PONG");
    assert_eq!(&pong, b"+PONG\r\n");
}

#[test]
fn a_certificate_common_name_logs_in_as_that_user_with_tls_auth_clients_user_cn() {
    let certs = Certs::make();
    let client_ext = "extendedKeyUsage=clientAuth\n";
    certs.sign("alice", "alice", client_ext);
    certs.sign("nobody", "nobody", client_ext);
    certs.sign("off", "offuser", client_ext);
    // The default user needs a password: a client not logged in by its
    // certificate gets NOAUTH.
    let cluster = RedisCluster::start(ClusterSpec::default());
    let port = free_port();
    let conf = format!(
        "threads 2\n{}tls-auth-clients-user CN\nrequirepass secret\n\
         user alice on >alicepass ~* &* +@all\nuser offuser off >x ~* +@all\n",
        certs.conf(port, "optional")
    );
    let m = Mithril::start_locked(bin(), &cluster.seeds(), &conf);
    let as_cert = |name: &str, args: &[&str]| {
        let mut cmd = Command::new("timeout");
        cmd.args([
            "20",
            "redis-cli",
            "--tls",
            "--cacert",
            &certs.path("ca.crt"),
        ])
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["--cert", &certs.path(&format!("{name}.crt"))])
        .args(["--key", &certs.path(&format!("{name}.key"))])
        .args(args)
        .stdin(Stdio::null());
        stdout(&cmd.output().expect("redis-cli"))
    };
    for _ in 0..4 {
        // Each a new connection, on either worker.
        assert_eq!(as_cert("alice", &["ACL", "WHOAMI"]), "alice");
        assert_eq!(as_cert("alice", &["SET", "cn:k", "v"]), "OK");
    }
    // A name that is no user, a user that is off, no certificate: not
    // logged in (the default user needs its password).
    for name in ["nobody", "off"] {
        let o = as_cert(name, &["PING"]);
        assert!(o.contains("NOAUTH"), "{name}: {o}");
    }
    let o = certs.cli(port, false, &["PING"], None);
    assert!(stdout(&o).contains("NOAUTH"), "{o:?}");
    // AUTH still works over TLS; the plain port is unchanged.
    let o = certs.cli(
        port,
        false,
        &["--user", "alice", "--pass", "alicepass", "GET", "cn:k"],
        None,
    );
    assert_eq!(stdout(&o), "v", "{o:?}");
    let mut plain = m.conn();
    assert!(
        plain.cmd(&["GET", "cn:k"]).is_error(),
        "NOAUTH on the plain port"
    );
    // Refused with tls-auth-clients no: no certificate is asked for.
    let more = format!(
        "{}tls-auth-clients-user CN\n",
        certs.conf(free_port(), "no")
    );
    let (valid, text) = test_config(&certs, &more);
    assert!(
        !valid && text.contains("tls-auth-clients-user CN needs"),
        "{text}"
    );
}

/// A `bind` address added by a reload listens at `tls-port` too, not only
/// at `port`; removed again, both listeners close and the TLS clients
/// that came through it (on every worker) are closed, while the first
/// address's TLS listener goes on serving.
fn a_bind_address_added_live_listens_at_tls_port_too(threads: usize) {
    let certs = Certs::make();
    let (_cluster, m, tls_port) = start(&certs, threads, "no", "");
    let (other_tls, other_plain) = (
        format!("127.0.0.2:{tls_port}"),
        format!("127.0.0.2:{}", m.port),
    );
    assert!(!certs.handshake_at(&other_tls, "ca.crt").0, "not yet");
    let base = fs::read_to_string(&m.conf_path).expect("read the config");
    fs::write(&m.conf_path, format!("{base}bind 127.0.0.1 127.0.0.2\n")).expect("write");
    let mut admin = m.conn();
    assert_eq!(admin.cmd(&["CONFIG", "RELOAD"]), ok(), "threads {threads}");
    wait_until(
        "the TLS listener on 127.0.0.2",
        Duration::from_secs(10),
        || certs.handshake_at(&other_tls, "ca.crt").0.then_some(()),
    );
    let mut plain = Conn::try_connect(&other_plain).expect("the plain listener on 127.0.0.2");
    assert_eq!(plain.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(
        info_text_field(&mut admin, "server", "config_pending_restart"),
        ""
    );
    // TLS clients through the new address, on every worker.
    let mut held: Vec<Held> = (0..2 * threads)
        .map(|_| Held::open_at(&certs, &other_tls))
        .collect();
    for h in &mut held {
        assert_eq!(h.cmd("GET k"), "$1", "threads {threads}");
        assert_eq!(
            h.lines
                .recv_timeout(Duration::from_secs(10))
                .ok()
                .as_deref(),
            Some("v")
        );
    }

    fs::write(&m.conf_path, &base).expect("write");
    assert_eq!(admin.cmd(&["CONFIG", "RELOAD"]), ok(), "threads {threads}");
    wait_until("127.0.0.2 refusing TLS", Duration::from_secs(10), || {
        (!certs.handshake_at(&other_tls, "ca.crt").0).then_some(())
    });
    for h in &mut held {
        wait_until(
            "a TLS client of 127.0.0.2 closed",
            Duration::from_secs(10),
            || h.child.try_wait().ok().flatten(),
        );
    }
    assert!(
        plain.is_closed(Duration::from_secs(10)),
        "plain client of 127.0.0.2"
    );
    let (verified, text) = peer_subject(&certs, tls_port);
    assert!(verified, "127.0.0.1's TLS listener: {text}");
}

#[test]
fn a_bind_address_added_live_listens_at_tls_port_too_threads_1() {
    a_bind_address_added_live_listens_at_tls_port_too(1);
}

#[test]
fn a_bind_address_added_live_listens_at_tls_port_too_threads_2() {
    a_bind_address_added_live_listens_at_tls_port_too(2);
}

#[test]
fn a_bind_address_added_live_listens_at_tls_port_too_threads_4() {
    a_bind_address_added_live_listens_at_tls_port_too(4);
}
