//! A session's hit arena: where small reply-cache hits (and MGETs answered
//! from the cache) are copied to leave as slices of one buffer, instead of
//! one allocation each.
//!
//! The buffer is taken again from its start once every frame cut from it
//! is written and dropped (`reclaim`, after a flush). When it runs out
//! while frames cut from it still wait (a batch larger than the buffer),
//! a new one is taken, twice the size of the last, up to [`ARENA_MAX`]:
//! so a client whose batches need more settles at a buffer that holds
//! one, and allocates nothing per batch from then on. An idle session
//! drops the buffer and starts again from [`HIT_ARENA`].

use bytes::{Bytes, BytesMut};

impl super::Session {
    /// Its hit arena's buffer, with room for `need` bytes and empty: a
    /// cache hit is written there and split off as a frame; the buffer is
    /// taken again from its start only after a flush wrote every frame.
    #[inline]
    pub fn hit_room(&mut self, need: usize) -> &mut BytesMut {
        self.hit_arena.room(need)
    }
}

/// The arena's first buffer: a batch of small hits (16 of a 39-byte frame
/// is 624 bytes) fits.
pub const HIT_ARENA: usize = 2048;
/// The largest buffer it grows to (a batch needing more takes a buffer
/// per this many bytes).
pub const ARENA_MAX: usize = 64 * 1024;

pub struct HitArena {
    buf: BytesMut,
    /// The size of the next buffer taken.
    size: usize,
    /// A buffer was taken since the start (or the last release).
    taken: bool,
}

impl Default for HitArena {
    fn default() -> Self {
        HitArena {
            buf: BytesMut::new(),
            size: HIT_ARENA,
            taken: false,
        }
    }
}

impl HitArena {
    /// The buffer, with room for `need` bytes. Empty: whatever was written
    /// before was split off or cleared.
    #[inline]
    pub fn room(&mut self, need: usize) -> &mut BytesMut {
        if self.buf.capacity() < need {
            if self.taken {
                // Ran out with frames still out: a larger one this time.
                self.size = (self.size * 2).min(ARENA_MAX);
            }
            self.taken = true;
            self.buf.reserve(self.size.max(need));
        }
        &mut self.buf
    }

    /// What was written since the last cut, as a frame of its own.
    pub fn cut(&mut self) -> Bytes {
        self.buf.split().freeze()
    }

    /// Every frame cut from the buffer is written: take it again from its
    /// start (nothing happens while one is still held elsewhere).
    pub fn reclaim(&mut self) {
        if self.buf.capacity() < self.size / 2 {
            let _ = self.buf.try_reclaim(self.size);
        }
    }

    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// An idle session lets it go.
    pub fn release(&mut self) {
        *self = HitArena::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Write `n` frames of `len` bytes as one batch, then drop them (the
    /// batch written) and reclaim; how many new buffers the batch took.
    fn batch(a: &mut HitArena, n: usize, len: usize) -> usize {
        let mut taken = 0;
        let mut frames = Vec::new();
        for _ in 0..n {
            let before = a.buf.as_ptr() as usize + a.buf.capacity();
            let cap = a.capacity();
            let b = a.room(len);
            if b.capacity() != cap || b.as_ptr() as usize + b.capacity() != before {
                taken += 1;
            }
            b.extend_from_slice(&vec![b'x'; len]);
            frames.push(a.cut());
        }
        drop(frames);
        a.reclaim();
        taken
    }

    #[test]
    fn a_batch_larger_than_the_buffer_settles_at_one_that_holds_it() {
        let mut a = HitArena::default();
        // 100 frames of 31 bytes: 3,100 bytes, more than 2 KiB.
        let first = batch(&mut a, 100, 31);
        assert!(first >= 2, "the first batch needs two buffers: {first}");
        let second = batch(&mut a, 100, 31);
        assert!(second <= 1, "{second}");
        for round in 0..10 {
            assert_eq!(batch(&mut a, 100, 31), 0, "round {round}");
        }
        assert!(a.size <= 8192, "{}", a.size);
    }

    #[test]
    fn small_batches_never_grow_it_and_an_idle_session_starts_over() {
        let mut a = HitArena::default();
        for _ in 0..50 {
            batch(&mut a, 16, 39);
        }
        assert_eq!(a.size, HIT_ARENA);
        for _ in 0..20 {
            batch(&mut a, 1000, 1000);
        }
        assert_eq!(a.size, ARENA_MAX);
        a.release();
        assert_eq!((a.size, a.capacity()), (HIT_ARENA, 0));
    }
}
