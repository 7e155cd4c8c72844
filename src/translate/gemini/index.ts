/**
 * Translation between OpenAI Chat Completions and Google Gemini
 * `generateContent`: the request one way, the JSON response, the SSE stream
 * and the error body the other way. Pure, synchronous functions, like the
 * rest of the translation layer.
 */
export { chatToGemini } from "./request.js"
export { requiresSignatures, withPlaceholderSignatures } from "./signatures.js"
export { THINKING_BUDGETS } from "./requestParams.js"
export { geminiToChat, geminiUsageCounts } from "./response.js"
export { GeminiToChatStream } from "./stream.js"
export { geminiErrorToOpenAI } from "./errors.js"
