//! CONFIG: read mithril's own settings, change those that may change at
//! run time (`loglevel`, `maxclients`, `maxmemory`, `timeout`,
//! `slowlog-log-slower-than`, `slowlog-max-len`, `reply-cache`,
//! `reply-cache-size`, `reply-cache-max-age`, `tracking-table-max-keys`,
//! and the limits and timeouts of `shared::LIVE_LIMITS`).
//!
//! CONFIG GET reads the startup `Config` through the directive table, with
//! live exceptions: the settable directives show their current values
//! (`loglevel` from `AdminState`, the slow log's from the statistics hub,
//! the others from `Shared::live`), and `requirepass` is never revealed:
//! "(hidden)" when set, "" when not. CONFIG SET checks every pair before applying any, in Redis's
//! order (unknown name, immutable, duplicate; then values), with Redis's
//! error texts. Names are the directives', not Redis's: `maxmemory` is an
//! unknown option here.
//!
//! CONFIG RELOAD (mithril's own) reads the configuration file again
//! (`crate::reload`); the live directives it changes go through
//! [`apply_live`], the code CONFIG SET applies with. CONFIG REWRITE
//! writes the live directives' current values back into that file
//! (`Reload::rewrite`, `config/rewrite.rs`).

use super::{error, help, Outcome};
use crate::command::{Args, Command};
use crate::config::{self, glob_match, Config, Directive, LogLevel, DIRECTIVES};
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;

/// What CONFIG GET shows for a password that is set.
pub const HIDDEN_PASSWORD: &str = "(hidden)";

pub fn config(shared: &Shared, s: &mut Session, cmd: &'static Command, args: &Args) -> Outcome {
    match cmd.name {
        "config|get" => get(shared, s, args),
        "config|set" => set(shared, args),
        "config|resetstat" => Outcome::Reply(Bytes::from_static(super::OK)),
        // Reads the file on this worker's thread: one local file, as
        // long as a CONFIG SET plus a read (`crate::reload`).
        "config|reload" => match shared.reload.run(shared, "CONFIG RELOAD") {
            Ok(_) => Outcome::Reply(Bytes::from_static(super::OK)),
            Err(e) => error(&format!("ERR mithril: {e}")),
        },
        // Reads and writes one local file on this worker's thread, as
        // CONFIG RELOAD reads one.
        "config|rewrite" => match shared.reload.rewrite(shared, &running(shared)) {
            Ok(()) => Outcome::Reply(Bytes::from_static(super::OK)),
            Err(e) => error(&format!("ERR {e}")),
        },
        "config|help" => help(
            s,
            &[
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern> [<pattern> ...]",
                "    Return the directives whose names match a glob-like pattern, with their values.",
                "SET <directive> <value> [<directive> <value> ...]",
                "    Change a directive while mithril runs: loglevel, maxclients, maxmemory,",
                "    timeout, slowlog-log-slower-than, slowlog-max-len, reply-cache,",
                "    reply-cache-size, reply-cache-max-age, tracking-table-max-keys.",
                "RELOAD",
                "    Read the configuration file again: apply what may change while mithril runs",
                "    (the directives above, users and passwords); name the rest as pending restart.",
                "RESETSTAT",
                "    Reset the statistics of INFO (stats, commandstats, latencystats) on every worker.",
                "REWRITE",
                "    Write the values the directives above have now into the configuration",
                "    file, in place; comments and other lines are kept.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => error(&format!(
            "ERR mithril: {} is not supported",
            super::display_name(cmd)
        )),
    }
}

/// The configuration as it runs: the startup one with the live
/// directives' current values (what CONFIG REWRITE writes).
fn running(shared: &Shared) -> Config {
    let mut cfg = shared.config.clone();
    for d in DIRECTIVES.iter().filter(|d| d.runtime_settable) {
        if let Some(v) = shown_value(shared, d) {
            // A value of several words (client-output-buffer-limit) is
            // given as the file writes it.
            let mut words: Vec<&str> = v.split_whitespace().collect();
            if words.len() < 2 {
                words = vec![v.as_str()];
            }
            let _ = d.set(&mut cfg, &words);
        }
    }
    cfg
}

