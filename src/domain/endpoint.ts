/** The two API families Tollgate speaks: a route and a provider each use one (a route with `translate` may mix). */
export type ApiFormat = "anthropic" | "openai"

/** The proxy endpoints, by path. */
export type Endpoint =
  "/v1/messages" | "/v1/messages/count_tokens" | "/v1/chat/completions" | "/v1/responses" | "/v1/embeddings"

/** Every proxy endpoint, in the order of SPEC's tables. */
export const ENDPOINTS: ReadonlyArray<Endpoint> = [
  "/v1/messages",
  "/v1/messages/count_tokens",
  "/v1/chat/completions",
  "/v1/responses",
  "/v1/embeddings",
]

/** The API family each proxy endpoint belongs to (its error format, its routes' `api`). */
export const endpointApi = (endpoint: Endpoint): ApiFormat =>
  endpoint === "/v1/messages" || endpoint === "/v1/messages/count_tokens" ? "anthropic" : "openai"

/**
 * The API family a path belongs to, for answers that have no endpoint
 * (an unknown path's 404): `/v1/messages…` is Anthropic's, anything else OpenAI's.
 */
export const pathApi = (path: string): ApiFormat =>
  path === "/v1/messages" || path.startsWith("/v1/messages/") ? "anthropic" : "openai"
