-- Matrix (the client-server API, e.g. Synapse) as an adapter for `driver = "script"` with
-- an http:// target. Users are registered on their first login through the homeserver's
-- shared-secret registration (`vars.shared_secret`: `registration_shared_secret` of its
-- config; HMAC-SHA1 over nonce, user, password and "notadmin").
--
-- - A group is a room with the alias #NAME:SERVER, created by the one user that claims it.
-- - A 1:1 conversation is a room per pair, as Matrix clients make them: the first of the
--   two to need it creates it with `is_direct` and invites the other, who joins when the
--   invitation comes in its /sync (or, offline then, when it next catches up).
-- - Messages are sent with PUT …/send/m.room.message/TXN (the answer is the acceptance)
--   and arrive by long polling /sync?since=…; the since token is kept across reconnects
--   (`u.kept`), so a user coming back catches up with one /sync from where it left.
-- - A late user (no token yet) pages each room back with /messages until it reaches what
--   it has; so does the final verification.
--
-- Matrix numbers no messages, so the script tells what a user has by event id (kept in
-- `u.kept`).

local enc, dec = codec.json_encode, codec.json_decode
local API = "/_matrix/client/v3"
local JSON = { ["Content-Type"] = "application/json" }

local function server() return vars.server_name or "localhost" end

local function auth(u)
  return { ["Authorization"] = "Bearer " .. u.kept.token, ["Content-Type"] = "application/json" }
end

local function room_path(room) return API .. "/rooms/" .. codec.url_encode(room) end

-- Timelines long enough that a poll's answer is never cut short by the server.
local FILTER = codec.url_encode(enc({ room = { timeline = { limit = 1000 } } }))

local function register(u)
  local r = u:http("GET", "/_synapse/admin/v1/register")
  if r.status ~= 200 then refuse("register nonce: HTTP " .. r.status) end
  local nonce = dec(r.body).nonce
  local mac = codec.hex_encode(codec.hmac_sha1(vars.shared_secret,
    nonce .. "\0" .. u.username .. "\0" .. u.password .. "\0notadmin"))
  r = u:http("POST", "/_synapse/admin/v1/register", enc({ nonce = nonce,
    username = u.username, password = u.password, admin = false, mac = mac }), JSON)
  if r.status ~= 200 then refuse("register: HTTP " .. r.status .. " " .. r.body) end
end

local function log_in(u)
  local body = enc({ type = "m.login.password", password = u.password,
    identifier = { type = "m.id.user", user = u.username } })
  local r = u:http("POST", API .. "/login", body, JSON)
  if r.status == 403 then
    register(u)
    r = u:http("POST", API .. "/login", body, JSON)
  end
  if r.status ~= 200 then refuse("login: HTTP " .. r.status .. " " .. r.body) end
  u.kept.token = dec(r.body).access_token
end

