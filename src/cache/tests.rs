use super::*;

fn open(budget: usize) -> ReplyCache {
    let mut c = ReplyCache::new(budget, 0, 7, Default::default());
    c.fills_open = true;
    c
}

fn filled(c: &mut ReplyCache, key: &[u8], frame: &[u8]) {
    let t = c.arm(key, 1, 0).expect("armed");
    assert!(c.fill(key, t, frame, 0));
}

#[test]
fn a_filled_key_hits_until_it_is_invalidated() {
    let mut c = open(1 << 20);
    assert_eq!(c.get_slice(b"k", 0), None);
    filled(&mut c, b"k", b"$1\r\nv\r\n");
    assert_eq!(c.get_slice(b"k", 0), Some(&b"$1\r\nv\r\n"[..]));
    c.invalidate(b"k");
    assert_eq!(c.get_slice(b"k", 0), None);
    assert_eq!(c.entries(), 0);
    assert_eq!(c.bytes(), 0);
}

#[test]
fn one_ticket_per_key_and_only_that_ticket_fills() {
    let mut c = open(1 << 20);
    let t = c.arm(b"k", 1, 0).unwrap();
    assert_eq!(c.arm(b"k", 1, 0), Err(NoFill::Pending));
    assert!(!c.fill(b"k", t.wrapping_add(1), b"$1\r\nx\r\n", 0));
    assert!(c.fill(b"k", t, b"$1\r\nv\r\n", 0));
    // The ticket is spent: a second reply cannot fill.
    assert!(!c.fill(b"k", t, b"$1\r\nw\r\n", 0));
    assert_eq!(c.get_slice(b"k", 0), Some(&b"$1\r\nv\r\n"[..]));
}

#[test]
fn an_invalidation_racing_a_fill_poisons_it() {
    let mut c = open(1 << 20);
    let t = c.arm(b"k", 1, 0).unwrap();
    c.invalidate(b"k");
    assert!(!c.fill(b"k", t, b"$3\r\nold\r\n", 0));
    assert_eq!(c.get_slice(b"k", 0), None);
    assert_eq!(c.stats.poisoned, 1);
    // A later ticket is a new one; the poisoned reply cannot use it.
    let t2 = c.arm(b"k", 1, 0).unwrap();
    assert_ne!(t, t2);
    assert!(!c.fill(b"k", t, b"$3\r\nold\r\n", 0));
    assert!(c.fill(b"k", t2, b"$3\r\nnew\r\n", 0));
}

#[test]
fn a_held_key_arms_no_ticket_until_released() {
    let mut c = open(1 << 20);
    filled(&mut c, b"k", b"$1\r\nv\r\n");
    let b = c.hold(b"k");
    assert_eq!(c.get_slice(b"k", 0), None, "the write invalidated it");
    assert_eq!(c.arm(b"k", 1, 0), Err(NoFill::Held));
    let b2 = c.hold(b"k");
    c.release(b);
    assert_eq!(
        c.arm(b"k", 1, 0),
        Err(NoFill::Held),
        "one write still holds it"
    );
    c.release(b2);
    assert!(c.arm(b"k", 1, 0).is_ok());
}

#[test]
fn generations_flip_under_the_budget_and_keep_what_is_read() {
    let frame = vec![b'x'; 100];
    let per = cost(b"key-000", &frame);
    // Room for about ten entries per generation.
    let mut c = open(per * 20 + 10);
    filled(&mut c, b"hot", &frame);
    for i in 0..200 {
        let k = format!("key-{i:03}");
        filled(&mut c, k.as_bytes(), &frame);
        // Read the hot key now and then: it survives every flip.
        if i % 5 == 0 {
            assert!(c.get_slice(b"hot", 0).is_some(), "hot key lost at {i}");
        }
        assert!(
            c.bytes() <= per * 20 + 10 + per,
            "over budget: {}",
            c.bytes()
        );
    }
    assert!(c.stats.flips > 5);
    assert!(c.get_slice(b"key-000", 0).is_none(), "a cold key ages out");
    assert!(c.get_slice(b"hot", 0).is_some());
}

