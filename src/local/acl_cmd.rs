//! ACL: Redis's ACL command over mithril's users.
//!
//! `ACL WHOAMI` (any user); in admin mode (the mode check runs before
//! this): `USERS`, `LIST`, `GETUSER`, `SETUSER`, `DELUSER`, `CAT`,
//! `GENPASS`, `HELP`. Users come from the configuration file at start;
//! `SETUSER` and `DELUSER` change them until the process ends or a
//! configuration reload replaces them with the file's (nothing is written
//! back: `ACL LIST` prints lines to paste into the file). `LOG`
//! shows the refusals mithril made (`acl::LogEntry`). LOAD, SAVE and
//! DRYRUN are refused.
//!
//! `ACL LIST` writes each user as a `user` line of mithril's own syntax,
//! passwords as `#<sha256>`: pasted into a configuration file, it defines
//! the same user. Never: show a password in clear.

use super::{built, display_name, error, help, Outcome};
use crate::acl::User;
use crate::command::{self, Args, Command};
use crate::session::Session;
use crate::shared::Shared;
use std::sync::Arc;

/// ACL GENPASS's largest argument, as Redis's.
const GENPASS_MAX_BITS: i64 = 4096;

/// The user a session runs as (`default` until it authenticates).
fn session_user(shared: &Shared, s: &Session) -> Arc<User> {
    s.user()
        .cloned()
        .unwrap_or_else(|| shared.admin.acl.default_user())
}

pub fn acl(shared: &Shared, s: &Session, cmd: &Command, args: &Args) -> Outcome {
    let acl = &shared.admin.acl;
    let arg = |i: usize| args.get(i).unwrap_or_default();
    let rest = |from: usize| (from..args.len()).map(arg).collect::<Vec<&[u8]>>();
    let sorted_users = || {
        let mut users = acl.users();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        users
    };
    match cmd.name {
        "acl|whoami" => {
            let me = session_user(shared, s);
            built(
                |e| {
                    e.bulk(me.name.as_bytes());
                },
                s,
            )
        }
        "acl|users" => {
            let users = sorted_users();
            built(
            |e| {
                e.array(users.len());
                for u in &users {
                    e.bulk(u.name.as_bytes());
                }
            },
            s,
        )
        }
        "acl|list" => {
            let users = sorted_users();
            built(
            |e| {
                e.array(users.len());
                for u in &users {
                    e.bulk(format!("user {}", u.canonical).as_bytes());
                }
            },
            s,
        )
        }
        "acl|setuser" => match acl.set_user(arg(2), &rest(3)) {
            Ok(()) => Outcome::Reply(bytes::Bytes::from_static(b"+OK\r\n")),
            Err(e) => error(&e),
        },
        "acl|deluser" => match acl.del_users(&rest(2)) {
            Ok(n) => built(
                |e| {
                    e.int(n as i64);
                },
                s,
            ),
            Err(e) => error(e),
        },
        "acl|getuser" => match acl.user(arg(2)) {
            None => built(
                |e| {
                    e.null();
                },
                s,
            ),
            Some(u) => built(|e| describe(e, &u), s),
        },
        "acl|log" => log(shared, s, args),
        "acl|cat" => cat(s, args),
        "acl|genpass" => genpass(s, args),
        "acl|help" => help(
            s,
            &[
                "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CAT [<category>]",
                "    List all commands that belong to <category>, or all command categories",
                "    when no category is specified.",
                "DELUSER <username> [<username> ...]",
                "    Delete a list of users (admin mode).",
                "GETUSER <username>",
                "    Get the user's details (admin mode).",
                "LOG [<count> | RESET]",
                "    Show the ACL log entries (admin mode).",
                "GENPASS [<bits>]",
                "    Generate a secure 256-bit user password. The optional `bits` argument can",
                "    be used to specify a different size.",
                "LIST",
                "    List the users as configuration lines, passwords as SHA-256 digests (admin mode).",
                "SETUSER <username> <attribute> [<attribute> ...]",
                "    Create or modify a user with the specified attributes (admin mode; until",
                "    mithril restarts: copy ACL LIST's lines into the configuration to keep them).",
                "USERS",
                "    List the names of the users (admin mode).",
                "WHOAMI",
                "    Return the name of the user of this connection.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => error(&format!(
            "ERR mithril: {} is not supported: users are the configuration file's 'user' lines \
             (and requirepass), changed while mithril runs by ACL SETUSER and DELUSER, or read \
             again from the file by CONFIG RELOAD",
            display_name(cmd)
        )),
    }
}

