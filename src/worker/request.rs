//! The request side of a request's way, in the order it goes: a
//! session's socket is read (the budgeted read), complete requests are
//! scanned out of its buffer and dispatched (`dispatch.rs` decides with
//! the router and applies the decision), and what goes to a node is
//! queued on a backend connection of its pool as an `InFlight`,
//! connecting it first if needed (`send_new` for a new request, whose
//! ring slot is reserved once a connection took it; `send_to_pool` for a
//! fan-out part or a resend, which has its slot), then written with
//! everything else queued on it this turn (`flush_backends`, in
//! `before_sleep`).
use super::*;
use crate::session::Steer;
use crate::tls::nodes::NodeTls;

/// What [`Worker::session_read`] left for the session's dispatch.
enum Taken {
    /// Nothing more this turn: gone, closing, draining, or closed on a
    /// read error.
    Nothing,
    /// Input to dispatch (or only a backlog's leftovers to go on with).
    Input,
    /// What it read starts with a lone GET the cache may answer: its
    /// key's hash, the bucket asked for (see `ReplyCache::prefetch`).
    LoneGet(u64),
}

impl Worker {
    /// Read a session's input and dispatch it now, with a panic fence
    /// around this one session.
    pub(super) fn session_input(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        self.fenced(cx, key, |w, cx| {
            if !matches!(w.session_read(cx, key), Taken::Nothing) {
                w.session_dispatch(cx, key);
            }
        });
    }

    /// Read a session's input; dispatch it now, unless it is a lone GET
    /// the cache may answer: that one waits in the read batch until every
    /// session with an event in this turn has been read
    /// ([`run_read_batch`](Self::run_read_batch)), so that the lookups of
    /// all of them wait for memory together instead of one after another.
    /// (A read of several GETs has its own lookups overlap already, and
    /// holding many such reads would ask for more lines than the CPU's
    /// first cache keeps until they are used.)
    pub(super) fn session_input_batched(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        self.fenced(cx, key, |w, cx| match w.session_read(cx, key) {
            Taken::LoneGet(hash) => w.read_batch.push((key, hash)),
            Taken::Input => w.session_dispatch(cx, key),
            Taken::Nothing => {}
        });
    }

