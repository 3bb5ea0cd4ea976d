//! Every outcome of `decide`, without a redis-server: requests built the
//! way the scanner cuts them, a two-shard topology, and session views.

use super::*;
use crate::command::testutil::Call;
use crate::topology::{key_slot, Node, Role as NodeRole, Shard, Topology};

fn topo() -> Topology {
    let node = |i: u8| Node {
        id: format!("{i:040}"),
        addr: format!("127.0.0.1:{}", 7000 + i as u16).parse().unwrap(),
        role: NodeRole::Master,
        healthy: true,
    };
    Topology::new(
        vec![node(0), node(1)],
        vec![
            Shard {
                master: 0,
                replicas: vec![],
                ranges: vec![(0, 8191)],
            },
            Shard {
                master: 1,
                replicas: vec![],
                ranges: vec![(8192, 16383)],
            },
        ],
    )
}

fn plain() -> View<'static> {
    View {
        proto: Proto::Resp2,
        authenticated: true,
        in_txn: false,
        txn_denyoom: false,
        subscribed: 0,
        over_memory: false,
        script_writes: false,
        scripts_busy: false,
        acl: None,
        pin: None,
        txn_unit: None,
        monitor: false,
    }
}

fn decide_with(v: &View<'_>, words: &[&str]) -> Decided {
    decide(v, &Call::words(words).args(), &topo())
}

fn decision(v: &View<'_>, words: &[&str]) -> Decision {
    decide_with(v, words).decision
}

fn queued(d: Decision) -> bool {
    matches!(d, Decision::Queue { .. })
}

/// The refusal's reply as text, or a panic naming what was decided.
fn refused(v: &View<'_>, words: &[&str]) -> (String, Refusal) {
    match decision(v, words) {
        Decision::Refuse(r) => (String::from_utf8_lossy(&r.reply).into_owned(), *r),
        d => panic!("{words:?}: expected a refusal, got {d:?}"),
    }
}

