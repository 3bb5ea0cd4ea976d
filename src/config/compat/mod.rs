//! Reading the configuration files of the proxies mithril replaces:
//! twemproxy's `nutcracker.yml` and predixy's `predixy.conf`, besides
//! mithril's own format.
//!
//! ```text
//!   file bytes ─▶ detect() ─┬─ Native     ─▶ config::parse_file
//!                           ├─ Nutcracker ─▶ nutcracker::load (YAML events) ─▶ translate ─┐
//!                           └─ Predixy    ─▶ predixy::parse ─▶ predixy::translate ────────┤
//!                                                    Translation (Config + warnings) ◀────┘
//! ```
//!
//! What each becomes: a twemproxy file is pools of standalone servers,
//! and each of its redis pools becomes a ring pool (`pool NAME ...`
//! lines; the table is in `nutcracker.rs`); a predixy file's cluster
//! pool becomes the top-level directives (`predixy.rs`), its standalone
//! or Sentinel pool a pool of groups (`predixy_groups.rs`).
//!
//! The format is told by the content, not by the name: a YAML mapping key
//! (`alpha:`, `{alpha:`) on the first line, or a `%YAML` directive, means
//! twemproxy; a block (`Key ... {`) or a keyword only predixy has
//! (`WorkerThreads`, `ClusterServerPool`, ...) means predixy; anything else
//! is mithril's own.
//!
//! YAML is read with the `saphyr-parser` crate, the one dependency of
//! this module: `nutcracker.rs` says why a crate, why that one and what it
//! costs.
//!
//! Invariants:
//! - A foreign setting reaches the [`Config`] only through the native
//!   directive's own setter ([`Translation::set`]), so its range checks
//!   apply, and `--print-config` (which renders the `Config`) shows exactly
//!   what was understood.
//! - Every foreign setting is either mapped, or named in one warning saying
//!   why it does not matter to mithril, or refused with an error saying
//!   what mithril cannot do and why. None is dropped silently; a part of
//!   the file that is left out (a twemproxy pool mithril cannot serve) is
//!   named in a warning.
//! - Errors and warnings name the file and the line.
//!
//! Must never: panic on any file content, read files other than the one
//! named and its includes, or log (the logger does not exist yet).

mod nutcracker;
mod predixy;
mod predixy_groups;

use std::path::Path;

use super::{lookup, parse_file, Config, ConfigError};

/// How a configuration file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// mithril's own `redis.conf`-style file.
    Native,
    /// twemproxy's YAML (`nutcracker.yml`).
    Nutcracker,
    /// predixy's `predixy.conf`.
    Predixy,
}

impl Format {
    /// How the format is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Native => "mithril configuration",
            Format::Nutcracker => "twemproxy (nutcracker) configuration",
            Format::Predixy => "predixy configuration",
        }
    }
}

/// A file read in whichever format it is written in.
#[derive(Debug)]
pub struct Read {
    pub config: Config,
    pub format: Format,
    /// One line per setting ignored or adapted, located as `file:line: `.
    pub warnings: Vec<String>,
}

/// Keywords only predixy has (compared without regard to case, as predixy
/// does). None of them is a mithril directive (predixy's `MaxMemory` is not
/// here: mithril has a `maxmemory` of its own).
const PREDIXY_KEYWORDS: &[&str] = &[
    "Name",
    "WorkerThreads",
    "ClientTimeout",
    "BufSize",
    "Log",
    "LogRotate",
    "AllowMissLog",
    "LogVerbSample",
    "LogDebugSample",
    "LogInfoSample",
    "LogNoticeSample",
    "LogWarnSample",
    "LogErrorSample",
    "LatencyMonitor",
    "Authority",
    "ClusterServerPool",
    "SentinelServerPool",
    "StandaloneServerPool",
    "DataCenter",
    "LocalDC",
    "CustomCommand",
];

/// Tells the format of a configuration text by its content.
pub fn detect(text: &[u8]) -> Format {
    let text = String::from_utf8_lossy(text);
    let lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    // A YAML document marker (`---`, maybe with a comment after it) says
    // nothing yet; a YAML directive (`%YAML 1.1`) says YAML.
    let mut lines = lines.skip_while(|l| l.split_whitespace().next() == Some("---"));
    let Some(first) = lines.next() else {
        return Format::Native;
    };
    let first = first.trim_start_matches('\u{feff}');
    let first_word = first.split_whitespace().next().unwrap_or("");
    // `alpha:`, `alpha: ...`, and `my pool:` (a key with a space, which no
    // directive is).
    let key = (first_word.ends_with(':') && !first_word.starts_with('-'))
        || (first.ends_with(':') && lookup(first_word).is_none());
    if key || first.starts_with("%YAML") {
        return Format::Nutcracker;
    }
    for line in std::iter::once(first).chain(lines) {
        let line = line.split(" #").next().unwrap_or(line).trim_end();
        if line.ends_with('{') || line == "}" {
            return Format::Predixy;
        }
        let mut words = line.split_whitespace();
        let word = words.next().unwrap_or("");
        if PREDIXY_KEYWORDS
            .iter()
            .any(|k| k.eq_ignore_ascii_case(word))
        {
            return Format::Predixy;
        }
        // predixy binds `host:port` or a socket path; mithril's bind takes
        // addresses only.
        if word.eq_ignore_ascii_case("bind") && words.next().is_some_and(is_host_port_or_path) {
            return Format::Predixy;
        }
    }
    Format::Native
}

