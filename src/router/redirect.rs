//! Reading the cluster's redirections, and the proxy's own routing errors.
//!
//! A node that does not serve a key answers with an error frame:
//!
//! - `-MOVED <slot> <host>:<port>`: the slot lives elsewhere for good.
//!   Retry there and remember it; the topology is refreshed soon.
//! - `-ASK <slot> <host>:<port>`: this one key is being migrated; retry on
//!   that node once, preceded by ASKING on the same connection.
//! - `-TRYAGAIN ...`, `-CLUSTERDOWN ...`: not redirects; the worker's
//!   retry policy (`worker/retry.rs`) waits and sends the request again.
//!
//! Only error frames are looked at, so replies that are not errors pay
//! nothing for redirect handling.

use crate::topology::Topology;
use std::net::{IpAddr, SocketAddr};

/// Redirects followed for one request before giving up with -TRYAGAIN.
pub const MAX_HOPS: u8 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirect {
    Moved {
        slot: u16,
        addr: SocketAddr,
    },
    Ask {
        slot: u16,
        addr: SocketAddr,
    },
    /// A redirect whose target cannot be reached yet: the endpoint is `?`
    /// (the node does not know it), or a host name the topology's address
    /// book does not hold. The worker asks for a topology refresh and
    /// tries the request again after a wait.
    Unresolved {
        slot: u16,
        ask: bool,
    },
}

/// Parse a MOVED/ASK error frame. `via` is the address of the node that
/// answered: a redirect may name only a port (`:7001`), meaning that
/// node's host. A host name is looked up in `topo`'s address book (the
/// names nodes announce with `cluster-announce-hostname`); nothing here
/// calls a resolver.
pub fn parse_redirect(frame: &[u8], via: SocketAddr, topo: &Topology) -> Option<Redirect> {
    let body = frame.strip_prefix(b"-")?;
    let body = body.strip_suffix(b"\r\n").unwrap_or(body);
    let (ask, rest) = if let Some(r) = body.strip_prefix(b"MOVED ") {
        (false, r)
    } else if let Some(r) = body.strip_prefix(b"ASK ") {
        (true, r)
    } else {
        return None;
    };
    let rest = std::str::from_utf8(rest).ok()?;
    let (slot, target) = rest.split_once(' ')?;
    let slot: u16 = slot.parse().ok().filter(|&s: &u16| s < 16384)?;
    let (host, port) = target.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip = if host.is_empty() {
        Some(via.ip())
    } else {
        host.parse::<IpAddr>().ok()
    };
    let addr = match ip {
        Some(ip) => SocketAddr::new(ip, port),
        None if host == "?" || host.contains(char::is_whitespace) => {
            return Some(Redirect::Unresolved { slot, ask })
        }
        None => match topo.lookup_host(host, port) {
            Some(addr) => addr,
            None => return Some(Redirect::Unresolved { slot, ask }),
        },
    };
    Some(if ask {
        Redirect::Ask { slot, addr }
    } else {
        Redirect::Moved { slot, addr }
    })
}

/// The frame that precedes a request redirected with ASK.
pub const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

pub const ERR_TOO_MANY_REDIRECTS: &[u8] =
    b"-TRYAGAIN mithril: too many redirections for this request\r\n";
pub const ERR_NO_TOPOLOGY: &[u8] =
    b"-CLUSTERDOWN mithril: the cluster topology is not known yet (no node of cluster-nodes answered)\r\n";
pub const ERR_SLOT_UNSERVED: &[u8] = b"-CLUSTERDOWN Hash slot not served\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn via() -> SocketAddr {
        "10.1.2.3:7000".parse().unwrap()
    }

    fn parse_redirect(frame: &[u8], via: SocketAddr) -> Option<Redirect> {
        super::parse_redirect(frame, via, &Topology::empty())
    }

    #[test]
    fn host_names_resolve_through_the_address_book() {
        let mut topo = Topology::empty();
        let a: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        topo.hosts.push(("node-a".into(), 7001, a));
        assert_eq!(
            super::parse_redirect(b"-MOVED 3999 node-a:7001\r\n", via(), &topo),
            Some(Redirect::Moved {
                slot: 3999,
                addr: a
            })
        );
        assert_eq!(
            super::parse_redirect(b"-ASK 3999 NODE-A:7001\r\n", via(), &topo),
            Some(Redirect::Ask {
                slot: 3999,
                addr: a
            })
        );
        // Same name, another port: not that node.
        assert_eq!(
            super::parse_redirect(b"-MOVED 3999 node-a:7002\r\n", via(), &topo),
            Some(Redirect::Unresolved {
                slot: 3999,
                ask: false
            })
        );
        assert_eq!(
            super::parse_redirect(b"-ASK 12 ?:7001\r\n", via(), &topo),
            Some(Redirect::Unresolved {
                slot: 12,
                ask: true
            })
        );
    }

    #[test]
    fn parses_moved_and_ask() {
        assert_eq!(
            parse_redirect(b"-MOVED 3999 127.0.0.1:6381\r\n", via()),
            Some(Redirect::Moved {
                slot: 3999,
                addr: "127.0.0.1:6381".parse().unwrap()
            })
        );
        assert_eq!(
            parse_redirect(b"-ASK 1 ::1:7001\r\n", via()),
            Some(Redirect::Ask {
                slot: 1,
                addr: "[::1]:7001".parse().unwrap()
            })
        );
        assert_eq!(
            parse_redirect(b"-MOVED 5 :7002\r\n", via()),
            Some(Redirect::Moved {
                slot: 5,
                addr: "10.1.2.3:7002".parse().unwrap()
            })
        );
    }

    #[test]
    fn ignores_other_errors_and_garbage() {
        for f in [
            &b"-ERR wrong type\r\n"[..],
            b"-MOVED\r\n",
            b"-MOVED 99999 1.2.3.4:5\r\n",
            b"-MOVED 1 1.2.3.4\r\n",
            b"+MOVED 1 1.2.3.4:5\r\n",
            b"-ASK x 1.2.3.4:5\r\n",
        ] {
            assert_eq!(
                parse_redirect(f, via()),
                None,
                "{:?}",
                String::from_utf8_lossy(f)
            );
        }
    }
}
