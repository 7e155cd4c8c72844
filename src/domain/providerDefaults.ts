/** Default base URLs per provider kind: the config decoder and the library client use these. */
export const DEFAULT_BASE_URL = {
  anthropic: "https://api.anthropic.com",
  openai: "https://api.openai.com",
  ollama: "http://localhost:11434",
  gemini: "https://generativelanguage.googleapis.com",
} as const

/** The default Bedrock runtime host of an AWS region. */
export const bedrockBaseUrl = (region: string): string => `https://bedrock-runtime.${region}.amazonaws.com`

/** The default Vertex AI host for a region (`global` has no region prefix). */
export const vertexBaseUrl = (region: string): string =>
  region === "global" ? "https://aiplatform.googleapis.com" : `https://${region}-aiplatform.googleapis.com`

/** Connect timeout of `send` when the options give none, ms (the config's `timeouts.connect` default). */
export const DEFAULT_CONNECT_MS = 5_000
