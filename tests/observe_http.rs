//! The metrics endpoints with a plain TCP client (issue 8): Prometheus text
//! on `metrics-port`, twemproxy's stats JSON on `stats-port` (and its `-s`
//! flag), and the configuration that leaves both off.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::*;

/// Send `request` and read until the server closes: (status line, headers,
/// body).
fn http(port: u16, request: &str) -> (String, HashMap<String, String>, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .expect("the server closes after the response");
    let text = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn get_metrics(port: u16) -> String {
    let (status, headers, body) = http(
        port,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert_eq!(headers["content-length"], body.len().to_string());
    body
}

/// The value of the sample `name` (with its labels, as written).
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

#[test]
fn prometheus_endpoint_serves_counters_and_histograms() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let port = free_port();
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("threads 2\nmetrics-port {port}\n"),
    );
    let mut c = m.conn();
    for i in 0..250 {
        assert_eq!(c.cmd(&["SET", &format!("m:{i}"), "v"]).as_str(), "OK");
    }
    let gets: Vec<Vec<Vec<u8>>> = (0..500)
        .map(|i| vec![b"GET".to_vec(), format!("m:{}", i % 250).into_bytes()])
        .collect();
    assert!(c.pipeline(&gets).iter().all(|r| r.as_str() == "v"));

    // Snapshots are published every 100 ms: wait for this traffic.
    let body = wait_until(
        "the metrics to show 500 GETs",
        Duration::from_secs(5),
        || {
            let b = get_metrics(port);
            (sample(&b, "mithril_commands_total{cmd=\"get\"}") == Some(500.0)).then_some(b)
        },
    );
    assert_eq!(
        sample(&body, "mithril_commands_total{cmd=\"set\"}"),
        Some(250.0)
    );
    // The reply cache is off here: its families are there, at zero.
    assert_eq!(
        sample(&body, "mithril_reply_cache_lookups_total"),
        Some(0.0)
    );
    assert_eq!(
        sample(&body, "mithril_reply_cache_bytes{generation=\"current\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&body, "mithril_command_duration_seconds_count{cmd=\"get\"}"),
        Some(500.0)
    );
    assert_eq!(
        sample(
            &body,
            "mithril_command_duration_seconds_bucket{cmd=\"get\",le=\"+Inf\"}"
        ),
        Some(500.0)
    );
    // Buckets are cumulative and end at the count.
    let buckets: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with("mithril_command_duration_seconds_bucket{cmd=\"get\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(buckets.len(), 23);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    assert!(body.contains("mithril_command_duration_seconds_bucket{cmd=\"get\",le=\"0.000015\"}"));
    assert!(sample(&body, "mithril_commands_processed_total").unwrap() >= 750.0);
    assert_eq!(sample(&body, "mithril_connected_clients"), Some(1.0));
    // Pool-scoped families carry the pool: the top-level cluster's is
    // `default`.
    assert_eq!(
        sample(&body, "mithril_cluster_masters{pool=\"default\"}"),
        Some(3.0)
    );
    assert_eq!(
        sample(&body, "mithril_pool_clients{pool=\"default\"}"),
        Some(1.0)
    );
    assert!(body
        .lines()
        .filter(|l| l.starts_with("mithril_backend_requests_total{"))
        .all(
            |l| l.starts_with("mithril_backend_requests_total{pool=\"default\",addr=\"127.0.0.1:")
        ));
    assert_eq!(
        sample(&body, "mithril_redirects_total{kind=\"moved\"}"),
        Some(0.0)
    );
    let requests: f64 = body
        .lines()
        .filter(|l| l.starts_with("mithril_backend_requests_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(requests, 750.0);
    // Every family is announced before its samples.
    for l in body.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        let family = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        assert!(
            body.contains(&format!("# TYPE {family} "))
                || body.contains(&format!("# TYPE {name} ")),
            "no TYPE for {name}"
        );
    }

    // Anything but GET /metrics is a 404; HEAD has the head only.
    let (status, _, _) = http(port, "GET / HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _, _) = http(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, headers, body) = http(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.is_empty());
    assert!(headers["content-length"].parse::<usize>().unwrap() > 1000);
    // Query strings are ignored.
    let (status, _, _) = http(port, "GET /metrics?x=1 HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    // A head that never ends is refused, not buffered without end.
    let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n", "a".repeat(20_000));
    let (status, _, _) = http(port, &big);
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
    // The proxy still serves.
    assert_eq!(c.cmd(&["PING"]).as_str(), "PONG");
}

fn stats_json(port: u16) -> serde_json::Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw)
        .expect("the server writes the document and closes");
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
}

#[test]
fn twemproxy_stats_port_serves_nutcrackers_document() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let port = free_port();
    let m = Mithril::start(bin(), &cluster.seeds(), &format!("stats-port {port}\n"));
    let mut c = m.conn();
    for i in 0..100 {
        assert_eq!(c.cmd(&["SET", &format!("t:{i}"), "v"]).as_str(), "OK");
    }
    // MGET over several slots: split into parts ("fragments").
    let keys: Vec<String> = (0..10).map(|i| format!("t:{i}")).collect();
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    assert_eq!(c.cmd(&mget).as_array().len(), 10);

    let doc = wait_until(
        "the stats port to show 100 requests",
        Duration::from_secs(5),
        || {
            let d = stats_json(port);
            let servers = d["default"].as_object()?;
            let total: u64 = servers
                .values()
                .filter_map(|v| v.get("requests")?.as_u64())
                .sum();
            (total >= 100 + 2).then_some(d)
        },
    );
    assert_eq!(doc["service"], "nutcracker");
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    assert!(doc["uptime"].as_u64().is_some());
    assert!(doc["timestamp"].as_u64().unwrap() > 1_600_000_000);
    assert!(doc["source"].as_str().is_some());
    assert!(doc["total_connections"].as_u64().unwrap() >= 1);
    assert_eq!(doc["curr_connections"], 1);
    // One object per pool, by name: the top-level cluster is `default`.
    let pool = doc["default"].as_object().unwrap();
    for k in [
        "client_eof",
        "client_err",
        "client_connections",
        "server_ejects",
        "forward_error",
        "fragments",
    ] {
        assert!(pool[k].as_u64().is_some(), "{k}: {pool:?}");
    }
    assert_eq!(pool["client_connections"], 1);
    assert!(pool["fragments"].as_u64().unwrap() >= 2);
    let servers: Vec<(&String, &serde_json::Value)> =
        pool.iter().filter(|(_, v)| v.is_object()).collect();
    assert_eq!(servers.len(), 3);
    let mut responses = 0;
    for (name, s) in &servers {
        assert!(name.starts_with("127.0.0.1:"), "{name}");
        for k in [
            "server_eof",
            "server_err",
            "server_timedout",
            "server_connections",
            "server_ejected_at",
            "requests",
            "request_bytes",
            "responses",
            "response_bytes",
            "in_queue",
            "in_queue_bytes",
            "out_queue",
            "out_queue_bytes",
        ] {
            assert!(s[k].as_u64().is_some(), "{name}.{k}: {s}");
        }
        assert_eq!(s["server_connections"], 1);
        assert_eq!(s["requests"], s["responses"]);
        assert!(s["request_bytes"].as_u64().unwrap() > 0);
        responses += s["responses"].as_u64().unwrap();
    }
    assert!(responses >= 102, "{responses}");

    // A client that left counts as client_eof.
    drop(c);
    wait_until(
        "client_eof to count the client that left",
        Duration::from_secs(5),
        || (stats_json(port)["default"]["client_eof"] == 1).then_some(()),
    );
}

#[test]
fn twemproxy_s_flag_opens_the_stats_port() {
    use std::os::unix::fs::PermissionsExt;
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let port = free_port();
    // The harness runs `BIN -c FILE`: a wrapper adds nutcracker's flags.
    let dir = make_temp_dir();
    let wrapper = dir.join("mithril-s.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' \"$@\" -s {port} -a 127.0.0.1\n",
            bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = Mithril::start(&wrapper, &cluster.seeds(), "");
    let doc = stats_json(port);
    assert_eq!(doc["service"], "nutcracker");
    // The harness's readiness check has closed its connection; the
    // statistics show that within a publication (100 ms).
    let curr = |want: u64| {
        wait_until_explained(
            &format!("curr_connections {want}"),
            Duration::from_secs(5),
            || {
                let doc = stats_json(port);
                if doc["curr_connections"] == want {
                    Ok(())
                } else {
                    Err(format!("curr_connections {}", doc["curr_connections"]))
                }
            },
        )
    };
    curr(0);
    let mut c = m.conn();
    c.cmd(&["PING"]);
    curr(1);
    let got = c.cmd(&["CONFIG", "GET", "stats-port"]);
    assert_eq!(got.as_array()[1].as_str(), port.to_string());
    // The metrics endpoint stays off unless configured.
    let got = c.cmd(&["CONFIG", "GET", "metrics-port"]);
    assert_eq!(got.as_array()[1].as_str(), "0");
    drop(m);
    remove_temp_dir(&dir);
}
