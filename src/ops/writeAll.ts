import * as fs from "node:fs"

/** A write that stopped before all its bytes reached the file: how many did, and why it stopped. */
export class PartialWrite extends Error {
  constructor(
    readonly written: number,
    readonly reason: unknown,
  ) {
    super(reason instanceof Error ? reason.message : String(reason))
  }
}

/**
 * Writes all of `data` to `fd` with write(2), from the calling thread (ADR
 * 0030), continuing a short write where it stopped. A string that the first
 * write takes whole never becomes a Buffer. Throws `PartialWrite`, with the
 * bytes that did reach the file, on an error or on a write of 0 bytes (which
 * would otherwise loop for ever).
 */
export const writeAllSync = (fd: number, data: string | Buffer): void => {
  let offset = 0
  try {
    let bytes: Buffer
    if (typeof data === "string") {
      offset = fs.writeSync(fd, data)
      if (offset === Buffer.byteLength(data)) return
      bytes = Buffer.from(data)
    } else bytes = data
    while (offset < bytes.length) {
      const n = fs.writeSync(fd, bytes, offset)
      if (n <= 0) throw new Error("the file took 0 bytes")
      offset += n
    }
  } catch (reason) {
    throw new PartialWrite(offset, reason)
  }
}
