//! An EXEC in flight some of whose queued commands an ACL change refused
//! (`worker/txn.rs`): their errors wait for the node's reply to the rest,
//! to be spliced into EXEC's reply.
//!
//! Invariant: what is kept belongs to the EXEC whose reply took the ring
//! slot `seq`, and is handed out only for that slot's reply.

use super::Session;

/// The queued commands an ACL change refused at EXEC: their places in
/// EXEC's reply and their errors, spliced in when the node's reply to
/// the rest arrives (`worker/txn.rs`).
pub struct ExecDenied {
    /// The sequence number of EXEC's reply.
    pub seq: u64,
    /// (place in the transaction, NOPERM error line), in order.
    pub errors: Vec<(usize, bytes::Bytes)>,
}

impl Session {
    /// The EXEC being dispatched (its reply takes the next ring slot) had
    /// the queued commands `errors` names refused: (place, NOPERM line).
    pub fn deny_at_exec(&mut self, errors: Vec<(usize, bytes::Bytes)>) {
        self.exec_denied = Some(Box::new(ExecDenied {
            seq: self.ring.next_seq(),
            errors,
        }));
    }

    /// The refusals of the EXEC whose reply is at ring slot `seq`, taken;
    /// `None` (and anything else kept) when there are none for it.
    #[inline]
    pub fn take_exec_denied(&mut self, seq: u64) -> Option<Box<ExecDenied>> {
        match self.exec_denied.take() {
            Some(d) if d.seq == seq => Some(d),
            other => {
                self.exec_denied = other;
                None
            }
        }
    }
}
