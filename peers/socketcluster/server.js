// A plain SocketCluster server (npm `socketcluster-server`, pinned by package-lock.json)
// for msgstorm's ws-json tests and scenarios: no middleware, so any client may subscribe
// and publish to any channel. WebSocket path: /socketcluster/.
//   node server.js [HOST:PORT [CHANNEL_LIMIT [PING_MS]]]
// HOST:PORT defaults to 127.0.0.1:0 (any free port); CHANNEL_LIMIT is SocketCluster's
// `socketChannelLimit`, the channels one socket may subscribe to (default 1000); PING_MS its
// `pingInterval` (default 8000), a socket that answers no ping for 5 intervals is closed.
// Prints "listening on HOST:PORT" once it accepts connections.
'use strict';

const http = require('http');
const socketClusterServer = require('socketcluster-server');

const [host, port] = (process.argv[2] || '127.0.0.1:0').split(':');
const httpServer = http.createServer();
const limit = Number(process.argv[3] || 1000);
const ping = Number(process.argv[4] || 8000);
socketClusterServer.attach(httpServer, {
  socketChannelLimit: limit,
  pingInterval: ping,
  pingTimeout: 5 * ping,
});
httpServer.listen(Number(port), host, () => {
  const a = httpServer.address();
  process.stdout.write(`listening on ${a.address}:${a.port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
