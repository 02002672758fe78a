-- A skeleton adapter for a JSON-over-TCP IM server (docs/drivers/script.md). Each frame is
-- one JSON object; msgstorm cuts the stream by the `framing` of the scenario. Replace the
-- message shapes below with your server's. Read receipts, typing notices and presence are
-- entry points too (`contacts`, `receipt`, `typing`, `presence`), offered when defined:
-- docs/drivers/script.md, "Signals".

local encode, decode = codec.json_encode, codec.json_decode

-- Log in and wait for the server's answer (matched by `receive` returning `reply = "login"`).
function login(u)
  u:send(encode({ op = "login", user = u.username, password = u.password }))
  local r = u:await("login")
  if r.error then refuse(r.error) end
end

-- A direct message; the id returned is the one the server's acknowledgement carries.
function direct(u, to, body)
  local id = u:next_id()
  u:send(encode({ op = "send", id = id, to = to, body = body }))
  return id
end

-- A group message.
function group(u, name, body)
  local id = u:next_id()
  u:send(encode({ op = "send", id = id, group = name, body = body }))
  return id
end

-- Join a group before traffic.
function join(u, name)
  local id = u:next_id()
  local r = u:call(encode({ op = "join", id = id, group = name }), id)
  if r.error then refuse(r.error) end
end

-- What a frame from the server is.
function receive(u, frame)
  local f = decode(frame)
  if f == nil then return { protocol = "not JSON" } end
  if f.op == "welcome" then return { reply = "login" } end
  if f.op == "ack" then return { ack = f.id } end
  if f.op == "msg" then return { push = f.body, from = f.from } end
  if f.op == "joined" then return { reply = f.id } end
  if f.op == "error" then return { error = f.reason, id = f.id or "login" } end
  return {}
end
