//! The values directives take: sizes (`64mb`), booleans, numbers within
//! bounds, listen addresses, output limits, user lines and cluster seeds,
//! each parsed with an error that names the directive, and written back
//! the way the file lexer reads them (`quote_arg`, `format_size`).
//!
//! Owns no state; used by the directive table (`directives/`).

use super::{BindAddr, Config, OutputLimit};

pub(super) const KB: u64 = 1024;
pub(super) const MB: u64 = 1024 * KB;
pub(super) const GB: u64 = 1024 * MB;
/// Largest client idle `timeout`: a year, which is "never" in practice.
pub(super) const MAX_TIMEOUT: u64 = 365 * 24 * 3600;

/// Writes `arg` so that the file lexer reads it back unchanged: bare when it
/// is plain, otherwise in double quotes with escapes.
pub(super) fn quote_arg(arg: &str) -> String {
    let plain = !arg.is_empty()
        && !arg.starts_with('#')
        && arg
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'));
    if plain {
        return arg.to_string();
    }
    let mut out = String::from("\"");
    for ch in arg.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A literal IP address to listen on (the metrics and stats ports).
pub(super) fn listen_ip(name: &str, value: &str) -> Result<String, String> {
    value
        .parse::<std::net::IpAddr>()
        .map(|_| value.to_string())
        .map_err(|_| format!("{name}: '{value}' is not an IP address"))
}

/// The only argument of a one-argument directive (arity is checked first).
pub(super) fn first<'a>(args: &[&'a str]) -> &'a str {
    args.first().copied().unwrap_or("")
}

/// A whole decimal number in `lo..=hi`.
pub(super) fn number(name: &str, value: &str, lo: u64, hi: u64) -> Result<u64, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{name} must be a number between {lo} and {hi}"));
    }
    match value.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("{name} must be between {lo} and {hi}")),
    }
}

/// Parses a size: digits, then optionally a unit as in redis.conf, any case:
/// `b` (bytes), `k`/`m`/`g` (powers of 1000), `kb`/`mb`/`gb` (powers of
/// 1024). `None` when it is not a size or does not fit in 64 bits.
pub fn parse_size(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return None;
    }
    let multiplier = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => KB,
        "m" => 1000 * 1000,
        "mb" => MB,
        "g" => 1000 * 1000 * 1000,
        "gb" => GB,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(multiplier)
}

