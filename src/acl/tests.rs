//! The permission model on requests built like the dispatcher builds them:
//! modes against command classes, key and channel patterns, AUTH, the
//! counters.

use super::*;
use crate::command::resolve;
use crate::command::testutil::Call;

fn acl(conf: &str) -> Acl {
    let cfg = crate::config::parse_str(conf, "test").unwrap_or_else(|e| panic!("{e}"));
    Acl::from_config(&cfg)
}

fn user(acl: &Acl, name: &str) -> Arc<User> {
    acl.user(name.as_bytes()).unwrap()
}

fn run(acl: &Acl, name: &str, line: &str) -> Result<(), Denial> {
    let r = Call::line(line);
    let args = r.args();
    let cmd = resolve(&args).unwrap_or_else(|e| panic!("{line}: {e:?}"));
    acl.check(&user(acl, name), cmd, &args)
}

fn mode_of(line: &str) -> Mode {
    let r = Call::line(line);
    required_mode(resolve(&r.args()).unwrap())
}

#[test]
fn modes_follow_flags_and_categories() {
    for (line, want) in [
        ("GET k", Mode::Read),
        ("MGET a b", Mode::Read),
        ("SCAN 0", Mode::Read),
        ("PING", Mode::Read),
        ("AUTH pw", Mode::Read),
        ("HELLO 3", Mode::Read),
        ("CLIENT SETNAME x", Mode::Read),
        ("CLUSTER SLOTS", Mode::Read),
        ("COMMAND COUNT", Mode::Read),
        ("MULTI", Mode::Read),
        ("EXEC", Mode::Read),
        ("SUBSCRIBE c", Mode::Read),
        ("PSUBSCRIBE c*", Mode::Read),
        ("ACL WHOAMI", Mode::Read),
        ("INFO", Mode::Read),
        ("EVAL_RO s 0", Mode::Read),
        ("EVALSHA_RO sha 0", Mode::Read),
        ("FCALL_RO f 0", Mode::Read),
        ("SCRIPT EXISTS sha", Mode::Read),
        ("SCRIPT HELP", Mode::Read),
        ("FUNCTION LIST", Mode::Read),
        ("FUNCTION DUMP", Mode::Read),
        ("CLUSTER GETKEYSINSLOT 1 10", Mode::Admin),
        ("CLUSTER COUNTKEYSINSLOT 1", Mode::Admin),
        ("MEMORY PURGE", Mode::Admin),
        ("FUNCTION STATS", Mode::Read),
        ("EVALSHA sha 0", Mode::Write),
        ("SCRIPT LOAD s", Mode::Write),
        ("FUNCTION LOAD code", Mode::Write),
        ("FUNCTION LOAD REPLACE code", Mode::Write),
        ("SCRIPT FLUSH", Mode::Admin),
        ("SCRIPT KILL", Mode::Admin),
        ("FUNCTION DELETE lib", Mode::Admin),
        ("FUNCTION FLUSH", Mode::Admin),
        ("FUNCTION RESTORE payload", Mode::Admin),
        ("FUNCTION KILL", Mode::Admin),
        ("SET k v", Mode::Write),
        ("DEL a b", Mode::Write),
        ("BLPOP k 0", Mode::Write),
        ("EVAL s 0", Mode::Write),
        ("FCALL f 0", Mode::Write),
        ("PUBLISH c m", Mode::Write),
        ("FLUSHALL", Mode::Admin),
        ("FLUSHDB", Mode::Admin),
        ("CONFIG SET loglevel debug", Mode::Admin),
        ("CONFIG GET *", Mode::Admin),
        ("CLIENT KILL ID 1", Mode::Admin),
        ("CLIENT LIST", Mode::Admin),
        ("ACL LIST", Mode::Admin),
        ("ACL USERS", Mode::Admin),
        ("KEYS *", Mode::Admin),
        ("SORT k", Mode::Admin),
        ("DEBUG SLEEP 0", Mode::Admin),
    ] {
        assert_eq!(mode_of(line), want, "{line}");
    }
}

const USERS: &str = "\
user reader on >r mode read
user writer on >w mode write ~app:* &news.* &chat
user admin on >a mode admin
user split on >s mode write %R~pub:* %W~mine:*
user off off >x mode admin
user any on nopass mode write
";

