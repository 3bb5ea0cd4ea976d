//! Questions one worker asks all the others, and their answers, for the
//! commands whose answer spans every worker: CLIENT LIST and CLIENT KILL
//! (each worker owns its sessions), and INFO / CONFIG RESETSTAT (each
//! worker publishes or clears its own counters first).
//!
//! ```text
//!  asking worker                                  every other worker
//!   ring slot = merge of N parts
//!   handoff request ──► acceptor: accepts what waits, hands it over
//!   HandedOver ◄── acceptor (behind those Accepts in every mailbox)
//!   ── Ask ──► fabric ──► its own part
//!   own part folded at once                            │
//!   last part folded ─► reply ◄── fabric ◄── Answer ───┘
//! ```
//!
//! The asking session's ring slot stays pending until every part is in,
//! so replies keep their order. The handoff first (`Shared::
//! request_handoff`) makes every connection a client already has visible
//! to the question. Bounds: a worker has at most [`MAX_ASKS_IN_FLIGHT`]
//! questions out or waiting for a handoff at once (more get an error at
//! once); a question the peer's full mailbox refuses counts as an error
//! part; an answer the asker's full mailbox refuses waits in the peer's
//! outbox (bounded by the askers' limits) and is retried every tick.

use bytes::Bytes;
use reactor::Key;
use std::sync::Arc;

/// Questions out at once per asking worker.
pub const MAX_ASKS_IN_FLIGHT: usize = 1024;

/// The reply when that bound is reached.
pub const ERR_BUSY: &[u8] =
    b"-ERR mithril: too many cross-worker requests in progress, try again\r\n";
/// The part of a worker whose mailbox was full.
pub const ERR_PEER_BUSY: &[u8] = b"-ERR mithril: a worker's mailbox is full, try again\r\n";

/// Client kinds, as CLIENT LIST TYPE and CLIENT KILL TYPE name them. The
/// proxy has no master or replica clients: those filters match nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientType {
    Normal,
    Master,
    Replica,
    Pubsub,
}

/// Which sessions CLIENT LIST shows. Parsed, and matched against a
/// session, by the CLIENT command's code (it knows a session; this layer
/// does not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListFilter {
    All,
    Type(ClientType),
    Ids(Vec<u64>),
}

/// Which sessions CLIENT KILL closes. Every filter given must match.
/// Parsed and matched like [`ListFilter`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillFilter {
    /// The old form, `CLIENT KILL ip:port`: answers +OK or an error.
    pub old_form: bool,
    pub id: Option<u64>,
    pub ctype: Option<ClientType>,
    pub addr: Option<String>,
    pub laddr: Option<String>,
    /// Only the sessions logged in as this user (`default` for those that
    /// never authenticated as another).
    pub user: Option<String>,
    /// Spare the calling connection (the new form's default).
    pub skipme: bool,
    /// The calling connection's id.
    pub caller: u64,
}

pub enum Ask {
    /// Publish a fresh snapshot (INFO reads them next).
    Publish,
    /// Forget every counter, then publish (CONFIG RESETSTAT).
    Reset,
    /// CLIENT LIST lines of the matching sessions.
    List(ListFilter),
    /// Close the matching sessions; answer how many.
    Kill(KillFilter),
    /// CLIENT UNBLOCK: the session with this id, if blocked on a lease,
    /// is unblocked by its node (as timed out, or with an error); answer
    /// 1 for it, else 0.
    Unblock { id: u64, error: bool },
}

/// A question, from worker `from` about its session's ring slot `seq`.
pub struct AskMsg {
    pub from: usize,
    pub session: Key,
    pub seq: u64,
    pub part: u32,
    pub ask: Arc<Ask>,
}

/// One part of the answer, back to the asking worker.
pub struct AnswerMsg {
    pub session: Key,
    pub seq: u64,
    pub part: u32,
    pub frame: Bytes,
}
