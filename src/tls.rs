//! TLS toward clients: the rustls server configuration built from the
//! `tls-*` directives (`config::tls`), once at start-up.
//!
//! rustls with its `ring` provider: no OpenSSL linkage, nothing built with
//! cmake, and a library that works on byte buffers, so each worker's mio
//! loop drives its handshakes and records itself (`session/tls.rs`)
//! without an async runtime (doc/architecture.md, "TLS", says why this
//! crate). Certificates and keys are PEM files read with
//! `rustls-pki-types`.
//!
//! A reload builds it again from the file's `tls-*` directives and the
//! files they name, which may have been replaced in place (a renewed
//! certificate): the handshakes after it use the new configuration, the
//! sessions already open keep theirs ([`reload`]).
//!
//! Never: accept a configuration it cannot honour (an encrypted key, an
//! unknown suite): those stop the start, or fail the reload, with a
//! message naming the directive.

pub mod nodes;

use crate::config::tls::{AuthClients, TlsSettings};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use std::path::Path;
use std::sync::Arc;

/// The `tls-*` directives a reload applies (the others, `tls-port` and
/// `tls-handshake-timeout`, wait for a restart).
pub const RELOADED: &[&str] = &[
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-auth-clients",
    "tls-protocols",
    "tls-ciphersuites",
    "tls-session-caching",
];

/// The `tls-*` directives a reload applies to the node side (with
/// `tls-cluster yes` or `tls-sentinel yes` at start): those two wait for
/// a restart.
pub const NODES_RELOADED: &[&str] = &[
    "tls-server-name",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-protocols",
    "tls-ciphersuites",
];

/// A reload: the configuration the file's `tls-*` directives describe,
/// ready to be swapped in by [`install`]; `Ok(None)` when the process has
/// no TLS listener (then nothing TLS is reloaded, and a changed `tls-*`
/// directive is pending restart) or the file has none left (neither a
/// `tls-port` nor a pool's `tls-listen`: that change is pending).
pub fn reload(
    running: Option<&arc_swap::ArcSwap<ServerConfig>>,
    cfg: &crate::config::Config,
) -> Result<Option<Arc<ServerConfig>>, String> {
    let t = &cfg.tls;
    let listens = t.port != 0 || cfg.pools.iter().any(|p| !p.tls_listen.is_empty());
    if running.is_none() || !listens {
        return Ok(None);
    }
    server_config(t).map(Some)
}

/// Puts a configuration [`reload`] built in force for the next handshakes.
pub fn install(running: Option<&arc_swap::ArcSwap<ServerConfig>>, cfg: Arc<ServerConfig>) {
    if let Some(r) = running {
        r.store(cfg);
    }
}

/// Moves the plaintext `reader` holds into `rbuf`, up to `limit` bytes in
/// all, growing it by at least `grow` when it must. `Ok(false)` once the
/// peer closed (close_notify, or a TCP EOF) and nothing is left: the read
/// side of a TLS session (`session/tls.rs`) and of a node connection
/// (`backend/tls.rs`).
pub fn take_plaintext(
    mut reader: rustls::Reader<'_>,
    rbuf: &mut bytes::BytesMut,
    limit: usize,
    grow: usize,
) -> std::io::Result<bool> {
    use std::io::{BufRead, ErrorKind};
    while rbuf.len() < limit {
        let chunk = match reader.fill_buf() {
            Ok([]) => return Ok(false),
            Ok(chunk) => chunk,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(e),
        };
        let n = chunk.len().min(limit - rbuf.len());
        if rbuf.capacity() - rbuf.len() < n {
            rbuf.reserve(n.max(grow));
        }
        rbuf.extend_from_slice(&chunk[..n]);
        reader.consume(n);
    }
    Ok(true)
}

