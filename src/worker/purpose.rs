//! What a request sent to a node is for: the tag each in-flight entry
//! carries through a connection's FIFO and back with its reply
//! (`backend::Tag`). The backend pairs replies with requests and knows
//! nothing of these; the worker reads them where a reply arrives
//! (`reply.rs::on_reply`, one arm per purpose) and where a connection
//! fails.

/// An in-flight request of this worker.
pub(crate) type InFlight = crate::backend::InFlight<Purpose>;
/// A connection of this worker.
pub(crate) type Backend = crate::backend::Backend<Purpose>;
/// What a connection's read gives this worker.
pub(crate) type Read = crate::backend::Read<Purpose>;

/// What the worker does with the reply to an in-flight request: the
/// backend's opaque [`Tag`](crate::backend::Tag), read only here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A client's request: the reply goes to `session` at `seq`.
    Client,
    /// One part of a fanned-out request: folds into the merge at `seq`.
    Part(u32),
    /// SCAN on the master with this index: the keys join the page being
    /// filled in the merge at `seq` (`worker/fanout/mod.rs`).
    Scan(u32),
    /// WAIT / WAITAOF part `part` for master `shard`: a PING on the
    /// session's shared connection; once answered, the WAIT goes on a
    /// lease (`worker/admin.rs`), behind the restore that sets the lease's
    /// write offset when the session `wrote` there.
    WaitSync { part: u16, shard: u16, wrote: bool },
    /// A whole transaction (MULTI ... EXEC in one frame): every reply but
    /// the last (EXEC's) is checked for redirects and dropped.
    Txn,
    /// A blocking command on a leased connection.
    Blocking,
    /// A PING on a shared connection after a blocking command sent in
    /// arrival order on a lease to the same node: answered, that command
    /// was read by the node, and the command numbered `seq` leaves
    /// `shared::block_order` (`worker/blocking.rs`).
    ReadCheck,
    /// A part of the gathering at `seq` sent on a lease (SCRIPT / FUNCTION
    /// KILL, WAIT, FUNCTION STATS, PING while a script runs long): the
    /// lease goes back when answered.
    Kill(u32),
    /// ASKING before a redirected request: its +OK is dropped.
    Asking,
    /// SCRIPT LOAD / FUNCTION LOAD of a remembered text before a call sent
    /// again to a node that lacked it: its reply is dropped. Also used for
    /// other commands of the proxy's own whose reply nobody reads (the
    /// restore before a WAIT, CLIENT UNBLOCK of a lease).
    Reload,
    /// A connection set-up command (HELLO 3, READONLY): dropped, but an
    /// error fails the connection.
    Init,
    /// A client's GET (or one-slot MGET) whose reply fills the reply cache
    /// under this ticket (`crate::cache`); otherwise exactly `Client`.
    Fill(u32),
    /// A fan-out MGET part (of at most 64 keys, so the part number fits
    /// 16 bits) whose reply fills the cache under the ticket (the second
    /// number); otherwise exactly `Part`.
    FillPart(u16, u32),
    /// CLIENT TRACKING ON REDIRECT <tracker> OPTIN on a shared connection:
    /// an error leaves its tracking off.
    Tracking,
    /// CLIENT CACHING YES before a `Fill`: an error means tracking is off
    /// on the connection, and the `Fill` behind it fills nothing.
    Caching,
    /// CLIENT ID on a tracker connection: its reply is the id shared
    /// connections redirect their invalidations to.
    TrackerId,
    /// CLIENT ID on a new lease: its reply is `Backend::node_id`, what
    /// CLIENT UNBLOCK names to the node (`worker/blocking.rs`).
    LeaseId,
    /// On a session's pinned connection (WATCH in force,
    /// `worker/watch.rs`).
    Pin(PinOp),
    /// Another worker's request on a pipe this worker owns
    /// (`backend-sharding yes`): its replies go back to that worker, for
    /// the link whose key is the entry's `seq`.
    Remote(u16),
}

/// What a request on a pinned connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinOp {
    /// WATCH itself: never followed elsewhere (a watch on a shared
    /// connection would abort other sessions' transactions).
    Watch,
    /// A read or write while watching; a redirect breaks the pin and is
    /// followed off it, as for `Client`.
    Cmd,
    /// A blocking command while watching (the session is `Blocked` on the
    /// pin meanwhile, so a client leaving mid-block closes it); followed
    /// off it on a lease, as `Blocking`.
    Block,
    /// `MULTI, the queued requests, EXEC` (as `Txn`): the pin is released
    /// with its reply.
    Exec,
    /// UNWATCH sent to release the pin, in the place of the client's
    /// command that released it, which gets the answer named here: the
    /// connection goes back idle only when it answers +OK with nothing
    /// else in flight.
    Release(Release),
}

/// The answer to the command that released a pin with an UNWATCH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// UNWATCH, DISCARD, a session that left (nobody to answer): +OK.
    Ok,
    /// RESET: +RESET.
    Reset,
    /// EXEC of a broken pin: nil.
    ExecNil,
    /// EXEC of a doomed transaction: EXECABORT.
    ExecAbort,
}

impl Purpose {
    /// A fill's plain purpose and its ticket (`None` for anything else):
    /// what a fill becomes when it will not fill after all.
    pub fn unfilled(self) -> Option<(Purpose, u32)> {
        match self {
            Purpose::Fill(t) => Some((Purpose::Client, t)),
            Purpose::FillPart(p, t) => Some((Purpose::Part(u32::from(p)), t)),
            _ => None,
        }
    }
}

impl crate::backend::Tag for Purpose {
    #[inline]
    fn is_setup(&self) -> bool {
        *self == Purpose::Init
    }
}

impl Purpose {
    /// The worker a pipe's remote request came from.
    #[inline]
    pub fn remote(self) -> Option<u16> {
        match self {
            Purpose::Remote(from) => Some(from),
            _ => None,
        }
    }
}
