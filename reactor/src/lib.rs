//! The reactor: mithril's event loop, with no knowledge of Redis.
//!
//! It owns the pieces every worker thread needs and nothing more:
//!
//! - [`token`]: slab keys that carry a generation ([`Key`], [`GenSlab`]) and
//!   the packing of a kind tag plus a key into a `mio::Token`, so a readiness
//!   event or a message for an object that has since been closed is dropped
//!   instead of reaching whatever reused its slot.
//! - [`timer`]: one timer heap per loop, with cancellation.
//! - [`fabric`]: bounded channels between loops whose senders wake the
//!   receiving loop only when it is parked in `poll`.
//! - [`event_loop`]: the loop itself and the [`Handler`] trait it drives, in
//!   fixed phases (poll, events, fabric, timers, before-sleep flush).
//! - [`writev`]: vectored writes of up to 256 buffers with the iovec array on
//!   the stack.
//! - [`read`]: the budgeted, edge-triggered read with the short-read rule.
//! - [`net`]: socket options and listeners through socket2.
//! - [`signals`]: blocking a signal set and waiting on it from one thread.
//! - [`daemon`]: detaching into the background, the locked pidfile, and
//!   systemd's readiness notifications.
//!
//! Nothing here allocates per event once the loop is warm, and nothing here
//! panics on input from the network.

pub mod daemon;
pub mod event_loop;
pub mod fabric;
pub mod net;
pub mod read;
pub mod signals;
pub mod stamp;
pub mod timer;
pub mod token;
pub mod writev;

pub use event_loop::{Context, EventLoop, Handler};
pub use fabric::{fabric, FabricReceiver, FabricSender, Notifier};
pub use timer::{TimerId, Timers};
pub use token::{GenSlab, Key, Kind};
pub use writev::IoBatch;
