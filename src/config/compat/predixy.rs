//! predixy's `predixy.conf` onto mithril's directives.
//!
//! The format: one `Key Value` per line, `Key Value {` opens a block that
//! `}` closes, `#` starts a comment, values in double quotes may hold `#`
//! and escaped quotes, and `Include FILE` reads another file in place (a
//! relative name is taken from the including file's directory). Keys are
//! matched without regard to case, as predixy does.
//!
//! What each setting becomes:
//!
//! | predixy                          | mithril                                   |
//! |----------------------------------|-------------------------------------------|
//! | Bind host:port                   | bind + port (a socket path is refused);   |
//! |                                  | predixy's default 0.0.0.0:7617 if absent  |
//! | WorkerThreads                    | threads                                   |
//! | ClientTimeout                    | timeout                                   |
//! | Log                              | logfile                                   |
//! | Log*Sample                       | loglevel (the most verbose level sampled) |
//! | ClusterServerPool.Servers        | cluster-nodes                             |
//! | ClusterServerPool.RefreshInterval| topology-refresh-secs (rounded up)        |
//! | ClusterServerPool.ServerTimeout  | connect-timeout (clamped)                 |
//! | ClusterServerPool.KeepAlive      | tcp-keepalive                             |
//! | ClusterServerPool.Password       | backend-password                          |
//! | Authority                        | user lines: the Auth without a password   |
//! |                                  | is `default`, the others auth1, auth2, ...|
//! |                                  | (no password-less Auth: `default off`)    |
//! | SentinelServerPool, Standalone…  | a pool of groups (`predixy_groups.rs`)    |
//! | everything else                  | named in a warning                        |

use std::path::{Path, PathBuf};

use super::{backend_password, bind_host, keep_exposure, split_listen, Loc, Translation};
use crate::config::{ConfigError, MAX_INCLUDE_DEPTH};

/// One `Key Value` line, with its block when it opened one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Node {
    pub(super) key: String,
    pub(super) value: String,
    origin: String,
    line: usize,
    pub(super) block: Option<Vec<Node>>,
}

impl Node {
    pub(super) fn at(&self) -> Loc<'_> {
        Loc {
            origin: &self.origin,
            line: self.line,
        }
    }

    pub(super) fn shown(&self) -> String {
        if self.value.is_empty() {
            self.key.clone()
        } else {
            format!("{} {}", self.key, self.value)
        }
    }

    pub(super) fn is(&self, key: &str) -> bool {
        self.key.eq_ignore_ascii_case(key)
    }

    pub(super) fn error(&self, message: impl Into<String>) -> ConfigError {
        self.at().error(&self.shown(), message)
    }
}

/// Reads the file at `path` (and its includes) into `t`.
pub(crate) fn translate(path: &Path, t: &mut Translation) -> Result<(), ConfigError> {
    let mut stack = Vec::new();
    let nodes = read(path, &path.display().to_string(), 0, &mut stack)?;
    apply(&nodes, t)
}

fn read(
    path: &Path,
    shown: &str,
    depth: usize,
    stack: &mut Vec<PathBuf>,
) -> Result<Vec<Node>, ConfigError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ConfigError::new(shown, format!("cannot read configuration file: {e}")))?;
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    stack.push(canonical);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let result = parse(&bytes, shown, &dir, depth, stack);
    stack.pop();
    result
}

/// One line split: key, value, whether it opens a block.
struct Split {
    key: String,
    value: String,
    opens: bool,
}

