//! The YAML tree and the `servers:` lines, below the file-level tests of
//! `compat/tests.rs`; and nasty bytes, which must never panic.

use super::load::{load, Entry, Item, Node, MAX_DEPTH, MAX_VALUES};
use super::*;

fn s(v: &str) -> Node {
    Node::Scalar(v.to_string())
}

fn entry(key: &str, line: usize, value: Node) -> Entry {
    Entry {
        key: key.to_string(),
        line,
        value,
    }
}

fn item(line: usize, v: &str) -> Item {
    Item { line, node: s(v) }
}

#[test]
fn block_style_keeps_every_line() {
    let doc =
        b"# comment\n---\nalpha:\n  listen: 127.0.0.1:22121   # trailing\n  hash_tag: \"{}\"\n  \
                servers:\n   - 127.0.0.1:6379:1\n   - '10.0.0.2:6379:1 two'\n  redis: true\n\
                beta:\n  servers:\n  - a:1:1\n  empty:\n  quoted: 'it''s # not a comment'\n";
    let top = load(doc).unwrap();
    assert_eq!(
        top,
        [
            entry(
                "alpha",
                3,
                Node::Map(vec![
                    entry("listen", 4, s("127.0.0.1:22121")),
                    entry("hash_tag", 5, s("{}")),
                    entry(
                        "servers",
                        6,
                        Node::Seq(vec![
                            item(7, "127.0.0.1:6379:1"),
                            item(8, "10.0.0.2:6379:1 two")
                        ])
                    ),
                    entry("redis", 9, s("true")),
                ])
            ),
            entry(
                "beta",
                10,
                Node::Map(vec![
                    entry("servers", 11, Node::Seq(vec![item(12, "a:1:1")])),
                    entry("empty", 13, s("")),
                    entry("quoted", 14, s("it's # not a comment")),
                ])
            ),
        ]
    );
}

#[test]
fn flow_style_anchors_and_aliases_read_as_libyaml_reads_them() {
    let doc = b"a: {listen: \"127.0.0.1:1\", servers: &s [x:1:1, 'y:2:1 two'],\n    redis: true}\n\
                b:\n  servers: *s\n  tag: !!str 400\n  block: |\n    one\n    two\n";
    let top = load(doc).unwrap();
    let servers = Node::Seq(vec![item(1, "x:1:1"), item(1, "y:2:1 two")]);
    assert_eq!(
        top,
        [
            entry(
                "a",
                1,
                Node::Map(vec![
                    entry("listen", 1, s("127.0.0.1:1")),
                    entry("servers", 1, servers.clone()),
                    entry("redis", 2, s("true")),
                ])
            ),
            entry(
                "b",
                3,
                Node::Map(vec![
                    entry("servers", 4, servers),
                    entry("tag", 5, s("400")),
                    entry("block", 6, s("one\ntwo\n")),
                ])
            ),
        ]
    );
    // An empty file, comments only, or a bare `---`: no pool.
    for doc in [&b""[..], b"# x\n", b"---\n", b"\xef\xbb\xbf"] {
        assert_eq!(load(doc).unwrap(), [], "{doc:?}");
    }
}

#[test]
fn yaml_errors_name_the_line() {
    let cases: &[(&[u8], usize, &str)] = &[
        (
            b"a:\n  b: 1\n    c: 2\n",
            3,
            "mapping values are not allowed",
        ),
        (b"a:\n\tb: 1\n", 2, "tabs"),
        (
            b"a:\n  b: 1\n  b: 2\n",
            3,
            "'b' is given twice in one mapping (first at line 2)",
        ),
        (b"a:\n  h: \"{}\n", 2, "quoted scalar"),
        (b"- a\n", 1, "the document is a list"),
        (b"just text\n", 1, "a single value"),
        (b"a:\n  b: [1, 2\n", 3, "flow sequence"),
        (b"a:\n  b: 1\n\xff\n", 3, "not valid UTF-8"),
        (b"a: *nothing\n", 1, "unknown anchor"),
        (b"? [a]\n: b\n", 1, "a key must be a single value"),
        (b"a: 1\n---\nb: 2\n", 2, "second YAML document"),
        (b"x: &x 1\na:\n  <<: *x\n", 3, "merge keys"),
        (b"a:\n  : 1\n", 2, "a key is empty"),
    ];
    for &(doc, line, text) in cases {
        let e = load(doc).unwrap_err();
        assert_eq!(e.line, line, "{:?}: {e:?}", String::from_utf8_lossy(doc));
        assert!(
            e.message.contains(text),
            "{:?}: {e:?}",
            String::from_utf8_lossy(doc)
        );
    }
}

