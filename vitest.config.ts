import { defineConfig } from 'vitest/config'

// Two projects: `unit` is the pure core (no processes, no network); `integration` runs the real
// components (Kafka, PostgreSQL, Debezium, Redis, the two processes over HTTP) and is slower.
export default defineConfig({
  test: {
    // The JSON report lets .ci/run end with a plain 'N passed, N failed' line.
    reporters: ['default', ['json', { outputFile: '.cache/vitest-report.json' }]],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // Some unit tests drive real SQLite files through many small commits, each synced to
          // disk (synchronous=FULL): 2-3 s alone, up to 6.7 s beside the integration project on
          // two cores, past vitest's 5 s default.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
})
