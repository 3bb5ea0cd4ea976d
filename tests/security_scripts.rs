//! Issue 30, items 1 and 2: a script never does more than its caller, and
//! functions have an admin gate. A password-protected cluster (mithril
//! holds the backend credentials), `user default off`, an admin, a write
//! user without key rules (`wr`), `app` (write, `~app:*`), `ro` (read,
//! `~app:*`) and a key-pattern user with `+@scripting` made with ACL
//! SETUSER: each hole of the issue reproduced, now refused, and compared
//! with a standalone Redis given the same users (which refuses the same
//! attempts from inside the script, with its own texts).
//!
//! The mechanism (mithril(8) and mithril.conf(5), ACL): mithril cannot make
//! a node hold a script's `redis.call`s to its caller's rules (the script
//! runs on the node as mithril's backend user), so a script call (EVAL,
//! EVALSHA, FCALL and their read-only variants) needs a user that may run
//! every command on every key and channel; anyone else gets Redis's NOPERM
//! for the call itself.

mod support;

use support::*;

const CLUSTER_PW: &str = "cluster-s3cret";

const USERS: &str = "\
user default off
user admin on >a-pw mode admin
user wr on >w-pw mode write
user app on >p-pw mode write ~app:*
user ro on >r-pw mode read ~app:*
";

fn noperm_cmd(name: &str) -> Reply {
    err(&format!(
        "NOPERM this user has no permissions to run the '{name}' command"
    ))
}

/// What a 3-master cluster looked like before it was locked (the
/// harness reads the slot map without AUTH).
struct Locked {
    cluster: RedisCluster,
    /// One key on every master.
    keys: Vec<String>,
    /// The node id of a master that does not serve `a`'s slot.
    other_id: String,
}

/// A 3-master cluster whose nodes require `CLUSTER_PW` from `default`.
fn locked_cluster() -> Locked {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec![format!("masterauth {CLUSTER_PW}")],
        ..ClusterSpec::default()
    });
    let keys = cluster
        .key_per_master("t")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let other_id = cluster.other_master(key_slot(b"a")).id.clone();
    for n in &cluster.nodes {
        assert_eq!(
            n.conn().cmd(&["CONFIG", "SET", "requirepass", CLUSTER_PW]),
            ok()
        );
    }
    Locked {
        cluster,
        keys,
        other_id,
    }
}

fn start(cluster: &RedisCluster) -> Mithril {
    Mithril::start_locked(
        bin(),
        &cluster.seeds(),
        &format!("backend-password {CLUSTER_PW}\n{USERS}"),
    )
}

fn login(m: &Mithril, user: &str, pass: &str) -> Conn {
    let mut c = m.conn();
    assert_eq!(c.cmd(&["AUTH", user, pass]), ok(), "AUTH {user}");
    c
}

/// The keys of every master, summed through mithril (by the admin).
fn dbsize(a: &mut Conn) -> i64 {
    a.cmd(&["DBSIZE"]).as_int()
}

/// A standalone Redis with the users of USERS as Redis writes them (mode
/// write is `+@all -@admin -@dangerous`, read `+@read` and the connection
/// commands), plus the key-pattern scripting user.
fn redis_with_the_same_users() -> Standalone {
    let r = Standalone::start();
    let mut c = r.conn();
    for rules in [
        "admin on >a-pw ~* &* +@all",
        "wr on >w-pw ~* &* +@all -@admin -@dangerous",
        "app on >p-pw ~app:* &* +@all -@admin -@dangerous",
        "ro on >r-pw ~app:* &* -@all +@read +@connection +@scripting -@write",
        "kp on >k-pw ~app:* &* -@all +@read +@scripting",
    ] {
        let mut args = vec!["ACL", "SETUSER"];
        args.extend(rules.split_whitespace());
        assert_eq!(c.cmd(&args), ok(), "{rules}");
    }
    r
}

fn redis_login(r: &Standalone, user: &str, pass: &str) -> Conn {
    let mut c = r.conn();
    assert_eq!(c.cmd(&["AUTH", user, pass]), ok(), "AUTH {user}");
    c
}

/// `ERR The user executing the script can't ...` as Redis 7.0 words it
/// from inside a script (the script's SHA and line follow).
fn redis_script_refusal(reply: &Reply, what: &str) {
    let text = reply.as_error();
    assert!(
        text.starts_with(&format!("ERR The user executing the script can't {what}")),
        "{text}"
    );
}

