//! TLS toward the nodes (`tls-cluster yes`): the rustls client
//! configuration every connection to a node is made with, the workers'
//! (`backend/tls.rs`) and the topology's probes (`topology/probe.rs`)
//! alike.
//!
//! A node's certificate is verified against the CAs of
//! `tls-ca-cert-file` / `tls-ca-cert-dir` and against one name:
//! `tls-server-name` when set (what a managed service's certificates
//! carry, a wildcard DNS name, is given there or by a host-name seed);
//! else the host name of the first seed written as a host name; else the
//! node's own IP address (its certificate then carries it as an IP
//! subjectAltName, as Redis's test certificates do). The same name goes
//! out as SNI when it is a DNS name. The certificate presented to the
//! nodes, for mutual TLS, is `tls-client-cert-file` /
//! `tls-client-key-file`, else `tls-cert-file` / `tls-key-file` when
//! those are set (Redis's rule).
//!
//! A reload builds it again from the file's settings and files (a
//! renewed client certificate or CA) and chooses the name again from the
//! file (a server added under a new host name): connections opened after
//! it use the new ones, those open keep theirs.

use super::{certificates, private_key_of, provider, roots, versions};
use crate::config::tls::TlsSettings;
use arc_swap::ArcSwap;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use std::net::SocketAddr;
use std::sync::Arc;

/// What a connection to a node is opened with.
pub struct NodeTls {
    config: ArcSwap<ClientConfig>,
    /// The name every node is verified against; `None`: its IP address.
    name: arc_swap::ArcSwapOption<ServerName<'static>>,
}

/// A reload's client configuration and name, put in force by
/// [`NodeTls::install`].
pub struct Rebuilt {
    config: Arc<ClientConfig>,
    name: Option<ServerName<'static>>,
}

impl NodeTls {
    /// `None` unless `tls-cluster yes` or `tls-sentinel yes`; an error
    /// names the directive or file at fault. `seeds` are the `host:port`
    /// seeds of every pool.
    pub fn new(t: &TlsSettings, seeds: &[String]) -> Result<Option<Arc<NodeTls>>, String> {
        if !t.cluster && !t.sentinel {
            return Ok(None);
        }
        Ok(Some(Arc::new(NodeTls {
            config: ArcSwap::from(client_config(t)?),
            name: arc_swap::ArcSwapOption::from(server_name(t, seeds).map(Arc::new)),
        })))
    }

    /// A client connection to the node at `addr`, its handshake to be
    /// driven by the caller.
    pub fn connect(&self, addr: SocketAddr) -> Result<ClientConnection, rustls::Error> {
        let name = match &*self.name.load() {
            Some(n) => (**n).clone(),
            None => ServerName::IpAddress(addr.ip().into()),
        };
        ClientConnection::new(self.config.load_full(), name)
    }

    /// [`NodeTls::connect`] when there is TLS toward the nodes (`tls`),
    /// `Ok(None)` when not: what every connection to a node starts with.
    pub fn connect_if(
        tls: Option<&NodeTls>,
        addr: SocketAddr,
    ) -> Result<Option<ClientConnection>, rustls::Error> {
        tls.map(|t| t.connect(addr)).transpose()
    }

    /// A reload's configuration and name, built from the file's settings
    /// and the seeds and servers of its pools by the rules of the start:
    /// put in force by [`NodeTls::install`].
    pub fn rebuild(t: &TlsSettings, seeds: &[String]) -> Result<Rebuilt, String> {
        Ok(Rebuilt {
            config: client_config(t)?,
            name: server_name(t, seeds),
        })
    }

    /// The connections opened from now on use `new`.
    pub fn install(&self, new: &Rebuilt) {
        self.config.store(new.config.clone());
        self.name.store(new.name.clone().map(Arc::new));
    }
}

/// `tls-server-name`, else the first seed given as a host name.
fn server_name(t: &TlsSettings, seeds: &[String]) -> Option<ServerName<'static>> {
    if !t.server_name.is_empty() {
        return ServerName::try_from(t.server_name.clone()).ok();
    }
    seeds.iter().find_map(|seed| {
        let host = seed.rsplit_once(':').map_or(seed.as_str(), |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.parse::<std::net::IpAddr>().is_ok() {
            return None;
        }
        match ServerName::try_from(host.to_string()) {
            Ok(n @ ServerName::DnsName(_)) => Some(n),
            _ => None,
        }
    })
}

/// The client configuration for `t`: its CAs, protocol versions and
/// suites, and the client certificate when there is one.
fn client_config(t: &TlsSettings) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(provider(&t.ciphersuites)?);
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(t))
        .map_err(|e| format!("tls-protocols / tls-ciphersuites: {e}"))?
        .with_root_certificates(roots(t)?);
    let cfg = match t.client_identity() {
        Some((cert, key)) => {
            let cert_directive = if t.client_cert_file.is_empty() {
                ("tls-cert-file", "tls-key-file")
            } else {
                ("tls-client-cert-file", "tls-client-key-file")
            };
            let chain = certificates(cert, cert_directive.0)?;
            let key = private_key_of(key, cert_directive.1)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("{} / {}: {e}", cert_directive.0, cert_directive.1))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_for(directive: &str, seeds: &[&str]) -> Option<String> {
        let t = TlsSettings {
            server_name: directive.to_string(),
            ..Default::default()
        };
        let seeds: Vec<String> = seeds.iter().map(|s| s.to_string()).collect();
        server_name(&t, &seeds).map(|n| n.to_str().into_owned())
    }

    #[test]
    fn the_name_checked_is_the_directive_then_a_host_name_seed_then_the_ip() {
        assert_eq!(
            name_for("redis.example.com", &["db.internal:6379"]).as_deref(),
            Some("redis.example.com")
        );
        assert_eq!(
            name_for(
                "",
                &["10.0.0.1:7000", "clustercfg.x.cache.example.com:6379"]
            )
            .as_deref(),
            Some("clustercfg.x.cache.example.com")
        );
        assert_eq!(name_for("", &["10.0.0.1:7000", "[::1]:7001"]), None);
        assert_eq!(name_for("", &[]), None);
    }
}
