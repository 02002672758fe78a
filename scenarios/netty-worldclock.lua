-- Netty's WorldClock example server as a request/response target (W3): protobuf over TCP
-- with varint32 length framing, message types from netty-worldclock.proto. The server
-- answers requests in order and its replies carry no id, so the script numbers its
-- requests and matches each reply to the oldest one waiting.

local PKG = "io.netty.example.worldclock."
local CITIES = { "Europe/London", "America/New_York", "Asia/Tokyo", "Australia/Sydney" }
local CONTINENT = { Europe = "EUROPE", America = "AMERICA", Asia = "ASIA", Australia = "AUSTRALIA" }

-- A TCP connection is all the login there is.
function login(u)
  u.state.waiting = {}
end

-- One request: the local time of one city (a different one each time).
function request(u, name)
  local id = u:next_id()
  local city = CITIES[id % #CITIES + 1]
  local continent = CONTINENT[city:match("^(%a+)/")]
  u:send(codec.pb_encode(PKG .. "Locations",
    { location = { { continent = continent, city = city } } }), "binary")
  table.insert(u.state.waiting, id)
  return id
end

-- A reply: one LocalTime per location asked for, with a plausible date.
function receive(u, frame)
  local times, err = codec.pb_decode(PKG .. "LocalTimes", frame)
  if times == nil then return { protocol = err } end
  local id = table.remove(u.state.waiting, 1)
  if id == nil then return { protocol = "a reply to no request" } end
  local t = times.localTime and times.localTime[1]
  if t == nil or t.year < 2000 or t.month < 1 or t.month > 12 then
    return { error = "an implausible LocalTimes answer", id = id }
  end
  return { reply = id }
end
