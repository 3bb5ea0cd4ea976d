//! The floor: the cheapest server redis-benchmark's GET can talk to, run
//! beside mithril as the "floor" side of the GET workloads.
//!
//! It answers every command with the same 32-byte bulk string, doing
//! nothing else: one thread per core, each with its own epoll and its own
//! SO_REUSEPORT listener, one read and one write per batch a client sends.
//! Whatever it costs per request is what the kernel charges any server on
//! this machine for the client's side of the conversation (the reads, the
//! writes, the wakeups), so no proxy, cached or not, can cost less; its
//! ratio to direct is the most any proxy could reach here.
//!
//! Owns: its listeners, its connections and one buffer pair per thread.
//! Never: parse more than a command's first byte; it counts the `*` that
//! start redis-benchmark's commands (its GET keys and SET values never
//! contain one).

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

/// What every command is answered with: a `-d 32` GET's reply.
const REPLY: &[u8] = b"$32\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n";
const LISTENER: Token = Token(usize::MAX);

/// Start the floor as a child of the bench (this executable again), with
/// `threads` threads on a free port; returns once it accepts connections.
pub fn start(threads: u32) -> Result<(Child, u16), String> {
    let port = crate::support::free_port();
    let mut cmd = Command::new(std::env::current_exe().unwrap_or_default());
    cmd.env("MITHRIL_BENCH_FLOOR", format!("{port} {threads}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let mut child =
        crate::support::spawn_child(cmd).map_err(|e| format!("cannot start the floor: {e}"))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let up = crate::support::poll_until(Duration::from_secs(10), || {
        match child.try_wait() {
            Ok(None) => std::net::TcpStream::connect(addr).ok().map(|_| true),
            _ => Some(false), // it exited
        }
    });
    if up != Some(true) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("the floor server did not listen on {addr}"));
    }
    Ok((child, port))
}

/// `MITHRIL_BENCH_FLOOR="PORT THREADS"`: serve until killed.
pub fn run_child(args: &str) -> ExitCode {
    let mut it = args.split_whitespace().map(str::parse::<u16>);
    let (Some(Ok(port)), Some(Ok(threads))) = (it.next(), it.next()) else {
        eprintln!("floor: bad arguments {args:?}");
        return ExitCode::from(2);
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut listeners = Vec::new();
    for _ in 0..threads.max(1) {
        match listen(addr) {
            Ok(l) => listeners.push(l),
            Err(e) => {
                eprintln!("floor: cannot listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let handles: Vec<_> = listeners
        .into_iter()
        .map(|l| std::thread::spawn(move || serve(l)))
        .collect();
    for h in handles {
        let _ = h.join();
    }
    ExitCode::SUCCESS
}

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(TcpListener::from_std(s.into()))
}

fn serve(mut listener: TcpListener) -> std::io::Result<()> {
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns: Vec<Option<TcpStream>> = Vec::new();
    let mut events = Events::with_capacity(256);
    let mut input = vec![0u8; 64 * 1024];
    let mut output: Vec<u8> = Vec::with_capacity(64 * 1024 * REPLY.len());
    loop {
        poll.poll(&mut events, None)?;
        for ev in events.iter() {
            if ev.token() == LISTENER {
                while let Ok((mut s, _)) = listener.accept() {
                    s.set_nodelay(true)?;
                    let i = conns
                        .iter()
                        .position(Option::is_none)
                        .unwrap_or(conns.len());
                    poll.registry()
                        .register(&mut s, Token(i), Interest::READABLE)?;
                    if i == conns.len() {
                        conns.push(Some(s));
                    } else {
                        conns[i] = Some(s);
                    }
                }
                continue;
            }
            let i = ev.token().0;
            let Some(s) = conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            // Edge-triggered: read until the socket is empty.
            let mut open = true;
            loop {
                match s.read(&mut input) {
                    Ok(0) => {
                        open = false;
                        break;
                    }
                    Ok(n) => {
                        output.clear();
                        for _ in input[..n].iter().filter(|&&b| b == b'*') {
                            output.extend_from_slice(REPLY);
                        }
                        if s.write_all(&output).is_err() {
                            open = false;
                            break;
                        }
                        if n < input.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        open = false;
                        break;
                    }
                }
            }
            if !open {
                conns[i] = None;
            }
        }
    }
}