-- A /sync answered at once, from `since` (nil: the user's first, whole sync).
local function sync_now(u, since)
  local path = API .. "/sync?timeout=0&filter=" .. FILTER
  if since then path = path .. "&since=" .. codec.url_encode(since) end
  return u:http("GET", path, nil, auth(u))
end

-- The rooms a sync answer invites the user to, noted for joining (until a join is
-- answered: an invitation comes in one sync answer only, and a join sent just before the
-- connection broke may never have reached the server).
local function note_invites(u, s)
  for room in pairs(s.rooms and s.rooms.invite or {}) do
    if not u.kept.dms[room] then u.kept.invited[room] = true end
  end
end

-- `room` joined: one of the user's 1:1 rooms.
local function joined(u, room)
  u.kept.dms[room] = true
  u.kept.invited[room] = nil
end

function login(u)
  u.kept.seen = u.kept.seen or {}
  u.kept.rooms = u.kept.rooms or {}
  u.kept.dms = u.kept.dms or {}    -- room id → true: the 1:1 rooms the user is in
  u.kept.peers = u.kept.peers or {} -- peer's user id → the pair's room id
  u.kept.invited = u.kept.invited or {} -- room id → true: invitations not yet joined
  u.state.joining = {}  -- room id → true: joins sent on this connection, not answered
  if u.kept.token == nil then log_in(u) end
  -- A returning user goes on from its kept since token (its fetch catches up from there);
  -- a new one starts where its timeline stands now.
  u.state.returning = u.kept.since ~= nil
  if u.state.returning then return end
  local r = sync_now(u)
  if r.status == 401 then
    log_in(u)
    r = sync_now(u)
  end
  if r.status ~= 200 then refuse("sync: HTTP " .. r.status) end
  local s = dec(r.body)
  note_invites(u, s)
  u.kept.since = s.next_batch
end

-- The group's room: the user that claims the name creates it, everyone joins it (again
-- on a later connection: a join of a member is answered as a join).
function join(u, name)
  local room = u.kept.rooms[name]
  if room == nil then
    if u:claim("room:" .. name, u.id) == u.id then
      local r = u:http("POST", API .. "/createRoom", enc({ room_alias_name = name,
        preset = "public_chat" }), auth(u))
      if r.status ~= 200 then refuse("createRoom: HTTP " .. r.status .. " " .. r.body) end
      u:publish("roomid:" .. name, dec(r.body).room_id)
    end
    room = u:lookup("roomid:" .. name)
  end
  local r = u:http("POST", API .. "/join/" .. codec.url_encode(room), "{}", auth(u))
  if r.status ~= 200 then refuse("join: HTTP " .. r.status .. " " .. r.body) end
  u.kept.rooms[name] = room
end

-- The 1:1 room of `u` and `to`: the first of the two to need it creates it (`is_direct`,
-- the other invited) and publishes its id under the pair's key; the other joins it from
-- its invitation.
function open(u, to)
  if u.kept.peers[to] then return end
  local a, b = u.id, to
  if b < a then a, b = b, a end
  local key = "dm:" .. a .. ":" .. b
  if u:claim("dmc:" .. a .. ":" .. b, u.id) == u.id then
    local r = u:http("POST", API .. "/createRoom", enc({ is_direct = true,
      preset = "trusted_private_chat", invite = { "@" .. to .. ":" .. server() } }), auth(u))
    if r.status ~= 200 then refuse("createRoom: HTTP " .. r.status .. " " .. r.body) end
    local room = dec(r.body).room_id
    joined(u, room)
    u:publish(key, room)
  end
  local room = u:lookup(key)
  if not u.kept.dms[room] then
    local r = u:http("POST", API .. "/join/" .. codec.url_encode(room), "{}", auth(u))
    if r.status ~= 200 then refuse("join: HTTP " .. r.status .. " " .. r.body) end
    joined(u, room)
  end
  u.kept.peers[to] = room
end

-- A send to `room`. The transaction id counts per user across reconnects: Synapse answers
-- a transaction id it has seen from the same login with the first event, storing nothing.
local function send(u, room, body)
  if room == nil then error("no room yet: its join or open has not finished") end
  local ref = u:next_id()
  u.kept.txn = (u.kept.txn or 0) + 1
  u:request("PUT", room_path(room) .. "/send/m.room.message/" .. u.kept.txn,
    enc({ msgtype = "m.text", body = body }), auth(u), ref)
  return ref
end

function group(u, name, body) return send(u, u.kept.rooms[name], body) end

function direct(u, to, body) return send(u, u.kept.peers[to], body) end

function poll(u)
  return "GET", API .. "/sync?timeout=5000&filter=" .. FILTER .. "&since="
    .. codec.url_encode(u.kept.since), nil, auth(u)
end

-- A message event as what `receive` returns (nil: not a message, or one the user has).
local function message(u, e)
  if e.type ~= "m.room.message" or e.content == nil or e.content.body == nil then return nil end
  if u.kept.seen[e.event_id] then return nil end
  u.kept.seen[e.event_id] = true
  local from = e.sender:match("^@([^:]+):")
  return { push = e.content.body, from = from }
end