/// ACL GETUSER's map, in Redis 7.0's order: flags, passwords (digests),
/// commands (Redis's rules, or every command the user may run:
/// `acl::command_rules`), keys,
/// channels, selectors (always none).
fn describe(e: &mut crate::resp::encode::Encoder<'_>, u: &User) {
    let spec = &u.spec;
    e.map(6);
    e.bulk(b"flags");
    let mut flags = vec![if spec.enabled { "on" } else { "off" }];
    if spec.nopass {
        flags.push("nopass");
    }
    e.set(flags.len());
    for f in flags {
        e.bulk(f.as_bytes());
    }
    e.bulk(b"passwords");
    e.array(spec.passwords.len());
    for p in &spec.passwords {
        e.bulk(crate::config::sha256::hex(&p.digest()).as_bytes());
    }
    let words = spec.canonical_words();
    let pick = |f: fn(&str) -> bool| {
        words
            .iter()
            .filter(|w| f(w))
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Redis's rules as given when they start over (`+@all`, `-@all`: the
    // mode no longer counts, as for every user ACL SETUSER makes);
    // otherwise what the mode and the rules allow, in Redis's words (not
    // `mode read`, which a Redis client cannot read).
    e.bulk(b"commands");
    let redis_rules = spec
        .commands
        .first()
        .is_some_and(|c| c == "+@all" || c == "-@all");
    match redis_rules {
        true => e.bulk(pick(|w| w.starts_with(['+', '-'])).as_bytes()),
        false => e.bulk(crate::acl::command_rules(u).as_bytes()),
    };
    e.bulk(b"keys");
    let keys = pick(|w| w.starts_with(['~', '%']));
    e.bulk(keys.as_bytes());
    e.bulk(b"channels");
    e.bulk(pick(|w| w.starts_with('&')).as_bytes());
    e.bulk(b"selectors");
    e.array(0);
}

/// ACL LOG [count | RESET]: the newest entries first (10 by default).
fn log(shared: &Shared, s: &Session, args: &Args) -> Outcome {
    let acl = &shared.admin.acl;
    let count = match args.get(2) {
        None => 10,
        Some(a) if a.eq_ignore_ascii_case(b"reset") => {
            acl.log_reset();
            return Outcome::Reply(bytes::Bytes::from_static(b"+OK\r\n"));
        }
        Some(a) => match std::str::from_utf8(a)
            .ok()
            .and_then(|a| a.parse::<i64>().ok())
        {
            // As Redis: a count below 1 shows nothing.
            Some(n) => n.max(0) as usize,
            None => return error("ERR value is not an integer or out of range"),
        },
    };
    let entries = acl.log_entries(count);
    let now = std::time::Instant::now();
    built(
        |e| {
            e.array(entries.len());
            for l in &entries {
                e.map(7);
                e.bulk(b"count").int(l.count as i64);
                e.bulk(b"reason").bulk(l.reason.as_bytes());
                e.bulk(b"context").bulk(l.context.as_bytes());
                e.bulk(b"object").bulk(&l.object);
                e.bulk(b"username").bulk(l.username.as_bytes());
                e.bulk(b"age-seconds")
                    .double(now.saturating_duration_since(l.at).as_secs_f64());
                e.bulk(b"client-info").bulk(l.client_info.as_bytes());
            }
        },
        s,
    )
}

/// ACL CAT [category].
fn cat(s: &Session, args: &Args) -> Outcome {
    let names = command::acl::names();
    let Some(which) = args.get(2) else {
        return built(
            |e| {
                e.array(names.len());
                for n in names {
                    e.bulk(n.as_bytes());
                }
            },
            s,
        );
    };
    let bit = std::str::from_utf8(which).ok().and_then(command::acl::bit);
    let Some(bit) = bit else {
        let shown = &which[..which.len().min(128)];
        return error(&format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(shown)
        ));
    };
    let mut found: Vec<&str> = Vec::new();
    for c in command::all() {
        if c.subcommands.is_empty() {
            if c.acl & bit != 0 {
                found.push(c.name);
            }
        } else {
            found.extend(
                c.subcommands
                    .iter()
                    .filter(|sc| sc.acl & bit != 0)
                    .map(|sc| sc.name),
            );
        }
    }
    built(
        |e| {
            e.array(found.len());
            for n in &found {
                e.bulk(n.as_bytes());
            }
        },
        s,
    )
}

/// ACL GENPASS [bits]: `bits` random bits as hex digits (rounded up to a
/// whole digit).
fn genpass(s: &Session, args: &Args) -> Outcome {
    let bits = match args.get(2) {
        None => 256,
        Some(b) => match std::str::from_utf8(b)
            .ok()
            .and_then(|b| b.parse::<i64>().ok())
        {
            Some(n) => n,
            None => return error("ERR value is not an integer or out of range"),
        },
    };
    if bits <= 0 || bits > GENPASS_MAX_BITS {
        return error(&format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to {GENPASS_MAX_BITS}"
        ));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| {
        use std::io::Read;
        f.read_exact(&mut raw)
    });
    if random.is_err() {
        return error("ERR mithril: cannot read /dev/urandom");
    }
    let mut hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    built(
        |e| {
            e.bulk(hex.as_bytes());
        },
        s,
    )
}
