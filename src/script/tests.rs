use super::*;

fn names(code: &str) -> Vec<String> {
    function_names(code.as_bytes())
        .into_iter()
        .map(|n| String::from_utf8(n).unwrap())
        .collect()
}

#[test]
fn scripts_are_kept_by_sha_and_found_again() {
    let r = Registry::new(1 << 20);
    let sha = r.note_script(b"return 1");
    assert_eq!(
        &sha1::hex(&sha),
        b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
    );
    assert_eq!(r.script(&sha).as_deref(), Some(&b"return 1"[..]));
    // The same body again is one entry.
    r.note_script(b"return 1");
    let f = r.figures();
    assert_eq!((f.scripts, f.script_bytes), (1, 8 + ENTRY_OVERHEAD));
    assert!(r.script(&sha1::digest(b"return 2")).is_none());
    r.clear_scripts();
    assert!(r.script(&sha).is_none());
    assert_eq!(r.figures().script_bytes, 0);
}

#[test]
fn the_budget_evicts_the_least_recently_used() {
    // Room for three bodies of 100 bytes.
    let budget = 3 * (100 + ENTRY_OVERHEAD);
    let r = Registry::new(budget);
    let body = |c: u8| vec![c; 100];
    let a = r.note_script(&body(b'a'));
    let b = r.note_script(&body(b'b'));
    let c = r.note_script(&body(b'c'));
    // Using `a` makes `b` the oldest.
    assert!(r.script(&a).is_some());
    let d = r.note_script(&body(b'd'));
    assert!(r.script(&b).is_none(), "the least recently used went");
    for kept in [a, c, d] {
        assert!(r.has_script(&kept));
    }
    let f = r.figures();
    assert_eq!((f.scripts, f.evictions), (3, 1));
    assert!(f.script_bytes <= budget);
    // A body larger than the whole budget is not kept, and evicts nothing.
    let big = r.note_script(&vec![b'x'; budget as usize]);
    assert!(!r.has_script(&big));
    assert_eq!(r.figures().scripts, 3);
}

#[test]
fn a_zero_budget_keeps_nothing() {
    let r = Registry::new(0);
    let sha = r.note_script(b"return 1");
    assert!(r.script(&sha).is_none());
    r.insert_library(
        b"lib",
        b"#!lua name=lib\nredis.register_function('f', function() end)",
    );
    assert!(r.library_of(b"f").is_none());
}

#[test]
fn libraries_are_found_by_their_functions() {
    let r = Registry::new(1 << 20);
    let v1 = "#!lua name=lib\nredis.register_function('f1', function() return 1 end)";
    r.insert_library(b"lib", v1.as_bytes());
    let (name, code) = r.library_of(b"f1").unwrap();
    assert_eq!(
        (name.as_slice(), code.as_ref()),
        (&b"lib"[..], v1.as_bytes())
    );
    // A new version replaces the old one and its functions.
    let v2 = "#!lua name=lib\nredis.register_function('f2', function() return 2 end)";
    r.insert_library(b"lib", v2.as_bytes());
    assert!(r.library_of(b"f1").is_none());
    assert_eq!(r.library_of(b"f2").unwrap().1.as_ref(), v2.as_bytes());
    assert_eq!(r.figures().libraries, 1);
    assert_eq!(r.figures().functions, 1);
    r.remove_library(b"lib");
    assert_eq!(r.figures().functions, 0);
    assert!(r.library_of(b"f2").is_none());
    r.insert_library(b"lib", v2.as_bytes());
    r.clear_libraries();
    assert!(r.library_of(b"f2").is_none());
    assert_eq!(r.figures().library_bytes, 0);
}

#[test]
fn an_evicted_library_takes_its_functions_along() {
    let code = |n: u8| {
        format!(
            "#!lua name=l{n}\nredis.register_function('f{n}', function() return 1 end)\n{}",
            "-".repeat(200)
        )
    };
    let one = code(1).len() as u64 + ENTRY_OVERHEAD;
    let r = Registry::new(2 * one + 10);
    for n in 1..=3u8 {
        r.insert_library(format!("l{n}").as_bytes(), code(n).as_bytes());
    }
    assert!(r.library_of(b"f1").is_none());
    assert!(r.library_of(b"f2").is_some());
    assert!(r.library_of(b"f3").is_some());
    assert_eq!(r.figures().evictions, 1);
}

