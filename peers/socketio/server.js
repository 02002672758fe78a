// A small Socket.IO chat app (npm `socket.io` 4.8, pinned by package-lock.json) for msgstorm's
// socketio tests, scenarios and benchmarks: auth middleware, per-user rooms, chat rooms,
// acks, connection state recovery, and two or more nodes behind Redis.
//   node server.js [HOST:PORT] [--adapter=none|redis|streams] [--redis=URL] [--recovery=MS]
//                  [--secret=TOKEN] [--drop-every=N] [--twice] [--welcome=0|1]
//                  [--garbage=USER] [--deflate=0|1] [--parser=text|msgpack] [--nobody=0|1]
//                  [--drop-receipts=N] [--exit-with-stdin]
// HOST:PORT defaults to 127.0.0.1:0 (any free port). --adapter: `redis` is
// @socket.io/redis-adapter (pub/sub; no connection state recovery), `streams` is
// @socket.io/redis-streams-adapter (recovery works across nodes); `none` is one node alone.
// --recovery: connectionStateRecovery's maxDisconnectionDuration in ms (0: off; default
// 120000). --secret: the `token` of the connect auth must equal it (default: any token).
// --drop-every: every Nth chat message this node routes is dropped (a known loss; counted).
// --twice: every direct message is emitted twice (a known duplicate; the second emits are
// counted as `twice`). --welcome=0: no `welcome` broadcast on a new connection, so a user
// that is sent nothing has no offset to recover its session from (default 1).
// --garbage: a user of this id gets three malformed packets after connecting.
// --deflate: perMessageDeflate (default 0). --parser=msgpack: socket.io-msgpack-parser (Socket.IO
// packets as binary MessagePack frames, W4's optimisation; default: the text parser).
// --nobody=1: before routing a direct message, ask the whole cluster (fetchSockets, through
// the adapter) whether its recipient is connected anywhere; if not, the message is routed to
// nobody — counted as `nobody` and not emitted (it is still acknowledged to its sender: the
// app accepted it), so what the app logs as routed to nobody is exactly what no one got.
// --drop-receipts=N: every Nth read receipt is acknowledged but never relayed (a known loss;
// counted as `receipts_dropped`).
// --exit-with-stdin: exit when standard input
// closes (tests: the app never outlives the test process that started it).
// Events: `join` (room, ack), `dm` ({to, body}, ack), `group` ({room, body}, ack); each
// message arrives as `message` {from, to|room, body}. Signals, as a chat app has them (one
// node: "online" is a connection on this node): `contacts` ([ids], ack) stores mutual
// contacts per user; `read` ({to, group, signal}, ack) is relayed as `read` {from, group,
// signal} to `to` — kept for a sender that is away by connection state recovery, like a
// message; `typing` ({to, group, state, signal}) is relayed as `typing` {from, state, signal}
// to `to` when online, or with `group` to the group's other members online; `presence` ({status, signal}, ack when asked) as `presence` {from, status,
// signal} to each contact online, and a user whose last presence was `online` that loses its last
// connection is published `offline` with an empty signal. GET /stats answers
// {"routed":N,"dropped":N,"twice":N,"offline":N,"nobody":N,"connections":N,"contacts":N,
// "receipts":N,"receipts_dropped":N,"typing":N,"presence":N,"presence_vanished":N};
// `offline` counts direct messages to a user with no connection on this node (one node alone:
// a user that was offline, whose message only connection state recovery can bring);
// `contacts` the contact pairs stored, `receipts` the receipts received, `typing` and
// `presence` the pushes emitted (`presence_vanished` those the app published itself). Prints "listening on HOST:PORT" once it accepts
// connections.
'use strict';

const http = require('http');
const { Server } = require('socket.io');

const args = process.argv.slice(2);
const addr = args.find((a) => !a.startsWith('--')) || '127.0.0.1:0';
const opt = (name, dflt) => {
  const a = args.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
};
const [host, port] = addr.split(':');
const adapter = opt('adapter', 'none');
const recovery = Number(opt('recovery', '120000'));
const secret = opt('secret', '');
const dropEvery = Number(opt('drop-every', '0'));
const garbage = opt('garbage', '');
const twice = args.includes('--twice');
const welcome = opt('welcome', '1') === '1';
const nobody = opt('nobody', '0') === '1';
const dropReceipts = Number(opt('drop-receipts', '0'));

const stats = {
  routed: 0, dropped: 0, twice: 0, offline: 0, nobody: 0, connections: 0,
  contacts: 0, receipts: 0, receipts_dropped: 0, typing: 0, presence: 0, presence_vanished: 0,
};
// Each user's contacts (mutual), and the last presence status each user published.
const contacts = new Map();
const lastStatus = new Map();
const contactsOf = (u) => {
  if (!contacts.has(u)) contacts.set(u, new Set());
  return contacts.get(u);
};
const httpServer = http.createServer((req, res) => {
  if (req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(stats));
  } else {
    res.writeHead(404);
    res.end();
  }
});

