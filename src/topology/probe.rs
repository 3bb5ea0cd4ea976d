//! A tiny blocking RESP exchange for the topology thread (never used on a
//! worker): connect with a deadline, authenticate when `backend-password`
//! is set, send one command, read one reply.

use crate::resp::encode;
use crate::resp::value::{self, Value};
use crate::tls::nodes::NodeTls;
use bytes::Bytes;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Largest reply the probe accepts (CLUSTER SHARDS of a very large
/// cluster is a few MB).
const MAX_REPLY: usize = 64 << 20;

/// What the probe sends ahead of every query when `backend-password` is
/// set, and how it words the node's refusal. Built once at start by the
/// backend's credentials code (`backend::auth::for_probe`), so the probe
/// and the workers' connections send the same request and say the same.
#[derive(Clone)]
pub struct Auth {
    /// The AUTH request (`backend-user` / `backend-password`).
    pub frame: Bytes,
    /// The message for the node's error reply to `frame`.
    pub refused: fn(&[u8]) -> String,
}

/// Sends `auth`'s request first (when given), then `args`; the reply to
/// `args`. Over TLS with `tls` (`tls-cluster yes`), the handshake done
/// within the same `timeout` per read and write.
pub fn query(
    addr: SocketAddr,
    timeout: Duration,
    auth: Option<&Auth>,
    tls: Option<&NodeTls>,
    args: &[&[u8]],
) -> io::Result<Value> {
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    match tls {
        None => exchange(s, auth, args),
        Some(t) => {
            let conn = t
                .connect(addr)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("TLS: {e}")))?;
            exchange(rustls::StreamOwned::new(conn, s), auth, args)
        }
    }
}

/// `query`'s exchange on a connected stream.
fn exchange(mut s: impl Read + Write, auth: Option<&Auth>, args: &[&[u8]]) -> io::Result<Value> {
    let mut req = Vec::with_capacity(64);
    if let Some(a) = auth {
        req.extend_from_slice(&a.frame);
    }
    encode::request(&mut req, args);
    s.write_all(&req)?;
    let mut buf = Vec::with_capacity(16 * 1024);
    if let Some(a) = auth {
        if let Value::Error(e) = read_reply(&mut s, &mut buf)? {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                (a.refused)(&e),
            ));
        }
    }
    let v = read_reply(&mut s, &mut buf)?;
    if let Value::Error(e) = &v {
        if e.starts_with(b"NOAUTH") {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the node requires a password ({}): set backend-password (and \
                     backend-user if the cluster's user is not 'default')",
                    String::from_utf8_lossy(e)
                ),
            ));
        }
    }
    Ok(v)
}

/// Whether any of `seeds` refuses mithril's credentials (or wants some):
/// the message saying so. Asked at start when no seed gave a topology.
pub fn auth_problem(
    seeds: &[String],
    timeout: Duration,
    auth: Option<&Auth>,
    tls: Option<&NodeTls>,
) -> Option<String> {
    for seed in seeds {
        for addr in resolve(seed).unwrap_or_default() {
            if let Err(e) = query(addr, timeout, auth, tls, &[b"PING"]) {
                if e.kind() == io::ErrorKind::PermissionDenied {
                    return Some(format!("cluster node {addr}: {e}"));
                }
            }
        }
    }
    None
}

/// Reads one reply from `s`; `buf` keeps what was read past it.
pub(super) fn read_reply(s: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<Value> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match value::parse(buf) {
            Ok(Some((v, used))) => {
                buf.drain(..used);
                return Ok(v);
            }
            Ok(None) if buf.len() < MAX_REPLY => {}
            Ok(None) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "reply too large",
                ))
            }
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad reply: {e:?}"),
                ))
            }
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the reply",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Resolve `host:port` (IPv6 as `[::1]:7000`) to its addresses.
pub fn resolve(hostport: &str) -> io::Result<Vec<SocketAddr>> {
    Ok(hostport.to_socket_addrs()?.collect())
}