-- The events of `room` the user does not have, oldest first: paged back with /messages
-- from `from` (nil: now) until an event it has, or the room's beginning.
local function missing(u, room, from)
  local found = {}
  while true do
    local path = room_path(room) .. "/messages?dir=b&limit=100"
    if from then path = path .. "&from=" .. codec.url_encode(from) end
    local r = u:http("GET", path, nil, auth(u))
    if r.status ~= 200 then error("messages: HTTP " .. r.status) end
    local page = dec(r.body)
    for _, e in ipairs(page.chunk) do
      if u.kept.seen[e.event_id] then return found end
      table.insert(found, 1, e)
    end
    if page["end"] == nil or #page.chunk == 0 then return found end
    from = page["end"]
  end
end

-- Joins the rooms the user is invited to (waiting for each answer).
local function join_invited(u)
  for room in pairs(u.kept.invited) do
    local r = u:http("POST", API .. "/join/" .. codec.url_encode(room), "{}", auth(u))
    if r.status ~= 200 then error("join: HTTP " .. r.status .. " " .. r.body) end
    joined(u, room)
  end
end

-- Hands over every room's missed messages from one sync answer, oldest first: a room
-- whose timeline the server cut short (`limited`) is paged back before it.
local function deliver_sync(u, s)
  for room, r in pairs(s.rooms and s.rooms.join or {}) do
    local timeline = r.timeline or {}
    local events = timeline.events or {}
    if timeline.limited then
      local older = missing(u, room, timeline.prev_batch)
      for i = #older, 1, -1 do table.insert(events, 1, older[i]) end
    end
    for _, e in ipairs(events) do
      local m = message(u, e)
      if m then u:deliver(m.push, nil, nil, m.from) end
    end
  end
end

-- A returning user: /sync from its kept token until nothing more comes (a room it joins
-- on the way comes whole in the next answer).
local function catch_up(u)
  for _ = 1, 10 do
    local r = sync_now(u, u.kept.since)
    if r.status ~= 200 then error("sync: HTTP " .. r.status) end
    local s = dec(r.body)
    deliver_sync(u, s)
    note_invites(u, s)
    u.kept.since = s.next_batch
    if next(u.kept.invited) == nil then return end
    join_invited(u)
  end
end

-- Before traffic: nothing to note (the login's sync set where polls start). A returning
-- user catches up from its since token; a late user and the final verification page each
-- room back from now until an event the user has, then hand it over oldest first.
function fetch(u, why)
  if why == "start" then return end
  if why == "missed" and u.state.returning then return catch_up(u) end
  join_invited(u)
  local rooms = {}
  for _, room in pairs(u.kept.rooms) do rooms[#rooms + 1] = room end
  for room in pairs(u.kept.dms) do rooms[#rooms + 1] = room end
  for _, room in ipairs(rooms) do
    for _, e in ipairs(missing(u, room)) do
      local m = message(u, e)
      if m then u:deliver(m.push, nil, nil, m.from) end
    end
  end
end

function receive(u, body, kind, meta)
  if kind == "response" then
    local room = type(meta.ref) == "string" and meta.ref:match("^join:(.*)$")
    if room then
      if meta.status ~= 200 then return { protocol = "join: HTTP " .. meta.status .. " " .. body } end
      joined(u, room)
      return nil
    end
    if meta.status == 200 then return { ack = meta.ref } end
    return { error = "HTTP " .. meta.status .. " " .. body, id = meta.ref }
  elseif kind == "poll" then
    if meta.status ~= 200 then return { protocol = "sync: HTTP " .. meta.status } end
    local s = dec(body)
    u.kept.since = s.next_batch
    -- An invitation to a 1:1 room: joined at once (its messages come in the next answers).
    note_invites(u, s)
    for room in pairs(u.kept.invited) do
      if not u.state.joining[room] then
        u.state.joining[room] = true
        u:request("POST", API .. "/join/" .. codec.url_encode(room), "{}", auth(u), "join:" .. room)
      end
    end
    local out = {}
    for id, room in pairs(s.rooms and s.rooms.join or {}) do
      if u.kept.invited[id] then joined(u, id) end
      for _, e in ipairs(room.timeline and room.timeline.events or {}) do
        local m = message(u, e)
        if m then out[#out + 1] = m end
      end
    end
    return out
  end
  return { protocol = "unexpected " .. kind }
end
