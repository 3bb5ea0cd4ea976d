//! The `tls-*` settings: Redis's directive names for TLS toward clients,
//! as values (`TlsSettings`) and the checks that span them
//! ([`validate_tls`]). Turning them into a rustls configuration (reading
//! the certificate and key files) is `crate::tls`'s job: this module reads
//! no file.

use std::fmt;
use std::str::FromStr;

/// `tls-auth-clients`: whether a TLS client must present a certificate
/// signed by the configured CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthClients {
    /// No certificate is asked for.
    No,
    /// One is asked for and checked when given; a client without one is
    /// accepted too.
    Optional,
    /// A client without a valid certificate is refused (Redis's default).
    Yes,
}

impl AuthClients {
    /// The directive's spelling of this value.
    pub fn name(self) -> &'static str {
        match self {
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
            AuthClients::Yes => "yes",
        }
    }
}

impl fmt::Display for AuthClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AuthClients {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [AuthClients::No, AuthClients::Optional, AuthClients::Yes]
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| "tls-auth-clients must be no, optional or yes".to_string())
    }
}

/// The protocol versions rustls speaks, in `tls-protocols`' spelling.
pub const PROTOCOLS: [&str; 2] = ["TLSv1.2", "TLSv1.3"];

/// Every `tls-*` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls-port`: the TLS listener's port on every `bind` address; 0 is
    /// no TLS listener.
    pub port: u16,
    /// `tls-cert-file`, `tls-key-file`: the server's certificate chain and
    /// private key (PEM).
    pub cert_file: String,
    pub key_file: String,
    /// `tls-key-file-pass`: refused when set (see [`validate_tls`]).
    pub key_file_pass: String,
    /// `tls-ca-cert-file`, `tls-ca-cert-dir`: the CAs client certificates
    /// are checked against.
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: AuthClients,
    /// `tls-auth-clients-user CN` (true) or `off`: a client certificate's
    /// common name logs the client in as the user of that name.
    pub auth_clients_user: bool,
    /// `tls-protocols`: the versions offered, each one of [`PROTOCOLS`]
    /// (never empty: an empty value means both).
    pub protocols: Vec<String>,
    /// `tls-ciphersuites`: colon-separated suite names; empty means the
    /// provider's defaults.
    pub ciphersuites: String,
    /// `tls-session-caching`: resumption (a session cache and TLS 1.3
    /// tickets).
    pub session_caching: bool,
    /// `tls-handshake-timeout`: milliseconds a client has to finish its
    /// handshake, and a node connection (`tls-cluster yes`) from its
    /// connect's start.
    pub handshake_timeout_ms: u64,
    /// `tls-cluster`: every connection to a node (or a pool's server) is
    /// TLS, the topology's probes included.
    pub cluster: bool,
    /// `tls-sentinel`: the sentinels of Sentinel pools are asked and
    /// watched over TLS, verified and authenticated as the nodes are.
    pub sentinel: bool,
    /// `tls-client-cert-file`, `tls-client-key-file`: the certificate
    /// presented to the nodes (mutual TLS). Empty: `tls-cert-file` and
    /// `tls-key-file` when set (Redis's rule), else none.
    pub client_cert_file: String,
    pub client_key_file: String,
    /// `tls-client-key-file-pass`: refused when set, as `tls-key-file-pass`.
    pub client_key_file_pass: String,
    /// `tls-server-name`: the name the nodes' certificates are checked
    /// against and sent as SNI. Empty: the first seed's host name when it
    /// is one, else each node's IP address.
    pub server_name: String,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            port: 0,
            cert_file: String::new(),
            key_file: String::new(),
            key_file_pass: String::new(),
            ca_cert_file: String::new(),
            ca_cert_dir: String::new(),
            auth_clients: AuthClients::Yes,
            auth_clients_user: false,
            protocols: PROTOCOLS.map(str::to_string).to_vec(),
            ciphersuites: String::new(),
            session_caching: true,
            handshake_timeout_ms: 10_000,
            cluster: false,
            sentinel: false,
            client_cert_file: String::new(),
            client_key_file: String::new(),
            client_key_file_pass: String::new(),
            server_name: String::new(),
        }
    }
}

/// `tls-protocols`' words (one quoted argument, as Redis takes it, or
/// several): each a version rustls speaks.
pub(super) fn parse_protocols(args: &[&str]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for word in args.iter().flat_map(|a| a.split_whitespace()) {
        let Some(p) = PROTOCOLS.iter().find(|p| p.eq_ignore_ascii_case(word)) else {
            return Err(format!(
                "tls-protocols: '{word}' is not supported (mithril speaks TLSv1.2 and TLSv1.3)"
            ));
        };
        if !out.iter().any(|o| o == p) {
            out.push(p.to_string());
        }
    }
    Ok(out)
}

