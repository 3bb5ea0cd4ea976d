//! Group pools: predixy's standalone and Sentinel pools, where each member
//! of the pool is a *group* (a master and its replicas) and keys are
//! placed over the groups by predixy's rule (`crate::hashkit::group_of`).
//!
//! A pool becomes a group pool by its first `group`, `sentinel` or
//! `hash atol` line. Its groups are either fixed (`pool P group NAME
//! MASTER [REPLICA...]`: the first address is the master, as predixy's
//! `RefreshMethod fixed` reads it) or found through Sentinel (`pool P
//! sentinel HOST:PORT...`: each group's name is the master name the
//! sentinels monitor; addresses written on its line are only a first
//! guess). The settings here join the pool's table in `pool.rs`
//! ([`GROUP_SETTINGS`]).
//!
//! Invariants: a setter applies its whole value or leaves the pool as it
//! was. Never: resolve names (the topology thread does).

use super::{one, PoolKind, PoolSpec, Setting};
use crate::config::values::{check_node, number};
use crate::hashkit::{Distribution, GroupHash, HashFn};

/// predixy's default `MasterReadPriority`.
pub const MASTER_READ_PRIORITY: u32 = 50;
/// predixy's default `RefreshInterval`, in milliseconds.
pub const REFRESH_INTERVAL_MS: u64 = 1_000;

/// One group: its name (the Sentinel master name) and the addresses
/// written for it, master first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    pub name: String,
    pub servers: Vec<String>,
}

/// A pool of master-replica groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPool {
    pub groups: Vec<GroupSpec>,
    /// `HOST:PORT` of the sentinels; empty: the groups are fixed.
    pub sentinels: Vec<String>,
    /// What the sentinels are given with AUTH (empty: nothing).
    pub sentinel_password: String,
    pub hash: GroupHash,
    pub hash_tag: Option<[u8; 2]>,
    /// Distribution random: each request picks a group at random.
    pub random: bool,
    /// predixy's read priorities (0: never read there): the master's, a
    /// written replica's (`StaticSlaveReadPriority`) and one learnt from
    /// Sentinel (`DynamicSlaveReadPriority`).
    pub master_read_priority: u32,
    pub replica_read_priority: u32,
    pub sentinel_replica_read_priority: u32,
    /// How often the sentinels are asked, besides their events.
    pub refresh_interval_ms: u64,
}

impl Default for GroupPool {
    fn default() -> GroupPool {
        GroupPool {
            groups: Vec::new(),
            sentinels: Vec::new(),
            sentinel_password: String::new(),
            hash: GroupHash::Crc16,
            hash_tag: None,
            random: false,
            master_read_priority: MASTER_READ_PRIORITY,
            replica_read_priority: 0,
            sentinel_replica_read_priority: 0,
            refresh_interval_ms: REFRESH_INTERVAL_MS,
        }
    }
}

impl GroupPool {
    /// Whether the groups' masters and replicas come from Sentinel.
    pub fn uses_sentinel(&self) -> bool {
        !self.sentinels.is_empty()
    }
}

/// The group pool behind `p`, made of an empty ring pool if need be (its
/// hash tag kept, a `random` distribution kept).
fn groups_mut<'a>(p: &'a mut PoolSpec, what: &str) -> Result<&'a mut GroupPool, String> {
    match &p.kind {
        PoolKind::Ring {
            servers,
            hash_tag,
            distribution,
            hash,
            ..
        } if servers.is_empty() => {
            let g = GroupPool {
                hash_tag: *hash_tag,
                random: *distribution == Distribution::Random,
                hash: if *hash == HashFn::DEFAULT || *hash == HashFn::Crc16 {
                    GroupHash::Crc16
                } else {
                    return Err(format!(
                        "{what}: pool '{}' names twemproxy's hash {}, and a pool of groups \
                         hashes with crc16 or atol",
                        p.name,
                        hash.name()
                    ));
                },
                ..GroupPool::default()
            };
            p.kind = PoolKind::Groups(g);
        }
        PoolKind::Ring { .. } => {
            return Err(format!(
                "{what} is a setting of a pool of groups, and pool '{}' has standalone servers \
                 (server lines): a pool is a ring of servers or a set of groups, not both",
                p.name
            ))
        }
        PoolKind::Cluster { .. } => {
            return Err(format!(
                "{what} is a setting of a pool of groups, and pool '{}' is a cluster pool \
                 (it has cluster-nodes)",
                p.name
            ))
        }
        PoolKind::Groups(_) => {}
    }
    match &mut p.kind {
        PoolKind::Groups(g) => Ok(g),
        _ => unreachable!("made a group pool above"),
    }
}

