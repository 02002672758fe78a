//! Connections opened and bytes on the wire per transport (WebSocket, framed TCP,
//! HTTP/1.1, HTTP/2), counted where drivers connect (`driver::kit::connect`): below TLS,
//! so a byte is one that crossed the socket, handshakes and headers included.
//!
//! One tally per run, shared by every connection of the process (relaxed atomic adds, one
//! per read or write, which already cost a system call each); the run adds its totals to
//! the run's counters once the load is over ([`Wires::add_to`]), so shards' results merge
//! them exactly like every other counter. They are totals: the per-second series does not
//! carry them.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Counter, Metrics};

/// A transport, as the tally splits them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Wire {
    /// WebSocket (`ws://`, `wss://`), the upgrade request included.
    Ws,
    /// A TCP stream with the driver's own framing (MQTT, XMPP, the script driver's
    /// `tcp://`, `tls://`).
    Tcp,
    /// HTTP/1.1 (the script driver's requests, long polls, event streams).
    Http1,
    /// HTTP/2 (the same, multiplexed on one connection a user).
    Http2,
}

impl Wire {
    /// Every transport, in report order.
    pub const ALL: [Wire; 4] = [Wire::Ws, Wire::Tcp, Wire::Http1, Wire::Http2];

    /// Its name in reports: `ws`, `tcp`, `http1`, `http2`.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Ws => "ws",
            Wire::Tcp => "tcp",
            Wire::Http1 => "http1",
            Wire::Http2 => "http2",
        }
    }

    /// Its counters: connections opened, bytes sent, bytes received.
    pub fn counters(self) -> [Counter; 3] {
        match self {
            Wire::Ws => [
                Counter::WsConnections,
                Counter::WsBytesOut,
                Counter::WsBytesIn,
            ],
            Wire::Tcp => [
                Counter::TcpConnections,
                Counter::TcpBytesOut,
                Counter::TcpBytesIn,
            ],
            Wire::Http1 => [
                Counter::Http1Connections,
                Counter::Http1BytesOut,
                Counter::Http1BytesIn,
            ],
            Wire::Http2 => [
                Counter::Http2Connections,
                Counter::Http2BytesOut,
                Counter::Http2BytesIn,
            ],
        }
    }
}

/// A run's tally of connections and bytes per transport.
#[derive(Debug, Default)]
pub struct Wires {
    /// Indexed by `Wire as usize`: connections, bytes sent, bytes received.
    counts: [[AtomicU64; 3]; Wire::ALL.len()],
}

impl Wires {
    /// A connection of `wire` opened.
    pub fn opened(&self, wire: Wire) {
        self.counts[wire as usize][0].fetch_add(1, Ordering::Relaxed);
    }

    /// `n` bytes written on a connection of `wire`.
    pub fn sent(&self, wire: Wire, n: usize) {
        self.counts[wire as usize][1].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `n` bytes read on a connection of `wire`.
    pub fn received(&self, wire: Wire, n: usize) {
        self.counts[wire as usize][2].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Adds the tally to `metrics`' counter totals.
    pub fn add_to(&self, metrics: &mut Metrics) {
        for wire in Wire::ALL {
            for (counter, n) in wire.counters().into_iter().zip(&self.counts[wire as usize]) {
                metrics.add_total(counter, n.load(Ordering::Relaxed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_lands_in_each_transports_own_counters() {
        let wires = Wires::default();
        wires.opened(Wire::Http2);
        wires.sent(Wire::Http2, 300);
        wires.received(Wire::Http2, 7);
        wires.sent(Wire::Ws, 5);
        let mut m = Metrics::new();
        wires.add_to(&mut m);
        wires.add_to(&mut m);
        let got: Vec<u64> = Wire::ALL
            .iter()
            .flat_map(|w| w.counters())
            .map(|c| m.count(c))
            .collect();
        assert_eq!(got, [0, 10, 0, 0, 0, 0, 0, 0, 0, 2, 600, 14]);
        assert!(m.seconds().next().is_none(), "totals only, no series");
    }
}
