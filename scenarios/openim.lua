-- OpenIM v3.8.3 (github.com/openimsdk/open-im-server) as an adapter for
-- `driver = "script"` (docs/drivers/script.md; scenario: scenarios/openim.toml).
--
-- What OpenIM's gateway asks of a client, and where it is done here:
-- * the user and its token go in the upgrade's query (`upgrade`): tokens come from
--   OpenIM's REST API with the admin secret, before the run, as `vars.tokens` (user id to
--   token; peers/openim/README.md shows how); users and groups are registered there too
--   (a WebSocket adapter makes no REST calls). With `isMsgResp=true` the gateway says
--   `{"errCode":0}` in a text frame once the token is accepted: that ends `login`.
-- * every request is a binary frame of JSON, `{reqIdentifier, token, sendID, operationID,
--   msgIncr, data}`, with `data` the base64 of a Protobuf message of `sdkws.proto`
--   (github.com/openimsdk/protocol, the version OpenIM v3.8.3 pins); the answer carries
--   the same `msgIncr`, an `errCode` and its own `data`:
--     1003 send `sdkws.MsgData`, answered by `sdkws.UserSendMsgResp` (the acceptance);
--     1001 newest seqs, `GetMaxSeqReq` -> `GetMaxSeqResp` (per conversation);
--     1002 pull by seq range, `PullMessageBySeqsReq` -> `PullMessageBySeqsResp`.
--   Pushes are 2001, `sdkws.PushMessages`: messages per conversation, each with its seq.
-- * conversations are OpenIM's: `si_A_B` (the two user ids sorted) for 1:1, `sg_GROUP`
--   for a group; seqs are per conversation, so pushes and pulled history merge exactly.
-- * a group of the scenario is the OpenIM group `vars.group_prefix .. name`, created with
--   its members before the run (`join` only records it).
-- * notifications (content types from 1000: a member joined, …) share a group's seqs:
--   they are skipped, and each pulled range is covered whole.

local pb_encode, pb_decode = codec.pb_encode, codec.pb_decode
local json_encode, json_decode = codec.json_encode, codec.json_decode
local b64e, b64d = codec.base64_encode, codec.base64_decode

local SEND, NEWEST, PULL, PUSH = 1003, 1001, 1002, 2001
local SINGLE, GROUP, TEXT, FROM_USER = 1, 3, 101, 100
local NOTIFICATIONS = 1000
local PLATFORM = vars.platform or 5 -- OpenIM's "Web" platform id: pings from the server
-- The most messages one pull asks for in one conversation.
local PAGE = vars.page or 100

function upgrade(u)
  local token = vars.tokens and vars.tokens[u.id]
  if token == nil then error("no token for " .. u.id .. " in vars.tokens", 0) end
  return "/?sendID=" .. codec.url_encode(u.id) .. "&token=" .. codec.url_encode(token)
    .. "&platformID=" .. PLATFORM .. "&operationID=" .. codec.url_encode(u.id)
    .. "&sdkType=js&isMsgResp=true"
end

-- A request frame: its JSON envelope around the Protobuf `data` of `kind`.
local function request(u, ident, kind, msg)
  local id = tostring(u:next_id())
  return json_encode({ reqIdentifier = ident, token = vars.tokens[u.id], sendID = u.id,
    operationID = u.id .. "-" .. id, msgIncr = id, data = b64e(pb_encode(kind, msg)) }), id
end

-- Sends a request and waits for its answer's decoded `data` (`answer` is its type).
local function call(u, ident, kind, msg, answer)
  local frame, id = request(u, ident, kind, msg)
  local r = u:call_binary(frame, id)
  if r.error then error(r.error, 0) end
  local data, why = pb_decode(answer, b64d(r.data or ""))
  if data == nil then error("a " .. answer .. " that does not decode: " .. why, 0) end
  return data
end

function login(u)
  u.state.groups = {}
  local r = u:await("connected")
  if r.error then refuse(r.error) end
end

function join(u, name)
  u.state.groups[(vars.group_prefix or "") .. name] = name
end