#[test]
fn unknown_commands_and_bad_arity_are_rejections_that_doom_multi() {
    let (text, r) = refused(&plain(), &["nosuch", "x"]);
    assert!(text.starts_with("-ERR unknown command 'nosuch'"), "{text}");
    assert_eq!(r.rejected, Some(None));
    assert!(r.dooms_txn);
    let (text, r) = refused(&plain(), &["get"]);
    assert_eq!(text, "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(r.rejected.flatten().map(|c| c.name), Some("get"));
    assert_eq!(decide_with(&plain(), &["get"]).cmd, None);
}

#[test]
fn unauthenticated_sessions_get_noauth_except_for_no_auth_commands() {
    let v = View {
        authenticated: false,
        ..plain()
    };
    let (text, r) = refused(&v, &["get", "k"]);
    assert_eq!(text.as_bytes(), ERR_NOAUTH);
    assert!(r.rejected.is_some() && !r.dooms_txn);
    assert_eq!(
        decision(&v, &["auth", "pw"]),
        Decision::Local(LocalCmd::Auth)
    );
    assert_eq!(
        decision(&v, &["hello", "3"]),
        Decision::Local(LocalCmd::Hello)
    );
}

#[test]
fn over_memory_refuses_denyoom_commands_and_exec_of_such_a_transaction() {
    let v = View {
        over_memory: true,
        ..plain()
    };
    let (text, r) = refused(&v, &["set", "k", "v"]);
    assert_eq!(text.as_bytes(), ERR_OOM);
    assert!(r.dooms_txn && r.rejected.is_none());
    // Reads and deletions still run.
    assert!(matches!(decision(&v, &["get", "k"]), Decision::Unit { .. }));
    assert_eq!(
        decision(&v, &["del", "k"]),
        Decision::Fanout(Fanout::SumIntegers)
    );
    let txn = View {
        in_txn: true,
        txn_denyoom: true,
        ..v
    };
    assert_eq!(refused(&txn, &["exec"]).0.as_bytes(), ERR_OOM);
    let harmless = View {
        txn_denyoom: false,
        ..txn
    };
    assert_eq!(decision(&harmless, &["exec"]), Decision::Txn(TxnOp::Exec));
}

#[test]
fn over_memory_refuses_scripts_that_may_write() {
    let v = View {
        over_memory: true,
        ..plain()
    };
    // No shebang: the node would refuse the first write inside it; a
    // script that only reads runs, as there.
    let (text, _) = refused(&v, &["eval", "redis.call('set','x',1)", "0"]);
    assert_eq!(text.as_bytes(), ERR_OOM);
    assert!(!matches!(
        decision(&v, &["eval", "return redis.call('GET', KEYS[1])", "1", "x"]),
        Decision::Refuse(_)
    ));
    // EVALSHA as the registry knows it.
    assert!(!matches!(
        decision(&v, &["evalsha", "abc", "0"]),
        Decision::Refuse(_)
    ));
    let knows = View {
        script_writes: true,
        ..v
    };
    assert_eq!(
        refused(&knows, &["evalsha", "abc", "0"]).0.as_bytes(),
        ERR_OOM
    );
    let (text, _) = refused(&v, &["eval", "#!lua\nreturn 1", "0"]);
    assert!(text.starts_with("-OOM allow-oom flag is not set"), "{text}");
    for body in [
        "#!lua flags=no-writes\nreturn 1",
        "#!lua flags=allow-oom\nreturn 1",
        "#!lua flags=no-cluster,allow-oom\nreturn 1",
    ] {
        assert!(
            !matches!(decision(&v, &["eval", body, "0"]), Decision::Refuse(_)),
            "{body}"
        );
    }
    // Read-only forms run, and FCALL unless the registry knows the
    // function writes.
    assert!(!matches!(
        decision(&v, &["eval_ro", "return 1", "0"]),
        Decision::Refuse(_)
    ));
    assert!(!matches!(
        decision(&v, &["fcall", "f", "0"]),
        Decision::Refuse(_)
    ));
    let writes = View {
        script_writes: true,
        ..v
    };
    assert_eq!(refused(&writes, &["fcall", "f", "0"]).0.as_bytes(), ERR_OOM);
    assert!(!matches!(
        decision(&writes, &["fcall_ro", "f", "0"]),
        Decision::Refuse(_)
    ));
    // Under the budget nothing changes.
    assert!(!matches!(
        decision(&plain(), &["eval", "return 1", "0"]),
        Decision::Refuse(_)
    ));
}

#[test]
fn restricted_users_are_checked_against_their_rights() {
    let cfg = crate::config::parse_str("user reader on >r mode read ~app:*\n", "test")
        .unwrap_or_else(|e| panic!("{e}"));
    let acl = Acl::from_config(&cfg);
    let user = acl
        .users()
        .iter()
        .find(|u| u.name == "reader")
        .cloned()
        .unwrap();
    let v = View {
        acl: Some((&acl, &user)),
        ..plain()
    };
    let (text, r) = refused(&v, &["set", "app:1", "v"]);
    assert!(text.starts_with("-NOPERM"), "{text}");
    assert!(r.dooms_txn);
    let (text, _) = refused(&v, &["get", "other"]);
    assert!(text.starts_with("-NOPERM"), "{text}");
    assert!(matches!(
        decision(&v, &["get", "app:1"]),
        Decision::Unit { read: true, .. }
    ));
}

#[test]
fn single_key_commands_go_to_their_slot() {
    // "foo" hashes to 12182, "{user1}" tags to the slot of "user1".
    assert_eq!(
        decision(&plain(), &["get", "foo"]),
        Decision::Unit {
            unit: 12182,
            read: true
        }
    );
    assert_eq!(
        decision(&plain(), &["set", "foo", "1"]),
        Decision::Unit {
            unit: 12182,
            read: false
        }
    );
    assert_eq!(
        decision(&plain(), &["set", "{user1}.a", "1"]),
        Decision::Unit {
            unit: key_slot(b"user1"),
            read: false
        }
    );
    // A keyless call of a keyed command (EVALSHA with numkeys 0).
    assert_eq!(
        decision(&plain(), &["evalsha", SHA, "0"]),
        Decision::AnyMaster
    );
}

/// The SHA-1 of "return 1".
const SHA: &str = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";

#[test]
fn scripts_and_functions_go_where_their_first_key_lives() {
    let foo = Some(12182);
    // EVAL and EVAL_RO carry a body to remember: their own decision, by
    // the first key's slot (none: any master).
    for (words, slot, read) in [
        (&["eval", "return 1", "1", "foo"][..], foo, false),
        (&["eval_ro", "return 1", "1", "foo"], foo, true),
        (&["EVAL", "return 1", "2", "foo", "bar"], foo, false),
        (&["eval", "return 1", "0"], None, false),
        (&["eval_ro", "return 1", "0", "a1"], None, true),
    ] {
        assert_eq!(
            decision(&plain(), words),
            Decision::Eval { unit: slot, read },
            "{words:?}"
        );
    }
    // EVALSHA and FCALL are ordinary keyed commands (the hot path); the
    // _RO variants are reads, for the replicas under read splitting. Keys
    // of several slots go to the first one's, whose node answers CROSSSLOT.
    for (words, want) in [
        (
            &["evalsha", SHA, "1", "foo"][..],
            Decision::Unit {
                unit: 12182,
                read: false,
            },
        ),
        (
            &["evalsha_ro", SHA, "1", "foo"],
            Decision::Unit {
                unit: 12182,
                read: true,
            },
        ),
        (
            &["evalsha", SHA, "2", "foo", "bar"],
            Decision::Unit {
                unit: 12182,
                read: false,
            },
        ),
        (&["evalsha_ro", SHA, "0"], Decision::AnyMaster),
        (
            &["fcall", "f", "1", "foo"],
            Decision::Unit {
                unit: 12182,
                read: false,
            },
        ),
        (
            &["fcall_ro", "f", "1", "foo", "x"],
            Decision::Unit {
                unit: 12182,
                read: true,
            },
        ),
        (&["fcall", "f", "0", "x"], Decision::AnyMaster),
    ] {
        assert_eq!(decision(&plain(), words), want, "{words:?}");
    }
    // Without a topology they wait like any routed request.
    let req = Call::words(&["eval", "return 1", "0"]);
    let d = decide(&plain(), &req.args(), &Topology::empty()).decision;
    assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
}

#[test]
fn script_and_function_management_involves_every_master() {
    for (words, wide) in [
        (&["script", "load", "return 1"][..], Wide::ScriptLoad),
        (&["SCRIPT", "EXISTS", SHA, SHA], Wide::ScriptExists),
        (&["script", "flush"], Wide::ScriptFlush),
        (&["script", "flush", "async"], Wide::ScriptFlush),
        (&["script", "kill"], Wide::ScriptKill),
        (&["function", "load", "#!lua name=l\n"], Wide::FunctionLoad),
        (
            &["function", "load", "replace", "#!lua name=l\n"],
            Wide::FunctionLoad,
        ),
        (&["function", "delete", "l"], Wide::FunctionDelete),
        (&["function", "flush", "sync"], Wide::FunctionFlush),
        (
            &["function", "restore", "payload", "flush"],
            Wide::FunctionRestore,
        ),
        (&["function", "kill"], Wide::FunctionKill),
    ] {
        assert_eq!(decision(&plain(), words), Decision::Wide(wide), "{words:?}");
        assert!(wide.is_scripting());
    }
    // What one master can answer: any of them.
    for words in [
        &["function", "list"][..],
        &["function", "list", "withcode", "libraryname", "l"],
        &["function", "dump"],
        &["function", "stats"],
        &["function", "help"],
        &["script", "help"],
    ] {
        assert_eq!(decision(&plain(), words), Decision::AnyMaster, "{words:?}");
    }
    // A debugging session needs one node's connection: not through a proxy.
    let (text, _) = refused(&plain(), &["script", "debug", "yes"]);
    assert!(text.starts_with("-ERR unknown command 'script'"), "{text}");
    for wide in [Wide::Scan, Wide::Dbsize, Wide::Flushall, Wide::Randomkey] {
        assert!(!wide.is_scripting());
    }
}

#[test]
fn inside_multi_script_calls_and_loads_queue_and_management_is_refused() {
    let v = View {
        in_txn: true,
        ..plain()
    };
    for words in [
        &["eval", "return 1", "1", "k"][..],
        &["evalsha", SHA, "1", "k"],
        &["evalsha_ro", SHA, "0"],
        &["fcall", "f", "1", "k"],
        &["fcall_ro", "f", "0"],
        &["function", "list"],
        // Also sent to the other masters at EXEC (worker/txn.rs).
        &["script", "load", "return 1"],
        &["script", "flush"],
    ] {
        assert!(queued(decision(&v, words)), "{words:?}");
    }
    let (text, r) = refused(&v, &["script", "kill"]);
    assert!(text.contains("cannot be used inside MULTI"), "{text}");
    assert!(r.dooms_txn);
    // Redis's own refusal for what it flags no-multi.
    for words in [&["save"][..], &["shutdown"]] {
        let (text, r) = refused(&v, words);
        assert_eq!(text, "-ERR Command not allowed inside a transaction\r\n");
        assert!(r.dooms_txn);
    }
}

#[test]
fn routed_requests_wait_for_a_topology() {
    let empty = Topology::empty();
    let req = Call::words(&["get", "foo"]);
    let d = decide(&plain(), &req.args(), &empty).decision;
    let Decision::Refuse(r) = d else {
        panic!("{d:?}")
    };
    assert_eq!(&r.reply[..], ERR_NO_TOPOLOGY);
    // Local commands do not need one.
    let req = Call::words(&["ping"]);
    assert_eq!(
        decide(&plain(), &req.args(), &empty).decision,
        Decision::Local(LocalCmd::Ping)
    );
}

#[test]
fn resp2_subscribed_sessions_may_only_subscribe_ping_quit_reset() {
    let v = View {
        subscribed: 2,
        ..plain()
    };
    let (text, r) = refused(&v, &["get", "k"]);
    assert!(
        text.starts_with("-ERR Can't execute 'get': only (P|S)SUBSCRIBE"),
        "{text}"
    );
    assert!(!r.dooms_txn);
    assert_eq!(decision(&v, &["subscribe", "c"]), Decision::Subscribe);
    assert_eq!(decision(&v, &["ping"]), Decision::SubscribedPing);
    assert_eq!(decision(&v, &["ping", "hi"]), Decision::SubscribedPing);
    assert_eq!(decision(&v, &["reset"]), Decision::Reset);
    assert_eq!(decision(&v, &["quit"]), Decision::Local(LocalCmd::Quit));
    // RESP3 subscribers run anything, and their PING is a plain one.
    let v3 = View {
        proto: Proto::Resp3,
        ..v
    };
    assert!(matches!(
        decision(&v3, &["get", "k"]),
        Decision::Unit { .. }
    ));
    assert_eq!(decision(&v3, &["ping"]), Decision::Local(LocalCmd::Ping));
}

#[test]
fn inside_multi_commands_queue_or_doom_the_transaction() {
    let v = View {
        in_txn: true,
        ..plain()
    };
    assert!(queued(decision(&v, &["set", "k", "v"])));
    assert!(queued(decision(&v, &["mget", "{t}a", "{t}b"])));
    assert!(queued(decision(&v, &["blpop", "q", "0"])));
    assert!(queued(decision(&v, &["ping"])));
    assert!(queued(decision(&v, &["echo", "x"])));
    let (text, r) = refused(&v, &["subscribe", "c"]);
    assert!(text.contains("cannot be used inside MULTI"), "{text}");
    assert!(r.dooms_txn);
    let (_, r) = refused(&v, &["client", "list"]);
    assert!(r.dooms_txn);
    assert_eq!(decision(&v, &["exec"]), Decision::Txn(TxnOp::Exec));
    assert_eq!(decision(&v, &["discard"]), Decision::Txn(TxnOp::Discard));
    assert_eq!(decision(&v, &["multi"]), Decision::Txn(TxnOp::Multi));
    assert_eq!(decision(&v, &["reset"]), Decision::Reset);
    assert_eq!(decision(&v, &["quit"]), Decision::Local(LocalCmd::Quit));
}

#[test]
fn blocking_commands_take_a_lease_on_their_slot() {
    assert_eq!(
        decision(&plain(), &["blpop", "q", "0"]),
        Decision::Lease {
            unit: key_slot(b"q")
        }
    );
    // XREAD blocks only with BLOCK before STREAMS.
    assert_eq!(
        decision(&plain(), &["xread", "block", "0", "streams", "s", "$"]),
        Decision::Lease {
            unit: key_slot(b"s")
        }
    );
    assert_eq!(
        decision(&plain(), &["xread", "streams", "s", "0"]),
        Decision::Unit {
            unit: key_slot(b"s"),
            read: true
        }
    );
}

#[test]
fn keyless_commands_publish_and_pubsub() {
    assert_eq!(
        decision(&plain(), &["publish", "c", "m"]),
        Decision::PubsubHome
    );
    assert_eq!(
        decision(&plain(), &["pubsub", "channels"]),
        Decision::PubsubHome
    );
    assert_eq!(
        decision(&plain(), &["randomkey"]),
        Decision::Wide(Wide::Randomkey)
    );
}

#[test]
fn multi_key_and_cluster_wide_commands() {
    assert_eq!(
        decision(&plain(), &["mget", "a", "b"]),
        Decision::Fanout(Fanout::Mget)
    );
    assert_eq!(
        decision(&plain(), &["mset", "a", "1", "b", "2"]),
        Decision::Fanout(Fanout::Mset)
    );
    assert_eq!(
        decision(&plain(), &["del", "a", "b"]),
        Decision::Fanout(Fanout::SumIntegers)
    );
    assert_eq!(
        decision(&plain(), &["pfcount", "a", "b"]),
        Decision::Fanout(Fanout::Pfcount)
    );
    assert_eq!(
        decision(&plain(), &["dbsize"]),
        Decision::Wide(Wide::Dbsize)
    );
    assert_eq!(
        decision(&plain(), &["scan", "0"]),
        Decision::Wide(Wide::Scan)
    );
    assert_eq!(decision(&plain(), &["unsubscribe"]), Decision::Subscribe);
}

#[test]
fn msetnx_without_a_value_for_its_last_key_is_refused() {
    let (text, r) = refused(&plain(), &["msetnx", "a", "1", "b"]);
    assert_eq!(
        text,
        "-ERR wrong number of arguments for 'msetnx' command\r\n"
    );
    assert!(!r.dooms_txn);
    assert_eq!(
        decision(&plain(), &["msetnx", "{t}a", "1", "{t}b", "2"]),
        Decision::Unit {
            unit: key_slot(b"t"),
            read: false
        }
    );
    // Inside MULTI it queues: the node answers the arity error in EXEC,
    // as Redis does.
    let v = View {
        in_txn: true,
        ..plain()
    };
    assert!(queued(decision(&v, &["msetnx", "{t}a", "1", "{t}b"])));
}

#[test]
fn slot_arguments_name_the_node() {
    assert_eq!(
        decision(&plain(), &["cluster", "countkeysinslot", "42"]),
        Decision::Unit {
            unit: 42,
            read: false
        }
    );
    let (text, _) = refused(&plain(), &["cluster", "countkeysinslot", "16384"]);
    assert_eq!(text, "-ERR Invalid or out of range slot\r\n");
}

#[test]
fn local_commands_go_to_their_handler_or_the_worker() {
    let v = plain();
    assert_eq!(decision(&v, &["ping"]), Decision::Local(LocalCmd::Ping));
    assert_eq!(
        decision(&v, &["client", "setname", "x"]),
        Decision::Local(LocalCmd::Client)
    );
    // CONFIG: mithril's own directives here, the servers' parameters on
    // the masters.
    assert_eq!(
        decision(&v, &["config", "get", "maxmemory"]),
        Decision::Local(LocalCmd::Config)
    );
    assert_eq!(
        decision(&v, &["config", "get", "maxmemory", "hz"]),
        Decision::Wide(Wide::ConfigGet)
    );
    assert_eq!(
        decision(&v, &["config", "get", "max*"]),
        Decision::Wide(Wide::ConfigGet)
    );
    assert_eq!(
        decision(&v, &["config", "set", "timeout", "0"]),
        Decision::Local(LocalCmd::Config)
    );
    assert_eq!(
        decision(&v, &["config", "set", "hz", "20", "lua-time-limit", "100"]),
        Decision::Wide(Wide::ConfigSet)
    );
    assert_eq!(
        decision(&v, &["config", "set", "hz", "20", "timeout", "0"]),
        Decision::Wide(Wide::ConfigSet)
    );
    // An odd count: mithril's syntax error.
    assert_eq!(
        decision(&v, &["config", "set", "hz", "20", "x"]),
        Decision::Local(LocalCmd::Config)
    );
    assert_eq!(decision(&v, &["info"]), Decision::Gather(Gather::Info));
    assert_eq!(
        decision(&v, &["client", "list"]),
        Decision::Gather(Gather::ClientList)
    );
    assert_eq!(
        decision(&v, &["client", "kill", "id", "1"]),
        Decision::Gather(Gather::ClientKill)
    );
    assert_eq!(
        decision(&v, &["config", "resetstat"]),
        Decision::Gather(Gather::ResetStats)
    );
    assert_eq!(
        decision(&v, &["slowlog", "len"]),
        Decision::Gather(Gather::Slowlog)
    );
    assert_eq!(decision(&v, &["multi"]), Decision::Txn(TxnOp::Multi));
    assert_eq!(decision(&v, &["reset"]), Decision::Reset);
}

#[test]
fn every_local_command_in_the_table_has_a_decision_that_is_not_a_refusal() {
    // Whatever the table marks Local is answered somewhere: decide never
    // refuses a well-formed local command for a plain session.
    for c in crate::command::all() {
        let mut stack = vec![c];
        while let Some(c) = stack.pop() {
            stack.extend(c.subcommands.iter());
            let Route::Local(which) = c.route else {
                continue;
            };
            let d = local(&plain(), which, &Call::words(&["x"]).args(), &topo());
            assert!(!matches!(d, Decision::Refuse(_)), "{}: {d:?}", c.name);
        }
    }
}

#[test]
fn the_hot_path_decision_is_small() {
    // A Decision travels by value on every request: two words.
    assert!(std::mem::size_of::<Decision>() <= 16);
}

#[test]
fn watch_takes_one_slot_and_pins_what_follows_to_it() {
    let slot = crate::topology::key_slot(b"{u}a");
    assert_eq!(
        decision(&plain(), &["watch", "{u}a", "{u}b"]),
        Decision::Watch { unit: slot }
    );
    let (text, r) = refused(&plain(), &["watch", "a", "b"]);
    assert_eq!(text.as_bytes(), ERR_CROSSSLOT);
    assert!(!r.dooms_txn);
    assert_eq!(decision(&plain(), &["unwatch"]), Decision::Unwatch);
    let pinned = View {
        pin: Some(slot),
        ..plain()
    };
    // The hot path is left: reads and writes of the slot go on the pin.
    assert_eq!(decision(&pinned, &["get", "{u}x"]), Decision::Pinned);
    assert_eq!(
        decision(&pinned, &["mget", "{u}x", "{u}y"]),
        Decision::Pinned
    );
    assert_eq!(decision(&pinned, &["blpop", "{u}l", "0"]), Decision::Pinned);
    assert_eq!(
        decision(&pinned, &["evalsha", "abc", "0"]),
        Decision::Pinned
    );
    assert_eq!(
        decision(&pinned, &["watch", "{u}c"]),
        Decision::Watch { unit: slot }
    );
    for other in [
        &["get", "other"][..],
        &["mget", "{u}x", "other"],
        &["watch", "other"],
    ] {
        assert_eq!(
            refused(&pinned, other).0.as_bytes(),
            ERR_CROSSSLOT,
            "{other:?}"
        );
    }
    // Cluster-wide and local commands and pub/sub are routed as usual.
    assert_eq!(decision(&pinned, &["dbsize"]), Decision::Wide(Wide::Dbsize));
    assert_eq!(
        decision(&pinned, &["ping"]),
        Decision::Local(LocalCmd::Ping)
    );
    assert_eq!(
        decision(&pinned, &["publish", "c", "m"]),
        Decision::PubsubHome
    );
    assert_eq!(decision(&pinned, &["exec"]), Decision::Txn(TxnOp::Exec));
}

#[test]
fn watch_inside_multi_is_refused_and_unwatch_is_queued_as_on_a_node() {
    let txn = View {
        in_txn: true,
        ..plain()
    };
    let (text, r) = refused(&txn, &["watch", "k"]);
    assert_eq!(text, "-ERR WATCH inside MULTI is not allowed\r\n");
    assert!(!r.dooms_txn);
    assert!(queued(decision(&txn, &["unwatch"])));
}

#[test]
fn a_transaction_keeps_to_one_unit_and_refuses_others_with_crossslot() {
    let v = View {
        in_txn: true,
        ..plain()
    };
    // The first key gives the transaction its unit.
    assert_eq!(
        decision(&v, &["set", "{t}a", "1"]),
        Decision::Queue {
            unit: Some(key_slot(b"t"))
        }
    );
    assert_eq!(decision(&v, &["ping"]), Decision::Queue { unit: None });
    let (text, r) = refused(&v, &["mget", "a", "b"]);
    assert_eq!(text.as_bytes(), ERR_CROSSSLOT);
    assert!(r.dooms_txn);
    let later = View {
        txn_unit: Some(key_slot(b"t")),
        ..v
    };
    assert!(queued(decision(&later, &["get", "{t}c"])));
    let (text, r) = refused(&later, &["get", "other"]);
    assert_eq!(text.as_bytes(), ERR_CROSSSLOT);
    assert!(r.dooms_txn);
}

#[test]
fn debug_of_a_key_goes_where_it_lives_and_shard_channels_keep_to_one_unit() {
    assert_eq!(
        decision(&plain(), &["debug", "object", "foo"]),
        Decision::Unit {
            unit: 12182,
            read: false
        }
    );
    assert_eq!(
        decision(&plain(), &["debug", "digest-value", "{t}a", "{t}b"]),
        Decision::Unit {
            unit: key_slot(b"t"),
            read: false
        }
    );
    let (text, _) = refused(&plain(), &["debug", "digest-value", "a", "b"]);
    assert_eq!(text.as_bytes(), ERR_CROSSSLOT);
    let (text, r) = refused(&plain(), &["debug", "segfault"]);
    assert_eq!(
        text,
        "-ERR mithril: DEBUG SEGFAULT is not relayed to the cluster's nodes\r\n"
    );
    assert_eq!(r.rejected, None);
    assert_eq!(
        decision(&plain(), &["debug", "digest"]),
        Decision::Wide(Wide::Debug)
    );
    assert_eq!(
        decision(&plain(), &["ssubscribe", "{c}1", "{c}2"]),
        Decision::Subscribe
    );
    let (text, r) = refused(&plain(), &["ssubscribe", "a", "b"]);
    assert_eq!(text.as_bytes(), ERR_CROSSSLOT);
    assert!(!r.dooms_txn);
    assert_eq!(
        decision(&plain(), &["subscribe", "a", "b"]),
        Decision::Subscribe
    );
}

#[test]
fn a_monitor_may_not_touch_the_keyspace() {
    let v = View {
        monitor: true,
        ..plain()
    };
    let (text, r) = refused(&v, &["get", "k"]);
    assert_eq!(text.as_bytes(), ERR_KEYSPACE);
    assert!(r.dooms_txn);
    assert_eq!(r.rejected.flatten().map(|c| c.name), Some("get"));
    assert!(refused(&v, &["mset", "a", "1", "b", "2"]).0.as_bytes() == ERR_KEYSPACE);
    assert_eq!(decision(&v, &["ping"]), Decision::Local(LocalCmd::Ping));
    // A refusal decided earlier stays the answer; so does a queued one.
    let unauth = View {
        authenticated: false,
        ..v
    };
    assert!(refused(&unauth, &["get", "k"]).0.starts_with("-NOAUTH"));
    let txn = View { in_txn: true, ..v };
    assert!(queued(decision(&txn, &["get", "k"])));
}

/// A second placement, as a test would write one: every key on one node.
/// The router needs nothing but [`Locate`] from it.
struct OneNode;

impl Locate for OneNode {
    fn unit_of(&self, _key: &[u8]) -> Unit {
        0
    }
    fn is_known(&self) -> bool {
        true
    }
}

#[test]
fn a_second_placement_routes_by_its_own_units() {
    let one =
        |v: &View<'_>, words: &[&str]| decide(v, &Call::words(words).args(), &OneNode).decision;
    assert_eq!(
        one(&plain(), &["get", "foo"]),
        Decision::Unit {
            unit: 0,
            read: true
        }
    );
    assert_eq!(
        one(&plain(), &["blpop", "q", "0"]),
        Decision::Lease { unit: 0 }
    );
    // Keys the cluster spreads over slots share the one node's unit.
    assert_eq!(
        one(&plain(), &["watch", "a", "b"]),
        Decision::Watch { unit: 0 }
    );
    assert_eq!(
        one(&plain(), &["ssubscribe", "a", "b"]),
        Decision::Subscribe
    );
    let txn = View {
        in_txn: true,
        txn_unit: Some(0),
        ..plain()
    };
    assert_eq!(
        one(&txn, &["mget", "a", "b"]),
        Decision::Queue { unit: Some(0) }
    );
    let pinned = View {
        pin: Some(0),
        ..plain()
    };
    assert_eq!(one(&pinned, &["get", "anything"]), Decision::Pinned);
    assert_eq!(
        one(&plain(), &["mget", "a", "b"]),
        Decision::Fanout(crate::command::Fanout::Mget)
    );
}

/// A ring of two standalone servers, as a test would write one: keys that
/// start with `a` on server 0, the others on server 1. Its servers do not
/// check where keys belong, nor answer CLUSTER.
struct TwoServers;

impl Locate for TwoServers {
    fn unit_of(&self, key: &[u8]) -> Unit {
        u16::from(!key.starts_with(b"a"))
    }
    fn is_known(&self) -> bool {
        true
    }
    fn is_cluster(&self) -> bool {
        false
    }
    fn cross_unit_reply(&self) -> Bytes {
        Bytes::from_static(b"-CROSSSLOT two servers\r\n")
    }
}

#[test]
fn a_ring_refuses_keys_of_several_servers_where_a_cluster_node_would() {
    let ring =
        |v: &View<'_>, words: &[&str]| decide(v, &Call::words(words).args(), &TwoServers).decision;
    let refused_with = |d: Decision| match d {
        Decision::Refuse(r) => String::from_utf8_lossy(&r.reply).into_owned(),
        d => panic!("expected a refusal, got {d:?}"),
    };
    // One server: forwarded as it is.
    assert_eq!(
        ring(&plain(), &["rename", "a1", "a2"]),
        Decision::Unit {
            unit: 0,
            read: false
        }
    );
    // Two: refused before anything is sent, by every multi-key route.
    for words in [
        &["rename", "a1", "b1"][..],
        &["sinterstore", "a", "a2", "b"],
        &["msetnx", "a", "1", "b", "2"],
        &["eval", "return 1", "2", "a", "b"],
        &["blpop", "a", "b", "0"],
        &["watch", "a", "b"],
    ] {
        assert_eq!(
            refused_with(ring(&plain(), words)),
            "-CROSSSLOT two servers\r\n",
            "{words:?}"
        );
    }
    // A shard channel lives on the server its name hashes to.
    assert_eq!(
        ring(&plain(), &["spublish", "b-channel", "m"]),
        Decision::Unit {
            unit: 1,
            read: false
        }
    );
    // Fan-outs split by server as by slot.
    assert_eq!(
        ring(&plain(), &["mget", "a", "b"]),
        Decision::Fanout(crate::command::Fanout::Mget)
    );
    // A server without cluster support answers the CLUSTER commands.
    for words in [
        &["cluster", "info"][..],
        &["cluster", "slots"],
        &["readonly"],
        &["cluster", "countkeysinslot", "1"],
    ] {
        assert_eq!(
            refused_with(ring(&plain(), words)).as_bytes(),
            ERR_CLUSTER_DISABLED,
            "{words:?}"
        );
    }
    // The transaction keeps to one server, with the ring's refusal.
    let txn = View {
        in_txn: true,
        txn_unit: Some(0),
        ..plain()
    };
    assert_eq!(
        refused_with(ring(&txn, &["get", "b"])),
        "-CROSSSLOT two servers\r\n"
    );
}

/// The fast path's decision for `words`, if it takes it, against the
/// whole router's for a plain session.
fn fast_and_whole(words: &[&str], loc: &impl Locate) -> (Option<Decision>, Decision) {
    let call = Call::words(words);
    let args = call.args();
    let cmd = resolve(&args).unwrap_or_else(|_| panic!("{words:?} resolves"));
    (
        decide_plain(cmd, &args, loc),
        decide_command(&plain(), cmd, &args, loc),
    )
}

#[test]
fn the_plain_fast_path_decides_as_the_whole_router_does() {
    let calls: &[&[&str]] = &[
        &["get", "foo"],
        &["set", "foo", "1"],
        &["set", "{user1}.a", "1"],
        &["evalsha", SHA, "0"],
        &["evalsha", SHA, "1", "foo"],
        &["fcall_ro", "f", "1", "foo", "x"],
        &["rename", "a", "b"],
        &["xread", "streams", "s", "0"],
        &["xread", "block", "0", "streams", "s", "$"],
        &["blpop", "q", "0"],
        &["spublish", "ch", "m"],
        &["mget", "a", "b"],
        &["ping"],
        &["cluster", "countkeysinslot", "42"],
        &["msetnx", "a", "1", "b"],
        &["eval", "return 1", "1", "foo"],
    ];
    let mut taken = 0;
    for words in calls {
        for (fast, whole) in [
            fast_and_whole(words, &topo()),
            fast_and_whole(words, &OneNode),
            fast_and_whole(words, &TwoServers),
            fast_and_whole(words, &Topology::empty()),
        ] {
            if let Some(fast) = fast {
                assert_eq!(fast, whole, "{words:?}");
                taken += 1;
            }
        }
    }
    assert!(taken >= 30, "the fast path took {taken}");
    // It takes the keyed commands that do not block, and leaves the rest.
    assert!(fast_and_whole(&["get", "foo"], &topo()).0.is_some());
    assert!(fast_and_whole(&["mget", "a", "b"], &topo()).0.is_none());
    assert!(fast_and_whole(&["blpop", "q", "0"], &topo()).0.is_none());
    assert!(fast_and_whole(&["ping"], &topo()).0.is_none());
}
