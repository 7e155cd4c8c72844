import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Agent } from "undici"
import { afterEach, describe, expect, it } from "vitest"
import {
  QUEUE_LIMIT_BYTES,
  UpstreamCall,
  type BodyReader,
  type UpstreamError,
} from "../../src/providers/transport.js"
import { eventually } from "../support/harness.js"

/** A real HTTP upstream whose handler each test writes. */
const serve = async (
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; origin: string }> => {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

/** A reader that records what it is given. */
const recorder = () => {
  const seen: Array<string> = []
  const reader: BodyReader = {
    onData: (chunk) => seen.push(`data:${chunk.toString()}`),
    onEnd: () => seen.push("end"),
    onError: (error: UpstreamError) => seen.push(`error:${error.code ?? error.message}`),
  }
  return { seen, reader }
}

const cleanup: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of cleanup.splice(0)) await close()
})

const setup = async (handler: (req: IncomingMessage, res: ServerResponse) => void, connections = 4) => {
  const { server, origin } = await serve(handler)
  const sockets = { opened: 0, closed: 0 }
  server.on("connection", (socket) => {
    sockets.opened++
    socket.on("close", () => sockets.closed++)
  })
  const agent = new Agent({ connections })
  cleanup.push(
    () => agent.destroy(),
    () => new Promise((resolve) => server.close(resolve)),
    async () => server.closeAllConnections(),
  )
  const dispatch = (call: UpstreamCall, path = "/") =>
    agent.dispatch({ origin, path, method: "POST", headers: {}, body: "{}" }, call)
  return { dispatch, sockets }
}

const noReader: BodyReader = { onData: () => {}, onEnd: () => {}, onError: () => {} }

/** A call whose head and failure nobody waits for (the test reads its state). */
const unwatched = (): UpstreamCall =>
  new UpstreamCall(
    () => {},
    () => {},
  )

/** A call whose whole response — `pieces`, sent 10 ms apart as separate chunks — is queued, with no reader yet. */
const queuedWhole = async (pieces: ReadonlyArray<string>): Promise<UpstreamCall> => {
  const { dispatch } = await setup((_req, res) => {
    res.writeHead(200)
    pieces.forEach((piece, i) =>
      setTimeout(() => (i === pieces.length - 1 ? res.end(piece) : res.write(piece)), i * 10),
    )
  })
  const call = unwatched()
  dispatch(call)
  await eventually(() => call.ended)
  return call
}

/**
 * Writes `count` pieces of 16 KiB (`Infinity`: until the connection closes),
 * as fast as the socket takes them, then ends; returns the bytes written so far.
 */
const sendPieces = (res: ServerResponse, count: number): (() => number) => {
  const piece = Buffer.alloc(16 * 1024, 0x61)
  let sent = 0
  const more = () => {
    while (sent < count) {
      sent++
      if (!res.write(piece)) return void res.once("drain", more)
    }
    res.end()
  }
  more()
  return () => sent * piece.length
}

