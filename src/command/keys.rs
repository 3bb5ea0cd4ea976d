//! Key extraction: which argv positions of a call are keys.
//!
//! Follows Redis 7's own decision (the one behind `COMMAND GETKEYS`, ACL checks
//! and cluster routing), so the proxy hashes exactly the keys the node checks:
//!
//! 1. When the command has a key spec that is not NOT_KEY and none with
//!    VARIABLE_FLAGS, walk the specs. Each begins at an index or just after a
//!    keyword, then takes a range or a counted run of keys. A spec whose
//!    keyword is absent contributes nothing; an unknown spec, an INCOMPLETE
//!    one, an unparsable or negative key count, or positions outside argv make
//!    the whole walk invalid, and nothing it found is used.
//! 2. Otherwise the command's own rule, as Redis has one per command: SORT
//!    looks for STORE, MIGRATE for KEYS, GEORADIUS for STORE/STOREDIST, XREAD
//!    for STREAMS, the numkeys family (EVAL, ZUNIONSTORE, LMPOP, ...) reads its
//!    count leniently; SET and BITFIELD have their key at `argv[1]`. Commands
//!    without a rule have no keys then.
//!
//! Invariants: never allocates, never panics, never yields an index outside
//! argv, and terminates on any input (every step is at least 1).

use super::{flags, key_flags, lookup_sub, Args, BeginSearch, Command, FindKeys, KeySpec, Route};

/// Iterator over the argv indexes of a call's keys, in Redis's order.
#[derive(Debug, Clone)]
pub struct KeyIter<'a> {
    cmd: &'static Command,
    args: Args<'a>,
    mode: Mode,
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Walking spec number `spec`: positions `next..=last` by `step`.
    Specs {
        spec: usize,
        next: i64,
        last: i64,
        step: i64,
    },
    /// A command rule: positions `next..=last` by `step`, then `extra`.
    Rule {
        next: i64,
        last: i64,
        step: i64,
        extra: Option<i64>,
    },
    Done,
}

/// What one key spec says about one call.
pub(crate) enum SpecOutcome {
    /// The spec applies to nothing here (NOT_KEY, or its keyword is absent).
    Skip,
    Keys {
        first: i64,
        last: i64,
        step: i64,
    },
    /// The call cannot be read with this spec: fall back to the command rule.
    Invalid,
}

/// The argv indexes of the keys of this call. If `cmd` is a container and
/// `argv[1]` names one of its subcommands, the subcommand's keys are returned.
pub fn keys<'a>(cmd: &'static Command, args: &Args<'a>) -> KeyIter<'a> {
    let cmd = match args.get(1) {
        Some(sub) if !cmd.subcommands.is_empty() => lookup_sub(cmd, sub).unwrap_or(cmd),
        _ => cmd,
    };
    let has_keyspec = cmd
        .key_specs
        .iter()
        .any(|s| s.flags & key_flags::NOT_KEY == 0);
    let has_varflags = cmd
        .key_specs
        .iter()
        .any(|s| s.flags & key_flags::VARIABLE_FLAGS != 0);
    let specs_ok = has_keyspec
        && !has_varflags
        && cmd
            .key_specs
            .iter()
            .all(|s| !matches!(resolve_spec(s, args), SpecOutcome::Invalid));
    let mode = if specs_ok {
        specs_from(cmd, args, 0)
    } else {
        rule(cmd, args)
    };
    KeyIter {
        cmd,
        args: *args,
        mode,
    }
}

/// The argv index of the first key of this call, if it has one.
pub fn first_key(cmd: &'static Command, args: &Args) -> Option<usize> {
    // Fast path for the common shape (GET, SET, HSET, ... one spec: one key
    // at a fixed index): the answer is that index whenever it exists, as the
    // general algorithm below would find (a test checks every command).
    if let [spec] = cmd.key_specs {
        if cmd.subcommands.is_empty()
            && spec.flags & (key_flags::NOT_KEY | key_flags::INCOMPLETE | key_flags::VARIABLE_FLAGS)
                == 0
        {
            if let (BeginSearch::Index(i), FindKeys::Range { last_key: 0, .. }) =
                (spec.begin, spec.find)
            {
                if i > 0 && (i as usize) < args.len() {
                    return Some(i as usize);
                }
            }
        }
    }
    keys(cmd, args).next()
}

