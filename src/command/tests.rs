//! Unit tests of the command table. Expected key positions and error texts
//! were taken from a live Redis 7.0.15 (`COMMAND GETKEYS`, raw replies);
//! tests/command_table.rs re-checks them against a running server.

use super::testutil::Call;
use super::*;

fn cmd(name: &str) -> &'static Command {
    match lookup_full(name.as_bytes()) {
        Some(c) => c,
        None => panic!("{name} missing from the table"),
    }
}

/// Key positions of a space-separated call, its command found from argv[0].
fn key_positions(words: &str) -> Vec<usize> {
    let call = Call::of(words);
    let args = call.args();
    let c = lookup(args.get(0).unwrap_or(&[])).expect("command exists");
    keys(c, &args).collect()
}

#[test]
fn lookup_ignores_case() {
    for name in [&b"get"[..], b"GET", b"Get", b"gEt"] {
        assert_eq!(lookup(name).map(|c| c.name), Some("get"));
    }
    for name in [&b"set"[..], b"SET", b"sEt"] {
        assert_eq!(lookup(name).map(|c| c.name), Some("set"));
    }
    // Near misses of the three-letter shortcut are no command.
    for name in [&b"g\x05t"[..], b"\x07et", b"se\x14", b"ge\x00", b"gex"] {
        assert!(lookup(name).is_none(), "{name:?}");
    }
    assert_eq!(
        lookup(b"GEORADIUSBYMEMBER_RO").map(|c| c.name),
        Some("georadiusbymember_ro")
    );
    assert_eq!(
        lookup(b"Restore-Asking").map(|c| c.name),
        Some("restore-asking")
    );
}

#[test]
fn lookup_rejects_unknown_names() {
    for name in [
        &b""[..],
        b"nosuchcommand",
        b"ge",
        b"gett",
        b"get\0",
        b"client|setname",
        b"g\xc3\xa9t",
        b"georadiusbymember_rox",
        &[b'a'; 300],
    ] {
        assert!(
            lookup(name).is_none(),
            "{:?}",
            String::from_utf8_lossy(name)
        );
    }
}

#[test]
fn every_entry_is_found_by_its_name() {
    let cmds = all();
    assert!(cmds.len() >= 240, "only {} commands", cmds.len());
    for pair in cmds.windows(2) {
        assert!(
            pair[0].name < pair[1].name,
            "{} / {}",
            pair[0].name,
            pair[1].name
        );
    }
    for c in cmds {
        assert_eq!(c.name, c.name.to_ascii_lowercase());
        assert!(std::ptr::eq(lookup(c.name.as_bytes()).expect("found"), c));
        let upper = c.name.to_ascii_uppercase();
        assert!(std::ptr::eq(lookup(upper.as_bytes()).expect("found"), c));
        for pair in c.subcommands.windows(2) {
            assert!(pair[0].name < pair[1].name);
        }
        for s in c.subcommands {
            let (parent, sub) = s.name.split_once('|').expect("container|sub name");
            assert_eq!(parent, c.name);
            assert!(s.subcommands.is_empty());
            assert!(std::ptr::eq(lookup_sub(c, sub.as_bytes()).expect("sub"), s));
            let upper = sub.to_ascii_uppercase();
            assert!(std::ptr::eq(
                lookup_sub(c, upper.as_bytes()).expect("sub"),
                s
            ));
            assert!(std::ptr::eq(
                lookup_full(s.name.as_bytes()).expect("full"),
                s
            ));
        }
    }
}

#[test]
fn lookup_sub_misses() {
    let client = cmd("client");
    assert!(lookup_sub(client, b"nosuch").is_none());
    assert!(lookup_sub(client, b"").is_none());
    assert!(lookup_sub(client, b"setnam").is_none());
    assert!(lookup_sub(client, b"setnamex").is_none());
    assert!(lookup_sub(cmd("get"), b"x").is_none());
    assert!(lookup_full(b"client|").is_none());
    assert!(lookup_full(b"|setname").is_none());
    assert!(lookup_full(b"get|x").is_none());
}

