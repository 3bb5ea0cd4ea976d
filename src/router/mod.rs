//! Routing: what one request does, decided before anything is done.
//!
//! [`decide`] looks at the session's state (a [`View`]), the resolved
//! command, its arguments and the topology snapshot, and returns a
//! [`Decision`]; the worker carries the decision out (`worker/dispatch.rs`,
//! one arm per variant). The function is pure: it reads no socket, no
//! pool, no clock and no global, so every outcome is unit-tested below
//! without a redis-server. A new kind of outcome is a new variant here and
//! one arm in the worker.
//!
//! [`redirect`] reads the cluster's answers that send a request elsewhere
//! (MOVED, ASK); what is done with TRYAGAIN and CLUSTERDOWN is the worker's
//! retry policy (`worker/retry.rs`). `multi` holds the rules of what
//! may be queued inside MULTI.
//!
//! Never: allocate on the plain single-key path (a GET decides to
//! [`Decision::Slot`] with nothing but comparisons and the key's CRC16).

mod multi;
pub mod redirect;

pub use redirect::{
    parse_redirect, Redirect, ASKING, ERR_NO_TOPOLOGY, ERR_SLOT_UNSERVED, ERR_TOO_MANY_REDIRECTS,
    MAX_HOPS,
};

use self::multi::queue_in_txn;
pub use self::multi::runs_immediately;
use crate::acl::{Acl, User};
use crate::command::{self, flags, Args, Command, Fanout, LocalCmd, Rejection, Route, Wide};
use crate::placement::{Locate, Unit};
use crate::resp::Proto;
use bytes::Bytes;

/// `maxmemory` refusal (Redis's text).
pub const ERR_OOM: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";
/// A command a busy server refuses while a script runs.
const ERR_BUSY_SCRIPT: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
/// Over `maxmemory`, to a script whose shebang does not allow it.
const ERR_OOM_SCRIPT: &[u8] = b"-OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'\r\n";
/// The reply to any command but AUTH, HELLO, QUIT and RESET while a client
/// has not authenticated.
pub const ERR_NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
/// DEBUG subcommands refused: they stop, crash or corrupt a node, or
/// create keys in slots it does not own.
pub const DEBUG_REFUSED: &[&str] = &[
    "segfault",
    "panic",
    "restart",
    "crash-and-recover",
    "oom",
    "assert",
    "populate",
    "leak",
];

const ERR_BAD_SLOT: &[u8] = b"-ERR Invalid or out of range slot\r\n";
const ERR_IN_MULTI: &[u8] =
    b"-ERR mithril: this command cannot be used inside MULTI through the proxy\r\n";
/// Keys of several slots in one WATCH, or a command naming a slot other
/// than the watched one's while a WATCH is in force (Redis's text).
pub const ERR_CROSSSLOT: &[u8] = b"-CROSSSLOT Keys in request don't hash to the same slot\r\n";
const ERR_WATCH_IN_MULTI: &[u8] = b"-ERR WATCH inside MULTI is not allowed\r\n";
/// The CLUSTER commands (and READONLY, READWRITE, ASKING) to a client of
/// a pool of standalone servers: what a server without cluster support
/// answers.
pub const ERR_CLUSTER_DISABLED: &[u8] = b"-ERR This instance has cluster support disabled\r\n";

/// Whether a server without cluster support refuses the command with
/// [`ERR_CLUSTER_DISABLED`].
fn is_cluster_command(cmd: &Command) -> bool {
    cmd.name.starts_with("cluster|") || matches!(cmd.name, "readonly" | "readwrite" | "asking")
}

/// A MONITOR client's command that reads or writes keys: a node treats a
/// monitor as a replica, and refuses it so (Redis's text).
pub const ERR_KEYSPACE: &[u8] = b"-ERR Replica can't interact with the keyspace\r\n";
/// DEBUG subcommands whose arguments after the name are keys (all of
/// them for DIGEST-VALUE, the first for the others): sent where their
/// keys live.
pub const DEBUG_KEYED: &[&str] = &[
    "object",
    "sdslen",
    "ziplist",
    "listpack",
    "quicklist",
    "htstats-key",
    "digest-value",
];

