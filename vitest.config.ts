import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * The CI soak (test/e2e/soak.test.ts) runs beside the suite: the global setup starts it, and its test file
 * comes last, when the soak has (nearly) finished.
 */
class SoakLast extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const soak = (file: TestSpecification) => file.moduleId.endsWith("test/e2e/soak.test.ts")
    return [...sorted.filter((file) => !soak(file)), ...sorted.filter(soak)]
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    reporters: ["default"],
    globalSetup: ["test/support/soakBackground.ts"],
    // Removes the temp directories test/support/tempDirs.ts made, after each test file.
    setupFiles: ["test/support/removeTempDirs.ts"],
    sequence: { sequencer: SoakLast },
  },
})
