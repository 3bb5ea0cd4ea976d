//! The commands the proxy treats apart from what their route and flags say,
//! named here once rather than by string wherever they are met: the read
//! the reply cache serves, the script calls, the arguments that are
//! secrets. Everything else about a command is a field of the table.

use super::{acl, flags, Args, Command, Route};

/// The read the reply cache keeps replies of.
#[inline]
pub fn is_cached_read(cmd: &Command) -> bool {
    cmd.name == "get"
}

/// FUNCTION STATS: keyless, but answered by the master running a script
/// (every master is asked, each on a lease).
#[inline]
pub fn is_function_stats(cmd: &Command) -> bool {
    cmd.name == "function|stats"
}

/// A CLIENT subcommand: what does not use up a CLIENT CACHING YES, which
/// lasts until the next other command.
#[inline]
pub fn is_client_subcommand(cmd: &Command) -> bool {
    cmd.name.starts_with("client|")
}

/// A script or function call, by how its body is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptCall {
    /// EVAL / EVAL_RO: the body is the first argument.
    Eval,
    /// EVALSHA / EVALSHA_RO: by the SHA-1 of a loaded body.
    Sha,
    /// FCALL / FCALL_RO: by function name.
    Function,
}

/// What kind of script call `cmd` is, if it is one.
#[inline]
pub fn script_call(cmd: &Command) -> Option<ScriptCall> {
    if cmd.acl & acl::SCRIPTING == 0 || cmd.flags & flags::NO_MANDATORY_KEYS == 0 {
        return None;
    }
    if cmd.route == Route::Eval {
        return Some(ScriptCall::Eval);
    }
    match cmd.name {
        "evalsha" | "evalsha_ro" => Some(ScriptCall::Sha),
        "fcall" | "fcall_ro" => Some(ScriptCall::Function),
        _ => None,
    }
}

/// A script call that may write its keys (not an `_RO` form): scripts
/// carry no WRITE flag, so this is what says it.
#[inline]
pub fn script_may_write(cmd: &Command) -> bool {
    script_call(cmd).is_some() && cmd.flags & flags::READONLY == 0
}

/// CONFIG SET parameters whose value is a secret (Redis 7.0's sensitive
/// ones, and mithril's credentials for the nodes): shown `(redacted)`
/// where the command is shown, `(hidden)` by CONFIG GET.
pub const SECRET_PARAMS: &[&str] = &[
    "requirepass",
    "masterauth",
    "masteruser",
    "tls-key-file-pass",
    "tls-client-key-file-pass",
    "backend-password",
];

/// Whether CONFIG SET / GET parameter `name` holds a secret.
pub fn secret_param(name: &[u8]) -> bool {
    SECRET_PARAMS
        .iter()
        .any(|p| p.as_bytes().eq_ignore_ascii_case(name))
}

/// The arguments Redis 7.0 shows as `(redacted)` where it shows a command
/// (MONITOR, SLOWLOG): AUTH's (unless it has too many, a syntax error
/// found first), the user and password of each HELLO AUTH up to the first
/// option HELLO stops at, MIGRATE's AUTH password and AUTH2 user and
/// password, every argument of ACL SETUSER after the subcommand, and the
/// value of each secret parameter of CONFIG SET ([`SECRET_PARAMS`]).
pub fn secret_args(cmd: &Command, args: &Args) -> Vec<usize> {
    match cmd.name {
        "acl|setuser" => (2..args.len()).collect(),
        "config|set" => (2..args.len())
            .step_by(2)
            .filter(|&i| secret_param(args.get(i).unwrap_or_default()))
            .map(|i| i + 1)
            .filter(|&i| i < args.len())
            .collect(),
        "migrate" => {
            let mut out = Vec::new();
            let mut j = 6;
            while j < args.len() {
                let opt = args.get(j).unwrap_or_default();
                if opt.eq_ignore_ascii_case(b"auth") {
                    out.push(j + 1);
                    j += 2;
                } else if opt.eq_ignore_ascii_case(b"auth2") {
                    out.extend([j + 1, j + 2]);
                    j += 3;
                } else if opt.eq_ignore_ascii_case(b"keys") {
                    break;
                } else {
                    j += 1;
                }
            }
            out.retain(|&i| i < args.len());
            out
        }
        "auth" if args.len() <= 3 => (1..args.len()).collect(),
        "hello" if args.len() >= 2 => {
            let ver = crate::resp::parse_i64(args.get(1).unwrap_or_default());
            if !matches!(ver, Some(2 | 3)) {
                return Vec::new();
            }
            let mut out = Vec::new();
            let mut j = 2;
            while j < args.len() {
                let more = args.len() - 1 - j;
                let opt = args.get(j).unwrap_or_default();
                if opt.eq_ignore_ascii_case(b"auth") && more >= 2 {
                    out.extend([j + 1, j + 2]);
                    j += 3;
                } else if opt.eq_ignore_ascii_case(b"setname") && more >= 1 {
                    j += 2;
                } else {
                    break;
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::resolve;
    use crate::command::testutil::Call;

    fn cmd(words: &[&str]) -> &'static Command {
        resolve(&Call::words(words).args()).unwrap()
    }

    #[test]
    fn script_calls_are_told_apart_and_only_the_plain_forms_may_write() {
        for (w, kind, writes) in [
            (&["eval", "return 1", "0"][..], ScriptCall::Eval, true),
            (&["eval_ro", "return 1", "0"], ScriptCall::Eval, false),
            (&["evalsha", "x", "0"], ScriptCall::Sha, true),
            (&["evalsha_ro", "x", "0"], ScriptCall::Sha, false),
            (&["fcall", "f", "0"], ScriptCall::Function, true),
            (&["fcall_ro", "f", "0"], ScriptCall::Function, false),
        ] {
            assert_eq!(script_call(cmd(w)), Some(kind), "{w:?}");
            assert_eq!(script_may_write(cmd(w)), writes, "{w:?}");
        }
        for w in [
            &["get", "k"][..],
            &["script", "load", "x"],
            &["function", "list"],
        ] {
            assert_eq!(script_call(cmd(w)), None, "{w:?}");
        }
        assert!(is_cached_read(cmd(&["get", "k"])));
    }

    #[test]
    fn secrets_of_acl_setuser_config_set_and_migrate() {
        let hidden = |w: &[&str]| {
            let call = Call::words(w);
            let args = call.args();
            secret_args(resolve(&args).unwrap(), &args)
        };
        assert_eq!(hidden(&["acl", "setuser", "u", "on", ">pw"]), [2, 3, 4]);
        assert_eq!(
            hidden(&[
                "config",
                "set",
                "maxclients",
                "5",
                "MasterAuth",
                "pw",
                "hz",
                "5"
            ]),
            [5]
        );
        assert_eq!(hidden(&["config", "set", "requirepass", "x"]), [3]);
        assert_eq!(
            hidden(&["migrate", "h", "1", "", "0", "10", "AUTH2", "u", "p", "KEYS", "a"]),
            [7, 8]
        );
        assert_eq!(
            hidden(&["migrate", "h", "1", "k", "0", "10", "auth", "p"]),
            [7]
        );
        assert!(hidden(&["migrate", "h", "1", "k", "0", "10"]).is_empty());
        assert!(!is_cached_read(cmd(&["getex", "k"])));
    }
}
