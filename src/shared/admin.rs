//! The little state the locally answered commands keep between requests:
//! the live value of the one runtime setting (`loglevel`), the users (the
//! [`Acl`]), this process's run id, and the emulated cluster node's ids;
//! and the versions the proxy reports ([`REDIS_VERSION`],
//! [`MITHRIL_VERSION`]).
//!
//! Invariants: built once, before any worker runs ([`AdminState::new`]),
//! from the final configuration; afterwards only `CONFIG SET` writes (one
//! relaxed atomic), so nothing here costs routed traffic anything. The node
//! id and shard id are pure functions of the announced address and port,
//! hence stable across restarts; the run id is new for every process.
//!
//! Never: hold a client password in clear (the `Acl` keeps digests; it is
//! not logged, and `CONFIG GET` shows it hidden).

use crate::acl::Acl;
use crate::config::{Config, LogLevel};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU8, Ordering};

/// The Redis version mithril reports (HELLO, INFO): it emulates the 7.2
/// command surface.
pub const REDIS_VERSION: &str = "7.2.0";
/// mithril's own version (INFO, LOLWUT, the metrics endpoints).
pub const MITHRIL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Levels in the order of their index in `AdminState::loglevel`.
const LEVELS: [LogLevel; 5] = [
    LogLevel::Debug,
    LogLevel::Verbose,
    LogLevel::Notice,
    LogLevel::Warning,
    LogLevel::Nothing,
];

pub struct AdminState {
    /// Index into `LEVELS`: the level as `CONFIG SET loglevel` left it.
    loglevel: AtomicU8,
    /// The users: `requirepass` and the `user` lines.
    pub acl: Acl,
    /// 40 hex digits, new for each process (INFO `run_id`).
    pub run_id: String,
    /// The emulated node's id (CLUSTER MYID / NODES / SLOTS / SHARDS).
    pub node_id: String,
    /// Its shard id (CLUSTER MYSHARDID).
    pub shard_id: String,
}

impl AdminState {
    /// Built from the final configuration.
    pub fn new(cfg: &Config) -> AdminState {
        let acl = Acl::from_config(cfg);
        let (node_id, shard_id) = node_ids(cfg);
        AdminState {
            loglevel: AtomicU8::new(level_index(cfg.loglevel)),
            acl,
            run_id: random_run_id(),
            node_id,
            shard_id,
        }
    }

    /// The log level in force.
    pub fn loglevel(&self) -> LogLevel {
        LEVELS
            .get(usize::from(self.loglevel.load(Ordering::Relaxed)))
            .copied()
            .unwrap_or(LogLevel::Notice)
    }

    /// Records a new level and applies it to the logger.
    pub fn set_loglevel(&self, level: LogLevel) {
        self.loglevel.store(level_index(level), Ordering::Relaxed);
        crate::logging::set_level(level);
    }

    /// Whether the `default` user has a password (`requirepass`).
    pub fn has_password(&self) -> bool {
        self.acl.default_has_password()
    }
}

fn level_index(level: LogLevel) -> u8 {
    LEVELS.iter().position(|&l| l == level).unwrap_or(2) as u8
}

/// The node id and shard id the proxy announces: derived from the announced
/// address (or the bind list) and port, so they survive restarts and differ
/// between proxies that listen on different addresses.
fn node_ids(cfg: &Config) -> (String, String) {
    let ip = if cfg.cluster_announce_ip.is_empty() {
        cfg.bind
            .iter()
            .map(|b| b.addr.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        cfg.cluster_announce_ip.clone()
    };
    let port = if cfg.cluster_announce_port != 0 {
        cfg.cluster_announce_port
    } else {
        cfg.port
    };
    let seed = format!("{ip}:{port}");
    (
        hex40(format!("mithril node {seed}").as_bytes()),
        hex40(format!("mithril shard {seed}").as_bytes()),
    )
}

/// 40 lower-case hex digits from `data`: three FNV-1a passes with different
/// starting points, each put through a mixing finalizer. Not cryptographic;
/// only stable (the same on every build and platform) and well spread.
pub fn hex40(data: &[u8]) -> String {
    let mut out = String::with_capacity(48);
    for seed in [
        0xcbf2_9ce4_8422_2325_u64,
        0x6c62_272e_07bb_0142,
        0x9e37_79b9_7f4a_7c15,
    ] {
        let mut h = seed;
        for &b in data {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        out.push_str(&format!("{:016x}", mix(h)));
    }
    out.truncate(40);
    out
}

/// The splitmix64 finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A run id that differs from one process to the next: the OS-seeded std
/// hasher over the pid and the clock.
fn random_run_id() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(now);
    let a = h.finish();
    h.write_u64(a);
    let b = h.finish();
    hex40(&[a.to_le_bytes(), b.to_le_bytes()].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_hex_and_depend_on_the_address() {
        let id = hex40(b"mithril node 127.0.0.1:7777");
        assert_eq!(id.len(), 40);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(id, hex40(b"mithril node 127.0.0.1:7777"));
        assert_ne!(id, hex40(b"mithril node 127.0.0.1:7778"));

        let mut cfg = Config::default();
        let (a, sa) = node_ids(&cfg);
        assert_ne!(a, sa);
        cfg.port = 7000;
        let (b, _) = node_ids(&cfg);
        assert_ne!(a, b);
        cfg.cluster_announce_ip = "10.1.2.3".into();
        cfg.cluster_announce_port = 6379;
        let (c, _) = node_ids(&cfg);
        cfg.port = 7001;
        assert_eq!(node_ids(&cfg).0, c, "the announced port wins over port");
    }

    #[test]
    fn password_check() {
        let mut cfg = Config::default();
        let open = AdminState::new(&cfg);
        assert!(!open.has_password());
        assert!(!open.acl.password_required());
        cfg.requirepass = "pw".into();
        let locked = AdminState::new(&cfg);
        assert!(locked.has_password());
        assert!(locked.acl.password_required());
        assert!(locked.acl.authenticate(None, b"pw").is_ok());
        assert!(locked.acl.authenticate(None, b"pW").is_err());
        assert_eq!(locked.run_id.len(), 40);
        assert_ne!(locked.run_id, open.run_id);
    }

    #[test]
    fn loglevel_round_trips() {
        let st = AdminState::new(&Config::default());
        assert_eq!(st.loglevel(), LogLevel::Notice);
        for l in LEVELS {
            st.loglevel.store(level_index(l), Ordering::Relaxed);
            assert_eq!(st.loglevel(), l);
        }
    }
}