#[test]
fn facts_of_representative_commands() {
    let get = cmd("get");
    assert_eq!(get.arity, 2);
    assert_eq!(get.flags, flags::READONLY | flags::FAST);
    assert_eq!(get.acl, acl::READ | acl::STRING | acl::FAST);
    assert_eq!(get.legacy_keys, (1, 1, 1));
    assert_eq!(
        get.key_specs,
        &[KeySpec {
            flags: key_flags::RO | key_flags::ACCESS,
            begin: BeginSearch::Index(1),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0
            },
        }]
    );
    assert_eq!(get.doc.group, "string");
    assert_eq!(get.doc.since, "1.0.0");

    let setname = cmd("client|setname");
    assert_eq!(setname.arity, 3);
    assert_eq!(
        setname.doc.tips,
        &["request_policy:all_nodes", "response_policy:all_succeeded"]
    );

    let xread = cmd("xread");
    assert_eq!(
        xread.key_specs[0].begin,
        BeginSearch::Keyword {
            keyword: "STREAMS",
            start_from: 1
        }
    );
    assert_eq!(
        xread.key_specs[0].find,
        FindKeys::Range {
            last_key: -1,
            key_step: 1,
            limit: 2
        }
    );
    assert_ne!(xread.flags & flags::MOVABLE_KEYS, 0);

    let eval = cmd("eval");
    assert_ne!(eval.flags & flags::MAY_REPLICATE, 0, "hidden flag merged");
    assert!(eval.doc.key_spec_notes[0]
        .expect("note")
        .contains("assume the worst"));
}

#[test]
fn newer_generation_is_merged() {
    // Added by Redis 7.2 / Valkey 8.0.
    for (name, arity) in [
        ("client|no-touch", 3),
        ("client|setinfo", 4),
        ("client|capa", -3),
        ("cluster|myshardid", 2),
        ("cluster|slot-stats", -4),
        ("script|show", 3),
        ("waitaof", 4),
    ] {
        let c = cmd(name);
        assert_eq!(c.arity, arity, "{name}");
        assert!(c.key_specs.is_empty(), "{name}");
        assert_eq!(c.legacy_keys, (0, 0, 0), "{name}");
        assert!(
            !c.doc.summary.is_empty() && !c.doc.since.is_empty(),
            "{name}"
        );
    }
    assert_eq!(cmd("waitaof").flags, flags::BLOCKING);
    assert_eq!(
        cmd("waitaof").acl,
        acl::SLOW | acl::BLOCKING | acl::CONNECTION
    );
    assert_eq!(cmd("client|no-touch").acl, acl::SLOW | acl::CONNECTION);
    // Changed by them.
    assert_eq!(cmd("zrank").arity, -3);
    assert_eq!(cmd("zrevrank").arity, -3);
    assert_eq!(cmd("command|getkeys").arity, -3);
    assert_eq!(cmd("blpop").flags & flags::NOSCRIPT, 0);
    assert_ne!(cmd("multi").flags & flags::NO_MULTI, 0);
    assert_ne!(cmd("cluster|slots").flags & flags::LOADING, 0);
    assert_eq!(cmd("cluster|slots").doc.doc_flags, 0);
    assert_eq!(
        cmd("sinterstore").key_specs[0].flags,
        key_flags::OW | key_flags::UPDATE
    );
    assert_eq!(cmd("setnx").doc.doc_flags, doc_flags::DEPRECATED);
    assert_eq!(cmd("setnx").doc.deprecated_since, Some("2.6.12"));
    assert!(cmd("zscan")
        .doc
        .arguments
        .iter()
        .any(|a| a.token == Some("NOSCORES")));
}

