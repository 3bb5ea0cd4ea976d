#!/usr/bin/env python3
"""Regenerate mithril's static command table (src/command/table.rs).

The facts come from a live server: COMMAND INFO (arity, flags, ACL categories,
tips, key specs, legacy key triple, subcommands) and COMMAND DOCS (summary,
since, group, complexity, history, arguments). tools/command_overlay.json is
merged over them: the commands a newer server generation added, the changes it
made to existing ones, the flags COMMAND INFO never shows, and mithril's route
for every command. The result is written as Rust in its own layout (the module
is declared `#[rustfmt::skip]`).

    redis-server --port 7311 --save '' --appendonly no &
    tools/gen_command_table.py --port 7311            # rewrite the table
    tools/gen_command_table.py --port 7311 --check    # exit 1 if it is stale

Only the Python 3 standard library is used; the server is spoken to in RESP3
over a plain socket.
"""

import argparse
import json
import os
import re
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Orders and names as COMMAND INFO / ACL CAT print them; the Rust side
# (src/command/mod.rs) declares its constants in the same order.
FLAGS = [
    "write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript",
    "blocking", "loading", "stale", "skip_monitor", "skip_slowlog", "asking",
    "fast", "no_auth", "may_replicate", "sentinel", "only_sentinel",
    "no_mandatory_keys", "protected", "module_getkeys", "module_no_cluster",
    "no_async_loading", "no_multi", "movablekeys", "allow_busy",
    "module_getchannels", "touches_arbitrary_keys",
]
FLAG_CONST = {f: f.upper() for f in FLAGS}
FLAG_CONST["movablekeys"] = "MOVABLE_KEYS"

ACL = [
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
    "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
    "blocking", "dangerous", "connection", "transaction", "scripting",
]

KEY_FLAGS = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete",
             "not_key", "incomplete", "variable_flags"]

DOC_FLAGS = ["deprecated", "syscmd"]
ARG_FLAGS = ["optional", "multiple", "multiple_token"]
ARG_KINDS = {
    "string": "String", "integer": "Integer", "double": "Double", "key": "Key",
    "pattern": "Pattern", "unix-time": "UnixTime", "pure-token": "PureToken",
    "oneof": "Oneof", "block": "Block",
}

ROUTES = {
    "Slot": "Route::Slot",
    "SlotPairs": "Route::SlotPairs",
    "AnyMaster": "Route::AnyMaster",
    "Blocking": "Route::Blocking",
    "Pubsub": "Route::Pubsub",
    "SlotArg": "Route::SlotArg",
    "Unsupported": "Route::Unsupported",
    "Fanout(Mget)": "Route::Fanout(Fanout::Mget)",
    "Fanout(Mset)": "Route::Fanout(Fanout::Mset)",
    "Fanout(SumIntegers)": "Route::Fanout(Fanout::SumIntegers)",
    "Fanout(Pfcount)": "Route::Fanout(Fanout::Pfcount)",
    "ClusterWide(Scan)": "Route::ClusterWide(Wide::Scan)",
    "ClusterWide(Dbsize)": "Route::ClusterWide(Wide::Dbsize)",
    "ClusterWide(Flushall)": "Route::ClusterWide(Wide::Flushall)",
    "ClusterWide(Randomkey)": "Route::ClusterWide(Wide::Randomkey)",
    "ClusterWide(Keys)": "Route::ClusterWide(Wide::Keys)",
    "ClusterWide(ScriptLoad)": "Route::ClusterWide(Wide::ScriptLoad)",
    "ClusterWide(ScriptExists)": "Route::ClusterWide(Wide::ScriptExists)",
    "ClusterWide(ScriptFlush)": "Route::ClusterWide(Wide::ScriptFlush)",
    "ClusterWide(ScriptKill)": "Route::ClusterWide(Wide::ScriptKill)",
    "ClusterWide(FunctionLoad)": "Route::ClusterWide(Wide::FunctionLoad)",
    "ClusterWide(FunctionDelete)": "Route::ClusterWide(Wide::FunctionDelete)",
    "ClusterWide(FunctionFlush)": "Route::ClusterWide(Wide::FunctionFlush)",
    "ClusterWide(FunctionRestore)": "Route::ClusterWide(Wide::FunctionRestore)",
    "ClusterWide(FunctionKill)": "Route::ClusterWide(Wide::FunctionKill)",
    "ClusterWide(Wait)": "Route::ClusterWide(Wide::Wait)",
    "ClusterWide(Debug)": "Route::ClusterWide(Wide::Debug)",
    "ClusterWide(EveryOk)": "Route::ClusterWide(Wide::EveryOk)",
    "ClusterWide(EverySum)": "Route::ClusterWide(Wide::EverySum)",
    "ClusterWide(ShardNumsub)": "Route::ClusterWide(Wide::ShardNumsub)",
    "ClusterWide(EveryStatus)": "Route::ClusterWide(Wide::EveryStatus)",
    "ClusterWide(EveryMin)": "Route::ClusterWide(Wide::EveryMin)",
    "ClusterWide(Role)": "Route::ClusterWide(Wide::Role)",
    "Eval": "Route::Eval",
}