async function main() {
  const opts = {
    perMessageDeflate: opt('deflate', '0') === '1',
    pingInterval: 25000,
    pingTimeout: 20000,
  };
  if (opt('parser', 'text') === 'msgpack') {
    opts.parser = require('socket.io-msgpack-parser');
  }
  if (recovery > 0) {
    opts.connectionStateRecovery = { maxDisconnectionDuration: recovery, skipMiddlewares: true };
  }
  if (adapter !== 'none') {
    const { createClient } = require('redis');
    const url = opt('redis', 'redis://127.0.0.1:6379');
    if (adapter === 'redis') {
      const { createAdapter } = require('@socket.io/redis-adapter');
      const pub = createClient({ url });
      const sub = pub.duplicate();
      await Promise.all([pub.connect(), sub.connect()]);
      opts.adapter = createAdapter(pub, sub);
    } else if (adapter === 'streams') {
      const { createAdapter } = require('@socket.io/redis-streams-adapter');
      const client = createClient({ url });
      await client.connect();
      opts.adapter = createAdapter(client);
    } else {
      throw new Error(`unknown --adapter=${adapter}`);
    }
  }
  const io = new Server(httpServer, opts);

  io.use((socket, next) => {
    const auth = socket.handshake.auth || {};
    if (typeof auth.user !== 'string' || auth.user === '') {
      return next(new Error('no user in auth'));
    }
    if (secret !== '' && auth.token !== secret) {
      return next(new Error('unauthorized'));
    }
    socket.data.user = auth.user;
    next();
  });

  // Routes one chat message unless it is the one in `dropEvery` to drop.
  const route = (to, msg) => {
    stats.routed += 1;
    if (dropEvery > 0 && stats.routed % dropEvery === 0) {
      stats.dropped += 1;
      return;
    }
    to.emit('message', msg);
  };

  const online = (u) => io.sockets.adapter.rooms.has(`user:${u}`);
  // Publishes `user`'s presence to its contacts online; returns the pushes made.
  const publish = (user, status, signal) => {
    let pushed = 0;
    for (const c of contacts.get(user) || []) {
      if (!online(c)) continue;
      io.to(`user:${c}`).emit('presence', { from: user, status, signal });
      pushed += 1;
    }
    return pushed;
  };

  io.on('connection', (socket) => {
    stats.connections += 1;
    const user = socket.data.user;
    socket.on('disconnect', () => {
      stats.connections -= 1;
      if (!online(user) && lastStatus.get(user) === 'online') {
        lastStatus.set(user, 'offline');
        stats.presence_vanished += publish(user, 'offline', '');
      }
    });
    if (!socket.recovered) {
      socket.join(`user:${user}`);
      // A broadcast carries an offset: with it even a user that received nothing yet can
      // have its connection recovered.
      if (recovery > 0 && welcome) io.to(socket.id).emit('welcome');
    }
    socket.on('contacts', (ids, ack) => {
      for (const c of Array.isArray(ids) ? ids : []) {
        if (typeof c !== 'string' || c === user || contactsOf(user).has(c)) continue;
        contactsOf(user).add(c);
        contactsOf(c).add(user);
        stats.contacts += 1;
      }
      if (typeof ack === 'function') ack({ ok: true });
    });
    socket.on('read', (r, ack) => {
      stats.receipts += 1;
      if (dropReceipts > 0 && stats.receipts % dropReceipts === 0) {
        stats.receipts_dropped += 1;
      } else {
        io.to(`user:${r && r.to}`).emit('read', { from: user, group: r && r.group, signal: r && r.signal });
      }
      if (typeof ack === 'function') ack({ ok: true });
    });
    socket.on('typing', (t) => {
      const notice = { from: user, state: t && t.state, signal: t && t.signal };
      if (t && t.group) {
        // To each member's connection online, not to the room: connection state recovery
        // would replay a room's typing to a member that was away (it is not kept).
        for (const id of io.sockets.adapter.rooms.get(`room:${t.group}`) || []) {
          if (id === socket.id) continue;
          io.to(id).emit('typing', { ...notice, group: t.group });
          stats.typing += 1;
        }
        return;
      }
      if (!online(t && t.to)) return;
      io.to(`user:${t.to}`).emit('typing', notice);
      stats.typing += 1;
    });
    socket.on('presence', (p, ack) => {
      lastStatus.set(user, p && p.status);
      stats.presence += publish(user, p && p.status, p && p.signal);
      if (typeof ack === 'function') ack({ ok: true });
    });
    socket.on('join', (room, ack) => {
      socket.join(`room:${room}`);
      if (typeof ack === 'function') ack({ ok: true });
    });
    socket.on('dm', (m, ack) => {
      if (nobody) {
        const room = `user:${m && m.to}`;
        io.in(room).fetchSockets().then((found) => {
          if (found.length === 0) {
            stats.nobody += 1;
          } else {
            route(io.to(room), { from: user, to: m && m.to, body: m && m.body });
          }
          if (typeof ack === 'function') ack({ ok: true });
        }, (e) => {
          if (typeof ack === 'function') ack({ error: String(e) });
        });
        return;
      }
      if (!io.sockets.adapter.rooms.has(`user:${m && m.to}`)) stats.offline += 1;
      const msg = { from: user, to: m && m.to, body: m && m.body };
      route(io.to(`user:${m && m.to}`), msg);
      if (twice) {
        stats.twice += 1;
        io.to(`user:${m && m.to}`).emit('message', msg);
      }
      if (typeof ack === 'function') ack({ ok: true });
    });
    socket.on('group', (m, ack) => {
      route(socket.to(`room:${m && m.room}`), { from: user, room: m && m.room, body: m && m.body });
      if (typeof ack === 'function') ack({ ok: true });
    });
    if (user === garbage) {
      const ws = socket.conn.transport && socket.conn.transport.socket;
      if (ws) for (const bad of ['9nonsense', '42["message"', '45-[]']) ws.send(bad);
    }
  });

  httpServer.listen(Number(port), host, () => {
    const a = httpServer.address();
    process.stdout.write(`listening on ${a.address}:${a.port}\n`);
  });
}

main().catch((e) => {
  process.stderr.write(`socketio peer: ${e.stack || e}\n`);
  process.exit(1);
});
process.on('SIGTERM', () => process.exit(0));
if (args.includes('--exit-with-stdin')) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}
