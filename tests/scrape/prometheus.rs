//! `[monitor] prometheus`: a run scrapes the reference server's `/metrics` once a second
//! and keeps the selected series in `result.json` and on `report.html`; an endpoint that
//! is down, and one that answers with something that is not the text format, are noted in
//! the result and never stop the run.

use std::io::{Read, Write};

use crate::common::run::{run_text, scenario, Work};
use crate::common::{config, start};

/// A loopback HTTP endpoint that answers every request (at most `limit`) with 200 and a
/// body that is not the Prometheus text format.
fn garbage_endpoint(limit: usize) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming().take(limit) {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let mut buf = [0u8; 2048];
            let _ = conn.read(&mut buf);
            let body = "<html><body>this is not a metrics page</body></html>";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_scrapes_the_reference_servers_metrics() {
    let server = start(config()).await;
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/metrics", l.local_addr().expect("addr"))
    };
    let garbage = garbage_endpoint(50);
    let metrics = format!("http://{}/metrics", server.addr());
    let work = Work::new();
    let text = scenario(
        "name = \"scrape\"\ndrain = \"2s\"",
        &server,
        &format!(
            r#"
[population]
users = 10
login_rate = 100

[[traffic]]
kind = "direct"
senders = 5
receivers = 5
rate = 50
duration = "3s"

[monitor]
prometheus = ["{metrics}", "{down}", "{garbage}"]
series = ["serve_online_users", "serve_messages_*"]
"#
        ),
    );
    let (ran, a) = run_text(&work, &text).await;
    ran.expect_code(0);
    let online = a
        .server_metrics
        .iter()
        .find(|s| s.name == "serve_online_users")
        .unwrap_or_else(|| panic!("no serve_online_users in {:?}", a.server_metrics));
    assert_eq!(online.endpoint, metrics);
    assert!(!online.counter);
    assert!(online.points.len() >= 3, "{:?}", online.points);
    assert!(
        online.points.iter().any(|p| p.1 >= 10.0),
        "the server saw all 10 users online: {:?}",
        online.points
    );
    let accepted = a
        .server_metrics
        .iter()
        .find(|s| s.name == "serve_messages_accepted_total")
        .expect("the accepted-messages counter");
    assert!(accepted.counter);
    assert!(accepted.points.last().is_some_and(|p| p.1 > 0.0));
    assert!(
        a.server_metrics
            .iter()
            .all(|s| s.name.starts_with("serve_messages_") || s.name == "serve_online_users"),
        "the filter keeps only what it names"
    );
    let noted = |url: &str, why: &str| {
        assert!(
            a.notes.iter().any(|n| n.contains(url) && n.contains(why)),
            "no note on {url} ({why}): {:?}",
            a.notes
        );
    };
    noted(&down, "cannot connect");
    noted(&garbage, "no samples");
    // The scraped series are part of the result file's schema.
    let (schemas, schema) = crate::cli::report::result_schema();
    let value = serde_json::to_value(&a).expect("the result as JSON");
    if let Err(e) = schemas.validate(&value, schema) {
        panic!("result.json with server_metrics does not match its schema: {e:#}");
    }
    // The HTML report charts the scraped series.
    let page = std::fs::read_to_string(work.path("out").join("report.html")).expect("report.html");
    assert!(
        page.contains("<h3>serve_online_users</h3>"),
        "no chart of the scraped gauge"
    );
    assert!(page.contains("serve_messages_accepted_total (per second)"));
    server.shutdown().await.expect("server stops");
}
