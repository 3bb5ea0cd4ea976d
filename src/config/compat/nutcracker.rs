//! twemproxy's `nutcracker.yml` onto mithril's `pool` lines.
//!
//! A twemproxy file maps pool names to pools of standalone servers, and
//! so does mithril now: every redis pool of the file becomes one ring pool
//! ([`PoolSpec::ring`](crate::config::pool::PoolSpec::ring)), placed by
//! `crate::hashkit` exactly as nutcracker 0.5.0 places it. Each key goes
//! through the native `pool NAME SETTING ARGS` setter
//! ([`Translation::set`]), so the native range checks apply and
//! `--print-config` writes the pool lines back. What each key becomes:
//!
//! | twemproxy            | mithril (`pool NAME ...`)                       |
//! |----------------------|-------------------------------------------------|
//! | listen               | listen (a socket path: the pool is skipped)     |
//! | servers              | server HOST:PORT:WEIGHT [NAME], one each (a     |
//! |                      | socket path: the pool is skipped; weight 0 and  |
//! |                      | bad ports refused; twemproxy's name kept)       |
//! | hash, distribution   | hash, distribution (names exact, case included) |
//! | hash_tag             | hash-tag (exactly two characters)               |
//! | timeout              | timeout (ms; absent: backend-timeout)           |
//! | backlog              | backlog                                         |
//! | preconnect           | preconnect                                      |
//! | redis                | true: kept; false or absent (memcached): the    |
//! |                      | pool is skipped with a warning                  |
//! | redis_auth           | password                                        |
//! | redis_db             | db                                              |
//! | server_connections   | server-connections (0 refused; over 64: 64)     |
//! | auto_eject_hosts     | auto-eject-hosts                                |
//! | server_retry_timeout | server-retry-timeout (0: 1)                     |
//! | server_failure_limit | server-failure-limit (0: 1, the same thing)     |
//! | tcpkeepalive         | tcp-keepalive                                   |
//! | client_connections   | warned, not applied: nutcracker 0.5.0 reads it  |
//! |                      | and never applies it, so neither does mithril   |
//! | reuseport            | warned: no meaning here (newer than 0.5.0)      |
//! | anything else        | refused, as nutcracker refuses it               |
//!
//! A skipped pool is named in a warning with its line; the file is accepted
//! while one pool is left. A pool name with characters a `pool` line does
//! not take has each of them turned into `_`, with a warning. No top-level
//! setting is written: no `cluster-nodes`, and the other globals keep their
//! defaults.
//!
//! Everything nutcracker refuses is refused too (unknown keys, duplicate
//! keys, a pool without listen or servers, values that are not numbers or
//! true/false, a zero weight, two servers of one name, `redis_auth` in a
//! memcached pool), but for YAML nutcracker does not take (flow style,
//! anchors, aliases, tags, `---`) and `reuseport`, which are read here.
//! `tests/compat_configs.rs` holds both verdicts against nutcracker's own
//! `-t`.
//!
//! # The YAML reader
//!
//! `load.rs` reads the file with the `saphyr-parser` crate into a small
//! tree of located values; it says why a crate and why that one.
//!
//! Invariants: never panics on any bytes; every error and warning names
//! the file and a line; a secret (`redis_auth`) is never shown.

mod load;

use std::collections::HashMap;

use load::{load, Entry, Node};

use super::{Loc, Translation};
use crate::config::pool::PoolSpec;
use crate::config::ConfigError;
use crate::hashkit;

/// The largest `server_connections` a pool line takes.
const MAX_SERVER_CONNECTIONS: u64 = 64;
/// The largest `client_connections` a pool line takes.
const MAX_CLIENT_CONNECTIONS: u64 = 1_000_000;