#[test]
fn a_reply_larger_than_a_generation_is_not_cached() {
    let mut c = open(1000);
    let t = c.arm(b"k", 1, 0).unwrap();
    assert!(!c.fill(b"k", t, &[b'x'; 600], 0));
    assert_eq!(c.entries(), 0);
}

#[test]
fn entries_older_than_the_max_age_are_not_served() {
    let mut c = ReplyCache::new(1 << 20, 100, 1, Default::default());
    c.fills_open = true;
    let t = c.arm(b"k", 1, 0).unwrap();
    assert!(c.fill(b"k", t, b"$1\r\nv\r\n", 1000));
    assert!(c.get_slice(b"k", 1100).is_some());
    assert!(c.get_slice(b"k", 1101).is_none());
    assert_eq!(c.entries(), 0);
}

#[test]
fn a_flush_forgets_everything_and_poisons_fills() {
    let mut c = open(1 << 20);
    filled(&mut c, b"a", b"$1\r\n1\r\n");
    let t = c.arm(b"b", 1, 0).unwrap();
    c.flush();
    assert!(c.is_empty());
    assert!(!c.fill(b"b", t, b"$1\r\n2\r\n", 0));
    assert_eq!(c.get_slice(b"a", 0), None);
}

#[test]
fn paused_fills_arm_nothing() {
    let mut c = ReplyCache::new(1 << 20, 0, 1, Default::default());
    assert_eq!(c.arm(b"k", 1, 0), Err(NoFill::Paused));
}

#[test]
fn admission_follows_the_hit_ratio_with_a_floor() {
    let mut a = Admission::default();
    // No hits at all: one GET in eight is admitted.
    for _ in 0..1000 {
        a.record(1, false);
    }
    let admitted = (0..8000).filter(|_| a.admit(1)).count();
    assert_eq!(admitted, 1000);
    // Eight-key lookups with no hits: one in sixty-four.
    for _ in 0..1000 {
        a.record(8, false);
    }
    let admitted = (0..6400).filter(|_| a.admit(8)).count();
    assert_eq!(admitted, 100);
    // One hit in eight or better: everything is admitted.
    let mut b = Admission::default();
    for i in 0..1000 {
        b.record(1, i % 8 == 0);
    }
    assert!((0..1000).all(|_| b.admit(1)));
    // One hit in 32: a quarter.
    let mut q = Admission::default();
    for i in 0..3200 {
        q.record(1, i % 32 == 0);
    }
    let admitted = (0..4000).filter(|_| q.admit(1)).count();
    assert!((950..=1050).contains(&admitted), "{admitted}");
}

#[test]
fn hashing_a_key_and_its_bytes_handle_agree() {
    let mut c = open(1 << 20);
    let key = Bytes::from_static(b"some-longer-key-name-1234567");
    filled(&mut c, &key, b"$1\r\nv\r\n");
    assert!(c.get_slice(&key[..], 0).is_some());
    assert!(c.get_slice(b"some-longer-key-name-1234568", 0).is_none());
}

#[test]
fn one_ticket_covers_the_keys_of_an_mget_that_can_fill() {
    let mut c = open(1 << 20);
    let pending = c.arm(b"b", 1, 0).unwrap();
    let held = c.hold(b"c");
    let keys: [&[u8]; 3] = [b"a", b"b", b"c"];
    let t = c.arm_all(keys.iter().copied(), 3, 0).expect("a is armable");
    assert!(c.fill(b"a", t, b"$1\r\n1\r\n", 0));
    assert!(!c.fill(b"b", t, b"$1\r\n2\r\n", 0), "b has its own ticket");
    assert!(c.fill(b"b", pending, b"$1\r\n2\r\n", 0));
    assert!(!c.fill(b"c", t, b"$1\r\n3\r\n", 0), "c is held");
    c.release(held);
    // Nothing armable: no ticket at all.
    let t2 = c.arm(b"x", 1, 0).unwrap();
    assert_eq!(c.arm_all([&b"x"[..]].into_iter(), 1, 0), None);
    c.cancel(b"x", t2);
}

