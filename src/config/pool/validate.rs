//! The checks of the `pool` lines that need the whole file read: each
//! pool has listeners and backends, names and listeners are unique, the
//! units fit in one process.

use super::{groups, Config, PoolKind, PoolSpec, ServerSpec, MAX_UNITS};

/// The checks that need every pool line read: each pool has listeners
/// and backends, names and listeners are unique, the units fit.
pub fn validate_pools(cfg: &Config) -> Result<(), String> {
    let pools = cfg.server_pools();
    let mut listens: Vec<(&str, &str)> = Vec::new();
    for p in &pools {
        if p.listen.is_empty() && p.tls_listen.is_empty() {
            return Err(format!(
                "pool {}: no listen address (add 'pool {} listen HOST:PORT')",
                p.name, p.name
            ));
        }
        if !p.tls_listen.is_empty() && (cfg.tls.cert_file.is_empty() || cfg.tls.key_file.is_empty())
        {
            return Err(format!(
                "pool {}: tls-listen needs tls-cert-file and tls-key-file",
                p.name
            ));
        }
        match &p.kind {
            PoolKind::Cluster { seeds } if seeds.is_empty() => {
                return Err(format!("pool {}: no cluster-nodes", p.name))
            }
            PoolKind::Ring { servers, .. } if servers.is_empty() => {
                return Err(format!(
                    "pool {}: no server (add 'pool {} server HOST:PORT[:WEIGHT] [NAME]', or \
                     'cluster-nodes' for a Redis Cluster)",
                    p.name, p.name
                ))
            }
            PoolKind::Ring { servers, .. } => {
                let mut names: Vec<String> = servers.iter().map(ServerSpec::ring_name).collect();
                names.sort();
                if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                    return Err(format!(
                        "pool {}: two servers are named '{}' (twemproxy places keys by \
                         server name: give each its own)",
                        p.name, w[0]
                    ));
                }
            }
            PoolKind::Cluster { .. } => {}
            PoolKind::Groups(g) => groups::validate(p, g)?,
        }
        for l in p.listen.iter().chain(&p.tls_listen) {
            if let Some((_, other)) = listens.iter().find(|(a, _)| same_listen(a, l)) {
                return Err(format!(
                    "pools {other} and {} both listen on {l}: each pool needs its own address",
                    p.name
                ));
            }
            listens.push((l, &p.name));
        }
    }
    let units: usize = pools.iter().map(PoolSpec::units).sum();
    if units > MAX_UNITS {
        return Err(format!(
            "the pools place keys on {units} units (16384 per cluster pool, one per server of \
             the others); at most {MAX_UNITS} fit in one process"
        ));
    }
    Ok(())
}

/// Whether two listen addresses name the same socket, as far as the text
/// tells (`*:N` overlaps every `HOST:N`).
fn same_listen(a: &str, b: &str) -> bool {
    let split = |s: &str| {
        s.rsplit_once(':')
            .map(|(h, p)| (h.to_string(), p.to_string()))
    };
    match (split(a), split(b)) {
        (Some((ha, pa)), Some((hb, pb))) => {
            pa == pb && (ha == hb || ha == "*" || hb == "*" || ha == "0.0.0.0" || hb == "0.0.0.0")
        }
        _ => a == b,
    }
}