#[test]
fn each_mode_against_each_class() {
    let a = acl(USERS);
    for (name, line, want) in [
        ("reader", "GET k", Ok(())),
        ("reader", "SET k v", Err(Denial::Command)),
        ("reader", "FLUSHALL", Err(Denial::Command)),
        ("reader", "PING", Ok(())),
        // No channel rule: acl-pubsub-default's none (issue 30).
        ("reader", "SUBSCRIBE anything", Err(Denial::Channel)),
        ("reader", "PUBLISH c m", Err(Denial::Command)),
        ("writer", "SET app:1 v", Ok(())),
        ("writer", "CONFIG SET loglevel debug", Err(Denial::Command)),
        ("writer", "CLIENT KILL ID 1", Err(Denial::Command)),
        ("admin", "FLUSHALL", Ok(())),
        ("admin", "CONFIG SET loglevel debug", Ok(())),
        ("admin", "CLIENT KILL ID 1", Ok(())),
        ("admin", "ACL LIST", Ok(())),
    ] {
        assert_eq!(run(&a, name, line), want, "{name}: {line}");
    }
}

#[test]
fn every_key_of_every_command_is_checked() {
    let a = acl(USERS);
    for (line, want) in [
        ("GET app:1", Ok(())),
        ("GET other", Err(Denial::Key)),
        ("MGET app:1 app:2", Ok(())),
        ("MGET app:1 other:2", Err(Denial::Key)),
        ("MSET app:1 a other b", Err(Denial::Key)),
        ("DEL app:1 other", Err(Denial::Key)),
        ("RENAME app:1 other", Err(Denial::Key)),
        ("BLPOP app:l other 0", Err(Denial::Key)),
        ("XREAD STREAMS app:s other 0 0", Err(Denial::Key)),
        // A script may touch undeclared keys: refused with limited keys,
        // even read-only ones on allowed keys.
        ("EVAL s 1 app:1", Err(Denial::Command)),
        ("EVAL_RO s 0", Err(Denial::Command)),
        ("EVALSHA sha 1 app:1", Err(Denial::Command)),
        ("EVALSHA_RO sha 1 app:1", Err(Denial::Command)),
        ("FCALL f 1 app:1", Err(Denial::Command)),
        ("FCALL_RO f 1 app:1", Err(Denial::Command)),
        // Loading one runs nothing.
        ("SCRIPT LOAD s", Ok(())),
        // Keyless commands pass.
        ("DBSIZE", Ok(())),
        ("PING", Ok(())),
    ] {
        assert_eq!(run(&a, "writer", line), want, "{line}");
    }
    // Read and write patterns apply by the command's mode, as predixy's
    // ReadKeyPrefix / WriteKeyPrefix do.
    for (line, want) in [
        ("GET pub:1", Ok(())),
        ("GET mine:1", Err(Denial::Key)),
        ("SET mine:1 v", Ok(())),
        ("SET pub:1 v", Err(Denial::Key)),
        ("COPY mine:1 mine:2", Ok(())),
    ] {
        assert_eq!(run(&a, "split", line), want, "{line}");
    }
    // Globs are Redis's, case-sensitive; `*` covers the empty key too.
    let a = acl("user u on nopass mode write ~a[bc]? ~*\nuser v on nopass mode write ~x?\n");
    assert_eq!(run(&a, "u", "GET anything"), Ok(()));
    assert!(!user(&a, "u").unrestricted);
    assert_eq!(run(&a, "v", "GET xy"), Ok(()));
    assert_eq!(run(&a, "v", "GET Xy"), Err(Denial::Key));
    assert_eq!(run(&a, "v", "GET xyz"), Err(Denial::Key));
}

#[test]
fn channels_are_checked_like_redis() {
    let a = acl(USERS);
    for (line, want) in [
        ("SUBSCRIBE news.sport chat", Ok(())),
        ("SUBSCRIBE news.sport other", Err(Denial::Channel)),
        ("SSUBSCRIBE other", Err(Denial::Channel)),
        ("PUBLISH chat hi", Ok(())),
        ("PUBLISH other hi", Err(Denial::Channel)),
        // A pattern must be one of the user's patterns, literally.
        ("PSUBSCRIBE news.*", Ok(())),
        ("PSUBSCRIBE news.s*", Err(Denial::Channel)),
        ("PSUBSCRIBE *", Err(Denial::Channel)),
        ("UNSUBSCRIBE other", Ok(())),
        ("PUNSUBSCRIBE *", Ok(())),
    ] {
        assert_eq!(run(&a, "writer", line), want, "{line}");
    }
    let a = acl("user u on nopass mode read resetchannels\n");
    assert_eq!(run(&a, "u", "SUBSCRIBE c"), Err(Denial::Channel));
    assert_eq!(run(&a, "u", "GET k"), Ok(()));
}

