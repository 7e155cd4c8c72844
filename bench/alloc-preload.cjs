// Allocation sampling for one server process, collected objects included.
// Start a server with `node --require ./bench/alloc-preload.cjs …`, put it under load,
// then send SIGUSR2: the profile is written to $ALLOC_PROFILE (default ./alloc.heapprofile).
// `node bench/alloc-report.mjs FILE REQUESTS [BUNDLE]` turns it into bytes per request.
const inspector = require("node:inspector")
const fs = require("node:fs")
const session = new inspector.Session()
session.connect()
session.post("HeapProfiler.enable", () =>
  session.post("HeapProfiler.startSampling", {
    samplingInterval: 4096,
    includeObjectsCollectedByMinorGC: true,
    includeObjectsCollectedByMajorGC: true,
  }),
)
process.on("SIGUSR2", () =>
  session.post("HeapProfiler.stopSampling", (error, result) => {
    if (error === null)
      fs.writeFileSync(process.env.ALLOC_PROFILE ?? "alloc.heapprofile", JSON.stringify(result.profile))
  }),
)