/// Reads `bytes` (the file `origin`) into `t`.
pub(crate) fn translate(
    bytes: &[u8],
    origin: &str,
    t: &mut Translation,
) -> Result<(), ConfigError> {
    let pools = load(bytes).map_err(|e| ConfigError::at(origin, e.line, None, e.message))?;
    if pools.is_empty() {
        return Err(ConfigError::new(
            origin,
            "no pool is defined (a twemproxy configuration maps pool names to pools)",
        ));
    }
    let mut listens: HashMap<String, (String, usize)> = HashMap::new();
    let mut names: HashMap<String, (String, usize)> = HashMap::new();
    let mut skipped = Vec::new();
    for entry in &pools {
        let read = read_pool(entry, origin)?;
        if let Some((addr, line)) = &read.listen {
            if let Some((other, first)) = listens.get(addr) {
                return Err(ConfigError::at(
                    origin,
                    *line,
                    None,
                    format!(
                        "pools '{other}' (line {first}) and '{}' both listen on {addr}: each pool \
                         needs its own address (nutcracker refuses it too)",
                        entry.key
                    ),
                ));
            }
            listens.insert(addr.clone(), (entry.key.clone(), *line));
        }
        t.warnings.extend(read.warnings);
        let spec = match (read.spec, read.skipped) {
            (Some(spec), None) => spec,
            (_, why) => {
                skipped.extend(why);
                continue;
            }
        };
        if let Some((other, first)) = names.get(&spec.name) {
            return Err(ConfigError::at(
                origin,
                entry.line,
                None,
                format!(
                    "pools '{other}' (line {first}) and '{}' are both named '{}' once their \
                     names are made valid: rename one",
                    entry.key, spec.name
                ),
            ));
        }
        names.insert(spec.name.clone(), (entry.key.clone(), entry.line));
        t.config.pools.push(spec);
    }
    if t.config.pools.is_empty() {
        return Err(ConfigError::new(
            origin,
            format!(
                "no pool mithril can serve (mithril serves redis pools over TCP): {}",
                skipped.join("; ")
            ),
        ));
    }
    // nutcracker has no protected mode: a pool open beyond loopback stays
    // open, said at the first pool's line.
    let at = Loc {
        origin,
        line: pools.first().map_or(1, |p| p.line),
    };
    super::keep_exposure(t, &at, "listen")
}

/// One pool of the file, read and checked.
struct ReadPool {
    /// The pool to serve; `None` when it is skipped.
    spec: Option<PoolSpec>,
    /// Why it is skipped, located (also in `warnings`).
    skipped: Option<String>,
    /// `listen:` as written, with its line.
    listen: Option<(String, usize)>,
    warnings: Vec<String>,
}

