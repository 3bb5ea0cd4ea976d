//! The fabric: bounded channels between event loops.
//!
//! Each loop has one [`Notifier`]: its mio `Waker` plus an `idle` flag the
//! loop raises just before it parks in `poll` and lowers when it returns. A
//! sender pushes its message, then wakes the receiver only if it finds the
//! flag raised (and lowers it), so a busy loop is never woken once per
//! message, and a parked loop is woken exactly once per burst.
//!
//! Why no message is stranded: the loop raises the flag *before* it checks
//! its channels for the last time, and a sender pushes *before* it looks at
//! the flag. Either the loop's check sees the message, or the sender sees
//! the raised flag and wakes the loop.
//!
//! So the receiver need look at its channel once per turn, in that check
//! (`Handler::has_pending_work`), and again after the poll only if the
//! check saw messages or the poll was woken (`Context::woken`). A message
//! queued after the check finds the flag raised and wakes the poll, or
//! finds the loop busy again and is seen by the next turn's check, which
//! keeps that turn's poll from sleeping: taken one turn later, never
//! stranded.
//!
//! Channels are bounded; a full channel hands the message back to the sender
//! (`Err(msg)`), whose caller decides the overflow policy.
//!
//! Why mithril has a second cross-worker channel (`shared::pipe::PipeInbox`,
//! a mutex-guarded batch per worker): this one carries *control* messages,
//! few and from any thread (accepted sockets from the acceptor, shutdown
//! from the signal thread, a worker's questions and answers), one at a
//! time, where a bounded queue that refuses when full is the right
//! contract. The shared pipes carry the *request path* itself (requests for
//! a node another worker owns and their replies, in each link's order, plus
//! MONITOR lines and cache invalidations batched per turn): there a send may
//! not be refused halfway through a pipeline, and the cost must be one lock
//! per turn's batch, not one queue operation per frame. The inbox is bounded
//! by the senders' reply windows instead. Both wake the receiver through the
//! same [`Notifier`].

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use mio::Waker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Wakes one event loop, at most once per idle period.
#[derive(Clone)]
pub struct Notifier {
    waker: Arc<Waker>,
    idle: Arc<AtomicBool>,
}

impl Notifier {
    pub fn new(waker: Arc<Waker>) -> Notifier {
        Notifier {
            waker,
            idle: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Wake the loop if it is parked (or about to park).
    pub fn notify(&self) {
        if self.idle.load(Ordering::SeqCst) && self.idle.swap(false, Ordering::SeqCst) {
            // A failed wake leaves the loop to its poll timeout; nothing to
            // do about it here.
            let _ = self.waker.wake();
        }
    }

    /// Wake the loop unconditionally (shutdown, configuration changes).
    pub fn wake_now(&self) {
        self.idle.store(false, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// Called by the loop itself before its final pre-sleep checks.
    pub fn set_idle(&self) {
        self.idle.store(true, Ordering::SeqCst);
    }

    /// Called by the loop when it wakes.
    pub fn set_busy(&self) {
        self.idle.store(false, Ordering::SeqCst);
    }
}

/// Sending half of a fabric channel.
pub struct FabricSender<M> {
    tx: Sender<M>,
    notifier: Notifier,
}

impl<M> Clone for FabricSender<M> {
    fn clone(&self) -> Self {
        FabricSender {
            tx: self.tx.clone(),
            notifier: self.notifier.clone(),
        }
    }
}

impl<M> FabricSender<M> {
    /// Queue a message and wake the receiver if it sleeps. A full channel
    /// (or a receiver that is gone) returns the message.
    pub fn send(&self, msg: M) -> Result<(), M> {
        match self.tx.try_send(msg) {
            Ok(()) => {
                self.notifier.notify();
                Ok(())
            }
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => Err(m),
        }
    }

    /// Wake the receiver's loop now, whatever it is doing: it runs one
    /// more turn (a waker's event) even without a message.
    pub fn wake(&self) {
        self.notifier.wake_now();
    }

    pub fn len(&self) -> usize {
        self.tx.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tx.is_empty()
    }
}

/// Receiving half of a fabric channel; lives in the receiving loop.
pub struct FabricReceiver<M> {
    rx: Receiver<M>,
}

impl<M> FabricReceiver<M> {
    pub fn try_recv(&self) -> Option<M> {
        match self.rx.try_recv() {
            Ok(m) => Some(m),
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rx.len()
    }
}

/// A bounded channel toward the loop that `notifier` wakes.
pub fn fabric<M>(capacity: usize, notifier: Notifier) -> (FabricSender<M>, FabricReceiver<M>) {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    (FabricSender { tx, notifier }, FabricReceiver { rx })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::Duration;

    #[test]
    fn wakes_only_when_idle_and_bounds_capacity() {
        let mut poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), Token(1)).unwrap());
        let n = Notifier::new(waker);
        let (tx, rx) = fabric::<u32>(2, n.clone());
        let mut events = Events::with_capacity(8);

        // Busy receiver: no wake.
        tx.send(1).unwrap();
        poll.poll(&mut events, Some(Duration::from_millis(0)))
            .unwrap();
        assert!(events.is_empty(), "a busy loop is not woken");
        tx.send(2).unwrap();
        assert_eq!(tx.send(3), Err(3), "bounded");
        assert_eq!(rx.try_recv(), Some(1));
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.try_recv(), None);

        // Idle receiver: exactly one wake for a burst.
        n.set_idle();
        tx.send(4).unwrap();
        tx.send(5).unwrap();
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(events.iter().count(), 1);
        assert_eq!(events.iter().next().map(|e| e.token()), Some(Token(1)));
    }

    #[test]
    fn cross_thread_messages_are_never_stranded() {
        let mut poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), Token(1)).unwrap());
        let n = Notifier::new(waker);
        let (tx, rx) = fabric::<u32>(64, n.clone());
        const N: u32 = 20_000;
        let sender = std::thread::spawn(move || {
            for i in 0..N {
                let mut m = i;
                loop {
                    match tx.send(m) {
                        Ok(()) => break,
                        Err(back) => {
                            m = back;
                            std::thread::yield_now();
                        }
                    }
                }
            }
        });
        let mut events = Events::with_capacity(8);
        let mut got = 0u32;
        while got < N {
            n.set_idle();
            let parked = rx.is_empty();
            let timeout = if parked {
                Duration::from_secs(10)
            } else {
                Duration::ZERO
            };
            poll.poll(&mut events, Some(timeout)).unwrap();
            n.set_busy();
            assert!(
                !parked || !events.is_empty(),
                "a parked loop slept through its whole timeout: a message was stranded"
            );
            while let Some(m) = rx.try_recv() {
                assert_eq!(m, got);
                got += 1;
            }
        }
        sender.join().unwrap();
    }
}