/// `yes` or `no`, any case, as redis.conf booleans.
pub fn parse_bool(text: &str) -> Option<bool> {
    if text.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if text.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

/// A size at least `min` bytes and at most `i64::MAX` (Redis's ceiling).
pub(super) fn size(name: &str, value: &str, min: u64) -> Result<u64, String> {
    let n = parse_size(value)
        .ok_or_else(|| format!("{name} must be a size such as 512mb, 64k or 1048576"))?;
    if n < min {
        return Err(format!(
            "{name} must be at least {} ({min} bytes)",
            format_size(min)
        ));
    }
    if n > i64::MAX as u64 {
        return Err(format!("{name} must be at most {} bytes", i64::MAX));
    }
    Ok(n)
}

/// `n` bytes in the largest binary unit that divides it exactly.
pub(super) fn format_size(n: u64) -> String {
    match n {
        0 => "0".to_string(),
        _ if n % GB == 0 => format!("{}gb", n / GB),
        _ if n % MB == 0 => format!("{}mb", n / MB),
        _ if n % KB == 0 => format!("{}kb", n / KB),
        _ => n.to_string(),
    }
}

pub(super) fn set_bind(cfg: &mut Config, args: &[&str]) -> Result<(), String> {
    let mut bind = Vec::with_capacity(args.len());
    for &arg in args {
        let (addr, optional) = match arg.strip_prefix('-') {
            Some(rest) => (rest, true),
            None => (arg, false),
        };
        let entry = BindAddr {
            addr: addr.to_string(),
            optional,
        };
        if entry.ip().is_none() {
            return Err(format!(
                "bind: '{arg}' is not an IP address (write literal addresses, \
                 '*' for every IPv4 address or '::*' for every IPv6 address)"
            ));
        }
        bind.push(entry);
    }
    cfg.bind = bind;
    Ok(())
}

/// One `user` line: parsed whole, then added (a second line for the same
/// name is refused rather than merged).
pub(super) fn set_user(cfg: &mut Config, args: &[&str]) -> Result<(), String> {
    let user = super::UserSpec::parse(args)?;
    if cfg.users.iter().any(|u| u.name == user.name) {
        return Err(format!(
            "user '{}' is defined twice: give each user one line",
            user.name
        ));
    }
    cfg.users.push(user);
    Ok(())
}

/// `client-output-buffer-limit CLASS HARD SOFT SECONDS [CLASS ...]`: one
/// to three groups of four, classes `normal`, `pubsub` and `replica` (or
/// `slave`, Redis's old name: a SYNC feed's, worker/replfeed/). Every group is
/// checked before any is applied; a class set twice keeps the last.
pub(super) fn set_output_limits(cfg: &mut Config, args: &[&str]) -> Result<(), String> {
    const NAME: &str = "client-output-buffer-limit";
    if args.len() % 4 != 0 {
        return Err(format!(
            "{NAME} takes groups of four arguments: CLASS HARD SOFT SECONDS"
        ));
    }
    let mut normal = cfg.output_limit_normal;
    let mut pubsub = cfg.output_limit_pubsub;
    let mut replica = cfg.output_limit_replica;
    for group in args.chunks(4) {
        let [class, hard, soft, secs] = group else {
            continue;
        };
        let limit = OutputLimit {
            hard: size(&format!("{NAME} hard limit"), hard, 0)?,
            soft: size(&format!("{NAME} soft limit"), soft, 0)?,
            soft_secs: number(&format!("{NAME} soft seconds"), secs, 0, MAX_TIMEOUT)?,
        };
        match class.to_ascii_lowercase().as_str() {
            "normal" => normal = limit,
            "pubsub" => pubsub = limit,
            "replica" | "slave" => replica = limit,
            _ => {
                return Err(format!(
                    "{NAME}: unknown client class '{class}' (use normal, pubsub or replica)"
                ))
            }
        }
    }
    cfg.output_limit_normal = normal;
    cfg.output_limit_pubsub = pubsub;
    cfg.output_limit_replica = replica;
    Ok(())
}

pub(super) fn set_cluster_nodes(cfg: &mut Config, args: &[&str]) -> Result<(), String> {
    for &arg in args {
        check_node(arg)?;
    }
    for &arg in args {
        if !cfg.cluster_nodes.iter().any(|n| n == arg) {
            cfg.cluster_nodes.push(arg.to_string());
        }
    }
    Ok(())
}

/// Checks a `HOST:PORT` seed: a host name, an IPv4 address or a bracketed
/// IPv6 address, then a port from 1 to 65535.
pub(super) fn check_node(node: &str) -> Result<(), String> {
    let bad =
        || format!("cluster-nodes: '{node}' is not HOST:PORT (e.g. 127.0.0.1:7000 or [::1]:7000)");
    let (host, port) = node.rsplit_once(':').ok_or_else(bad)?;
    if let Some(inner) = host.strip_prefix('[') {
        let v6 = inner.strip_suffix(']').ok_or_else(bad)?;
        v6.parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("cluster-nodes: '{node}': '{v6}' is not an IPv6 address"))?;
    } else if host.contains(':') {
        return Err(format!(
            "cluster-nodes: '{node}': write IPv6 addresses in brackets, e.g. [::1]:7000"
        ));
    } else {
        let host_ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if !host_ok {
            return Err(bad());
        }
    }
    number("cluster-nodes port", port, 1, 65535).map_err(|e| format!("'{node}': {e}"))?;
    Ok(())
}

/// An IP address or a CIDR block (`10.0.0.0/8`, `::1/128`): the network
/// address and the prefix length. `None` when it is neither.
pub fn parse_cidr(text: &str) -> Option<(std::net::IpAddr, u8)> {
    let (ip, len) = match text.split_once('/') {
        Some((ip, len)) => (ip, Some(len)),
        None => (text, None),
    };
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => l.parse().ok()?,
        Some(_) => return None,
        None => max,
    };
    (len <= max).then_some((ip, len))
}

/// Whether `addr` is inside the block `(net, len)` (a v4-mapped v6
/// address counts as its v4 one).
pub fn in_cidr(addr: std::net::IpAddr, (net, len): (std::net::IpAddr, u8)) -> bool {
    use std::net::IpAddr;
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    };
    let (a, n, bits) = match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u32::from(a) as u128, u32::from(n) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        _ => return false,
    };
    if len == 0 {
        return true;
    }
    let shift = bits - u32::from(len);
    (a >> shift) == (n >> shift)
}
