//! The `tls-*` rows of the directive table (listed in `table.rs`, in the
//! order the documentation presents them). Redis's names and spellings;
//! what each value means is `crate::config::tls`.

use super::{Directive, Kind};
use crate::config::tls::parse_protocols;
use crate::config::values::{first, number, parse_bool};

/// A plain string setting of `TlsSettings` (a file name or a list).
macro_rules! text_row {
    ($name:literal, $field:ident, $summary:literal, $kind:expr) => {
        Directive {
            name: $name,
            default: "\"\"",
            summary: $summary,
            runtime_settable: false,
            kind: $kind,
            arity: (1, 1),
            setter: |c, a| {
                c.tls.$field = first(a).to_string();
                Ok(())
            },
            getter: |c| vec![c.tls.$field.clone()],
        }
    };
}

/// A yes/no setting of `TlsSettings`.
macro_rules! flag_row {
    ($name:literal, $field:ident, $default:literal, $summary:literal) => {
        Directive {
            name: $name,
            default: $default,
            summary: $summary,
            runtime_settable: false,
            kind: Kind::Plain,
            arity: (1, 1),
            setter: |c, a| {
                c.tls.$field = parse_bool(first(a)).ok_or(concat!($name, " must be yes or no"))?;
                Ok(())
            },
            getter: |c| vec![if c.tls.$field { "yes" } else { "no" }.to_string()],
        }
    };
}

pub(super) const PORT: Directive = Directive {
    name: "tls-port",
    default: "0",
    summary: "TCP port of the TLS listener on every bind address; 0 means none",
    runtime_settable: false,
    kind: Kind::Plain,
    arity: (1, 1),
    setter: |c, a| {
        c.tls.port = number("tls-port", first(a), 0, 65535)? as u16;
        Ok(())
    },
    getter: |c| vec![c.tls.port.to_string()],
};

pub(super) const CERT_FILE: Directive = text_row!(
    "tls-cert-file",
    cert_file,
    "the server's certificate chain (PEM) shown to TLS clients",
    Kind::Plain
);

pub(super) const KEY_FILE: Directive = text_row!(
    "tls-key-file",
    key_file,
    "the private key (PEM, unencrypted) of tls-cert-file",
    Kind::Plain
);

pub(super) const KEY_FILE_PASS: Directive = text_row!(
    "tls-key-file-pass",
    key_file_pass,
    "refused when set: encrypted private keys are not supported",
    Kind::Secret
);

pub(super) const CA_CERT_FILE: Directive = text_row!(
    "tls-ca-cert-file",
    ca_cert_file,
    "CA certificates (PEM) client certificates are checked against",
    Kind::Plain
);

pub(super) const CA_CERT_DIR: Directive = text_row!(
    "tls-ca-cert-dir",
    ca_cert_dir,
    "a directory of CA certificates (PEM files) client certificates are checked against",
    Kind::Plain
);

pub(super) const AUTH_CLIENTS: Directive = Directive {
    name: "tls-auth-clients",
    default: "yes",
    summary: "TLS clients must (yes), may (optional) or need not (no) present a certificate",
    runtime_settable: false,
    kind: Kind::Plain,
    arity: (1, 1),
    setter: |c, a| {
        c.tls.auth_clients = first(a).parse()?;
        Ok(())
    },
    getter: |c| vec![c.tls.auth_clients.to_string()],
};

pub(super) const AUTH_CLIENTS_USER: Directive = Directive {
    name: "tls-auth-clients-user",
    default: "off",
    summary: "CN: a client certificate's common name logs the client in as that user",
    runtime_settable: false,
    kind: Kind::Plain,
    arity: (1, 1),
    setter: |c, a| {
        c.tls.auth_clients_user = match first(a) {
            v if v.eq_ignore_ascii_case("CN") => true,
            v if v.eq_ignore_ascii_case("off") => false,
            _ => return Err("tls-auth-clients-user must be off or CN".to_string()),
        };
        Ok(())
    },
    getter: |c| vec![if c.tls.auth_clients_user { "CN" } else { "off" }.to_string()],
};

pub(super) const PROTOCOLS: Directive = Directive {
    name: "tls-protocols",
    default: "\"TLSv1.2 TLSv1.3\"",
    summary: "the TLS versions offered to clients: TLSv1.2, TLSv1.3 or both",
    runtime_settable: false,
    kind: Kind::Plain,
    arity: (1, 2),
    setter: |c, a| {
        let mut p = parse_protocols(a)?;
        if p.is_empty() {
            p = crate::config::tls::PROTOCOLS.map(str::to_string).to_vec();
        }
        c.tls.protocols = p;
        Ok(())
    },
    getter: |c| vec![c.tls.protocols.join(" ")],
};

pub(super) const CIPHERSUITES: Directive = text_row!(
    "tls-ciphersuites",
    ciphersuites,
    "colon-separated cipher suites offered (IANA names); empty means rustls's defaults",
    Kind::Plain
);

pub(super) const SESSION_CACHING: Directive = flag_row!(
    "tls-session-caching",
    session_caching,
    "yes",
    "let TLS clients resume sessions (a session cache and TLS 1.3 tickets)"
);

pub(super) const HANDSHAKE_TIMEOUT: Directive = Directive {
    name: "tls-handshake-timeout",
    default: "10000",
    summary: "milliseconds a TLS handshake may take: a client still handshaking is closed, a node connection fails",
    runtime_settable: false,
    kind: Kind::Plain,
    arity: (1, 1),
    setter: |c, a| {
        c.tls.handshake_timeout_ms = number("tls-handshake-timeout", first(a), 100, 600_000)?;
        Ok(())
    },
    getter: |c| vec![c.tls.handshake_timeout_ms.to_string()],
};

pub(super) const CLUSTER: Directive = flag_row!(
    "tls-cluster",
    cluster,
    "no",
    "connect to the nodes (and pools' servers) over TLS, the topology's probes included"
);

pub(super) const SENTINEL: Directive = flag_row!(
    "tls-sentinel",
    sentinel,
    "no",
    "ask the sentinels of Sentinel pools over TLS, with tls-cluster's CAs and certificate"
);

pub(super) const CLIENT_CERT_FILE: Directive = text_row!(
    "tls-client-cert-file",
    client_cert_file,
    "the certificate chain (PEM) shown to the nodes; empty: tls-cert-file's",
    Kind::Plain
);

pub(super) const CLIENT_KEY_FILE: Directive = text_row!(
    "tls-client-key-file",
    client_key_file,
    "the private key (PEM, unencrypted) of tls-client-cert-file",
    Kind::Plain
);

pub(super) const CLIENT_KEY_FILE_PASS: Directive = text_row!(
    "tls-client-key-file-pass",
    client_key_file_pass,
    "refused when set: encrypted private keys are not supported",
    Kind::Secret
);

pub(super) const SERVER_NAME: Directive = text_row!(
    "tls-server-name",
    server_name,
    "the name the nodes' certificates are verified against (and SNI); empty: seed host or node IP",
    Kind::Plain
);