/// What the router needs to know of the session (and of the process-wide
/// memory gate) to decide. Built by the worker per request from plain
/// fields; nothing in it is looked up.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub proto: Proto,
    /// AUTH done, or no password required.
    pub authenticated: bool,
    /// Between MULTI and EXEC/DISCARD.
    pub in_txn: bool,
    /// The open transaction queued a command that may grow memory.
    pub txn_denyoom: bool,
    /// Channels plus patterns the session is subscribed to.
    pub subscribed: usize,
    /// The process is over `maxmemory` (false when no budget is set).
    pub over_memory: bool,
    /// In MULTI while a script sent through the proxy runs long on some
    /// master (the registry's stall flag; false outside MULTI).
    pub scripts_busy: bool,
    /// Over `maxmemory`, an EVALSHA or FCALL the script registry knows to
    /// write: a script without `no-writes` or `allow-oom` (the worker looks
    /// it up then; see `script_oom`).
    pub script_writes: bool,
    /// The ACL store and the session's user, when that user is restricted
    /// (None: the user may run everything, the common case).
    pub acl: Option<(&'a Acl, &'a User)>,
    /// A WATCH pins the session to the master of this unit (its
    /// connection is alive).
    pub pin: Option<Unit>,
    /// The unit the open transaction's keys belong to, once it has one
    /// (the watched unit from MULTI on, when watching).
    pub txn_unit: Option<Unit>,
    /// The session is a MONITOR client (a node's replica, for the
    /// keyspace commands it may no longer run).
    pub monitor: bool,
}

/// Why a request is answered with an error before it runs, and what that
/// refusal means for the session's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error frame.
    pub reply: Bytes,
    /// Counted as a rejected command, not a call (statistics), with the
    /// command when it is known.
    pub rejected: Option<Option<&'static Command>>,
    /// An open MULTI is doomed (EXEC answers EXECABORT).
    pub dooms_txn: bool,
}

/// Transaction control handled by the worker's transaction code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOp {
    Multi,
    Exec,
    Discard,
}

/// What a command mithril does not run answers: a cluster node's own
/// refusal where a node has one for the command itself (mithril's face is
/// a cluster node), else Redis's unknown-command error.
fn unsupported_reply(cmd: &Command, args: &Args) -> Bytes {
    let own: &'static [u8] = match cmd.name {
        "swapdb" => b"-ERR SWAPDB is not allowed in cluster mode\r\n",
        "move" => b"-ERR MOVE is not allowed in cluster mode\r\n",
        "replicaof" | "slaveof" => b"-ERR REPLICAOF not allowed in cluster mode.\r\n",
        "failover" => {
            b"-ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.\r\n"
        }
        _ => return Bytes::from(command::unknown_command_reply(args)),
    };
    Bytes::from_static(own)
}

/// Local commands that need the whole worker (every worker, or every
/// master) rather than just the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gather {
    /// INFO: sections gathered from every worker (and the masters).
    Info,
    ClientList,
    ClientKill,
    ClientUnblock,
    /// CONFIG RESETSTAT: every worker's statistics.
    ResetStats,
    /// SLOWLOG GET/LEN/RESET/HELP: the process-wide slow log.
    Slowlog,
}