describe("UpstreamCall (undici dispatch handler)", () => {
  it("queues what arrives while no reader is attached, and gives it, then the end, to the next reader in order", async () => {
    const { dispatch } = await setup((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" })
      res.write("one ")
      setTimeout(() => res.write("two "), 20)
      setTimeout(() => res.end("three"), 40)
    })
    const heads: Array<number> = []
    const call = new UpstreamCall(
      (c) => heads.push(c.status),
      () => heads.push(-1),
    )
    dispatch(call)
    // Nobody reads: a short body is queued whole (the connection can go back to the pool).
    await eventually(() => call.ended)
    expect(call.queuedBytes).toBe(13)
    const { seen, reader } = recorder()
    call.attach(reader)
    expect(seen).toEqual(["data:one ", "data:two ", "data:three", "end"])
    expect(call.queuedBytes).toBe(0)
    expect(heads).toEqual([200])
    expect(call.headers["content-type"]).toBe("text/plain")
  })

  it(`queues at most ${QUEUE_LIMIT_BYTES} bytes and a socket read with no reader, then stops reading upstream`, async () => {
    const total = 4 * 1024 * 1024
    let written = () => 0
    const { dispatch } = await setup((_req, res) => {
      res.writeHead(200)
      written = sendPieces(res, total / (16 * 1024))
    })
    const call = unwatched()
    dispatch(call)
    await eventually(() => call.queuedBytes >= QUEUE_LIMIT_BYTES)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(call.queuedBytes).toBeLessThan(QUEUE_LIMIT_BYTES + 64 * 1024)
    expect(call.ended).toBe(false)
    // The upstream is held back by the socket buffers, not read into Tollgate.
    expect(written()).toBeLessThan(total)
    let received = 0
    let ended = false
    call.attach({
      onData: (chunk) => (received += chunk.length),
      onEnd: () => (ended = true),
      onError: () => {},
    })
    call.resume()
    await eventually(() => ended)
    expect(received).toBe(total)
  })

  it("a reader that pauses gets nothing more until it resumes", async () => {
    const { dispatch } = await setup((_req, res) => {
      res.writeHead(200)
      res.write("a")
      setTimeout(() => res.write("b"), 20)
      setTimeout(() => res.end("c"), 40)
    })
    const { seen, reader } = recorder()
    const pausing: BodyReader = {
      ...reader,
      onData: (chunk) => {
        reader.onData(chunk)
        paused.pause()
      },
    }
    const paused = new UpstreamCall(
      (c) => c.attach(pausing),
      () => {},
    )
    dispatch(paused)
    await eventually(() => seen.length === 1)
    await new Promise((resolve) => setTimeout(resolve, 80))
    expect(seen).toEqual(["data:a"])
    // Resumed: it pauses again after each chunk, so one resume is one chunk.
    paused.resume()
    await eventually(() => seen.length === 2)
    paused.resume()
    await eventually(() => seen.length === 3)
    paused.resume()
    await eventually(() => seen.at(-1) === "end")
    expect(seen).toEqual(["data:a", "data:b", "data:c", "end"])
  })

  it("an informational 1xx head is not the response", async () => {
    const { dispatch } = await setup((_req, res) => {
      res.writeEarlyHints({ link: "</style.css>; rel=preload" }, () => {
        res.writeHead(201, { "x-final": "yes" })
        res.end("done")
      })
    })
    const heads: Array<number> = []
    const { seen, reader } = recorder()
    const call = new UpstreamCall(
      (c) => {
        heads.push(c.status)
        c.attach(reader)
      },
      () => heads.push(-1),
    )
    dispatch(call)
    await eventually(() => seen.at(-1) === "end")
    expect(heads).toEqual([201])
    expect(call.headers["x-final"]).toBe("yes")
    expect(seen).toEqual(["data:done", "end"])
  })

  it("a failure after the head waits behind the queued chunks for the next reader", async () => {
    const { dispatch } = await setup((_req, res) => {
      res.writeHead(200)
      res.write("partial")
      setTimeout(() => res.socket?.destroy(), 30)
    })
    const call = unwatched()
    dispatch(call)
    await eventually(() => call.error !== undefined)
    // The failure waits behind the queued chunk for the reader.
    const { seen, reader } = recorder()
    call.attach(reader)
    expect(seen).toHaveLength(2)
    expect(seen[0]).toBe("data:partial")
    expect(seen[1]).toMatch(/^error:/)
  })

  it("a failure before the head goes to onFailure, not a reader", async () => {
    const { server, origin } = await serve(() => {})
    await new Promise((resolve) => server.close(resolve))
    const agent = new Agent()
    cleanup.push(() => agent.destroy())
    const failures: Array<string> = []
    const call = new UpstreamCall(
      () => failures.push("head"),
      (error: UpstreamError) => failures.push(error.code ?? error.message),
    )
    agent.dispatch({ origin, path: "/", method: "POST", headers: {}, body: "{}" }, call)
    await eventually(() => failures.length > 0)
    expect(failures).toEqual(["ECONNREFUSED"])
  })

  it("a call closed while it waits for a connection is never sent upstream", async () => {
    let received = 0
    let release: (() => void) | undefined
    const { dispatch } = await setup((req, res) => {
      received++
      if (req.url === "/hold") release = () => res.end("held")
      else res.end("ok")
    }, 1)
    const { seen, reader } = recorder()
    const held = new UpstreamCall(
      (c) => c.attach(reader),
      () => {},
    )
    dispatch(held, "/hold")
    await eventually(() => release !== undefined)
    // One connection, busy: this call waits in undici's queue.
    const queued = new UpstreamCall(
      () => seen.push("queued head"),
      () => seen.push("queued failure"),
    )
    dispatch(queued, "/queued")
    queued.close()
    release!()
    await eventually(() => seen.at(-1) === "end")
    const after = recorder()
    const next = new UpstreamCall(
      (c) => c.attach(after.reader),
      () => {},
    )
    dispatch(next, "/next")
    await eventually(() => after.seen.at(-1) === "end")
    expect(received).toBe(2)
    expect(seen).toEqual(["data:held", "end"])
    expect(after.seen).toEqual(["data:ok", "end"])
  })

  it("close after the head aborts the request: the upstream sees its connection close", async () => {
    let closed = false
    const { dispatch } = await setup((_req, res) => {
      res.writeHead(200)
      res.write("first")
      res.on("close", () => (closed = true))
    })
    const call = new UpstreamCall(
      (c) => c.close(),
      () => {},
    )
    dispatch(call)
    await eventually(() => closed, 1_000)
    expect(call.queuedBytes).toBe(0)
  })

  it("a discarded response that arrived whole leaves its connection in the pool", async () => {
    const { dispatch, sockets } = await setup((_req, res) => {
      res.writeHead(529, { "content-type": "application/json" })
      res.end('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    }, 1)
    for (let i = 0; i < 10; i++) {
      await new Promise<void>((done) => {
        // As the attempt loop does: the head settles the attempt, the loop discards it a microtask later.
        const call = new UpstreamCall(
          (c) =>
            void Promise.resolve().then(() => {
              c.close()
              done()
            }),
          () => done(),
        )
        dispatch(call)
      })
    }
    expect(sockets.opened).toBe(1)
    expect(sockets.closed).toBe(0)
  })

  it("closing a call paused at the queue limit aborts it: the upstream connection closes", async () => {
    const { dispatch, sockets } = await setup((_req, res) => {
      res.writeHead(200)
      sendPieces(res, Infinity)
    })
    const call = unwatched()
    dispatch(call)
    await eventually(() => call.queuedBytes >= QUEUE_LIMIT_BYTES)
    call.close()
    expect(call.queuedBytes).toBe(0)
    await eventually(() => sockets.closed > 0, 1_000)
  })

  it("pause and resume after the end leave the next request on the same connection alone", async () => {
    const { dispatch, sockets } = await setup((req, res) => {
      if (req.url === "/short") return void res.end("x".repeat(20))
      res.writeHead(200)
      sendPieces(res, 256)
    }, 1)
    const first = unwatched()
    dispatch(first, "/short")
    await eventually(() => first.ended)
    // A reader that pauses after the end (a slow client, a budget pause) ...
    first.pause()
    const second = unwatched()
    dispatch(second, "/long")
    await eventually(() => second.queuedBytes >= QUEUE_LIMIT_BYTES)
    await new Promise((resolve) => setTimeout(resolve, 50))
    const held = second.queuedBytes
    // ... and resumes later must not resume the parser, which now reads the second response.
    first.attach(noReader)
    first.resume()
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(second.queuedBytes).toBe(held)
    expect(sockets.opened).toBe(1)
    second.close()
  })

  it("a reader that throws while the queue is delivered gets the error, and the request is aborted", async () => {
    const { dispatch, sockets } = await setup((_req, res) => {
      res.writeHead(200)
      res.write("first")
    })
    const call = unwatched()
    dispatch(call)
    await eventually(() => call.queuedBytes > 0)
    const errors: Array<string> = []
    call.attach({
      onData: () => {
        throw new Error("a bug in the reader")
      },
      onEnd: () => errors.push("end"),
      onError: (error) => errors.push(error.message),
    })
    expect(errors).toEqual(["a bug in the reader"])
    await eventually(() => sockets.closed > 0, 1_000)
  })

  it("a reader with onDataMany gets the queue in one call; what it does not take stays queued, in order, for after a resume", async () => {
    const call = await queuedWhole(["a", "b", "c", "d"])
    const calls: Array<string> = []
    let takeOnly = 2
    const reader: BodyReader = {
      onData: (chunk) => calls.push(`one:${chunk.toString()}`),
      onDataMany: (chunks) => {
        calls.push(`many:${chunks.map(String).join(",")}`)
        if (takeOnly >= chunks.length) return chunks.length
        // Takes the first two and pauses, as the relay does on a budget cutoff.
        call.pause()
        return takeOnly
      },
      onEnd: () => calls.push("end"),
      onError: (error) => calls.push(`error:${error.message}`),
    }
    call.attach(reader)
    expect(calls).toEqual(["many:a,b,c,d"])
    expect(call.queuedBytes).toBe(2)
    takeOnly = Infinity
    call.resume()
    expect(calls).toEqual(["many:a,b,c,d", "many:c,d", "end"])
    expect(call.queuedBytes).toBe(0)
  })

  it("a reader that closes the call inside onDataMany gets nothing more", async () => {
    const call = await queuedWhole(["a", "b"])
    const calls: Array<string> = []
    call.attach({
      onData: (chunk) => calls.push(`one:${chunk.toString()}`),
      onDataMany: (chunks) => {
        calls.push(`many:${chunks.length}`)
        call.close()
        return 1
      },
      onEnd: () => calls.push("end"),
      onError: (error) => calls.push(`error:${error.message}`),
    })
    expect(calls).toEqual(["many:2"])
    expect(call.queuedBytes).toBe(0)
  })

  it("a reader that hands over to another inside onDataMany: the next one gets the rest, then the end, in order", async () => {
    const call = await queuedWhole(["a", "b", "c", "d"])
    const seen: Array<string> = []
    const second = recorder()
    call.attach({
      onData: (chunk) => seen.push(`first:${chunk.toString()}`),
      onDataMany: (chunks) => {
        seen.push(`first-many:${chunks.map(String).join(",")}`)
        // Takes two, then detaches and another reader attaches (as a paused relay and its successor do).
        call.detach()
        call.attach(second.reader)
        return 2
      },
      onEnd: () => seen.push("first:end"),
      onError: (error) => seen.push(`first:error:${error.message}`),
    })
    expect(seen).toEqual(["first-many:a,b,c,d"])
    expect(second.seen).toEqual(["data:c", "data:d", "end"])
    expect(call.queuedBytes).toBe(0)
  })

  for (const taken of [0, 5, Number.NaN]) {
    it(`a reader that says it took ${taken} of 4 chunks gets an error and the request is aborted`, async () => {
      const call = await queuedWhole(["a", "b", "c", "d"])
      const seen: Array<string> = []
      call.attach({
        onData: () => seen.push("data"),
        onDataMany: () => taken,
        onEnd: () => seen.push("end"),
        onError: (error) => seen.push(`error:${error.message}`),
      })
      expect(seen).toEqual([`error:a body reader took ${taken} of 4 chunks`])
      expect(call.queuedBytes).toBe(0)
    })
  }
})
