//! CLUSTER: the one-node face that cluster-aware clients see.
//!
//! To redis-cli -c, redis-py's RedisCluster, Lettuce and the like, mithril
//! is a cluster of a single master that owns slots 0-16383, reached at the
//! address the client connected to (or `cluster-announce-ip` /
//! `cluster-announce-port`). The replies copy the shapes a Redis 7.0 node
//! gives, field for field, because those clients parse them.
//!
//! `cluster_state` is `ok` only while the proxy's topology covers every
//! slot; slots no shard serves are counted as failed. Subcommands that
//! would change or inspect the internals of a real cluster (MEET,
//! ADDSLOTS, SETSLOT, FAILOVER, ...) are refused: they belong to the nodes
//! behind the proxy.

use super::{built, display_name, error, help, Outcome};
use crate::command::{Args, Command};
use crate::session::Session;
use crate::shared::Shared;
use crate::topology::{key_slot, SLOTS};
use std::fmt::Write as _;
use std::net::IpAddr;

/// The address and port this session should see the node at.
fn announced(shared: &Shared, s: &Session) -> (String, u16) {
    let cfg = &shared.config;
    let ip = if !cfg.cluster_announce_ip.is_empty() {
        cfg.cluster_announce_ip.clone()
    } else {
        s.local_addr()
            .map(|a| canonical(a.ip()).to_string())
            .unwrap_or_default()
    };
    let port = if cfg.cluster_announce_port != 0 {
        cfg.cluster_announce_port
    } else {
        s.local_addr().map_or(cfg.port, |a| a.port())
    };
    (ip, port)
}

/// An IPv4 address reached through a dual-stack socket shows as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The cluster bus port Redis would use (port + 10000), 0 if out of range.
fn bus_port(port: u16) -> u16 {
    port.checked_add(10000).unwrap_or(0)
}

pub fn cluster(shared: &Shared, s: &mut Session, cmd: &'static Command, args: &Args) -> Outcome {
    let id = shared.admin.node_id.as_bytes();
    match cmd.name {
        "cluster|info" => {
            let text = info_text(shared.topology.load().covered_slots());
            built(
                |e| {
                    e.verbatim(b"txt", text.as_bytes());
                },
                s,
            )
        }
        "cluster|myid" => built(
            |e| {
                e.bulk(id);
            },
            s,
        ),
        "cluster|myshardid" => built(
            |e| {
                e.bulk(shared.admin.shard_id.as_bytes());
            },
            s,
        ),
        "cluster|nodes" => {
            let (ip, port) = announced(shared, s);
            let line = format!(
                "{} {ip}:{port}@{} myself,master - 0 0 0 connected 0-{}\n",
                shared.admin.node_id,
                bus_port(port),
                SLOTS - 1
            );
            built(
                |e| {
                    e.verbatim(b"txt", line.as_bytes());
                },
                s,
            )
        }
        "cluster|slots" => {
            let (ip, port) = announced(shared, s);
            built(
                |e| {
                    e.array(1).array(3).int(0).int(SLOTS as i64 - 1);
                    e.array(4)
                        .bulk(ip.as_bytes())
                        .int(i64::from(port))
                        .bulk(id)
                        .map(0);
                },
                s,
            )
        }
        "cluster|shards" => {
            let (ip, port) = announced(shared, s);
            built(
                |e| {
                    e.array(1).map(2);
                    e.bulk(b"slots").array(2).int(0).int(SLOTS as i64 - 1);
                    e.bulk(b"nodes").array(1).map(7);
                    e.bulk(b"id").bulk(id);
                    e.bulk(b"port").int(i64::from(port));
                    e.bulk(b"ip").bulk(ip.as_bytes());
                    e.bulk(b"endpoint").bulk(ip.as_bytes());
                    e.bulk(b"role").bulk(b"master");
                    e.bulk(b"replication-offset").int(0);
                    e.bulk(b"health").bulk(b"online");
                },
                s,
            )
        }
        "cluster|links" => built(
            |e| {
                e.array(0);
            },
            s,
        ),
        "cluster|keyslot" => {
            let slot = key_slot(args.get(2).unwrap_or_default());
            built(
                |e| {
                    e.int(i64::from(slot));
                },
                s,
            )
        }
        "cluster|replicas" | "cluster|slaves" => {
            let node = args.get(2).unwrap_or_default();
            if node == id {
                built(
                    |e| {
                        e.array(0);
                    },
                    s,
                )
            } else {
                let mut msg = b"ERR Unknown node ".to_vec();
                msg.extend_from_slice(node);
                super::error_bytes(&msg)
            }
        }
        "cluster|help" => help(
            s,
            &[
                "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "INFO",
                "    The state of the cluster as a single node sees it.",
                "MYID, MYSHARDID",
                "    The id of the node mithril presents, and of its shard.",
                "NODES, SLOTS, SHARDS",
                "    The cluster as one master owning slots 0-16383 at the proxy's address.",
                "LINKS",
                "    Always empty: the single node has no peers.",
                "KEYSLOT <key>",
                "    The hash slot of a key.",
                "REPLICAS <node-id>, SLAVES <node-id>",
                "    Always empty for the proxy's node.",
                "COUNTKEYSINSLOT <slot>, GETKEYSINSLOT <slot> <count>",
                "    Answered by the node that serves the slot.",
                "HELP",
                "    Print this help.",
                "Subcommands that manage a cluster must be sent to its nodes, not to mithril.",
            ],
        ),
        _ => error(&format!(
            "ERR mithril: {} is not supported: mithril presents the cluster behind it as a \
             single node; manage the cluster through its own nodes",
            display_name(cmd)
        )),
    }
}

/// CLUSTER INFO's fields, in a 7.0 node's order, for one node owning every
/// slot of which `covered` are served.
fn info_text(covered: usize) -> String {
    let total = SLOTS;
    let covered = covered.min(total);
    let state = if covered == total { "ok" } else { "fail" };
    let mut t = String::with_capacity(320);
    let _ = write!(
        t,
        "cluster_state:{state}\r\n\
         cluster_slots_assigned:{total}\r\n\
         cluster_slots_ok:{covered}\r\n\
         cluster_slots_pfail:0\r\n\
         cluster_slots_fail:{}\r\n\
         cluster_known_nodes:1\r\n\
         cluster_size:1\r\n\
         cluster_current_epoch:0\r\n\
         cluster_my_epoch:0\r\n\
         cluster_stats_messages_sent:0\r\n\
         cluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        total - covered
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_reports_state_from_coverage() {
        let ok = info_text(16384);
        assert!(ok.starts_with("cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"));
        assert!(ok.contains("cluster_slots_ok:16384\r\n"));
        assert!(ok.contains("cluster_slots_fail:0\r\n"));
        assert!(ok.ends_with("total_cluster_links_buffer_limit_exceeded:0\r\n"));
        let part = info_text(100);
        assert!(part.starts_with("cluster_state:fail\r\n"));
        assert!(part.contains(
            "cluster_slots_ok:100\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:16284\r\n"
        ));
    }

    #[test]
    fn bus_port_and_addresses() {
        assert_eq!(bus_port(7000), 17000);
        assert_eq!(bus_port(65000), 0);
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(canonical(mapped).to_string(), "10.0.0.1");
        let v6: IpAddr = "::1".parse().unwrap();
        assert_eq!(canonical(v6).to_string(), "::1");
    }
}
