//! COMMAND GETKEYS / GETKEYSANDFLAGS: which arguments of a full command are
//! keys, and with what access flags.
//!
//! The key positions are `command::keys`' (the same extraction routing
//! uses, hence the same keys the node would check). The flags follow Redis:
//! when the key specs were usable, each key carries the flags of the spec
//! that found it; when the command's own rule was used instead (SET and
//! BITFIELD have variable flags, SORT and MIGRATE incomplete specs, or the
//! specs could not read this call), the flags that rule gives in Redis.
//! To know which spec found a key, this module re-resolves the specs with
//! the same algorithm `command::keys` documents; a unit test keeps the two
//! in agreement.
//!
//! Errors are Redis's texts for an unknown command, a command without key
//! arguments, a wrong argument count, and arguments that yield no key.

use super::{built, error, Outcome};
use crate::command::{self, flags, key_flags as K, kw_eq, Args, Command, SpecOutcome};
use crate::session::Session;

pub fn getkeys(s: &Session, args: &Args, with_flags: bool) -> Outcome {
    let inner = Args {
        buf: args.buf,
        ranges: args.ranges.get(2..).unwrap_or_default(),
    };
    let Some(base) = inner.get(0).and_then(command::lookup) else {
        return error("ERR Invalid command specified");
    };
    let cmd = if base.subcommands.is_empty() || inner.len() < 2 {
        base
    } else {
        match inner.get(1).and_then(|n| command::lookup_sub(base, n)) {
            Some(c) => c,
            None => return error("ERR Invalid command specified"),
        }
    };
    if !cmd.key_specs.iter().any(|k| k.flags & K::NOT_KEY == 0) {
        return error("ERR The command has no key arguments");
    }
    if !command::arity_ok(cmd, inner.len()) {
        return error("ERR Invalid number of arguments specified for command");
    }
    let positions: Vec<usize> = command::keys(cmd, &inner).collect();
    if positions.is_empty() && cmd.flags & flags::NO_MANDATORY_KEYS == 0 {
        return error("ERR Invalid arguments specified for command");
    }
    let specs = spec_ranges(cmd, &inner);
    built(
        |e| {
            e.array(positions.len());
            for &pos in &positions {
                let key = inner.get(pos).unwrap_or_default();
                if !with_flags {
                    e.bulk(key);
                    continue;
                }
                let f = match &specs {
                    Some(ranges) => flags_from_specs(ranges, pos),
                    None => rule_flags(cmd, &inner, pos),
                };
                e.array(2).bulk(key).set(f.count_ones() as usize);
                for bit in (0..32).map(|b| 1u32 << b).filter(|b| f & b != 0) {
                    e.simple(K::name(bit).as_bytes());
                }
            }
        },
        s,
    )
}

/// One spec's keys in this call: argv positions `first..=last` by `step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SpecRange {
    first: i64,
    last: i64,
    step: i64,
    flags: u32,
}

/// The key ranges of every spec that finds keys in this call, or `None`
/// when the specs are not what decides the keys (no real key spec, one
/// with variable flags, or one that cannot read this call).
pub(super) fn spec_ranges(cmd: &Command, args: &Args) -> Option<Vec<SpecRange>> {
    let has_keyspec = cmd.key_specs.iter().any(|s| s.flags & K::NOT_KEY == 0);
    let has_varflags = cmd
        .key_specs
        .iter()
        .any(|s| s.flags & K::VARIABLE_FLAGS != 0);
    if !has_keyspec || has_varflags {
        return None;
    }
    let mut out = Vec::new();
    for spec in cmd.key_specs {
        match command::resolve_spec(spec, args) {
            SpecOutcome::Skip => {}
            SpecOutcome::Keys { first, last, step } => out.push(SpecRange {
                first,
                last,
                step,
                flags: spec.flags,
            }),
            SpecOutcome::Invalid => return None,
        }
    }
    Some(out)
}

fn flags_from_specs(ranges: &[SpecRange], pos: usize) -> u32 {
    let pos = pos as i64;
    ranges
        .iter()
        .find(|r| pos >= r.first && pos <= r.last && (pos - r.first) % r.step == 0)
        .map_or(0, |r| r.flags)
}

