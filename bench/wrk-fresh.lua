-- wrk's script for bench/load.ts (mode 'wrk'): each request is the next of
-- the list in $WRK_REQUESTS (one per line: method, path, then header names and
-- values, tab-separated), so no credential goes out twice while the list
-- lasts; done() prints the figures as one JSON line.
local requests = {}
local sent = 0

function init(args)
  for line in io.lines(os.getenv("WRK_REQUESTS")) do
    local fields = {}
    for field in (line .. "\t"):gmatch("([^\t]*)\t") do fields[#fields + 1] = field end
    local headers = {}
    for i = 3, #fields - 1, 2 do headers[fields[i]] = fields[i + 1] end
    requests[#requests + 1] = wrk.format(fields[1], fields[2], headers)
  end
end

function request()
  sent = sent + 1
  return requests[(sent - 1) % #requests + 1]
end

function done(summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"durationUs":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50Us":%d,"p99Us":%d,"meanUs":%f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.mean))
end