#[test]
fn routes_follow_the_spec() {
    use Route::*;
    let expect: &[(&str, Route)] = &[
        ("get", Slot),
        ("set", Slot),
        ("rename", Slot),
        ("msetnx", SlotPairs),
        ("copy", Slot),
        ("dump", Slot),
        ("restore", Slot),
        ("sort", Slot),
        ("pfmerge", Slot),
        ("xread", Slot),
        ("xreadgroup", Slot),
        ("eval", Eval),
        ("eval_ro", Eval),
        ("evalsha", Slot),
        ("evalsha_ro", Slot),
        ("fcall", Slot),
        ("fcall_ro", Slot),
        ("object|encoding", Slot),
        ("object|freq", Slot),
        ("object|idletime", Slot),
        ("object|refcount", Slot),
        ("xinfo|stream", Slot),
        ("xgroup|create", Slot),
        ("mget", Fanout(super::Fanout::Mget)),
        ("mset", Fanout(super::Fanout::Mset)),
        ("del", Fanout(super::Fanout::SumIntegers)),
        ("unlink", Fanout(super::Fanout::SumIntegers)),
        ("exists", Fanout(super::Fanout::SumIntegers)),
        ("touch", Fanout(super::Fanout::SumIntegers)),
        ("pfcount", Fanout(super::Fanout::Pfcount)),
        ("scan", ClusterWide(Wide::Scan)),
        ("dbsize", ClusterWide(Wide::Dbsize)),
        ("flushall", ClusterWide(Wide::Flushall)),
        ("randomkey", ClusterWide(Wide::Randomkey)),
        ("blpop", Blocking),
        ("brpop", Blocking),
        ("brpoplpush", Blocking),
        ("bzpopmin", Blocking),
        ("bzpopmax", Blocking),
        ("subscribe", Pubsub),
        ("psubscribe", Pubsub),
        ("unsubscribe", Pubsub),
        ("punsubscribe", Pubsub),
        ("publish", AnyMaster),
        ("pubsub", AnyMaster),
        ("pubsub|channels", AnyMaster),
        ("pubsub|numsub", AnyMaster),
        ("ping", Local(LocalCmd::Ping)),
        ("echo", Local(LocalCmd::Echo)),
        ("select", Local(LocalCmd::Select)),
        ("time", Local(LocalCmd::Time)),
        ("auth", Local(LocalCmd::Auth)),
        ("hello", Local(LocalCmd::Hello)),
        ("reset", Local(LocalCmd::Reset)),
        ("quit", Local(LocalCmd::Quit)),
        ("info", Local(LocalCmd::Info)),
        ("config|get", Local(LocalCmd::Config)),
        ("config|set", Local(LocalCmd::Config)),
        ("client|setname", Local(LocalCmd::Client)),
        ("client|no-touch", Local(LocalCmd::Client)),
        ("command|docs", Local(LocalCmd::Command)),
        ("acl|whoami", Local(LocalCmd::Acl)),
        ("multi", Local(LocalCmd::Multi)),
        ("exec", Local(LocalCmd::Exec)),
        ("discard", Local(LocalCmd::Discard)),
        ("cluster|slots", Local(LocalCmd::Cluster)),
        ("cluster|myshardid", Local(LocalCmd::Cluster)),
        ("cluster|countkeysinslot", SlotArg),
        ("cluster|getkeysinslot", SlotArg),
        ("readonly", Local(LocalCmd::Readonly)),
        ("readwrite", Local(LocalCmd::Readwrite)),
        ("slowlog|get", Local(LocalCmd::Slowlog)),
        ("lolwut", Local(LocalCmd::Lolwut)),
        ("watch", Local(LocalCmd::Watch)),
        ("unwatch", Local(LocalCmd::Unwatch)),
        ("script|load", ClusterWide(Wide::ScriptLoad)),
        ("script|exists", ClusterWide(Wide::ScriptExists)),
        ("script|flush", ClusterWide(Wide::ScriptFlush)),
        ("script|kill", ClusterWide(Wide::ScriptKill)),
        ("script|show", AnyMaster),
        ("script|help", AnyMaster),
        ("script|debug", Unsupported),
        ("function|load", ClusterWide(Wide::FunctionLoad)),
        ("function|delete", ClusterWide(Wide::FunctionDelete)),
        ("function|flush", ClusterWide(Wide::FunctionFlush)),
        ("function|restore", ClusterWide(Wide::FunctionRestore)),
        ("function|kill", ClusterWide(Wide::FunctionKill)),
        ("function|list", AnyMaster),
        ("function|dump", AnyMaster),
        ("function|stats", AnyMaster),
        ("ssubscribe", Pubsub),
        ("spublish", Slot),
        ("pubsub|shardchannels", ClusterWide(Wide::Keys)),
        ("pubsub|shardnumsub", ClusterWide(Wide::ShardNumsub)),
        ("sunsubscribe", Pubsub),
        ("blmove", Blocking),
        ("blmpop", Blocking),
        ("bzmpop", Blocking),
        ("flushdb", ClusterWide(Wide::Flushall)),
        ("keys", ClusterWide(Wide::Keys)),
        ("wait", ClusterWide(Wide::Wait)),
        ("waitaof", ClusterWide(Wide::Wait)),
        ("debug", ClusterWide(Wide::Debug)),
        ("latency|latest", AnyMaster),
        ("latency|reset", ClusterWide(Wide::EverySum)),
        ("memory|usage", Slot),
        ("memory|stats", AnyMaster),
        ("memory|purge", ClusterWide(Wide::EveryOk)),
        ("shutdown", Unsupported),
        ("failover", Unsupported),
        ("replicaof", Unsupported),
        ("slaveof", Unsupported),
        ("save", ClusterWide(Wide::EveryStatus)),
        ("bgsave", ClusterWide(Wide::EveryStatus)),
        ("bgrewriteaof", ClusterWide(Wide::EveryStatus)),
        ("lastsave", ClusterWide(Wide::EveryMin)),
        ("migrate", Unsupported),
        ("monitor", Local(LocalCmd::Monitor)),
        ("sync", Local(LocalCmd::Sync)),
        ("psync", Local(LocalCmd::Sync)),
        ("replconf", Unsupported),
        ("module|list", Unsupported),
        ("swapdb", Unsupported),
        ("move", Unsupported),
        ("restore-asking", Unsupported),
        ("pfselftest", AnyMaster),
        ("pfdebug", Slot),
    ];
    for &(name, route) in expect {
        assert_eq!(cmd(name).route, route, "{name}");
    }
}