/// What one request does. The order in which [`decide`] checks for each
/// is written on the function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Answer with an error now; nothing is sent anywhere. Boxed so a
    /// decision stays two words (it is returned on every request).
    Refuse(Box<Refusal>),
    /// To the master of `unit`, or a replica when `read` and read
    /// splitting allow.
    Unit { unit: Unit, read: bool },
    /// A keyless command any master can answer (rotated over masters).
    AnyMaster,
    /// EVAL / EVAL_RO: the body is remembered (`crate::script`), then the
    /// request goes as `Unit` for the first key's unit, or as `AnyMaster`
    /// without keys.
    Eval { unit: Option<Unit>, read: bool },
    /// PUBLISH and PUBSUB: the node every subscriber connection goes to.
    PubsubHome,
    /// Split per unit, parts merged in order.
    Fanout(Fanout),
    /// Involves every master.
    Wide(Wide),
    /// A blocking command: on a leased connection to the master of
    /// `unit`.
    Lease { unit: Unit },
    /// (P)SUBSCRIBE / (P)UNSUBSCRIBE on the session's subscriber
    /// connection.
    Subscribe,
    /// WATCH of keys that all belong to `unit`: on the session's pinned
    /// connection, taken now when it has none (`worker/watch.rs`).
    Watch { unit: Unit },
    /// UNWATCH outside MULTI: releases the pin, or +OK when there is none.
    Unwatch,
    /// A WATCH is in force and the command's keys (if any) belong to the
    /// watched unit: on the pinned connection, in order.
    Pinned,
    /// Queued in the open transaction (answered +QUEUED or refused there
    /// for its size); `unit` is the unit of its keys, which the
    /// transaction takes if it had none (None: no key).
    Queue { unit: Option<Unit> },
    /// MULTI / EXEC / DISCARD.
    Txn(TxnOp),
    /// PING of a RESP2 subscribed client: `["pong", message]`.
    SubscribedPing,
    /// RESET: leave the transaction and every subscription, then answer
    /// locally as [`LocalCmd::Reset`].
    Reset,
    /// Answered from the worker's view of the whole process.
    Gather(Gather),
    /// Answered by the proxy itself, by the handler the variant names,
    /// from the session and shared state.
    Local(LocalCmd),
}

/// What [`decide`] concluded, with the command it resolved (None only
/// for requests refused before a command was found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub cmd: Option<&'static Command>,
    pub decision: Decision,
}

fn refusal(reply: Bytes, dooms_txn: bool) -> Refusal {
    Refusal {
        reply,
        rejected: None,
        dooms_txn,
    }
}

/// Decide what the request in `args` does. Outcomes, in the order they
/// are checked (the order Redis's `processCommand` uses, then mithril's
/// routing):
///
/// 1. Unknown command or subcommand, wrong arity: `Refuse` (a rejection,
///    not a call; dooms an open MULTI).
/// 2. Not authenticated and the command is not `no-auth`: `Refuse` with
///    NOAUTH (a rejection).
/// 3. Over `maxmemory` and the command may grow memory (or EXEC of a
///    transaction that would run one, or a script that may write: see
///    `script_oom`): `Refuse` with OOM (dooms MULTI).
/// 4. A restricted user without the right to this command, key or
///    channel: `Refuse` with NOPERM (dooms MULTI).
/// 5. Outside MULTI, not subscribed, not watching and not a monitor, a
///    single-unit command that does not block: `Unit` for its first key's
///    unit, `AnyMaster` when the call has no key (EVALSHA with numkeys 0).
///    This is the hot path.
/// 6. A RESP2 subscribed session and a command that context does not
///    allow: `Refuse` with Redis's "only (P|S)SUBSCRIBE ..." error.
/// 7. Inside MULTI while a script runs long (`View::scripts_busy`), any
///    command but those flagged allow-busy, EXEC included: `Refuse` with
///    BUSY. Then any command but EXEC, DISCARD, MULTI, QUIT, RESET
///    and WATCH: `Queue`, or `Refuse` (dooming the transaction)
///    for an unknown command, one that cannot run inside a transaction
///    through the proxy, or keys of a unit other than the transaction's
///    (CROSSSLOT).
/// 8. A WATCH in force (`View::pin`), for a routed command: `Pinned` when
///    every key hashes to the watched slot (or it has none and any master
///    may answer it), `Refuse` with CROSSSLOT for a key elsewhere.
///    Cluster-wide commands (their pinned node's part goes on the pin),
///    pub/sub, `SlotArg` and local commands go on to 9.
/// 9. By the command's route: `Lease` (blocking, including XREAD with
///    BLOCK), `Slot`, `Eval` (EVAL, EVAL_RO), `AnyMaster`, `PubsubHome`
///    (PUBLISH, PUBSUB),
///    `Fanout`, `Wide` (DEBUG of a key: `Unit`, or `Refuse` with CROSSSLOT
///    for keys of several units), `Subscribe` (`Refuse` with CROSSSLOT
///    for shard channels of several units), `Unit` of the slot named in
///    `argv[2]` (`Refuse` when it is not a slot number), `Refuse` with the
///    unknown-command error for unsupported commands, and for local
///    commands `Txn`, `SubscribedPing` (RESP2, subscribed, at most one
///    argument), `Reset`, `Gather`, `Watch` (`Refuse` with CROSSSLOT for
///    keys of several slots or of a slot other than the watched one, and
///    Redis's error inside MULTI), `Unwatch` or `Local`.
///
/// Routed outcomes (`Unit`, `Eval`, `AnyMaster`, `PubsubHome`, `Fanout`,
/// `Wide`, `Lease`) are refused with CLUSTERDOWN while no topology is known.
///
/// Last, a MONITOR client's command that reads or writes keys, whatever
/// was decided but a refusal or a queued command, is refused as a node
/// refuses its replica (`ERR_KEYSPACE`).
///
/// [`resolve`] and [`decide_command`] are the two halves, for a caller
/// that wants the command before the decision (the worker stamps it).
pub fn decide(v: &View<'_>, args: &Args<'_>, loc: &impl Locate) -> Decided {
    match resolve(args) {
        Ok(cmd) => Decided {
            cmd: Some(cmd),
            decision: decide_command(v, cmd, args, loc),
        },
        Err(refused) => Decided {
            cmd: None,
            decision: refused,
        },
    }
}

