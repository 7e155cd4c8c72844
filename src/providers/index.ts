/**
 * `tollgate/providers`: Tollgate's provider layer as a library (docs/library.md).
 */
export {
  ProviderClient,
  type AnthropicOptions,
  type OllamaOptions,
  type OpenAIOptions,
  type ProviderClientOptions,
  type ProviderKind,
  type ProviderResponse,
  type SendRequest,
  type VertexOptions,
} from "./ProviderClient.js"
export { ProviderError, ProviderErrorReason } from "./ProviderError.js"
export type { ApiFormat, Endpoint } from "../domain/endpoint.js"
export type { Usage } from "../domain/usage.js"