/// Parses one file's text; includes are read in place.
fn parse(
    bytes: &[u8],
    origin: &str,
    dir: &Path,
    depth: usize,
    stack: &mut Vec<PathBuf>,
) -> Result<Vec<Node>, ConfigError> {
    // Open blocks: each holds the nodes read so far at that level, the
    // bottom one the file's top level.
    let mut levels: Vec<(Option<Node>, Vec<Node>)> = vec![(None, Vec::new())];
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let raw = std::str::from_utf8(raw)
            .map_err(|_| ConfigError::at(origin, line, None, "the line is not valid UTF-8"))?;
        let Some(split) = split_line(raw).map_err(|m| ConfigError::at(origin, line, None, m))?
        else {
            continue;
        };
        if split.key == "}" {
            let Some((Some(mut open), children)) = levels.pop().filter(|(o, _)| o.is_some()) else {
                return Err(ConfigError::at(
                    origin,
                    line,
                    Some("}"),
                    "'}' closes no block",
                ));
            };
            open.block = Some(children);
            if let Some((_, nodes)) = levels.last_mut() {
                nodes.push(open);
            }
            continue;
        }
        let node = Node {
            key: split.key,
            value: split.value,
            origin: origin.to_string(),
            line,
            block: None,
        };
        if split.opens {
            levels.push((Some(node), Vec::new()));
            continue;
        }
        if node.is("Include") {
            let included = include(&node, dir, depth, stack)?;
            if let Some((_, nodes)) = levels.last_mut() {
                nodes.extend(included);
            }
            continue;
        }
        if let Some((_, nodes)) = levels.last_mut() {
            nodes.push(node);
        }
    }
    if levels.len() > 1 {
        let open = levels.last().and_then(|(o, _)| o.as_ref());
        let (line, key) = open.map_or((0, String::new()), |o| (o.line, o.shown()));
        return Err(ConfigError::at(
            origin,
            line,
            Some(&key),
            "this block is never closed with '}'",
        ));
    }
    Ok(levels.pop().map(|(_, n)| n).unwrap_or_default())
}

fn include(
    node: &Node,
    dir: &Path,
    depth: usize,
    stack: &mut Vec<PathBuf>,
) -> Result<Vec<Node>, ConfigError> {
    if node.value.is_empty() {
        return Err(node.error("Include needs a file name"));
    }
    if depth >= MAX_INCLUDE_DEPTH {
        return Err(node.error(format!(
            "includes nest deeper than {MAX_INCLUDE_DEPTH} levels"
        )));
    }
    let target = Path::new(&node.value);
    let path = if target.is_relative() {
        dir.join(target)
    } else {
        target.to_path_buf()
    };
    let canonical = std::fs::canonicalize(&path)
        .map_err(|e| node.error(format!("cannot read {}: {e}", path.display())))?;
    if stack.contains(&canonical) {
        return Err(node.error(format!("include cycle through {}", path.display())));
    }
    read(&path, &path.display().to_string(), depth + 1, stack)
}

/// Splits a line into key and value; `None` for blank and comment lines.
fn split_line(raw: &str) -> Result<Option<Split>, String> {
    let text = raw.trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let (key, rest) = match text.find(|c: char| c.is_ascii_whitespace()) {
        Some(i) => (&text[..i], text[i..].trim_start()),
        None => (text, ""),
    };
    // The value: up to a comment outside quotes; quotes are removed and
    // backslash escapes inside them resolved.
    let mut value = String::new();
    let mut in_quotes = false;
    let mut quoted_any = false;
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                in_quotes = !in_quotes;
                quoted_any = true;
            }
            '\\' if in_quotes => match chars.next() {
                Some(n) => value.push(n),
                None => return Err("a backslash ends the line inside quotes".into()),
            },
            '#' if !in_quotes => break,
            c => value.push(c),
        }
    }
    if in_quotes {
        return Err("unbalanced quotes".into());
    }
    let mut value = if quoted_any {
        value
    } else {
        value.trim_end().to_string()
    };
    let mut opens = false;
    if !quoted_any || value.trim_end().ends_with('{') {
        let trimmed = value.trim_end();
        if let Some(before) = trimmed.strip_suffix('{') {
            opens = true;
            value = before.trim_end().to_string();
        }
    }
    if key == "{" {
        return Err("a block needs a key before '{'".into());
    }
    if let Some(k) = key.strip_suffix('{') {
        // `Authority{`
        return Ok(Some(Split {
            key: k.to_string(),
            value: String::new(),
            opens: true,
        }));
    }
    Ok(Some(Split {
        key: key.to_string(),
        value: value.trim().to_string(),
        opens,
    }))
}

/// The log levels predixy samples, most verbose first, with mithril's
/// level for each.
const SAMPLES: &[(&str, crate::config::LogLevel)] = &[
    ("LogVerbSample", crate::config::LogLevel::Debug),
    ("LogDebugSample", crate::config::LogLevel::Verbose),
    ("LogInfoSample", crate::config::LogLevel::Notice),
    ("LogNoticeSample", crate::config::LogLevel::Notice),
    ("LogWarnSample", crate::config::LogLevel::Warning),
    ("LogErrorSample", crate::config::LogLevel::Warning),
];