#[test]
fn nesting_and_aliases_are_bounded() {
    // Flow nesting: the parser has a bound of its own, below ours.
    let deep = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let e = load(deep.as_bytes()).unwrap_err();
    assert!(e.message.contains("recursion limit"), "{e:?}");
    let deep = format!("a: {}{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    let e = load(deep.as_bytes()).unwrap_err();
    assert!(
        e.message.contains(&format!("deeper than {MAX_DEPTH}")),
        "{e:?}"
    );
    let deep = (0..200).fold(String::new(), |mut d, i| {
        d.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        d
    });
    assert!(load(deep.as_bytes())
        .unwrap_err()
        .message
        .contains("deeper"));
    // Nine levels of ten aliases each: a billion values, refused early.
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let e = load(bomb.as_bytes()).unwrap_err();
    assert!(
        e.message
            .contains(&format!("more than {MAX_VALUES} values")),
        "{e:?}"
    );
}

#[test]
fn servers_are_cut_from_the_end_as_nutcracker_cuts_them() {
    let ok = |spec: &str| parse_server(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let s = ok("127.0.0.1:6379:1");
    assert_eq!(
        (s.host.as_str(), s.port, s.weight, s.alias, s.name.as_str()),
        ("127.0.0.1", 6379, 1, None, "127.0.0.1:6379")
    );
    // The name is what follows the last space, colons and all.
    let s = ok("10.0.0.1:6380:5 shard:a");
    assert_eq!((s.weight, s.alias.as_deref()), (5, Some("shard:a")));
    assert_eq!(s.name, "shard:a");
    // The port as written is part of the name; 11211 is left out.
    assert_eq!(ok("127.0.0.1:06379:1").name, "127.0.0.1:06379");
    assert_eq!(ok("127.0.0.1:06379:1").port, 6379);
    assert_eq!(ok("cache:011211:1").name, "cache");
    // A bare IPv6 host is put in brackets; its name stays as written.
    let s = ok("::1:6379:1");
    assert_eq!((s.host.as_str(), s.name.as_str()), ("[::1]", "::1:6379"));
    assert_eq!(ok("[::1]:6379:1").name, "[::1]:6379");
    // A socket: `path:`, weight after the last colon.
    let s = ok("/tmp/redis.sock:2");
    assert!(s.unix);
    assert_eq!((s.weight, s.name.as_str()), (2, "/tmp/redis.sock:"));
    for (spec, why) in [
        ("127.0.0.1:6379:0", "weight is 0"),
        ("127.0.0.1:6379", "host:port:weight"),
        ("127.0.0.1:6379:x", "not a weight"),
        ("127.0.0.1:6379:-1", "not a weight"),
        ("127.0.0.1:0:1", "not a port"),
        ("127.0.0.1:65536:1", "not a port"),
        ("127.0.0.1:+1:1", "not a port"),
        (":6379:1", "host is missing"),
        ("127.0.0.1:6379:1 ", "nothing follows the space"),
        // Two words of name: nutcracker reads the weight as "1 my".
        ("127.0.0.1:6379:1 my name", "not a weight"),
        ("", "host:port:weight"),
    ] {
        let e = parse_server(spec).unwrap_err();
        assert!(e.contains(why), "{spec:?}: {e}");
    }
}

#[test]
fn pool_names_become_valid_names() {
    assert_eq!(pool_name("alpha"), "alpha");
    assert_eq!(pool_name("a.b-c_d9"), "a.b-c_d9");
    assert_eq!(pool_name("my pool/1"), "my_pool_1");
    assert_eq!(pool_name("caf\u{e9}"), "caf_");
}

/// A small deterministic generator (xorshift), so the bytes below are the
/// same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bytes no file should make the reader panic on: cut files, garbage,
/// deep nesting, and a valid file mutated many ways. Errors are fine.
#[test]
fn no_bytes_make_it_panic() {
    let good = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/compat/twemproxy_nutcracker.yml"),
    )
    .unwrap();
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for cut in 0..good.len() {
        inputs.push(good[..cut].to_vec());
    }
    let nasty: &[&[u8]] = &[
        b"\0\0\0",
        b"\xff\xfe\xfd",
        b"\xfe\xff\0a\0:",
        b"::\n - \n-\n  -",
        b"a:\n - [\n",
        b"\"",
        b"a: '",
        b"{",
        b"}",
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        b"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{",
        b"a: &a\nb: *a\nc: *b\n",
        b"&a a: *a\n",
        b"? ? ? ? ? ? ? ?\n",
        b"a: |\n\n\n  x\n b\n",
        b"a: >-\n  \t\n",
        b"%YAML 1.1\n%YAML 1.1\n---\n",
        b"%TAG ! !x\n--- !x\n",
        b"--- ...\n... ---\n",
        b"a: \"\\",
        b"a: \"\\u12\"\n",
        b"a: \"\\UFFFFFFFF\"\n",
        b"!<tag:yaml.org,2002:str> a: b\n",
        b"a:\n  servers:\n   - \n   -\n",
        b"- - - - - - - - - - - - - - - - -\n",
        b"\t\t\t",
        b"\r\r\r\n\r",
        b"\xe2\x80\xa8a: 1\n",
    ];
    inputs.extend(nasty.iter().map(|b| b.to_vec()));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let alphabet = b" \n\t:-#[]{},&*!|>'\"?%@`\\.0123456789abcdefghijklmnopqrstuvwxyz\xc3\xa9";
    for _ in 0..3000 {
        let mut b = good.clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(b.len() + 1);
            match rng.below(3) {
                0 if at < b.len() => b[at] = alphabet[rng.below(alphabet.len())],
                1 if at < b.len() => {
                    b.remove(at);
                }
                _ => b.insert(at, alphabet[rng.below(alphabet.len())]),
            }
        }
        inputs.push(b);
    }
    for _ in 0..500 {
        let len = rng.below(200);
        inputs.push(
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect(),
        );
        inputs.push((0..len).map(|_| rng.next() as u8).collect());
    }
    let mut t = Translation::new();
    for bytes in &inputs {
        // Whatever it answers, it answers.
        let _ = load(bytes);
        t = Translation::new();
        let _ = translate(bytes, "fuzz.yml", &mut t);
    }
    drop(t);
}