/// Checks between the `tls-*` settings, and with `port`. `None` when they
/// hold.
pub(super) fn validate_tls(t: &TlsSettings, plain_port: u16) -> Option<String> {
    if let Some(e) = validate_nodes(t) {
        return Some(e);
    }
    if plain_port == 0 && t.port == 0 {
        return Some("port must be between 1 and 65535 (0 only with a tls-port)".to_string());
    }
    if t.port == 0 {
        return None;
    }
    if t.port == plain_port {
        return Some(format!(
            "tls-port {} is also the plain port: give them different ports",
            t.port
        ));
    }
    if t.cert_file.is_empty() || t.key_file.is_empty() {
        return Some("tls-port needs tls-cert-file and tls-key-file".to_string());
    }
    if !t.key_file_pass.is_empty() {
        return Some(
            "tls-key-file-pass is not supported: mithril's TLS library (rustls) cannot decrypt \
             an encrypted private key; give tls-key-file an unencrypted key (e.g. \
             'openssl pkey -in KEY -out PLAIN') readable only by mithril"
                .to_string(),
        );
    }
    if t.auth_clients != AuthClients::No && t.ca_cert_file.is_empty() && t.ca_cert_dir.is_empty() {
        // Redis's message for the same mistake.
        return Some(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when \
             tls-auth-clients is enabled (or set tls-auth-clients no)"
                .to_string(),
        );
    }
    if t.auth_clients_user && t.auth_clients == AuthClients::No {
        return Some(
            "tls-auth-clients-user CN needs a client certificate: set tls-auth-clients \
             yes or optional"
                .to_string(),
        );
    }
    None
}

/// The checks of the node side (`tls-cluster` and its files).
fn validate_nodes(t: &TlsSettings) -> Option<String> {
    if t.client_cert_file.is_empty() != t.client_key_file.is_empty() {
        return Some(
            "tls-client-cert-file and tls-client-key-file go together: give both or neither"
                .to_string(),
        );
    }
    if !t.client_key_file_pass.is_empty() {
        return Some(
            "tls-client-key-file-pass is not supported: mithril's TLS library (rustls) cannot \
             decrypt an encrypted private key; give tls-client-key-file an unencrypted key"
                .to_string(),
        );
    }
    if !t.server_name.is_empty()
        && rustls::pki_types::ServerName::try_from(t.server_name.as_str()).is_err()
    {
        return Some(format!(
            "tls-server-name '{}' is neither a DNS name nor an IP address",
            t.server_name
        ));
    }
    for (on, name) in [(t.cluster, "tls-cluster"), (t.sentinel, "tls-sentinel")] {
        if on && t.ca_cert_file.is_empty() && t.ca_cert_dir.is_empty() {
            return Some(format!(
                "{name} yes needs tls-ca-cert-file or tls-ca-cert-dir to verify the nodes' \
                 certificates (tls-ca-cert-dir /etc/ssl/certs for a public CA)"
            ));
        }
    }
    None
}

impl TlsSettings {
    /// The certificate and key presented to the nodes, if any: the
    /// `tls-client-*` pair, else the server's (Redis's rule).
    pub fn client_identity(&self) -> Option<(&str, &str)> {
        if !self.client_cert_file.is_empty() {
            Some((&self.client_cert_file, &self.client_key_file))
        } else if !self.cert_file.is_empty() && !self.key_file.is_empty() {
            Some((&self.cert_file, &self.key_file))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_take_one_quoted_word_or_several_and_refuse_old_versions() {
        assert_eq!(
            parse_protocols(&["TLSv1.2 TLSv1.3"]).unwrap(),
            ["TLSv1.2", "TLSv1.3"]
        );
        assert_eq!(
            parse_protocols(&["tlsv1.3", "TLSv1.3"]).unwrap(),
            ["TLSv1.3"]
        );
        assert!(parse_protocols(&[""]).unwrap().is_empty());
        let e = parse_protocols(&["TLSv1.1 TLSv1.2"]).unwrap_err();
        assert!(e.contains("'TLSv1.1' is not supported"), "{e}");
    }

    #[test]
    fn a_tls_port_needs_its_files_and_a_ca_unless_clients_are_not_checked() {
        let mut t = TlsSettings::default();
        assert_eq!(validate_tls(&t, 7777), None, "no TLS listener");
        assert!(validate_tls(&t, 0).is_some(), "no listener at all");
        t.port = 7778;
        assert!(validate_tls(&t, 7777).unwrap().contains("tls-cert-file"));
        t.cert_file = "c.pem".into();
        t.key_file = "k.pem".into();
        assert!(validate_tls(&t, 7777)
            .unwrap()
            .contains("tls-ca-cert-file or tls-ca-cert-dir"));
        t.auth_clients = AuthClients::No;
        assert_eq!(validate_tls(&t, 7777), None);
        assert_eq!(validate_tls(&t, 0), None, "port 0: TLS only");
        assert!(validate_tls(&t, 7778)
            .unwrap()
            .contains("also the plain port"));
        t.auth_clients_user = true;
        assert!(validate_tls(&t, 7777)
            .unwrap()
            .contains("tls-auth-clients-user CN needs"));
        t.auth_clients_user = false;
        t.key_file_pass = "secret".into();
        assert!(validate_tls(&t, 7777).unwrap().contains("cannot decrypt"));
        assert_eq!("OPTIONAL".parse(), Ok(AuthClients::Optional));
        t.key_file_pass.clear();
        t.cluster = true;
        assert!(validate_tls(&t, 7777)
            .unwrap()
            .contains("to verify the nodes"));
        t.ca_cert_dir = "/etc/ssl/certs".into();
        assert_eq!(validate_tls(&t, 7777), None);
        assert_eq!(
            t.client_identity(),
            Some(("c.pem", "k.pem")),
            "the server's"
        );
        t.client_cert_file = "cc.pem".into();
        assert!(validate_tls(&t, 7777).unwrap().contains("go together"));
        t.client_key_file = "ck.pem".into();
        assert_eq!(t.client_identity(), Some(("cc.pem", "ck.pem")));
        t.server_name = "redis.example.com".into();
        assert_eq!(validate_tls(&t, 7777), None);
        t.server_name = "not a name".into();
        assert!(validate_tls(&t, 7777)
            .unwrap()
            .contains("neither a DNS name"));
        assert!("maybe".parse::<AuthClients>().is_err());
    }
}
