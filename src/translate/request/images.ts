/**
 * Images between the formats: Anthropic `image` blocks (a base64 or a URL
 * source) and the OpenAI image URL (Chat `image_url.url`, Responses
 * `input_image.image_url`), which is either a `data:` URL or an http(s) URL.
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { isObject, isString, refuse, type Json } from "../wire.js"

/** The image media types Anthropic accepts. */
const ANTHROPIC_MEDIA_TYPES = new Set(["image/jpeg", "image/png", "image/gif", "image/webp"])

/**
 * The Anthropic `image` block of an OpenAI image URL: a `data:…;base64,` URL
 * becomes a base64 source, an http(s) URL a URL source. `field` names the URL
 * in a refusal.
 */
export const anthropicImage = (url: unknown, field: string): Json | InvalidRequest => {
  if (!isString(url) || url === "") return refuse(field, "must be an image URL")
  if (url.startsWith("data:")) {
    // Not a regex: the data may be megabytes long.
    const comma = url.indexOf(",")
    const header = comma < 0 ? "" : url.slice(5, comma).toLowerCase()
    const params = header.split(";")
    if (comma < 0 || !params.includes("base64"))
      return refuse(field, "a data: URL must be base64 (data:image/png;base64,…)")
    const mediaType = params[0] === "image/jpg" ? "image/jpeg" : (params[0] ?? "")
    if (!ANTHROPIC_MEDIA_TYPES.has(mediaType))
      return refuse(field, `media type "${mediaType}" is not supported (jpeg, png, gif or webp)`)
    return { type: "image", source: { type: "base64", media_type: mediaType, data: url.slice(comma + 1) } }
  }
  if (/^https?:\/\//i.test(url)) return { type: "image", source: { type: "url", url } }
  return refuse(field, "must be an http(s) or a data: URL")
}

/** The OpenAI image URL of an Anthropic `image` block's `source` (base64: a `data:` URL). */
export const openaiImageUrl = (source: unknown, field: string): string | InvalidRequest => {
  if (!isObject(source)) return refuse(field, "must be an image source")
  if (source["type"] === "base64" && isString(source["media_type"]) && isString(source["data"]))
    return `data:${source["media_type"]};base64,${source["data"]}`
  if (source["type"] === "url" && isString(source["url"])) return source["url"]
  return refuse(
    `${field}.type`,
    `image sources of type ${JSON.stringify(source["type"])} cannot be translated`,
  )
}