/// Writes the ciphertext `conn` holds into `out` until all of it left
/// (`.0`) or `out` would block; `.1`: some of it was written.
pub fn send_ciphertext<D>(
    conn: &mut rustls::ConnectionCommon<D>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<(bool, bool)> {
    use std::io::ErrorKind;
    let mut wrote = false;
    while conn.wants_write() {
        match conn.write_tls(out) {
            Ok(n) => wrote |= n > 0,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok((false, wrote)),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((true, wrote))
}

/// Sessions the resumption cache keeps (Redis's `tls-session-cache-size`
/// default).
const SESSION_CACHE: usize = 20_480;

/// The server configuration for `t`, or why there is none (naming the
/// directive and the file).
pub fn server_config(t: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(provider(&t.ciphersuites)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(t))
        .map_err(|e| format!("tls-protocols / tls-ciphersuites: {e}"))?;
    let builder = match t.auth_clients {
        AuthClients::No => builder.with_no_client_auth(),
        AuthClients::Optional | AuthClients::Yes => {
            let roots = Arc::new(roots(t)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = if t.auth_clients == AuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("tls-ca-cert-file / tls-ca-cert-dir: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let chain = certificates(&t.cert_file, "tls-cert-file")?;
    let key = private_key_of(&t.key_file, "tls-key-file")?;
    let mut cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("tls-cert-file / tls-key-file: {e}"))?;
    if t.session_caching {
        cfg.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    } else {
        cfg.session_storage = Arc::new(NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
    }
    Ok(Arc::new(cfg))
}

/// The versions of `tls-protocols`.
fn versions(t: &TlsSettings) -> Vec<&'static SupportedProtocolVersion> {
    t.protocols
        .iter()
        .map(|p| {
            if p == "TLSv1.2" {
                &rustls::version::TLS12
            } else {
                &rustls::version::TLS13
            }
        })
        .collect()
}

/// The ring provider, its suites cut to `names` (colon-separated IANA
/// names, OpenSSL's TLS 1.3 spellings included) when there are any.
fn provider(names: &str) -> Result<CryptoProvider, String> {
    let mut p = rustls::crypto::ring::default_provider();
    if names.trim().is_empty() {
        return Ok(p);
    }
    let known: Vec<String> = p.cipher_suites.iter().map(|s| suite_name(*s)).collect();
    let mut wanted = Vec::new();
    for name in names.split(':').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(i) = known.iter().position(|k| k.eq_ignore_ascii_case(name)) else {
            return Err(format!(
                "tls-ciphersuites: unknown cipher suite '{name}' (known: {})",
                known.join(":")
            ));
        };
        wanted.push(p.cipher_suites[i]);
    }
    p.cipher_suites = wanted;
    Ok(p)
}

/// A suite's IANA name (`TLS_AES_128_GCM_SHA256`, not rustls's
/// `TLS13_AES_128_GCM_SHA256`).
fn suite_name(s: rustls::SupportedCipherSuite) -> String {
    let name = format!("{:?}", s.suite());
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

/// Every certificate of a PEM file.
fn certificates(path: &str, directive: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{directive} {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{directive} {path}: no certificate in the file"));
    }
    Ok(certs)
}

/// The private key of `directive` (`tls-key-file`, `tls-client-key-file`).
/// An encrypted one is refused by name: rustls cannot decrypt it.
fn private_key_of(path: &str, directive: &str) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read(path).map_err(|e| format!("{directive} {path}: {e}"))?;
    if text.windows(b"ENCRYPTED".len()).any(|w| w == b"ENCRYPTED") {
        return Err(format!(
            "{directive} {path}: the key is encrypted, and mithril's TLS library (rustls) \
             cannot decrypt it: give an unencrypted key (openssl pkey -in KEY -out PLAIN)"
        ));
    }
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| format!("{directive} {path}: {e}"))
}

/// The CAs of `tls-ca-cert-file` and of every PEM file in
/// `tls-ca-cert-dir` (files holding no certificate are skipped, as an
/// OpenSSL hashed directory may hold other files): what client
/// certificates and, with `tls-cluster`, the nodes' are checked against.
fn roots(t: &TlsSettings) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let mut add = |certs: Vec<CertificateDer<'static>>, what: &str| -> Result<(), String> {
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("{what}: a CA certificate is not usable: {e}"))?;
        }
        Ok(())
    };
    if !t.ca_cert_file.is_empty() {
        let certs = certificates(&t.ca_cert_file, "tls-ca-cert-file")?;
        add(certs, &format!("tls-ca-cert-file {}", t.ca_cert_file))?;
    }
    if !t.ca_cert_dir.is_empty() {
        let dir = Path::new(&t.ca_cert_dir);
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("tls-ca-cert-dir {}: {e}", t.ca_cert_dir))?;
        let mut paths: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for p in paths {
            let Ok(it) = CertificateDer::pem_file_iter(&p) else {
                continue;
            };
            let certs: Vec<_> = it.filter_map(Result::ok).collect();
            add(certs, &format!("tls-ca-cert-dir {}", p.display()))?;
        }
    }
    if roots.is_empty() {
        return Err("tls-ca-cert-file / tls-ca-cert-dir: no CA certificate found".to_string());
    }
    Ok(roots)
}

