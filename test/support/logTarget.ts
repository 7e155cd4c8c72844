import type { LineTarget } from "../../src/ops/logger.js"

/** A log target that keeps what is written (`text`, `lines`): for tests of what the log layer writes. */
export const captureLog = (isTTY = false) => {
  let text = ""
  const target: LineTarget = {
    write: (chunk, done) => {
      text += chunk
      done()
    },
    backlog: () => 0,
    close: () => {},
    isTTY,
  }
  return { target, text: () => text, lines: () => text.split("\n").filter((line) => line.length > 0) }
}
