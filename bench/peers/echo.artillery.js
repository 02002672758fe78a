// Processor of echo-rate.artillery.yml and echo-max.artillery.yml. Environment:
//   RATE      msgs/s in total, split over CONNS connections (echo-rate only)
//   DURATION  seconds of sending; SIZE frame bytes
// Artillery's ws engine counts sends (websocket.messages_sent) but not echoes or round
// trips, so this processor listens on the socket itself: echo.received counts frames, and
// echo.rtt is receipt minus the send time carried in the frame (performance.now(), ms with
// fractions), from the actual send, not a due time.
'use strict';

const { performance } = require('perf_hooks');

const CONNS = Number(process.env.CONNS || 100);
const RATE = Number(process.env.RATE || 20000);
const SIZE = Number(process.env.SIZE || 100);
const DURATION = Number(process.env.DURATION || 10);
const PAD = 'x'.repeat(SIZE);

function setUp(context, events, done) {
  const v = context.vars;
  v.end = Date.now() + DURATION * 1000;
  // Think time between two sends of one connection (used by echo-rate only).
  v.tick = `${(1000 * CONNS) / RATE}ms`;
  context.ws.on('message', (data) => {
    const text = data.toString();
    const sent = Number(text.substring(0, text.indexOf(':')));
    events.emit('counter', 'echo.received', 1);
    events.emit('histogram', 'echo.rtt', performance.now() - sent);
  });
  done();
}

function stamp(context, events, done) {
  const head = `${performance.now().toFixed(3)}:`;
  context.vars.payload = head + PAD.substring(head.length);
  done();
}

function sending(context, next) {
  return next(Date.now() < context.vars.end);
}

module.exports = { setUp, stamp, sending };
