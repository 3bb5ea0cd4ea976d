//! What scripts and functions may do through mithril, beyond the modes:
//! the rules [`super::check`] adds for the script calls and for function
//! management (issue 30).
//!
//! Why the script calls need every right: a script runs on the node that
//! executes it, as the user mithril authenticated that connection with
//! (`backend-user`), so every `redis.call` it makes is checked by the node
//! against the backend user's rules, not the caller's, and
//! `redis.acl_check_cmd` answers for the backend user. mithril cannot see
//! what a script will call (the names are computed at run time, the keys
//! need not be declared), so it cannot hold those calls to a narrower
//! user's rules. A script call (EVAL, EVALSHA, FCALL and their read-only
//! variants) is therefore refused, with Redis's NOPERM for the call, to
//! every user that may not run every command on every key and channel
//! (`User::unrestricted`); such a user's scripts run with rights equal to
//! its own, and `acl_check_cmd` tells it the truth. Loading a script or a
//! library runs no command and stays a write-mode right.
//!
//! Functions have an admin gate instead of owners: `FUNCTION LOAD
//! REPLACE` swaps the code every caller of the library runs, so it needs
//! the right to delete a library (`FUNCTION DELETE`, mode admin); reading
//! the code (`FUNCTION LIST WITHCODE`, `FUNCTION DUMP`) needs the right to
//! load one. Redis lets any user with `FUNCTION LOAD` replace and any user
//! with `FUNCTION LIST` read the code; mithril is stricter on purpose,
//! since many applications share one set of nodes behind it.
//!
//! Never: look at a request that is not one of these commands (the caller
//! asks only for restricted users, after the command's own rule passed),
//! or allocate.

use super::User;
use crate::command::{self, Args, Command};

/// Whether `user`, which may run `cmd` by its command rules, is refused it
/// by the scripting rules above (then the reply is the command's NOPERM).
pub(super) fn refused(user: &User, cmd: &Command, args: &Args) -> bool {
    // Every command below is in @scripting: one test for the others.
    if cmd.acl & command::acl::SCRIPTING == 0 {
        return false;
    }
    match cmd.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => !user.unrestricted,
        "function|load" if replaces(args) => !may(user, "function|delete"),
        "function|list" if with_code(args) => !may(user, "function|load"),
        "function|dump" => !may(user, "function|load"),
        _ => false,
    }
}

/// Whether the user's command rules let it run the command named `name`.
fn may(user: &User, name: &str) -> bool {
    command::lookup_full(name.as_bytes()).is_some_and(|c| user.may_run(c))
}

/// `FUNCTION LOAD [REPLACE] code`: the option before the code (the last
/// argument is the code, whatever it reads).
fn replaces(args: &Args) -> bool {
    (2..args.len().saturating_sub(1)).any(|i| {
        args.get(i)
            .is_some_and(|a| a.eq_ignore_ascii_case(b"replace"))
    })
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`, read as Redis reads
/// it: the word after LIBRARYNAME is a pattern, whatever it reads.
fn with_code(args: &Args) -> bool {
    let mut i = 2;
    while let Some(a) = args.get(i) {
        if a.eq_ignore_ascii_case(b"withcode") {
            return true;
        }
        i += if a.eq_ignore_ascii_case(b"libraryname") {
            2
        } else {
            1
        };
    }
    false
}
