//! The masters a session wrote to since its last WAIT (`worker/admin.rs`):
//! which masters a WAIT must ask.
//!
//! Invariant: every write dispatched is noted (`note_write`), a redirected
//! one as "every master" (`note_redirected_write`), and a WAIT takes the
//! record whole (`take_written`), so it covers exactly the writes since
//! the last one.

use super::Session;

/// The masters a session wrote to since its last WAIT, as shard indexes
/// of one topology epoch: a bit each for the first 64, `all` for a later
/// one, a write to several shards, writes under an older epoch (whose
/// indexes may name other masters now), or a redirected request (it went
/// to a master its slot's index does not name). Set at dispatch with a compare
/// and an OR, nothing allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub epoch: u64,
    pub bits: u64,
    pub all: bool,
}

impl Written {
    /// A write dispatched to shard `shard` (`None`: several, or unknown)
    /// under topology `epoch`.
    #[inline]
    pub fn note(&mut self, epoch: u64, shard: Option<usize>) {
        if self.epoch != epoch {
            self.all |= self.bits != 0;
            self.bits = 0;
            self.epoch = epoch;
        }
        match shard {
            Some(i) if i < 64 => self.bits |= 1 << i,
            _ => self.all = true,
        }
    }

    /// The shards a WAIT must ask under topology `epoch` of the `masters`
    /// masters from shard `first` on (the session's pool's): `None` for
    /// every master, an empty list when nothing was written. Clears the
    /// record (the WAIT covers those writes).
    pub fn take(&mut self, epoch: u64, first: usize, masters: usize) -> Option<Vec<usize>> {
        let was = std::mem::take(self);
        if was.all || (was.bits != 0 && was.epoch != epoch) {
            return None;
        }
        Some(
            (first..(first + masters).min(64))
                .filter(|i| was.bits & (1 << i) != 0)
                .collect(),
        )
    }
}

impl Session {
    /// A write dispatched to shard `shard` (`None`: several, or unknown)
    /// under topology `epoch`.
    #[inline]
    pub fn note_write(&mut self, epoch: u64, shard: Option<usize>) {
        self.written.note(epoch, shard);
    }

    /// A request of it was redirected: a write may land on a master its
    /// record does not name, so its next WAIT asks every master.
    #[inline]
    pub fn note_redirected_write(&mut self) {
        self.written.all = true;
    }

    /// WAIT: the shards it must ask (see `Written::take`); the record is
    /// cleared.
    pub fn take_written(&mut self, epoch: u64, first: usize, masters: usize) -> Option<Vec<usize>> {
        self.written.take(epoch, first, masters)
    }
}