#[test]
fn denials_are_counted_by_kind() {
    let a = acl(USERS);
    let _ = run(&a, "reader", "SET k v");
    let _ = run(&a, "writer", "GET other");
    let _ = run(&a, "writer", "GET other");
    let _ = run(&a, "writer", "PUBLISH other m");
    let _ = run(&a, "writer", "GET app:1");
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    assert_eq!(
        (
            n(&a.denied.cmd),
            n(&a.denied.key),
            n(&a.denied.channel),
            n(&a.denied.auth)
        ),
        (1, 2, 1, 0)
    );
}

#[test]
fn authentication() {
    let a = acl(USERS);
    let name = |r: Result<Arc<User>, AuthError>| r.map(|u| u.name.clone());
    assert_eq!(
        name(a.authenticate(Some(b"reader"), b"r")),
        Ok("reader".into())
    );
    assert_eq!(
        name(a.authenticate(Some(b"reader"), b"R")),
        Err(AuthError::WrongPass)
    );
    assert_eq!(
        name(a.authenticate(Some(b"nobody"), b"r")),
        Err(AuthError::WrongPass)
    );
    // Disabled users cannot log in, even with the right password.
    assert_eq!(
        name(a.authenticate(Some(b"off"), b"x")),
        Err(AuthError::WrongPass)
    );
    assert_eq!(
        name(a.authenticate(None, b"x")),
        Err(AuthError::NoDefaultPassword)
    );
    // nopass: any password.
    assert_eq!(name(a.authenticate(Some(b"any"), b"")), Ok("any".into()));
    // The built-in default needs none: AUTH default <anything> works; the
    // one-argument form names default only, as Redis (issue 30): another
    // user's password does not log in.
    assert_eq!(
        name(a.authenticate(Some(b"default"), b"zz")),
        Ok("default".into())
    );
    assert_eq!(
        name(a.authenticate(None, b"w")),
        Err(AuthError::NoDefaultPassword)
    );
    assert_eq!(a.denied.auth.load(Ordering::Relaxed), 3);
    assert!(!a.password_required());
    assert!(a.default_user().unrestricted);

    // requirepass gives default a password; the one-argument form tries it
    // first.
    let a = acl("requirepass w\nuser writer on >w mode write\n");
    assert!(a.password_required() && a.default_has_password());
    assert_eq!(name(a.authenticate(None, b"w")), Ok("default".into()));
    assert_eq!(
        name(a.authenticate(None, b"nope")),
        Err(AuthError::WrongPass)
    );
    assert_eq!(
        name(a.authenticate(Some(b"default"), b"w")),
        Ok("default".into())
    );

    // A default line replaces the built-in user.
    let a = acl("user default on nopass mode read ~pub:*\n");
    assert!(!a.password_required());
    assert!(!a.default_user().unrestricted);
    let a = acl("user default off\nuser app on >pw mode write\n");
    assert!(a.password_required());
    assert_eq!(name(a.authenticate(None, b"pw")), Err(AuthError::WrongPass));
    // auth-any-user yes (predixy's clients): the user whose password it is.
    let a = acl("user default off\nuser app on >pw mode write\nauth-any-user yes\n");
    assert_eq!(name(a.authenticate(None, b"pw")), Ok("app".into()));
    assert_eq!(
        name(a.authenticate(None, b"other")),
        Err(AuthError::WrongPass)
    );
}

#[test]
fn a_new_session_starts_as_the_default_user_stands() {
    let start = |conf: &str| acl(conf).session_start();
    assert_eq!(
        start(""),
        SessionStart {
            authenticated: true,
            restricted: false,
            generation: 0
        }
    );
    assert_eq!(
        start("requirepass pw\n"),
        SessionStart {
            authenticated: false,
            restricted: false,
            generation: 0
        }
    );
    assert_eq!(
        start("user default on nopass mode read ~pub:*\n"),
        SessionStart {
            authenticated: true,
            restricted: true,
            generation: 0
        }
    );
    assert!(!start("user default off\nuser app on >pw mode write\n").authenticated);
}

