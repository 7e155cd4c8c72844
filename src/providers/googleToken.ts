import { Clock, Duration, Effect, Schedule } from "effect"
import { ProviderError } from "./ProviderError.js"

/** The scope Vertex AI needs. */
const CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
/** Refresh this long before the token expires, ms. */
export const REFRESH_BEFORE_MS = 5 * 60_000
/** Shortest wait between two refreshes, ms (a token that claims to expire at once is not refreshed in a loop). */
const MIN_REFRESH_MS = 10_000
/** Wait before retrying a failed refresh, ms; the old token stays in use meanwhile. */
const RETRY_MS = 5_000

interface Token {
  readonly token: string
  /** Epoch ms, on the Google clock (real time). */
  readonly expiresAt: number | undefined
}

/** What Tollgate uses of any google-auth-library client (service account, user, metadata server, external account). */
interface Refreshable {
  readonly getAccessToken: () => Promise<{ token?: string | null }>
  readonly credentials?: { expiry_date?: number | null }
}

const hint =
  "run `gcloud auth application-default login` on a development machine, or set GOOGLE_APPLICATION_CREDENTIALS " +
  "to a service-account key file (on a Google Cloud host, the host's service identity works), or give a static " +
  "access token (access_token_env in the config, accessToken in the library)"

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/**
 * A Google access token for one Vertex provider from Application Default
 * Credentials (google-auth-library), held in memory and refreshed 5 minutes
 * before it expires by a fiber of the provider's layer — so building an
 * upstream request only reads a string. The first token is fetched at start:
 * without usable credentials the start fails (`MissingCredentials`) with a
 * message that says what to do. A failed refresh keeps the old token and
 * retries every 5 s. google-auth-library is loaded only here, on first use.
 */
export const googleToken = (provider: { readonly name: string; readonly project: string }) =>
  Effect.gen(function* () {
    // A fresh GoogleAuth per fetch: Application Default Credentials are read again (rotated keys are
    // picked up) and the client has no cache of its own, so a refresh always asks the token endpoint.
    const fetchToken = Effect.tryPromise({
      try: async (): Promise<Token> => {
        const { GoogleAuth } = await import("google-auth-library")
        const client = (await new GoogleAuth({
          scopes: [CLOUD_PLATFORM],
          projectId: provider.project,
        }).getClient()) as unknown as Refreshable
        const { token } = await client.getAccessToken()
        if (!token) throw new Error("the credentials gave no access token")
        return { token, expiresAt: client.credentials?.expiry_date ?? undefined }
      },
      catch: (cause) =>
        new ProviderError({
          reason: "MissingCredentials",
          provider: provider.name,
          message: `providers.${provider.name}: no usable Google Application Default Credentials (${describe(cause)}); ${hint}`,
        }),
    })

    let current = yield* fetchToken
    const waitFor = (token: Token, now: number): number =>
      token.expiresAt === undefined
        ? 45 * 60_000
        : Math.max(MIN_REFRESH_MS, token.expiresAt - REFRESH_BEFORE_MS - now)

    const refresh = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      yield* Effect.sleep(Duration.millis(waitFor(current, now)))
      current = yield* fetchToken.pipe(
        Effect.tapError((error) =>
          Effect.logWarning("Google token refresh failed; retrying").pipe(
            Effect.annotateLogs({ provider: provider.name, error: error.message }),
          ),
        ),
        Effect.retry(Schedule.spaced(Duration.millis(RETRY_MS))),
      )
    })
    yield* Effect.forkScoped(Effect.forever(refresh))
    return () => current.token
  })
