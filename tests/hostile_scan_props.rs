//! Seeded random-stream property test for the RESP scanners (issue 5, item
//! 7), run by `make test`: the checks of the fuzz targets
//! (`tests/fuzz/oracle.rs`: whole versus chunked feeding, and a reference
//! parser) over streams built from valid frames with random damage, plus
//! every input the fuzzers once found a bug with
//! (`tests/fuzz/corpus/regressions/`).

#[path = "fuzz/oracle.rs"]
mod oracle;
mod support;

use std::path::Path;
// Seeded: the same streams on every run.
use support::Rng;

fn bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn random_bytes(rng: &mut Rng, max: u64) -> Vec<u8> {
    let n = rng.below(max + 1) as usize;
    (0..n)
        .map(|_| {
            // Mostly printable, sometimes the bytes that matter.
            match rng.below(10) {
                0 => b'\r',
                1 => b'\n',
                2 => *b"*$:\"' \\\0".get(rng.below(8) as usize).unwrap_or(&b'x'),
                _ => b'a' + rng.below(26) as u8,
            }
        })
        .collect()
}

fn request(rng: &mut Rng, out: &mut Vec<u8>) {
    match rng.below(6) {
        0 => {
            // Inline, quotes included.
            let words: &[&[u8]] = &[b"GET", b"SET", b"\"a b\"", b"'c'", b"x\\n", b"\"\\x41\""];
            for i in 0..1 + rng.below(4) {
                if i > 0 {
                    out.push(b' ');
                }
                out.extend_from_slice(rng.pick(words));
            }
            out.extend_from_slice(if rng.below(2) == 0 { b"\r\n" } else { b"\n" });
        }
        1 => out.extend_from_slice(rng.pick(&[b"*0\r\n", b"*-1\r\n", b"\r\n", b"*-5\r\n"])),
        _ => {
            let n = 1 + rng.below(12) as usize;
            out.extend_from_slice(format!("*{n}\r\n").as_bytes());
            for _ in 0..n {
                let max = if rng.below(20) == 0 { 20_000 } else { 12 };
                let arg = random_bytes(rng, max);
                bulk(out, &arg);
            }
        }
    }
}

fn reply(rng: &mut Rng, out: &mut Vec<u8>, depth: u32) {
    let leaf = depth > 3 || rng.below(3) > 0;
    if leaf {
        match rng.below(14) {
            // Header lines near the 32-byte limit, and what is refused.
            12 => {
                let digits = "9".repeat(rng.below(40) as usize);
                out.extend_from_slice(format!(":{digits}\r\n").as_bytes());
            }
            13 => out.extend_from_slice(rng.pick(&[
                b"$?\r\n",
                b"*?\r\n",
                b"$-2\r\n",
                b"%-1\r\n",
                b"#x\r\n",
                b"_x\r\n",
                b"=2\r\nab\r\n",
                b":-0\r\n",
                b":01\r\n",
            ])),
            0 => out.extend_from_slice(b"+OK\r\n"),
            1 => out.extend_from_slice(b"-ERR x\r\n"),
            2 => out.extend_from_slice(format!(":{}\r\n", rng.next() as i64).as_bytes()),
            3 => out.extend_from_slice(b"$-1\r\n"),
            4 => out.extend_from_slice(b"_\r\n"),
            5 => out.extend_from_slice(b"#t\r\n"),
            6 => out.extend_from_slice(b",3.14\r\n"),
            7 => out.extend_from_slice(b"(12345678901234567890\r\n"),
            8 => out.extend_from_slice(b"=8\r\ntxt:abcd\r\n"),
            9 => out.extend_from_slice(b"!5\r\nERR x\r\n"),
            _ => {
                let data = random_bytes(rng, 40);
                bulk(out, &data);
            }
        }
        return;
    }
    let kinds: &[&[u8]] = &[b"*", b"%", b"~", b">", b"|"];
    let kind = rng.pick(kinds);
    let n = rng.below(4) as usize;
    out.extend_from_slice(kind);
    out.extend_from_slice(format!("{n}\r\n").as_bytes());
    let elements = if matches!(kind, b"%" | b"|") {
        2 * n
    } else {
        n
    };
    for _ in 0..elements {
        reply(rng, out, depth + 1);
    }
    if kind == b"|" {
        reply(rng, out, depth + 1);
    }
}

/// Damage: flip, drop, duplicate or insert a few bytes.
fn damage(rng: &mut Rng, s: &mut Vec<u8>) {
    for _ in 0..rng.below(3) {
        if s.is_empty() {
            return;
        }
        let at = rng.below(s.len() as u64) as usize;
        match rng.below(4) {
            0 => s[at] = rng.next() as u8,
            1 => {
                s.remove(at);
            }
            2 => {
                let b = s[at];
                s.insert(at, b);
            }
            _ => s.insert(at, *b"\r\n*$0-".get(rng.below(6) as usize).unwrap_or(&b'x')),
        }
    }
}

#[test]
fn request_streams_agree_with_the_reference_however_they_arrive() {
    let mut rng = Rng(0x5EED_0001);
    for _ in 0..6000 {
        let mut stream = vec![rng.next() as u8 & 3, rng.next() as u8];
        for _ in 0..1 + rng.below(8) {
            request(&mut rng, &mut stream);
        }
        if rng.below(2) == 0 {
            let mut body = stream.split_off(2);
            damage(&mut rng, &mut body);
            stream.extend_from_slice(&body);
        }
        oracle::check_requests(&stream);
    }
}

#[test]
fn reply_streams_agree_with_the_reference_however_they_arrive() {
    let mut rng = Rng(0x5EED_0002);
    for _ in 0..6000 {
        let mut stream = vec![0, rng.next() as u8];
        for _ in 0..1 + rng.below(8) {
            reply(&mut rng, &mut stream, 0);
        }
        if rng.below(2) == 0 {
            let mut body = stream.split_off(2);
            damage(&mut rng, &mut body);
            stream.extend_from_slice(&body);
        }
        oracle::check_replies(&stream);
    }
}

#[test]
fn inputs_that_once_found_bugs_stay_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus/regressions");
    let mut seen = 0;
    for (target, check) in [
        ("request_scanner", oracle::check_requests as fn(&[u8])),
        ("reply_scanner", oracle::check_replies as fn(&[u8])),
    ] {
        let Ok(dir) = std::fs::read_dir(root.join(target)) else {
            continue;
        };
        for entry in dir.flatten() {
            let data = std::fs::read(entry.path()).unwrap();
            check(&data);
            seen += 1;
        }
    }
    eprintln!("{seen} regression inputs replayed");
}