/// `ACL SETUSER` with its words split like a request's.
fn setuser(a: &Acl, line: &str) -> Result<(), String> {
    let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
    a.set_user(words[0], &words[1..])
}

#[test]
fn command_rules_add_to_and_take_from_the_mode() {
    let a = acl("user r on nopass mode read +set -get\n\
         user c on nopass -@all +@scripting +config|get ~*\n\
         user all on nopass mode read +@all &*\n");
    assert_eq!(run(&a, "r", "SET k v"), Ok(()));
    assert_eq!(run(&a, "r", "GET k"), Err(Denial::Command));
    assert_eq!(run(&a, "r", "MGET k"), Ok(()));
    assert_eq!(run(&a, "r", "DEL k"), Err(Denial::Command));
    assert_eq!(run(&a, "c", "SCRIPT LOAD x"), Ok(()));
    // Not every command: no script call (`acl::scripts`).
    assert_eq!(run(&a, "c", "EVAL x 0"), Err(Denial::Command));
    assert_eq!(run(&a, "c", "CONFIG GET port"), Ok(()));
    assert_eq!(run(&a, "c", "CONFIG SET port 1"), Err(Denial::Command));
    assert_eq!(run(&a, "c", "PING"), Err(Denial::Command));
    // +@all after a mode: every command, so the fast path.
    assert!(user(&a, "all").unrestricted);
    assert!(!user(&a, "c").unrestricted);
    // The line ACL LIST shows parses back to the same rights.
    let canon = user(&a, "c").canonical.clone();
    assert_eq!(
        canon,
        "c on nopass ~* resetchannels -@all +@scripting +config|get"
    );
    assert_eq!(
        user(&a, "r").canonical,
        "r on nopass ~* resetchannels mode read +set -get"
    );
}

#[test]
fn setuser_edits_users_as_redis_does() {
    let a = acl("");
    assert_eq!(a.generation(), 0);
    // A new user is off and may do nothing until told.
    setuser(&a, "bob").unwrap();
    assert_eq!(a.generation(), 1);
    assert_eq!(
        user(&a, "bob").canonical,
        "bob off resetkeys resetchannels -@all"
    );
    assert_eq!(
        a.authenticate(Some(b"bob"), b"123").map(|_| ()),
        Err(AuthError::WrongPass)
    );
    setuser(&a, "bob on >123 +@scripting +set ~x*").unwrap();
    let bob = a.authenticate(Some(b"bob"), b"123").unwrap();
    assert!(!bob.canonical.contains("123 "), "{}", bob.canonical);
    assert_eq!(run(&a, "bob", "SET xa 1"), Ok(()));
    assert_eq!(run(&a, "bob", "SET ya 1"), Err(Denial::Key));
    assert_eq!(run(&a, "bob", "HSET xa f 1"), Err(Denial::Command));
    // Granted by its rules, a script is still refused: it would run on
    // the node with the backend user's rights (issue 30).
    assert_eq!(run(&a, "bob", "EVAL x 1 xa"), Err(Denial::Command));
    assert_eq!(run(&a, "bob", "EVAL x 1 ya"), Err(Denial::Command));
    assert_eq!(run(&a, "bob", "SUBSCRIBE ch"), Err(Denial::Command));
    // Edits apply in order to what is there; the old password goes with <.
    setuser(&a, "bob >456 <123 allchannels +subscribe").unwrap();
    assert!(a.authenticate(Some(b"bob"), b"123").is_err());
    assert!(a.authenticate(Some(b"bob"), b"456").is_ok());
    assert_eq!(run(&a, "bob", "SUBSCRIBE ch"), Ok(()));
    // One bad rule: nothing changes, and Redis's text says which.
    let before = user(&a, "bob").canonical.clone();
    let gen = a.generation();
    for (line, want) in [
        (
            "bob off +nosuch",
            "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL",
        ),
        (
            "bob ~a* bogus",
            "ERR Error in ACL SETUSER modifier 'bogus': Syntax error",
        ),
        (
            "bob <nope",
            "The password you are trying to remove from the user does not exist",
        ),
        (
            "bob #abc",
            "The password hash must be exactly 64 characters",
        ),
        ("bob allkeys ~x", "Try 'resetkeys'"),
        ("bob &x", "Try 'resetchannels'"),
        ("bob %X~k", "Syntax error"),
        ("bob (+get ~k)", "selectors"),
    ] {
        let e = setuser(&a, line).unwrap_err();
        assert!(e.starts_with("ERR ") && e.contains(want), "{line}: {e}");
    }
    assert_eq!(user(&a, "bob").canonical, before);
    assert_eq!(a.generation(), gen);
    assert!(setuser(&a, "bad\u{0}name on").is_err());
    // reset: back to a new user's standing.
    setuser(&a, "bob reset").unwrap();
    assert_eq!(
        user(&a, "bob").canonical,
        "bob off resetkeys resetchannels -@all"
    );
    // default can be edited, never deleted; others can.
    setuser(&a, "default >pw").unwrap();
    assert!(!a.session_start().authenticated || a.default_user().nopass);
    assert_eq!(
        a.del_users(&[b"default"]),
        Err("ERR The 'default' user cannot be removed")
    );
    assert_eq!(a.del_users(&[b"bob", b"nobody"]), Ok(1));
    assert!(a.user(b"bob").is_none());
    assert!(matches!(a.refresh(Some(&bob)), Refreshed::Deleted));
}

