import { failureTable } from "./failureTable.js"

/** The failure table on bedrock targets (issue #34), on both stores. */
failureTable("bedrock", "memory")
failureTable("bedrock", "redis")
