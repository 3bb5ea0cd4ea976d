//! A tiny blocking RESP exchange for the topology thread (never used on a
//! worker): connect with a deadline, authenticate when `backend-password`
//! is set, send one command, read one reply.

use crate::resp::encode;
use crate::resp::value::{self, Value};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

/// Largest reply the probe accepts (CLUSTER SHARDS of a very large
/// cluster is a few MB).
const MAX_REPLY: usize = 64 << 20;

/// The AUTH request sent ahead of every query (`backend-user` /
/// `backend-password`), set once at start.
static AUTH: Mutex<Option<bytes::Bytes>> = Mutex::new(None);

/// Sets the AUTH request every later query sends first (`None`: none).
pub fn set_auth(frame: Option<bytes::Bytes>) {
    *AUTH.lock().unwrap_or_else(|p| p.into_inner()) = frame;
}

pub fn query(addr: SocketAddr, timeout: Duration, args: &[&[u8]]) -> io::Result<Value> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut req = Vec::with_capacity(64);
    let auth = AUTH.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(a) = &auth {
        req.extend_from_slice(a);
    }
    encode::request(&mut req, args);
    s.write_all(&req)?;
    let mut buf = Vec::with_capacity(16 * 1024);
    if auth.is_some() {
        if let Value::Error(e) = read_reply(&mut s, &mut buf)? {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                crate::acl::setup_failure(&e),
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
pub fn auth_problem(seeds: &[String], timeout: Duration) -> Option<String> {
    for seed in seeds {
        for addr in resolve(seed).unwrap_or_default() {
            if let Err(e) = query(addr, timeout, &[b"PING"]) {
                if e.kind() == io::ErrorKind::PermissionDenied {
                    return Some(format!("cluster node {addr}: {e}"));
                }
            }
        }
    }
    None
}

/// Reads one reply from `s`; `buf` keeps what was read past it.
fn read_reply(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Value> {
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
