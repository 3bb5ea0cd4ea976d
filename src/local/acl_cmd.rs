//! ACL: the read-only side of Redis's ACL command over mithril's users.
//!
//! `ACL WHOAMI` (any user), `ACL USERS` and `ACL LIST` (admin mode: the
//! mode check runs before this), `ACL HELP`. Users come from the
//! configuration file and never change while the proxy runs, so SETUSER,
//! DELUSER, LOAD, SAVE and the rest are refused with that reason.
//!
//! `ACL LIST` writes each user as a `user` line of mithril's own syntax,
//! passwords as `#<sha256>`: pasted into a configuration file, it defines
//! the same user. Never: show a password in clear.

use super::{built, display_name, error, help, Outcome};
use crate::acl::User;
use crate::command::Command;
use crate::session::Session;
use crate::shared::Shared;
use std::sync::Arc;

/// The user a session runs as (`default` until it authenticates).
fn session_user<'a>(shared: &'a Shared, s: &'a Session) -> &'a Arc<User> {
    s.user
        .as_ref()
        .unwrap_or_else(|| shared.admin.acl.default_user())
}

pub fn acl(shared: &Shared, s: &Session, cmd: &Command) -> Outcome {
    let mut users: Vec<_> = shared.admin.acl.users().iter().collect();
    users.sort_by(|a, b| a.name.cmp(&b.name));
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
        "acl|users" => built(
            |e| {
                e.array(users.len());
                for u in &users {
                    e.bulk(u.name.as_bytes());
                }
            },
            s,
        ),
        "acl|list" => built(
            |e| {
                e.array(users.len());
                for u in &users {
                    e.bulk(format!("user {}", u.canonical).as_bytes());
                }
            },
            s,
        ),
        "acl|help" => help(
            s,
            &[
                "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "WHOAMI",
                "    Return the name of the user of this connection.",
                "USERS",
                "    List the names of the users (admin mode).",
                "LIST",
                "    List the users as configuration lines, passwords as SHA-256 digests (admin mode).",
                "HELP",
                "    Print this help.",
                "mithril's users are 'user' lines (and requirepass) in the configuration file.",
            ],
        ),
        _ => error(&format!(
            "ERR mithril: {} is not supported: users are defined with 'user' lines (and \
             requirepass) in the configuration file and do not change while mithril runs",
            display_name(cmd)
        )),
    }
}
