// Downloads every Maven bundle the harness uses, so that tests find them in the cache (CI runs
// this before the tests, keeping download time out of test timeouts).
// Run: npx tsx test/harness/prefetch.ts
import { requireJava, resolveBundle, versions, type Bundle } from './maven.ts'

async function main(): Promise<void> {
  requireJava()
  for (const bundle of ['kafka', 'connect', 'debezium'] satisfies Bundle[]) {
    const started = Date.now()
    const dir = await resolveBundle(bundle)
    console.log(`${bundle}: ${dir} (${((Date.now() - started) / 1000).toFixed(1)}s)`)
  }
  console.log(`Kafka ${versions.kafka}, Debezium ${versions.debezium}`)
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
