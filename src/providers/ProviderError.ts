import { Schema } from "effect"

/**
 * Why a provider call failed. An upstream answer with an error status is
 * not a `ProviderError`: it is a response (status, headers, body) like any
 * other.
 *
 * - `MissingCredentials`: no API key or access token (an unset or empty
 *   environment variable, an empty `apiKey`, or no usable Google
 *   Application Default Credentials). Raised when the client is built.
 * - `InvalidRequest`: the request cannot be sent: the body is not a JSON
 *   object, no model was given, or the provider does not serve the endpoint
 *   (Vertex: `/v1/messages/count_tokens`). Nothing went upstream.
 * - `ConnectTimeout`: no connection to the provider within the connect
 *   timeout.
 * - `ConnectionFailed`: the request failed before the response head
 *   arrived: connection refused or reset, DNS or TLS failure.
 * - `BodyFailed`: the response body broke off after the head (a reset, or
 *   the provider closed the connection mid-body).
 *
 * For `ConnectTimeout`, `ConnectionFailed` and `BodyFailed` the message is
 * the low-level cause (`connect ECONNREFUSED 127.0.0.1:9`, `getaddrinfo
 * ENOTFOUND api.example.com`, `DEPTH_ZERO_SELF_SIGNED_CERT: self-signed
 * certificate`, `connect timeout after 5000 ms (host:443)`): at most 200
 * characters, never a header or a key.
 */
export const ProviderErrorReason = Schema.Literals([
  "MissingCredentials",
  "InvalidRequest",
  "ConnectTimeout",
  "ConnectionFailed",
  "BodyFailed",
])
export type ProviderErrorReason = typeof ProviderErrorReason.Type

/** A provider call that produced no usable response (see `ProviderErrorReason`). */
export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  reason: ProviderErrorReason,
  /** The provider's name. */
  provider: Schema.String,
  message: Schema.String,
}) {}