/// The group pool behind `p`, when it is one.
fn groups(p: &PoolSpec) -> Option<&GroupPool> {
    match &p.kind {
        PoolKind::Groups(g) => Some(g),
        _ => None,
    }
}

/// `hash`, `hash-tag` and `distribution` of a group pool: `None` when the
/// pool is not one (and `hash atol` does not make it one), so that the
/// ring's setter runs.
pub(super) fn try_set(p: &mut PoolSpec, what: &str, value: &str) -> Option<Result<(), String>> {
    let is_groups = matches!(p.kind, PoolKind::Groups(_));
    let atol = what == "hash" && GroupHash::from_name(value) == Some(GroupHash::Atol);
    if !is_groups && !atol {
        return None;
    }
    Some((|| {
        let g = groups_mut(p, what)?;
        match what {
            "hash" => {
                g.hash = GroupHash::from_name(value).ok_or_else(|| {
                    format!("hash of a pool of groups must be crc16 or atol, not '{value}'")
                })?
            }
            "hash-tag" => {
                g.hash_tag = Some(
                    value
                        .as_bytes()
                        .try_into()
                        .map_err(|_| format!("hash-tag must be two characters, not '{value}'"))?,
                )
            }
            _ => {
                g.random = match value.to_ascii_lowercase().as_str() {
                    "modula" => false,
                    "random" => true,
                    _ => {
                        return Err(format!(
                            "distribution of a pool of groups must be modula or random, not \
                             '{value}'"
                        ))
                    }
                }
            }
        }
        Ok(())
    })())
}

/// What `try_set`'s settings write back for a group pool (`None`: not
/// one).
pub(super) fn get(p: &PoolSpec, what: &str) -> Option<Vec<Vec<String>>> {
    let g = groups(p)?;
    Some(match what {
        "hash" => one(g.hash.name().to_string()),
        "hash-tag" => g
            .hash_tag
            .map(|t| one(String::from_utf8_lossy(&t).into_owned()))
            .unwrap_or_default(),
        _ if g.random => one("random".to_string()),
        _ => Vec::new(),
    })
}

fn priority(name: &str, v: &str) -> Result<u32, String> {
    Ok(number(name, v, 0, 100)? as u32)
}