/// The value CONFIG GET shows for `d`.
fn shown_value(shared: &Shared, d: &Directive) -> Option<String> {
    match d.name {
        "loglevel" => Some(shared.admin.loglevel().name().to_string()),
        "slowlog-log-slower-than" => Some(shared.stats.slow_threshold().to_string()),
        "slowlog-max-len" => Some(shared.stats.slowlog.max_len().to_string()),
        "maxclients" => Some(shared.live.maxclients.load(Relaxed).to_string()),
        "maxmemory" => Some(shared.live.maxmemory.load(Relaxed).to_string()),
        "timeout" => Some(shared.live.timeout_secs.load(Relaxed).to_string()),
        "reply-cache" => Some(
            if shared.live.reply_cache.load(Relaxed) {
                "yes"
            } else {
                "no"
            }
            .to_string(),
        ),
        "reply-cache-size" => Some(shared.live.reply_cache_size.load(Relaxed).to_string()),
        "reply-cache-max-age" => Some(
            shared
                .live
                .reply_cache_max_age_secs
                .load(Relaxed)
                .to_string(),
        ),
        "tracking-table-max-keys" => Some(
            shared
                .live
                .tracking_table_max_keys
                .load(Relaxed)
                .to_string(),
        ),
        "requirepass" if shared.admin.has_password() => Some(HIDDEN_PASSWORD.to_string()),
        name if crate::shared::LIVE_LIMITS.contains(&name) => {
            d.value(&shared.live.limits.lock().unwrap_or_else(|p| p.into_inner()))
        }
        _ => d.value(&shared.config),
    }
}

