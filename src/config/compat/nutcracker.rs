//! twemproxy's `nutcracker.yml` onto mithril's directives.
//!
//! A twemproxy file is a mapping of pool names to pools; mithril is one
//! proxy in front of one Redis Cluster, so exactly one pool is accepted,
//! and its `servers` are taken as seeds of that cluster. What each key
//! becomes:
//!
//! | twemproxy            | mithril                                        |
//! |----------------------|------------------------------------------------|
//! | listen               | bind + port (a socket path is refused)         |
//! | servers              | cluster-nodes (weights and names dropped)      |
//! | timeout              | connect-timeout (clamped to 100..60000 ms)     |
//! | backlog              | tcp-backlog                                    |
//! | client_connections   | maxclients (0, unlimited, is the maximum)      |
//! | server_connections   | backend-conns (at most 64)                     |
//! | tcpkeepalive         | tcp-keepalive 300 or 0                          |
//! | redis_auth           | requirepass and backend-password (twemproxy    |
//! |                      | asks its clients for it and gives it to nodes) |
//! | hash_tag             | must be "{}": the cluster hashes on braces     |
//! | redis                | must be true                                   |
//! | redis_db             | must be 0: a cluster has one database          |
//! | hash, distribution, auto_eject_hosts, server_retry_timeout,           |
//! | server_failure_limit, preconnect, reuseport   | warned: no meaning     |
//!
//! The YAML is read by `load.rs`, with the `saphyr-parser` crate; it says
//! why a crate and why that one.

mod load;

use load::{load, Entry, Node};

use super::{backend_password, bind_host, keep_exposure, split_listen, Loc, Translation};
use crate::config::ConfigError;

/// Reads `bytes` (the file `origin`) into `t`.
pub(crate) fn translate(
    bytes: &[u8],
    origin: &str,
    t: &mut Translation,
) -> Result<(), ConfigError> {
    let pools = load(bytes).map_err(|e| ConfigError::at(origin, e.line, None, e.message))?;
    let pool =
        match pools.as_slice() {
            [pool] => pool,
            [] => return Err(ConfigError::new(
                origin,
                "no server pool is defined (a twemproxy configuration maps pool names to pools)",
            )),
            [_, second, ..] => {
                let names: Vec<&str> = pools.iter().map(|p| p.key.as_str()).collect();
                return Err(ConfigError::at(
                    origin,
                    second.line,
                    None,
                    format!(
                        "{} pools are defined ({}); mithril fronts exactly one Redis Cluster, so \
                     the file must hold exactly one pool: run one mithril per pool, each with \
                     a file of its own",
                        pools.len(),
                        names.join(", ")
                    ),
                ));
            }
        };
    let at = Loc {
        origin,
        line: pool.line,
    };
    let Node::Map(keys) = &pool.value else {
        return Err(at.error(&pool.key, "a pool must be a mapping of settings"));
    };
    let find = |name: &str| keys.iter().find(|e| e.key == name);

    // Refusals first: they decide whether anything else matters.
    let redis = match find("redis") {
        Some(e) => boolean(e, origin)?,
        None => false,
    };
    if !redis {
        let line = find("redis").map_or(pool.line, |e| e.line);
        return Err(ConfigError::at(
            origin,
            line,
            None,
            format!(
                "pool '{}' is a memcached pool (redis: false is twemproxy's default); mithril \
                 speaks only the Redis protocol, to a Redis Cluster: set 'redis: true' if the \
                 servers are nodes of a Redis Cluster",
                pool.key
            ),
        ));
    }
    if find("servers").is_none() {
        return Err(at.error(&pool.key, "the pool has no servers"));
    }

    for entry in keys {
        let at = Loc {
            origin,
            line: entry.line,
        };
        let shown = shown(entry);
        match entry.key.as_str() {
            "listen" => listen(t, &at, &shown, text(entry, origin)?)?,
            "servers" => servers(t, entry, origin)?,
            "timeout" => {
                let ms = number(entry, origin)?;
                let clamped = ms.clamp(100, 60_000);
                if clamped != ms {
                    t.warn(
                        &at,
                        &shown,
                        format!("connect-timeout takes 100 to 60000 ms; using {clamped}"),
                    );
                }
                t.set(&at, &shown, "connect-timeout", &[&clamped.to_string()])?;
                t.warn(
                    &at,
                    &shown,
                    "mapped to connect-timeout, the limit on connecting to a node; mithril has \
                     no per-request timeout, a slow node delays only the requests it owns",
                );
            }
            "backlog" => {
                let n = number(entry, origin)?;
                t.set(&at, &shown, "tcp-backlog", &[&n.to_string()])?;
            }
            "client_connections" => {
                let n = number(entry, origin)?;
                // twemproxy's 0 means no limit of its own: take the largest.
                let n = if n == 0 { 1_000_000 } else { n };
                t.set(&at, &shown, "maxclients", &[&n.to_string()])?;
            }
            "server_connections" => {
                let n = number(entry, origin)?;
                let clamped = n.clamp(1, 64);
                if clamped != n {
                    t.warn(
                        &at,
                        &shown,
                        format!("backend-conns takes 1 to 64; using {clamped}"),
                    );
                }
                t.set(&at, &shown, "backend-conns", &[&clamped.to_string()])?;
            }
            "tcpkeepalive" => {
                let on = boolean(entry, origin)?;
                t.set(
                    &at,
                    &shown,
                    "tcp-keepalive",
                    &[if on { "300" } else { "0" }],
                )?;
            }
            "redis_auth" => {
                // twemproxy checks its clients' AUTH against it, and sends
                // it to the servers.
                let pw = text(entry, origin)?;
                t.set(&at, "redis_auth ...", "requirepass", &[pw])?;
                backend_password(t, &at, "redis_auth", pw)?;
            }
            "redis_db" => {
                if number(entry, origin)? != 0 {
                    return Err(at.error(
                        &shown,
                        "a Redis Cluster has only database 0, so redis_db must be 0",
                    ));
                }
            }
            "hash_tag" => {
                let tag = text(entry, origin)?;
                if tag != "{}" {
                    return Err(at.error(
                        &shown,
                        format!(
                            "hash_tag '{tag}' cannot be honoured: a Redis Cluster places keys \
                             by the part between {{ and }}, and mithril routes as the cluster \
                             does, so only hash_tag \"{{}}\" is valid (remove it, or rename the \
                             keys to use braces)"
                        ),
                    ));
                }
            }
            "redis" => {}
            "hash" | "distribution" => t.warn(
                &at,
                &shown,
                "ignored: a Redis Cluster decides where each key lives (CRC16 of the key, \
                 16384 slots) and mithril follows it; the servers must be nodes of one \
                 Redis Cluster, a pool of independent servers cannot be fronted",
            ),
            "auto_eject_hosts" | "server_retry_timeout" | "server_failure_limit" => t.warn(
                &at,
                &shown,
                "ignored: the cluster's own failover replaces a failed master and mithril \
                 follows the new slot map; it never moves keys to another node by itself",
            ),
            "preconnect" => t.warn(
                &at,
                &shown,
                "ignored: mithril reads the cluster's layout at start and opens node \
                 connections as traffic needs them",
            ),
            "reuseport" => t.warn(
                &at,
                &shown,
                "ignored: one mithril process serves the port with its worker threads",
            ),
            other => t.warn(
                &at,
                &shown,
                format!("'{other}' is not a twemproxy setting mithril knows; ignored"),
            ),
        }
    }
    keep_exposure(t, &at, &pool.key)
}

