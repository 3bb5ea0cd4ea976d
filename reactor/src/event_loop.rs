//! The event loop and the handler it drives.
//!
//! One loop runs per worker thread. Each turn has fixed phases:
//!
//! ```text
//!   poll ──► events ──► fabric ──► timers ──► before_sleep ──► next timeout
//!   (mio)    on_event    on_fabric  on_timer    (flush replies,
//!                                               backend writes)
//! ```
//!
//! - `poll` blocks until readiness, a wake, or the earliest timer; it does
//!   not block at all when the handler says it has leftover work (a budget
//!   ran out while a socket still had data).
//! - Events may be spurious and a stale token may arrive for an object that
//!   was closed during the same turn: the handler resolves tokens through
//!   its generational slabs and drops what no longer resolves.
//! - The fabric phase runs every turn, woken or not, so a message that
//!   raced a busy loop is picked up on the next turn.
//! - `before_sleep` is where output is written: once per turn, whatever the
//!   number of events, which is what batches many replies into one write.
//! - Readiness is edge-triggered: a handler reads a readable socket with
//!   [`crate::read::read_budgeted`], until it is drained (a short read
//!   counts as drained, saving the `EAGAIN` read) or its per-event budget
//!   is spent; a socket left with data goes on the handler's ready list and
//!   `has_pending_work` keeps the next poll from sleeping.
//!
//! The loop never allocates per event: the `Events` buffer and the timer
//! heap are reused.

use crate::fabric::Notifier;
use crate::timer::{TimerId, Timers};
use crate::token::{self, Key, Kind};
use mio::event::Event;
use mio::{Events, Poll, Registry, Token, Waker};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a handler can reach during a callback.
pub struct Context<'a, T> {
    pub registry: &'a Registry,
    pub timers: &'a mut Timers<T>,
    /// The time this turn's poll returned (cheap "now" for timestamps).
    pub now: Instant,
    /// The same instant as microseconds since the loop's epoch
    /// ([`EventLoop::set_epoch`]), computed once per turn for handlers
    /// that stamp and measure in integers; the clock timers run on.
    pub now_us: u64,
    /// This turn's poll returned a wake of the loop's `Notifier`: a
    /// message may have been queued since `has_pending_work` looked (see
    /// [`Handler::has_pending_work`]).
    pub woken: bool,
}

impl<T> Context<'_, T> {
    pub fn schedule_in(&mut self, after: Duration, data: T) -> TimerId {
        self.timers.schedule_in(self.now_us, after, data)
    }
}

/// The worker side of the loop.
pub trait Handler {
    type Timer;