#[test]
fn setuser_rules_parse_like_acl_list_prints_them() {
    let a = acl("");
    setuser(
        &a,
        "u on >pw %R~r:* %W~w:* ~rw:* &news.* -@all +@read -keys +client|id",
    )
    .unwrap();
    // (In a file, a word starting with '#' would need quotes.)
    let canon = user(&a, "u").canonical.clone();
    let words: Vec<&str> = canon.split_whitespace().collect();
    let mut cfg = crate::config::Config::default();
    cfg.users
        .push(crate::config::user::UserSpec::parse(&words).unwrap());
    let back = Acl::from_config(&cfg);
    let u = user(&back, "u");
    assert_eq!(u.canonical, user(&a, "u").canonical);
    assert_eq!(run(&back, "u", "GET r:1"), Ok(()));
    assert_eq!(run(&back, "u", "GET w:1"), Err(Denial::Key));
    assert_eq!(run(&back, "u", "KEYS *"), Err(Denial::Command));
    assert_eq!(run(&back, "u", "CLIENT ID"), Ok(()));
    // A container named whole: itself (COMMAND alone runs) and its
    // subcommands (redis-py's cluster client sends a bare COMMAND).
    setuser(&a, "v on nopass -@all +command").unwrap();
    assert_eq!(run(&a, "v", "COMMAND"), Ok(()));
    assert_eq!(run(&a, "v", "COMMAND COUNT"), Ok(()));
    assert_eq!(run(&a, "v", "GET k"), Err(Denial::Command));
    assert_eq!(run(&back, "u", "CLIENT KILL ID 1"), Err(Denial::Command));
    assert!(back.authenticate(Some(b"u"), b"pw").is_ok());
}

#[test]
fn the_log_groups_like_redis_and_keeps_the_newest() {
    let a = acl("");
    let t0 = std::time::Instant::now();
    let entry = |object: &str, at: std::time::Instant| LogEntry {
        count: 1,
        reason: "key",
        context: "toplevel",
        object: object.as_bytes().to_vec(),
        username: "u".into(),
        at,
        client_info: String::new(),
    };
    a.log(entry("k", t0));
    a.log(entry("other", t0));
    // The same denial within a minute adds to the older entry's count and
    // moves it first; a minute later it is a new entry.
    a.log(entry("k", t0 + Duration::from_secs(30)));
    let l = a.log_entries(10);
    assert_eq!((l.len(), l[0].count, &l[0].object[..]), (2, 2, &b"k"[..]));
    a.log(entry("k", t0 + Duration::from_secs(200)));
    assert_eq!(a.log_entries(10).len(), 3);
    for i in 0..(LOG_MAX + 5) {
        a.log(entry(&format!("n{i}"), t0));
    }
    let l = a.log_entries(usize::MAX);
    assert_eq!(l.len(), LOG_MAX);
    assert_eq!(l[0].object, format!("n{}", LOG_MAX + 4).into_bytes());
    a.log_reset();
    assert!(a.log_entries(10).is_empty());
}