#[test]
fn keys_spread_over_the_hold_buckets() {
    let c = open(1 << 20);
    let mut seen = std::collections::HashSet::new();
    for i in 0..1000u32 {
        seen.insert(c.bucket(format!("k{i}").as_bytes()));
    }
    // 1000 keys in 4096 buckets: about 890 distinct if spread evenly.
    assert!(seen.len() > 850, "{}", seen.len());
}

#[test]
fn a_small_hit_is_copied_into_the_arena_and_a_large_one_shared() {
    let mut c = open(1 << 20);
    let small = b"$3\r\nabc\r\n";
    let large = format!("${}\r\n{}\r\n", 100, "x".repeat(100));
    assert!(large.len() > INLINE_FRAME);
    filled(&mut c, b"s", small);
    filled(&mut c, b"l", large.as_bytes());
    let mut arena = BytesMut::with_capacity(256);
    let start = arena.as_ptr();
    let a = c.get(b"s", 0, 0, &mut arena).expect("hit");
    let b = c.get(b"s", 0, 0, &mut arena).expect("hit");
    assert_eq!((&a[..], &b[..]), (&small[..], &small[..]));
    // Copied one after the other into the arena.
    assert_eq!(a.as_ptr(), start);
    assert_eq!(b.as_ptr(), start.wrapping_add(small.len()));
    // Once they are gone, the arena's buffer is taken again from its start.
    drop((a, b));
    arena.reserve(256);
    assert_eq!(arena.as_ptr(), start, "the buffer is reused");
    // A large frame is one allocation, shared by every hit.
    let x = c.get(b"l", 0, 0, &mut arena).expect("hit");
    let y = c.get(b"l", 0, 0, &mut arena).expect("hit");
    assert_eq!(&x[..], large.as_bytes());
    assert_eq!(x.as_ptr(), y.as_ptr());
    assert!(arena.is_empty());
}

#[test]
fn a_tiny_entry_counts_at_least_its_slot_and_index() {
    // A 5-byte nil under a 16-byte key: the slot is what it costs.
    let slot = table::slot_size::<Entry>();
    assert!(
        ENTRY_FLOOR >= slot + 16,
        "floor {ENTRY_FLOOR} < slot {slot} + index"
    );
    assert_eq!(cost(b"key:000000000001", b"$-1\r\n"), ENTRY_FLOOR);
    // A larger one counts its bytes as before.
    let frame = vec![b'x'; 200];
    assert_eq!(cost(b"k", &frame), 1 + 200 + ENTRY_OVERHEAD);
}

#[test]
fn a_prefetched_hash_serves_its_lookup_and_a_changed_key_at_its_address_misses() {
    let mut c = open(1 << 20);
    filled(&mut c, b"a", b"$1\r\n1\r\n");
    filled(&mut c, b"b", b"$1\r\n2\r\n");
    let mut arena = BytesMut::new();
    let mut buf = *b"ab";
    let (a, b) = buf.split_at(1);
    assert_eq!(c.prefetch([a, b].into_iter()), None);
    assert_eq!(
        c.get(a, 0, 0, &mut arena).as_deref(),
        Some(&b"$1\r\n1\r\n"[..])
    );
    assert_eq!(
        c.get(b, 0, 0, &mut arena).as_deref(),
        Some(&b"$1\r\n2\r\n"[..])
    );
    assert_eq!(c.hints.next, 2, "both lookups took the prefetch's hash");
    // The bytes at a hinted address change before the lookup: the hint is
    // not the key's hash, and the lookup misses (never serves "a").
    assert!(c.prefetch([&buf[..1]].into_iter()).is_some());
    buf[0] = b'b';
    assert_eq!(c.get(&buf[..1], 0, 0, &mut arena), None);
    // The hint is spent: the next lookup hashes the key.
    assert_eq!(
        c.get(&buf[..1], 0, 0, &mut arena).as_deref(),
        Some(&b"$1\r\n2\r\n"[..])
    );
}
