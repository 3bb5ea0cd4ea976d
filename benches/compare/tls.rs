//! The TLS table of `make bench`: TLS on both sides, against a direct TLS
//! client of the same cluster.
//!
//! ```text
//!  3-master cluster, every node with a tls-port   <── redis-benchmark --tls --cluster
//!  (tls-cluster yes, tls-replication yes,               on a node's tls-port  "direct"
//!   tls-auth-clients no)
//!            ^ TLS (tls-cluster yes, the nodes' TLS ports as seeds)
//!            └── mithril (tls-port) <── redis-benchmark --tls --threads M    "mithril"
//! ```
//!
//! GET and SET at `-P 1` and `-P 16`, warmed up and alternated as the plain
//! tables are (`Bench::run_workload`), then printed beside the plain ratio
//! of the same workload from the same bench run: the question is whether
//! mithril keeps, over TLS, the ratio it has over plain TCP.
//!
//! Owns: the certificates (support's `Certs`, an `openssl` CA), the TLS
//! cluster and its mithril, all stopped before `run` returns. Never: run
//! beside the plain tables' cluster (it starts after that one is gone).
//!
//! `TLS_CLUSTER=0` is for development: mithril keeps its TLS listener but
//! reaches the nodes over their plain ports (`tls-cluster` left out).

use std::path::Path;

use crate::support::{free_port, AuthClients, Certs, ClusterSpec, Mithril, RedisCluster};
use crate::{
    fmt_opt, shared_header, workloads, Bench, Measured, Settings, SideKind, CLIENTS, DATA_SIZE,
};

/// Where the TLS runs go: the CA their servers are checked against, and
/// mithril's TLS port.
pub struct Targets {
    pub ca: String,
    pub mithril_port: u16,
}

/// Starts the TLS cluster and mithril, measures GET and SET at `-P 1` and
/// `-P 16` (those `WORKLOADS` names), stops everything. `Err` for a fatal
/// error, as `Bench::run_workload` has it.
pub fn run(settings: &Settings, dir: &Path) -> Result<Vec<Measured>, String> {
    // In the bench's own dir: other sessions on a shared machine clear
    // the harness's `mithril-test-*` dirs, and redis-benchmark reads the
    // CA at every run.
    let certs = Certs::make_in(dir.join("certs"));
    eprintln!("bench: starting a 3-master TLS cluster...");
    let cluster = RedisCluster::start(ClusterSpec {
        tls: Some(certs.node_tls(AuthClients::No)),
        ..ClusterSpec::default()
    });
    let tls_port = free_port();
    let mut conf = String::from("loglevel notice\n");
    if let Some(t) = settings.threads {
        conf += &format!("threads {t}\n");
    }
    // tls-ca-cert-file verifies the nodes too.
    conf += &certs.conf(tls_port, "no");
    let seeds = if settings.tls_cluster {
        conf += "tls-cluster yes\n";
        cluster.tls_seeds()
    } else {
        cluster.seeds()
    };
    let mut proxies = vec![(
        SideKind::Mithril,
        Mithril::start(&settings.mithril_bin, &seeds, &conf),
    )];
    println!(
        "\nTLS cluster: {} masters on TLS ports {}; mithril pid {} tls-port {} ({})",
        cluster.masters().len(),
        cluster
            .masters()
            .iter()
            .map(|n| n.peer_port().to_string())
            .collect::<Vec<_>>()
            .join(","),
        proxies[0].1.pid,
        tls_port,
        if settings.tls_cluster {
            "tls-cluster yes: TLS toward the nodes"
        } else {
            "TLS_CLUSTER=0: plain TCP toward the nodes"
        },
    );
    let mut results = Vec::new();
    {
        let mut bench = Bench {
            settings,
            cluster: &cluster,
            proxies: &mut proxies,
            floor: None,
            dir,
            tls: Some(Targets {
                ca: certs.path("ca.crt"),
                mithril_port: tls_port,
            }),
        };
        bench.populate();
        for w in workloads() {
            if !matches!(w.command, "GET" | "SET")
                || !settings.only.is_empty() && !settings.only.iter().any(|o| o == w.command)
            {
                continue;
            }
            results.push(bench.run_workload(w)?);
        }
    }
    for (_, m) in proxies.iter_mut() {
        m.stop();
    }
    Ok(results)
}

/// The ratio (mithril / direct) of the plain table's run of `r`'s workload.
fn plain_ratio(r: &Measured, plain: &[Measured]) -> Option<f64> {
    plain
        .iter()
        .find(|p| {
            p.workload.command == r.workload.command && p.workload.pipeline == r.workload.pipeline
        })?
        .ratio()
}

/// The TLS table, each workload's plain ratio beside its TLS one.
pub fn print_table(results: &[Measured], plain: &[Measured], settings: &Settings) {
    println!(
        "\n== TLS on both sides ({}): medians of {} runs per side; -c {CLIENTS} -d {DATA_SIZE}; \
         CPU columns pool all clean runs ==",
        if settings.tls_cluster {
            "client -> mithril -> nodes"
        } else {
            "TLS_CLUSTER=0: client -> mithril only, plain toward the nodes"
        },
        settings.rounds
    );
    println!("{} {:>7} {:>11}", shared_header(), "ratio", "plain ratio");
    for r in results {
        for (i, (kind, _)) in r.sides.iter().enumerate() {
            // Blank on the direct line, "-" where a figure is missing.
            let (ratio, plain) = match kind {
                SideKind::Direct => (String::new(), String::new()),
                _ => (fmt_opt(r.ratio(), 2), fmt_opt(plain_ratio(r, plain), 2)),
            };
            println!(
                "{} {ratio:>7} {plain:>11}",
                r.shared_cells(i, settings.rounds)
            );
        }
    }
    println!(
        "(direct = redis-benchmark --tls --cluster on a node's tls-port; mithril = redis-benchmark \
         --tls --threads 3 on mithril's tls-port, mithril {} the nodes; the nodes ask no client \
         certificate (tls-auth-clients no). ratio = mithril / direct over TLS; plain ratio = the \
         same workload's mithril / direct in the plain table above, this run. Columns as there.)",
        if settings.tls_cluster {
            "speaking TLS to"
        } else {
            "speaking plain TCP to (TLS_CLUSTER=0)"
        }
    );
}

/// `ratio-tls COMMAND PIPELINE RATIO plain PLAIN-RATIO`, one per workload.
pub fn print_ratios(results: &[Measured], plain: &[Measured]) {
    for r in results {
        println!(
            "ratio-tls {} {} {} plain {}",
            r.workload.command,
            r.workload.pipeline,
            r.ratio()
                .map_or_else(|| "n/a".into(), |x| format!("{x:.2}")),
            plain_ratio(r, plain).map_or_else(|| "n/a".into(), |x| format!("{x:.2}")),
        );
    }
}