/// Outcome 1 of [`decide`]: the command and its arity, or the refusal.
#[inline]
pub fn resolve(args: &Args<'_>) -> Result<&'static Command, Decision> {
    command::resolve(args).map_err(|rejection| {
        let known = match rejection {
            Rejection::WrongArity(c) => Some(c),
            _ => None,
        };
        Decision::Refuse(Box::new(Refusal {
            reply: Bytes::from(rejection.reply(args)),
            rejected: Some(known),
            dooms_txn: true,
        }))
    })
}

/// Outcomes 2 to 9 of [`decide`], for a resolved command.
#[inline]
pub fn decide_command(
    v: &View<'_>,
    cmd: &'static Command,
    args: &Args<'_>,
    loc: &impl Locate,
) -> Decision {
    let d = route(v, cmd, args, loc);
    if v.monitor {
        return monitored(cmd, d);
    }
    d
}

/// The hot path (outcome 5) for a *plain* session: authenticated, may
/// run everything, not in MULTI, not subscribed, not watching, not a
/// monitor, while the process is under `maxmemory`. For such a session
/// outcomes 2 to 4 and 6 to 8 cannot apply, so a `Route::Slot` command
/// that does not block is decided here with no [`View`]; `None`: any
/// other command, which [`decide_command`] decides. Both give the same
/// decision (tested).
#[inline(always)]
pub fn decide_plain(cmd: &'static Command, args: &Args<'_>, loc: &impl Locate) -> Option<Decision> {
    if cmd.route != Route::Slot || command::is_blocking_call(cmd, args) {
        return None;
    }
    if !loc.is_known() {
        return Some(no_topology());
    }
    Some(unit_of_first_key(cmd, args, loc))
}

/// The last check of [`decide`]: a monitor's keyspace command.
#[cold]
fn monitored(cmd: &'static Command, d: Decision) -> Decision {
    match d {
        Decision::Refuse(_) | Decision::Queue { .. } => d,
        _ if cmd.flags & (flags::READONLY | flags::WRITE | flags::MAY_REPLICATE) != 0 => {
            Decision::Refuse(Box::new(Refusal {
                reply: Bytes::from_static(ERR_KEYSPACE),
                rejected: Some(Some(cmd)),
                dooms_txn: true,
            }))
        }
        _ => d,
    }
}

#[inline]
fn route(v: &View<'_>, cmd: &'static Command, args: &Args<'_>, loc: &impl Locate) -> Decision {
    // 2. Authentication.
    if !v.authenticated && cmd.flags & flags::NO_AUTH == 0 {
        return Decision::Refuse(Box::new(Refusal {
            reply: Bytes::from_static(ERR_NOAUTH),
            rejected: Some(Some(cmd)),
            dooms_txn: false,
        }));
    }
    // 3. Memory.
    if v.over_memory {
        if cmd.flags & flags::DENYOOM != 0 || (cmd.name == "exec" && v.txn_denyoom) {
            return Decision::Refuse(Box::new(refusal(Bytes::from_static(ERR_OOM), true)));
        }
        if let Some(reply) = script_oom(cmd, args, v.script_writes) {
            return Decision::Refuse(Box::new(refusal(Bytes::from_static(reply), true)));
        }
    }
    // 4. Permissions.
    if let Some((acl, user)) = v.acl {
        if let Some(reply) = crate::acl::refusal(acl, user, cmd, args) {
            return Decision::Refuse(Box::new(refusal(reply, true)));
        }
    }
    // 5. The hot path.
    let plain = !v.in_txn && v.subscribed == 0 && v.pin.is_none() && !v.monitor;
    if plain && cmd.route == Route::Slot && !command::is_blocking_call(cmd, args) {
        if !loc.is_known() {
            return no_topology();
        }
        return unit_of_first_key(cmd, args, loc);
    }
    // 6. The RESP2 subscribed context.
    if v.proto == Proto::Resp2 && v.subscribed > 0 && !allowed_when_subscribed(cmd) {
        return Decision::Refuse(Box::new(refusal(not_allowed_reply(cmd), false)));
    }
    // 7. Inside MULTI. While a script runs long, a server would refuse
    // what is queued (dooming the transaction) and EXEC itself.
    if v.in_txn && v.scripts_busy && cmd.flags & flags::ALLOW_BUSY == 0 {
        return Decision::Refuse(Box::new(refusal(Bytes::from_static(ERR_BUSY_SCRIPT), true)));
    }
    if v.in_txn && !runs_immediately(cmd) {
        // FLUSHALL/FLUSHDB also reach the other masters at EXEC, which a
        // WATCH's nil would have to undo: not while watching.
        if v.pin.is_some() && cmd.route == Route::ClusterWide(Wide::Flushall) {
            return Decision::Refuse(Box::new(refusal(Bytes::from_static(ERR_IN_MULTI), true)));
        }
        return queue_in_txn(v, cmd, args, loc);
    }
    // 8. A WATCH in force.
    if let Some(pinned) = v.pin {
        if let Some(d) = while_watching(cmd, args, pinned, loc) {
            return d;
        }
    }
    // 9. The route. A ring of standalone servers is one server without
    // cluster support to its clients.
    if !loc.is_cluster() && is_cluster_command(cmd) {
        return Decision::Refuse(Box::new(refusal(
            Bytes::from_static(ERR_CLUSTER_DISABLED),
            false,
        )));
    }
    let routed = match cmd.route {
        Route::Local(LocalCmd::Config) if loc.is_known() => match config_route(cmd, args) {
            Some(d) => d,
            None => return Decision::Local(LocalCmd::Config),
        },
        Route::Local(which) => return local(v, which, args, loc),
        Route::Unsupported => {
            let r = unsupported_reply(cmd, args);
            return Decision::Refuse(Box::new(refusal(r, false)));
        }
        Route::Slot if command::is_blocking_call(cmd, args) => lease(cmd, args, loc),
        Route::Blocking => lease(cmd, args, loc),
        Route::Slot => unit_of_first_key(cmd, args, loc),
        // A key without its value: Redis's arity error, before anything
        // is sent (a node would say CROSSSLOT first for keys of several
        // slots, which a single server never says).
        Route::SlotPairs if args.len() % 2 == 0 => {
            let r = command::wrong_arity_reply(cmd);
            return Decision::Refuse(Box::new(refusal(Bytes::from(r), false)));
        }
        Route::SlotPairs => unit_of_first_key(cmd, args, loc),
        Route::Eval => match unit_of_first_key(cmd, args, loc) {
            Decision::Unit { unit, read } => Decision::Eval {
                unit: Some(unit),
                read,
            },
            refused @ Decision::Refuse(_) => return refused,
            _ => Decision::Eval {
                unit: None,
                read: cmd.flags & flags::READONLY != 0,
            },
        },
        Route::AnyMaster if cmd.name == "publish" || cmd.name.starts_with("pubsub|") => {
            Decision::PubsubHome
        }
        Route::AnyMaster => Decision::AnyMaster,
        Route::Fanout(kind) => Decision::Fanout(kind),
        Route::ClusterWide(Wide::Debug) => debug(args, loc),
        Route::ClusterWide(wide) => Decision::Wide(wide),
        Route::Pubsub if matches!(cmd.name, "ssubscribe" | "sunsubscribe") => {
            // A node takes the shard channels of one unit per command.
            let mut units = (1..args.len()).map(|i| loc.unit_of(args.get(i).unwrap_or_default()));
            let first = units.next();
            if units.any(|u| Some(u) != first) {
                return crossslot(loc);
            }
            return Decision::Subscribe;
        }
        Route::Pubsub => return Decision::Subscribe,
        Route::SlotArg => match args
            .get(2)
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|&s| s < 16384)
        {
            Some(slot) => Decision::Unit {
                unit: slot,
                read: false,
            },
            None => {
                return Decision::Refuse(Box::new(refusal(Bytes::from_static(ERR_BAD_SLOT), false)))
            }
        },
    };
    if !loc.is_known() {
        return no_topology();
    }
    routed
}