#[test]
fn keyed_commands_not_listed_route_by_slot() {
    for c in all() {
        for e in std::iter::once(c).chain(c.subcommands) {
            let keyed = e
                .key_specs
                .iter()
                .any(|k| k.flags & key_flags::NOT_KEY == 0);
            // WATCH is keyed but routed by the worker itself, onto the
            // session's pinned connection (worker/watch.rs).
            if keyed && e.name != "watch" {
                assert!(
                    matches!(
                        e.route,
                        Route::Slot
                            | Route::SlotPairs
                            | Route::Eval
                            | Route::Fanout(_)
                            | Route::Blocking
                            | Route::ClusterWide(_)
                            | Route::Unsupported
                    ),
                    "{} is keyed but routed {:?}",
                    e.name,
                    e.route
                );
            }
        }
    }
}

#[test]
fn keys_of_representative_calls() {
    let cases: &[(&str, &[usize])] = &[
        ("GET k", &[1]),
        ("get k", &[1]),
        ("MSET a 1 b 2", &[1, 3]),
        ("MSET a 1 b", &[1, 3]),
        ("DEL a b c", &[1, 2, 3]),
        ("RENAME a b", &[1, 2]),
        ("LCS a b", &[1, 2]),
        ("ZRANGESTORE d s 0 -1", &[1, 2]),
        ("ZUNIONSTORE dst 2 a b WEIGHTS 1 2", &[1, 3, 4]),
        ("EVAL s 2 a b x", &[3, 4]),
        ("EVAL s 0", &[]),
        ("EVAL s -1 a", &[]),
        ("EVAL s 3 a b", &[]),
        ("FCALL f 1 k", &[3]),
        ("XREAD COUNT 1 STREAMS a b 0 0", &[4, 5]),
        ("XREAD STREAMS a b 0", &[2]),
        ("XREADGROUP GROUP g c STREAMS s1 s2 > >", &[5, 6]),
        ("SORT k STORE d", &[1, 3]),
        ("SORT k BY w GET g STORE d", &[1, 7]),
        ("SORT k STORE", &[1]),
        ("SORT k LIMIT 0 1 STORE d STORE e", &[1, 8]),
        ("SORT_RO k BY x", &[1]),
        ("SORT k LIMIT 0 STORE d", &[1]),
        ("SORT k GET STORE d", &[1]),
        ("SORT k BY STORE STORE d", &[1, 5]),
        ("GEORADIUS k 0 0 10 km STORE d", &[1, 7]),
        ("GEORADIUSBYMEMBER k m 10 km STOREDIST d", &[1, 6]),
        ("MIGRATE h p k 0 5", &[3]),
        ("LMPOP 2 a b LEFT", &[2, 3]),
        ("BLMPOP 0 2 a b LEFT", &[3, 4]),
        ("SINTERCARD 2 a b LIMIT 1", &[2, 3]),
        ("OBJECT ENCODING k", &[2]),
        ("object encoding k", &[2]),
        ("XINFO STREAM s", &[2]),
        ("MEMORY USAGE k", &[2]),
        ("SET k v GET", &[1]),
        ("BITFIELD k GET u8 0", &[1]),
        ("PUBLISH c m", &[]),
        ("SPUBLISH c m", &[]),
        ("PING", &[]),
    ];
    for &(call, expect) in cases {
        assert_eq!(key_positions(call), expect, "{call}");
    }
    // MIGRATE with the empty-key form: an empty argument cannot go through Call::of.
    let call = Call::new(&[b"MIGRATE", b"h", b"p", b"", b"0", b"5", b"KEYS", b"a", b"b"]);
    assert_eq!(
        keys(cmd("migrate"), &call.args()).collect::<Vec<_>>(),
        [7, 8]
    );
}

