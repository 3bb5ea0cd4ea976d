//! The small value types of the configuration: listen addresses, the
//! placement and read-preference choices, backend sharding, output limits
//! and log levels, each with its file spelling (`FromStr` / `Display`).
//!
//! Re-exported from [`crate::config`]; nothing here reads files or knows
//! the directive table.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// One listen address from `bind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAddr {
    /// The address as written, without the leading `-`: a literal IPv4 or
    /// IPv6 address, `*` (every IPv4 address) or `::*` (every IPv6 address).
    pub addr: String,
    /// Written with a leading `-`: start-up skips it when it cannot be bound
    /// (for instance `::1` on a host without IPv6) instead of failing.
    pub optional: bool,
}

impl BindAddr {
    /// The address to bind: `*` is 0.0.0.0 and `::*` is `::`. `None` only for
    /// an address that the parser would have refused.
    pub fn ip(&self) -> Option<IpAddr> {
        match self.addr.as_str() {
            "*" => Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            "::*" => Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            other => other.parse().ok(),
        }
    }
}

impl fmt::Display for BindAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.optional {
            f.write_str("-")?;
        }
        f.write_str(&self.addr)
    }
}

/// How the acceptor spreads new connections over the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// To the worker with the least recent command activity.
    LeastLoaded,
    /// To each worker in turn.
    RoundRobin,
}

impl Placement {
    /// The directive's spelling of this value.
    pub fn name(self) -> &'static str {
        match self {
            Placement::LeastLoaded => "least-loaded",
            Placement::RoundRobin => "round-robin",
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Placement {
    type Err = String;

    /// Case-insensitive, as Redis treats enumerated values.
    fn from_str(s: &str) -> Result<Self, String> {
        [Placement::LeastLoaded, Placement::RoundRobin]
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| "placement must be least-loaded or round-robin".to_string())
    }
}

/// Where read-only commands may go (`read-from-replicas`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadFrom {
    /// Always the slot's master.
    No,
    /// Spread over the master and its replicas.
    Yes,
    /// A replica when one is up, else the master.
    PreferReplica,
}

impl ReadFrom {
    /// The directive's spelling of this value.
    pub fn name(self) -> &'static str {
        match self {
            ReadFrom::No => "no",
            ReadFrom::Yes => "yes",
            ReadFrom::PreferReplica => "prefer-replica",
        }
    }
}

impl fmt::Display for ReadFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReadFrom {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [ReadFrom::No, ReadFrom::Yes, ReadFrom::PreferReplica]
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| "read-from-replicas must be no, yes or prefer-replica".to_string())
    }
}

/// How requests reach the nodes (`backend-sharding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sharding {
    /// Each worker writes to the nodes over its own connections.
    No,
    /// Every request to a node goes through that node's one process-wide
    /// pipe, on the worker that owns it.
    Yes,
    /// Measured: the shared pipes where they run faster.
    Auto,
}

impl Sharding {
    /// The directive's spelling of this value.
    pub fn name(self) -> &'static str {
        match self {
            Sharding::No => "no",
            Sharding::Yes => "yes",
            Sharding::Auto => "auto",
        }
    }
}

impl fmt::Display for Sharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Sharding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Sharding::No, Sharding::Yes, Sharding::Auto]
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| "backend-sharding must be no, yes or auto".to_string())
    }
}

/// One class of `client-output-buffer-limit`: a client whose unsent
/// output reaches `hard` bytes, or stays at `soft` bytes or more for
/// `soft_secs` seconds, is disconnected. 0 turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

impl OutputLimit {
    /// Neither limit is set.
    pub fn is_off(&self) -> bool {
        self.hard == 0 && (self.soft == 0 || self.soft_secs == 0)
    }
}

/// Log verbosity, with Redis's names for the levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogLevel {
    /// Everything, including per-event tracing.
    Debug,
    /// Detailed operational messages.
    Verbose,
    /// Start-up, shutdown, topology changes and problems (the default).
    Notice,
    /// Problems only.
    Warning,
    /// Nothing at all.
    Nothing,
}

impl LogLevel {
    const ALL: [LogLevel; 5] = [
        LogLevel::Debug,
        LogLevel::Verbose,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Nothing,
    ];

    /// The directive's spelling of this level.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Verbose => "verbose",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Nothing => "nothing",
        }
    }

    /// The `log` crate filter for this level. Redis has five levels and so
    /// does `log` (plus Off), so they map one to one, most verbose first:
    /// debug→Trace, verbose→Debug, notice→Info, warning→Warn, nothing→Off.
    /// Errors are shown at every level but `nothing`.
    pub fn to_log_filter(self) -> log::LevelFilter {
        match self {
            LogLevel::Debug => log::LevelFilter::Trace,
            LogLevel::Verbose => log::LevelFilter::Debug,
            LogLevel::Notice => log::LevelFilter::Info,
            LogLevel::Warning => log::LevelFilter::Warn,
            LogLevel::Nothing => log::LevelFilter::Off,
        }
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LogLevel {
    type Err = String;

    /// Case-insensitive, as Redis treats enumerated values.
    fn from_str(s: &str) -> Result<Self, String> {
        LogLevel::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                "loglevel must be one of debug, verbose, notice, warning, nothing".to_string()
            })
    }
}