/// CONFIG GET and SET with the cluster behind the proxy: `None` when
/// mithril answers alone (every name is one of its own directives, or
/// another subcommand); a CONFIG SET that names a server's parameter goes
/// to every master (`Wide::ConfigSet`: mithril's own names in it are
/// checked first and applied once every master said OK); a CONFIG GET
/// whose patterns may match a server's parameter also asks one master
/// (`Wide::ConfigGet`).
fn config_route(cmd: &Command, args: &Args<'_>) -> Option<Decision> {
    let own = |i: usize| {
        args.get(i)
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(crate::config::lookup)
            .is_some_and(|d| d.name != "include")
    };
    match cmd.name {
        // An odd count is the syntax error mithril's handler gives.
        "config|set" if args.len() % 2 == 0 => {
            let names = (2..args.len()).step_by(2);
            let mine = names.clone().filter(|&i| own(i)).count();
            (mine < names.len()).then_some(Decision::Wide(Wide::ConfigSet))
        }
        "config|get" => {
            let glob = |i: usize| {
                args.get(i)
                    .is_some_and(|p| p.iter().any(|b| matches!(b, b'*' | b'?' | b'[')))
            };
            let all_own = (2..args.len()).all(|i| own(i) && !glob(i));
            (!all_own).then_some(Decision::Wide(Wide::ConfigGet))
        }
        _ => None,
    }
}

