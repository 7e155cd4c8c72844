import { failureTable } from "./failureTable.js"

/** The failure table on azure targets (issue #34), on both stores. */
failureTable("azure", "memory")
failureTable("azure", "redis")
