-- A Socket.IO 4 app that uses socket.io-msgpack-parser (W4's optimisation), spoken by an
-- adapter script: the chat app of peers/socketio started with --parser=msgpack. Engine.IO's
-- own packets stay text ("0{…}" open, "2" ping, "3" pong); every Socket.IO packet is one
-- binary frame holding a MessagePack map {type, nsp, data, id}. The app's events: `join`
-- (room), `dm` {to, body} and `group` {room, body}, each acknowledged; a message arrives as
-- the event `message` {from, to|room, body}.

local pack, unpack = codec.msgpack_encode, codec.msgpack_decode
local CONNECT, EVENT, ACK, CONNECT_ERROR = 0, 2, 3, 4

-- An event with an ack id; the ack (a Socket.IO ACK packet) carries the same id.
local function event(u, data)
  local id = u:next_id()
  return pack({ type = EVENT, nsp = "/", data = data, id = id }), id
end

function login(u)
  u:await("open")                 -- Engine.IO's handshake comes first
  u:send(pack({ type = CONNECT, nsp = "/", data = { user = u.id, token = u.password } }), "binary")
  local r = u:await("connect")
  if r.error then refuse(r.error) end
end

function direct(u, to, body)
  local frame, id = event(u, { "dm", { to = to, body = body } })
  u:send(frame, "binary")
  return id
end

function group(u, room, body)
  local frame, id = event(u, { "group", { room = room, body = body } })
  u:send(frame, "binary")
  return id
end

function join(u, room)
  local frame, id = event(u, { "join", room })
  local r = u:call_binary(frame, id)
  if r.error then refuse(r.error) end
end

function receive(u, frame, kind)
  if kind == "text" then
    local t = frame:sub(1, 1)
    if t == "0" then return { reply = "open" } end
    if t == "2" then u:send("3") return nil end   -- Engine.IO ping: answer pong
    if t == "3" or t == "6" then return nil end
    return { protocol = "unexpected Engine.IO packet " .. frame:sub(1, 40) }
  end
  local p, err = unpack(frame)
  if p == nil then return { protocol = err } end
  if p.type == CONNECT then return { reply = "connect" } end
  if p.type == CONNECT_ERROR then
    local why = type(p.data) == "table" and p.data.message or tostring(p.data)
    return { error = why, id = "connect" }
  end
  if p.type == ACK then return { ack = p.id } end
  if p.type == EVENT and p.data[1] == "message" then
    local m = p.data[2]
    return { push = m.body, from = m.from }
  end
  if p.type == EVENT then return nil end          -- `welcome` and other app events
  return { protocol = "unexpected Socket.IO packet type " .. tostring(p.type) }
end
