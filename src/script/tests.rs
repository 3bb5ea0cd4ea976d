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
