// k6 side of bench/run-peers: WebSocket clients of msgstorm's /echo endpoint.
// One VU holds one socket (k6's model). Settings come from the environment:
//   URL       ws://host:port/echo
//   MODE      hold: connect and stay idle for HOLD s
//             rate: send RATE msgs/s in total, split over the connections, for DURATION s
//             max:  keep WINDOW messages in flight per connection for DURATION s
//   CONNS     connections (VUs); SIZE frame bytes; SUMMARY where to write the JSON summary
// Round trip = Date.now() at receipt minus the send time carried in the frame (ms resolution:
// k6 has no finer clock in scripts); it counts from the actual send, not a due time.
import { WebSocket } from 'k6/websockets';
import { setInterval, clearInterval, setTimeout } from 'k6/timers';
import { Trend } from 'k6/metrics';

const URL = __ENV.URL || 'ws://127.0.0.1:7700/echo';
const MODE = __ENV.MODE || 'rate';
const CONNS = parseInt(__ENV.CONNS || '100', 10);
const RATE = parseFloat(__ENV.RATE || '20000');
const SIZE = parseInt(__ENV.SIZE || '100', 10);
const DURATION = parseFloat(__ENV.DURATION || '10');
const HOLD = parseFloat(__ENV.HOLD || '10');
const WINDOW = parseInt(__ENV.WINDOW || '16', 10);

const rtt = new Trend('echo_rtt', true);

export const options = {
  scenarios: {
    echo: { executor: 'per-vu-iterations', vus: CONNS, iterations: 1, maxDuration: '10m' },
  },
  summaryTrendStats: ['med', 'p(99)', 'max', 'count'],
};

const PAD = 'x'.repeat(SIZE);

// The send time in ms, then padding up to SIZE bytes.
function frame() {
  const head = `${Date.now()}:`;
  return head + PAD.substring(head.length);
}

export default function () {
  const ws = new WebSocket(URL);
  let sending = false;
  ws.onopen = () => {
    if (MODE === 'hold') {
      setTimeout(() => ws.close(), HOLD * 1000);
      return;
    }
    sending = true;
    setTimeout(() => {
      sending = false;
      // Give the last echoes a second to come back.
      setTimeout(() => ws.close(), 1000);
    }, DURATION * 1000);
    if (MODE === 'max') {
      for (let i = 0; i < WINDOW; i++) ws.send(frame());
      return;
    }
    const perConn = RATE / CONNS;
    const tickMs = Math.max(1, Math.floor(1000 / perConn));
    const perTick = perConn * tickMs / 1000;
    let owed = 0;
    const timer = setInterval(() => {
      if (!sending) {
        clearInterval(timer);
        return;
      }
      owed += perTick;
      while (owed >= 1) {
        ws.send(frame());
        owed -= 1;
      }
    }, tickMs);
  };
  ws.onmessage = (e) => {
    const sent = parseInt(e.data.substring(0, e.data.indexOf(':')), 10);
    rtt.add(Date.now() - sent);
    if (MODE === 'max' && sending) ws.send(frame());
  };
  ws.onerror = (e) => console.error(`ws error: ${e.error}`);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY || 'k6-summary.json']: JSON.stringify(data) };
}