    /// Dispatch the lone GETs read in this turn's events: first their
    /// entries are asked for (their buckets were asked for at the read and
    /// have arrived by now), then each is dispatched in the order it was
    /// read.
    pub(super) fn run_read_batch(&mut self, cx: &mut Context<'_, Timer>) {
        if self.read_batch.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.read_batch);
        if batch.len() > 1 {
            for &(_, lone) in &batch {
                self.cache.cache.prefetch_entries(lone);
            }
        }
        for &(key, _) in &batch {
            self.fenced(cx, key, |w, cx| w.session_dispatch(cx, key));
        }
        // The list's buffer is kept for the next turn.
        batch.clear();
        self.read_batch = batch;
    }

    /// Run `f` for the session `key`; a panic inside closes that session
    /// only.
    fn fenced(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        f: impl FnOnce(&mut Self, &mut Context<'_, Timer>),
    ) {
        let r = catch_unwind(AssertUnwindSafe(|| f(self, cx)));
        if r.is_err() {
            let id = self.sessions.get(key).map(|s| s.id).unwrap_or(0);
            log::error!(
                target: "mithril::worker",
                "worker {}: panic while serving client {id}; closing that client (this is a bug)",
                self.id
            );
            self.close_session(cx, key);
        }
    }

    /// Take in what a session sent: a backlog a pause held back is
    /// dispatched first, then the socket is read (unless the session may
    /// not read now).
    fn session_read(&mut self, cx: &mut Context<'_, Timer>, key: Key) -> Taken {
        let draining = self.draining.is_some();
        let Some(s) = self.sessions.get_mut(key) else {
            return Taken::Nothing;
        };
        let s = match s.input() {
            // It reads and dispatches nothing more: closed once written.
            Input::Closing => return Taken::Nothing,
            // Requests held back by a pause go before any new input, so a
            // session that keeps pausing holds one read's worth at most.
            // Draining (SIGTERM), they are still dispatched, though nothing
            // more is read.
            Input::Backlog => {
                s.take_backlog();
                self.process_input(cx, key);
                match self.sessions.get_mut(key) {
                    // Still a backlog: a command going in waves took its
                    // turn, and nothing more is read until it is done.
                    Some(s) if !draining && !s.input().has_backlog() && !s.input().is_paused() => s,
                    _ => return Taken::Nothing,
                }
            }
            _ if draining => return Taken::Nothing,
            _ => s,
        };
        // A paused session reads nothing until it resumes. A blocked one
        // still reads (a client that leaves mid-block must be noticed); it
        // only stops dispatching, as one at a gate does.
        let reads = match s.input() {
            Input::Open | Input::Backlog | Input::AtGate | Input::Blocked { .. } | Input::Feed => {
                !s.eof()
            }
            Input::Paused { .. } | Input::Closing => false,
        };
        if reads {
            match s.read(SESSION_READ_BUDGET, self.query_limit, s.hup()) {
                ReadOutcome::Drained => {}
                ReadOutcome::Eof => {}
                ReadOutcome::Budget => self.ready_sessions.push(key),
                ReadOutcome::Overflow => {
                    self.obs.stats.counters.evicted_qbuf += 1; // observe
                    self.query_limit_close(cx, key);
                    return Taken::Nothing;
                }
                ReadOutcome::Error(e) => {
                    self.obs.stats.pool(s.pool()).client_err += 1; // observe
                    log::debug!(target: "mithril::worker", "client {} read error: {e}", s.id);
                    self.close_session(cx, key);
                    return Taken::Nothing;
                }
            }
            s.active(cx.now);
            s.batch_begins();
            if let Some(hash) = self.prefetch_gets(key) {
                return Taken::LoneGet(hash);
            }
        }
        Taken::Input
    }

    /// Dispatch what a session has read, then close it if it is finished.
    fn session_dispatch(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        self.process_input(cx, key);
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let s = if s.eof() && s.input().is_blocked() {
            // Gone mid-block (now, or its EOF came with the requests).
            self.abandon_block(cx, key);
            let Some(s) = self.sessions.get_mut(key) else {
                return;
            };
            s
        } else {
            s
        };
        let s = if s.eof() && s.has_wait_leases() && !s.input().is_blocked() {
            // Gone mid-WAIT (worker/admin.rs).
            self.abandon_waits(cx, key);
            let Some(s) = self.sessions.get_mut(key) else {
                return;
            };
            s
        } else {
            s
        };
        if s.finished() {
            self.close_session(cx, key);
        } else {
            // Input read and dispatched: a coarse accounting point
            // (overload.rs).
            self.overload.account(s);
        }
        // Inside the panic fence (session_input): a violation closes it.
        #[cfg(debug_assertions)]
        self.check_session(key);
    }

    /// Scan and dispatch every complete request in the read buffer, until
    /// the session must wait: its input mode says so (closing, blocked),
    /// its dispatch window is full, or its next request is gated.
    pub(super) fn process_input(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        use crate::resp::request::Scan;
        loop {
            let Some(s) = self.sessions.get_mut(key) else {
                return;
            };
            if s.pressure.over_hard {
                // Cut off by its output limit, whatever its mode: closed at
                // this turn's flush; its input is dropped meanwhile.
                s.rbuf.clear();
                return;
            }
            // The rest of a (P)(UN)SUBSCRIBE dispatched in waves goes
            // before anything the client sent after it.
            let waving = !self.waves.is_empty() && self.waves.iter().any(|w| w.0 == key);
            match s.input() {
                // A feed's input (a replica's REPLCONF ACK) is dropped.
                Input::Closing | Input::Feed => {
                    s.rbuf.clear();
                    return;
                }
                Input::Blocked { .. } => return,
                // A paused session may dispatch when its window has room
                // again; it stays paused (not reading) until it resumes.
                Input::Open | Input::Backlog | Input::AtGate | Input::Paused { .. } => {
                    if s.at_limit() {
                        // The dispatch window is full (see
                        // session::pressure): wait for replies to drain;
                        // what is buffered (or still to go in waves) goes
                        // first then.
                        s.pause_holding(waving);
                        return;
                    }
                }
            }
            if waving {
                if self.next_wave(cx, key) {
                    // It took its most for this turn: the rest goes on in
                    // the next one (the ready list), and nothing more is
                    // read meanwhile.
                    if let Some(s) = self.sessions.get_mut(key) {
                        s.leave_rest_as_backlog();
                    }
                    self.ready_sessions.push(key);
                    return;
                }
                continue;
            }
            // Before AUTH, only small requests (10 arguments, 16 KiB bulks).
            let (len, inline) = match s.scanner.scan(&s.rbuf, &self.limits, s.authenticated()) {
                Scan::Incomplete => {
                    if let Some(need) = s.scanner.pending_hint() {
                        if need > self.query_limit {
                            // The request cannot fit: refused now, before
                            // the rest of it is read.
                            self.obs.stats.counters.evicted_qbuf += 1; // observe
                            self.request_too_large(cx, key, need);
                            return;
                        }
                        // A large argument is on its way: make room in
                        // big steps instead of small ones, but never more
                        // than the bytes already here again (at least
                        // 64 KiB): a header's claim alone reserves nothing,
                        // and growth stays a doubling (linear copying).
                        if need > s.rbuf.capacity() && need <= self.query_limit {
                            let more = (need - s.rbuf.len()).min(s.rbuf.len().max(64 * 1024));
                            s.rbuf.reserve(more);
                        }
                    }
                    return;
                }
                Scan::Skip { len } => {
                    let _ = s.rbuf.split_to(len);
                    continue;
                }
                Scan::Request { len } => (len, false),
                Scan::Inline { len } => (len, true),
                Scan::Error(e) => {
                    log::debug!(target: "mithril::worker", "client {} ({}): {e}", s.id, s.peer());
                    s.rbuf.clear();
                    s.close_after_flush();
                    let reply = e.reply();
                    self.reply(key, reply);
                    return;
                }
            };
            if self.pipes.on {
                match s.steer(self.pipes.mode, self.pipes.verdict) {
                    Steer::Go => {}
                    Steer::Moved(onto) => self.pipes.moved(onto),
                    Steer::Wait => {
                        // It waits for its replies to move (pipes.rs).
                        return self.pipe_wait_move(key);
                    }
                }
            }
            if !s.gates.is_empty() {
                // An inline command is looked at in its multibulk rewrite.
                let args = crate::command::Args {
                    buf: if inline {
                        s.scanner.inline_frame()
                    } else {
                        &s.rbuf[..len]
                    },
                    ranges: s.scanner.args(),
                };
                if s.gates.gated_for(&args, &self.place.locator(s.pool())) {
                    // Wait for the gate; the request stays in the buffer
                    // and is scanned again then.
                    s.wait_gate();
                    return;
                }
            }
            let frame = if inline {
                let _ = s.rbuf.split_to(len);
                let frame = Bytes::from(s.scanner.take_inline_frame());
                self.args.clear();
                self.args.extend_from_slice(s.scanner.args());
                frame
            } else {
                let frame = s.rbuf.split_to(len).freeze();
                if len >= LARGE_REQUEST && s.rbuf.len() <= len / 2 {
                    // The large allocation goes with the frame (freed once
                    // it is answered), not on as the read buffer of a
                    // client that stays busy: what follows is moved to a
                    // buffer of its own.
                    s.rbuf = bytes::BytesMut::from(&s.rbuf[..]);
                }
                // Exchanged, not copied: a million ranges are 16 MB.
                s.scanner.swap_args(&mut self.args);
                frame
            };
            self.commands += 1;
            self.dispatch(cx, key, frame);
            if self.args.len() > MANY_ARGS {
                // A request of many arguments (a huge MSET, a (P)(UN)SUBSCRIBE
                // of a million channels) left its argument vector large:
                // give it back now, not when the session goes idle.
                self.args = Vec::with_capacity(16);
            }
        }
    }

    // ----- backends -------------------------------------------------------

    #[inline]
    pub(super) fn mark_backend_dirty(&mut self, key: Key) {
        if let Some(b) = self.backends.get_mut(key) {
            if !b.dirty {
                b.dirty = true;
                self.dirty_backends.push(key);
            }
        }
    }

    /// Open a connection to `addr`, queueing `init` frames (HELLO 3,
    /// READONLY) ahead of any request. An error is the reply to give.
    pub(super) fn open_backend(
        &mut self,
        cx: &mut Context<'_, Timer>,
        addr: SocketAddr,
        (server_pool, db): (usize, u32),
        role: Role,
        proto: Proto,
        readonly: bool,
    ) -> Result<Key, Bytes> {
        let mut stream = match reactor::net::connect(addr) {
            Ok(s) => s,
            Err(e) => {
                return Err(Bytes::from(format!(
                    "-CLUSTERDOWN mithril: cannot connect to {addr} ({e})\r\n"
                )))
            }
        };
        let _ = reactor::net::configure(&stream, self.keepalive);
        let key = self.backends.vacant_key();
        if let Err(e) = cx.registry.register(
            &mut stream,
            token_for(BACKEND, key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            return Err(Bytes::from(format!(
                "-ERR mithril: cannot register a connection to {addr} ({e})\r\n"
            )));
        }
        let tls = match NodeTls::connect_if(self.shared.node_tls.as_deref(), addr) {
            Ok(conn) => conn,
            Err(e) => {
                let _ = cx.registry.deregister(&mut stream);
                return Err(Bytes::from(format!(
                    "-CLUSTERDOWN mithril: cannot start TLS toward {addr} ({e})\r\n"
                )));
            }
        };
        let now = cx.now;
        let handshake = self.tls_handshake_limit();
        self.backends
            .insert_with(|k| Backend::new(k, addr, role, proto, stream, now));
        if let (Some(conn), Some(b)) = (tls, self.backends.get_mut(key)) {
            b.start_tls(conn);
            cx.schedule_in(handshake, Timer::TlsHandshake(key));
        }
        let ring_server = self.place.ring_server(server_pool, addr);
        let cluster = self.place.is_cluster(server_pool);
        if let Some(b) = self.backends.get_mut(key) {
            b.server_pool = server_pool;
            b.ring_server = ring_server.map(|i| i as u16);
            b.db = db;
            let pool = self.shared.pools.get(server_pool);
            // The pool's password, or backend-password: authenticate
            // before anything else, then select the pool's database.
            if let Some(auth) = pool.and_then(|p| p.auth.clone()) {
                b.enqueue(InFlight::new(Key::NONE, 0, auth, Purpose::Init));
            }
            if db != 0 {
                let mut select = Vec::with_capacity(32);
                crate::resp::encode::request(&mut select, &[b"SELECT", db.to_string().as_bytes()]);
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    Bytes::from(select),
                    Purpose::Init,
                ));
            }
            if proto == Proto::Resp3 {
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    Bytes::from_static(HELLO3),
                    Purpose::Init,
                ));
            }
            // A replica of a cluster takes reads after READONLY; a
            // standalone replica (a group's) serves them as it is.
            if readonly && cluster {
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    Bytes::from_static(READONLY),
                    Purpose::Init,
                ));
            }
            if role == Role::Lease {
                // Pipelined ahead of the lease's first command: costs no
                // round trip, and lets CLIENT UNBLOCK name the lease.
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    Bytes::from_static(super::cache::CLIENT_ID),
                    Purpose::LeaseId,
                ));
            }
        }
        cx.schedule_in(self.connect_timeout, Timer::ConnectTimeout(key));
        log::debug!(target: "mithril::worker", "worker {}: connecting to {addr} ({role:?}, {proto:?})", self.id);
        Ok(key)
    }

    /// The live connection of `pool` for this session, connecting if
    /// needed. An error is the reply to give the client.
    pub(super) fn backend_for(
        &mut self,
        cx: &mut Context<'_, Timer>,
        pool: usize,
        sticky: usize,
    ) -> Result<Key, Bytes> {
        if sticky & crate::session::PIPE != 0 {
            return self.pipe_for(cx, pool);
        }
        let k = self.place.conns.slot_key(pool, sticky);
        if self.backends.contains(k) {
            return Ok(k);
        }
        let SetKey {
            addr,
            proto,
            readonly,
            pool: server_pool,
            db,
        } = self.place.conns.sets[pool].key;
        if self.place.conns.is_down(pool, cx.now) {
            // Keep asking for the map while a node is down: a failover is
            // noticed as soon as the cluster has one.
            self.shared.topology.request_refresh();
            let last = &self.place.conns.sets[pool].last_error;
            return Err(Bytes::from(format!(
                "-CLUSTERDOWN mithril: node {addr} is unreachable ({last})\r\n"
            )));
        }
        let server_pool = usize::from(server_pool);
        match self.open_backend(
            cx,
            addr,
            (server_pool, db),
            Role::Shared(pool),
            proto,
            readonly,
        ) {
            Ok(key) => {
                self.place.conns.set_conn(pool, sticky, key);
                Ok(key)
            }
            Err(e) => {
                let why = String::from_utf8_lossy(&e).trim_end().to_string();
                let ring = self.place.ring_server(server_pool, addr).map(|i| i as u16);
                self.ring_failure(server_pool, ring, addr, &why);
                self.place.conns.mark_failed(pool, cx.now, why);
                Err(e)
            }
        }
    }

    /// Answer a request that could not be sent (it has its ring slot).
    pub(super) fn fail(&mut self, cx: &mut Context<'_, Timer>, f: InFlight, err: Bytes) {
        let pool = self.pool_of(f.session);
        self.obs.stats.pool(pool).forward_errors += 1; // observe
        self.complete_error(cx, f, err);
    }

    /// Answer a new request that could not be sent: it has no ring slot
    /// yet, so the error is the session's next reply.
    pub(super) fn fail_new(&mut self, session: Key, err: Bytes) {
        let pool = self.pool_of(session);
        self.obs.stats.pool(pool).forward_errors += 1; // observe
        self.reply(session, err);
    }

    /// Queue a new request of `session` on `pool`. Its ring slot is
    /// reserved once a connection takes it, and `entry` makes its FIFO
    /// entry for that slot; when the pool cannot take it (down, or no
    /// connection could be opened) the error is the session's next reply.
    #[inline]
    pub(super) fn send_new(
        &mut self,
        cx: &mut Context<'_, Timer>,
        pool: usize,
        session: Key,
        entry: impl FnOnce(u64) -> InFlight,
    ) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let (sticky, db) = (s.conn_choice(), s.other_db());
        let pool = db.map_or(pool, |db| self.place.in_db(pool, db));
        match self.backend_for(cx, pool, sticky) {
            Ok(bkey) => {
                let Some(s) = self.sessions.get_mut(session) else {
                    return;
                };
                let seq = s.ring.push_pending();
                self.send_on(bkey, entry(seq));
            }
            Err(err) => self.fail_new(session, err),
        }
    }

    /// Queue a request that has its ring slot (a fan-out part, a resend)
    /// on `pool`.
    pub(super) fn send_to_pool(&mut self, cx: &mut Context<'_, Timer>, pool: usize, f: InFlight) {
        let Some(s) = self.sessions.get(f.session) else {
            return;
        };
        let (sticky, db) = (s.conn_choice(), s.other_db());
        let pool = db.map_or(pool, |db| self.place.in_db(pool, db));
        match self.backend_for(cx, pool, sticky) {
            Ok(bkey) => self.send_on(bkey, f),
            Err(err) => self.fail(cx, f, err),
        }
    }

    /// Queue a request on a given connection, behind ASKING if it asks.
    pub(super) fn send_on(&mut self, bkey: Key, f: InFlight) {
        let Some(b) = self.backends.get_mut(bkey) else {
            return;
        };
        if f.asking {
            b.enqueue(InFlight::new(
                Key::NONE,
                0,
                Bytes::from_static(router::ASKING),
                Purpose::Asking,
            ));
        }
        b.enqueue(f);
        self.mark_backend_dirty(bkey);
    }

    pub(super) fn flush_backends(&mut self, cx: &mut Context<'_, Timer>) {
        let mut list = std::mem::take(&mut self.dirty_backends);
        for key in list.drain(..) {
            let Some(b) = self.backends.get_mut(key) else {
                continue;
            };
            b.dirty = false;
            if b.state != State::Connected {
                continue;
            }
            if b.link.is_some() {
                self.pipe_take(key);
                continue;
            }
            let awaiting = b.awaiting(); // observe
            let written = b.flush();
            // observe: requests written now start their round-trip clock.
            if let Role::Shared(_) = b.role {
                let sent = b.awaiting().saturating_sub(awaiting);
                b.obs.clock.sent(sent, self.obs.stats.now_us);
                // auto's sample: frames per write toward the nodes.
                self.pipes.frames += sent as u64;
                self.pipes.writes += u64::from(sent > 0);
            }
            if let Err(e) = written {
                self.backend_failed(cx, key, &e.to_string());
                continue;
            }
            #[cfg(debug_assertions)]
            self.check_fenced(cx, BACKEND, key);
        }
        if self.dirty_backends.is_empty() {
            self.dirty_backends = list;
        }
        if self.pipes.on {
            self.pipe_send();
        }
    }
}
