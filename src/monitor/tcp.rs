//! Bytes on the wire of one process: the payload bytes its open TCP sockets have received
//! and sent (`tcpi_bytes_received`, `tcpi_bytes_acked` of `struct tcp_info`), summed, as
//! `ss -ti` shows them per socket.
//!
//! `/proc/PID/io` cannot give them (it counts `read`/`write` calls, not the `send`/`recv`
//! sockets use) and the namespace's `/proc/net/dev` counts every process on the host. The
//! kernel's `sock_diag` netlink interface lists every TCP socket with its `tcp_info`; the
//! process's own sockets are those whose inode is behind one of its `/proc/PID/fd` links.
//! What is counted is TCP payload: WebSocket framing and TLS included, TCP/IP headers not.
//! Sockets closed between two samples take their bytes with them, so the sum is a figure
//! for steady connections (the traffic phase), not for a connection storm.
//!
//! Written by hand over `rustix`'s netlink sockets: one dump request and two fields at
//! fixed offsets; the `netlink-packet-sock-diag` family of crates would add six crates for
//! that.

use std::collections::HashSet;
use std::io;

/// `IPPROTO_TCP`.
const TCP: u8 = 6;
/// `AF_INET` and `AF_INET6`.
const FAMILIES: [u8; 2] = [2, 10];
/// `SOCK_DIAG_BY_FAMILY`: the request type of an `inet_diag_req_v2`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// Request flags: a request (`NLM_F_REQUEST`) for a dump (`NLM_F_ROOT | NLM_F_MATCH`).
const DUMP: u16 = 0x1 | 0x100 | 0x200;
/// `NLMSG_ERROR` and `NLMSG_DONE`.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `INET_DIAG_INFO`: the attribute that carries `struct tcp_info`.
const INET_DIAG_INFO: u16 = 2;
/// Size of `struct nlmsghdr`, and of `struct inet_diag_msg` that opens every reply.
const NLMSG_HDR: usize = 16;
const DIAG_MSG: usize = 72;
/// Offset of the inode in `struct inet_diag_msg`.
const INODE_AT: usize = 68;
/// Offsets of `tcpi_bytes_acked` and `tcpi_bytes_received` in `struct tcp_info` (Linux
/// 4.1 and later; an older kernel's shorter `tcp_info` counts nothing).
const BYTES_ACKED_AT: usize = 120;
const BYTES_RECEIVED_AT: usize = 128;

/// Payload bytes received and sent over the TCP sockets of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bytes {
    /// Bytes received.
    pub received: u64,
    /// Bytes sent and acknowledged by the peer.
    pub sent: u64,
}

/// The socket inodes behind `pid`'s open files.
fn socket_inodes(pid: u32) -> io::Result<HashSet<u32>> {
    let mut out = HashSet::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(link) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        let link = link.to_string_lossy();
        if let Some(n) = link
            .strip_prefix("socket:[")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|n| n.parse().ok())
        {
            out.insert(n);
        }
    }
    Ok(out)
}

/// The bytes of `pid`'s TCP sockets (IPv4 and IPv6), summed.
pub fn bytes_of(pid: u32) -> io::Result<Bytes> {
    let inodes = socket_inodes(pid)?;
    let mut total = Bytes::default();
    if inodes.is_empty() {
        return Ok(total);
    }
    let sock = Netlink::open()?;
    for family in FAMILIES {
        sock.dump(family, |msg| {
            let Some(inode) = u32_at(msg, INODE_AT) else {
                return;
            };
            if !inodes.contains(&inode) {
                return;
            }
            if let Some(info) = attribute(&msg[DIAG_MSG.min(msg.len())..], INET_DIAG_INFO) {
                total.sent += u64_at(info, BYTES_ACKED_AT).unwrap_or(0);
                total.received += u64_at(info, BYTES_RECEIVED_AT).unwrap_or(0);
            }
        })?;
    }
    Ok(total)
}

/// A `NETLINK_SOCK_DIAG` socket.
struct Netlink(std::os::fd::OwnedFd);

impl Netlink {
    fn open() -> io::Result<Netlink> {
        use rustix::net::{netlink, socket_with, AddressFamily, SocketFlags, SocketType};
        let fd = socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            Some(netlink::SOCK_DIAG),
        )?;
        Ok(Netlink(fd))
    }

    /// Dumps every TCP socket of `family` with its `tcp_info`, calling `each` with the
    /// payload of every reply (an `inet_diag_msg` and its attributes).
    fn dump(&self, family: u8, mut each: impl FnMut(&[u8])) -> io::Result<()> {
        let mut req = Vec::with_capacity(NLMSG_HDR + 56);
        req.extend_from_slice(&((NLMSG_HDR + 56) as u32).to_ne_bytes());
        req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        req.extend_from_slice(&DUMP.to_ne_bytes());
        req.extend_from_slice(&[0; 8]); // sequence number, port id
                                        // inet_diag_req_v2: family, protocol, extensions (tcp_info), pad, states (all),
                                        // then a zero socket id (48 bytes: no filter).
        req.extend_from_slice(&[family, TCP, 1 << (INET_DIAG_INFO - 1), 0]);
        req.extend_from_slice(&u32::MAX.to_ne_bytes());
        req.extend_from_slice(&[0; 48]);
        let kernel = rustix::net::netlink::SocketAddrNetlink::new(0, 0);
        rustix::net::sendto(&self.0, &req, rustix::net::SendFlags::empty(), &kernel)?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let (n, _) = rustix::net::recv(&self.0, &mut buf[..], rustix::net::RecvFlags::empty())?;
            let mut rest = &buf[..n];
            while rest.len() >= NLMSG_HDR {
                let len = u32_at(rest, 0).unwrap_or(0) as usize;
                let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                if len < NLMSG_HDR || len > rest.len() {
                    return Ok(());
                }
                match kind {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let errno = u32_at(rest, NLMSG_HDR).map_or(0, |e| -(e as i32));
                        return Err(io::Error::from_raw_os_error(errno));
                    }
                    _ => each(&rest[NLMSG_HDR..len]),
                }
                rest = &rest[align(len).min(rest.len())..];
            }
            if n == 0 {
                return Ok(());
            }
        }
    }
}

/// The payload of the first attribute of type `kind` in `attrs` (a run of `rtattr`s).
fn attribute(mut attrs: &[u8], kind: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let t = u16::from_ne_bytes([attrs[2], attrs[3]]);
        if len < 4 || len > attrs.len() {
            return None;
        }
        if t == kind {
            return Some(&attrs[4..len]);
        }
        attrs = &attrs[align(len).min(attrs.len())..];
    }
    None
}

/// Netlink's 4-byte alignment.
fn align(n: usize) -> usize {
    (n + 3) & !3
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn counts_the_bytes_of_this_process_sockets() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let before = bytes_of(std::process::id()).unwrap();
        client.write_all(&[7u8; 10_000]).unwrap();
        let mut got = vec![0u8; 10_000];
        server.read_exact(&mut got).unwrap();
        server.write_all(&[1u8; 3_000]).unwrap();
        let mut back = vec![0u8; 3_000];
        client.read_exact(&mut back).unwrap();
        // Both ends are this process's: each byte is sent once and received once. The
        // last acknowledgement may come a delayed-ACK later.
        let mut after = bytes_of(std::process::id()).unwrap();
        for _ in 0..50 {
            if after.sent - before.sent >= 13_000 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            after = bytes_of(std::process::id()).unwrap();
        }
        assert!(
            after.received - before.received >= 13_000,
            "{before:?} {after:?}"
        );
        assert!(after.sent - before.sent >= 13_000, "{before:?} {after:?}");
    }
}