#[test]
fn malformed_numkeys_yield_fewer_keys() {
    let cases: &[(&str, &[usize])] = &[
        // The strict parse fails, the lenient one used afterwards reads nothing.
        ("ZUNIONSTORE d abc a", &[]),
        // The strict parse fails, the lenient one reads "2": the destination comes last.
        ("ZUNIONSTORE d 2x a b", &[3, 4, 1]),
        ("ZUNIONSTORE d 99999999999999999999999 a", &[]),
        ("ZUNIONSTORE d -5 a", &[]),
        // The server narrows the count to an int: 2^32 + 1 reads as 1.
        ("EVAL s 4294967297 a b", &[3]),
        // Narrowed to 2 by the spec walk itself, so the destination stays first.
        ("ZUNIONSTORE d 4294967298 a b", &[1, 3, 4]),
        ("EVAL s 9223372036854775807 a", &[]),
        ("EVAL s -9223372036854775808 a", &[]),
        ("LMPOP 5 a b LEFT", &[]),
        ("SINTERCARD 0 a", &[]),
        ("XREAD STREAMS a", &[]),
        ("XREAD STREAMS", &[]),
        ("XREAD COUNT", &[]),
        ("XREADGROUP GROUP g", &[]),
        ("MIGRATE h p k 0 5 KEYS a", &[]),
    ];
    for &(call, expect) in cases {
        assert_eq!(key_positions(call), expect, "{call}");
    }
}

