-- The load of bench_reward_server.py when wrk is on PATH: POST one sample per request on
-- kept-alive connections and classify every answer (wrk itself only counts statuses >= 400).
--
-- Arguments (after --): the path, the sample's JSON, and the JSON of a sample the reward raises
-- on (empty: never send it; else every tenth request is that one). An answer counts as:
--   ok       2xx with "score":1.0 and "is_score_valid":true (what every server answers);
--   invalid  2xx with "is_score_valid":false and the raising reward's message;
--   non2xx   any other status;
--   wrong    any other 2xx body.
-- done() prints one line, "WRK_RESULT {json}", with the sums over wrk's threads.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local headers = { ["Content-Type"] = "application/json" }
  normal = wrk.format("POST", args[1], headers, args[2])
  raising = args[3] ~= nil and args[3] ~= ""
  if raising then
    boom = wrk.format("POST", args[1], headers, args[3])
  end
  sent, ok, invalid, non2xx, wrong = 0, 0, 0, 0, 0
  failures = ""
end

function request()
  sent = sent + 1
  if raising and sent % 10 == 0 then
    return boom
  end
  return normal
end

local function note(status, body)
  if #failures < 600 then
    failures = failures .. status .. " " .. string.sub(body, 1, 120):gsub("[\r\n\"\\]", " ") .. "|"
  end
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    note(status, body)
  elseif body:find('"score":1.0', 1, true) and body:find('"is_score_valid":true', 1, true) then
    ok = ok + 1
  elseif raising and body:find('"is_score_valid":false', 1, true)
      and body:find("this sample makes the reward raise", 1, true) then
    invalid = invalid + 1
  else
    wrong = wrong + 1
    note(status, body)
  end
end

function done(summary, latency, requests)
  local sums = { sent = 0, ok = 0, invalid = 0, non2xx = 0, wrong = 0 }
  local failures = ""
  for _, thread in ipairs(threads) do
    for name, _ in pairs(sums) do
      sums[name] = sums[name] + thread:get(name)
    end
    failures = failures .. thread:get("failures")
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests": %d, "duration_us": %d, "sent": %d, "ok": %d, "invalid": %d, '
      .. '"non2xx": %d, "wrong": %d, "socket_errors": %d, "p50_us": %d, "p99_us": %d, '
      .. '"failures": "%s"}\n',
    summary.requests, summary.duration, sums.sent, sums.ok, sums.invalid, sums.non2xx,
    sums.wrong, e.connect + e.read + e.write + e.timeout, latency:percentile(50),
    latency:percentile(99), failures))
end
