//! State shared by all threads: configuration, the topology handle, the
//! admission counter and each worker's mailbox. Nothing here is touched per
//! request except through a worker's own padded counters.

use crate::config::Config;
use crate::topology::TopologyHandle;
use reactor::FabricSender;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Keeps a value on its own cache line(s), so one worker's counter does not
/// share a line with another's.
#[repr(align(128))]
#[derive(Default)]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One `maxclients` slot. Taken by the acceptor before a socket is handed
/// to a worker, released exactly once when dropped, whatever the path:
/// rejection, failed handoff, session end, or a panic unwinding the
/// session.
pub struct Ticket {
    clients: Arc<AtomicUsize>,
}

impl Ticket {
    /// Take a slot if fewer than `max` are taken.
    pub fn acquire(clients: &Arc<AtomicUsize>, max: usize) -> Option<Ticket> {
        let prev = clients.fetch_add(1, Ordering::AcqRel);
        if prev >= max {
            clients.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Ticket {
            clients: clients.clone(),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.clients.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection handed from the acceptor to a worker.
pub struct Accepted {
    pub stream: std::net::TcpStream,
    pub peer: SocketAddr,
    pub ticket: Ticket,
}

pub enum WorkerMsg {
    Accept(Accepted),
    /// Stop reading new requests, finish what is in flight, then exit.
    Shutdown,
}

/// What the acceptor and INFO can see of a worker.
pub struct WorkerSlot {
    pub tx: FabricSender<WorkerMsg>,
    /// Commands dispatched since start, stored once per loop turn.
    pub commands: Padded<AtomicU64>,
    /// Sessions currently open on this worker.
    pub sessions: Padded<AtomicUsize>,
}

/// Most leased connections (blocking commands) to one node, process-wide.
pub const MAX_LEASES_PER_NODE: usize = 512;

pub struct Shared {
    pub config: Config,
    pub topology: Arc<TopologyHandle>,
    /// Open client connections (admission tickets outstanding).
    pub clients: Arc<AtomicUsize>,
    pub next_client_id: AtomicU64,
    pub shutting_down: AtomicBool,
    pub workers: Vec<WorkerSlot>,
    pub started: Instant,
    pub rejected_connections: AtomicU64,
    pub total_connections: AtomicU64,
    /// Clients waiting on a blocking command right now (INFO
    /// `blocked_clients`).
    pub blocked_clients: AtomicUsize,
    /// Leased connections per node (locked only when a lease is opened or
    /// closed, never per request).
    pub leases: std::sync::Mutex<std::collections::HashMap<SocketAddr, usize>>,
    /// What the commands mithril answers itself keep: live CONFIG values,
    /// the password, the run id and the emulated node's id.
    pub admin: crate::admin::AdminState,
}

impl Shared {
    pub fn new_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Count a new lease to `addr`; false (and nothing counted) at the cap.
    pub fn lease_opened(&self, addr: SocketAddr) -> bool {
        let mut m = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(addr).or_insert(0);
        if *n >= MAX_LEASES_PER_NODE {
            return false;
        }
        *n += 1;
        true
    }

    pub fn lease_closed(&self, addr: SocketAddr) {
        let mut m = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&addr) {
            *n = n.saturating_sub(1);
        }
    }
}