/// The settings only a group pool has, in the order `--print-config`
/// writes them (after the pool's table in `pool.rs`).
pub static GROUP_SETTINGS: &[Setting] = &[
    Setting {
        name: "sentinel",
        summary: "HOST:PORT of sentinels: the groups' masters and replicas come from them",
        arity: (1, usize::MAX),
        setter: |p, args| {
            for a in args {
                check_node(a).map_err(|e| e.replace("cluster-nodes", "sentinel"))?;
            }
            let g = groups_mut(p, "sentinel")?;
            for a in args {
                if !g.sentinels.iter().any(|s| s == a) {
                    g.sentinels.push(a.to_string());
                }
            }
            Ok(())
        },
        getter: |p| {
            groups(p).map_or(Vec::new(), |g| match g.sentinels.is_empty() {
                true => Vec::new(),
                false => vec![g.sentinels.clone()],
            })
        },
    },
    Setting {
        name: "sentinel-password",
        summary: "what the sentinels are given with AUTH",
        arity: (1, 1),
        setter: |p, args| {
            groups_mut(p, "sentinel-password")?.sentinel_password = args[0].to_string();
            Ok(())
        },
        getter: |p| match groups(p) {
            Some(g) if !g.sentinel_password.is_empty() => one(g.sentinel_password.clone()),
            _ => Vec::new(),
        },
    },
    Setting {
        name: "group",
        summary: "NAME [HOST:PORT...]: a master (first) and its replicas; NAME is Sentinel's",
        arity: (1, usize::MAX),
        setter: |p, args| {
            let (name, addrs) = (args[0], &args[1..]);
            for a in addrs {
                check_node(a).map_err(|e| e.replace("cluster-nodes", "group"))?;
            }
            let g = groups_mut(p, "group")?;
            if g.groups.iter().any(|x| x.name == name) {
                return Err(format!("group '{name}' is named twice"));
            }
            g.groups.push(GroupSpec {
                name: name.to_string(),
                servers: addrs.iter().map(|a| a.to_string()).collect(),
            });
            Ok(())
        },
        getter: |p| {
            groups(p).map_or(Vec::new(), |g| {
                g.groups
                    .iter()
                    .map(|x| {
                        let mut line = vec![x.name.clone()];
                        line.extend(x.servers.iter().cloned());
                        line
                    })
                    .collect()
            })
        },
    },
    Setting {
        name: "master-read-priority",
        summary: "0-100: reads go to the highest priority (50; 0: never the master)",
        arity: (1, 1),
        setter: |p, args| {
            let n = priority("master-read-priority", args[0])?;
            groups_mut(p, "master-read-priority")?.master_read_priority = n;
            Ok(())
        },
        getter: |p| match groups(p) {
            Some(g) if g.master_read_priority != MASTER_READ_PRIORITY => {
                one(g.master_read_priority.to_string())
            }
            _ => Vec::new(),
        },
    },
    Setting {
        name: "replica-read-priority",
        summary: "0-100: the read priority of a replica written on a group line (0)",
        arity: (1, 1),
        setter: |p, args| {
            let n = priority("replica-read-priority", args[0])?;
            groups_mut(p, "replica-read-priority")?.replica_read_priority = n;
            Ok(())
        },
        getter: |p| match groups(p) {
            Some(g) if g.replica_read_priority != 0 => one(g.replica_read_priority.to_string()),
            _ => Vec::new(),
        },
    },
    Setting {
        name: "sentinel-replica-read-priority",
        summary: "0-100: the read priority of a replica learnt from Sentinel (0)",
        arity: (1, 1),
        setter: |p, args| {
            let n = priority("sentinel-replica-read-priority", args[0])?;
            groups_mut(p, "sentinel-replica-read-priority")?.sentinel_replica_read_priority = n;
            Ok(())
        },
        getter: |p| match groups(p) {
            Some(g) if g.sentinel_replica_read_priority != 0 => {
                one(g.sentinel_replica_read_priority.to_string())
            }
            _ => Vec::new(),
        },
    },
    Setting {
        name: "refresh-interval",
        summary: "milliseconds between two questions to the sentinels (1000)",
        arity: (1, 1),
        setter: |p, args| {
            let ms = number("refresh-interval", args[0], 10, 3_600_000)?;
            groups_mut(p, "refresh-interval")?.refresh_interval_ms = ms;
            Ok(())
        },
        getter: |p| match groups(p) {
            Some(g) if g.refresh_interval_ms != REFRESH_INTERVAL_MS => {
                one(g.refresh_interval_ms.to_string())
            }
            _ => Vec::new(),
        },
    },
];

/// The checks of a whole group pool.
pub(super) fn validate(p: &PoolSpec, g: &GroupPool) -> Result<(), String> {
    if g.groups.is_empty() {
        return Err(format!(
            "pool {}: no group (add 'pool {} group NAME [MASTER [REPLICA...]]')",
            p.name, p.name
        ));
    }
    if !g.uses_sentinel() {
        if let Some(x) = g.groups.iter().find(|x| x.servers.is_empty()) {
            return Err(format!(
                "pool {}: group {} has no address, and no sentinel names its master (add \
                 its master's HOST:PORT to the group line, or 'pool {} sentinel HOST:PORT')",
                p.name, x.name, p.name
            ));
        }
    }
    Ok(())
}
