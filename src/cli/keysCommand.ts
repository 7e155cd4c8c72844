/**
 * `tollgate keys create --tenant NAME [--id ID]`: makes a client key. The secret is printed
 * once; the config stores only its SHA-256.
 */
import { Console, Option } from "effect"
import { documented } from "./help.js"
import { Command, Flag } from "effect/cli"
import { stringify } from "yaml"
import { formatPath } from "../config/problems.js"
import { generateKey, generateKeyId, hashKey } from "../keys/keys.js"
import { nameOption } from "./options.js"

/** The YAML list entry for a tenant's `keys` (`- id: ID` / `  sha256: HEX`). */
export const keyEntryYaml = (id: string, sha256: string): string => stringify([{ id, sha256 }]).trimEnd()

/** The full output of `keys create`: the secret once, then the entry to paste. */
export const keyCreatedText = (tenant: string, id: string, secret: string): string =>
  [
    `secret (shown only once; give it to the client): ${secret}`,
    "(On a running gateway, POST /admin/keys creates a key that works at once, without a restart.)",
    "",
    `Add this entry under ${formatPath(["tenants", tenant, "keys"])} in the config, then reload Tollgate (kill -HUP, or POST /admin/reload):`,
    "",
    keyEntryYaml(id, hashKey(secret)),
  ].join("\n")

const tenantOption = nameOption(
  "tenant",
  "NAME",
  "Tenant that will own the key (a name under tenants in the config).",
)

const idOption = nameOption(
  "id",
  "ID",
  "Key id shown in usage records. Default: key- and 8 random characters.",
).pipe(Flag.optional)

/** Prints a new secret (`tg_` + 32 base62 characters) and its `keys` entry; reads no config. */
export const createCommand = Command.make(
  "create",
  { tenant: tenantOption, id: idOption },
  ({ tenant, id }) => Console.log(keyCreatedText(tenant, Option.getOrElse(id, generateKeyId), generateKey())),
).pipe(
  Command.withDescription(
    "Make a new client key: prints the secret once and the YAML entry (id and sha256) to paste under the tenant's keys.",
  ),
  documented({
    command: "tollgate keys create --tenant acme --id ci",
    description: "A key for tenant acme, named ci in usage records",
  }),
)

/** `tollgate keys …`. */
export const keysCommand = Command.make("keys").pipe(
  Command.withDescription("Manage client keys."),
  Command.withSubcommands([createCommand]),
)