#[test]
fn function_names_as_libraries_write_them() {
    assert_eq!(
        names(
            "#!lua name=mylib\n\
             local function f(keys, args) return 1 end\n\
             redis.register_function('one', f)\n\
             redis.register_function(\"two\", f)\n\
             redis.register_function ( [[three]], f)\n\
             server.register_function([==[four]==], f)\n\
             redis.register_function{function_name='five', callback=f, flags={'no-writes'}}\n\
             redis.register_function({callback=function(k, a) return {1} end, function_name = \"six\"})\n\
             redis.register_function('one', f)\n"
        ),
        ["one", "two", "three", "four", "five", "six"]
    );
    // Computed names are not found, nor are invalid ones; nothing panics
    // on code cut anywhere.
    assert!(names("redis.register_function(name, f)").is_empty());
    assert!(names("redis.register_function('a b', f)").is_empty());
    assert!(names("redis.register_function('esc\\'aped', f)").is_empty());
    let text = "redis.register_function{function_name='x', callback=f}";
    for cut in 0..text.len() {
        let _ = function_names(&text.as_bytes()[..cut]);
    }
    assert!(names("redis.register_function([=[unfinished").is_empty());
}

fn key(body: &str) -> Option<String> {
    literal::first_literal_key(body.as_bytes()).map(|k| String::from_utf8(k).unwrap())
}