    /// Readiness for a registered token (never the waker's).
    fn on_event(&mut self, cx: &mut Context<'_, Self::Timer>, kind: Kind, key: Key, event: &Event);

    /// Drain fabric channels, and serve leftover work. Called every turn.
    fn on_fabric(&mut self, cx: &mut Context<'_, Self::Timer>);

    /// A timer fired.
    fn on_timer(&mut self, cx: &mut Context<'_, Self::Timer>, id: TimerId, data: Self::Timer);

    /// End of turn: flush output.
    fn before_sleep(&mut self, cx: &mut Context<'_, Self::Timer>);

    /// True when the loop must not block in the next poll: leftover work
    /// from a budget, or messages already queued in a fabric channel. Called
    /// after the loop marked itself idle, so a handler that remembers what
    /// it saw of its channels here need look at them again in `on_fabric`
    /// only when it saw messages or the poll was woken (`Context::woken`):
    /// a message queued after this look either rang the waker or, if the
    /// loop was busy again by then, is seen by the next turn's look, which
    /// then does not let the poll sleep (`fabric`).
    fn has_pending_work(&mut self) -> bool;

    /// False ends `run`.
    fn keep_running(&self) -> bool;
}

pub struct EventLoop<T> {
    poll: Poll,
    events: Events,
    timers: Timers<T>,
    notifier: Notifier,
    /// Upper bound on one poll's sleep, so periodic housekeeping does not
    /// depend on timers alone.
    max_sleep: Duration,
    /// The clock as read after the last poll. The next sleep is computed
    /// from it, not from a fresh reading: a timer may then fire late by
    /// the time the turn in between took, and the loop saves one clock
    /// read per turn.
    now: Instant,
    /// `now` in µs since `epoch`: the timers' clock.
    now_us: u64,
    /// The origin of `Context::now_us`.
    epoch: Instant,
}

impl<T> EventLoop<T> {
    /// `capacity`: readiness events taken per poll.
    pub fn new(capacity: usize) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(
            poll.registry(),
            token::encode(Kind::WAKER, Key::NONE),
        )?);
        let now = Instant::now();
        Ok(EventLoop {
            poll,
            events: Events::with_capacity(capacity),
            timers: Timers::new(),
            notifier: Notifier::new(waker),
            max_sleep: Duration::from_secs(1),
            now,
            now_us: 0,
            epoch: now,
        })
    }

    /// Count `Context::now_us` from `epoch` (default: the loop's creation).
    /// Loops given the same epoch have comparable microsecond clocks.
    /// Set it before any timer is scheduled: deadlines count from it.
    pub fn set_epoch(&mut self, epoch: Instant) {
        debug_assert!(self.timers.is_empty(), "set_epoch with timers scheduled");
        self.epoch = epoch;
        self.now_us = micros_since(self.now, epoch);
    }

    /// Schedule `data` to fire `after` from the last poll's return (or the
    /// loop's creation).
    pub fn schedule_in(&mut self, after: Duration, data: T) -> TimerId {
        self.timers.schedule_in(self.now_us, after, data)
    }

    pub fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    pub fn timers(&mut self) -> &mut Timers<T> {
        &mut self.timers
    }

    /// The handle other threads use to wake this loop.
    pub fn notifier(&self) -> Notifier {
        self.notifier.clone()
    }

    pub fn set_max_sleep(&mut self, d: Duration) {
        self.max_sleep = d;
    }

    /// Run one turn. Returns the number of readiness events handled.
    pub fn turn<H: Handler<Timer = T>>(&mut self, handler: &mut H) -> io::Result<usize> {
        self.notifier.set_idle();
        let timeout = if handler.has_pending_work() {
            Duration::ZERO
        } else {
            match self.timers.next_deadline() {
                Some(at) => {
                    Duration::from_micros(at.saturating_sub(self.now_us)).min(self.max_sleep)
                }
                None => self.max_sleep,
            }
        };
        let res = self.poll.poll(&mut self.events, Some(timeout));
        self.notifier.set_busy();
        match res {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        self.now = Instant::now();
        self.now_us = micros_since(self.now, self.epoch);
        let mut cx = Context {
            registry: self.poll.registry(),
            timers: &mut self.timers,
            now: self.now,
            now_us: self.now_us,
            woken: false,
        };
        let mut n = 0;
        for event in self.events.iter() {
            let (kind, key) = token::decode(event.token());
            if kind == Kind::WAKER {
                cx.woken = true;
                continue;
            }
            n += 1;
            handler.on_event(&mut cx, kind, key, event);
        }
        handler.on_fabric(&mut cx);
        while let Some((id, data)) = cx.timers.pop_expired(cx.now_us) {
            handler.on_timer(&mut cx, id, data);
        }
        handler.before_sleep(&mut cx);
        Ok(n)
    }

    /// Turn until the handler says stop.
    pub fn run<H: Handler<Timer = T>>(&mut self, handler: &mut H) -> io::Result<()> {
        while handler.keep_running() {
            self.turn(handler)?;
        }
        Ok(())
    }
}

/// Whole microseconds from `epoch` to `now` (0 if `now` is earlier), in u64
/// arithmetic (`as_micros` would go through u128).
#[inline]
fn micros_since(now: Instant, epoch: Instant) -> u64 {
    let d = now.saturating_duration_since(epoch);
    d.as_secs() * 1_000_000 + u64::from(d.subsec_micros())
}

/// Convenience: a token for registering a source of `kind` under `key`.
pub fn token_for(kind: Kind, key: Key) -> Token {
    token::encode(kind, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{fabric, FabricReceiver};
    use crate::token::GenSlab;
    use mio::net::{TcpListener, TcpStream};
    use mio::Interest;
    use std::io::{Read, Write};

    const LISTENER: Kind = Kind(1);
    const CONN: Kind = Kind(2);

    /// An echo server handler: exercises tokens, stale drops, timers,
    /// fabric and the before-sleep phase.
    struct Echo {
        listener: TcpListener,
        conns: GenSlab<(TcpStream, Vec<u8>)>,
        rx: FabricReceiver<&'static str>,
        got_msgs: Vec<&'static str>,
        fired: Vec<u32>,
        flushes: usize,
        stop: bool,
    }

    impl Handler for Echo {
        type Timer = u32;
        fn on_event(&mut self, cx: &mut Context<'_, u32>, kind: Kind, key: Key, _e: &Event) {
            match kind {
                LISTENER => {
                    while let Ok((mut s, _)) = self.listener.accept() {
                        let k = self.conns.vacant_key();
                        cx.registry
                            .register(&mut s, token_for(CONN, k), Interest::READABLE)
                            .unwrap();
                        self.conns.insert((s, Vec::new()));
                    }
                }
                CONN => {
                    let Some((s, out)) = self.conns.get_mut(key) else {
                        return;
                    };
                    let mut buf = [0u8; 1024];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) => {
                                self.conns.remove(key);
                                return;
                            }
                            Ok(n) => out.extend_from_slice(&buf[..n]),
                            Err(_) => break,
                        }
                    }
                }
                _ => panic!("unexpected kind"),
            }
        }
        fn on_fabric(&mut self, _cx: &mut Context<'_, u32>) {
            while let Some(m) = self.rx.try_recv() {
                self.got_msgs.push(m);
                if m == "stop" {
                    self.stop = true;
                }
            }
        }
        fn on_timer(&mut self, _cx: &mut Context<'_, u32>, _id: TimerId, data: u32) {
            self.fired.push(data);
        }
        fn before_sleep(&mut self, _cx: &mut Context<'_, u32>) {
            self.flushes += 1;
            for (_, (s, out)) in self.conns.iter_mut() {
                if !out.is_empty() {
                    s.write_all(out).unwrap();
                    out.clear();
                }
            }
        }
        fn has_pending_work(&mut self) -> bool {
            !self.rx.is_empty()
        }
        fn keep_running(&self) -> bool {
            // Run until told to stop and the timer has had its chance.
            !self.stop || self.fired.is_empty()
        }
    }

    #[test]
    fn echo_timers_fabric_and_stop() {
        let mut el: EventLoop<u32> = EventLoop::new(64).unwrap();
        let mut listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        el.registry()
            .register(
                &mut listener,
                token_for(LISTENER, Key { index: 0, gen: 1 }),
                Interest::READABLE,
            )
            .unwrap();
        let (tx, rx) = fabric(16, el.notifier());
        el.schedule_in(Duration::from_millis(5), 7);
        let cancelled = el.schedule_in(Duration::from_millis(5), 8);
        el.timers().cancel(cancelled);
        let mut h = Echo {
            listener,
            conns: GenSlab::new(),
            rx,
            got_msgs: vec![],
            fired: vec![],
            flushes: 0,
            stop: false,
        };
        let client = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"hello").unwrap();
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"hello");
            tx.send("msg").unwrap();
            tx.send("stop").unwrap();
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while h.keep_running() {
            assert!(Instant::now() < deadline, "loop did not stop");
            el.turn(&mut h).unwrap();
        }
        client.join().unwrap();
        assert_eq!(h.got_msgs, vec!["msg", "stop"]);
        assert_eq!(h.fired, vec![7], "the cancelled timer must not fire");
        assert!(h.flushes > 0);
    }

    /// Looks at its mailbox as the worker does: before the poll, and after
    /// it only when that look saw messages or the poll was woken. Sends to
    /// itself from `before_sleep`, when the loop is busy (no wake).
    struct Mailbox {
        rx: FabricReceiver<u32>,
        tx: crate::fabric::FabricSender<u32>,
        mail: bool,
        got: Vec<u32>,
        send_next: Option<u32>,
    }

    impl Handler for Mailbox {
        type Timer = u32;
        fn on_event(&mut self, _: &mut Context<'_, u32>, _: Kind, _: Key, _: &Event) {}
        fn on_fabric(&mut self, cx: &mut Context<'_, u32>) {
            while self.mail || cx.woken {
                let Some(m) = self.rx.try_recv() else { break };
                self.got.push(m);
            }
        }
        fn on_timer(&mut self, _: &mut Context<'_, u32>, _: TimerId, _: u32) {}
        fn before_sleep(&mut self, _: &mut Context<'_, u32>) {
            if let Some(m) = self.send_next.take() {
                self.tx.send(m).unwrap();
            }
        }
        fn has_pending_work(&mut self) -> bool {
            self.mail = !self.rx.is_empty();
            self.mail
        }
        fn keep_running(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_message_is_taken_without_a_second_look_and_never_stranded() {
        let mut el: EventLoop<u32> = EventLoop::new(64).unwrap();
        el.set_max_sleep(Duration::from_secs(5));
        let (tx, rx) = fabric(16, el.notifier());
        let other = tx.clone();
        let mut h = Mailbox {
            rx,
            tx,
            mail: false,
            got: vec![],
            // Sent at the end of the first turn.
            send_next: Some(2),
        };
        // Queued while the loop is parked: the wake ends the poll and the
        // message is taken in the same turn.
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.send(1).unwrap();
        });
        let t0 = Instant::now();
        el.turn(&mut h).unwrap();
        sender.join().unwrap();
        assert_eq!(h.got, [1]);
        assert!(
            t0.elapsed() < Duration::from_secs(4),
            "the wake ended the poll"
        );
        // Queued while the loop is busy (no wake, not seen by that turn's
        // look): the next turn's look sees it and does not sleep.
        let t0 = Instant::now();
        el.turn(&mut h).unwrap();
        assert_eq!(h.got, [1, 2]);
        assert!(
            t0.elapsed() < Duration::from_secs(4),
            "the poll did not sleep"
        );
    }
}
