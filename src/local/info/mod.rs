//! INFO: the sections Redis users know, filled with the proxy's own
//! figures, plus `backends` (one line per server pool, then one per node).
//!
//! Pools: a client sees its own pool (the one whose listener it reached).
//! `redis_mode` and `tcp_port` in `server`, and `cluster`, are that
//! pool's: a ring of standalone servers says `redis_mode:standalone` and
//! `cluster_enabled:0`, as a standalone server does; a cluster pool counts
//! its own masters, replicas and slots. The masters whose INFO is merged
//! below are the pool's. Everything else is the whole process's; the
//! per-pool figures are in `backends` (`poolN:` lines, `pool=` on each
//! node's line), in twemproxy's stats JSON and in Prometheus's `pool`
//! label (`crate::metrics`).
//!
//! The text has Redis's layout: `# Section` headers, `field:value` lines,
//! CRLF line ends, a blank line between sections, sections always in
//! Redis's order whatever order they were asked in. Arguments are section
//! names in any case, or `default` / `all` / `everything`; unknown names
//! are ignored (an INFO of only unknown sections is empty). RESP2 gets a
//! bulk string, RESP3 a verbatim string, as from Redis.
//!
//! Where the numbers come from: the workers' published snapshots
//! (`stats::Hub`), which the worker answering INFO has every worker refresh
//! first (`worker::observe`), and, for `keyspace`, `persistence`, the
//! data's fields of `stats` and `memory` (`DATA_FIELDS`) and
//! `replication` after the proxy's `role:master`, and `blocked_clients`
//! (what the nodes hold blocked, leases included), each master's own
//! `INFO keyspace persistence stats memory replication clients`, merged (summed,
//! or as [`persistence_merge`] and [`replication_field`] say: the data and
//! its saving are the nodes'). Field names are Redis's where the meaning
//! carries over; mithril's own fields follow Redis's in their section.
//!
//! Never: block, or touch a worker's live counters (only snapshots).
//!
//! Layout: this file holds the sections' table and the text's assembly;
//! `sections` the proxy's own sections, `merge` the masters' parts.

mod merge;
mod sections;

pub use self::merge::{keyspace_sum, persistence_merge};

use self::merge::{data_field, merged_section, replication_field};
use super::{built, Outcome};
use crate::command::Args;
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::{self, Totals};
use bytes::Bytes;
use std::fmt::Write as _;

/// What the section fillers read.
struct Ctx<'a> {
    shared: &'a Shared,
    /// The asking session's server pool (`Shared::pools`' index).
    pool: usize,
    totals: Totals,
    /// The `keyspace` section's lines, already summed.
    keyspace: &'a str,
    /// The `persistence` section's lines, merged over the masters.
    persistence: &'a str,
    /// The masters' fields about their data, added to `stats` and
    /// `memory` (see `merge::DATA_FIELDS`).
    data_stats: &'a str,
    data_memory: &'a str,
    /// The masters' replication fields (see [`replication_field`]).
    replication: &'a str,
    /// The masters' `blocked_clients` summed, when they were asked.
    node_blocked: Option<u64>,
    /// The asking user may read the configuration (`CONFIG GET`): the
    /// `backends` section and the server's paths are shown (`Seen`).
    seen: Seen,
}

impl Ctx<'_> {
    /// Whether the asking session's pool is a ring of standalone servers
    /// (else a Redis Cluster).
    fn ring(&self) -> bool {
        self.shared.pools.get(self.pool).is_some_and(|p| p.ring)
    }

    /// The port the asking session's pool listens on: its first
    /// listener's (the top-level `port` for `default`).
    fn port(&self) -> u16 {
        self.shared
            .pools
            .get(self.pool)
            .and_then(|p| p.listen().first()?.rsplit_once(':')?.1.parse().ok())
            .unwrap_or(self.shared.config.port)
    }
}

struct Section {
    /// Lower-case name, as INFO takes it.
    name: &'static str,
    title: &'static str,
    /// Part of a bare INFO (and of `default`).
    default: bool,
    fill: fn(&mut String, &Ctx),
}

/// In Redis's order of sections (mithril's own last).
const SECTIONS: &[Section] = &[
    Section {
        name: "server",
        title: "Server",
        default: true,
        fill: sections::server,
    },
    Section {
        name: "clients",
        title: "Clients",
        default: true,
        fill: sections::clients,
    },
    Section {
        name: "memory",
        title: "Memory",
        default: true,
        fill: sections::memory,
    },
    Section {
        name: "persistence",
        title: "Persistence",
        default: true,
        fill: |t, c| t.push_str(c.persistence),
    },
    Section {
        name: "stats",
        title: "Stats",
        default: true,
        fill: sections::stats,
    },
    Section {
        name: "replication",
        title: "Replication",
        default: true,
        fill: |t, c| {
            t.push_str("role:master\r\n");
            t.push_str(c.replication);
        },
    },
    Section {
        name: "cpu",
        title: "CPU",
        default: true,
        fill: sections::cpu,
    },
    Section {
        name: "commandstats",
        title: "Commandstats",
        default: false,
        fill: sections::commandstats,
    },
    Section {
        name: "errorstats",
        title: "Errorstats",
        default: true,
        fill: sections::errorstats,
    },
    Section {
        name: "latencystats",
        title: "Latencystats",
        default: false,
        fill: sections::latencystats,
    },
    Section {
        name: "cluster",
        title: "Cluster",
        default: true,
        fill: sections::cluster,
    },
    Section {
        name: "keyspace",
        title: "Keyspace",
        default: true,
        fill: |t, c| t.push_str(c.keyspace),
    },
    Section {
        name: "backends",
        title: "Backends",
        default: false,
        fill: sections::backends,
    },
    Section {
        name: "pipes",
        title: "Pipes",
        default: false,
        fill: sections::pipes,
    },
    Section {
        name: "replycache",
        title: "Replycache",
        default: false,
        fill: sections::replycache,
    },
];

