-- Matrix (the client-server API, e.g. Synapse) as an adapter for `driver = "script"` with
-- an http:// target. Users are registered on their first login through the homeserver's
-- shared-secret registration (`vars.shared_secret`: `registration_shared_secret` of its
-- config; HMAC-SHA1 over nonce, user, password and "notadmin"). A group is a room with
-- the alias #NAME:SERVER, created by the one user that claims it; messages are sent with
-- PUT …/send/m.room.message/TXN (the answer is the acceptance) and arrive by long polling
-- /sync?since=…; a returning user pages each room back with /messages until it reaches
-- what it has. Matrix numbers no messages, so the script tells what it has already by
-- event id (kept across reconnects in `u.kept`).

local enc, dec = codec.json_encode, codec.json_decode
local API = "/_matrix/client/v3"
local JSON = { ["Content-Type"] = "application/json" }

local function server() return vars.server_name or "localhost" end

local function auth(u)
  return { ["Authorization"] = "Bearer " .. u.kept.token, ["Content-Type"] = "application/json" }
end

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

function login(u)
  u.kept.seen = u.kept.seen or {}
  u.kept.rooms = u.kept.rooms or {}
  if u.kept.token == nil then log_in(u) end
  -- Where the user's timeline stands now: polls go on from here.
  local r = u:http("GET", API .. "/sync?timeout=0&filter=" .. FILTER, nil, auth(u))
  if r.status == 401 then
    log_in(u)
    r = u:http("GET", API .. "/sync?timeout=0&filter=" .. FILTER, nil, auth(u))
  end
  if r.status ~= 200 then refuse("sync: HTTP " .. r.status) end
  u.state.since = dec(r.body).next_batch
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

function group(u, name, body)
  local txn = u:next_id()
  local room = u.kept.rooms[name]
  u:request("PUT", API .. "/rooms/" .. codec.url_encode(room) .. "/send/m.room.message/"
    .. u.ix .. "-" .. txn .. "-" .. tostring(u.kept.token):sub(-6),
    enc({ msgtype = "m.text", body = body }), auth(u), txn)
  return txn
end

function poll(u)
  return "GET", API .. "/sync?timeout=5000&filter=" .. FILTER .. "&since="
    .. codec.url_encode(u.state.since), nil, auth(u)
end

-- A message event as what `receive` returns (nil: not a message, or one the user has).
local function message(u, e)
  if e.type ~= "m.room.message" or e.content == nil or e.content.body == nil then return nil end
  if u.kept.seen[e.event_id] then return nil end
  u.kept.seen[e.event_id] = true
  local from = e.sender:match("^@([^:]+):")
  return { push = e.content.body, from = from }
end

-- Before traffic: nothing to note (the login's sync set where polls start). A late or
-- returning user, and the final verification: each room paged back from now until an
-- event the user has, then handed over oldest first.
function fetch(u, why)
  if why == "start" then return end
  for _, room in pairs(u.kept.rooms) do
    local found, from, done = {}, nil, false
    while not done do
      local path = API .. "/rooms/" .. codec.url_encode(room) .. "/messages?dir=b&limit=100"
      if from then path = path .. "&from=" .. codec.url_encode(from) end
      local r = u:http("GET", path, nil, auth(u))
      if r.status ~= 200 then error("messages: HTTP " .. r.status) end
      local page = dec(r.body)
      for _, e in ipairs(page.chunk) do
        if u.kept.seen[e.event_id] then done = true break end
        found[#found + 1] = e
      end
      if page["end"] == nil or #page.chunk == 0 then done = true end
      from = page["end"]
    end
    for i = #found, 1, -1 do
      local m = message(u, found[i])
      if m then u:deliver(m.push, nil, nil, m.from) end
    end
  end
end

function receive(u, body, kind, meta)
  if kind == "response" then
    if meta.status == 200 then return { ack = meta.ref } end
    return { error = "HTTP " .. meta.status .. " " .. body, id = meta.ref }
  elseif kind == "poll" then
    if meta.status ~= 200 then return { protocol = "sync: HTTP " .. meta.status } end
    local s = dec(body)
    u.state.since = s.next_batch
    local out = {}
    local joined = s.rooms and s.rooms.join
    if joined then
      for _, room in pairs(joined) do
        for _, e in ipairs(room.timeline and room.timeline.events or {}) do
          local m = message(u, e)
          if m then out[#out + 1] = m end
        end
      end
    end
    return out
  end
  return { protocol = "unexpected " .. kind }
end
