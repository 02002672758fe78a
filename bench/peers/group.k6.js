// k6 on bench/engine/recv-limit.sh's group workload, against `msgstorm serve`'s native
// protocol: one VU per user u0, u1, …; group g<i> is users i*SIZE … (i+1)*SIZE-1, each
// member creating it or, when it exists, joining it (as msgstorm's native driver does).
// Every VU waits for a common start; then the first SENDERS members of each group send
// RATE messages per second in total (each sender evenly, phases spread), for DURATION s,
// and every VU counts the pushes (`group_pushes`) and acks (`group_acks`) it gets.
// setup() prints "START <unix ms>" so the caller can read k6's CPU from that moment on.
// Settings from the environment: URL SECRET USERS NGROUPS SIZE SENDERS RATE DURATION BODY
// SETTLE (seconds given to logins and joins) GRACE (seconds after the last send) SUMMARY.
import { WebSocket } from 'k6/websockets';
import { setInterval, clearInterval, setTimeout } from 'k6/timers';
import { hmac } from 'k6/crypto';
import { Counter } from 'k6/metrics';
import exec from 'k6/execution';

const URL = __ENV.URL || 'ws://127.0.0.1:7700/ws';
const SECRET = __ENV.SECRET || 'bench';
const USERS = parseInt(__ENV.USERS || '2000', 10);
const GROUPS = parseInt(__ENV.NGROUPS || '200', 10);
const SIZE = parseInt(__ENV.SIZE || '10', 10);
const SENDERS = parseInt(__ENV.SENDERS || '2', 10);
const RATE = parseFloat(__ENV.RATE || '4000');
const DURATION = parseFloat(__ENV.DURATION || '30');
const BODY = 'x'.repeat(parseInt(__ENV.BODY || '100', 10));
const SETTLE = parseFloat(__ENV.SETTLE || '20');
const GRACE = parseFloat(__ENV.GRACE || '5');

const pushes = new Counter('group_pushes');
const acks = new Counter('group_acks');
const refusals = new Counter('group_refusals');

export const options = {
  setupTimeout: '60s',
  scenarios: {
    group: { executor: 'per-vu-iterations', vus: USERS, iterations: 1, maxDuration: '10m' },
  },
};

export function setup() {
  const start = Date.now() + SETTLE * 1000;
  console.log(`START ${start}`);
  return { start };
}

export default function (data) {
  const i = exec.vu.idInTest - 1;
  const user = `u${i}`;
  const g = Math.floor(i / SIZE);
  const k = i % SIZE;
  const group = `g${g}`;
  const inGroup = g < GROUPS;
  const sender = inGroup && k < SENDERS;
  const ws = new WebSocket(URL);
  const send = (f) => ws.send(JSON.stringify(f));
  const refuse = (what, f) => {
    refusals.add(1);
    console.error(`${user}: ${what}: ${JSON.stringify(f)}`);
    ws.close();
  };
  const end = data.start + (DURATION + GRACE) * 1000;
  setTimeout(() => ws.close(), Math.max(0, end - Date.now()));
  ws.onopen = () => {
    send({ type: 'login', v: 1, user, token: hmac('sha256', SECRET, user, 'hex') });
  };
  const startSending = () => {
    // Sender s of n sends every `every` ms, its first send at s/n of that interval.
    const n = GROUPS * SENDERS;
    const s = k * GROUPS + g;
    const every = (1000 * n) / RATE;
    const count = Math.floor((RATE * DURATION) / n);
    const frame = JSON.stringify({ type: 'send', ref: s, to: { group }, body: BODY });
    setTimeout(() => {
      let sent = 0;
      const timer = setInterval(() => {
        ws.send(frame);
        sent += 1;
        if (sent >= count) clearInterval(timer);
      }, every);
    }, Math.max(0, data.start - Date.now() + (s / n) * every));
  };
  ws.onmessage = (e) => {
    const m = e.data;
    if (m.startsWith('{"type":"msg"')) {
      pushes.add(1);
      return;
    }
    if (m.startsWith('{"type":"ack"')) {
      acks.add(1);
      return;
    }
    const f = JSON.parse(m);
    if (f.type === 'welcome') {
      if (inGroup) send({ type: 'group_create', ref: 1, group });
    } else if (f.type === 'ok' || (f.type === 'error' && f.code === 'group_exists')) {
      if (f.ref === 1 && f.type === 'error') send({ type: 'group_join', ref: 2, group });
      else if (sender) startSending();
    } else {
      refuse('refused', f);
    }
  };
  ws.onerror = (e) => console.error(`${user}: ws error: ${e.error}`);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY || 'k6-summary.json']: JSON.stringify(data) };
}