/// Reads one pool: every key checked as nutcracker checks it, applied to
/// a scratch configuration through the native setters.
fn read_pool(entry: &Entry, origin: &str) -> Result<ReadPool, ConfigError> {
    let at = Loc {
        origin,
        line: entry.line,
    };
    let keys = match &entry.value {
        Node::Map(keys) => keys,
        Node::Scalar(v) if v.is_empty() => {
            return Err(at.error(&format!("{}:", entry.key), "the pool has no settings"))
        }
        _ => {
            return Err(at.error(
                &format!("{}:", entry.key),
                "a pool must be a mapping of settings (listen:, servers:, ...)",
            ))
        }
    };
    let mut s = Translation::new();
    let name = pool_name(&entry.key);
    // A pool that will be skipped is checked as nutcracker checks it, not
    // against mithril's own ranges: those errors are dropped.
    let served = will_be_served(keys);
    let mut listen = None;
    let mut unix_listen = None;
    let mut unix_server = None;
    let mut redis = None;
    let mut auth_line = None;
    let mut servers_seen = false;
    for e in keys {
        let at = Loc {
            origin,
            line: e.line,
        };
        let shown = shown(e);
        let set = |s: &mut Translation, setting: &str, args: &[&str]| {
            let mut all = vec![name.as_str(), setting];
            all.extend_from_slice(args);
            match s.set(&at, &shown, "pool", &all) {
                Err(_) if !served => Ok(()),
                done => done,
            }
        };
        match e.key.as_str() {
            "listen" => {
                let addr = text(e, origin)?;
                listen = Some((addr.to_string(), e.line));
                if addr.starts_with('/') {
                    check_socket_listen(addr).map_err(|m| at.error(&shown, m))?;
                    unix_listen = Some(e.line);
                } else {
                    set(&mut s, "listen", &[addr])?;
                }
            }
            "servers" => {
                servers_seen = true;
                if let Some(line) = servers(&mut s, &name, e, origin, served)? {
                    unix_server = unix_server.or(Some(line));
                }
            }
            "hash" => set(&mut s, "hash", &[text(e, origin)?])?,
            "distribution" => set(&mut s, "distribution", &[text(e, origin)?])?,
            "hash_tag" => {
                let tag = text(e, origin)?;
                if tag.len() != 2 {
                    return Err(at.error(
                        &shown,
                        "hash_tag must be exactly two characters, an opening and a closing \
                         one (e.g. \"{}\")",
                    ));
                }
                set(&mut s, "hash-tag", &[tag])?;
            }
            "timeout" => set(&mut s, "timeout", &[&number(e, origin)?.to_string()])?,
            "backlog" => set(&mut s, "backlog", &[&number(e, origin)?.to_string()])?,
            "preconnect" => set(&mut s, "preconnect", &[yes_no(boolean(e, origin)?)])?,
            "redis" => redis = Some((boolean(e, origin)?, e.line)),
            "redis_auth" => {
                // The secret stays out of every message.
                let shown = "redis_auth: ...";
                let pw = text(e, origin).map_err(|err| err.with_text(shown))?;
                if served {
                    s.set(&at, shown, "pool", &[&name, "password", pw])?;
                }
                auth_line = Some(e.line);
            }
            "redis_db" => set(&mut s, "db", &[&number(e, origin)?.to_string()])?,
            "server_connections" => {
                let n = number(e, origin)?;
                if n == 0 {
                    return Err(at.error(
                        &shown,
                        "server_connections cannot be 0 (nutcracker refuses it too)",
                    ));
                }
                let n = if n > MAX_SERVER_CONNECTIONS {
                    s.warn(
                        &at,
                        &shown,
                        format!(
                            "mithril opens at most {MAX_SERVER_CONNECTIONS} connections per \
                             server and per worker thread: using {MAX_SERVER_CONNECTIONS}"
                        ),
                    );
                    MAX_SERVER_CONNECTIONS
                } else {
                    n
                };
                set(&mut s, "server-connections", &[&n.to_string()])?;
            }
            "auto_eject_hosts" => set(&mut s, "auto-eject-hosts", &[yes_no(boolean(e, origin)?)])?,
            "server_retry_timeout" => {
                let ms = number(e, origin)?;
                let ms = if ms == 0 {
                    s.warn(
                        &at,
                        &shown,
                        "an ejected server is retried after 1 ms, the shortest wait mithril has",
                    );
                    1
                } else {
                    ms
                };
                set(&mut s, "server-retry-timeout", &[&ms.to_string()])?;
            }
            "server_failure_limit" => {
                let n = number(e, origin)?;
                let n = if n == 0 {
                    s.warn(
                        &at,
                        &shown,
                        "written as 1: nutcracker ejects a server at its first failure with \
                         0 as with 1",
                    );
                    1
                } else {
                    n
                };
                set(&mut s, "server-failure-limit", &[&n.to_string()])?;
            }
            "tcpkeepalive" => set(&mut s, "tcp-keepalive", &[yes_no(boolean(e, origin)?)])?,
            "client_connections" => {
                // A drop-in takes the clients nutcracker took: the limit
                // is read (so its errors stay nutcracker's) and not set.
                let n = number(e, origin)?;
                s.warn(
                    &at,
                    &shown,
                    format!(
                        "nutcracker 0.5.0 reads client_connections but never applies it, so \
                         mithril does not either; to bound the pool's clients write \
                         'pool {} client-connections {}'",
                        name,
                        n.min(MAX_CLIENT_CONNECTIONS)
                    ),
                );
            }
            "reuseport" => {
                boolean(e, origin)?;
                s.warn(
                    &at,
                    &shown,
                    "ignored: one mithril process listens once per pool address, and its \
                     worker threads share the connections",
                );
            }
            other => {
                return Err(at.error(
                    &shown,
                    format!(
                        "'{other}' is not a twemproxy pool setting (nutcracker refuses it too: \
                         directive is unknown)"
                    ),
                ))
            }
        }
    }

    let shown = format!("{}:", entry.key);
    if listen.is_none() {
        return Err(at.error(&shown, "the pool has no listen: (nutcracker requires one)"));
    }
    if !servers_seen {
        return Err(at.error(&shown, "the pool has no servers:"));
    }
    let redis_line = redis.map(|(_, line)| line);
    let redis = redis.is_some_and(|(on, _)| on);
    if let (false, Some(line)) = (redis, auth_line) {
        return Err(ConfigError::at(
            origin,
            line,
            Some("redis_auth: ..."),
            "redis_auth is only valid in a redis pool (nutcracker refuses it too)",
        ));
    }
    let skip = if !redis {
        Some((
            redis_line.unwrap_or(entry.line),
            format!(
                "pool '{}' is a memcached pool ({}): mithril speaks Redis; skipped",
                entry.key,
                if redis_line.is_some() {
                    "redis: false"
                } else {
                    "no 'redis: true'; memcached is twemproxy's default"
                }
            ),
        ))
    } else if let Some(line) = unix_listen {
        Some((
            line,
            format!(
                "pool '{}' listens on a unix socket: mithril listens on TCP only for now; \
                 skipped",
                entry.key
            ),
        ))
    } else {
        unix_server.map(|line| {
            (
                line,
                format!(
                    "pool '{}' has a server on a unix socket: mithril reaches servers over \
                     TCP only for now; skipped",
                    entry.key
                ),
            )
        })
    };
    if skip.is_none() && name != entry.key {
        s.warn(
            &at,
            &shown,
            format!(
                "pool names are letters, digits, '_', '-' and '.': this pool is named \
                 '{name}' here"
            ),
        );
    }
    // Of a skipped pool, only the reason matters.
    let skipped = skip.map(|(line, why)| format!("{}: {why}", Loc { origin, line }));
    let mut warnings = if skipped.is_none() {
        s.warnings
    } else {
        Vec::new()
    };
    warnings.extend(skipped.clone());
    Ok(ReadPool {
        spec: s.config.pools.pop(),
        skipped,
        listen,
        warnings,
    })
}

