"""A small IM server over HTTP, for the tests of the script driver's HTTP transports.

Python's own HTTP/1.1 server (http.server, keep-alive, a thread per connection), shaped
like Matrix's client-server API: a send is a `PUT` with the client's transaction id, a
client receives by long-polling `GET /sync?since=N&timeout=MS` or by a Server-Sent Events
stream (`GET /events`). Every message has a conversation and a sequence number in it.

Signals, each carrying the client's opaque token (`{"signal": TOKEN, "from": USER}` in the
recipient's log): a read receipt (`PUT /receipt/TXN`, `{"to": SENDER, "token": T}`) is
stored in the sender's log like a message, with a conversation `r:SENDER` and a sequence
number, so a sender that was offline gets it from `/sync`; a typing notice (`POST /typing`,
`{"to": PEER or "group": NAME, "token": T}`) and a presence change (`POST /presence`,
`{"online": BOOL, "token": T}`) go only to the users online then (logged in and not logged
out: `POST /logout`): the peer, the group's other members, or the user's contacts
(`POST /contacts`, `{"ids": [...]}`, kept both ways). `GET /stats` counts them: those
taken and the copies fanned out.

    python3 server.py PORT [--drop-receipts N] [--slow-presence MS] [--idle-close MS]
        # listens on 127.0.0.1:PORT (0: any free port), prints it; with --drop-receipts,
        # every Nth receipt is accepted and then dropped (neither pushed nor stored); with
        # --slow-presence, a presence change is fanned out at once and answered MS late, so
        # the requests a client makes on that connection after it wait behind it; with
        # --idle-close, a keep-alive connection idle for MS between requests is closed, as
        # servers and proxies close idle connections
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

LOCK = threading.Condition()
LOGS = {}      # user -> [event]: what the user receives, in order
SEQS = {}      # conv -> last seq
GROUPS = {}    # group -> set of members
ONLINE = set()  # users logged in and not logged out
CONTACTS = {}  # user -> set of contacts
# receipts taken and dropped; typing notices and presence changes taken (`_notices`,
# `_changes`) and the copies fanned out of each (`typing`, `presence`)
STATS = {
    "receipts": 0,
    "receipts_dropped": 0,
    "typing_notices": 0,
    "typing": 0,
    "presence_changes": 0,
    "presence": 0,
}
DROP_EVERY = 0  # --drop-receipts N: every Nth receipt dropped (0: none)
SLOW_PRESENCE = 0.0  # --slow-presence MS: seconds a presence change's answer waits


def deliver(user, event):
    LOGS.setdefault(user, []).append(event)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer's head and body go out in one write, as HTTP servers write a small answer:
    # the handler's writes are buffered and sent when the request is handled (an event
    # stream sends each batch of events by its own flush). Unbuffered, the head and the body
    # were two writes, which cost the client about one more system call an answer: a
    # second read, or a wake-up for a body it had already read with the head.
    wbufsize = 1 << 16
    # A write of an event stream is not held back for the client's delayed ACK of the last.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def reply(self, status, value):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def user(self):
        auth = self.headers.get("Authorization", "")
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else None

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def do_POST(self):
        url = urlparse(self.path)
        if url.path == "/login":
            user = self.body().get("user")
            if not user:
                return self.reply(400, {"error": "no user"})
            with LOCK:
                LOGS.setdefault(user, [])
                ONLINE.add(user)
            return self.reply(200, {"token": user})
        user = self.user()
        if user is None:
            return self.reply(401, {"error": "no token"})
        if url.path == "/join":
            group = self.body()["group"]
            with LOCK:
                GROUPS.setdefault(group, set()).add(user)
            return self.reply(200, {})
        if url.path == "/logout":
            with LOCK:
                ONLINE.discard(user)
            return self.reply(200, {})
        if url.path == "/contacts":
            ids = self.body()["ids"]
            with LOCK:
                for c in ids:
                    CONTACTS.setdefault(user, set()).add(c)
                    CONTACTS.setdefault(c, set()).add(user)
            return self.reply(200, {})
        if url.path == "/typing":
            msg = self.body()
            with LOCK:
                STATS["typing_notices"] += 1
                if msg.get("group"):
                    to = GROUPS.get(msg["group"], set()) - {user}
                else:
                    to = {msg["to"]}
                self.fan_out(user, msg["token"], to, "typing")
            return self.reply(200, {})
        if url.path == "/presence":
            msg = self.body()
            with LOCK:
                STATS["presence_changes"] += 1
                self.fan_out(user, msg["token"], CONTACTS.get(user, set()), "presence")
            time.sleep(SLOW_PRESENCE)
            return self.reply(200, {})
        self.reply(404, {"error": "no such path"})

    def fan_out(self, user, token, to, stat):
        """A signal to those of `to` online now (LOCK held), stored for nobody."""
        for r in sorted(to & ONLINE - {user}):
            deliver(r, {"signal": token, "from": user})
            STATS[stat] += 1
        LOCK.notify_all()

    def receipt(self, user):
        """A read receipt: accepted, then stored for its sender (or dropped)."""
        msg = self.body()
        with LOCK:
            STATS["receipts"] += 1
            if DROP_EVERY and STATS["receipts"] % DROP_EVERY == 0:
                STATS["receipts_dropped"] += 1
                return self.reply(200, {})
            conv = "r:" + msg["to"]
            seq = SEQS.get(conv, 0) + 1
            SEQS[conv] = seq
            deliver(msg["to"], {"conv": conv, "seq": seq, "signal": msg["token"], "from": user})
            LOCK.notify_all()
        self.reply(200, {})

    def do_PUT(self):
        url = urlparse(self.path)
        user = self.user()
        if user is None:
            return self.reply(401, {"error": "no token"})
        if url.path.startswith("/receipt/"):
            return self.receipt(user)
        if not url.path.startswith("/send/"):
            return self.reply(404, {"error": "no such path"})
        msg = self.body()
        with LOCK:
            if msg.get("group"):
                conv = "g:" + msg["group"]
                to = sorted(GROUPS.get(msg["group"], set()) - {user})
            else:
                conv = "d:" + ":".join(sorted([user, msg["to"]]))
                to = [msg["to"]]
            seq = SEQS.get(conv, 0) + 1
            SEQS[conv] = seq
            event = {"conv": conv, "seq": seq, "from": user, "body": msg["body"]}
            for r in to:
                deliver(r, event)
            LOCK.notify_all()
        self.reply(200, {"event_id": "$%s/%d" % (conv, seq), "conv": conv, "seq": seq})

    def do_GET(self):
        url = urlparse(self.path)
        user = self.user()
        if user is None:
            return self.reply(401, {"error": "no token"})
        if url.path == "/stats":
            with LOCK:
                return self.reply(200, STATS)
        if url.path == "/sync":
            q = parse_qs(url.query)
            since = int(q.get("since", ["0"])[0])
            timeout = int(q.get("timeout", ["0"])[0]) / 1000.0
            with LOCK:
                LOCK.wait_for(lambda: len(LOGS.get(user, [])) > since, timeout)
                log = LOGS.get(user, [])
                events = log[since:]
                return self.reply(200, {"next": len(log), "events": events})
        if url.path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            sent = len(LOGS.get(user, []))
            self.wfile.write(b": stream open\n\n")
            self.wfile.flush()
            while True:
                with LOCK:
                    LOCK.wait_for(lambda: len(LOGS.get(user, [])) > sent, 1.0)
                    fresh = LOGS.get(user, [])[sent:]
                    sent += len(fresh)
                try:
                    for e in fresh:
                        self.wfile.write(b"event: message\ndata: %s\n\n" % json.dumps(e).encode())
                    self.wfile.flush()
                except OSError:
                    return
        self.reply(404, {"error": "no such path"})


def main():
    global DROP_EVERY, SLOW_PRESENCE
    args = sys.argv[1:]
    port = int(args[0]) if args else 0
    if "--idle-close" in args:
        # http.server's own idle bound: a connection with no request for this long closes.
        Handler.timeout = int(args[args.index("--idle-close") + 1]) / 1000.0
    if "--drop-receipts" in args:
        DROP_EVERY = int(args[args.index("--drop-receipts") + 1])
    if "--slow-presence" in args:
        SLOW_PRESENCE = int(args[args.index("--slow-presence") + 1]) / 1000.0
    # A listen backlog for a login wave: the default of 5 drops SYNs when many users
    # connect at once, and each drop costs the client a 1 s retransmit.
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
