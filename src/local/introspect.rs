//! COMMAND and its subcommands, answered from the static table.
//!
//! The replies copy Redis 7.0's shapes element for element (which RESP3
//! type each part is, which map keys appear and when), so that a client
//! parsing a real server's COMMAND / COMMAND DOCS parses mithril's the
//! same way; for a command the table took unchanged from a live server the
//! bytes are identical. Redis lists commands and subcommands in hash-table
//! order, which changes from run to run; mithril lists them by name.
//!
//! COMMAND COUNT / LIST describe the table, which is the Redis 7.2 / Valkey
//! 8 command set, so they list more commands than a 7.0 server.

use super::{built, getkeys, help, Outcome};
use crate::command::{
    self, acl, arg_flags, doc_flags, flags, key_flags, Arg, ArgKind, Args, BeginSearch, Command,
    FindKeys,
};
use crate::config::glob_match;
use crate::resp::encode::Encoder;
use crate::session::Session;
use crate::shared::Shared;

pub fn command(_shared: &Shared, s: &mut Session, cmd: &'static Command, args: &Args) -> Outcome {
    match cmd.name {
        "command" => info(s, args, 1),
        "command|info" => info(s, args, 2),
        "command|count" => {
            let n = command::all().len() as i64;
            built(
                |e| {
                    e.int(n);
                },
                s,
            )
        }
        "command|list" => list(s, args),
        "command|docs" => docs(s, args),
        "command|getkeys" => getkeys::getkeys(s, args, false),
        "command|getkeysandflags" => getkeys::getkeys(s, args, true),
        "command|help" => help(
            s,
            &[
                "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "(no subcommand)",
                "    Describe every command mithril knows.",
                "COUNT",
                "    The number of commands (subcommands not counted).",
                "LIST [FILTERBY (MODULE <name>|ACLCAT <category>|PATTERN <pattern>)]",
                "    The names of the commands and subcommands, optionally filtered.",
                "INFO [<command-name> ...]",
                "    Describe the named commands (all of them without a name).",
                "DOCS [<command-name> ...]",
                "    The documentation of the named commands (all of them without a name).",
                "GETKEYS <full-command>",
                "    The keys of a complete command line.",
                "GETKEYSANDFLAGS <full-command>",
                "    The keys of a complete command line, with their access flags.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => super::error(&format!(
            "ERR mithril: {} is not supported",
            super::display_name(cmd)
        )),
    }
}

/// COMMAND / COMMAND INFO [name ...]: every command when no name follows
/// argument `from`, else one entry per name (nil for an unknown one).
fn info(s: &Session, args: &Args, from: usize) -> Outcome {
    built(
        |e| {
            if args.len() <= from {
                let all = command::all();
                e.array(all.len());
                for c in all {
                    write_info(e, c);
                }
                return;
            }
            e.array(args.len() - from);
            for i in from..args.len() {
                match args.get(i).and_then(command::lookup_full) {
                    Some(c) => write_info(e, c),
                    None => {
                        e.null();
                    }
                }
            }
        },
        s,
    )
}

/// The set bits of `v`, lowest first (the order the name tables use).
fn bits(v: u64) -> impl Iterator<Item = u64> {
    (0..64).map(|b| 1u64 << b).filter(move |b| v & b != 0)
}