/// Whether a pool's keys, as far as they read, make a pool mithril serves:
/// `redis: true`, and no unix socket to listen on or to reach a server at.
fn will_be_served(keys: &[Entry]) -> bool {
    let value = |key: &str| {
        keys.iter().find(|e| e.key == key).map(|e| match &e.value {
            Node::Scalar(v) => v.as_str(),
            _ => "",
        })
    };
    let unix_server = keys.iter().any(|e| match (&e.value, e.key.as_str()) {
        (Node::Seq(items), "servers") => items
            .iter()
            .any(|i| matches!(&i.node, Node::Scalar(v) if v.starts_with('/'))),
        _ => false,
    });
    value("redis") == Some("true")
        && !value("listen").is_some_and(|l| l.starts_with('/'))
        && !unix_server
}

/// `servers:`: one `server` line each (in a pool that is not `served`,
/// checked as nutcracker checks them only). Answers the line of the first
/// server on a unix socket (not applied: the pool is skipped), if any.
fn servers(
    s: &mut Translation,
    pool: &str,
    entry: &Entry,
    origin: &str,
    served: bool,
) -> Result<Option<usize>, ConfigError> {
    let items = match &entry.value {
        Node::Seq(items) if !items.is_empty() => items,
        _ => {
            return Err(ConfigError::at(
                origin,
                entry.line,
                Some("servers:"),
                "servers must be a list of host:port:weight [name]",
            ))
        }
    };
    let mut unix = None;
    let mut names: HashMap<String, usize> = HashMap::new();
    for item in items {
        let at = Loc {
            origin,
            line: item.line,
        };
        let Node::Scalar(spec) = &item.node else {
            return Err(at.error("- ...", "a server must be host:port:weight [name]"));
        };
        let shown = format!("- {spec}");
        let server = parse_server(spec).map_err(|m| at.error(&shown, m))?;
        if let Some(first) = names.insert(server.name.clone(), item.line) {
            return Err(at.error(
                &shown,
                format!(
                    "the server at line {first} has the same name, '{}': twemproxy places keys \
                     by server name, so each needs its own (nutcracker refuses it too)",
                    server.name
                ),
            ));
        }
        if server.unix {
            unix = unix.or(Some(item.line));
        }
        if server.unix || !served {
            continue;
        }
        let addr = format!("{}:{}:{}", server.host, server.port, server.weight);
        let implied = hashkit::server_name(&server.host, server.port, None);
        let alias = match server.alias {
            Some(a) => Some(a),
            None if implied != server.name => {
                s.warn(
                    &at,
                    &shown,
                    format!(
                        "keys are placed by twemproxy's name for it, '{}', which the address \
                         alone would not give: it is written as the server's NAME",
                        server.name
                    ),
                );
                Some(server.name.clone())
            }
            None => None,
        };
        let mut args = vec![pool, "server", addr.as_str()];
        args.extend(alias.as_deref());
        s.set(&at, &shown, "pool", &args)?;
    }
    Ok(unix)
}

