import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as FakeProvider from "../../fakeprovider/layer.js"

const getStatus = (url: string): Effect.Effect<number | "refused"> =>
  Effect.promise(() =>
    fetch(url).then(
      async (response) => {
        await response.text()
        return response.status
      },
      () => "refused" as const,
    ),
  )

describe("FakeProvider.layer", () => {
  it.layer(FakeProvider.layer({ name: "layered", scenario: "status:529" }))((it) => {
    it.effect("provides a running fake with the given options", () =>
      Effect.gen(function* () {
        const fake = yield* FakeProvider.FakeProvider
        const response = yield* Effect.promise(() =>
          fetch(`${fake.url}/v1/messages`, {
            method: "POST",
            body: JSON.stringify({ model: "m", max_tokens: 1, messages: [] }),
          }),
        )
        assert.strictEqual(response.status, 529)
        assert.strictEqual(response.headers.get("x-fake-name"), "layered")
        yield* Effect.promise(() => response.text())
        assert.strictEqual(fake.requests().count, 1)
      }),
    )
  })
})

describe("FakeProvider.make", () => {
  it.live("closes the fake when its scope closes", () =>
    Effect.gen(function* () {
      const url = yield* Effect.scoped(
        Effect.gen(function* () {
          const fake = yield* FakeProvider.make()
          assert.strictEqual(yield* getStatus(`${fake.url}/_fake/requests`), 200)
          return fake.url
        }),
      )
      assert.strictEqual(yield* getStatus(`${url}/_fake/requests`), "refused")
    }),
  )
})
