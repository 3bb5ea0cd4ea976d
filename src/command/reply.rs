//! The error replies a Redis 7 server sends before running a command, byte
//! for byte: unknown command, unknown subcommand, wrong number of arguments.
//!
//! Client bytes end up inside these texts, so they are treated as the server
//! treats them: cut at an embedded NUL (it formats C strings), cut to 128
//! bytes, CR and LF turned into spaces so the reply stays one RESP line.
//! Only error paths call these, so they may allocate.

use super::keys::c_str;
use super::{Args, Command};

/// How much of a client-supplied name or argument an error message quotes.
const QUOTE_MAX: usize = 128;

/// `-ERR wrong number of arguments for 'client|setname' command\r\n`
/// (a subcommand is named by its full `container|sub` name). EXEC is the
/// exception: the server reports any refusal of EXEC as an aborted
/// transaction (and discards the transaction, which is the caller's part).
pub fn wrong_arity_reply(cmd: &Command) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + cmd.name.len());
    if cmd.name == "exec" {
        out.extend_from_slice(b"-EXECABORT Transaction discarded because of: ");
    } else {
        out.extend_from_slice(b"-ERR ");
    }
    out.extend_from_slice(b"wrong number of arguments for '");
    out.extend_from_slice(cmd.name.as_bytes());
    out.extend_from_slice(b"' command\r\n");
    out
}

/// `-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n`.
/// Arguments are quoted while less than 128 bytes of them have been quoted,
/// each cut so the quoted bytes stay within 128.
pub fn unknown_command_reply(args: &Args) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + 2 * QUOTE_MAX);
    out.extend_from_slice(b"-ERR unknown command '");
    push_clean(&mut out, truncated(args.get(0).unwrap_or(&[]), QUOTE_MAX));
    out.extend_from_slice(b"', with args beginning with: ");
    let mut quoted = 0;
    for i in 1..args.len() {
        if quoted >= QUOTE_MAX {
            break;
        }
        let arg = truncated(args.get(i).unwrap_or(&[]), QUOTE_MAX - quoted);
        out.push(b'\'');
        push_clean(&mut out, arg);
        out.extend_from_slice(b"' ");
        quoted += arg.len() + 3;
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n`
pub fn unknown_subcommand_reply(parent: &Command, sub: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + QUOTE_MAX + parent.name.len());
    out.extend_from_slice(b"-ERR unknown subcommand '");
    push_clean(&mut out, truncated(sub, QUOTE_MAX));
    out.extend_from_slice(b"'. Try ");
    out.extend(parent.name.bytes().map(|b| b.to_ascii_uppercase()));
    out.extend_from_slice(b" HELP.\r\n");
    out
}

/// The C string of `arg`, at most `max` bytes of it.
fn truncated(arg: &[u8], max: usize) -> &[u8] {
    let s = c_str(arg);
    s.get(..max).unwrap_or(s)
}

fn push_clean(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend(bytes.iter().map(|&b| match b {
        b'\r' | b'\n' => b' ',
        b => b,
    }));
}