/// One COMMAND INFO entry: name, arity, flags, first/last/step, ACL
/// categories, tips, key specs, subcommands.
fn write_info(e: &mut Encoder<'_>, c: &Command) {
    e.array(10);
    e.bulk(c.name.as_bytes());
    e.int(i64::from(c.arity));
    let shown = c.flags & !flags::HIDDEN;
    e.set(shown.count_ones() as usize);
    for bit in bits(u64::from(shown)) {
        e.simple(flags::name(bit as u32).as_bytes());
    }
    let (first, last, step) = c.legacy_keys;
    e.int(i64::from(first))
        .int(i64::from(last))
        .int(i64::from(step));
    e.set(c.acl.count_ones() as usize);
    for bit in bits(c.acl) {
        e.simple(format!("@{}", acl::name(bit)).as_bytes());
    }
    e.set(c.doc.tips.len());
    for tip in c.doc.tips {
        e.bulk(tip.as_bytes());
    }
    e.set(c.key_specs.len());
    for (i, ks) in c.key_specs.iter().enumerate() {
        let note = c.doc.key_spec_notes.get(i).copied().flatten();
        e.map(3 + usize::from(note.is_some()));
        if let Some(n) = note {
            e.bulk(b"notes").bulk(n.as_bytes());
        }
        e.bulk(b"flags").set(ks.flags.count_ones() as usize);
        for bit in bits(u64::from(ks.flags)) {
            e.simple(key_flags::name(bit as u32).as_bytes());
        }
        e.bulk(b"begin_search").map(2).bulk(b"type");
        match ks.begin {
            BeginSearch::Index(pos) => {
                e.bulk(b"index").bulk(b"spec").map(1);
                e.bulk(b"index").int(i64::from(pos));
            }
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => {
                e.bulk(b"keyword").bulk(b"spec").map(2);
                e.bulk(b"keyword").bulk(keyword.as_bytes());
                e.bulk(b"startfrom").int(i64::from(start_from));
            }
            BeginSearch::Unknown => {
                e.bulk(b"unknown").bulk(b"spec").map(0);
            }
        }
        e.bulk(b"find_keys").map(2).bulk(b"type");
        match ks.find {
            FindKeys::Range {
                last_key,
                key_step,
                limit,
            } => {
                e.bulk(b"range").bulk(b"spec").map(3);
                e.bulk(b"lastkey").int(i64::from(last_key));
                e.bulk(b"keystep").int(i64::from(key_step));
                e.bulk(b"limit").int(i64::from(limit));
            }
            FindKeys::Keynum {
                keynum_idx,
                first_key,
                key_step,
            } => {
                e.bulk(b"keynum").bulk(b"spec").map(3);
                e.bulk(b"keynumidx").int(i64::from(keynum_idx));
                e.bulk(b"firstkey").int(i64::from(first_key));
                e.bulk(b"keystep").int(i64::from(key_step));
            }
            FindKeys::Unknown => {
                e.bulk(b"unknown").bulk(b"spec").map(0);
            }
        }
    }
    if c.subcommands.is_empty() {
        e.set(0);
    } else {
        e.array(c.subcommands.len());
        for sub in c.subcommands {
            write_info(e, sub);
        }
    }
}

/// COMMAND DOCS [name ...]: a map from name to documentation; unknown
/// names are left out.
fn docs(s: &Session, args: &Args) -> Outcome {
    built(
        |e| {
            if args.len() <= 2 {
                let all = command::all();
                e.map(all.len());
                for c in all {
                    e.bulk(c.name.as_bytes());
                    write_docs(e, c);
                }
                return;
            }
            let found: Vec<&Command> = (2..args.len())
                .filter_map(|i| args.get(i).and_then(command::lookup_full))
                .collect();
            e.map(found.len());
            for c in found {
                e.bulk(c.name.as_bytes());
                write_docs(e, c);
            }
        },
        s,
    )
}

fn write_docs(e: &mut Encoder<'_>, c: &Command) {
    let d = &c.doc;
    let present = [
        !d.summary.is_empty(),
        !d.since.is_empty(),
        true, // group
        !d.complexity.is_empty(),
        d.doc_flags != 0,
        d.deprecated_since.is_some(),
        d.replaced_by.is_some(),
        !d.history.is_empty(),
        !d.arguments.is_empty(),
        !c.subcommands.is_empty(),
    ];
    e.map(present.iter().filter(|&&p| p).count());
    if !d.summary.is_empty() {
        e.bulk(b"summary").bulk(d.summary.as_bytes());
    }
    if !d.since.is_empty() {
        e.bulk(b"since").bulk(d.since.as_bytes());
    }
    e.bulk(b"group").bulk(d.group.as_bytes());
    if !d.complexity.is_empty() {
        e.bulk(b"complexity").bulk(d.complexity.as_bytes());
    }
    if d.doc_flags != 0 {
        e.bulk(b"doc_flags").set(d.doc_flags.count_ones() as usize);
        for bit in bits(u64::from(d.doc_flags)) {
            e.simple(doc_flags::name(bit as u8).as_bytes());
        }
    }
    if let Some(v) = d.deprecated_since {
        e.bulk(b"deprecated_since").bulk(v.as_bytes());
    }
    if let Some(v) = d.replaced_by {
        e.bulk(b"replaced_by").bulk(v.as_bytes());
    }
    if !d.history.is_empty() {
        e.bulk(b"history").set(d.history.len());
        for (version, change) in d.history {
            e.array(2).bulk(version.as_bytes()).bulk(change.as_bytes());
        }
    }
    if !d.arguments.is_empty() {
        e.bulk(b"arguments");
        write_args(e, d.arguments);
    }
    if !c.subcommands.is_empty() {
        e.bulk(b"subcommands").map(c.subcommands.len());
        for sub in c.subcommands {
            e.bulk(sub.name.as_bytes());
            write_docs(e, sub);
        }
    }
}