#[test]
fn key_extraction_never_leaves_argv() {
    // Every command, with too few arguments, no arguments, and junk.
    let shapes: &[&[&[u8]]] = &[
        &[],
        &[b"x"],
        &[b"x", b"STREAMS"],
        &[b"x", b"-1", b"a"],
        &[b"x", b"1"],
        &[b"x", b"2", b"3", b"STORE"],
        &[b"x", b"y", b"99", b"a", b"b"],
        &[b"x", b"y", b"z", b"", b"0", b"5", b"KEYS"],
    ];
    for c in all() {
        for e in std::iter::once(c).chain(c.subcommands) {
            for shape in shapes {
                let call = Call::new(shape);
                let args = call.args();
                let found: Vec<usize> = keys(e, &args).take(1000).collect();
                assert!(found.len() < 1000, "{} runs away", e.name);
                assert!(found.iter().all(|&k| k < args.len()), "{}", e.name);
            }
        }
    }
    // Ranges that point outside the buffer read as absent.
    let bad = Args {
        buf: b"GET",
        ranges: &[0..3, 10..20],
    };
    assert_eq!(bad.get(1), None);
    assert_eq!(keys(cmd("get"), &bad).collect::<Vec<_>>(), [1]);
    let reversed = Args {
        buf: b"GETk",
        #[allow(clippy::reversed_empty_ranges)]
        ranges: &[0..3, 4..3],
    };
    assert_eq!(reversed.get(1), None);
}

#[test]
fn keys_accept_a_seeded_random_stream() {
    // A small deterministic generator: no dependency, same run every time.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let words: &[&[u8]] = &[
        b"STREAMS",
        b"STORE",
        b"KEYS",
        b"0",
        b"1",
        b"2",
        b"-1",
        b"k",
        b"",
        b"BLOCK",
        b"GROUP",
        b"LIMIT",
        b"GET",
        b"BY",
        b"AUTH2",
        b"STOREDIST",
        b"99",
        b"\0",
        b"1\0",
    ];
    let cmds: Vec<&'static Command> = all()
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands))
        .collect();
    for _ in 0..20_000 {
        let c = cmds[(next() % cmds.len() as u64) as usize];
        let n = (next() % 9) as usize;
        let mut argv: Vec<&[u8]> = vec![c.name.as_bytes()];
        argv.extend((0..n).map(|_| words[(next() % words.len() as u64) as usize]));
        let call = Call::new(&argv);
        let args = call.args();
        let found: Vec<usize> = keys(c, &args).take(64).collect();
        assert!(
            found.iter().all(|&k| k >= 1 && k < args.len()),
            "{}",
            c.name
        );
        let _ = is_blocking_call(c, &args);
        assert!(!unknown_command_reply(&args).is_empty());
    }
}

#[test]
fn first_key_is_the_first_yielded() {
    let call = Call::of("ZUNIONSTORE dst 2 a b");
    assert_eq!(first_key(cmd("zunionstore"), &call.args()), Some(1));
    let call = Call::of("EVAL s 0");
    assert_eq!(first_key(cmd("eval"), &call.args()), None);
    let call = Call::of("XREAD COUNT 1 STREAMS a b 0 0");
    assert_eq!(first_key(cmd("xread"), &call.args()), Some(4));
}

#[test]
fn blocking_calls() {
    let yes = [
        "BLPOP a 0",
        "BRPOP a b 1",
        "BRPOPLPUSH a b 0",
        "BZPOPMIN z 0",
        "BZPOPMAX z 0",
        "XREAD BLOCK 0 STREAMS a 0",
        "xread count 1 block 100 streams a $",
        "XREADGROUP GROUP g c BLOCK 10 STREAMS a >",
        "XREADGROUP GROUP g c NOACK COUNT 5 BLOCK 10 STREAMS a >",
        "BLMOVE a b LEFT LEFT 0",
        "BLMPOP 0 2 a b LEFT",
        "BZMPOP 0 1 z MIN",
    ];
    let no = [
        "XREAD STREAMS a 0",
        "XREAD COUNT 1 STREAMS a 0",
        "XREAD STREAMS BLOCK 0",
        "XREAD BLOCK",
        "XREAD NOACK BLOCK 0 STREAMS a 0",
        "XREAD GROUP g c BLOCK 0 STREAMS a 0",
        "XREADGROUP GROUP g c STREAMS a >",
        "GET k",
    ];
    for call in yes {
        let c = Call::of(call);
        let args = c.args();
        let cm = lookup(args.get(0).unwrap_or(&[])).expect("known");
        assert!(is_blocking_call(cm, &args), "{call}");
    }
    for call in no {
        let c = Call::of(call);
        let args = c.args();
        let cm = lookup(args.get(0).unwrap_or(&[])).expect("known");
        assert!(!is_blocking_call(cm, &args), "{call}");
    }
}

