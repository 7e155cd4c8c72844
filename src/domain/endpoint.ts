/** The two wire formats Tollgate speaks: a route, a provider and an endpoint each use one. */
export type ApiFormat = "anthropic" | "openai"

/** The proxy endpoints, by path. */
export type Endpoint = "/v1/messages" | "/v1/messages/count_tokens" | "/v1/chat/completions"

/** The API format each proxy endpoint speaks. */
export const endpointApi = (endpoint: Endpoint): ApiFormat =>
  endpoint === "/v1/chat/completions" ? "openai" : "anthropic"