fn is_glob(p: &[u8]) -> bool {
    p.iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// CONFIG GET pattern [pattern ...]: a map of every matching directive. A
/// plain name (no glob characters) is echoed as the client wrote it, a
/// pattern's matches under their own names, as Redis does.
fn get(shared: &Shared, s: &Session, args: &Args) -> Outcome {
    let pairs = own_pairs(shared, args);
    super::built(
        |e| {
            e.map(pairs.len());
            for (name, value) in &pairs {
                e.bulk(name).bulk(value.as_bytes());
            }
        },
        s,
    )
}

/// The directives of mithril's own that CONFIG GET's patterns (`args`
/// from index 2) match, with their values, in the order CONFIG GET lists
/// them: a plain name as the client wrote it, a pattern's matches under
/// their own names.
pub fn own_pairs(shared: &Shared, args: &Args) -> Vec<(Vec<u8>, String)> {
    let mut found: Vec<(Vec<u8>, &'static Directive)> = Vec::new();
    for i in 2..args.len() {
        let pat = args.get(i).unwrap_or_default();
        if is_glob(pat) {
            for d in DIRECTIVES {
                if glob_match(pat, d.name.as_bytes(), true)
                    && !found.iter().any(|(_, f)| std::ptr::eq(*f, d))
                {
                    found.push((d.name.as_bytes().to_vec(), d));
                }
            }
        } else if let Some(d) = std::str::from_utf8(pat).ok().and_then(config::lookup) {
            if !found.iter().any(|(_, f)| std::ptr::eq(*f, d)) {
                found.push((pat.to_vec(), d));
            }
        }
    }
    found
        .into_iter()
        .filter_map(|(name, d)| Some((name, shown_value(shared, d)?)))
        .collect()
}

fn set_failed(name: &[u8], why: &str) -> Outcome {
    let mut msg = b"ERR CONFIG SET failed (possibly related to argument '".to_vec();
    msg.extend_from_slice(name);
    msg.extend_from_slice(b"') - ");
    msg.extend_from_slice(why.as_bytes());
    super::error_bytes(&msg)
}

/// CONFIG SET directive value [directive value ...].
fn set(shared: &Shared, args: &Args) -> Outcome {
    if args.len() % 2 != 0 {
        return Outcome::Reply(Bytes::from_static(super::ERR_SYNTAX));
    }
    let pairs: Vec<(&[u8], &[u8])> = (2..args.len())
        .step_by(2)
        .map(|i| {
            (
                args.get(i).unwrap_or_default(),
                args.get(i + 1).unwrap_or_default(),
            )
        })
        .collect();
    set_pairs(shared, &pairs, true)
}

/// CONFIG SET of mithril's own directives, from a CONFIG SET that also
/// names the servers' parameters (`worker/admin.rs`): checked only when
/// `apply` is false (the error frame, or None), checked and applied when
/// true.
pub fn set_own(shared: &Shared, pairs: &[(Vec<u8>, Vec<u8>)], apply: bool) -> Option<Bytes> {
    let pairs: Vec<(&[u8], &[u8])> = pairs
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    match set_pairs(shared, &pairs, apply) {
        Outcome::Reply(r) | Outcome::ReplyAndClose(r) => (r.as_ref() != super::OK).then_some(r),
    }
}

/// CONFIG SET's (directive, value) pairs: every one checked, then, when
/// `apply`, applied.
fn set_pairs(shared: &Shared, pairs: &[(&[u8], &[u8])], apply: bool) -> Outcome {
    let mut seen: Vec<&'static Directive> = Vec::new();
    for &(name, _) in pairs {
        let d = std::str::from_utf8(name)
            .ok()
            .and_then(config::lookup)
            .filter(|d| d.name != "include");
        let Some(d) = d else {
            let mut msg = b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
            msg.extend_from_slice(name);
            msg.push(b'\'');
            return super::error_bytes(&msg);
        };
        if !d.runtime_settable {
            return set_failed(name, "can't set immutable config");
        }
        if seen.iter().any(|x| std::ptr::eq(*x, d)) {
            return set_failed(name, "duplicate parameter");
        }
        seen.push(d);
    }
    // Parse every value before applying any: all but loglevel through the
    // directive's own parser, into a scratch configuration that is then
    // applied field by field.
    let mut scratch = crate::config::Config::default();
    for (k, d) in seen.iter().enumerate() {
        let value = pairs.get(k).map(|p| p.1).unwrap_or_default();
        let value = std::str::from_utf8(value).ok();
        match d.name {
            "slowlog-log-slower-than"
            | "slowlog-max-len"
            | "maxclients"
            | "maxmemory"
            | "timeout"
            | "reply-cache"
            | "reply-cache-size"
            | "reply-cache-max-age"
            | "tracking-table-max-keys"
            | "proto-max-bulk-len"
            | "query-buffer-limit"
            | "client-output-high-water"
            | "client-output-total-limit"
            | "backend-timeout"
            | "connect-timeout"
            | "read-from-replicas" => {
                if let Err(why) = d.set(&mut scratch, &[value.unwrap_or("")]) {
                    return set_failed(d.name.as_bytes(), &why);
                }
            }
            "client-output-buffer-limit" => {
                // Redis's form: one value of CLASS HARD SOFT SECONDS words;
                // the classes it leaves out keep their limits.
                let words: Vec<&str> = value.unwrap_or("").split_whitespace().collect();
                let now = shared
                    .live
                    .limits
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                scratch.output_limit_normal = now.output_limit_normal;
                scratch.output_limit_pubsub = now.output_limit_pubsub;
                scratch.output_limit_replica = now.output_limit_replica;
                if let Err(why) = d.set(&mut scratch, &words) {
                    return set_failed(d.name.as_bytes(), &why);
                }
            }
            "loglevel" => match value.and_then(|v| v.parse::<LogLevel>().ok()) {
                Some(l) => scratch.loglevel = l,
                None => {
                    return set_failed(
                        b"loglevel",
                        "argument(s) must be one of the following: \
                         debug, verbose, notice, warning, nothing",
                    )
                }
            },
            _ => return set_failed(d.name.as_bytes(), "can't set immutable config"),
        }
    }
    if !apply {
        return Outcome::Reply(Bytes::from_static(super::OK));
    }
    for d in &seen {
        if apply_live(shared, d, &scratch) {
            if let Some(v) = d.value(&scratch) {
                log::info!(target: "mithril::admin", "CONFIG SET {} {v}", d.name);
            }
        }
    }
    Outcome::Reply(Bytes::from_static(super::OK))
}

/// Puts `cfg`'s value of directive `d` in force in the running proxy, for
/// the directives that change while mithril runs (see the module doc);
/// `false`, and nothing done, for any other. What CONFIG SET and a
/// configuration reload (`crate::reload`) both apply through.
pub(crate) fn apply_live(shared: &Shared, d: &Directive, cfg: &Config) -> bool {
    match d.name {
        "loglevel" => shared.admin.set_loglevel(cfg.loglevel),
        "slowlog-log-slower-than" => shared.stats.set_slow_threshold(cfg.slowlog_log_slower_than),
        "slowlog-max-len" => shared.stats.slowlog.set_max_len(cfg.slowlog_max_len),
        "maxclients" => shared.live.maxclients.store(cfg.maxclients, Relaxed),
        "maxmemory" => shared.live.maxmemory.store(cfg.maxmemory, Relaxed),
        "timeout" => shared.live.timeout_secs.store(cfg.timeout_secs, Relaxed),
        "reply-cache" => shared.live.reply_cache.store(cfg.reply_cache, Relaxed),
        "reply-cache-size" => shared
            .live
            .reply_cache_size
            .store(cfg.reply_cache_size, Relaxed),
        "reply-cache-max-age" => shared
            .live
            .reply_cache_max_age_secs
            .store(cfg.reply_cache_max_age_secs, Relaxed),
        "tracking-table-max-keys" => shared
            .live
            .tracking_table_max_keys
            .store(cfg.tracking_table_max_keys, Relaxed),
        name if crate::shared::LIVE_LIMITS.contains(&name) => {
            let mut limits = shared.live.limits.lock().unwrap_or_else(|p| p.into_inner());
            if d.copy(cfg, &mut limits).is_err() {
                return false;
            }
            shared.live.limits_gen.fetch_add(1, Relaxed);
        }
        _ => return false,
    }
    true
}