/// A `servers:` entry, cut as nutcracker cuts it.
#[derive(Debug, PartialEq, Eq)]
struct Server {
    /// As written, IPv6 put in brackets; for a socket, its path.
    host: String,
    port: u16,
    weight: u32,
    /// The name written after the address.
    alias: Option<String>,
    /// The name nutcracker gives it: the alias, else `host:port` as
    /// written (`host` alone with port 11211; `path:` for a socket).
    name: String,
    unix: bool,
}

/// `host:port:weight [name]` or `/path:weight [name]`, cut from the end
/// as nutcracker does: the name is what follows the last space, the
/// weight what follows the last colon before it, then the port.
fn parse_server(spec: &str) -> Result<Server, String> {
    let format = "a server is host:port:weight [name], or /path/unix_socket:weight [name]";
    let (addr, alias) = match spec.rsplit_once(' ') {
        Some((addr, name)) => (addr, Some(name)),
        None => (spec, None),
    };
    if alias == Some("") {
        return Err(format!("{format}: nothing follows the space"));
    }
    let (rest, weight) = addr.rsplit_once(':').ok_or(format)?;
    let weight = match digits(weight) {
        Some(0) => return Err("the weight is 0: every server needs a weight of 1 or more".into()),
        Some(w) if w <= u64::from(u32::MAX) => w as u32,
        _ => return Err(format!("'{weight}' is not a weight (a whole number)")),
    };
    if rest.starts_with('/') {
        let name = alias.map_or_else(|| format!("{rest}:"), str::to_string);
        return Ok(Server {
            host: rest.to_string(),
            port: 0,
            weight,
            alias: alias.map(str::to_string),
            name,
            unix: true,
        });
    }
    let (host, port_text) = rest.rsplit_once(':').ok_or(format)?;
    let port = match digits(port_text) {
        Some(p @ 1..=65535) => p as u16,
        _ => return Err(format!("'{port_text}' is not a port (1 to 65535)")),
    };
    if host.is_empty() {
        return Err(format!("{format}: the host is missing"));
    }
    let name = match alias {
        Some(a) => a.to_string(),
        None if port == 11211 => host.to_string(),
        None => format!("{host}:{port_text}"),
    };
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    Ok(Server {
        host,
        port,
        weight,
        alias: alias.map(str::to_string),
        name,
        unix: false,
    })
}

/// `/path [permissions]`, checked as nutcracker checks it (octal, at most
/// 0777), although the pool is skipped.
fn check_socket_listen(addr: &str) -> Result<(), String> {
    let Some((_, perm)) = addr.rsplit_once(' ') else {
        return Ok(());
    };
    match u32::from_str_radix(perm, 8) {
        Ok(p) if p <= 0o777 => Ok(()),
        _ => Err(format!(
            "'{perm}' is not a file permission (octal, at most 0777) for the socket"
        )),
    }
}

/// A pool name as a `pool` line takes it: each character other than a
/// letter, a digit, '_', '-' or '.' becomes '_'.
fn pool_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Digits only, as nutcracker's `nc_atoi` takes them (no sign, no space).
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// How an entry is quoted in messages: `key: value`.
fn shown(entry: &Entry) -> String {
    match &entry.value {
        Node::Scalar(v) => format!("{}: {v}", entry.key),
        _ => format!("{}:", entry.key),
    }
}

fn text<'a>(entry: &'a Entry, origin: &str) -> Result<&'a str, ConfigError> {
    let fail = |m: &str| {
        Err(ConfigError::at(
            origin,
            entry.line,
            Some(&shown(entry)),
            format!("{} {m}", entry.key),
        ))
    };
    match &entry.value {
        Node::Scalar(v) if v.is_empty() => fail("has no value"),
        Node::Scalar(v) => Ok(v),
        _ => fail("takes a single value, not a list or a mapping"),
    }
}

fn number(entry: &Entry, origin: &str) -> Result<u64, ConfigError> {
    let v = text(entry, origin)?;
    digits(v).ok_or_else(|| {
        ConfigError::at(
            origin,
            entry.line,
            Some(&shown(entry)),
            format!("{} must be a whole number", entry.key),
        )
    })
}

/// `true` or `false`, exactly: nutcracker takes no other spelling.
fn boolean(entry: &Entry, origin: &str) -> Result<bool, ConfigError> {
    match text(entry, origin)? {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::at(
            origin,
            entry.line,
            Some(&shown(entry)),
            format!("{} must be true or false", entry.key),
        )),
    }
}

#[cfg(test)]
mod tests;