/// Whether this call needs a blocking lease: the commands routed `Blocking`,
/// and XREAD / XREADGROUP when a BLOCK option comes before STREAMS (read as
/// the server parses the options, so a malformed call is not blocking).
#[inline]
pub fn is_blocking_call(cmd: &Command, args: &Args) -> bool {
    // Two tests for the common command (no `blocking` flag, not routed
    // Blocking); only XREAD/XREADGROUP read their options.
    cmd.route == Route::Blocking
        || (cmd.flags & flags::BLOCKING != 0 && stream_read_blocks(cmd, args))
}

/// XREAD / XREADGROUP with BLOCK before STREAMS.
fn stream_read_blocks(cmd: &Command, args: &Args) -> bool {
    if cmd.name != "xread" && cmd.name != "xreadgroup" {
        return false;
    }
    let group = cmd.name == "xreadgroup";
    let n = args.len();
    let mut i = 1;
    while i < n {
        let more = n - i - 1;
        let a = args.get(i).unwrap_or(&[]);
        if kw_eq(a, "BLOCK") && more > 0 {
            return true;
        } else if kw_eq(a, "COUNT") && more > 0 {
            i += 1;
        } else if group && kw_eq(a, "GROUP") && more >= 2 {
            i += 2;
        } else if !(group && kw_eq(a, "NOACK")) {
            // STREAMS ends the options; anything else is a syntax error.
            return false;
        }
        i += 1;
    }
    false
}

impl Iterator for KeyIter<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let argc = self.args.len() as i64;
        loop {
            match self.mode {
                Mode::Done => return None,
                Mode::Specs {
                    spec,
                    next,
                    last,
                    step,
                } => {
                    if next <= last && next < argc && next >= 0 {
                        self.mode = Mode::Specs {
                            spec,
                            next: next + step,
                            last,
                            step,
                        };
                        return usize::try_from(next).ok();
                    }
                    self.mode = specs_from(self.cmd, &self.args, spec + 1);
                }
                Mode::Rule {
                    next,
                    last,
                    step,
                    extra,
                } => {
                    if next <= last && next < argc && next >= 0 {
                        self.mode = Mode::Rule {
                            next: next + step,
                            last,
                            step,
                            extra,
                        };
                        return usize::try_from(next).ok();
                    }
                    self.mode = Mode::Done;
                    if let Some(x) = extra.filter(|&x| x >= 0 && x < argc) {
                        return usize::try_from(x).ok();
                    }
                }
            }
        }
    }
}

/// Starts walking at spec `from`, skipping specs that contribute nothing.
fn specs_from(cmd: &Command, args: &Args, from: usize) -> Mode {
    for (spec, ks) in cmd.key_specs.iter().enumerate().skip(from) {
        match resolve_spec(ks, args) {
            SpecOutcome::Skip => {}
            SpecOutcome::Keys { first, last, step } => {
                return Mode::Specs {
                    spec,
                    next: first,
                    last,
                    step,
                }
            }
            // Validated before the walk started; stop rather than guess.
            SpecOutcome::Invalid => return Mode::Done,
        }
    }
    Mode::Done
}