class GenError(Exception):
    pass


def local_variant(name):
    """The LocalCmd variant of a local command: `client|list` is ClientList."""
    return "".join(w[:1].upper() + w[1:] for w in re.split(r"[|\-_]", name) if w)


def route_rust(route):
    """The Rust expression of a route: `Local(Ping)` names its local handler."""
    m = re.fullmatch(r"Local\(([A-Z][A-Za-z]*)\)", route)
    if m:
        return "Route::Local(L::%s)" % m.group(1)
    return ROUTES[route]


def valid_route(route):
    return route == "Local" or route in ROUTES or re.fullmatch(r"Local\(([A-Z][A-Za-z]*)\)", route)


def note(msg):
    print("gen_command_table: note: %s" % msg, file=sys.stderr)


# ---------------------------------------------------------------- RESP3 client

class Resp:
    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.rd = self.sock.makefile("rb")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self.read()

    def line(self):
        ln = self.rd.readline()
        if not ln.endswith(b"\r\n"):
            raise GenError("connection closed mid-reply")
        return ln[:-2]

    def read(self):
        ln = self.line()
        t, rest = ln[:1], ln[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise GenError("server error: " + rest.decode(errors="replace"))
        if t in (b":", b"("):
            return int(rest)
        if t == b",":
            return float(rest)
        if t == b"#":
            return rest == b"t"
        if t == b"_":
            return None
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            data = self.rd.read(n + 2)[:-2].decode()
            return data[4:] if t == b"=" else data
        if t in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if t == b"%":
            n = int(rest)
            return {self.read(): self.read() for _ in range(n)}
        if t == b"|":
            n = int(rest)
            for _ in range(2 * n):
                self.read()
            return self.read()
        raise GenError("unexpected RESP type %r" % t)


# ---------------------------------------------------------------- model

def norm_key_spec(ks):
    bs, fk = ks["begin_search"], ks["find_keys"]
    if bs["type"] == "index":
        begin = ("index", bs["spec"]["index"])
    elif bs["type"] == "keyword":
        begin = ("keyword", bs["spec"]["keyword"], bs["spec"]["startfrom"])
    elif bs["type"] == "unknown":
        begin = ("unknown",)
    else:
        raise GenError("unknown begin_search %r" % bs)
    if fk["type"] == "range":
        find = ("range", fk["spec"]["lastkey"], fk["spec"]["keystep"], fk["spec"]["limit"])
    elif fk["type"] == "keynum":
        find = ("keynum", fk["spec"]["keynumidx"], fk["spec"]["firstkey"], fk["spec"]["keystep"])
    elif fk["type"] == "unknown":
        find = ("unknown",)
    else:
        raise GenError("unknown find_keys %r" % fk)
    return {"flags": list(ks["flags"]), "begin": begin, "find": find, "notes": ks.get("notes")}


def norm_arg(a):
    out = {"name": a["name"], "type": a["type"], "flags": list(a.get("flags") or [])}
    for k in ("key_spec_index", "token", "since", "deprecated_since", "display_text"):
        if a.get(k) is not None:
            out[k] = a[k]
    if a.get("arguments"):
        out["arguments"] = [norm_arg(x) for x in a["arguments"]]
    return out


def norm_doc(d):
    d = d or {}
    return {
        "summary": d.get("summary", ""),
        "since": d.get("since", ""),
        "group": d.get("group", ""),
        "complexity": d.get("complexity", ""),
        "doc_flags": list(d.get("doc_flags") or []),
        "deprecated_since": d.get("deprecated_since"),
        "replaced_by": d.get("replaced_by"),
        "history": [list(h) for h in (d.get("history") or [])],
        "arguments": [norm_arg(a) for a in (d.get("arguments") or [])],
    }


def norm_command(info, docs):
    name = info[0].lower()
    doc = docs.get(name) or {}
    subdocs = doc.get("subcommands") or {}
    return {
        "name": name,
        "arity": info[1],
        "flags": set(info[2]),
        "first": info[3],
        "last": info[4],
        "step": info[5],
        "acl": {c.lstrip("@") for c in info[6]},
        "tips": list(info[7]),
        "key_specs": [norm_key_spec(k) for k in info[8]],
        "subs": {s[0].lower(): norm_command(s, subdocs) for s in info[9]},
        "doc": norm_doc(doc),
    }


def implicit_acl(flags, acl):
    """The categories a server derives from the flags (setImplicitACLCategories)."""
    acl = set(acl)
    if "write" in flags:
        acl.add("write")
    if "readonly" in flags and "scripting" not in acl:
        acl.add("read")
    if "admin" in flags:
        acl |= {"admin", "dangerous"}
    if "pubsub" in flags:
        acl.add("pubsub")
    if "fast" in flags:
        acl.add("fast")
    if "blocking" in flags:
        acl.add("blocking")
    if "fast" not in acl:
        acl.add("slow")
    return acl


def find(model, name):
    if "|" in name:
        parent, _ = name.split("|", 1)
        entry = model.get(parent, {}).get("subs", {}).get(name)
    else:
        entry = model.get(name)
    if entry is None:
        raise GenError("overlay names %r, which the table does not have" % name)
    return entry


def apply_overlay(model, overlay):
    for name, spec in overlay.get("add", {}).items():
        if spec.get("key_specs"):
            raise GenError("%s: added commands with keys need a legacy triple; extend the generator" % name)
        flags = set(spec["flags"])
        unknown = flags - set(FLAGS)
        if unknown:
            raise GenError("%s: unknown flags %s" % (name, sorted(unknown)))
        entry = {
            "name": name,
            "arity": spec["arity"],
            "flags": flags,
            "first": 0, "last": 0, "step": 0,
            "acl": implicit_acl(flags, spec.get("acl", [])),
            "tips": list(spec.get("tips", [])),
            "key_specs": [],
            "subs": {},
            "doc": norm_doc(spec.get("doc")),
        }
        # A newer server reports the command itself: its facts win.
        if "|" in name:
            parent = find(model, name.split("|", 1)[0])
            if name in parent["subs"]:
                note("%s: reported by the server, overlay entry not used" % name)
                continue
            parent["subs"][name] = entry
        else:
            if name in model:
                note("%s: reported by the server, overlay entry not used" % name)
                continue
            model[name] = entry

    for name, ops in overlay.get("patch", {}).items():
        e = find(model, name)
        for op, val in ops.items():
            if op == "arity":
                e["arity"] = val
            elif op == "flags_add":
                e["flags"] |= set(val)
            elif op == "flags_remove":
                e["flags"] -= set(val)
            elif op == "tips":
                e["tips"] = list(val)
            elif op == "key_spec_flags":
                for idx, fl in val.items():
                    e["key_specs"][int(idx)]["flags"] = list(fl)
            elif op == "doc":
                for k, v in val.items():
                    if k not in e["doc"]:
                        raise GenError("%s: unknown doc field %r" % (name, k))
                    if v is None and k not in ("deprecated_since", "replaced_by"):
                        raise GenError("%s: doc field %r cannot be null" % (name, k))
                    e["doc"][k] = v
            elif op == "history_append":
                # Appending is idempotent, so a newer server that already
                # documents the change does not get it twice.
                for h in val:
                    if list(h) not in e["doc"]["history"]:
                        e["doc"]["history"].append(list(h))
            elif op == "arguments":
                e["doc"]["arguments"] = [norm_arg(a) for a in val]
            elif op == "arguments_append":
                have = {(a["name"], a.get("token")) for a in e["doc"]["arguments"]}
                for a in val:
                    if (a["name"], a.get("token")) not in have:
                        e["doc"]["arguments"].append(norm_arg(a))
            else:
                raise GenError("%s: unknown patch op %r" % (name, op))
        e["acl"] = implicit_acl(e["flags"], e["acl"])

    for flag, names in overlay.get("hidden_flags", {}).items():
        if flag not in FLAGS:
            raise GenError("hidden_flags: unknown flag %r" % flag)
        for name in names:
            find(model, name)["flags"].add(flag)


def has_keys(e):
    return any("not_key" not in ks["flags"] for ks in e["key_specs"])


def assign_routes(model, routes):
    routes = {k: v for k, v in routes.items() if not k.startswith("_")}
    for name in routes:
        find(model, name)
        if not valid_route(routes[name]):
            raise GenError("%s: unknown route %r" % (name, routes[name]))
    missing = []
    for name, e in model.items():
        if name in routes:
            e["route"] = routes[name]
            # A bare "Local" names the handler after the command.
            if e["route"] == "Local":
                e["route"] = "Local(%s)" % local_variant(name)
        elif has_keys(e):
            e["route"] = "Slot"
        else:
            missing.append(name)
            continue
        for sname, s in e["subs"].items():
            if sname in routes:
                s["route"] = routes[sname]
                if s["route"] == "Local":
                    s["route"] = "Local(%s)" % local_variant(sname)
            elif e["route"] == "Unsupported":
                s["route"] = "Unsupported"
            elif has_keys(s):
                s["route"] = "Slot"
            else:
                s["route"] = e["route"]
    if missing:
        raise GenError("no route for keyless command(s): %s (add them to 'routes')" % " ".join(sorted(missing)))


def validate(model):
    for name, e in model.items():
        for entry in [e] + list(e["subs"].values()):
            n = entry["name"]
            if n != n.lower():
                raise GenError("%s: name not lower case" % n)
            if entry is not e and not n.startswith(name + "|"):
                raise GenError("%s: subcommand not named %s|..." % (n, name))
            bad = entry["flags"] - set(FLAGS)
            if bad:
                raise GenError("%s: unknown flags %s" % (n, sorted(bad)))
            bad = entry["acl"] - set(ACL)
            if bad:
                raise GenError("%s: unknown ACL categories %s" % (n, sorted(bad)))
            for ks in entry["key_specs"]:
                bad = set(ks["flags"]) - set(KEY_FLAGS)
                if bad:
                    raise GenError("%s: unknown key spec flags %s" % (n, sorted(bad)))
                if ks["find"][0] == "range" and ks["find"][2] < 1 or ks["find"][0] == "keynum" and ks["find"][3] < 1:
                    raise GenError("%s: key step below 1" % n)
            bad = set(entry["doc"]["doc_flags"]) - set(DOC_FLAGS)
            if bad:
                raise GenError("%s: unknown doc flags %s" % (n, sorted(bad)))


# ---------------------------------------------------------------- Rust output

def rstr(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\u{%x}" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def ropt(s):
    return "None" if s is None else "Some(%s)" % rstr(s)


def bits(names, order, prefix, const=None):
    names = set(names)
    parts = [prefix + (const[n] if const else n.upper()) for n in order if n in names]
    return " | ".join(parts) if parts else "0"


def emit_key_spec(ks):
    b = ks["begin"]
    if b[0] == "index":
        begin = "BeginSearch::Index(%d)" % b[1]
    elif b[0] == "keyword":
        begin = "BeginSearch::Keyword { keyword: %s, start_from: %d }" % (rstr(b[1]), b[2])
    else:
        begin = "BeginSearch::Unknown"
    f = ks["find"]
    if f[0] == "range":
        find_ = "FindKeys::Range { last_key: %d, key_step: %d, limit: %d }" % f[1:]
    elif f[0] == "keynum":
        find_ = "FindKeys::Keynum { keynum_idx: %d, first_key: %d, key_step: %d }" % f[1:]
    else:
        find_ = "FindKeys::Unknown"
    return "KeySpec { flags: %s, begin: %s, find: %s }" % (bits(ks["flags"], KEY_FLAGS, "K::"), begin, find_)


def emit_arg(a, ind):
    """One argument per line; nested arguments indented below it."""
    fields = ["name: %s" % rstr(a["name"])]
    if a["type"] not in ARG_KINDS:
        raise GenError("argument %r: unknown type %r" % (a["name"], a["type"]))
    fields.append("kind: ArgKind::%s" % ARG_KINDS[a["type"]])
    if "key_spec_index" in a:
        fields.append("key_spec_index: %d" % a["key_spec_index"])
    for k in ("token", "since", "deprecated_since", "display_text"):
        if k in a:
            fields.append("%s: Some(%s)" % (k, rstr(a[k])))
    if a["flags"]:
        bad = set(a["flags"]) - set(ARG_FLAGS)
        if bad:
            raise GenError("argument %r: unknown flags %s" % (a["name"], sorted(bad)))
        fields.append("flags: %s" % bits(a["flags"], ARG_FLAGS, "AF::"))
    pad = " " * ind
    if not a.get("arguments"):
        return [pad + "Arg { %s, ..Arg::EMPTY }," % ", ".join(fields)]
    lines = [pad + "Arg {", pad + "    %s," % ", ".join(fields), pad + "    arguments: &["]
    for x in a["arguments"]:
        lines += emit_arg(x, ind + 8)
    lines += [pad + "    ],", pad + "    ..Arg::EMPTY", pad + "},"]
    return lines


def emit_doc(e, ind):
    d = e["doc"]
    pad = " " * ind
    lines = [pad + "doc: Doc {"]
    f = lambda s: lines.append(pad + "    " + s)
    f("summary: %s," % rstr(d["summary"]))
    f("since: %s," % rstr(d["since"]))
    f("group: %s," % rstr(d["group"]))
    f("complexity: %s," % rstr(d["complexity"]))
    if d["doc_flags"]:
        f("doc_flags: %s," % bits(d["doc_flags"], DOC_FLAGS, "DF::"))
    if d["deprecated_since"] is not None:
        f("deprecated_since: %s," % ropt(d["deprecated_since"]))
    if d["replaced_by"] is not None:
        f("replaced_by: %s," % ropt(d["replaced_by"]))
    if d["history"]:
        f("history: &[")
        for v, t in d["history"]:
            f("    (%s, %s)," % (rstr(v), rstr(t)))
        f("],")
    if e["tips"]:
        f("tips: &[%s]," % ", ".join(rstr(t) for t in e["tips"]))
    if any(ks["notes"] for ks in e["key_specs"]):
        f("key_spec_notes: &[")
        for ks in e["key_specs"]:
            f("    %s," % ropt(ks["notes"]))
        f("],")
    if d["arguments"]:
        f("arguments: &[")
        for a in d["arguments"]:
            lines.extend(emit_arg(a, ind + 8))
        f("],")
    f("..Doc::EMPTY")
    lines.append(pad + "},")
    return lines


def emit_command(e, ind):
    pad = " " * ind
    lines = [pad + "Command {"]
    f = lambda s: lines.append(pad + "    " + s)
    f("name: %s," % rstr(e["name"]))
    f("arity: %d," % e["arity"])
    f("flags: %s," % bits(e["flags"], FLAGS, "F::", FLAG_CONST))
    f("acl: %s," % bits(e["acl"], ACL, "A::"))
    if e["key_specs"]:
        f("key_specs: &[")
        for k in e["key_specs"]:
            f("    %s," % emit_key_spec(k))
        f("],")
    else:
        f("key_specs: &[],")
    f("legacy_keys: (%d, %d, %d)," % (e["first"], e["last"], e["step"]))
    f("route: %s," % route_rust(e["route"]))
    if e["subs"]:
        f("subcommands: &[")
        for k in sorted(e["subs"]):
            lines.extend(emit_command(e["subs"][k], ind + 8))
        f("],")
    else:
        f("subcommands: &[],")
    lines.extend(emit_doc(e, ind + 4))
    lines.append(pad + "},")
    return lines


def fnv1a(name):
    h = 0x811C9DC5
    for b in name.lower().encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def emit(model, source):
    names = sorted(model)
    size = 1
    while size < 4 * len(names):
        size *= 2
    index = [0xFFFF] * size
    longest_probe = 0
    for i, n in enumerate(names):
        slot = fnv1a(n) & (size - 1)
        probe = 0
        while index[slot] != 0xFFFF:
            slot = (slot + 1) & (size - 1)
            probe += 1
        index[slot] = i
        longest_probe = max(longest_probe, probe)
    max_len = max(len(n) for n in names)

    out = []
    out.append("//! GENERATED by tools/gen_command_table.py from %s plus" % source)
    out.append("//! tools/command_overlay.json. Do not edit: change the overlay and regenerate.")
    out.append("//! The layout is the generator's; `mod table` is excluded from rustfmt.")
    out.append("//!")
    out.append("//! `COMMANDS` holds the top-level commands sorted by name; `INDEX` is an")
    out.append("//! open-addressing table (FNV-1a of the lower-case name, linear probing,")
    out.append("//! at most a quarter full; longest probe run at generation: %d)." % longest_probe)
    out.append("")
    out.append("use super::acl as A;")
    out.append("use super::arg_flags as AF;")
    out.append("use super::doc_flags as DF;")
    out.append("use super::flags as F;")
    out.append("use super::key_flags as K;")
    out.append("use super::{Arg, ArgKind, BeginSearch, Command, Doc, Fanout, FindKeys, KeySpec, Route, Wide};")
    out.append("use LocalCmd as L;")
    out.append("")
    locals_ = set()
    def collect(e):
        m = re.fullmatch(r"Local\(([A-Za-z]+)\)", e["route"])
        if m:
            locals_.add(m.group(1))
        for sub in e["subs"].values():
            collect(sub)
    for n in names:
        collect(model[n])
    out.append("/// The commands mithril answers itself, one variant per handler (a")
    out.append("/// subcommand shares its container's unless the overlay names its own).")
    out.append("/// The layers above the table answer them (their match over this enum is")
    out.append("/// exhaustive) or, for the ones that need the whole worker, route them")
    out.append("/// there; the table only names them.")
    out.append("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]")
    out.append("pub enum LocalCmd {")
    for v in sorted(locals_):
        out.append("    %s," % v)
    out.append("}")
    out.append("")
    out.append("/// Longest top-level command name, in bytes.")
    out.append("pub(super) const MAX_NAME_LEN: usize = %d;" % max_len)
    out.append("")
    out.append("/// Marks a free `INDEX` slot.")
    out.append("pub(super) const EMPTY_SLOT: u16 = u16::MAX;")
    out.append("const EMPTY: u16 = EMPTY_SLOT;")
    out.append("")
    out.append("pub(super) static INDEX: [u16; %d] = [" % size)
    for row in range(0, size, 16):
        out.append("    " + " ".join("%5s," % ("EMPTY" if x == 0xFFFF else x) for x in index[row:row + 16]))
    out.append("];")
    out.append("")
    out.append("pub(super) static COMMANDS: [Command; %d] = [" % len(names))
    for n in names:
        out.extend(emit_command(model[n], 4))
    out.append("];")
    out.append("")
    text = "\n".join(out)
    # Fanout / Wide are only named when some route uses them.
    if "Fanout::" not in text:
        text = text.replace("Fanout, ", "")
    if "Wide::" not in text:
        text = text.replace(", Wide}", "}")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--overlay", default=os.path.join(HERE, "command_overlay.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "src", "command", "table.rs"))
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    ap.add_argument("--timeout", type=float, default=10.0)
    opts = ap.parse_args()

    try:
        conn = Resp(opts.host, opts.port, opts.timeout)
        hello = conn.call("HELLO", "3")
        source = "%s %s" % (hello.get("server", "server"), hello.get("version", "?"))
        infos = conn.call("COMMAND", "INFO")
        docs = {k.lower(): v for k, v in conn.call("COMMAND", "DOCS").items()}
        model = {}
        for info in infos:
            e = norm_command(info, docs)
            model[e["name"]] = e
        with open(opts.overlay) as f:
            overlay = json.load(f)
        apply_overlay(model, overlay)
        assign_routes(model, overlay.get("routes", {}))
        validate(model)
        text = emit(model, source)
    except (GenError, OSError, KeyError, ValueError) as err:
        print("gen_command_table: %s" % err, file=sys.stderr)
        return 2

    if opts.check:
        try:
            with open(opts.out) as f:
                current = f.read()
        except OSError:
            current = None
        if current != text:
            print("gen_command_table: %s is stale" % opts.out, file=sys.stderr)
            return 1
        print("gen_command_table: %s is up to date (%d commands)" % (opts.out, len(model)))
        return 0
    with open(opts.out, "w") as f:
        f.write(text)
    subs = sum(len(e["subs"]) for e in model.values())
    print("gen_command_table: wrote %s: %d commands, %d subcommands, from %s" % (opts.out, len(model), subs, source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