#[test]
fn arity_checks() {
    let get = cmd("get");
    assert!(!arity_ok(get, 1));
    assert!(arity_ok(get, 2));
    assert!(!arity_ok(get, 3));
    let mset = cmd("mset");
    assert!(!arity_ok(mset, 2));
    assert!(arity_ok(mset, 3));
    assert!(arity_ok(mset, 1001));
    assert!(arity_ok(cmd("ping"), 1));
    assert!(arity_ok(cmd("client|setname"), 3));
    assert!(!arity_ok(cmd("client|setname"), 2));
}

#[test]
fn resolve_mirrors_the_server() {
    let ok = Call::of("client SETNAME x");
    assert_eq!(resolve(&ok.args()).map(|c| c.name), Ok("client|setname"));
    let ok = Call::of("Get k");
    assert_eq!(resolve(&ok.args()).map(|c| c.name), Ok("get"));

    let unknown = Call::of("nosuch a");
    assert_eq!(resolve(&unknown.args()), Err(Rejection::UnknownCommand));
    let empty = Call::new(&[]);
    assert_eq!(resolve(&empty.args()), Err(Rejection::UnknownCommand));

    let bad_sub = Call::of("client foo");
    assert_eq!(
        resolve(&bad_sub.args()),
        Err(Rejection::UnknownSubcommand(cmd("client")))
    );
    assert_eq!(
        Rejection::UnknownSubcommand(cmd("client")).reply(&bad_sub.args()),
        b"-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n"
    );

    let bare = Call::of("CLIENT");
    assert_eq!(
        resolve(&bare.args()),
        Err(Rejection::WrongArity(cmd("client")))
    );
    assert_eq!(
        Rejection::WrongArity(cmd("client")).reply(&bare.args()),
        b"-ERR wrong number of arguments for 'client' command\r\n"
    );
    let short = Call::of("client setname");
    assert_eq!(
        resolve(&short.args()),
        Err(Rejection::WrongArity(cmd("client|setname")))
    );
}