/// How an entry is quoted in messages: `key: value`.
fn shown(entry: &Entry) -> String {
    match &entry.value {
        Node::Scalar(v) => format!("{}: {v}", entry.key),
        _ => format!("{}:", entry.key),
    }
}

fn text<'a>(entry: &'a Entry, origin: &str) -> Result<&'a str, ConfigError> {
    match &entry.value {
        Node::Scalar(v) if !v.is_empty() => Ok(v),
        _ => Err(ConfigError::at(
            origin,
            entry.line,
            Some(&shown(entry)),
            format!("{} takes a single value", entry.key),
        )),
    }
}

fn number(entry: &Entry, origin: &str) -> Result<u64, ConfigError> {
    let v = text(entry, origin)?;
    v.parse::<u64>().map_err(|_| {
        ConfigError::at(
            origin,
            entry.line,
            Some(&shown(entry)),
            format!("{} must be a whole number", entry.key),
        )
    })
}

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

fn listen(t: &mut Translation, at: &Loc<'_>, shown: &str, addr: &str) -> Result<(), ConfigError> {
    // "host:port" or "/path/to/socket [permissions]".
    let addr = addr.split_whitespace().next().unwrap_or("");
    if addr.starts_with('/') {
        return Err(at.error(
            shown,
            "mithril listens on TCP only; a unix socket path cannot be served",
        ));
    }
    let Some((host, port)) = split_listen(addr) else {
        return Err(at.error(shown, "listen must be host:port"));
    };
    let host = bind_host(host).map_err(|m| at.error(shown, m))?;
    t.set(at, shown, "bind", &[&host])?;
    t.set(at, shown, "port", &[port])
}

fn servers(t: &mut Translation, entry: &Entry, origin: &str) -> Result<(), ConfigError> {
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
    let mut weighted = None;
    for item in items {
        let at = Loc {
            origin,
            line: item.line,
        };
        let Node::Scalar(spec) = &item.node else {
            return Err(at.error("- ...", "a server must be host:port:weight [name]"));
        };
        let shown = format!("- {spec}");
        let addr = spec.split_whitespace().next().unwrap_or("");
        if addr.starts_with('/') {
            return Err(at.error(
                &shown,
                "a unix socket path cannot be a Redis Cluster node; name the node by host:port",
            ));
        }
        let (host_port, weight) = match addr.rsplit_once(':') {
            Some((hp, w)) if hp.contains(':') => (hp, w),
            _ => {
                return Err(at.error(&shown, "a server must be host:port:weight [name]"));
            }
        };
        if weight.parse::<u32>().is_err() {
            return Err(at.error(&shown, "the weight after host:port must be a number"));
        }
        if weight != "1" && weighted.is_none() {
            weighted = Some((at, shown.clone()));
        }
        t.set(&at, &shown, "cluster-nodes", &[host_port])?;
    }
    if let Some((at, shown)) = weighted {
        t.warn(
            &at,
            &shown,
            "server weights are ignored: the cluster's slot assignment decides how much \
             data each node holds",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