local function send(u, msg, body)
  msg.sendID = u.id
  msg.clientMsgID = u.id .. "-" .. u.ix .. "-" .. u:next_id()
  msg.senderPlatformID = PLATFORM
  msg.msgFrom = FROM_USER
  msg.contentType = TEXT
  -- Bytes in Protobuf's JSON mapping (how pb_encode takes a message) are base64.
  msg.content = b64e(json_encode({ content = body }))
  local frame, id = request(u, SEND, "openim.sdkws.MsgData", msg)
  u:send(frame, "binary")
  return id
end

function direct(u, to, body)
  return send(u, { recvID = to, sessionType = SINGLE }, body)
end

function group(u, name, body)
  return send(u, { groupID = (vars.group_prefix or "") .. name, sessionType = GROUP }, body)
end

-- The scenario's name for a conversation's messages, or nil for one it does not count
-- (a group the user is not in for this run).
local function counted(u, conv)
  local g = conv:match("^sg_(.*)$")
  return g == nil or u.state.groups[g] ~= nil
end

-- What a message is: its body for a user's text message, nil for anything else.
local function body_of(m)
  if (m.contentType or 0) >= NOTIFICATIONS or m.contentType ~= TEXT then return nil end
  local c = json_decode(b64d(m.content or ""))
  return c and c.content
end

-- A push: every message of every conversation, in seq order.
local function pushed(u, data)
  local p, why = pb_decode("openim.sdkws.PushMessages", data)
  if p == nil then return { protocol = "a push that does not decode: " .. why } end
  local out = {}
  for conv, pull in pairs(p.msgs or {}) do
    if counted(u, conv) then
      for _, m in ipairs(pull.Msgs or {}) do
        local body = body_of(m)
        if body ~= nil then
          out[#out + 1] = { push = body, conv = conv, seq = m.seq, from = m.sendID }
        end
      end
    end
  end
  table.sort(out, function(a, b) return a.conv < b.conv or a.conv == b.conv and a.seq < b.seq end)
  return out
end

function receive(u, frame, kind)
  local f = json_decode(frame)
  if f == nil then return { protocol = "not JSON: " .. frame:sub(1, 80) } end
  if kind == "text" then
    -- The gateway's word on the upgrade (isMsgResp=true), or its pong.
    if f.errCode == nil then return nil end
    if f.errCode ~= 0 then return { error = f.errCode .. " " .. tostring(f.errMsg), id = "connected" } end
    return { reply = "connected" }
  end
  local ident = f.reqIdentifier
  if ident == PUSH then return pushed(u, b64d(f.data or "")) end
  if f.errCode ~= 0 then
    return { error = tostring(f.errCode) .. " " .. tostring(f.errMsg), id = f.msgIncr }
  end
  if ident == SEND then return { ack = f.msgIncr } end
  if ident == NEWEST or ident == PULL then return { reply = f.msgIncr, data = f.data } end
  return nil
end

-- Pulls `conv` from `from` to `to`, a page at a time, handing each message over.
local function pull(u, conv, from, to)
  while from <= to do
    local last = math.min(to, from + PAGE - 1)
    local r = call(u, PULL, "openim.sdkws.PullMessageBySeqsReq", { userID = u.id,
      seqRanges = { { conversationID = conv, begin = from, ["end"] = last, num = last - from + 1 } },
      order = "PullOrderAsc" }, "openim.sdkws.PullMessageBySeqsResp")
    local got = r.msgs and r.msgs[conv]
    for _, m in ipairs(got and got.Msgs or {}) do
      local body = body_of(m)
      if body ~= nil then u:deliver(body, conv, m.seq, m.sendID) end
    end
    u:cover(conv, last)
    from = last + 1
  end
end

-- "start": where each conversation stands; "missed" and "verify": pull everything newer
-- than what the user has.
function fetch(u, why)
  local r = call(u, NEWEST, "openim.sdkws.GetMaxSeqReq", { userID = u.id },
    "openim.sdkws.GetMaxSeqResp")
  for conv, max in pairs(r.maxSeqs or {}) do
    if counted(u, conv) and not conv:match("^n_") then
      if why == "start" then
        u:cover(conv, max)
      elseif max > u:upto(conv) then
        pull(u, conv, math.max(u:upto(conv) + 1, (r.minSeqs or {})[conv] or 1), max)
      end
    end
  end
end