/// Issue 30: a script call runs on the node with mithril's backend rights,
/// so only a user that may do everything may make one; replacing a
/// library needs the right to delete one, and reading code the right to
/// load one.
#[test]
fn scripts_need_every_right_and_functions_an_admin() {
    let a = acl(USERS);
    setuser(&a, "kp on >k ~app:* -@all +@read +@scripting").unwrap();
    setuser(&a, "all on >x ~* &* +@all").unwrap();
    setuser(&a, "fdel on >x ~* &* -@all +function|load +function|delete").unwrap();
    for name in ["reader", "writer", "split", "any", "kp"] {
        for line in [
            "EVAL x 0",
            "EVAL x 1 app:1",
            "EVALSHA x 0",
            "EVAL_RO x 0",
            "EVALSHA_RO x 0",
            "FCALL f 0",
            "FCALL_RO f 0",
        ] {
            assert_eq!(run(&a, name, line), Err(Denial::Command), "{name}: {line}");
        }
    }
    assert_eq!(run(&a, "admin", "EVAL x 0"), Ok(()));
    assert_eq!(run(&a, "all", "FCALL f 0"), Ok(()));
    // Loading runs nothing: as the mode says.
    assert_eq!(run(&a, "any", "FUNCTION LOAD code"), Ok(()));
    assert_eq!(run(&a, "any", "SCRIPT LOAD x"), Ok(()));
    // REPLACE: the right to delete a library.
    for line in ["FUNCTION LOAD REPLACE code", "FUNCTION LOAD rEpLaCe code"] {
        assert_eq!(run(&a, "any", line), Err(Denial::Command), "{line}");
        assert_eq!(run(&a, "admin", line), Ok(()), "{line}");
        assert_eq!(run(&a, "fdel", line), Ok(()), "{line}");
    }
    // The code itself may read "replace".
    assert_eq!(run(&a, "any", "FUNCTION LOAD replace"), Ok(()));
    // WITHCODE and DUMP: the right to load one.
    for line in [
        "FUNCTION LIST WITHCODE",
        "FUNCTION LIST LIBRARYNAME x withcode",
        "FUNCTION DUMP",
    ] {
        assert_eq!(run(&a, "reader", line), Err(Denial::Command), "{line}");
        assert_eq!(run(&a, "any", line), Ok(()), "{line}");
    }
    assert_eq!(run(&a, "reader", "FUNCTION LIST"), Ok(()));
    assert_eq!(
        run(&a, "reader", "FUNCTION LIST LIBRARYNAME withcode"),
        Ok(())
    );
    // What ACL LOG records: the call.
    let cmd = resolve(&Call::line("EVAL x 0").args()).unwrap();
    let call = Call::line("EVAL x 0");
    assert_eq!(
        explain(&user(&a, "writer"), cmd, &call.args()),
        Some(("command", b"eval".to_vec()))
    );
}

/// Issue 30: a line without a channel rule has acl-pubsub-default's
/// channels (none by default), except in mode admin.
#[test]
fn channels_default_to_acl_pubsub_default() {
    let a = acl("user r on nopass mode read\nuser w on nopass mode write &news\nuser adm on nopass mode admin\n");
    assert_eq!(run(&a, "r", "SUBSCRIBE x"), Err(Denial::Channel));
    assert_eq!(run(&a, "w", "PUBLISH news m"), Ok(()));
    assert_eq!(run(&a, "w", "PUBLISH other m"), Err(Denial::Channel));
    assert!(user(&a, "adm").unrestricted);
    assert_eq!(
        user(&a, "r").canonical,
        "r on nopass ~* resetchannels mode read"
    );
    let a = acl("user r on nopass mode read\nacl-pubsub-default allchannels\n");
    assert_eq!(run(&a, "r", "SUBSCRIBE x"), Ok(()));
    // ACL SETUSER: a new user, and `reset`, follow it too.
    setuser(&a, "n on nopass +@all ~*").unwrap();
    assert!(user(&a, "n").unrestricted);
    setuser(&a, "n reset on nopass +@all ~*").unwrap();
    assert!(user(&a, "n").unrestricted);
    let a = acl("");
    setuser(&a, "n on nopass +@all ~*").unwrap();
    assert_eq!(run(&a, "n", "SUBSCRIBE x"), Err(Denial::Channel));
}
