//! A session's input mode: whether it reads, whether it dispatches, and
//! what wakes it, as one value.
//!
//! ```text
//!               window full                resumed (half drained)
//!   Open ──────────────────────► Paused ──────────────────────► Open, or Backlog
//!    │ ▲                          reads nothing                  (what it read goes first)
//!    │ └── a gate opens ── AtGate ◄── next request on a gated slot
//!    │
//!    ├── blocking command sent ──► Blocked ── answered ──► Open
//!    │                               │ the client left (EOF)
//!    │                               ▼
//!    ├── QUIT, protocol error, ───► Closing: closed once its replies are written
//!    │   CLIENT KILL of itself
//!    └── SYNC / PSYNC ────────────► Feed: a replication feed until it closes
//! ```
//!
//! | mode | reads | dispatches | woken by |
//! |---|---|---|---|
//! | `Open` | yes | yes | - |
//! | `Paused` | no | only while its window has room | resuming (after a flush); a gate opening, if `gated` |
//! | `Backlog` | after its buffered requests | yes | - (it is on the ready list) |
//! | `AtGate` | yes | not its next request | a gate opening |
//! | `Blocked` | yes, so a client leaving mid-block is noticed | no | the blocking command's answer |
//! | `Closing` | no | no; its input is dropped | - |
//! | `Feed` | yes, so its close is noticed | no; its input (REPLCONF ACK) is dropped | - (its output is the masters' streams, `worker/replfeed.rs`) |
//!
//! `Worker::process_input` looks at the mode before each request, in one
//! `match`: a closing session drops its input, a blocked one waits; in the
//! other modes the dispatch window comes next (a full one pauses), then
//! the request's gate (a gated request waits at it). A paused session
//! whose window has room again (replies drained, but not yet to half)
//! dispatches what it holds whenever it is looked at, and stays paused:
//! the pause stops reading, resuming restarts it. What it dispatches that
//! way may block or close it, and then it is `Blocked` or `Closing`.
//!
//! Three facts stay flags beside the mode, because they hold or not
//! whatever the mode and must not erase it. `eof` and `hup` are about the
//! socket: the client half-closed; the peer closed, so read through to
//! the EOF. An EOF while `Blocked` abandons the block; in the other modes
//! the session closes once what it sent is answered (`finished`).
//! `Pressure::over_hard` is about the output: the hard output limit was
//! passed where a reply was appended. The session is then closed at this
//! turn's flush in whatever mode, dropping its input meanwhile, and a
//! blocked one must still have its lease closed with it, so it cannot
//! take `Blocked`'s place.
//!
//! The transitions are the methods below; files outside `session/` call
//! them and read the mode with [`Session::input`].

use super::Session;
use reactor::Key;

/// What a session's input may do now (see the module doc).
///
/// A plain `u8` tag, with the modes that dispatch first: the check before
/// each request is one compare (a niche-packed tag would cost several).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Input {
    /// Reading and dispatching.
    Open,
    /// The dispatch window is full (see `pressure`): nothing more is read
    /// until its output and outstanding replies are down to half.
    /// `backlog`: requests were left in the read buffer; they go before
    /// any new input. `gated`: its next request also waits for a gate, so
    /// a gate opening wakes it to dispatch what the window allows.
    Paused { backlog: bool, gated: bool },
    /// Resumed from a pause with requests left in its read buffer: they
    /// are dispatched before anything more is read, so a session that
    /// keeps pausing holds at most one read's worth of input.
    Backlog,
    /// Its next request names a slot gated by an earlier request still
    /// being merged or retried (or is cluster-wide while any gate is held):
    /// it stays in the read buffer until a gate opens.
    AtGate,
    /// A blocking command is outstanding at ring slot `seq`: nothing more
    /// is dispatched until it is answered, as a blocked Redis client's
    /// later input waits. `lease`: the dedicated connection carrying it;
    /// `None` while the command waits out a TRYAGAIN, or after the lease
    /// went back to the idle list.
    Blocked { lease: Option<Key>, seq: u64 },
    /// Close once every queued reply is written (QUIT, a protocol error,
    /// CLIENT KILL of itself, a client that left mid-block): nothing more
    /// is read, and what was read is dropped.
    Closing,
    /// A replication feed (SYNC / PSYNC, `worker/replfeed.rs`): its
    /// output is what the masters propagate, for as long as it lives;
    /// what it sends is read (its close must be noticed) and dropped.
    Feed,
}

impl Input {
    /// Paused: reads nothing until resumed.
    #[inline]
    pub fn is_paused(&self) -> bool {
        matches!(self, Input::Paused { .. })
    }

    /// Requests read during a pause still wait to be dispatched.
    #[inline]
    pub fn has_backlog(&self) -> bool {
        matches!(self, Input::Paused { backlog: true, .. } | Input::Backlog)
    }

    #[inline]
    pub fn is_feed(&self) -> bool {
        matches!(self, Input::Feed)
    }

    #[inline]
    pub fn is_blocked(&self) -> bool {
        matches!(self, Input::Blocked { .. })
    }

    /// The lease carrying the outstanding blocking command.
    #[inline]
    pub fn lease(&self) -> Option<Key> {
        match *self {
            Input::Blocked { lease, .. } => lease,
            _ => None,
        }
    }
}

