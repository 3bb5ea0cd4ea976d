//! The acceptor thread: owns the listening sockets, admits connections
//! against `maxclients`, and places each one on a worker.
//!
//! Placement `least-loaded` (the default) picks the worker that ran the
//! fewest commands in the last 10 ms window, charging each placement made
//! during the current window as one average connection's worth of load, so
//! a burst of connects spreads out instead of piling onto the worker that
//! was idle when the burst began. Ties rotate, so under even load this is
//! plain rotation. `round-robin` rotates unconditionally.
//!
//! Every accepted socket first takes an admission [`Ticket`]; over the
//! limit it gets Redis's "max number of clients reached" error and is
//! closed. The ticket travels with the socket and is released when the
//! session ends, on every path.
//!
//! Handoff requests: a worker about to ask every worker a question about
//! their clients (CLIENT LIST / KILL, INFO) first asks for a handoff
//! (`Shared::request_handoff`, which wakes this thread). Each pass notes
//! the requests made so far, takes every connection the kernel holds, and
//! only then answers each requester with `WorkerMsg::HandedOver`: by then
//! every connection the client side had completed before the question is
//! in some worker's mailbox, ahead of the question.

use crate::config::Placement;
use crate::shared::{Accepted, ListenerChange, Shared, Ticket, WorkerMsg};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_millis(10);
const WAKER: Token = Token(usize::MAX);
pub const ERR_MAX_CLIENTS: &[u8] = b"-ERR max number of clients reached\r\n";

/// Chooses a worker for each new connection.
pub struct Placer {
    mode: Placement,
    window_start: Instant,
    /// Commands each worker had run at the start of the current window.
    base: Vec<u64>,
    /// Commands each worker ran in the last complete window.
    load: Vec<u64>,
    /// Connections placed on each worker in the current window.
    placed: Vec<u64>,
    next: usize,
}

impl Placer {
    pub fn new(mode: Placement, workers: usize) -> Placer {
        Placer {
            mode,
            window_start: Instant::now(),
            base: vec![0; workers],
            load: vec![0; workers],
            placed: vec![0; workers],
            next: 0,
        }
    }

    /// Pick a worker given each worker's command counter and open sessions.
    pub fn pick(&mut self, now: Instant, commands: &[u64], sessions: &[usize]) -> usize {
        let n = self.base.len();
        if n <= 1 {
            return 0;
        }
        let start = self.next % n;
        self.next = self.next.wrapping_add(1);
        if self.mode == Placement::RoundRobin {
            return start;
        }
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= WINDOW {
            // Per-window rate, even if several windows passed unobserved.
            let windows = (elapsed.as_nanos() / WINDOW.as_nanos()).max(1) as u64;
            for i in 0..n {
                let c = commands.get(i).copied().unwrap_or(0);
                self.load[i] = c.saturating_sub(self.base[i]) / windows;
                self.base[i] = c;
                self.placed[i] = 0;
            }
            self.window_start = now;
        }
        let total_load: u64 = self.load.iter().sum();
        let conns: usize = sessions.iter().sum();
        let charge = (total_load / conns.max(1) as u64).max(1);
        let mut best = start;
        let mut best_score = u64::MAX;
        for off in 0..n {
            let i = (start + off) % n;
            let score = self.load[i] + self.placed[i] * charge;
            if score < best_score {
                best_score = score;
                best = i;
            }
        }
        self.placed[best] += 1;
        best
    }
}

pub struct Acceptor {
    shared: Arc<Shared>,
    /// Each listener with the pool it serves, and whether it is a TLS one.
    listeners: Vec<(TcpListener, usize, bool)>,
    poll: Poll,
    placer: Placer,
}

