-- An IM server over HTTP (peers/httpchat/server.py, shaped like Matrix's client-server
-- API) as an adapter for `driver = "script"` with an http:// target: logins and joins are
-- calls that wait (u:http), a send is a request that does not (u:request; its answer comes
-- to receive as a "response"), and messages arrive by long polling `/sync` (poll: each
-- answer a "poll" frame) or, with `vars.mode = "sse"`, by a Server-Sent Events stream
-- (each event an "event" frame).
--
-- Signals: a read receipt is a request like a send (its answer the acceptance), stored by
-- the server in the sender's log under the conversation `r:SENDER`, so a sender that was
-- away fetches it; typing notices and presence are requests whose answers say nothing,
-- pushed by the server to the users online only (never fetched). Whatever carries a
-- token comes back to msgstorm as `{ signal = token }`.

local encode, decode = codec.json_encode, codec.json_decode

-- The headers of every request after the login (made once per connection).
local function auth(u)
  return u.state.headers
end

function login(u)
  local r = u:http("POST", "/login", encode({ user = u.id }), { ["Content-Type"] = "application/json" })
  if r.status ~= 200 then refuse("HTTP " .. r.status .. ": " .. r.body) end
  u.state.token = decode(r.body).token
  u.state.headers = { ["Authorization"] = "Bearer " .. u.state.token, ["Content-Type"] = "application/json" }
  -- Where this user's log stands: a returning user goes on from where it was.
  u.state.since = u.kept.since or 0
  if vars.mode == "sse" then u:sse("/events", auth(u)) end
end

-- The users whose presence this one follows and who follow its own (both ways).
function contacts(u, ids)
  local r = u:http("POST", "/contacts", encode({ ids = ids }), auth(u))
  if r.status ~= 200 then error("contacts: HTTP " .. r.status) end
end

-- A read receipt to the message's sender, 1:1 or in a group alike.
function receipt(u, sender, conv, message, token)
  local txn = u:next_id()
  u:request("PUT", "/receipt/" .. txn, encode({ to = sender, token = token }), auth(u), txn)
  return txn
end

-- Typing and presence: answers carry the ref "signal", which acknowledges nothing.
function typing(u, conv, active, token)
  local to = { token = token, active = active }
  to[conv.kind == "group" and "group" or "to"] = conv.name
  u:request("POST", "/typing", encode(to), auth(u), "signal")
end

function presence(u, online, token)
  u:request("POST", "/presence", encode({ online = online, token = token }), auth(u), "signal")
end

-- Offline for the server: typing notices and presence stop coming.
function close(u)
  u:http("POST", "/logout", nil, auth(u))
end

function join(u, name)
  local r = u:http("POST", "/join", encode({ group = name }), auth(u))
  if r.status ~= 200 then refuse("HTTP " .. r.status) end
end

-- A send: PUT with a transaction id; the answer is its acceptance.
function direct(u, to, body)
  local txn = u:next_id()
  u:request("PUT", "/send/" .. txn, encode({ to = to, body = body }), auth(u), txn)
  return txn
end

function group(u, name, body)
  local txn = u:next_id()
  u:request("PUT", "/send/" .. txn, encode({ group = name, body = body }), auth(u), txn)
  return txn
end

-- The next long poll (none with an event stream): the server holds it until a message
-- comes or `vars.timeout` milliseconds pass (1000 unless the scenario says).
local poll_timeout = "/sync?timeout=" .. math.tointeger(vars.timeout or 1000) .. "&since="
function poll(u)
  if vars.mode == "sse" then return nil end
  return "GET", poll_timeout .. u.state.since, nil, auth(u)
end

-- A sync page `{ next, events = [...] }` read into the list `receive` returns, each event
-- as a message's body or a signal's token, where it belongs and who sent it (made once;
-- codec.json_items reads a page in one piece).
local sync_page = codec.json_items("events",
  { push = "body", signal = "signal", conv = "conv", seq = "seq", from = "from" })

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
    u.state.since = page.next
    u.kept.since = page.next
  else
    u:deliver(events:having("conv"))
  end
end

local function message(e)
  if e.signal then return { signal = e.signal, conv = e.conv, seq = e.seq } end
  return { push = e.body, conv = e.conv, seq = e.seq, from = e.from }
end

function receive(u, body, kind, meta)
  if kind == "response" and meta.ref == "signal" then
    if meta.status == 200 then return nil end
    return { protocol = "signal: HTTP " .. meta.status }
  elseif kind == "response" then
    if meta.status == 200 then
      local a = decode(body)
      return { ack = meta.ref, conv = a.conv, seq = a.seq }
    end
    return { error = "HTTP " .. meta.status, id = meta.ref }
  elseif kind == "poll" then
    if meta.status ~= 200 then return { protocol = "sync: HTTP " .. meta.status } end
    local page, events = sync_page(body)
    if not page then return { protocol = "sync: " .. events } end
    u.state.since = page.next
    u.kept.since = page.next
    return events
  elseif kind == "event" then
    return message(decode(body))
  end
  return { protocol = "unexpected " .. kind }
end