/// INFO answered without the workers' help (no fresh snapshots, no
/// keyspace): the fallback when the worker core does not intercept it.
pub fn info(shared: &Shared, s: &Session, args: &Args) -> Outcome {
    let asked: Vec<&[u8]> = (1..args.len()).filter_map(|i| args.get(i)).collect();
    let text = info_text(shared, s.pool(), &asked, &[], Seen::of(shared, s));
    built(
        |e| {
            e.verbatim(b"txt", text.as_bytes());
        },
        s,
    )
}

fn is_wanted(sec: &Section, asked: &[&[u8]]) -> bool {
    if asked.is_empty() {
        return sec.default;
    }
    asked.iter().any(|a| {
        a.eq_ignore_ascii_case(sec.name.as_bytes())
            || a.eq_ignore_ascii_case(b"all")
            || a.eq_ignore_ascii_case(b"everything")
            || (sec.default && a.eq_ignore_ascii_case(b"default"))
    })
}

/// Whether an INFO with these arguments shows the section `name`.
pub fn wants(asked: &[&[u8]], name: &str) -> bool {
    SECTIONS
        .iter()
        .find(|s| s.name == name)
        .is_some_and(|s| is_wanted(s, asked))
}

/// The INFO text for a session of server pool `pool` and the requested
/// section names (none: the defaults), the masters' parts made of the
/// pool's masters' replies to `INFO keyspace persistence stats memory
/// replication clients` (`masters`; empty: none).
/// How much of INFO a user sees. INFO runs in every mode (unlike Redis,
/// where it is `@dangerous`): it is the proxy's own counters. What tells
/// where things are (the `backends` section: every node's address; the
/// server's `executable` and `config_file`) is for the users who may read
/// the configuration (`CONFIG GET`) only; the others get those fields
/// empty and no `backends` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    All,
    Counters,
}

impl Seen {
    /// What session `s` sees.
    pub fn of(shared: &Shared, s: &Session) -> Seen {
        if !s.restricted() {
            return Seen::All;
        }
        let user = s
            .user()
            .cloned()
            .unwrap_or_else(|| shared.admin.acl.default_user());
        match crate::acl::may_run_command(&user, "config|get") {
            true => Seen::All,
            false => Seen::Counters,
        }
    }
}

pub fn info_text(
    shared: &Shared,
    pool: usize,
    asked: &[&[u8]],
    masters: &[Bytes],
    seen: Seen,
) -> String {
    let snaps = shared.stats.load_all();
    let keyspace = keyspace_sum(masters);
    let persistence = persistence_merge(masters);
    let data_stats = merged_section(masters, "stats", data_field);
    let data_memory = merged_section(masters, "memory", data_field);
    let replication = merged_section(masters, "replication", replication_field);
    let node_blocked = merged_section(masters, "clients", |name, values| {
        (name == "blocked_clients").then(|| {
            let n: u64 = values.iter().filter_map(|v| v.parse::<u64>().ok()).sum();
            n.to_string()
        })
    });
    let node_blocked = node_blocked
        .strip_prefix("blocked_clients:")
        .and_then(|v| v.trim().parse().ok());
    let cx = Ctx {
        shared,
        pool,
        totals: stats::totals(&snaps),
        keyspace: &keyspace,
        persistence: &persistence,
        data_stats: &data_stats,
        data_memory: &data_memory,
        replication: &replication,
        node_blocked,
        seen,
    };
    let mut text = String::with_capacity(2048);
    let mut first = true;
    for sec in SECTIONS
        .iter()
        .filter(|sec| is_wanted(sec, asked))
        .filter(|sec| seen == Seen::All || sec.name != "backends")
    {
        if !first {
            text.push_str("\r\n");
        }
        first = false;
        let _ = write!(text, "# {}\r\n", sec.title);
        (sec.fill)(&mut text, &cx);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::sections::human;
    use super::*;
    use crate::stats::rss_bytes;

    #[test]
    fn section_choice_follows_redis() {
        assert!(wants(&[], "keyspace"));
        assert!(!wants(&[], "commandstats"));
        assert!(wants(&[b"ALL"], "commandstats"));
        assert!(wants(&[b"everything"], "backends"));
        assert!(!wants(&[b"default"], "latencystats"));
        assert!(wants(&[], "errorstats"));
        assert!(wants(&[b"default"], "memory"));
        assert!(!wants(&[b"server"], "keyspace"));
        assert_eq!(human(1363148), "1.30M");
        assert_eq!(human(512), "512B");
        assert!(rss_bytes() > 0);
    }
}
