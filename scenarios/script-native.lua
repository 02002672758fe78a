-- The reference server's protocol (docs/protocol.md) as an adapter script for
-- `driver = "script"`: the same traffic as `driver = "native"` gives the same ledger.
-- Every entry point gets `u`, the user: u.id, u.token (the HMAC token from the scenario's
-- secret), u.state (the script's own), and the methods u:send, u:next_id, u:call, u:upto,
-- u:cover and u:deliver (docs/drivers/script.md).

local json_encode, json_decode = codec.json_encode, codec.json_decode

-- Log in; anything but `welcome` is a refusal.
function login(u)
  u:send(json_encode({ type = "login", v = 1, user = u.id, token = u.token }))
  -- `welcome` carries no ref: receive() answers it as the reply of id "login".
  local r = u:await("login")
  if r.error then refuse(r.error) end
  u.state.logged_in = true
end

-- Send a direct or group message; the returned ref is what its `ack` carries.
function direct(u, to, body)
  local ref = u:next_id()
  u:send(json_encode({ type = "send", ref = ref, to = { user = to }, body = body }))
  return ref
end

function group(u, name, body)
  local ref = u:next_id()
  u:send(json_encode({ type = "send", ref = ref, to = { group = name }, body = body }))
  return ref
end

-- Create the group; when it exists, join it.
function join(u, name)
  local ref = u:next_id()
  local r = u:call(json_encode({ type = "group_create", ref = ref, group = name }), ref)
  if r.error then
    ref = u:next_id()
    r = u:call(json_encode({ type = "group_join", ref = ref, group = name }), ref)
    if r.error then refuse(r.error) end
  end
end

function heartbeat(u)
  u:send(json_encode({ type = "ping", ts = 0 }))
end

-- What the user missed: its conversations, then pages of each after what it has.
function fetch(u)
  local ref = u:next_id()
  local list = u:call(json_encode({ type = "convs", ref = ref }), ref)
  if list.error then error("convs: " .. list.error) end
  for _, c in ipairs(list.frame.convs) do
    local after = u:upto(c.conv)
    while after < c.last_seq do
      ref = u:next_id()
      local page = u:call(json_encode({ type = "sync", ref = ref, conv = c.conv,
        after = after, limit = 500 }), ref)
      if page.error then error("sync " .. c.conv .. ": " .. page.error) end
      local top = after
      for _, m in ipairs(page.frame.msgs) do
        u:deliver(m.body, m.conv, m.seq, m.from)
        if m.seq > top then top = m.seq end
      end
      -- A page holds every message between its ends, whatever their numbers.
      u:cover(c.conv, top)
      if top <= after or not page.frame.more then break end
      after = top
    end
  end
end

-- What a frame from the server is.
function receive(u, text)
  local f = json_decode(text)
  if f == nil then return { protocol = "not JSON: " .. text } end
  local t = f.type
  if t == "msg" then
    return { push = f.body, conv = f.conv, seq = f.seq, from = f.from }
  elseif t == "ack" then
    return { ack = f.ref, conv = f.conv, seq = f.seq }
  elseif t == "welcome" then
    return { reply = "login" }
  elseif t == "error" then
    local id = f.ref
    if id == nil and not u.state.logged_in then id = "login" end
    return { error = f.code .. ": " .. f.message, id = id }
  elseif t == "ok" or t == "conv_list" or t == "sync_page" then
    return { reply = f.ref, frame = f }
  elseif t == "pong" then
    return nil
  end
  return { protocol = "unknown frame type " .. tostring(t) }
end
