//! predixy's `StandaloneServerPool` and `SentinelServerPool` onto a pool of
//! master-replica groups (`pool default group ...`; see
//! `config/pool/groups.rs`). A `SentinelServerPool` is a standalone pool
//! refreshed from Sentinel, as predixy reads it.
//!
//! | predixy                     | mithril (`pool default ...`)                  |
//! |-----------------------------|-----------------------------------------------|
//! | Bind host:port              | listen host:port (0.0.0.0:7617 if absent)     |
//! | Password                    | backend-password (clients AUTH per Authority) |
//! | Databases                   | databases                                     |
//! | Hash, HashTag, Distribution | hash, hash-tag, distribution                  |
//! | MasterReadPriority          | master-read-priority                          |
//! | StaticSlaveReadPriority     | replica-read-priority                         |
//! | DynamicSlaveReadPriority    | sentinel-replica-read-priority                |
//! | RefreshMethod               | fixed: no sentinel line; sentinel: needs one  |
//! | RefreshInterval             | refresh-interval (ms)                         |
//! | ServerTimeout               | timeout (ms)                                  |
//! | KeepAlive                   | tcp-keepalive (yes when not 0)                |
//! | Sentinels [password] {...}  | sentinel HOST:PORT, sentinel-password         |
//! | Group NAME { + [pw@]addr }  | group NAME addr...; pw: backend-password      |
//! | ServerFailureLimit,         | warned: Sentinel decides who is down; a fixed |
//! | ServerRetryTimeout          | group's failing server answers errors         |

use super::predixy::{duration_us, Node};
use super::{backend_password, Translation};
use crate::config::ConfigError;

/// The name of the pool a predixy file's standalone pool becomes.
pub const POOL: &str = "default";

/// Translate `pool` (a standalone or Sentinel pool block) into `pool
/// default ...` lines; `listen` is where predixy's Bind listens.
pub(super) fn groups_pool(
    t: &mut Translation,
    pool: &Node,
    sentinel: bool,
    listen: &str,
) -> Result<(), ConfigError> {
    let Some(block) = &pool.block else {
        return Err(pool.error(format!("{} needs a {{ ... }} block", pool.key)));
    };
    let at = pool.at();
    let shown = pool.shown();
    t.set(&at, &shown, "pool", &[POOL, "listen", listen])?;
    let mut refresh_sentinel = sentinel;
    let mut sentinels = 0;
    let mut groups = 0;
    for node in block {
        let at = node.at();
        let shown = node.shown();
        let set = |t: &mut Translation, setting: &str, v: &str| {
            t.set(&at, &shown, "pool", &[POOL, setting, v])
        };
        let ms = || {
            duration_us(&node.value)
                .map(|us| us.div_ceil(1000))
                .ok_or_else(|| {
                    node.error(format!(
                        "{} must be a duration such as 1, 500ms or 2s",
                        node.key
                    ))
                })
        };
        match node.key.to_ascii_lowercase().as_str() {
            "password" => backend_password(t, &at, "Password", &node.value)?,
            "databases" => set(t, "databases", &node.value)?,
            "hash" => set(t, "hash", &node.value)?,
            "hashtag" => set(t, "hash-tag", &node.value)?,
            "distribution" => set(t, "distribution", &node.value)?,
            "masterreadpriority" => set(t, "master-read-priority", &node.value)?,
            "staticslavereadpriority" => set(t, "replica-read-priority", &node.value)?,
            "dynamicslavereadpriority" => set(t, "sentinel-replica-read-priority", &node.value)?,
            "refreshmethod" => match node.value.to_ascii_lowercase().as_str() {
                "fixed" => refresh_sentinel = false,
                "sentinel" => refresh_sentinel = true,
                _ => return Err(node.error("RefreshMethod must be fixed or sentinel")),
            },
            "refreshinterval" => set(t, "refresh-interval", &ms()?.max(10).to_string())?,
            "servertimeout" => set(t, "timeout", &ms()?.to_string())?,
            "keepalive" => {
                let secs: u64 = node
                    .value
                    .parse()
                    .map_err(|_| node.error("KeepAlive must be a number of seconds"))?;
                set(t, "tcp-keepalive", if secs > 0 { "yes" } else { "no" })?;
            }
            "serverfailurelimit" | "serverretrytimeout" => t.warn(
                &at,
                &shown,
                "ignored: Sentinel decides when a master is down and which replica replaces \
                 it; in a fixed group a failing server's requests get an error",
            ),
            "sentinels" => {
                if !node.value.is_empty() {
                    set(t, "sentinel-password", &node.value)?;
                }
                for s in node.block.iter().flatten() {
                    if s.key != "+" {
                        return Err(s.error("a sentinel line is '+ host:port'"));
                    }
                    t.set(&s.at(), &s.shown(), "pool", &[POOL, "sentinel", &s.value])?;
                    sentinels += 1;
                }
            }
            "group" => {
                if node.value.is_empty() {
                    return Err(node.error("a Group needs a name: Group NAME { ... }"));
                }
                let mut args = vec![POOL.to_string(), "group".into(), node.value.clone()];
                for s in node.block.iter().flatten() {
                    if s.key != "+" {
                        return Err(s.error("a group's server line is '+ [password@]host:port'"));
                    }
                    let spec = s.value.split_whitespace().next().unwrap_or("");
                    let addr = match spec.rsplit_once('@') {
                        Some((password, addr)) => {
                            backend_password(t, &s.at(), "+ password@", password)?;
                            addr
                        }
                        None => spec,
                    };
                    args.push(addr.to_string());
                }
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                t.set(&at, &shown, "pool", &refs)?;
                groups += 1;
            }
            _ => {
                return Err(node.error(format!(
                    "unknown {} key '{}' (predixy itself would refuse it too)",
                    pool.key, node.key
                )))
            }
        }
    }
    if groups == 0 {
        return Err(pool.error(format!("the {} defines no Group", pool.key)));
    }
    if refresh_sentinel && sentinels == 0 {
        return Err(pool.error(
            "RefreshMethod sentinel (or a SentinelServerPool) needs a Sentinels { + host:port } \
             block",
        ));
    }
    if !refresh_sentinel && sentinels > 0 {
        return Err(pool.error(
            "RefreshMethod fixed with a Sentinels block: say RefreshMethod sentinel to follow \
             the sentinels, or remove the block",
        ));
    }
    Ok(())
}