impl Acceptor {
    /// An acceptor over `listeners`, each with the pool it serves.
    pub fn new(
        shared: Arc<Shared>,
        listeners: Vec<(TcpListener, usize, bool)>,
    ) -> io::Result<(Acceptor, Arc<Waker>)> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let mut listeners = listeners;
        for (i, (l, _, _)) in listeners.iter_mut().enumerate() {
            poll.registry().register(l, Token(i), Interest::READABLE)?;
            stamp_arrivals(&shared, l);
        }
        let placer = Placer::new(shared.config.placement, shared.workers.len());
        Ok((
            Acceptor {
                shared,
                listeners,
                poll,
                placer,
            },
            waker,
        ))
    }

    pub fn run(mut self) {
        let mut events = Events::with_capacity(64);
        let mut commands = vec![0u64; self.shared.workers.len()];
        let mut sessions = vec![0usize; self.shared.workers.len()];
        // Per worker: the handoff request this pass answers, and the last
        // one answered.
        let mut asked = vec![0u64; self.shared.workers.len()];
        let mut answered = vec![0u64; self.shared.workers.len()];
        // After EMFILE the listener stays readable but edge-triggered
        // readiness will not repeat: poll again soon instead.
        let mut retry_soon = false;
        loop {
            let timeout = if retry_soon {
                Some(Duration::from_millis(50))
            } else {
                None
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log::error!(target: "mithril::acceptor", "poll failed: {e}");
                    return;
                }
            }
            if self.shared.shutting_down.load(Ordering::Acquire) {
                return;
            }
            self.take_listener_changes();
            if self.shared.handed_over.load(Ordering::Acquire) && !self.listeners.is_empty() {
                // The new process accepts on the same sockets; this one
                // goes on answering handoff requests for its workers.
                for (l, _, _) in &mut self.listeners {
                    crate::upgrade::forget(std::os::fd::AsRawFd::as_raw_fd(&*l));
                    let _ = self.poll.registry().deregister(l);
                }
                self.listeners.clear();
            }
            retry_soon = false;
            // Connections established before this instant are all taken
            // by this pass (`shared::block_order`).
            let pass_ns = reactor::stamp::now_ns();
            // Requests seen before this pass's accepts are answered after.
            for (w, slot) in self.shared.workers.iter().enumerate() {
                asked[w] = slot.handoff_asked.load(Ordering::Acquire);
            }
            for i in 0..self.listeners.len() {
                loop {
                    let (listener, pool, tls) = &self.listeners[i];
                    let (pool, tls) = (*pool, *tls);
                    match listener.accept() {
                        Ok((stream, peer)) => {
                            for (w, slot) in self.shared.workers.iter().enumerate() {
                                commands[w] = slot.commands.load(Ordering::Relaxed);
                                sessions[w] = slot.sessions.load(Ordering::Relaxed);
                            }
                            self.admit(stream, peer, (pool, tls), &commands, &sessions);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            // EMFILE/ENFILE/ENOMEM and friends: back off.
                            log::warn!(target: "mithril::acceptor", "accept failed: {e}");
                            retry_soon = true;
                            break;
                        }
                    }
                }
            }
            if !retry_soon && self.shared.workers.len() > 1 {
                let waiting = self.shared.block_order.accepted_until(pass_ns);
                for (w, slot) in self.shared.workers.iter().enumerate() {
                    if waiting & (1u64 << (w % 64)) != 0 {
                        slot.tx.wake();
                    }
                }
            }
            for (w, slot) in self.shared.workers.iter().enumerate() {
                if asked[w] <= answered[w] {
                    continue;
                }
                match slot.tx.send(WorkerMsg::HandedOver(asked[w])) {
                    Ok(()) => answered[w] = asked[w],
                    // A full mailbox: answer on the next pass.
                    Err(_) => retry_soon = true,
                }
            }
        }
    }

    /// Listeners a reload added (accepted on from now on) or removed
    /// (closed, and every worker told, so that its clients drain).
    fn take_listener_changes(&mut self) {
        let changes = std::mem::take(
            &mut *self
                .shared
                .listener_changes
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for change in changes {
            match change {
                ListenerChange::Add(mut l, addr, pool, tls) => {
                    let token = Token(self.listeners.len());
                    match self
                        .poll
                        .registry()
                        .register(&mut l, token, Interest::READABLE)
                    {
                        Ok(()) => {
                            let what = if tls { " (TLS)" } else { "" };
                            log::info!(target: "mithril::acceptor", "accepting on {addr}{what} (a reload added it)");
                            stamp_arrivals(&self.shared, &l);
                            self.listeners.push((l, pool, tls));
                        }
                        Err(e) => {
                            log::warn!(target: "mithril::acceptor", "cannot accept on {addr}: {e}")
                        }
                    }
                }
                ListenerChange::Remove(addr) => {
                    let at = self
                        .listeners
                        .iter()
                        .position(|(l, _, _)| l.local_addr().is_ok_and(|a| a == addr));
                    if let Some(i) = at {
                        let (mut l, _, _) = self.listeners.swap_remove(i);
                        crate::upgrade::forget(std::os::fd::AsRawFd::as_raw_fd(&l));
                        let _ = self.poll.registry().deregister(&mut l);
                        log::info!(target: "mithril::acceptor", "no longer accepting on {addr} (a reload removed it); its clients drain");
                    }
                    self.listener_gone(addr);
                }
                ListenerChange::Move(addr, pool, tls) => {
                    // Every worker hears that the old pool's clients drain
                    // before any client of the new pool is handed over.
                    self.listener_gone(addr);
                    let at = self
                        .listeners
                        .iter_mut()
                        .find(|(l, _, _)| l.local_addr().is_ok_and(|a| a == addr));
                    if let Some((_, p, t)) = at {
                        (*p, *t) = (pool, tls);
                        log::info!(target: "mithril::acceptor", "{addr} serves another pool now (a reload); the old pool's clients drain");
                    }
                }
            }
        }
    }

    /// Tell every worker that the clients of the listener at `addr`
    /// drain (in order with the connections it hands over after).
    fn listener_gone(&self, addr: SocketAddr) {
        for w in &self.shared.workers {
            let mut msg = WorkerMsg::ListenerGone(addr);
            while let Err(back) = w.tx.send(msg) {
                msg = back;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn admit(
        &mut self,
        stream: mio::net::TcpStream,
        peer: SocketAddr,
        (pool, tls): (usize, bool),
        commands: &[u64],
        sessions: &[usize],
    ) {
        use std::os::fd::{FromRawFd, IntoRawFd};
        // SAFETY: the fd comes straight from into_raw_fd, owned once.
        let std_stream = unsafe { std::net::TcpStream::from_raw_fd(stream.into_raw_fd()) };
        self.shared
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        // A pool's own bound on its clients (`client-connections`).
        let pool_limit = self
            .shared
            .pools
            .get(pool)
            .filter(|p| p.client_connections > 0)
            .map(|p| (&p.clients, p.client_connections));
        let Some(ticket) = Ticket::acquire(
            &self.shared.clients,
            self.shared
                .live
                .maxclients
                .load(Ordering::Relaxed)
                .min(self.shared.live.fd_room),
            pool_limit,
        ) else {
            reject(std_stream);
            self.shared
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut msg = WorkerMsg::Accept(Accepted {
            stream: std_stream,
            peer,
            pool,
            ticket,
            tls,
        });
        let first = self.placer.pick(Instant::now(), commands, sessions);
        let n = self.shared.workers.len();
        for off in 0..n {
            let w = (first + off) % n;
            match self.shared.workers[w].tx.send(msg) {
                Ok(()) => return,
                Err(back) => msg = back,
            }
        }
        // Every worker's mailbox is full: refuse rather than queue without
        // bound. Dropping the message releases the ticket.
        if let WorkerMsg::Accept(a) = msg {
            self.shared
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            reject(a.stream);
        }
    }
}

/// With more than one worker, the kernel stamps each read's arrival on
/// the sockets `l` accepts (they inherit it), so that a client's first
/// bytes are stamped too (`shared::block_order`): every listener, bound at
/// start or added by a reload.
fn stamp_arrivals(shared: &Shared, l: &TcpListener) {
    if shared.workers.len() > 1 {
        let _ = reactor::stamp::enable(std::os::fd::AsRawFd::as_raw_fd(l));
    }
}

/// Best-effort error line, then close (the socket is non-blocking: a full
/// buffer just loses the message).
fn reject(mut s: std::net::TcpStream) {
    let _ = s.set_nonblocking(true);
    let _ = s.write(ERR_MAX_CLIENTS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_load_rotates() {
        let mut p = Placer::new(Placement::LeastLoaded, 3);
        let t = Instant::now();
        let picks: Vec<usize> = (0..6).map(|_| p.pick(t, &[0, 0, 0], &[0, 0, 0])).collect();
        let mut counts = [0; 3];
        for w in &picks {
            counts[*w] += 1;
        }
        assert_eq!(counts, [2, 2, 2], "{picks:?}");
    }

    #[test]
    fn busy_worker_is_avoided_and_placements_are_charged() {
        let mut p = Placer::new(Placement::LeastLoaded, 2);
        let t0 = Instant::now();
        p.pick(t0, &[0, 0], &[1, 1]);
        // Next window: worker 0 ran 1000 commands, worker 1 ran 10.
        let t1 = t0 + WINDOW;
        let mut on_one = 0;
        for _ in 0..10 {
            if p.pick(t1, &[1000, 10], &[1, 1]) == 1 {
                on_one += 1;
            }
        }
        // Charge per placement = (1010 / 2) = 505: worker 1 takes the first
        // placements until its charged score passes worker 0's load.
        assert!((2..10).contains(&on_one), "on_one={on_one}");
        let mut rr = Placer::new(Placement::RoundRobin, 2);
        assert_eq!(
            (rr.pick(t1, &[5, 0], &[0, 0]), rr.pick(t1, &[5, 0], &[0, 0])),
            (0, 1)
        );
    }

    #[test]
    fn tickets_are_released_once() {
        let c = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let a = Ticket::acquire(&c, 2, None).unwrap();
        let b = Ticket::acquire(&c, 2, None).unwrap();
        assert!(Ticket::acquire(&c, 2, None).is_none());
        assert_eq!(c.load(Ordering::SeqCst), 2);
        drop(a);
        assert_eq!(c.load(Ordering::SeqCst), 1);
        let r = std::panic::catch_unwind(move || {
            let _b = b;
            panic!("unwinding drops the ticket");
        });
        assert!(r.is_err());
        assert_eq!(c.load(Ordering::SeqCst), 0);
    }
}