#[inline(always)]
fn unit_of_first_key(cmd: &'static Command, args: &Args<'_>, loc: &impl Locate) -> Decision {
    match command::first_key(cmd, args).and_then(|i| args.get(i)) {
        Some(k) => {
            let unit = loc.unit_of(k);
            if !loc.is_cluster() && spread(cmd, args, loc, unit) {
                return Decision::Refuse(Box::new(refusal(loc.cross_unit_reply(), false)));
            }
            Decision::Unit {
                unit,
                read: cmd.flags & flags::READONLY != 0,
            }
        }
        None => shard_channel(cmd, args, loc),
    }
}

/// SPUBLISH names no key but a shard channel, which lives where a key of
/// its name would: routed so (a ring's server does not redirect).
#[cold]
fn shard_channel(cmd: &'static Command, args: &Args<'_>, loc: &impl Locate) -> Decision {
    match args.get(1) {
        Some(channel) if cmd.name == "spublish" => Decision::Unit {
            unit: loc.unit_of(channel),
            read: false,
        },
        _ => Decision::AnyMaster,
    }
}

/// Whether a key of the command is on another unit than `first`'s: what a
/// node that does not check (a ring's server) must not be sent.
#[cold]
fn spread(cmd: &'static Command, args: &Args<'_>, loc: &impl Locate, first: Unit) -> bool {
    command::keys(cmd, args)
        .skip(1)
        .any(|i| loc.unit_of(args.get(i).unwrap_or_default()) != first)
}

