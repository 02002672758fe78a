// Processor of chat.artillery.yml. Environment: ROOMS (rooms to spread users over),
// TICK (seconds between two emits of one user), COUNT (emits per user), HOLD (seconds
// a user stays connected after its emits).
'use strict';

const ROOMS = Number(process.env.ROOMS || 100);
let next = 0;

function setUp(context, events, done) {
  const v = context.vars;
  v.room = `bench-${next % ROOMS}`;
  next += 1;
  v.tick = Number(process.env.TICK || 1);
  v.count = Number(process.env.COUNT || 0);
  v.hold = Number(process.env.HOLD || 0);
  done();
}

module.exports = { setUp };
