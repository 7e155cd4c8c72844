import { existsSync, mkdirSync } from "node:fs"
import { delimiter, join } from "node:path"
import { chromium, type Browser } from "playwright-core"
import { ROOT } from "./processes.js"

/**
 * The Chromium to drive: `TOLLGATE_CHROMIUM`, else `chromium` on PATH (Debian's `apt-get install -y
 * chromium`, which `.ci/run` installs when missing; Nix's in `nix develop`).
 */
export const CHROMIUM =
  process.env["TOLLGATE_CHROMIUM"] ??
  (process.env["PATH"] ?? "")
    .split(delimiter)
    .map((dir) => join(dir, "chromium"))
    .find((path) => existsSync(path)) ??
  "/usr/bin/chromium"

/** Where the browser tests save their screenshots (not committed). */
export const SCREENSHOTS = join(ROOT, ".tmp", "console-screenshots")

/**
 * Headless Chromium with no sandbox (the tests run as root in CI) and none of
 * its own network traffic: the machine has no internet, and the console must
 * not need it.
 */
export const launchChromium = async (): Promise<Browser> => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)`)
  mkdirSync(SCREENSHOTS, { recursive: true })
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  })
}