/// Issue 30, hole 1: `wr` (refused FLUSHALL) flushed every master from a
/// script, set a slot migrating, ran CLUSTER NODES / INFO / KEYS / MEMORY
/// PURGE; a key-pattern user with `+@scripting` read `secret:*` keys from
/// a script. Every script call of a user with narrower rules than the
/// backend's is now refused; the admin's still run.
#[test]
fn issue30_a_script_never_does_more_than_its_caller() {
    let locked = locked_cluster();
    let m = start(&locked.cluster);
    let mut a = login(&m, "admin", "a-pw");
    for k in &locked.keys {
        assert_eq!(a.cmd(&["SET", k, "1"]), ok());
    }
    assert_eq!(a.cmd(&["SET", "secret:{t}b", "42"]), ok());
    let before = dbsize(&mut a);
    assert!(before > locked.keys.len() as i64, "{before}");

    let flush = "return redis.call('flushall')";
    let setslot = "return redis.call('cluster','setslot',ARGV[1],'migrating',ARGV[2])";
    let slot_a = key_slot(b"a").to_string();
    let mut wr = login(&m, "wr", "w-pw");
    assert_eq!(wr.cmd(&["FLUSHALL"]), noperm_cmd("flushall"));
    assert_eq!(wr.cmd(&["EVAL", flush, "0"]), noperm_cmd("eval"));
    assert_eq!(
        wr.cmd(&["EVAL", setslot, "1", "a", &slot_a, &locked.other_id]),
        noperm_cmd("eval")
    );
    for call in [
        "return redis.call('cluster','nodes')",
        "return redis.call('info')",
        "return redis.call('keys','*')",
        "return redis.call('memory','purge')",
        "return redis.call('config','get','masterauth')",
    ] {
        assert_eq!(wr.cmd(&["EVAL", call, "0"]), noperm_cmd("eval"), "{call}");
    }
    // The same through a function: loading runs no command, calling is
    // refused.
    let lib = "#!lua name=wrlib\nredis.register_function('wipe', function(k, a) return redis.call('flushall') end)";
    assert_eq!(wr.cmd(&["FUNCTION", "LOAD", lib]), bulk("wrlib"));
    assert_eq!(wr.cmd(&["FCALL", "wipe", "0"]), noperm_cmd("fcall"));
    let sha = a.cmd(&["SCRIPT", "LOAD", flush]).as_str().to_string();
    assert_eq!(wr.cmd(&["EVALSHA", &sha, "0"]), noperm_cmd("evalsha"));
    // Queued in a transaction: refused when queued, as Redis refuses a
    // command the user may not run, and the transaction is discarded.
    assert_eq!(wr.cmd(&["MULTI"]), ok());
    assert_eq!(wr.cmd(&["EVAL", flush, "0"]), noperm_cmd("eval"));
    assert_eq!(
        wr.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    // Nothing was flushed, and the slot is not migrating: the admin's
    // commands on it answer.
    assert_eq!(dbsize(&mut a), before);
    assert_eq!(a.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(a.cmd(&["GET", "a"]), bulk("1"));

    // A key pattern and +@scripting from its rules: no script, declared
    // keys or not, read-only or not.
    assert_eq!(
        a.cmd(&[
            "ACL",
            "SETUSER",
            "kp",
            "on",
            ">k-pw",
            "~app:*",
            "-@all",
            "+@read",
            "+@scripting"
        ]),
        ok()
    );
    let mut kp = login(&m, "kp", "k-pw");
    let read = "return redis.call('get','secret:{t}b')";
    let get = "return redis.call('get',KEYS[1])";
    for call in [
        &["EVAL", read, "0"][..],
        &["EVAL", get, "1", "secret:{t}b"],
        &["EVAL", get, "1", "app:{t}x"],
    ] {
        assert_eq!(kp.cmd(call), noperm_cmd("eval"), "{call:?}");
    }
    assert_eq!(kp.cmd(&["EVAL_RO", read, "0"]), noperm_cmd("eval_ro"));
    let mut ro = login(&m, "ro", "r-pw");
    assert_eq!(ro.cmd(&["EVAL_RO", read, "0"]), noperm_cmd("eval_ro"));
    let mut app = login(&m, "app", "p-pw");
    assert_eq!(app.cmd(&["EVAL", read, "0"]), noperm_cmd("eval"));

    // The admin's scripts run, with the backend user's rights, which are
    // the admin's: redis.acl_check_cmd tells the truth.
    assert_eq!(a.cmd(&["EVAL", get, "1", "secret:{t}b"]), bulk("42"));
    assert_eq!(
        a.cmd(&["EVAL", "return redis.acl_check_cmd('flushall')", "0"]),
        Reply::Int(1)
    );

    // A standalone Redis given the same users refuses each of these too,
    // from inside the script.
    let r = redis_with_the_same_users();
    let mut rwr = redis_login(&r, "wr", "w-pw");
    redis_script_refusal(
        &rwr.cmd(&["EVAL", flush, "0"]),
        "run this command or subcommand",
    );
    redis_script_refusal(
        &rwr.cmd(&["EVAL", "return redis.call('info')", "0"]),
        "run this command or subcommand",
    );
    let mut rkp = redis_login(&r, "kp", "k-pw");
    redis_script_refusal(
        &rkp.cmd(&["EVAL", read, "0"]),
        "access at least one of the keys mentioned in the command arguments",
    );
}

/// Issue 30, hole 2: `app` read the admin's library with WITHCODE and
/// replaced it (FUNCTION LOAD REPLACE) with one that copied what it read
/// into app's key. Replacing a library needs the right to delete one
/// (admin); WITHCODE and FUNCTION DUMP need the right to load one.
#[test]
fn issue30_functions_have_an_admin_gate() {
    let locked = locked_cluster();
    let m = start(&locked.cluster);
    let mut a = login(&m, "admin", "a-pw");
    let bank = "#!lua name=bank\nredis.register_function('getbal', function(k, a) return redis.call('get', k[1]) end)";
    let trojan = "#!lua name=bank\nredis.register_function('getbal', function(k, a) local v = redis.call('get', k[1]) redis.call('set', 'app:{t}loot', v) return v end)";
    assert_eq!(a.cmd(&["FUNCTION", "LOAD", bank]), bulk("bank"));
    assert_eq!(a.cmd(&["SET", "secret:{t}b", "42"]), ok());

    let mut app = login(&m, "app", "p-pw");
    assert_eq!(
        app.cmd(&["FUNCTION", "LOAD", "REPLACE", trojan]),
        noperm_cmd("function|load")
    );
    assert_eq!(
        app.cmd(&["FUNCTION", "LOAD", "replace", trojan]),
        noperm_cmd("function|load")
    );
    // Without REPLACE the node refuses a name in use, as Redis does.
    assert_eq!(
        app.cmd(&["FUNCTION", "LOAD", trojan]),
        err("ERR Library 'bank' already exists")
    );
    // A library of its own loads; replacing it needs the admin too.
    let mine = "#!lua name=applib\nredis.register_function('appf', function(k, a) return 1 end)";
    assert_eq!(app.cmd(&["FUNCTION", "LOAD", mine]), bulk("applib"));
    assert_eq!(
        app.cmd(&["FUNCTION", "LOAD", "REPLACE", mine]),
        noperm_cmd("function|load")
    );
    assert_eq!(
        app.cmd(&["FUNCTION", "DELETE", "bank"]),
        noperm_cmd("function|delete")
    );
    // app may load functions, so it may read their code.
    assert!(!app.cmd(&["FUNCTION", "LIST", "WITHCODE"]).is_error());
    assert!(!app.cmd(&["FUNCTION", "DUMP"]).is_error());

    // ro may not load functions: no code, no dump; the list without code
    // (and a library pattern that happens to read "withcode") still.
    let mut ro = login(&m, "ro", "r-pw");
    assert_eq!(
        ro.cmd(&["FUNCTION", "LIST", "WITHCODE"]),
        noperm_cmd("function|list")
    );
    assert_eq!(
        ro.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "b*", "withcode"]),
        noperm_cmd("function|list")
    );
    assert_eq!(ro.cmd(&["FUNCTION", "DUMP"]), noperm_cmd("function|dump"));
    assert!(!ro.cmd(&["FUNCTION", "LIST"]).is_error());
    assert!(!ro
        .cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "withcode"])
        .is_error());

    // The admin's function is still the admin's: nothing copied.
    assert_eq!(a.cmd(&["FCALL", "getbal", "1", "secret:{t}b"]), bulk("42"));
    assert_eq!(a.cmd(&["EXISTS", "app:{t}loot"]), Reply::Int(0));
    // The admin replaces libraries.
    assert_eq!(a.cmd(&["FUNCTION", "LOAD", "REPLACE", bank]), bulk("bank"));

    // Redis itself lets any user with FUNCTION LOAD replace: the
    // difference is deliberate (mithril(8)).
    let r = redis_with_the_same_users();
    assert_eq!(
        redis_login(&r, "admin", "a-pw").cmd(&["FUNCTION", "LOAD", bank]),
        bulk("bank")
    );
    assert_eq!(
        redis_login(&r, "app", "p-pw").cmd(&["FUNCTION", "LOAD", "REPLACE", trojan]),
        bulk("bank")
    );
}