fn apply(nodes: &[Node], t: &mut Translation) -> Result<(), ConfigError> {
    let mut bind_seen = false;
    let mut pool_seen = false;
    let mut groups_pool: Option<&Node> = None;
    // predixy's defaults: Notice, Warn and Error logged, one in one.
    let mut samples: Vec<(usize, u64)> = vec![(0, 0), (0, 0), (0, 0), (0, 1), (0, 1), (0, 1)];
    let mut sample_nodes = false;
    for node in nodes {
        let at = node.at();
        let shown = node.shown();
        if let Some(i) = SAMPLES.iter().position(|(k, _)| node.is(k)) {
            let n = node
                .value
                .parse::<u64>()
                .map_err(|_| node.error(format!("{} must be a whole number", SAMPLES[i].0)))?;
            samples[i] = (node.line, n);
            sample_nodes = true;
            continue;
        }
        let key = node.key.to_ascii_lowercase();
        match key.as_str() {
            "bind" => {
                bind(t, node)?;
                bind_seen = true;
            }
            "workerthreads" => t.set(&at, &shown, "threads", &[&node.value])?,
            "log" => t.set(&at, &shown, "logfile", &[&node.value])?,
            "clusterserverpool" => {
                cluster_pool(t, node)?;
                pool_seen = true;
            }
            "sentinelserverpool" | "standaloneserverpool" => {
                if pool_seen {
                    return Err(node.error("predixy serves one server pool; this is a second"));
                }
                groups_pool = Some(node);
                pool_seen = true;
            }
            "authority" => authority(t, node)?,
            "name" => t.warn(
                &at,
                &shown,
                "ignored: the proxy's name has no role in mithril (INFO reports mithril's own)",
            ),
            "clienttimeout" => {
                // Both close a client idle for that many seconds; 0 never.
                t.set(&at, &shown, "timeout", &[node.value.as_str()])?;
            }
            "maxmemory" => {
                if node.value != "0" {
                    t.warn(
                        &at,
                        &shown,
                        "ignored: mithril's maxmemory counts the bytes it buffers for clients, \
                         not the process size, and refuses only commands that may grow the \
                         data; set it yourself if you want that budget",
                    )
                }
            }
            "bufsize" => t.warn(
                &at,
                &shown,
                "ignored: mithril sizes its buffers per connection as data arrives",
            ),
            "logrotate" => t.warn(
                &at,
                &shown,
                "ignored: mithril does not rotate its log itself; let logrotate move the file \
                 and send SIGHUP, which reopens it (see mithril(8))",
            ),
            "allowmisslog" => t.warn(
                &at,
                &shown,
                "ignored: mithril never drops log lines to keep up",
            ),
            "latencymonitor" => t.warn(
                &at,
                &shown,
                "ignored: latency monitors are not configured in mithril",
            ),
            "datacenter" | "localdc" => t.warn(
                &at,
                &shown,
                "ignored: mithril sends every request to the slot's master, so read policies \
                 per data center have nothing to steer",
            ),
            "customcommand" => t.warn(
                &at,
                &shown,
                "ignored: mithril routes the commands of its own table only",
            ),
            _ => {
                return Err(node.error(format!(
                    "unknown key '{}' (predixy itself would refuse it too)",
                    node.key
                )))
            }
        }
    }
    if !pool_seen {
        return Err(ConfigError::new(
            nodes.first().map_or("configuration", |n| n.origin.as_str()),
            "no server pool is defined (ClusterServerPool, StandaloneServerPool or \
             SentinelServerPool)",
        ));
    }
    if let Some(pool) = groups_pool {
        // The pool listens where predixy's Bind does; the top-level
        // port serves only a cluster pool.
        let listen = nodes
            .iter()
            .find(|n| n.is("Bind"))
            .map_or("0.0.0.0:7617".to_string(), |n| n.value.clone());
        let sentinel = pool.is("SentinelServerPool");
        super::predixy_groups::groups_pool(t, pool, sentinel, &listen)?;
    }
    if !bind_seen {
        // predixy listens on 0.0.0.0:7617 unless told otherwise; so does
        // the translation, so clients keep finding the proxy.
        let origin = nodes.first().map_or("configuration", |n| n.origin.as_str());
        let at = Loc { origin, line: 1 };
        t.set(&at, "Bind", "bind", &["0.0.0.0"])?;
        t.set(&at, "Bind", "port", &["7617"])?;
    }
    if sample_nodes {
        log_samples(t, nodes, &samples)?;
    }
    let origin = nodes.first().map_or("configuration", |n| n.origin.as_str());
    let bind_at = nodes
        .iter()
        .find(|n| n.is("Bind"))
        .map_or(Loc { origin, line: 1 }, Node::at);
    keep_exposure(t, &bind_at, "Bind")
}

