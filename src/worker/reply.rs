//! The reply side of a request's way, in the order it goes: a backend's
//! socket is read, each complete reply is paired with the head of its
//! in-flight FIFO (`on_reply`), redirects are followed and TRYAGAIN waited
//! out (`follow`, `retry.rs`), and the final reply is delivered into the
//! session's ring at its sequence (`complete`, `deliver`); once per turn
//! every session with replies ready at its ring's front writes them in
//! order (`flush_sessions`).
use super::*;

impl Worker {
    pub(super) fn backend_event(&mut self, cx: &mut Context<'_, Timer>, key: Key, event: &Event) {
        let Some(b) = self.backends.get_mut(key) else {
            return;
        };
        if event.is_read_closed() || event.is_error() {
            b.hup = true;
        }
        if b.state == State::Connecting {
            match b.finish_connect() {
                Ok(true) => {
                    let pool = b.conn_set();
                    log::debug!(target: "mithril::worker", "worker {}: connected to {}", self.id, b.addr);
                    if let Some(pool) = pool {
                        self.place.conns.mark_ok(pool);
                    }
                    self.mark_backend_dirty(key);
                }
                Ok(false) => return,
                Err(e) => {
                    self.backend_failed(cx, key, &e.to_string());
                    return;
                }
            }
        } else if event.is_writable() {
            self.mark_backend_dirty(key);
        }
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.backend_read(cx, key);
        }
    }

    pub(super) fn backend_read(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(b) = self.backends.get_mut(key) else {
            return;
        };
        if let Role::Pubsub(owner) = b.role {
            // Backpressure toward a slow subscriber: leave the messages in
            // the socket (and the node's output buffer) while its window is
            // full.
            if self.push_window_full(owner) {
                return;
            }
        }
        let Some(b) = self.backends.get_mut(key) else {
            return;
        };
        // A link's replies were fed in by `pipe_receive`.
        let io = if b.link.is_some() {
            Io::Ok
        } else {
            b.read(BACKEND_READ_BUDGET, b.hup)
        };
        let via = b.addr;
        let role = b.role;
        let replies_before = b.replies; // observe
        loop {
            let Some(b) = self.backends.get_mut(key) else {
                return;
            };
            match b.next_reply() {
                Read::Empty => {
                    // observe: this read's replies stop their round-trip clock.
                    if let Role::Shared(_) = role {
                        let n = b.replies - replies_before;
                        b.obs.clock.answered(n, self.obs.stats.now_us);
                    }
                    // A ring's server that answered has failed no more.
                    if let Some(i) = b.ring_server {
                        if b.replies != replies_before {
                            let pool = b.server_pool;
                            if let Some(h) =
                                self.shared.pools.get(pool).and_then(|p| p.ring_health())
                            {
                                h.answered(usize::from(i));
                            }
                        }
                    }
                    break;
                }
                Read::Push(frame) => {
                    if role == Role::Tracker {
                        self.tracker_push(key, &frame);
                        continue;
                    }
                    if let Role::Pubsub(owner) = role {
                        self.pubsub_frame(cx, owner, key, frame);
                        // The window is exact: the rest waits in the buffer.
                        if self.push_window_full(owner) {
                            break;
                        }
                    }
                }
                Read::Intermediate(frame, head) => {
                    if let Some(from) = b.head_mut().and_then(|h| h.purpose.remote()) {
                        let link = b.head_mut().map_or(0, |h| h.seq);
                        self.pipe_answer(from, link, frame, true);
                        continue;
                    }
                    if head == b'-' && b.txn_redirect.is_none() {
                        b.txn_redirect = router::parse_redirect(&frame, via, self.place.map());
                        if b.txn_redirect.is_none()
                            && b.txn_retry.is_none()
                            && retry::is_retryable(&frame)
                        {
                            b.txn_retry = Some(frame);
                        } else if b.txn_redirect.is_none() && b.txn_error.is_none() {
                            b.txn_error = Some(frame);
                        }
                    }
                }
                Read::Broken(why) => {
                    self.backend_failed(cx, key, why);
                    return;
                }
                Read::Reply(f, frame, head) => self.on_reply(cx, key, via, f, frame, head),
            }
        }
        // A TLS read may leave handshake messages, or requests that waited
        // for the handshake, to write.
        if self.backends.get(key).is_some_and(|b| b.tls_wants_flush()) {
            self.mark_backend_dirty(key);
        }
        match io {
            Io::Ok => {}
            Io::Budget => self.ready_backends.push(key),
            Io::Closed => return self.backend_failed(cx, key, "connection closed by the node"),
            Io::Error(e) => return self.backend_failed(cx, key, &e.to_string()),
        }
        self.drop_if_retired(cx, key);
    }

    pub(super) fn on_reply(
        &mut self,
        cx: &mut Context<'_, Timer>,
        bkey: Key,
        via: SocketAddr,
        f: InFlight,
        frame: Bytes,
        head: u8,
    ) {
        match f.purpose {
            Purpose::Remote(from) => return self.pipe_answer(from, f.seq, frame, false),
            Purpose::Asking | Purpose::Reload => return,
            Purpose::Init => {
                if head == b'-' {
                    let why = crate::backend::auth::setup_failure(&frame);
                    // The TCP connect succeeded (the pool was marked up):
                    // a refused set-up backs off like a refused connect.
                    if let Some(pool) = self.backends.get(bkey).and_then(Backend::conn_set) {
                        self.place.conns.mark_failed(pool, cx.now, why.clone());
                    }
                    self.backend_failed(cx, bkey, &why);
                }
                return;
            }
            Purpose::Blocking | Purpose::Kill(_) => self.lease_answered(bkey, f.session),
            Purpose::Tracking | Purpose::Caching => {
                return self.opt_in_answered(bkey, f.purpose, head);
            }
            Purpose::TrackerId => return self.tracker_id(bkey, &frame),
            Purpose::LeaseId => return self.lease_id(bkey, &frame),
            Purpose::ReadCheck => return self.read_check_answered(f.seq),
            Purpose::Pin(_) => return self.pin_reply(cx, bkey, via, f, frame, head),
            _ => {}
        }
        // What the transaction's queued commands got before EXEC's reply:
        // taken now, whatever EXEC's reply says.
        let (txn_redirect, txn_retry, txn_error) = match f.purpose {
            Purpose::Txn => self
                .backends
                .get_mut(bkey)
                .map(|b| {
                    (
                        b.txn_redirect.take(),
                        b.txn_retry.take(),
                        b.txn_error.take(),
                    )
                })
                .unwrap_or_default(),
            _ => (None, None, None),
        };
        // The client saw +QUEUED for every command (the proxy queued them):
        // a node that refused one as the transaction reached it says why
        // in EXEC's abort, as a server whose state changed after queueing.
        let frame = match txn_error {
            Some(e)
                if frame.starts_with(txn::EXECABORT.strip_suffix(b"\r\n").unwrap_or_default()) =>
            {
                let mut r = b"-EXECABORT Transaction discarded because of: ".to_vec();
                r.extend_from_slice(e.strip_prefix(b"-").unwrap_or(&e));
                Bytes::from(r)
            }
            _ => frame,
        };
        if head == b'-' {
            if is_server_failure(&frame) {
                // twemproxy counts these toward a server's ejection.
                self.server_failed(bkey);
            }
            if let Some(r) = router::parse_redirect(&frame, via, self.place.map()) {
                self.follow(cx, via, f, r);
                return;
            }
            if retry::is_retryable(&frame) {
                self.try_again(cx, Some(bkey), via, f, frame);
                return;
            }
            if f.purpose == Purpose::Client && scripts::is_missing(&frame) {
                return self.reload_missing(cx, bkey, f, frame);
            }
            // observe: the error reaches the client, unless the
            // transaction it aborted is sent again.
            let again =
                txn_redirect.is_some() || (txn_retry.is_some() && frame.starts_with(b"-EXECABORT"));
            if !again {
                self.observe_error(f.purpose, &frame);
            }
        }
        if let Some(r) = txn_redirect {
            self.follow(cx, via, f, r);
            return;
        }
        if let Some(cause) = txn_retry {
            // A queued command refused with TRYAGAIN (or CLUSTERDOWN)
            // aborted the transaction before anything ran: retry it whole,
            // as a single-slot request is; EXEC's own reply is the answer
            // if the waits run out.
            if frame.starts_with(b"-EXECABORT") {
                self.try_again_as(cx, Some(bkey), via, f, &cause, frame);
                return;
            }
        }
        if !self.downs.is_empty() && matches!(f.purpose, Purpose::Part(_) | Purpose::Scan(_)) {
            // A cluster-wide command's part ran on `via`: what waits out a
            // CLUSTERDOWN there from before it cannot run after it.
            self.down_wide_answered(cx, via, &f);
        }
        self.complete(cx, f, frame);
    }

    /// A request's final reply is an error: counted (observe), then
    /// completed.
    pub(super) fn complete_error(
        &mut self,
        cx: &mut Context<'_, Timer>,
        f: InFlight,
        frame: Bytes,
    ) {
        if let Purpose::Remote(from) = f.purpose {
            // Counted by the worker whose client it answers.
            return self.pipe_lost(from, f.seq, frame);
        }
        self.observe_error(f.purpose, &frame);
        self.complete(cx, f, frame);
    }

    /// A request's final reply (or the error replacing it).
    #[inline]
    pub(super) fn complete(&mut self, cx: &mut Context<'_, Timer>, f: InFlight, frame: Bytes) {
        if !self.downs.is_empty() {
            // Requests of some session wait out a CLUSTERDOWN: this one
            // may be one of them, or one they must not fall behind.
            return self.down_answered(cx, f, frame);
        }
        self.finish(cx, f, frame)
    }

    /// Deliver (or fold) a request's final reply.
    pub(super) fn finish(&mut self, cx: &mut Context<'_, Timer>, f: InFlight, frame: Bytes) {
        match f.purpose {
            Purpose::Client => self.deliver(f.session, f.seq, frame, &f.req),
            Purpose::Fill(ticket) => {
                self.cache_fill(ticket, &f.req, &frame);
                self.deliver(f.session, f.seq, frame, &f.req)
            }
            Purpose::Txn => {
                let frame = self.exec_denied_spliced(f.session, f.seq, frame);
                self.deliver(f.session, f.seq, frame, observe::EXEC_FRAME)
            }
            Purpose::Part(part) | Purpose::Kill(part) => {
                self.fold_part(cx, f.session, f.seq, part, frame)
            }
            Purpose::FillPart(part, ticket) => {
                self.cache_fill(ticket, &f.req, &frame);
                self.fold_part(cx, f.session, f.seq, u32::from(part), frame)
            }
            Purpose::Scan(index) => self.scan_page(cx, f.session, f.seq, index, &f.req, frame),
            Purpose::WaitSync { .. } => self.wait_synced(cx, f, frame),
            Purpose::Blocking => {
                self.deliver(f.session, f.seq, frame, &[]);
                self.unblock(f.session);
            }
            // Only a lost pin's requests come this way (`pin_reply` takes
            // the others).
            Purpose::Pin(op) => self.pin_delivered(f, frame, op),
            Purpose::Asking
            | Purpose::Init
            | Purpose::Reload
            | Purpose::Tracking
            | Purpose::Caching
            | Purpose::TrackerId
            | Purpose::LeaseId => {}
            Purpose::ReadCheck => self.read_check_answered(f.seq),
            Purpose::Remote(from) => self.pipe_answer(from, f.seq, frame, false),
        }
    }

    /// Retry a redirected request where the cluster says its slot lives.
    pub(super) fn follow(
        &mut self,
        cx: &mut Context<'_, Timer>,
        via: SocketAddr,
        mut f: InFlight,
        r: Redirect,
    ) {
        // A redirected GET carries no opt-in: it fills nothing.
        self.unfill(&mut f);
        if f.hops >= router::MAX_HOPS {
            self.complete_error(cx, f, Bytes::from_static(router::ERR_TOO_MANY_REDIRECTS));
            return;
        }
        let Some(s) = self.sessions.get_mut(f.session) else {
            return; // the client left; nobody is waiting for this answer
        };
        let proto = s.proto;
        // A write may now land on a master its session's record does not
        // name: its next WAIT asks every master.
        s.note_redirected_write();
        let (addr, asking) = match r {
            Redirect::Moved { slot, addr } => {
                self.obs.stats.counters.moved += 1; // observe
                crate::debug_sampled!(target: "mithril::worker", "worker {}: MOVED {slot} {addr}", self.id);
                self.shared.topology.request_refresh();
                self.place.learn_moved(slot, addr);
                // The slot changed owner: no worker keeps what it cached
                // of it, and fills on their way are not stored.
                self.cache.cache.unit_moved(slot);
                (addr, false)
            }
            Redirect::Ask { slot, addr } => {
                self.obs.stats.counters.ask += 1; // observe
                crate::debug_sampled!(target: "mithril::worker", "worker {}: ASK {slot} {addr}", self.id);
                self.cache.cache.unit_moved(slot);
                (addr, true)
            }
            Redirect::Unresolved { slot, ask } => {
                // A target the address book does not know (a new host
                // name, or `?`): refresh the topology and ask the same node
                // again after a wait, as for TRYAGAIN; by then the book
                // has the name, or the slot has settled.
                crate::debug_sampled!(target: "mithril::worker", "worker {}: redirect of slot {slot} (ask {ask}) to an unknown endpoint", self.id);
                self.shared.topology.request_refresh();
                let frame = Bytes::from_static(ERR_UNRESOLVED);
                return self.try_again(cx, None, via, f, frame);
            }
        };
        if !self.downs.is_empty() {
            if let Some(slot) = self.down_follower(&f) {
                // Earlier requests of its slot wait out a CLUSTERDOWN: it
                // goes after them, not to the new node ahead of them.
                let mut f = f;
                f.hops = f.hops.saturating_add(1);
                let frame = Bytes::from_static(down::ERR_BEHIND_DOWN);
                return self.down_refused(cx, None, f, addr, asking, frame, slot);
            }
        }
        let f = InFlight {
            hops: f.hops.saturating_add(1),
            ..resend(f, asking)
        };
        if f.purpose == Purpose::Blocking {
            // A blocking command follows on a lease at the new node.
            return self.resend_on_lease(cx, addr, f);
        }
        let pool = self.place.at(addr, proto, self.pool_of(f.session));
        self.send_to_pool(cx, pool, f);
    }

    /// Queue a reply for `session` at `seq` (dropped if the session is
    /// gone or the slot was already answered). `req` is the request, for
    /// the slow log (empty: not logged).
    #[inline]
    pub(super) fn deliver(&mut self, session: Key, seq: u64, frame: Bytes, req: &[u8]) {
        if let Some(s) = self.sessions.get_mut(session) {
            // observe: a request that took long enough enters the slow log.
            let (front, stamp) = s.ring.fill_stamped(seq, frame);
            if !req.is_empty() && self.obs.stats.is_slow(stamp) {
                observe::log_slow(&self.shared, self.id, &mut self.obs.stats, s, stamp, req);
            }
            let cut = overload::mark_over_hard(&self.overload, s);
            if !front {
                // Not written this turn: counted now (a front reply is,
                // after this turn's flush).
                overload::count_held(&mut self.overload, s);
            }
            // A session holding replies back looks again at each one in.
            if (front || cut || s.in_batch_wait()) && s.mark_dirty() {
                self.dirty_sessions.push(session);
            }
            let (moving, holds) = (s.moving(), !s.holds.is_empty());
            if moving {
                self.pipe_moved(session);
            }
            if holds {
                self.cache_release(session, seq);
            }
            if let Some(s) = self.sessions.get_mut(session) {
                if let Some(slot) = s.gates.take_retry(seq) {
                    self.release_gates(session, &[slot]);
                }
            }
        }
    }

    /// `Timer::BatchWait`: every session in a batch wait writes its replies
    /// at this turn's flush (its wait counts as over).
    pub(super) fn end_batch_waits(&mut self) {
        let mut waiting = std::mem::take(&mut self.batch_waiting);
        for key in waiting.drain(..) {
            let Some(s) = self.sessions.get_mut(key) else {
                continue;
            };
            if s.cut_batch_wait() {
                self.mark_session_dirty(key);
            }
        }
        // Nothing was listed meanwhile: the list keeps its room.
        self.batch_waiting = waiting;
    }

    /// Append an immediate reply for the request being dispatched.
    #[inline]
    pub(super) fn reply(&mut self, key: Key, frame: Bytes) {
        if frame.first() == Some(&b'-') {
            self.obs.stats.error_reply(&frame); // observe
        }
        if let Some(s) = self.sessions.get_mut(key) {
            s.ring.push_ready(frame);
            let cut = overload::mark_over_hard(&self.overload, s);
            let front = s.ring.front_ready();
            if !front {
                overload::count_held(&mut self.overload, s);
            }
            if (front || cut) && s.mark_dirty() {
                self.dirty_sessions.push(key);
            }
        }
    }

    pub(super) fn reply_static(&mut self, key: Key, frame: &'static [u8]) {
        self.reply(key, Bytes::from_static(frame));
    }

    #[inline]
    pub(super) fn mark_session_dirty(&mut self, key: Key) {
        if let Some(s) = self.sessions.get_mut(key) {
            if s.mark_dirty() {
                self.dirty_sessions.push(key);
            }
        }
    }

    pub(super) fn flush_sessions(&mut self, cx: &mut Context<'_, Timer>) {
        let mut list = std::mem::take(&mut self.dirty_sessions);
        for key in list.drain(..) {
            let Some(s) = self.sessions.get_mut(key) else {
                continue;
            };
            s.flushing();
            if s.pressure.over_hard {
                // Its output passed the hard limit as it was appended.
                self.output_limit_close(cx, key, overload::Cut::Hard);
                continue;
            }
            if s.waits_for_batch(cx.now_us, self.batch_wait_us) {
                if s.start_batch_wait(cx.now_us) {
                    if self.batch_waiting.is_empty() {
                        cx.schedule_in(Duration::from_micros(self.batch_wait_us), Timer::BatchWait);
                    }
                    self.batch_waiting.push(key);
                }
                continue;
            }
            s.end_batch_wait();
            match s.flush(&mut self.obs.stats) {
                FlushOutcome::Done | FlushOutcome::Blocked => {}
                FlushOutcome::Error(e) => {
                    self.obs.stats.pool(s.pool()).client_err += 1; // observe
                    log::debug!(target: "mithril::worker", "client {} write error: {e}", s.id);
                    self.close_session(cx, key);
                    continue;
                }
            }
            if s.finished() || (self.draining.is_some() && s.idle() && !s.input().has_backlog()) {
                self.close_session(cx, key);
                continue;
            }
            // Output limits, the dispatch window, resuming a paused session
            // (overload.rs).
            match overload::after_flush(&mut self.overload, s, cx.now) {
                overload::AfterFlush::Go => {}
                overload::AfterFlush::Resume => self.ready_sessions.push(key),
                overload::AfterFlush::Close(cut) => {
                    self.output_limit_close(cx, key, cut);
                    continue;
                }
            }
            // A throttled subscriber whose pushes drained: read its
            // connection again.
            let waiting = s.push_backlog();
            if let Some(sub) = s.sub.as_mut() {
                if sub.throttled && waiting < crate::session::PUSH_WINDOW / 2 {
                    sub.throttled = false;
                    self.ready_backends.extend(sub.conns.iter().map(|c| c.conn));
                }
            }
            #[cfg(debug_assertions)]
            self.check_fenced(cx, SESSION, key);
        }
        if self.dirty_sessions.is_empty() {
            self.dirty_sessions = list;
        }
        // What the flushes left held for the clients, counted after each
        // (overload::after_flush), against client-output-total-limit
        // (also when a tick or another worker asked).
        if self.overload.budget_due {
            self.output_budget(cx);
        }
    }
}

/// The error replies twemproxy counts as a server's failure (toward its
/// ejection from the ring): out of memory, busy with a script, loading.
fn is_server_failure(frame: &[u8]) -> bool {
    frame.starts_with(b"-OOM") || frame.starts_with(b"-BUSY") || frame.starts_with(b"-LOADING")
}
