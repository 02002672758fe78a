//! Load client for benchmarking `msgstorm serve` (see `bench/serve/run.sh`), run in its own
//! process so the server's memory and file descriptors are measured alone.
//!
//! - `idle`: opens N logged-in WebSockets (source addresses spread over 127.0.0.2..) and
//!   holds them, printing `HOLDING n` when all are welcomed.
//! - `msgs`: K senders each pipeline `window` 1:1 messages to their own recipient until
//!   `count` messages are acked; prints throughput and ack latency percentiles.

// A command-line tool: its results go to stdout.
#![allow(clippy::print_stdout)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use msgstorm::wire::{ClientFrame, Dest, ServerFrame, PROTOCOL_VERSION};
use tokio::net::TcpSocket;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

type Ws = WebSocketStream<tokio::net::TcpStream>;

#[derive(Parser)]
struct Args {
    /// Server address, e.g. 127.0.0.1:7701.
    #[arg(long)]
    addr: SocketAddr,
    /// The server's secret.
    #[arg(long)]
    secret: String,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Hold idle logged-in connections.
    Idle {
        /// Connections to open.
        #[arg(long, default_value_t = 10_000)]
        conns: usize,
        /// Seconds to hold them after all are welcomed.
        #[arg(long, default_value_t = 10)]
        hold: u64,
    },
    /// Durable 1:1 messages: throughput and ack latency.
    Msgs {
        /// Sender connections.
        #[arg(long, default_value_t = 32)]
        senders: usize,
        /// Unacknowledged messages per sender.
        #[arg(long, default_value_t = 64)]
        window: usize,
        /// Messages in total.
        #[arg(long, default_value_t = 200_000)]
        count: usize,
        /// Body size in bytes.
        #[arg(long, default_value_t = 100)]
        body: usize,
    },
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn connect(addr: SocketAddr, user: &str, secret: &str, source: u32) -> Result<Ws, BoxError> {
    let socket = TcpSocket::new_v4()?;
    let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 2)) + source);
    socket.bind(SocketAddr::from((ip, 0)))?;
    let stream = socket.connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), stream).await?;
    let login = ClientFrame::Login {
        v: PROTOCOL_VERSION,
        user: user.to_owned(),
        token: msgstorm::serve::token(user, secret),
    };
    ws.send(Message::text(serde_json::to_string(&login)?))
        .await?;
    match next_frame(&mut ws).await? {
        ServerFrame::Welcome { .. } => Ok(ws),
        other => Err(format!("login of {user}: {other:?}").into()),
    }
}

async fn next_frame(ws: &mut Ws) -> Result<ServerFrame, BoxError> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(t.as_str())?),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.into()),
            None => return Err("connection closed".into()),
        }
    }
}

async fn idle(addr: SocketAddr, secret: &str, conns: usize, hold: u64) -> Result<(), BoxError> {
    let started = Instant::now();
    let gate = Arc::new(Semaphore::new(256));
    let mut tasks = Vec::with_capacity(conns);
    for i in 0..conns {
        let gate = Arc::clone(&gate);
        let secret = secret.to_owned();
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await;
            let source = u32::try_from(i % 8).unwrap_or(0);
            connect(addr, &format!("idle{i}"), &secret, source).await
        }));
    }
    let mut held = Vec::with_capacity(conns);
    for t in tasks {
        held.push(t.await??);
    }
    println!(
        "HOLDING {} connections (opened in {:.1}s)",
        held.len(),
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(hold)).await;
    Ok(())
}

async fn sender(
    mut ws: Ws,
    to: String,
    window: usize,
    quota: usize,
    body: String,
) -> Result<Histogram<u64>, BoxError> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut inflight = std::collections::VecDeque::with_capacity(window);
    let (mut sent, mut acked) = (0usize, 0usize);
    while acked < quota {
        while inflight.len() < window && sent < quota {
            let f = ClientFrame::Send {
                r#ref: sent as u64,
                to: Dest::User(to.clone()),
                body: body.clone(),
            };
            ws.feed(Message::text(serde_json::to_string(&f)?)).await?;
            inflight.push_back(Instant::now());
            sent += 1;
        }
        ws.flush().await?;
        match next_frame(&mut ws).await? {
            ServerFrame::Ack { .. } => {
                let t0 = inflight.pop_front().ok_or("ack without a send")?;
                hist.record(u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX))?;
                acked += 1;
            }
            ServerFrame::Error { code, message, .. } => {
                return Err(format!("{code:?}: {message}").into())
            }
            _ => {}
        }
    }
    Ok(hist)
}

async fn msgs(
    addr: SocketAddr,
    secret: &str,
    senders: usize,
    window: usize,
    count: usize,
    body: usize,
) -> Result<(), BoxError> {
    let mut conns = Vec::with_capacity(senders);
    for i in 0..senders {
        conns.push(connect(addr, &format!("s{i}"), secret, 0).await?);
    }
    let quota = count / senders.max(1);
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, ws)| tokio::spawn(sender(ws, format!("r{i}"), window, quota, "b".repeat(body))))
        .collect();
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for t in tasks {
        all.add(t.await??)?;
    }
    let secs = started.elapsed().as_secs_f64();
    let total = quota * senders;
    println!(
        "messages={total} senders={senders} window={window} body={body}B seconds={secs:.2} \
         msgs_per_s={:.0} ack_p50_ms={:.2} ack_p99_ms={:.2} ack_max_ms={:.2}",
        total as f64 / secs,
        all.value_at_quantile(0.5) as f64 / 1000.0,
        all.value_at_quantile(0.99) as f64 / 1000.0,
        all.max() as f64 / 1000.0,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    match args.mode {
        Mode::Idle { conns, hold } => idle(args.addr, &args.secret, conns, hold).await,
        Mode::Msgs {
            senders,
            window,
            count,
            body,
        } => msgs(args.addr, &args.secret, senders, window, count, body).await,
    }
}
