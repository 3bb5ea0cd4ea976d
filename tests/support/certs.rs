//! Certificates for the TLS tests and the TLS bench, made by `openssl` in
//! a temp dir: a CA, and certificates it signs (EC P-256, two days).
//!
//! ```text
//!  ca.crt / ca.key          the CA (basicConstraints CA:TRUE)
//!  server.crt / .key        CN 127.0.0.1, SAN IP:127.0.0.1 DNS:localhost,
//!                           serverAuth: what mithril shows its clients
//!  client.crt / .key        clientAuth: what a client shows mithril
//!  CA.crt / .key, NAME.*    (made by `new_ca`, `sign_by`) other CAs and
//!                           what they sign: a certificate a reload swaps
//!  node.crt / .key          (made by `node_tls`) the server's SAN with
//!                           serverAuth and clientAuth: a cluster node
//!                           presents it both ways on the cluster bus
//! ```
//!
//! Owns: its temp dir and the files in it. Invariant: every file named
//! above exists once `make` (or, for the node's, `node_tls`) returns.
//! Never: touch a file outside its dir.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::cluster::{AuthClients, NodeTls};
use super::{make_temp_dir, remove_temp_dir};

/// A CA, and a server and a client certificate it signed.
pub struct Certs {
    pub dir: PathBuf,
}

/// Runs `openssl args` in `dir`, failing the test on an error.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const EC: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
/// The extensions of a server's certificate for 127.0.0.1 (and localhost).
pub const SERVER_EXT: &str =
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n";
/// A cluster node's: Redis asks a peer on the cluster bus for a client
/// certificate whatever `tls-auth-clients` says, and OpenSSL refuses one
/// whose extended key usage lacks clientAuth.
const NODE_EXT: &str =
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n";

impl Certs {
    pub fn make() -> Certs {
        Certs::make_in(make_temp_dir())
    }

    /// `make` in `dir` (created if need be; removed on drop).
    pub fn make_in(dir: PathBuf) -> Certs {
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let certs = Certs { dir };
        let mut ca = vec![
            "req",
            "-x509",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=mithril test CA",
        ];
        ca.extend(EC);
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&certs.dir, &ca);
        certs.sign("server", "127.0.0.1", SERVER_EXT);
        certs.sign(
            "client",
            "mithril test client",
            "extendedKeyUsage=clientAuth\n",
        );
        certs
    }

    /// `CA.crt` and `CA.key`: another self-signed CA, named `cn` (a
    /// certificate swapped by a reload that only the new CA verifies).
    pub fn new_ca(&self, ca: &str, cn: &str) {
        let subj = format!("/CN={cn}");
        let (key, crt) = (format!("{ca}.key"), format!("{ca}.crt"));
        let mut args = vec!["req", "-x509", "-nodes", "-days", "2", "-subj", &subj];
        args.extend(EC);
        args.extend([
            "-keyout",
            &key,
            "-out",
            &crt,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&self.dir, &args);
    }

    /// `NAME.key` and `NAME.crt`, a certificate for `cn` the CA signed
    /// with the extensions `ext`.
    pub fn sign(&self, name: &str, cn: &str, ext: &str) {
        self.sign_by("ca", name, cn, ext);
    }

    /// Like `sign`, by the CA `ca` (`ca`, or one made by `new_ca`).
    pub fn sign_by(&self, ca: &str, name: &str, cn: &str, ext: &str) {
        let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
        let dir = &self.dir;
        fs::write(dir.join(format!("{name}.ext")), ext).expect("write ext");
        let subj = format!("/CN={cn}");
        let (key, csr, crt, extf) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        let mut req = vec!["req", "-new", "-nodes", "-subj", &subj];
        req.extend(EC);
        req.extend(["-keyout", &key, "-out", &csr]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca_crt,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &extf,
                "-out",
                &crt,
            ],
        );
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `redis-cli --tls` against `port`, with the client certificate when
    /// `cert`, bounded by coreutils' `timeout`; `stdin` fed to it.
    pub fn cli(&self, port: u16, cert: bool, args: &[&str], stdin: Option<&Path>) -> Output {
        let mut cmd = Command::new("timeout");
        cmd.args(["20", "redis-cli", "--tls", "--cacert"])
            .arg(self.path("ca.crt"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string()]);
        if cert {
            cmd.args(["--cert", &self.path("client.crt")])
                .args(["--key", &self.path("client.key")]);
        }
        cmd.args(args);
        match stdin {
            Some(p) => cmd.stdin(fs::File::open(p).expect("open stdin file")),
            None => cmd.stdin(Stdio::null()),
        };
        cmd.output()
            .expect("redis-cli runs (apt-get install redis-tools)")
    }

    /// A handshake with `port` by `openssl s_client`, trusting only the
    /// CA file `ca` (a name in the dir, e.g. `ca.crt`): whether the chain
    /// verified, and what s_client said (the server's subject among it).
    pub fn handshake(&self, port: u16, ca: &str) -> (bool, String) {
        self.handshake_at(&format!("127.0.0.1:{port}"), ca)
    }

    /// Like `handshake`, with `addr` (`HOST:PORT`).
    pub fn handshake_at(&self, addr: &str, ca: &str) -> (bool, String) {
        let o = Command::new("timeout")
            .args(["10", "openssl", "s_client", "-connect", addr])
            .args(["-CAfile", &self.path(ca), "-verify_return_error"])
            .stdin(Stdio::null())
            .output()
            .expect("openssl s_client runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.success(), text)
    }

    /// mithril's `tls-*` lines for a TLS listener toward clients on `port`.
    pub fn conf(&self, port: u16, auth: &str) -> String {
        format!(
            "tls-port {port}\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\n\
             tls-auth-clients {auth}\n",
            self.path("server.crt"),
            self.path("server.key"),
            self.path("ca.crt"),
        )
    }

    /// What `ClusterSpec::tls` needs for TLS nodes: the node certificate
    /// (signed on the first call) and the CA.
    pub fn node_tls(&self, auth_clients: AuthClients) -> NodeTls {
        if !self.dir.join("node.crt").exists() {
            self.sign("node", "127.0.0.1", NODE_EXT);
        }
        NodeTls {
            cert_file: self.path("node.crt"),
            key_file: self.path("node.key"),
            ca_cert_file: self.path("ca.crt"),
            auth_clients,
        }
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        remove_temp_dir(&self.dir);
    }
}
