/**
 * Azure OpenAI's v1 API (`/openai/v1/chat/completions`, `/openai/v1/responses`, `/openai/v1/embeddings`): the
 * OpenAI bodies and answers, the `api-key` header, and Azure's content filter (`content-filter`).
 * https://learn.microsoft.com/azure/ai-foundry/openai/reference and .../concepts/content-filter
 */

/** The 401 body of a request without a usable `api-key`. */
export const accessDeniedJson = JSON.stringify({
  error: {
    code: "401",
    message:
      "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an " +
      "active subscription and use a correct regional API endpoint for your resource.",
  },
})

/** True when the `api-key` header is acceptable: any non-empty key but `wrong`. */
export const keyAccepted = (apiKey: string | undefined): boolean =>
  apiKey !== undefined && apiKey.trim() !== "" && apiKey.trim() !== "wrong"

/** The 400 body Azure answers when the content filter refuses the prompt. */
export const contentFilterJson = JSON.stringify({
  error: {
    message:
      "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please " +
      "modify your prompt and retry. To learn more about our content filtering policies please read our " +
      "documentation: https://go.microsoft.com/fwlink/?linkid=2198766",
    type: null,
    param: "prompt",
    code: "content_filter",
    status: 400,
    innererror: {
      code: "ResponsibleAIPolicyViolation",
      content_filter_result: {
        hate: { filtered: true, severity: "high" },
        self_harm: { filtered: false, severity: "safe" },
        sexual: { filtered: false, severity: "safe" },
        violence: { filtered: false, severity: "safe" },
      },
    },
  },
})

/** Tokens a chat stream sends before the content filter cuts it (fewer when fewer were planned). */
export const contentFilterTokens = 2