fn lease(cmd: &'static Command, args: &Args<'_>, loc: &impl Locate) -> Decision {
    match command::first_key(cmd, args).and_then(|i| args.get(i)) {
        Some(k) => {
            let unit = loc.unit_of(k);
            if !loc.is_cluster() && spread(cmd, args, loc, unit) {
                return Decision::Refuse(Box::new(refusal(loc.cross_unit_reply(), false)));
            }
            Decision::Lease { unit }
        }
        None => Decision::AnyMaster,
    }
}

#[cold]
fn crossslot(loc: &impl Locate) -> Decision {
    Decision::Refuse(Box::new(refusal(loc.cross_unit_reply(), false)))
}

/// DEBUG: the subcommands about one key go where it lives (keys of
/// several units: CROSSSLOT; none: any master, for the node's own
/// answer); the refused ones are answered here; the rest go to every
/// master.
fn debug(args: &Args<'_>, loc: &impl Locate) -> Decision {
    let sub = args.get(1).unwrap_or_default();
    if debug_refused(args) {
        let sub = String::from_utf8_lossy(sub).to_uppercase();
        let e = format!("-ERR mithril: DEBUG {sub} is not relayed to the cluster's nodes\r\n");
        return Decision::Refuse(Box::new(refusal(Bytes::from(e), false)));
    }
    if !DEBUG_KEYED
        .iter()
        .any(|k| sub.eq_ignore_ascii_case(k.as_bytes()))
    {
        return Decision::Wide(Wide::Debug);
    }
    let last = if sub.eq_ignore_ascii_case(b"digest-value") {
        args.len()
    } else {
        3
    };
    let mut units = (2..last.min(args.len())).map(|i| loc.unit_of(args.get(i).unwrap_or_default()));
    match units.next() {
        Some(first) if units.all(|u| u == first) => Decision::Unit {
            unit: first,
            read: false,
        },
        Some(_) => crossslot(loc),
        // No key: the node's own answer (arity, or an empty list).
        None => Decision::AnyMaster,
    }
}

#[cold]
fn no_topology() -> Decision {
    Decision::Refuse(Box::new(refusal(
        Bytes::from_static(ERR_NO_TOPOLOGY),
        false,
    )))
}

/// Outcome 8 of [`decide`]: what a routed command does while the session
/// watches keys of unit `pinned` (None: it is routed as usual).
fn while_watching(
    cmd: &'static Command,
    args: &Args<'_>,
    pinned: Unit,
    loc: &impl Locate,
) -> Option<Decision> {
    match cmd.route {
        Route::Slot
        | Route::SlotPairs
        | Route::Eval
        | Route::Fanout(_)
        | Route::Blocking
        | Route::AnyMaster => {}
        _ => return None,
    }
    if cmd.name == "publish" || cmd.name.starts_with("pubsub|") {
        return None; // no key: the pub/sub home node, as usual
    }
    let elsewhere =
        command::keys(cmd, args).any(|i| loc.unit_of(args.get(i).unwrap_or_default()) != pinned);
    Some(if elsewhere {
        Decision::Refuse(Box::new(refusal(loc.cross_unit_reply(), false)))
    } else {
        Decision::Pinned
    })
}

