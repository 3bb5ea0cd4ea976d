//! A session's place on the shared pipes (`backend-sharding`,
//! `worker/pipes.rs`): whether its requests go through the nodes' shared
//! pipes, its pipelining score (what `auto` wants for it), and a move
//! between its worker's connections and the pipes.
//!
//! Invariant: where it sends (`pipe`) changes only while nothing of it is
//! in flight, at once or, while `moving`, once its replies are in, with
//! the session waiting at a gate of its own meanwhile; so nothing it
//! sends can overtake what it sent before.

use super::{Session, PIPE_SCORE};
use crate::config::Sharding;

/// What a session's next request does (`steer`).
pub enum Steer {
    /// Dispatched where the session is.
    Go,
    /// The session moved at once (nothing in flight), onto the pipes or
    /// off them; dispatched there.
    Moved(bool),
    /// It must move with replies outstanding: it waits at a gate of its
    /// own until they are in (`Session::finish_move`).
    Wait,
}

impl Session {
    /// Before its next request is dispatched (`yes` and `auto`): its
    /// pipelining score moves, and when it belongs elsewhere it moves there,
    /// at once when nothing of it is in flight, else once its replies are in,
    /// so nothing it sends can overtake what it sent before. On the session
    /// alone: the worker does the rest (`Steer`).
    #[inline]
    pub fn steer(&mut self, mode: Sharding, verdict: bool) -> Steer {
        if self.moving {
            // A gate of its own opened meanwhile: it still waits.
            self.wait_gate();
            return Steer::Wait;
        }
        let busy = !self.ring.is_empty();
        self.pipe_score = if busy {
            (self.pipe_score + 1).min(PIPE_SCORE)
        } else {
            self.pipe_score.saturating_sub(1)
        };
        // A client tracking keys stays on its worker's connections: their
        // invalidations reach this worker's trackers.
        let want = self.tracking().is_none()
            && match mode {
                Sharding::No => false,
                Sharding::Yes => true,
                Sharding::Auto => {
                    verdict
                        && if self.pipe {
                            self.pipe_score < PIPE_SCORE
                        } else {
                            self.pipe_score == 0
                        }
                }
            };
        if want == self.pipe {
            return Steer::Go;
        }
        if self.ring.pending() == 0 {
            self.pipe = want;
            return Steer::Moved(want);
        }
        self.moving = true;
        self.wait_gate();
        Steer::Wait
    }

    /// Its requests go through the nodes' shared pipes.
    #[inline]
    pub fn on_pipe(&self) -> bool {
        self.pipe
    }

    /// It waits for its replies to move (`Steer::Wait`).
    #[inline]
    pub fn moving(&self) -> bool {
        self.moving
    }

    /// A session waiting to move whose replies are all in moves: where it
    /// is now (`true`: on the pipes), or `None` when it still waits (or
    /// was not moving). Its own gate opens.
    pub fn finish_move(&mut self) -> Option<bool> {
        if !self.moving || self.ring.pending() > 0 {
            return None;
        }
        self.moving = false;
        self.pipe = !self.pipe;
        self.gate_opened();
        Some(self.pipe)
    }
}