fn write_args(e: &mut Encoder<'_>, args: &[Arg]) {
    e.array(args.len());
    for a in args {
        let nested = matches!(a.kind, ArgKind::Oneof | ArgKind::Block);
        let present = [
            a.key_spec_index != -1,
            a.token.is_some(),
            a.since.is_some(),
            a.deprecated_since.is_some(),
            a.display_text.is_some(),
            a.flags != 0,
            nested,
        ];
        e.map(2 + present.iter().filter(|&&p| p).count());
        e.bulk(b"name").bulk(a.name.as_bytes());
        e.bulk(b"type").bulk(a.kind.name().as_bytes());
        if a.key_spec_index != -1 {
            e.bulk(b"key_spec_index").int(i64::from(a.key_spec_index));
        }
        if let Some(t) = a.token {
            e.bulk(b"token").bulk(t.as_bytes());
        }
        if let Some(v) = a.since {
            e.bulk(b"since").bulk(v.as_bytes());
        }
        if let Some(v) = a.deprecated_since {
            e.bulk(b"deprecated_since").bulk(v.as_bytes());
        }
        if let Some(v) = a.display_text {
            e.bulk(b"display_text").bulk(v.as_bytes());
        }
        if a.flags != 0 {
            e.bulk(b"flags").set(a.flags.count_ones() as usize);
            for bit in bits(u64::from(a.flags)) {
                e.simple(arg_flags::name(bit as u8).as_bytes());
            }
        }
        if nested {
            e.bulk(b"arguments");
            write_args(e, a.arguments);
        }
    }
}

enum Filter<'a> {
    None,
    Module,
    AclCat(u64),
    Pattern(&'a [u8]),
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]:
/// full names of commands and subcommands, each tested on its own.
fn list(s: &Session, args: &Args) -> Outcome {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    let filter = match args.len() {
        2 => Filter::None,
        5 if arg(2).eq_ignore_ascii_case(b"filterby") => {
            let kind = arg(3);
            if kind.eq_ignore_ascii_case(b"module") {
                Filter::Module
            } else if kind.eq_ignore_ascii_case(b"aclcat") {
                let cat = bits(u64::MAX >> 1)
                    .find(|&b| {
                        let name = acl::name(b);
                        !name.is_empty() && name.as_bytes().eq_ignore_ascii_case(arg(4))
                    })
                    .unwrap_or(0);
                Filter::AclCat(cat)
            } else if kind.eq_ignore_ascii_case(b"pattern") {
                Filter::Pattern(arg(4))
            } else {
                return Outcome::Reply(bytes::Bytes::from_static(super::ERR_SYNTAX));
            }
        }
        _ => return Outcome::Reply(bytes::Bytes::from_static(super::ERR_SYNTAX)),
    };
    let keep = |c: &Command| match filter {
        Filter::None => true,
        // mithril loads no modules.
        Filter::Module => false,
        Filter::AclCat(cat) => cat != 0 && c.acl & cat != 0,
        Filter::Pattern(p) => glob_match(p, c.name.as_bytes(), true),
    };
    let mut names: Vec<&str> = Vec::new();
    for c in command::all() {
        if keep(c) {
            names.push(c.name);
        }
        names.extend(
            c.subcommands
                .iter()
                .filter(|sub| keep(sub))
                .map(|sub| sub.name),
        );
    }
    built(
        |e| {
            e.array(names.len());
            for n in &names {
                e.bulk(n.as_bytes());
            }
        },
        s,
    )
}