/// The flags Redis's per-command key rules give a key at `pos`.
fn rule_flags(cmd: &Command, args: &Args, pos: usize) -> u32 {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    match cmd.name {
        "set" => {
            if (3..args.len()).any(|i| kw_eq(arg(i), "get")) {
                K::RW | K::ACCESS | K::UPDATE
            } else {
                K::OW | K::UPDATE
            }
        }
        "bitfield" => {
            if bitfield_read_only(args) {
                K::RO | K::ACCESS
            } else {
                K::RW | K::ACCESS | K::UPDATE
            }
        }
        "sort" | "georadius" | "georadiusbymember" => {
            if pos == 1 {
                K::RO | K::ACCESS
            } else {
                K::OW | K::UPDATE
            }
        }
        "sort_ro" | "xread" => K::RO | K::ACCESS,
        "xreadgroup" => K::RW | K::ACCESS | K::UPDATE,
        "migrate" => K::RW | K::ACCESS | K::DELETE,
        // The numkeys family's rule (EVAL, ZUNIONSTORE, LMPOP, ...) gives no flags.
        _ => 0,
    }
}

/// BITFIELD with only GET (and OVERFLOW) operations, read as Redis does.
fn bitfield_read_only(args: &Args) -> bool {
    let n = args.len();
    let mut i = 2;
    while i < n {
        let more = n - i - 1;
        let a = args.get(i).unwrap_or_default();
        if kw_eq(a, "get") && more >= 2 {
            i += 2;
        } else if (kw_eq(a, "set") || kw_eq(a, "incrby")) && more >= 3 {
            return false;
        } else if kw_eq(a, "overflow") && more >= 1 {
            i += 1;
        } else {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::testutil::Call;

    /// Every position `command::keys` returns on the spec path is covered by
    /// one of the ranges resolved here, and vice versa.
    #[test]
    fn spec_ranges_agree_with_command_keys() {
        let calls: &[&[&str]] = &[
            &["get", "a"],
            &["mset", "a", "1", "b", "2"],
            &["lmove", "a", "b", "left", "right"],
            &["zunionstore", "d", "2", "a", "b"],
            &["zunionstore", "d", "2x", "a", "b"],
            &["eval", "s", "2", "k1", "k2", "v"],
            &["eval", "s", "0"],
            &["xread", "count", "1", "streams", "a", "b", "0", "0"],
            &["georadius", "k", "0", "0", "1", "m", "store", "d"],
            &["memory", "usage", "k"],
            &["object", "encoding", "k"],
            &["xreadgroup", "group", "g", "c", "streams", "a", "1"],
            &["blmpop", "0", "2", "a", "b", "left"],
            &["migrate", "h", "1", "", "0", "5", "keys", "a", "b"],
            &["sort", "k", "store", "d"],
            &["set", "k", "v", "get"],
        ];
        for call in calls {
            let c = Call::words(call);
            let args = c.args();
            let base = command::lookup(call[0].as_bytes()).unwrap();
            let cmd = if base.subcommands.is_empty() {
                base
            } else {
                command::lookup_sub(base, call[1].as_bytes()).unwrap()
            };
            let keys: Vec<usize> = command::keys(cmd, &args).collect();
            if let Some(specs) = spec_ranges(cmd, &args) {
                let mut from_specs = Vec::new();
                for r in &specs {
                    let mut p = r.first;
                    while p <= r.last {
                        from_specs.push(p as usize);
                        p += r.step;
                    }
                }
                assert_eq!(keys, from_specs, "{call:?}");
            }
        }
    }

    #[test]
    fn rule_flags_match_redis() {
        let c = Call::words(&["bitfield", "k", "get", "u8", "0", "overflow", "sat"]);
        assert!(bitfield_read_only(&c.args()));
        let c = Call::words(&["bitfield", "k", "set", "u8", "0", "1"]);
        assert!(!bitfield_read_only(&c.args()));
    }
}
