/** Tollgate's version: `tollgate --version` and the `service.version` of its traces. */
export const VERSION = "0.1.0"