pub(crate) fn resolve_spec(spec: &KeySpec, args: &Args) -> SpecOutcome {
    if spec.flags & key_flags::NOT_KEY != 0 {
        return SpecOutcome::Skip;
    }
    let argc = args.len() as i64;
    let mut first = match spec.begin {
        BeginSearch::Index(pos) => i64::from(pos),
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => match find_keyword(args, keyword, i64::from(start_from)) {
            Some(pos) => pos + 1,
            None => return SpecOutcome::Skip,
        },
        BeginSearch::Unknown => return SpecOutcome::Invalid,
    };
    let (last, step) = match spec.find {
        FindKeys::Range {
            last_key,
            key_step,
            limit,
        } => {
            let last_key = i64::from(last_key);
            let last = if last_key >= 0 {
                first + last_key
            } else if limit == 0 {
                argc + last_key
            } else {
                // A 1/limit share of what follows the first key (XREAD's
                // "half of the rest are keys"); division truncates as in C.
                first + ((argc - first) / i64::from(limit) + last_key)
            };
            (last, i64::from(key_step))
        }
        FindKeys::Keynum {
            keynum_idx,
            first_key,
            key_step,
        } => {
            let idx = i64::from(keynum_idx);
            if idx >= argc {
                return SpecOutcome::Invalid;
            }
            let count = usize::try_from(first + idx)
                .ok()
                .and_then(|i| args.get(i))
                .and_then(crate::resp::parse_i64);
            let count = match count {
                Some(n) if n >= 0 => n,
                _ => return SpecOutcome::Invalid,
            };
            first += i64::from(first_key);
            // The server narrows the count to a C int here; mirror it so an
            // absurd count resolves to the same keys it would.
            (first + i64::from(count as i32) - 1, i64::from(key_step))
        }
        FindKeys::Unknown => return SpecOutcome::Invalid,
    };
    if last >= argc || last < first || first >= argc || step < 1 {
        return SpecOutcome::Invalid;
    }
    if spec.flags & key_flags::INCOMPLETE != 0 {
        return SpecOutcome::Invalid;
    }
    SpecOutcome::Keys { first, last, step }
}

/// Searches `keyword` the way a keyword begin-search does: forward from
/// `start_from` up to the second-to-last argument, or for a negative value,
/// backward from `argc + start_from` down to `argv[2]`.
fn find_keyword(args: &Args, keyword: &str, start_from: i64) -> Option<i64> {
    let argc = args.len() as i64;
    let (start, end) = if start_from > 0 {
        (start_from, argc - 1)
    } else {
        (argc + start_from, 1)
    };
    let forward = start <= end;
    let mut i = start;
    while i != end {
        if i >= argc || i < 1 {
            break;
        }
        let arg = usize::try_from(i).ok().and_then(|i| args.get(i));
        if arg.is_some_and(|a| kw_eq(a, keyword)) {
            return Some(i);
        }
        i = if forward { i + 1 } else { i - 1 };
    }
    None
}

/// The command-specific rule used when the specs cannot be used.
fn rule(cmd: &Command, args: &Args) -> Mode {
    match cmd.name {
        "set" | "bitfield" | "sort_ro" => single(1, None),
        "sort" => sort_rule(args),
        "migrate" => migrate_rule(args),
        "georadius" | "georadiusbymember" => georadius_rule(args),
        "xread" | "xreadgroup" => xread_rule(args),
        "zunionstore" | "zinterstore" | "zdiffstore" => numkeys_rule(args, Some(1), 2, 3),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            numkeys_rule(args, None, 1, 2)
        }
        "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => numkeys_rule(args, None, 2, 3),
        _ => Mode::Done,
    }
}

fn single(pos: i64, extra: Option<i64>) -> Mode {
    Mode::Rule {
        next: pos,
        last: pos,
        step: 1,
        extra,
    }
}

/// `[dest] numkeys key...`: the count is read like C's atoi, and a count that
/// is below 1 or larger than what follows yields no keys at all. The
/// destination, when there is one, comes last.
fn numkeys_rule(args: &Args, store: Option<i64>, count_at: usize, first: i64) -> Mode {
    let argc = args.len() as i64;
    let Some(count) = args.get(count_at) else {
        return Mode::Done;
    };
    let num = i64::from(atoi(count));
    if num < 1 || num > argc - first {
        return Mode::Done;
    }
    Mode::Rule {
        next: first,
        last: first + num - 1,
        step: 1,
        extra: store,
    }
}

/// SORT key [BY p] [LIMIT o c] [GET p ...] [ASC|DESC] [ALPHA] [STORE dst]:
/// `argv[1]`, plus the argument after the last STORE.
fn sort_rule(args: &Args) -> Mode {
    let argc = args.len();
    let mut store = None;
    let mut i = 2;
    while i < argc {
        let a = args.get(i).unwrap_or(&[]);
        if kw_eq(a, "limit") {
            i += 2;
        } else if kw_eq(a, "store") && i + 1 < argc {
            store = Some(i as i64 + 1);
        } else if kw_eq(a, "get") || kw_eq(a, "by") {
            i += 1;
        }
        i += 1;
    }
    single(1, store)
}

/// MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 u pw] [KEYS k...]:
/// `argv[3]`, or every argument after KEYS when `argv[3]` is empty.
fn migrate_rule(args: &Args) -> Mode {
    let argc = args.len();
    let mut first = 3;
    let mut num = 1;
    let mut i = 6;
    while i < argc {
        let a = args.get(i).unwrap_or(&[]);
        if kw_eq(a, "keys") {
            if args.get(3).is_some_and(|k| !k.is_empty()) {
                num = 0;
            } else {
                first = i + 1;
                num = argc - first;
            }
            break;
        }
        if kw_eq(a, "auth") {
            i += 1;
        } else if kw_eq(a, "auth2") {
            i += 2;
        }
        i += 1;
    }
    if num == 0 {
        return Mode::Done;
    }
    Mode::Rule {
        next: first as i64,
        last: (first + num - 1) as i64,
        step: 1,
        extra: None,
    }
}

/// GEORADIUS[BYMEMBER] key ... [STORE k] [STOREDIST k]: `argv[1]` plus the last store target.
fn georadius_rule(args: &Args) -> Mode {
    let argc = args.len();
    let mut stored = None;
    let mut i = 5;
    while i < argc {
        let a = args.get(i).unwrap_or(&[]);
        if (kw_eq(a, "store") || kw_eq(a, "storedist")) && i + 1 < argc {
            stored = Some(i as i64 + 1);
            i += 1;
        }
        i += 1;
    }
    single(1, stored)
}

/// XREAD[GROUP] [options] STREAMS k1 .. kN id1 .. idN: the first half after STREAMS.
fn xread_rule(args: &Args) -> Mode {
    let argc = args.len();
    let mut streams = None;
    let mut i = 1;
    while i < argc {
        let a = args.get(i).unwrap_or(&[]);
        if kw_eq(a, "block") || kw_eq(a, "count") {
            i += 1;
        } else if kw_eq(a, "group") {
            i += 2;
        } else if kw_eq(a, "noack") {
        } else if kw_eq(a, "streams") {
            streams = Some(i);
            break;
        } else {
            break;
        }
        i += 1;
    }
    let Some(pos) = streams else {
        return Mode::Done;
    };
    let rest = argc - pos - 1;
    if rest == 0 || rest % 2 != 0 {
        return Mode::Done;
    }
    Mode::Rule {
        next: pos as i64 + 1,
        last: (pos + rest / 2) as i64,
        step: 1,
        extra: None,
    }
}

/// Case-insensitive keyword match with C string semantics: the server compares
/// NUL-terminated strings, so anything after an embedded NUL is ignored.
pub(crate) fn kw_eq(arg: &[u8], keyword: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(keyword.as_bytes())
}

/// The bytes before the first NUL.
pub(super) fn c_str(arg: &[u8]) -> &[u8] {
    match arg.iter().position(|&b| b == 0) {
        Some(n) => arg.get(..n).unwrap_or(arg),
        None => arg,
    }
}

/// C's atoi on a NUL-terminated string: leading white space, an optional
/// sign, then digits up to the first non-digit; out-of-range values clamp to
/// the 64-bit limits before narrowing to int, as glibc's strtol-based atoi does.
pub(super) fn atoi(s: &[u8]) -> i32 {
    let s = c_str(s);
    let mut it = s
        .iter()
        .skip_while(|&&b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .peekable();
    let neg = match it.peek() {
        Some(b'-') => {
            it.next();
            true
        }
        Some(b'+') => {
            it.next();
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    for &d in it {
        if !d.is_ascii_digit() {
            break;
        }
        let d = i64::from(d - b'0');
        v = if neg {
            v.saturating_mul(10).saturating_sub(d)
        } else {
            v.saturating_mul(10).saturating_add(d)
        };
    }
    v as i32
}
