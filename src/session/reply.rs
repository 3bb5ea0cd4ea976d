//! CLIENT REPLY: which of a session's replies it is sent. OFF silences
//! every reply until ON; SKIP silences its own and the next command's.
//! The silenced ring sequences are dropped as they leave (`output.rs`).
//!
//! Invariant: the mode changes only through `set_reply_mode` (the command)
//! and `after_command` (SKIP moving on); `quiet` holds the silenced ranges
//! in order, adjacent ones merged, each with a slot still in the ring.

use super::Session;

/// CLIENT REPLY's state, as Redis's REPLY_OFF, REPLY_SKIP and
/// REPLY_SKIP_NEXT client flags.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplyMode {
    pub off: bool,
    /// The command being dispatched is silenced (set by the SKIP before).
    pub skip: bool,
    /// Set by CLIENT REPLY SKIP: the next command becomes `skip`.
    pub skip_next: bool,
}

impl ReplyMode {
    #[inline]
    fn any(self) -> bool {
        self.off || self.skip || self.skip_next
    }
}

/// What CLIENT REPLY asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientReply {
    On,
    Off,
    Skip,
}

impl Session {
    /// CLIENT REPLY's state now.
    #[inline]
    pub fn reply_mode(&self) -> ReplyMode {
        self.reply_mode
    }

    /// CLIENT REPLY ON / OFF / SKIP (RESET: ON). SKIP under OFF changes
    /// nothing, as in Redis.
    pub fn set_reply_mode(&mut self, to: ClientReply) {
        let m = &mut self.reply_mode;
        match to {
            ClientReply::On => *m = ReplyMode::default(),
            ClientReply::Off => m.off = true,
            ClientReply::Skip => {
                if !m.off {
                    m.skip_next = true;
                }
            }
        }
    }

    /// After dispatching a command whose ring slots start at `first`:
    /// under CLIENT REPLY OFF or SKIP its replies are dropped as they
    /// leave, except when `confirms` (a SUBSCRIBE-family command: Redis
    /// sends its confirmations as pushes, whatever the mode); then a SKIP
    /// moves on to the next command. Costs one test when CLIENT REPLY was
    /// never used.
    #[inline]
    pub fn after_command(&mut self, first: u64, confirms: bool) {
        let m = self.reply_mode;
        if !m.any() {
            return;
        }
        let end = self.ring.next_seq();
        if !confirms && first < end {
            match self.quiet.back_mut() {
                Some(last) if last.end == first => last.end = end,
                _ => self.quiet.push_back(first..end),
            }
        }
        self.reply_mode.skip = m.skip_next;
        self.reply_mode.skip_next = false;
    }

    /// The reply at ring sequence `seq` (the front's) is to be dropped;
    /// ranges wholly behind it are forgotten.
    #[inline]
    pub(super) fn silenced(&mut self, seq: u64) -> bool {
        while let Some(r) = self.quiet.front() {
            if r.end <= seq {
                self.quiet.pop_front();
            } else {
                return r.start <= seq;
            }
        }
        false
    }
}