/// WATCH: every key in one unit, and that unit the watched one's when a
/// WATCH is in force already.
fn watch(v: &View<'_>, args: &Args<'_>, loc: &impl Locate) -> Decision {
    if v.in_txn {
        // Redis's answer; the transaction is not doomed by it.
        return Decision::Refuse(Box::new(refusal(
            Bytes::from_static(ERR_WATCH_IN_MULTI),
            false,
        )));
    }
    let mut units = (1..args.len()).map(|i| loc.unit_of(args.get(i).unwrap_or_default()));
    let first = units.next().unwrap_or(0);
    if units.any(|s| s != first) || v.pin.is_some_and(|p| p != first) {
        return crossslot(loc);
    }
    Decision::Watch { unit: first }
}

fn local(v: &View<'_>, which: LocalCmd, args: &Args<'_>, loc: &impl Locate) -> Decision {
    match which {
        LocalCmd::Watch => watch(v, args, loc),
        LocalCmd::Unwatch => Decision::Unwatch,
        LocalCmd::Multi => Decision::Txn(TxnOp::Multi),
        LocalCmd::Exec => Decision::Txn(TxnOp::Exec),
        LocalCmd::Discard => Decision::Txn(TxnOp::Discard),
        LocalCmd::Ping if v.proto == Proto::Resp2 && v.subscribed > 0 && args.len() <= 2 => {
            Decision::SubscribedPing
        }
        LocalCmd::Reset => Decision::Reset,
        LocalCmd::Info => Decision::Gather(Gather::Info),
        LocalCmd::ClientList => Decision::Gather(Gather::ClientList),
        LocalCmd::ClientKill => Decision::Gather(Gather::ClientKill),
        LocalCmd::ClientUnblock => Decision::Gather(Gather::ClientUnblock),
        LocalCmd::ConfigResetstat => Decision::Gather(Gather::ResetStats),
        LocalCmd::Slowlog => Decision::Gather(Gather::Slowlog),
        other => Decision::Local(other),
    }
}

/// Whether a DEBUG's subcommand is one the proxy refuses.
fn debug_refused(args: &Args<'_>) -> bool {
    args.get(1).is_some_and(|sub| {
        DEBUG_REFUSED
            .iter()
            .any(|r| sub.eq_ignore_ascii_case(r.as_bytes()))
    })
}

/// Commands a RESP2 client may send while subscribed.
pub fn allowed_when_subscribed(cmd: &Command) -> bool {
    matches!(
        cmd.name,
        "subscribe"
            | "psubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

/// Redis's refusal of a command in the RESP2 subscribed context.
pub fn not_allowed_reply(cmd: &Command) -> Bytes {
    let name = cmd.name.split('|').next().unwrap_or(cmd.name);
    Bytes::from(format!(
        "-ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    ))
}

#[cfg(test)]
mod tests;

/// Over `maxmemory`: the refusal of a script that may write, as a node
/// over its own budget refuses it. EVAL's body is looked at
/// (`script::over_memory`): with a shebang it runs only with `no-writes`
/// or `allow-oom` among its flags (else Redis's allow-oom error); without,
/// it is refused with the error a write inside it would get when it calls
/// a command that may grow memory by its literal name (a node checks each
/// call; mithril reads the code). EVALSHA and FCALL were looked up by the
/// worker in the script registry (`script_writes`); what the registry does
/// not know goes on to the node.
#[cold]
fn script_oom(cmd: &Command, args: &Args<'_>, script_writes: bool) -> Option<&'static [u8]> {
    match cmd.name {
        "evalsha" | "fcall" => script_writes.then_some(ERR_OOM),
        "eval" => {
            let body = args.get(1).unwrap_or_default();
            match crate::script::over_memory(body) {
                crate::script::OverMemory::Runs => None,
                crate::script::OverMemory::Refused if body.starts_with(b"#!") => {
                    Some(ERR_OOM_SCRIPT)
                }
                crate::script::OverMemory::Refused => Some(ERR_OOM),
            }
        }
        _ => None,
    }
}