#[test]
fn the_first_literal_key_of_a_keyed_call() {
    assert_eq!(
        key("return redis.call('lpush', 'l', 1, 2)").as_deref(),
        Some("l")
    );
    assert_eq!(
        key(r#"redis.pcall("SET","x{t}","1")"#).as_deref(),
        Some("x{t}")
    );
    assert_eq!(key("server.call('get', 'k')").as_deref(), Some("k"));
    // Spacing and newlines anywhere Lua allows them.
    assert_eq!(
        key("redis . call ( \"GET\" ,\n 'a' )").as_deref(),
        Some("a")
    );
    // A key at position 2: the argument before it is passed over.
    assert_eq!(
        key("redis.call('bitop', 'and', 'dest', 'a')").as_deref(),
        Some("dest")
    );
    assert_eq!(
        key("redis.call('bitop', ARGV[1], 'dest', 'a')").as_deref(),
        Some("dest")
    );
    // The command's case does not matter; the key's is kept.
    assert_eq!(
        key("redis.call('HgetAll', 'MyHash')").as_deref(),
        Some("MyHash")
    );
    // No keyed call at all: any master.
    assert_eq!(key("return redis.call('ping')"), None);
    assert_eq!(key("return 1"), None);
    assert_eq!(key(""), None);
}

#[test]
fn calls_with_computed_keys_are_passed_over() {
    // `redis.call ( "GET" , KEYS[1])`: not a literal; the next call is.
    assert_eq!(
        key("local a = redis.call ( \"GET\" , KEYS[1]) return redis.call('incr', 'n')").as_deref(),
        Some("n")
    );
    assert_eq!(key("local k = 'x' redis.call('get', k)"), None);
    assert_eq!(key("redis.call('get', 'k' .. i)"), None);
    assert_eq!(key("redis.call('get', ARGV[1])"), None);
    // The command computed: its key position is unknown.
    assert_eq!(key("redis.call(ARGV[1], 'k')"), None);
    // Commands without a key at a fixed place, or no key.
    assert_eq!(key("redis.call('xread', 'streams', 's', '0')"), None);
    assert_eq!(key("redis.call('object', 'encoding', 'k')"), None);
    assert_eq!(
        key("redis.call('echo', 'k') return redis.call('get', 'g')").as_deref(),
        Some("g")
    );
    // An argument before the key that is not a single token.
    assert_eq!(key("redis.call('bitop', f(x), 'dest', 'a')"), None);
    // Not a call of redis: other tables' `call`.
    assert_eq!(key("other.call('get', 'k')"), None);
    assert_eq!(key("redis.log(redis.LOG_WARNING, 'k')"), None);
}

#[test]
fn comments_and_strings_hide_what_they_contain() {
    assert_eq!(
        key("-- redis.call('get', 'no')\nreturn redis.call('get', 'yes')").as_deref(),
        Some("yes")
    );
    assert_eq!(
        key("--[[ redis.call('get', 'no')\n ]] redis.call('get', 'yes')").as_deref(),
        Some("yes")
    );
    assert_eq!(
        key("--[==[ ]] redis.call('get', 'no') ]==] redis.call('get', 'yes')").as_deref(),
        Some("yes")
    );
    assert_eq!(
        key("local s = \"redis.call('get', 'no')\" redis.call('get', 'yes')").as_deref(),
        Some("yes")
    );
    assert_eq!(
        key("local s = [[redis.call('get', 'no')]] redis.call('get', 'yes')").as_deref(),
        Some("yes")
    );
    // An unfinished comment or string ends the scan.
    assert_eq!(key("--[[ redis.call('get', 'no')"), None);
    assert_eq!(key("local s = 'abc\nredis.call('get', 'no')"), None);
}

#[test]
fn long_strings_and_escapes_as_lua_reads_them() {
    assert_eq!(key("redis.call('set', [[k1]], 'v')").as_deref(), Some("k1"));
    assert_eq!(
        key("redis.call('set', [==[a]]b]==], 'v')").as_deref(),
        Some("a]]b")
    );
    // The newline right after the opening bracket is not in the string.
    assert_eq!(key("redis.call('set', [[\nk]], 'v')").as_deref(), Some("k"));
    assert_eq!(
        key(r"redis.call('set', 'a\'b', 'v')").as_deref(),
        Some("a'b")
    );
    assert_eq!(
        key(r#"redis.call('set', "a\"b\\c", 'v')"#).as_deref(),
        Some("a\"b\\c")
    );
    assert_eq!(
        key(r"redis.call('set', 'a\tb\65\066', 'v')").as_deref(),
        Some("a\tbAB")
    );
    assert_eq!(
        key(r"redis.call('set', '\123x', 'v')").as_deref(),
        Some("{x")
    );
    // An escape the scanner does not decode: the call is passed over.
    assert_eq!(
        key(r"redis.call('set', 'a\xb', 'v') redis.call('get', 'n')").as_deref(),
        Some("n")
    );
    assert_eq!(key(r"redis.call('set', '\300', 'v')"), None);
    // Numbers before the key, in Lua's forms.
    assert_eq!(key("redis.call('bitop', 1e+5, 'k')").as_deref(), Some("k"));
    assert_eq!(key("redis.call('bitop', 0x1F, 'k')").as_deref(), Some("k"));
}

#[test]
fn the_scan_is_bounded() {
    let mut body = "-- ".to_string();
    body.push_str(&"x".repeat(literal::SCAN_LIMIT));
    body.push_str("\nredis.call('get', 'late')");
    assert_eq!(key(&body), None);
    let mut body = "redis.call('get', 'early') --".to_string();
    body.push_str(&"x".repeat(2 * literal::SCAN_LIMIT));
    assert_eq!(key(&body).as_deref(), Some("early"));
}

fn fkey(code: &str, f: &str) -> Option<String> {
    literal::function_literal_key(code.as_bytes(), f.as_bytes())
        .map(|k| String::from_utf8(k).unwrap())
}

#[test]
fn a_function_routes_by_its_own_code() {
    let lib = "#!lua name=lib\n\
        redis.register_function('f1', function(keys, args)\n\
          if args[1] then return redis.call('get', 'a') end\n\
          for i = 1, 3 do redis.call('ping') end\n\
          return 1\n\
        end)\n\
        redis.register_function('f2', function(keys, args) return redis.call('get', 'b') end)\n\
        local function f3(keys, args) return redis.call('get', 'c') end\n\
        redis.register_function('f3', f3)\n\
        local f4 = function(keys, args) return 1 end\n\
        redis.register_function('f4', f4)\n\
        redis.register_function{function_name='f5', callback=function() return redis.call('get', 'e') end}";
    assert_eq!(fkey(lib, "f1").as_deref(), Some("a"));
    assert_eq!(fkey(lib, "f2").as_deref(), Some("b"));
    assert_eq!(fkey(lib, "f3").as_deref(), Some("c"));
    // Its own code names no key: any master, not another function's key.
    assert_eq!(fkey(lib, "f4"), None);
    // The table form is not read: the library's first literal key.
    assert_eq!(fkey(lib, "f5").as_deref(), Some("a"));
    // A function its code has no trace of: the library's first key.
    assert_eq!(fkey(lib, "zz").as_deref(), Some("a"));
    // Nested blocks inside the body do not end it early.
    let nested = "redis.register_function('g', function()\n\
          if true then local x = 1 end\n\
          repeat local y = 2 until true\n\
          while false do end\n\
          return redis.call('set', 'deep', 1)\n\
        end)\n\
        redis.call('get', 'outside')";
    assert_eq!(fkey(nested, "g").as_deref(), Some("deep"));
}

#[test]
fn the_registry_remembers_where_keyless_calls_go() {
    let r = Registry::new(1 << 20);
    let body = b"return redis.call('get', 'foo')";
    // The literal key is kept; each pool's placement places it.
    let slot_of = |k: Option<Bytes>| k.map(|k| crate::topology::key_slot(&k));
    let slot = Some(crate::topology::key_slot(b"foo"));
    assert_eq!(slot_of(r.note_keyless_script(body)), slot);
    let sha = sha1::digest(body);
    assert_eq!(r.script_slot(&sha).map(slot_of), Some(slot));
    // Scanned once: the remembered answer comes back again.
    assert_eq!(r.script_slot(&sha).map(slot_of), Some(slot));
    let plain = r.note_script(b"return 1");
    assert_eq!(r.script_slot(&plain), Some(None));
    assert_eq!(r.script_slot(&sha1::digest(b"unknown")), None);
    // Not kept (a registry of no budget): scanned each time.
    let none = Registry::new(0);
    assert_eq!(slot_of(none.note_keyless_script(body)), slot);
    assert_eq!(none.script_slot(&sha), None);
    // Functions: per name, and forgotten with their library.
    r.insert_library(
        b"lib",
        b"#!lua name=lib\nredis.register_function('f', function() return redis.call('get', 'bar') end)",
    );
    assert_eq!(
        slot_of(r.function_slot(b"f")),
        Some(crate::topology::key_slot(b"bar"))
    );
    assert_eq!(
        slot_of(r.function_slot(b"f")),
        Some(crate::topology::key_slot(b"bar"))
    );
    r.insert_library(
        b"lib",
        b"#!lua name=lib\nredis.register_function('f', function() return redis.call('get', 'baz') end)",
    );
    assert_eq!(
        slot_of(r.function_slot(b"f")),
        Some(crate::topology::key_slot(b"baz"))
    );
    r.remove_library(b"lib");
    assert_eq!(r.function_slot(b"f"), None);
}

#[test]
fn function_flags_say_whether_it_runs_over_maxmemory() {
    let code = b"#!lua name=lib\n\
        redis.register_function('plain', function(k, a) return redis.call('set', k[1], '{') end)\n\
        redis.register_function{function_name='ro', callback=function() local t = {1, {2}} return 'x' end, flags={'no-writes'}}\n\
        redis.register_function{\n  function_name = \"oom\",\n  callback = function() return 1 end,\n  flags = { \"allow-oom\", 'no-cluster' }\n}\n\
        redis.register_function{function_name='other', callback=function() return 1 end, flags={'no-cluster'}}\n\
        redis.register_function{function_name='none', callback=function() return 1 end}";
    assert_eq!(runs_over_memory(code, b"plain"), Some(false));
    assert_eq!(runs_over_memory(code, b"ro"), Some(true));
    assert_eq!(runs_over_memory(code, b"oom"), Some(true));
    assert_eq!(runs_over_memory(code, b"other"), Some(false));
    assert_eq!(runs_over_memory(code, b"none"), Some(false));
    assert_eq!(runs_over_memory(code, b"missing"), None);
}

#[test]
fn a_body_over_maxmemory_runs_as_a_node_would_run_it() {
    use OverMemory::{Refused, Runs};
    for (body, want) in [
        ("redis.call('set', KEYS[1], 1) return 1", Refused),
        ("return redis.pcall(\"LPUSH\", 'l', 'a')", Refused),
        ("return redis.call('get', KEYS[1])", Runs),
        ("return redis.call ( 'incr', 'n' )", Refused),
        ("local c = 'set' return redis.call(c, 'x', 1)", Runs),
        ("return 1", Runs),
        ("#!lua\nreturn 1", Refused),
        ("#!lua flags=no-writes\nreturn redis.call('get', 'x')", Runs),
        (
            "#!lua flags=no-cluster,allow-oom\nredis.call('set', 'x', 1)",
            Runs,
        ),
        ("#!lua flags=\nreturn 1", Refused),
    ] {
        assert_eq!(over_memory(body.as_bytes()), want, "{body}");
    }
}