fn log_samples(
    t: &mut Translation,
    nodes: &[Node],
    samples: &[(usize, u64)],
) -> Result<(), ConfigError> {
    let origin = nodes.first().map_or("configuration", |n| n.origin.as_str());
    let chosen = samples
        .iter()
        .zip(SAMPLES)
        .find(|((_, n), _)| *n > 0)
        .map(|((line, n), (key, level))| (*line, *n, *key, *level));
    let Some((line, n, key, level)) = chosen else {
        let at = Loc { origin, line: 1 };
        return t.set(&at, "Log*Sample 0", "loglevel", &["nothing"]);
    };
    let at = Loc {
        origin,
        line: line.max(1),
    };
    let shown = format!("{key} {n}");
    t.set(&at, &shown, "loglevel", &[level.name()])?;
    if n > 1 {
        t.warn(
            &at,
            &shown,
            format!(
                "mithril logs every message of its level rather than 1 in {n}; loglevel {} \
                 is the closest",
                level.name()
            ),
        );
    }
    Ok(())
}

fn bind(t: &mut Translation, node: &Node) -> Result<(), ConfigError> {
    let at = node.at();
    let shown = node.shown();
    if node.value.starts_with('/') {
        return Err(node.error("mithril listens on TCP only; a unix socket path cannot be served"));
    }
    let Some((host, port)) = split_listen(&node.value) else {
        return Err(node.error("Bind must be host:port"));
    };
    let host = bind_host(host).map_err(|m| node.error(m))?;
    t.set(&at, &shown, "bind", &[&host])?;
    t.set(&at, &shown, "port", &[port])
}

/// predixy's durations: a bare number is seconds; `s`, `ms` (or `m`) and
/// `us` (or `u`) suffixes. In microseconds.
pub(super) fn duration_us(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (n, unit) = text.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let factor = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1_000_000,
        "m" | "ms" => 1_000,
        "u" | "us" => 1,
        _ => return None,
    };
    n.checked_mul(factor)
}

fn cluster_pool(t: &mut Translation, pool: &Node) -> Result<(), ConfigError> {
    let Some(block) = &pool.block else {
        return Err(pool.error("ClusterServerPool needs a { ... } block"));
    };
    let mut servers = 0;
    for node in block {
        let at = node.at();
        let shown = node.shown();
        let key = node.key.to_ascii_lowercase();
        let duration = || {
            duration_us(&node.value).ok_or_else(|| {
                node.error(format!(
                    "{} must be a duration such as 1, 500ms or 2s",
                    node.key
                ))
            })
        };
        match key.as_str() {
            "servers" => {
                let Some(list) = &node.block else {
                    return Err(node.error("Servers needs a { + host:port ... } block"));
                };
                for server in list {
                    if server.key != "+" {
                        return Err(server.error("a server line is '+ host:port'"));
                    }
                    let spec = server.value.split_whitespace().next().unwrap_or("");
                    let addr = match spec.split_once('@') {
                        Some((password, addr)) => {
                            backend_password(t, &server.at(), "+ password@", password)?;
                            addr
                        }
                        None => spec,
                    };
                    t.set(&server.at(), &server.shown(), "cluster-nodes", &[addr])?;
                    servers += 1;
                }
            }
            "password" => backend_password(t, &at, "Password", &node.value)?,
            "refreshinterval" => {
                let us = duration()?;
                let secs = us.div_ceil(1_000_000).clamp(1, 86_400);
                if secs * 1_000_000 != us {
                    t.warn(
                        &at,
                        &shown,
                        format!(
                            "topology-refresh-secs counts whole seconds; using {secs} (a \
                             redirect from the cluster refreshes at once anyway)"
                        ),
                    );
                }
                t.set(&at, &shown, "topology-refresh-secs", &[&secs.to_string()])?;
            }
            "servertimeout" => {
                let ms = (duration()? / 1000).clamp(100, 60_000);
                t.set(&at, &shown, "connect-timeout", &[&ms.to_string()])?;
                t.warn(
                    &at,
                    &shown,
                    format!(
                        "mapped to connect-timeout {ms} (ms), the limit on connecting to a \
                         node; mithril has no per-request timeout"
                    ),
                );
            }
            "keepalive" => {
                let secs: u64 = node
                    .value
                    .parse()
                    .map_err(|_| node.error("KeepAlive must be a number of seconds"))?;
                t.set(
                    &at,
                    &shown,
                    "tcp-keepalive",
                    &[&secs.min(32_767).to_string()],
                )?;
            }
            "databases" => {
                if node.value != "1" {
                    return Err(
                        node.error("a Redis Cluster has only database 0, so Databases must be 1")
                    );
                }
            }
            "masterreadpriority" | "staticslavereadpriority" | "dynamicslavereadpriority" => t
                .warn(
                    &at,
                    &shown,
                    "ignored: mithril sends reads and writes to the slot's master",
                ),
            "serverfailurelimit" | "serverretrytimeout" => t.warn(
                &at,
                &shown,
                "ignored: the cluster's own failover replaces a failed master and mithril \
                 follows the new slot map",
            ),
            _ => {
                return Err(node.error(format!(
                    "unknown ClusterServerPool key '{}' (predixy itself would refuse it too)",
                    node.key
                )))
            }
        }
    }
    if servers == 0 {
        return Err(pool.error("the ClusterServerPool lists no Servers"));
    }
    Ok(())
}

