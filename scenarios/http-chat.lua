-- An IM server over HTTP (peers/httpchat/server.py, shaped like Matrix's client-server
-- API) as an adapter for `driver = "script"` with an http:// target: logins and joins are
-- calls that wait (u:http); a send is a request that does not wait, declared once by
-- template (u:sends: msgstorm fills it, sends it and reads its answer by the shape given
-- with it); messages arrive by a long poll of `/sync` declared once (u:long_poll: msgstorm
-- polls and reads the pages) or, with `vars.mode = "sse"`, by a Server-Sent Events stream
-- (each event an "event" frame). What the declarations do not read (an answer outside
-- 2xx) comes to receive.
--
-- Signals: a read receipt is a request like a send (its answer the acceptance), stored by
-- the server in the sender's log under the conversation `r:SENDER`, so a sender that was
-- away fetches it; typing notices and presence are requests whose answers say nothing,
-- pushed by the server to the users online only (never fetched). Whatever carries a
-- token comes back to msgstorm as `{ signal = token }`.

local encode, decode = codec.json_encode, codec.json_decode

-- How msgstorm reads a 2xx answer itself (made once): a send's or a receipt's answer
-- `{ conv, seq, … }` is its acceptance; a typing notice's or presence's says nothing.
local accepted = codec.json_ack { conv = "conv", seq = "seq" }
local quiet = codec.no_ack()

-- A sync page `{ next, events = [...] }` read into the list `receive` returns, each event
-- as a message's body or a signal's token, where it belongs and who sent it (made once;
-- codec.json_items reads a page in one piece).
local sync_page = codec.json_items("events",
  { push = "body", signal = "signal", conv = "conv", seq = "seq", from = "from" })

-- The headers of every request after the login (made once per connection).
local function auth(u)
  return u.state.headers
end

-- The long poll, declared once a connection: the server holds each poll until a message
-- comes or `vars.timeout` milliseconds pass (1000 unless the scenario says); msgstorm asks
-- from `since`, goes on from each page's `next` and keeps it in `u.kept.since`.
local poll_path = "/sync?timeout=" .. math.tointeger(vars.timeout or 1000) .. "&since="
local function long_poll(u, since)
  u:long_poll { path = poll_path, cursor = "next", since = since, items = sync_page,
    headers = auth(u), kept = "since" }
end

function login(u)
  local r = u:http("POST", "/login", encode({ user = u.id }), { ["Content-Type"] = "application/json" })
  if r.status ~= 200 then refuse("HTTP " .. r.status .. ": " .. r.body) end
  u.state.token = decode(r.body).token
  u.state.headers = { ["Authorization"] = "Bearer " .. u.state.token, ["Content-Type"] = "application/json" }
  -- A send: PUT with a transaction id (the id of u:next_id), the destination and the body
  -- in JSON; the answer is its acceptance. msgstorm fills and sends it.
  u:sends {
    direct = { method = "PUT", path = "/send/{id}", json = { to = "{to}", body = "{body}" },
      headers = auth(u), answer = accepted },
    group = { method = "PUT", path = "/send/{id}", json = { group = "{to}", body = "{body}" },
      headers = auth(u), answer = accepted },
  }
  if vars.mode == "sse" then
    u:sse("/events", auth(u))
  else
    -- Where this user's log stands: a returning user goes on from where it was.
    long_poll(u, u.kept.since or 0)
  end
end

-- The users whose presence this one follows and who follow its own (both ways).
function contacts(u, ids)
  local r = u:http("POST", "/contacts", encode({ ids = ids }), auth(u))
  if r.status ~= 200 then error("contacts: HTTP " .. r.status) end
end

-- A read receipt to the message's sender, 1:1 or in a group alike.
function receipt(u, sender, conv, message, token)
  local txn = u:next_id()
  u:request("PUT", "/receipt/" .. txn, encode({ to = sender, token = token }), auth(u), txn,
    accepted)
  return txn
end

-- Typing and presence: answers that acknowledge nothing (the ref "signal" for receive).
function typing(u, conv, active, token)
  local to = { token = token, active = active }
  to[conv.kind == "group" and "group" or "to"] = conv.name
  u:request("POST", "/typing", encode(to), auth(u), "signal", quiet)
end

function presence(u, online, token)
  u:request("POST", "/presence", encode({ online = online, token = token }), auth(u), "signal",
    quiet)
end

-- Offline for the server: typing notices and presence stop coming.
function close(u)
  u:http("POST", "/logout", nil, auth(u))
end

function join(u, name)
  local r = u:http("POST", "/join", encode({ group = name }), auth(u))
  if r.status ~= 200 then refuse("HTTP " .. r.status) end
end

-- Before traffic ("start"): note where the user's log stands, so that what a reused
-- server holds from earlier runs is never taken for this run's. A late or returning
-- user ("missed") and the final verification ("verify"): the whole log, handed over at
-- once (conv/seq tell what the user has already). Receipts the server stored are fetched
-- like messages; typing notices and presence (no conv) only ever come live.
function fetch(u, why)
  local r = u:http("GET", "/sync?timeout=0&since=0", nil, auth(u))
  if r.status ~= 200 then error("sync: HTTP " .. r.status) end
  local page, events = sync_page(r.body)
  if not page then error("sync: " .. events) end
  if why == "start" then
    u:cover(events)
    u.kept.since = page.next
    if vars.mode ~= "sse" then long_poll(u, page.next) end
  else
    u:deliver(events:having("conv"))
  end
end

local function message(e)
  if e.signal then return { signal = e.signal, conv = e.conv, seq = e.seq } end
  return { push = e.body, conv = e.conv, seq = e.seq, from = e.from }
end

-- What the declarations leave to receive: an event of the stream, and the answers they
-- do not read — a request or a poll answered outside 2xx.
function receive(u, body, kind, meta)
  if kind == "event" then
    return message(decode(body))
  elseif kind == "response" and meta.ref == "signal" then
    return { protocol = "signal: HTTP " .. meta.status }
  elseif kind == "response" then
    return { error = "HTTP " .. meta.status, id = meta.ref }
  elseif kind == "poll" then
    return { protocol = "sync: HTTP " .. meta.status .. ": " .. body:sub(1, 80) }
  end
  return { protocol = "unexpected " .. kind }
end