impl Session {
    /// The input mode (see [`Input`]).
    #[inline]
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// The dispatch window is full: stop reading until resumed. Also
    /// after a read while paused (at SIGTERM): the backlog is whatever the
    /// read buffer holds now.
    #[cold]
    pub fn pause(&mut self) {
        let gated = match self.input {
            Input::AtGate => true,
            Input::Paused { gated, .. } => gated,
            Input::Open | Input::Backlog => false,
            Input::Blocked { .. } | Input::Closing | Input::Feed => {
                debug_assert!(false, "pausing a session in {:?}", self.input);
                return;
            }
        };
        self.input = Input::Paused {
            backlog: !self.rbuf.is_empty(),
            gated,
        };
    }

    /// [`Session::pause`], with a backlog whatever the read buffer holds
    /// when `holding` (the rest of a command dispatched in waves).
    #[cold]
    pub fn pause_holding(&mut self, holding: bool) {
        self.pause();
        if let Input::Paused { backlog, .. } = &mut self.input {
            *backlog |= holding;
        }
    }

    /// A command going in waves took its share of this turn: the rest is
    /// a backlog, dispatched before anything more is read (the session is
    /// on the ready list).
    #[cold]
    pub fn leave_rest_as_backlog(&mut self) {
        if let Input::Open | Input::Backlog = self.input {
            self.input = Input::Backlog;
        }
    }

    /// A paused session may dispatch and read again; what it read before
    /// goes first.
    pub fn resume(&mut self) {
        if let Input::Paused { backlog, .. } = self.input {
            self.input = if backlog { Input::Backlog } else { Input::Open };
        }
    }

    /// The requests held back by a pause are about to be dispatched: true
    /// (and the session is open) when there are some.
    #[inline]
    pub fn take_backlog(&mut self) -> bool {
        if let Input::Backlog = self.input {
            self.input = Input::Open;
            return true;
        }
        false
    }

    /// Its next request waits for a gate.
    #[cold]
    pub fn wait_gate(&mut self) {
        match self.input {
            Input::Paused { backlog, .. } => {
                self.input = Input::Paused {
                    backlog,
                    gated: true,
                }
            }
            Input::Open | Input::Backlog | Input::AtGate => self.input = Input::AtGate,
            Input::Blocked { .. } | Input::Closing | Input::Feed => {
                debug_assert!(false, "a gate wait in {:?}", self.input);
            }
        }
    }

    /// A gate of this session opened: true when its input waited for one
    /// (the caller wakes it, to look at its next request again).
    #[cold]
    pub fn gate_opened(&mut self) -> bool {
        match self.input {
            Input::AtGate => {
                self.input = Input::Open;
                true
            }
            Input::Paused {
                backlog,
                gated: true,
            } => {
                self.input = Input::Paused {
                    backlog,
                    gated: false,
                };
                true
            }
            _ => false,
        }
    }

    /// The blocking command at ring slot `seq` was sent on `lease` (sent
    /// again, after a redirect or a retry wait).
    pub fn block(&mut self, lease: Key, seq: u64) {
        debug_assert!(!self.closing(), "blocking a closing session");
        self.input = Input::Blocked {
            lease: Some(lease),
            seq,
        };
    }

    /// Whether the blocking command at `seq` is still waited for (a retry
    /// of one that was abandoned is not sent again).
    #[inline]
    pub fn blocked_at(&self, seq: u64) -> bool {
        matches!(self.input, Input::Blocked { seq: s, .. } if s == seq)
    }

    /// `lease` went back to the idle list (its reply, whatever it says,
    /// is being looked at): this session no longer holds it, even if it
    /// stays blocked (a TRYAGAIN is waited out, then sent on whatever lease
    /// is free).
    pub fn lease_returned(&mut self, lease: Key) {
        if let Input::Blocked {
            lease: held @ Some(_),
            ..
        } = &mut self.input
        {
            if *held == Some(lease) {
                *held = None;
            }
        }
    }

    /// The blocking command was answered: dispatch again.
    pub fn unblock(&mut self) {
        if self.input.is_blocked() {
            self.input = Input::Open;
        }
    }

    /// The client left while blocked: stop waiting, drop what it sent
    /// after the blocking command, and close once the replies it earned
    /// before are written. Returns the lease to close (the node then
    /// cancels the block) and the blocking command's ring slot, to answer
    /// with nothing; `None` when not blocked.
    #[cold]
    pub fn abandon_block(&mut self) -> Option<(Option<Key>, u64)> {
        let Input::Blocked { lease, seq } = self.input else {
            return None;
        };
        self.input = Input::Closing;
        self.rbuf.clear();
        Some((lease, seq))
    }

    /// Close once every queued reply is written; read and dispatch
    /// nothing more. (A blocked session goes through
    /// [`abandon_block`](Self::abandon_block), which hands its lease back.)
    #[cold]
    pub fn close_after_flush(&mut self) {
        debug_assert!(
            !self.input.is_blocked(),
            "closing a blocked session would lose its lease"
        );
        self.input = Input::Closing;
    }

    /// SYNC / PSYNC made it a replication feed: it dispatches nothing
    /// more (`worker/replfeed.rs`).
    #[cold]
    pub fn become_feed(&mut self) {
        debug_assert!(!self.input.is_blocked(), "a blocked session cannot feed");
        self.input = Input::Feed;
    }

    #[inline]
    pub fn closing(&self) -> bool {
        matches!(self.input, Input::Closing)
    }
}