/// One `Auth` of an Authority block.
struct Auth<'a> {
    node: &'a Node,
    mode: String,
    /// `KeyPrefix`, `ReadKeyPrefix`, `WriteKeyPrefix` (each may be given
    /// several times; their words accumulate, as in predixy).
    any: Vec<String>,
    read: Vec<String>,
    write: Vec<String>,
}

/// Maps the Authority block onto `user` lines. predixy's Auth is a
/// password with a mode and key prefixes; the one without a password is
/// what clients get before AUTH. So: that one becomes `default` (`nopass`),
/// the others `auth1`, `auth2`, ... in order, each `on >password`; with no
/// password-less Auth, `default` is `off` and clients must AUTH, as with
/// predixy. A KeyPrefix becomes `~prefix*`; ReadKeyPrefix / WriteKeyPrefix
/// (which replace KeyPrefix for their direction in predixy) become
/// `%R~prefix*` / `%W~prefix*`. One warning lists what was made, without
/// the passwords.
fn authority(t: &mut Translation, node: &Node) -> Result<(), ConfigError> {
    let Some(block) = &node.block else {
        return Err(node.error("Authority needs a { Auth ... } block"));
    };
    let mut auths: Vec<Auth<'_>> = Vec::new();
    for auth in block {
        if !auth.is("Auth") {
            return Err(auth.error("an Authority block holds only Auth blocks"));
        }
        let mut a = Auth {
            node: auth,
            mode: "read".to_string(),
            any: Vec::new(),
            read: Vec::new(),
            write: Vec::new(),
        };
        for setting in auth.block.iter().flatten() {
            let words = setting.value.split_whitespace().map(str::to_string);
            match setting.key.to_ascii_lowercase().as_str() {
                "mode" => {
                    let m = setting.value.to_ascii_lowercase();
                    if !matches!(m.as_str(), "read" | "write" | "admin") {
                        return Err(setting.error("Mode must be read, write or admin"));
                    }
                    a.mode = m;
                }
                "keyprefix" => a.any.extend(words),
                "readkeyprefix" => a.read.extend(words),
                "writekeyprefix" => a.write.extend(words),
                _ => return Err(setting.error(format!("unknown Auth key '{}'", setting.key))),
            }
        }
        // predixy keeps the last Auth of a password.
        if let Some(i) = auths.iter().position(|b| b.node.value == auth.value) {
            let earlier = auths.remove(i);
            t.warn(
                &earlier.node.at(),
                "Auth ...",
                format!(
                    "replaced by the Auth with the same password at line {}, as predixy does",
                    auth.line
                ),
            );
        }
        auths.push(a);
    }
    let mut made = Vec::new();
    // Who loses the script calls predixy forwarded (acl::scripts).
    let mut no_scripts = Vec::new();
    let mut numbered = 0;
    let mut default_seen = false;
    for a in &auths {
        let name = if a.node.value.is_empty() {
            default_seen = true;
            "default".to_string()
        } else {
            numbered += 1;
            format!("auth{numbered}")
        };
        let mut words = vec![name.clone(), "on".to_string()];
        if a.node.value.is_empty() {
            words.push("nopass".into());
        } else {
            words.push(format!(">{}", a.node.value));
        }
        words.push("mode".into());
        words.push(a.mode.clone());
        let read = if a.read.is_empty() { &a.any } else { &a.read };
        let write = if a.write.is_empty() { &a.any } else { &a.write };
        let glob = |p: &String| crate::config::user::prefix_glob(p);
        let mut keys = String::new();
        if read == write {
            words.extend(read.iter().map(|p| format!("~{}", glob(p))));
            if !read.is_empty() {
                keys = format!(" keys {}", read.join(" "));
            }
        } else {
            // A direction without prefixes is open in predixy.
            let rules = |perm: &str, prefixes: &Vec<String>| -> Vec<String> {
                if prefixes.is_empty() {
                    vec![format!("%{perm}~*")]
                } else {
                    prefixes
                        .iter()
                        .map(|p| format!("%{perm}~{}", glob(p)))
                        .collect()
                }
            };
            words.extend(rules("R", read));
            words.extend(rules("W", write));
            let shown = |p: &Vec<String>| {
                if p.is_empty() {
                    "any".to_string()
                } else {
                    p.join(" ")
                }
            };
            keys = format!(" reads {} writes {}", shown(read), shown(write));
        }
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        t.set(&a.node.at(), "Auth ...", "user", &args)?;
        if a.mode != "admin" || !keys.is_empty() {
            no_scripts.push(name.clone());
        }
        made.push(format!("{name} ({}{keys})", a.mode));
    }
    if !default_seen {
        t.set(&node.at(), "Authority", "user", &["default", "off"])?;
        made.push("default (off: every client must AUTH)".to_string());
    }
    let scripts = if no_scripts.is_empty() {
        String::new()
    } else {
        format!(
            "; {} may not call scripts (EVAL, EVALSHA, FCALL): through mithril only a user \
             with every right may, as a script runs with the proxy's backend credentials",
            no_scripts.join(", ")
        )
    };
    // predixy finds the Auth of a password alone, and limits no channel.
    t.set(&node.at(), "Authority", "auth-any-user", &["yes"])?;
    t.set(
        &node.at(),
        "Authority",
        "acl-pubsub-default",
        &["allchannels"],
    )?;
    t.warn(
        &node.at(),
        "Authority",
        format!(
            "mapped onto user lines: {}; clients keep authenticating with AUTH <password> \
             alone (auth-any-user yes: mithril finds the user whose password it is), and \
             mithril additionally accepts AUTH <user> <password>; every user may use every \
             channel (acl-pubsub-default allchannels), as with predixy{scripts}",
            made.join(", ")
        ),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_like_predixy() {
        let s = split_line("  Bind 127.0.0.1:7617  # comment")
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.key.as_str(), s.value.as_str(), s.opens),
            ("Bind", "127.0.0.1:7617", false)
        );
        let s = split_line("ClusterServerPool {").unwrap().unwrap();
        assert_eq!(
            (s.key.as_str(), s.value.as_str(), s.opens),
            ("ClusterServerPool", "", true)
        );
        let s = split_line("Auth \"a \\\"#b\" {").unwrap().unwrap();
        assert_eq!(
            (s.key.as_str(), s.value.as_str(), s.opens),
            ("Auth", "a \"#b", true)
        );
        let s = split_line("Authority{").unwrap().unwrap();
        assert_eq!((s.key.as_str(), s.opens), ("Authority", true));
        assert!(split_line("   # only a comment").unwrap().is_none());
        assert!(split_line("Log \"x").is_err());
        assert_eq!(duration_us("1"), Some(1_000_000));
        assert_eq!(duration_us("300ms"), Some(300_000));
        assert_eq!(duration_us("2s"), Some(2_000_000));
        assert_eq!(duration_us("5us"), Some(5));
        assert_eq!(duration_us("1h"), None);
        assert_eq!(duration_us(""), None);
    }

    #[test]
    fn blocks_nest_and_must_close() {
        let dir = std::env::temp_dir();
        let mut stack = Vec::new();
        let nodes = parse(
            b"A 1\nB {\n  C 2\n  D x {\n    + e\n  }\n}\n",
            "f",
            &dir,
            0,
            &mut stack,
        )
        .unwrap();
        assert_eq!(nodes.len(), 2);
        let b = nodes[1].block.as_ref().unwrap();
        assert_eq!(b[1].value, "x");
        assert_eq!(b[1].block.as_ref().unwrap()[0].key, "+");
        let e = parse(b"A {\n B 1\n", "f", &dir, 0, &mut stack).unwrap_err();
        assert_eq!(
            (e.line(), e.message()),
            (Some(1), "this block is never closed with '}'")
        );
        let e = parse(b"A 1\n}\n", "f", &dir, 0, &mut stack).unwrap_err();
        assert_eq!(e.line(), Some(2));
    }
}
