//! Turning a node's CLUSTER SHARDS (or CLUSTER SLOTS) answer into a
//! [`Topology`].

use super::snapshot::{Node, Role, Shard, Topology};
use crate::resp::value::Value;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

#[derive(Debug)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(msg.into()))
}

fn text(v: &Value) -> Option<String> {
    v.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Address of a node from the host and port the cluster reports. An empty
/// host means "the address you reached me at" (`answered_by`).
fn node_addr(host: &str, port: i64, answered_by: SocketAddr) -> Option<SocketAddr> {
    let port = u16::try_from(port).ok().filter(|&p| p != 0)?;
    if host.is_empty() || host == "?" {
        return Some(SocketAddr::new(answered_by.ip(), port));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    (host, port).to_socket_addrs().ok()?.next()
}

struct Builder {
    nodes: Vec<Node>,
    shards: Vec<Shard>,
    hosts: Vec<(String, u16, SocketAddr)>,
}

impl Builder {
    fn node_index(&mut self, node: Node) -> usize {
        if let Some(i) = self.nodes.iter().position(|n| n.id == node.id) {
            return i;
        }
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Remember a name a node announces (not an IP literal, not empty or
    /// `?`) for the address it was reached at.
    fn name(&mut self, host: &str, port: u16, addr: SocketAddr) {
        if host.is_empty() || host == "?" || host.parse::<IpAddr>().is_ok() {
            return;
        }
        if !self
            .hosts
            .iter()
            .any(|(h, p, _)| *p == port && h.eq_ignore_ascii_case(host))
        {
            self.hosts.push((host.to_string(), port, addr));
        }
    }

    fn build(self) -> Topology {
        let mut t = Topology::new(self.nodes, self.shards);
        t.hosts = self.hosts;
        t
    }
}

/// Parse CLUSTER SHARDS (Redis 7+), RESP2 or RESP3 form.
pub fn from_shards(reply: &Value, answered_by: SocketAddr) -> Result<Topology, ParseError> {
    from_shards_on(reply, answered_by, false)
}

/// [`from_shards`] for mithril's TLS toward the nodes (`tls: true`): each
/// node at its `tls-port` (a node announces both when it has both), else
/// at its `port`.
pub fn from_shards_on(
    reply: &Value,
    answered_by: SocketAddr,
    tls: bool,
) -> Result<Topology, ParseError> {
    let (first_port, second_port) = if tls {
        ("tls-port", "port")
    } else {
        ("port", "tls-port")
    };
    let Some(shards) = reply.as_array() else {
        return err("CLUSTER SHARDS: not an array");
    };
    let mut b = Builder {
        nodes: Vec::new(),
        shards: Vec::new(),
        hosts: Vec::new(),
    };
    for shard in shards {
        let mut ranges = Vec::new();
        if let Some(slots) = shard.get("slots").and_then(|v| v.as_array()) {
            for pair in slots.chunks(2) {
                let (Some(lo), Some(hi)) = (
                    pair.first().and_then(|v| v.as_int()),
                    pair.get(1).and_then(|v| v.as_int()),
                ) else {
                    return err("CLUSTER SHARDS: bad slot range");
                };
                if !(0..16384).contains(&lo) || !(lo..16384).contains(&hi) {
                    return err(format!(
                        "CLUSTER SHARDS: slot range {lo}-{hi} out of bounds"
                    ));
                }
                ranges.push((lo as u16, hi as u16));
            }
        }
        let Some(nodes) = shard.get("nodes").and_then(|v| v.as_array()) else {
            return err("CLUSTER SHARDS: shard without nodes");
        };
        let mut master = None;
        let mut replicas = Vec::new();
        for n in nodes {
            let id = n.get("id").and_then(text).unwrap_or_default();
            let port = n
                .get(first_port)
                .and_then(|v| v.as_int())
                .or_else(|| n.get(second_port).and_then(|v| v.as_int()));
            let host = n
                .get("ip")
                .and_then(text)
                .filter(|h| !h.is_empty() && h != "?")
                .or_else(|| n.get("endpoint").and_then(text))
                .unwrap_or_default();
            let role = match n.get("role").and_then(text).as_deref() {
                Some("master") => Role::Master,
                _ => Role::Replica,
            };
            let healthy = matches!(
                n.get("health").and_then(text).as_deref(),
                Some("online") | None
            );
            let (Some(port), false) = (port, id.is_empty()) else {
                continue;
            };
            let Some(addr) = node_addr(&host, port, answered_by) else {
                continue;
            };
            // The names a redirect may use for this node.
            if let Ok(p) = u16::try_from(port) {
                for field in ["hostname", "endpoint"] {
                    if let Some(name) = n.get(field).and_then(text) {
                        b.name(&name, p, addr);
                    }
                }
            }
            let idx = b.node_index(Node {
                id,
                addr,
                role,
                healthy,
            });
            match role {
                Role::Master if master.is_none() => master = Some(idx),
                _ => replicas.push(idx),
            }
        }
        if let Some(master) = master {
            b.shards.push(Shard {
                master,
                replicas,
                ranges,
            });
        }
    }
    Ok(b.build())
}

/// Parse CLUSTER SLOTS (older servers): one entry per range, master first.
pub fn from_slots(reply: &Value, answered_by: SocketAddr) -> Result<Topology, ParseError> {
    let Some(entries) = reply.as_array() else {
        return err("CLUSTER SLOTS: not an array");
    };
    let mut b = Builder {
        nodes: Vec::new(),
        shards: Vec::new(),
        hosts: Vec::new(),
    };
    for e in entries {
        let Some(items) = e.as_array() else {
            return err("CLUSTER SLOTS: bad entry");
        };
        let (Some(lo), Some(hi)) = (
            items.first().and_then(|v| v.as_int()),
            items.get(1).and_then(|v| v.as_int()),
        ) else {
            return err("CLUSTER SLOTS: bad range");
        };
        if !(0..16384).contains(&lo) || !(lo..16384).contains(&hi) {
            return err(format!("CLUSTER SLOTS: slot range {lo}-{hi} out of bounds"));
        }
        let mut shard_nodes = Vec::new();
        for (i, n) in items.iter().skip(2).enumerate() {
            let Some(f) = n.as_array() else { continue };
            let host = f.first().and_then(text).unwrap_or_default();
            let Some(port) = f.get(1).and_then(|v| v.as_int()) else {
                continue;
            };
            let id = f
                .get(2)
                .and_then(text)
                .unwrap_or_else(|| format!("{host}:{port}"));
            let Some(addr) = node_addr(&host, port, answered_by) else {
                continue;
            };
            // The endpoint may be a name; Redis 7 also puts the node's
            // hostname in a metadata map (element 4).
            if let Ok(p) = u16::try_from(port) {
                b.name(&host, p, addr);
                if let Some(name) = f.get(3).and_then(|m| m.get("hostname")).and_then(text) {
                    b.name(&name, p, addr);
                }
            }
            let role = if i == 0 { Role::Master } else { Role::Replica };
            shard_nodes.push(b.node_index(Node {
                id,
                addr,
                role,
                healthy: true,
            }));
        }
        let Some((&master, replicas)) = shard_nodes.split_first() else {
            continue;
        };
        match b.shards.iter_mut().find(|s| s.master == master) {
            Some(s) => s.ranges.push((lo as u16, hi as u16)),
            None => b.shards.push(Shard {
                master,
                replicas: replicas.to_vec(),
                ranges: vec![(lo as u16, hi as u16)],
            }),
        }
    }
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::Bulk(s.as_bytes().to_vec())
    }

    fn shard_node(id: &str, port: i64, role: &str, health: &str) -> Value {
        Value::Array(vec![
            bulk("id"),
            bulk(id),
            bulk("port"),
            Value::Int(port),
            bulk("ip"),
            bulk("127.0.0.1"),
            bulk("endpoint"),
            bulk("127.0.0.1"),
            bulk("role"),
            bulk(role),
            bulk("replication-offset"),
            Value::Int(0),
            bulk("health"),
            bulk(health),
        ])
    }

    #[test]
    fn parses_cluster_shards() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                bulk("slots"),
                Value::Array(vec![
                    Value::Int(0),
                    Value::Int(5460),
                    Value::Int(10923),
                    Value::Int(10923),
                ]),
                bulk("nodes"),
                Value::Array(vec![
                    shard_node("a", 7000, "master", "online"),
                    shard_node("b", 7003, "replica", "failed"),
                ]),
            ]),
            Value::Array(vec![
                bulk("slots"),
                Value::Array(vec![Value::Int(5461), Value::Int(10922)]),
                bulk("nodes"),
                Value::Array(vec![shard_node("c", 7001, "master", "online")]),
            ]),
        ]);
        let t = from_shards(&reply, "127.0.0.1:7000".parse().unwrap()).unwrap();
        assert_eq!(t.shards.len(), 2);
        assert_eq!(
            t.master_of(t.shard_of(0).unwrap()).unwrap().addr.port(),
            7000
        );
        assert_eq!(
            t.master_of(t.shard_of(10923).unwrap()).unwrap().addr.port(),
            7000
        );
        assert_eq!(
            t.master_of(t.shard_of(6000).unwrap()).unwrap().addr.port(),
            7001
        );
        assert_eq!(t.shard_of(10924), None);
        let replica = &t.nodes[t.shards[0].replicas[0]];
        assert_eq!(replica.addr.port(), 7003);
        assert!(!replica.healthy);
        assert_eq!(replica.role, Role::Replica);
    }

    #[test]
    fn parses_cluster_slots() {
        let node = |host: &str, port: i64, id: &str| {
            Value::Array(vec![bulk(host), Value::Int(port), bulk(id)])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(99),
                node("127.0.0.1", 7000, "a"),
                node("127.0.0.1", 7001, "b"),
            ]),
            Value::Array(vec![Value::Int(100), Value::Int(199), node("", 7002, "c")]),
            Value::Array(vec![
                Value::Int(200),
                Value::Int(300),
                node("127.0.0.1", 7000, "a"),
            ]),
            Value::Array(vec![
                Value::Int(301),
                Value::Int(16383),
                node("", 7002, "c"),
            ]),
        ]);
        let t = from_slots(&reply, "10.0.0.9:7002".parse().unwrap()).unwrap();
        assert_eq!(t.shards.len(), 2);
        assert_eq!(t.master_of(t.shard_of(250).unwrap()).unwrap().id, "a");
        assert_eq!(
            t.master_of(t.shard_of(150).unwrap()).unwrap().addr,
            "10.0.0.9:7002".parse().unwrap()
        );
        assert_eq!(t.shards[0].ranges, vec![(0, 99), (200, 300)]);
        assert_eq!(t.shards[1].ranges, vec![(100, 199), (301, 16383)]);
        assert_eq!(t.covered_slots(), 16384);
    }

    #[test]
    fn rejects_out_of_range_slots() {
        let reply = Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(20000)])]);
        assert!(from_slots(&reply, "127.0.0.1:1".parse().unwrap()).is_err());
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn a_node_with_both_ports_is_reached_at_the_tls_one_over_tls() {
        let node = |fields: &[(&str, Value)]| {
            let mut v = vec![
                bulk("id"),
                bulk("a".repeat(40).as_str()),
                bulk("ip"),
                bulk("127.0.0.1"),
                bulk("role"),
                bulk("master"),
            ];
            for (k, x) in fields {
                v.push(bulk(k));
                v.push(x.clone());
            }
            Value::Array(vec![
                bulk("slots"),
                Value::Array(vec![Value::Int(0), Value::Int(16383)]),
                bulk("nodes"),
                Value::Array(vec![Value::Array(v)]),
            ])
        };
        let by: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let both = Value::Array(vec![node(&[
            ("port", Value::Int(7000)),
            ("tls-port", Value::Int(8000)),
        ])]);
        let port = |v: &Value, tls| from_shards_on(v, by, tls).unwrap().nodes[0].addr.port();
        assert_eq!(port(&both, false), 7000);
        assert_eq!(port(&both, true), 8000);
        let tls_only = Value::Array(vec![node(&[("tls-port", Value::Int(8000))])]);
        assert_eq!(port(&tls_only, false), 8000, "port 0: only a tls-port");
        let plain_only = Value::Array(vec![node(&[("port", Value::Int(7000))])]);
        assert_eq!(port(&plain_only, true), 7000);
    }
}