#[test]
fn error_texts_match_the_server() {
    assert_eq!(
        wrong_arity_reply(cmd("get")),
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        wrong_arity_reply(cmd("client|setname")),
        b"-ERR wrong number of arguments for 'client|setname' command\r\n"
    );
    assert_eq!(
        wrong_arity_reply(cmd("exec")),
        &b"-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"[..]
    );
    assert_eq!(
        wrong_arity_reply(cmd("object|encoding")),
        b"-ERR wrong number of arguments for 'object|encoding' command\r\n"
    );

    let reply = |argv: &[&[u8]]| unknown_command_reply(&Call::new(argv).args());
    assert_eq!(
        reply(&[b"foo", b"a", b"b"]),
        b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        reply(&[b"foo"]),
        b"-ERR unknown command 'foo', with args beginning with: \r\n"
    );
    assert_eq!(
        reply(&[b"fo\0o", b"a\0b", b"c"]),
        b"-ERR unknown command 'fo', with args beginning with: 'a' 'c' \r\n"
    );
    assert_eq!(
        reply(&[b"a\r\nb", b"x\ny"]),
        b"-ERR unknown command 'a  b', with args beginning with: 'x y' \r\n"
    );
    let x200 = [b'x'; 200];
    let mut expect = b"-ERR unknown command 'FOO', with args beginning with: '".to_vec();
    expect.extend_from_slice(&x200[..128]);
    expect.extend_from_slice(b"' \r\n");
    assert_eq!(reply(&[b"FOO", &x200, b"y"]), expect);
    let x120 = [b'x'; 120];
    let mut expect = b"-ERR unknown command 'foo', with args beginning with: '".to_vec();
    expect.extend_from_slice(&x120);
    expect.extend_from_slice(b"' 'abcde' \r\n");
    assert_eq!(reply(&[b"foo", &x120, b"abcdefghijkl", b"z"]), expect);
    let long_name = [b'n'; 300];
    let mut expect = b"-ERR unknown command '".to_vec();
    expect.extend_from_slice(&long_name[..128]);
    expect.extend_from_slice(b"', with args beginning with: \r\n");
    assert_eq!(reply(&[&long_name]), expect);

    assert_eq!(
        unknown_subcommand_reply(cmd("client"), b"foo"),
        b"-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n"
    );
    let sub = b"f\r\no".repeat(50);
    let mut expect = b"-ERR unknown subcommand '".to_vec();
    expect.extend(
        sub[..128]
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    expect.extend_from_slice(b"'. Try CLIENT HELP.\r\n");
    assert_eq!(unknown_subcommand_reply(cmd("client"), &sub), expect);
}

#[test]
fn flag_and_category_names() {
    assert_eq!(flags::name(flags::WRITE), "write");
    assert_eq!(flags::name(flags::MOVABLE_KEYS), "movablekeys");
    assert_eq!(
        flags::name(flags::TOUCHES_ARBITRARY_KEYS),
        "touches_arbitrary_keys"
    );
    assert_eq!(flags::name(flags::WRITE | flags::FAST), "");
    assert_eq!(flags::name(0), "");
    assert_eq!(flags::name(1 << 31), "");
    assert_eq!(acl::name(acl::KEYSPACE), "keyspace");
    assert_eq!(acl::name(acl::SORTEDSET), "sortedset");
    assert_eq!(acl::name(acl::SCRIPTING), "scripting");
    assert_eq!(acl::name(1 << 40), "");
    assert_eq!(key_flags::name(key_flags::OW), "OW");
    assert_eq!(key_flags::name(key_flags::VARIABLE_FLAGS), "variable_flags");
    assert_eq!(doc_flags::name(doc_flags::SYSCMD), "syscmd");
    assert_eq!(arg_flags::name(arg_flags::MULTIPLE_TOKEN), "multiple_token");
    assert_eq!(ArgKind::UnixTime.name(), "unix-time");
    // Hidden flags never show in COMMAND INFO.
    assert_eq!(flags::HIDDEN & flags::WRITE, 0);
    assert_ne!(flags::HIDDEN & flags::MAY_REPLICATE, 0);
}

#[test]
fn first_key_fast_path_agrees_with_the_general_algorithm() {
    let words: [&[u8]; 6] = [b"k1", b"2", b"k3", b"STORE", b"0", b"k6"];
    let mut cmds: Vec<&'static Command> = Vec::new();
    for c in all() {
        cmds.push(c);
        cmds.extend(c.subcommands.iter());
    }
    for cmd in cmds {
        for argc in 1..=7 {
            let mut buf = Vec::new();
            let mut ranges = Vec::new();
            let name = cmd.name.split('|').collect::<Vec<_>>();
            for i in 0..argc {
                let w: &[u8] = match i {
                    0 => name[0].as_bytes(),
                    1 if name.len() > 1 => name[1].as_bytes(),
                    _ => words[(i - 1) % words.len()],
                };
                let start = buf.len();
                buf.extend_from_slice(w);
                ranges.push(start..buf.len());
            }
            let args = Args {
                buf: &buf,
                ranges: &ranges,
            };
            assert_eq!(
                first_key(cmd, &args),
                keys(cmd, &args).next(),
                "{} with {argc} args",
                cmd.name
            );
        }
    }
}
