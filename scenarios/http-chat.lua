-- An IM server over HTTP (peers/httpchat/server.py, shaped like Matrix's client-server
-- API) as an adapter for `driver = "script"` with an http:// target: logins and joins are
-- calls that wait (u:http), a send is a request that does not (u:request; its answer comes
-- to receive as a "response"), and messages arrive by long polling `/sync` (poll: each
-- answer a "poll" frame) or, with `vars.mode = "sse"`, by a Server-Sent Events stream
-- (each event an "event" frame).

local encode, decode = codec.json_encode, codec.json_decode

local function auth(u)
  return { ["Authorization"] = "Bearer " .. u.state.token, ["Content-Type"] = "application/json" }
end

function login(u)
  local r = u:http("POST", "/login", encode({ user = u.id }), { ["Content-Type"] = "application/json" })
  if r.status ~= 200 then refuse("HTTP " .. r.status .. ": " .. r.body) end
  u.state.token = decode(r.body).token
  -- Where this user's log stands: a returning user goes on from where it was.
  u.state.since = u.kept.since or 0
  if vars.mode == "sse" then u:sse("/events", auth(u)) end
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

-- The next long poll (none with an event stream).
function poll(u)
  if vars.mode == "sse" then return nil end
  return "GET", "/sync?timeout=1000&since=" .. u.state.since, nil, auth(u)
end

-- Before traffic ("start"): note where the user's log stands, so that what a reused
-- server holds from earlier runs is never taken for this run's. A late or returning
-- user ("missed") and the final verification ("verify"): the whole log, each message
-- handed over once (conv/seq tell what the user has already).
function fetch(u, why)
  local r = u:http("GET", "/sync?timeout=0&since=0", nil, auth(u))
  if r.status ~= 200 then error("sync: HTTP " .. r.status) end
  local page = decode(r.body)
  for _, e in ipairs(page.events) do
    if why == "start" then
      u:cover(e.conv, e.seq)
    else
      u:deliver(e.body, e.conv, e.seq, e.from)
    end
  end
  if why == "start" then
    u.state.since = page.next
    u.kept.since = page.next
  end
end

local function message(e)
  return { push = e.body, conv = e.conv, seq = e.seq, from = e.from }
end

function receive(u, body, kind, meta)
  if kind == "response" then
    if meta.status == 200 then
      local a = decode(body)
      return { ack = meta.ref, conv = a.conv, seq = a.seq }
    end
    return { error = "HTTP " .. meta.status, id = meta.ref }
  elseif kind == "poll" then
    if meta.status ~= 200 then return { protocol = "sync: HTTP " .. meta.status } end
    local page = decode(body)
    u.state.since = page.next
    u.kept.since = page.next
    local out = {}
    for i, e in ipairs(page.events) do out[i] = message(e) end
    return out
  elseif kind == "event" then
    return message(decode(body))
  end
  return { protocol = "unexpected " .. kind }
end
