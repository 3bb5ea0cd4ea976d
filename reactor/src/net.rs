//! Sockets: listeners and per-connection options, through socket2.

use mio::net::{TcpListener, TcpStream};
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// A non-blocking listener with SO_REUSEADDR (and IPV6_V6ONLY for IPv6, so
/// `0.0.0.0` and `::` can both be bound on one port).
pub fn listen(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.set_cloexec(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// TCP_NODELAY, and keepalive probes every `keepalive` (None: off).
pub fn configure(stream: &TcpStream, keepalive: Option<Duration>) -> io::Result<()> {
    let s = SockRef::from(stream);
    s.set_tcp_nodelay(true)?;
    match keepalive {
        Some(every) if !every.is_zero() => {
            // Probe after `every` idle, then every third of it, as Redis
            // does for its tcp-keepalive.
            let interval = (every / 3).max(Duration::from_secs(1));
            let ka = TcpKeepalive::new()
                .with_time(every)
                .with_interval(interval)
                .with_retries(3);
            s.set_tcp_keepalive(&ka)?;
        }
        _ => s.set_keepalive(false)?,
    }
    Ok(())
}

/// Start a non-blocking connect; completion shows up as writability.
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    TcpStream::connect(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_and_options() {
        let l = listen("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let addr = l.local_addr().unwrap();
        let std_stream = std::net::TcpStream::connect(addr).unwrap();
        std_stream.set_nonblocking(true).unwrap();
        let s = TcpStream::from_std(std_stream);
        configure(&s, Some(Duration::from_secs(60))).unwrap();
        let r = SockRef::from(&s);
        assert!(r.tcp_nodelay().unwrap());
        assert!(r.keepalive().unwrap());
        configure(&s, None).unwrap();
        assert!(!r.keepalive().unwrap());
    }
}
