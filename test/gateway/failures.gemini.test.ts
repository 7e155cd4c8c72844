import { failureTable } from "./failureTable.js"

/** The failure table on gemini targets (issue #34), on both stores. */
failureTable("gemini", "memory")
failureTable("gemini", "redis")
