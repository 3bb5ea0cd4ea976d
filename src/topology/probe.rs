//! A tiny blocking RESP exchange for the topology thread (never used on a
//! worker): connect with a deadline, send one command, read one reply.

use crate::resp::encode;
use crate::resp::value::{self, Value};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Largest reply the probe accepts (CLUSTER SHARDS of a very large
/// cluster is a few MB).
const MAX_REPLY: usize = 64 << 20;

pub fn query(addr: SocketAddr, timeout: Duration, args: &[&[u8]]) -> io::Result<Value> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut req = Vec::with_capacity(64);
    encode::request(&mut req, args);
    s.write_all(&req)?;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the reply",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        match value::parse(&buf) {
            Ok(Some((v, _))) => return Ok(v),
            Ok(None) if buf.len() < MAX_REPLY => continue,
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
    }
}

/// Resolve `host:port` (IPv6 as `[::1]:7000`) to its addresses.
pub fn resolve(hostport: &str) -> io::Result<Vec<SocketAddr>> {
    Ok(hostport.to_socket_addrs()?.collect())
}