/// The first common name (CN) in the subject of the DER certificate
/// `der`, when it is a UTF-8, printable or IA5 string: what
/// `tls-auth-clients-user CN` names a user by. `None` for anything else,
/// malformed input included (it never panics: every length is checked
/// against what is left).
pub fn common_name(der: &[u8]) -> Option<String> {
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
    // OPTIONAL, serialNumber, signature, issuer, validity, subject, ... } }
    let (_, cert, _) = der_item(der, 0x30)?;
    let (_, mut tbs, _) = der_item(cert, 0x30)?;
    if tbs.first() == Some(&0xa0) {
        tbs = der_any(tbs)?.2;
    }
    for _ in 0..4 {
        tbs = der_any(tbs)?.2; // serial, signature, issuer, validity
    }
    let (_, mut subject, _) = der_item(tbs, 0x30)?;
    // Name ::= SEQUENCE OF SET OF SEQUENCE { type OID, value ANY }
    while !subject.is_empty() {
        let (_, mut set, rest) = der_item(subject, 0x31)?;
        subject = rest;
        while !set.is_empty() {
            let (_, attr, rest) = der_item(set, 0x30)?;
            set = rest;
            let (_, oid, value) = der_item(attr, 0x06)?;
            if oid != [0x55, 0x04, 0x03] {
                continue; // not 2.5.4.3, commonName
            }
            let (tag, text, _) = der_any(value)?;
            return match tag {
                0x0c | 0x13 | 0x16 => String::from_utf8(text.to_vec()).ok(),
                _ => None,
            };
        }
    }
    None
}

/// The DER item at the start of `input` if its tag is `tag`.
fn der_item(input: &[u8], tag: u8) -> Option<(u8, &[u8], &[u8])> {
    der_any(input).filter(|(t, _, _)| *t == tag)
}

/// The DER item at the start of `input`: (tag, content, what follows).
/// Single-byte tags only, definite lengths of at most four bytes.
fn der_any(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |l, &b| (l << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::common_name;

    /// A DER item of `tag` around `content`.
    fn item(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if content.len() < 0x80 {
            out.push(content.len() as u8);
        } else {
            out.push(0x82);
            out.extend((content.len() as u16).to_be_bytes());
        }
        out.extend(content);
        out
    }

    fn cert(subject_attrs: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
        let mut name = Vec::new();
        for (oid, tag, value) in subject_attrs {
            let attr = [item(0x06, oid), item(*tag, value)].concat();
            name.extend(item(0x31, &item(0x30, &attr)));
        }
        let tbs = [
            item(0xa0, &item(0x02, &[2])),
            item(0x02, &[1]),
            item(0x30, &[]),
            item(0x30, &[]),
            item(0x30, &[]),
            item(0x30, &name),
            item(0x30, &vec![0u8; 300]), // a long item after the subject
        ]
        .concat();
        item(0x30, &[item(0x30, &tbs), item(0x30, &[])].concat())
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];

    #[test]
    fn the_common_name_is_found_among_the_subject_attributes() {
        let c = cert(&[(O, 0x0c, b"org"), (CN, 0x0c, b"alice")]);
        assert_eq!(common_name(&c).as_deref(), Some("alice"));
        let c = cert(&[(CN, 0x13, b"bob"), (CN, 0x0c, b"carol")]);
        assert_eq!(common_name(&c).as_deref(), Some("bob"), "the first one");
        assert_eq!(common_name(&cert(&[(O, 0x0c, b"org")])), None);
        assert_eq!(common_name(&cert(&[(CN, 0x1e, b"\0a")])), None, "BMPString");
    }

    #[test]
    fn malformed_certificates_give_none_at_every_cut() {
        let c = cert(&[(CN, 0x0c, b"alice")]);
        for n in 0..c.len() {
            assert_eq!(common_name(&c[..n]), None, "cut at {n}");
        }
        let mut bad = c.clone();
        bad[1] = 0x85; // a five-byte length
        assert_eq!(common_name(&bad), None);
        assert_eq!(common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }
}
