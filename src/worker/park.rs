//! Requests that wait for a group's new master.
//!
//! While a sentinel promotes a replica of a group (a pool of groups, see
//! `topology::sentinel`), the map publishes the group without a master. A
//! single-unit request for it is *parked* here rather than refused: its
//! ring slot is reserved (so the session's replies keep their order), and
//! it is sent once a map names the new master, in the order parked. It
//! was never sent, so sending it to the new master is safe for a write
//! too. One still parked when the group's failover wait ends without a master
//! (it lasts [`LONGEST_PARK`] at most) gets the unserved-unit error; so
//! does one that finds [`MAX_PARKED`] requests parked already. The pool's
//! `timeout` does not shorten the wait: it bounds a server's answer, and
//! a parked request is at no server yet.
//!
//! Owns: the parked requests (a FIFO per worker). Reacts at two points:
//! a map installed (`unpark`), and the tick (deadlines). Never: park a
//! request of a unit that is not failing over (a cluster's slot without a master
//! is refused at once, as before), or park a request that was sent.

use super::purpose::{InFlight, Purpose};
use super::{Timer, Worker};
use crate::placement::Unit;
use crate::router;
use bytes::Bytes;
use reactor::{Context, Key};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Most requests one worker keeps parked; past it a request is refused
/// with the unserved-unit error. Each holds its frame until it leaves.
pub(super) const MAX_PARKED: usize = 4096;

/// The longest a request stays parked: a sentinel's failover wait at most.
const LONGEST_PARK: Duration = crate::topology::sentinel::FAILOVER_WAIT;

pub(super) struct Parked {
    session: Key,
    seq: u64,
    unit: Unit,
    read: bool,
    frame: Bytes,
    until: Instant,
}

/// The worker's parked requests, oldest first.
#[derive(Default)]
pub(super) struct ParkLot(VecDeque<Parked>);

impl ParkLot {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Worker {
    /// `unit` has no master: park the request when its group is failing
    /// over (see the module doc), else answer the unserved-unit error.
    #[cold]
    #[inline(never)]
    pub(super) fn park_or_refuse(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        unit: Unit,
        read: bool,
        frame: Bytes,
    ) {
        if !self.place.failing_over(unit) || self.parked.0.len() >= MAX_PARKED {
            return self.reply_static(key, router::ERR_SLOT_UNSERVED);
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let seq = s.ring.push_pending();
        self.parked.0.push_back(Parked {
            session: key,
            seq,
            unit,
            read,
            frame,
            until: cx.now + LONGEST_PARK,
        });
    }

    /// Send the parked requests whose group has a master again, in the
    /// order parked; answer those whose wait is over; keep the rest.
    pub(super) fn unpark(&mut self, cx: &mut Context<'_, Timer>) {
        let lot = std::mem::take(&mut self.parked.0);
        for p in lot {
            let Some(s) = self.sessions.get(p.session) else {
                continue; // its client is gone
            };
            let (proto, sticky) = (s.proto, s.sticky());
            let f = InFlight::new(p.session, p.seq, p.frame.clone(), Purpose::Client);
            match self.place.reader(p.unit, p.read, proto, sticky, cx.now) {
                Some(set) => self.send_to_pool(cx, set, f),
                None if self.place.failing_over(p.unit) && cx.now < p.until => {
                    self.parked.0.push_back(p)
                }
                None => self.fail(cx, f, Bytes::from_static(router::ERR_SLOT_UNSERVED)),
            }
        }
    }
}
