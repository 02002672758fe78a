//! The set-up phase, outside the measurement: WebSocket upgrade and login of every user
//! with tungstenite (blocking), the groups created and joined as msgstorm's native driver
//! does (`group_create`, `group_join` when it exists), then each connection's socket
//! handed over raw and non-blocking.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};

use msgstorm::wire::{self, ClientFrame, ErrorCode, ServerFrame, PROTOCOL_VERSION};
use rustix::net::{AddressFamily, SocketType};
use tokio_tungstenite::tungstenite::{self, Message};

use crate::BoxError;

/// Connections per source address (127.0.0.2, 127.0.0.3, …): well under the ~28k
/// ephemeral ports one address has towards one destination.
const PER_SOURCE: usize = 10_000;

type Ws = tungstenite::WebSocket<TcpStream>;

/// The population: `users` users `u0`, `u1`, …; group `g<i>` is users `i*size ..
/// (i+1)*size`.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Users logged in.
    pub users: usize,
    /// Groups.
    pub groups: usize,
    /// Members per group.
    pub size: usize,
}

/// Logs in every user and makes the groups; the sockets come back in user order,
/// non-blocking, with nothing pending on them.
pub fn connect_all(
    addr: SocketAddr,
    secret: &str,
    shape: Shape,
) -> Result<Vec<TcpStream>, BoxError> {
    let mut conns = (0..shape.users)
        .map(|i| login(addr, &format!("u{i}"), secret, i / PER_SOURCE))
        .collect::<Result<Vec<_>, _>>()?;
    for g in 0..shape.groups {
        let creator = &mut conns[g * shape.size];
        let group = format!("g{g}");
        match call(
            creator,
            &ClientFrame::GroupCreate {
                r#ref: 1,
                group: group.clone(),
            },
        )? {
            ServerFrame::Ok { .. } => {}
            ServerFrame::Error {
                code: ErrorCode::GroupExists,
                ..
            } => join_all(&mut conns[g * shape.size..g * shape.size + 1], &group)?,
            other => return Err(format!("group_create {group}: {other:?}").into()),
        }
        join_all(&mut conns[g * shape.size + 1..(g + 1) * shape.size], &group)?;
    }
    conns
        .into_iter()
        .map(|ws| {
            let stream = ws.into_inner();
            stream.set_nonblocking(true)?;
            Ok(stream)
        })
        .collect()
}

/// Upgrades a connection from `127.0.0.(2 + source)` and logs `user` in.
fn login(addr: SocketAddr, user: &str, secret: &str, source: usize) -> Result<Ws, BoxError> {
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None)?;
    let base = u32::from(Ipv4Addr::new(127, 0, 0, 2));
    let ip = Ipv4Addr::from(base + u32::try_from(source)?);
    rustix::net::bind(&fd, &SocketAddrV4::new(ip, 0))?;
    rustix::net::connect(&fd, &addr).map_err(|e| format!("connect to {addr}: {e}"))?;
    rustix::net::sockopt::set_tcp_nodelay(&fd, true)?;
    let (mut ws, _) = tungstenite::client(format!("ws://{addr}/ws"), TcpStream::from(fd))
        .map_err(|e| format!("upgrade of {user}: {e}"))?;
    let frame = ClientFrame::Login {
        v: PROTOCOL_VERSION,
        user: user.to_owned(),
        token: wire::token(user, secret),
    };
    match call(&mut ws, &frame)? {
        ServerFrame::Welcome { .. } => Ok(ws),
        other => Err(format!("login of {user}: {other:?}").into()),
    }
}

/// Every connection of `members` joins `group`: all requests first, then the replies.
fn join_all(members: &mut [Ws], group: &str) -> Result<(), BoxError> {
    let join = ClientFrame::GroupJoin {
        r#ref: 2,
        group: group.to_owned(),
    };
    for ws in members.iter_mut() {
        ws.send(Message::text(serde_json::to_string(&join)?))?;
    }
    for ws in members.iter_mut() {
        match next_frame(ws)? {
            ServerFrame::Ok { .. } => {}
            other => return Err(format!("group_join {group}: {other:?}").into()),
        }
    }
    Ok(())
}

/// Sends `frame` and reads the reply.
fn call(ws: &mut Ws, frame: &ClientFrame) -> Result<ServerFrame, BoxError> {
    ws.send(Message::text(serde_json::to_string(frame)?))?;
    next_frame(ws)
}

fn next_frame(ws: &mut Ws) -> Result<ServerFrame, BoxError> {
    loop {
        match ws.read()? {
            Message::Text(t) => return Ok(serde_json::from_str(t.as_str())?),
            Message::Close(c) => return Err(format!("closed by the server: {c:?}").into()),
            _ => {}
        }
    }
}
