//! mithril: a Redis Cluster proxy.
//!
//! Plain clients see one Redis server; cluster-aware clients see a one-node
//! cluster that owns all 16384 slots. Behind that face every request is
//! routed to the node that owns its slot, replies leave in request order,
//! and redirects are followed without the client seeing them.
//!
//! The library exists so tests can reach the pieces; the daemon is
//! `main.rs`. `doc/architecture.md` describes the thread layout, the loop
//! phases and a request's way through a worker; `doc/lexicon.md` defines
//! the terms.

pub mod acceptor;
pub mod acl;
pub mod backend;
pub mod cache;
pub mod command;
pub mod config;
pub mod hashkit;
pub mod hll;
pub mod local;
pub mod logging;
pub mod metrics;
pub mod placement;
pub mod reload;
pub mod resp;
pub mod router;
pub mod script;
pub mod server;
pub mod session;
pub mod shared;
pub mod stats;
pub mod tls;
pub mod topology;
pub mod upgrade;
pub mod worker;