/// `/path`, `[v6]:port` or `host:port` with a host that has no colon: an
/// address only predixy's `Bind` takes (mithril's `bind` has no port).
fn is_host_port_or_path(arg: &str) -> bool {
    if arg.starts_with('/') || arg.starts_with('[') {
        return true;
    }
    arg.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty()
            && !host.contains(':')
            && !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Reads the configuration file at `path` in whichever format it is
/// written. Does not run [`super::validate`].
pub fn read_file(path: &Path) -> Result<Read, ConfigError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| ConfigError::new(&shown, format!("cannot read configuration file: {e}")))?;
    let format = detect(&bytes);
    let (mut config, warnings) = match format {
        Format::Native => (parse_file(path)?, Vec::new()),
        Format::Nutcracker => {
            let mut t = Translation::new();
            nutcracker::translate(&bytes, &shown, &mut t)?;
            (t.config, t.warnings)
        }
        Format::Predixy => {
            let mut t = Translation::new();
            predixy::translate(path, &mut t)?;
            (t.config, t.warnings)
        }
    };
    config.config_file = Some(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
    Ok(Read {
        config,
        format,
        warnings,
    })
}

/// A foreign file on its way to a [`Config`].
pub(crate) struct Translation {
    pub config: Config,
    pub warnings: Vec<String>,
}

impl Translation {
    fn new() -> Self {
        Translation {
            config: Config::default(),
            warnings: Vec::new(),
        }
    }

    /// Applies the native `directive` with `args` for the foreign setting
    /// written `shown` at `origin:line`; a refusal is located there.
    fn set(
        &mut self,
        at: &Loc<'_>,
        shown: &str,
        directive: &str,
        args: &[&str],
    ) -> Result<(), ConfigError> {
        let result = match lookup(directive) {
            Some(d) => d.set(&mut self.config, args),
            None => Err(format!("mithril has no '{directive}' directive")),
        };
        // A message that starts with the directive (`pool NAME: ...`)
        // already says what it was applied as.
        result.map_err(|m| {
            let m = if m.starts_with(directive) {
                m
            } else {
                format!("{m} (as {directive})")
            };
            at.error(shown, m)
        })
    }

    /// Records a warning located at `at` about the setting `shown`.
    fn warn(&mut self, at: &Loc<'_>, shown: &str, message: impl AsRef<str>) {
        self.warnings
            .push(format!("{}: '{shown}': {}", at, message.as_ref()));
    }
}

/// A place in a file.
#[derive(Debug, Clone, Copy)]
struct Loc<'a> {
    origin: &'a str,
    line: usize,
}

impl Loc<'_> {
    fn error(&self, shown: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::at(self.origin, self.line, Some(shown), message)
    }
}

impl std::fmt::Display for Loc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.origin, self.line)
    }
}

/// A listen address as `bind` takes it: IP literals as they are,
/// `localhost` as 127.0.0.1; host names are refused.
fn bind_host(host: &str) -> Result<String, String> {
    let inner = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if inner.parse::<std::net::IpAddr>().is_ok() {
        return Ok(inner.to_string());
    }
    if inner.eq_ignore_ascii_case("localhost") {
        return Ok("127.0.0.1".to_string());
    }
    Err(format!(
        "'{host}' is not an IP address: mithril listens on literal addresses only"
    ))
}

/// Splits `host:port` (IPv6 hosts in brackets) for a listen address.
fn split_listen(addr: &str) -> Option<(&str, &str)> {
    let (host, port) = addr.rsplit_once(':')?;
    if host.is_empty() || port.is_empty() {
        return None;
    }
    Some((host, port))
}

/// The password a foreign file gives for the cluster's nodes, applied as
/// `backend-password` (an error names the setting, never the secret).
fn backend_password(
    t: &mut Translation,
    at: &Loc<'_>,
    key: &str,
    password: &str,
) -> Result<(), ConfigError> {
    t.set(at, &format!("{key} ..."), "backend-password", &[password])
}

/// The foreign proxy let clients in without a password on a non-loopback
/// address, which mithril's protected mode refuses: keep the exposure the
/// old proxy had (`protected-mode no`) and say so, rather than produce a
/// configuration that does not start.
fn keep_exposure(t: &mut Translation, at: &Loc<'_>, shown: &str) -> Result<(), ConfigError> {
    if crate::config::protected_mode_refusal(&t.config).is_none() {
        return Ok(());
    }
    let addrs = crate::config::exposed_listeners(&t.config);
    t.set(at, shown, "protected-mode", &["no"])?;
    t.warn(
        at,
        shown,
        format!(
            "clients need no password and the proxy listens on {} (not loopback only); \
             mithril refuses that unless protected-mode is off, so the translation sets \
             'protected-mode no' to keep the old exposure: better, give clients a password \
             (requirepass, user lines, or the pool's password) and remove it",
            addrs.join(" ")
        ),
    );
    Ok(())
}

#[cfg(test)]
mod tests;
