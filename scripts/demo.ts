// `npm run demo`: the whole product on its embedded default, with nothing but Node installed.
// Generates a realistic dataset as Debezium change events (NDJSON, the projector's file source),
// projects it into the replica, starts the api on it, and prints a working key per organization
// with ready-to-paste curl lines. Serves until interrupted.
//
// Environment: DEMO_DATA_DIR (default ./data/demo, wiped at start), PORT (8080), HOST
// (127.0.0.1), DEMO_ORGANIZATIONS (3), DEMO_PROVIDERS (1500 per organization), DEMO_SEED (1).
import closeWithGrace from 'close-with-grace'
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { buildApi } from '../api/app.ts'
import { createProjector } from '../projector/projector.ts'
import { loadApiConfig, loadDemoConfig, loadProjectorConfig } from '../src/config.ts'
import { createLogger } from '../src/log.ts'
import { writeDataset } from './dataset/generate.ts'

/** Marks a directory the demo made, and so may empty on its next run. */
const DEMO_MARKER = '.replica-demo'

/**
 * Each run starts from an empty data directory, but the demo only ever empties one it made
 * itself: DEMO_DATA_DIR pointed at real data by mistake is refused, not wiped.
 */
function startAfresh(dataDir: string): void {
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) {
    // events.ndjson: a directory made before the marker existed.
    const madeByDemo = [DEMO_MARKER, 'events.ndjson'].some((name) =>
      existsSync(join(dataDir, name)),
    )
    if (!madeByDemo) {
      throw new Error(
        `DEMO_DATA_DIR: ${dataDir} is not empty and was not made by the demo; ` +
          'the demo empties its directory on every run, so give it a new or empty one',
      )
    }
    rmSync(dataDir, { recursive: true, force: true })
  }
  mkdirSync(dataDir, { recursive: true })
  writeFileSync(join(dataDir, DEMO_MARKER), 'made by npm run demo, which empties this directory\n')
}

function say(line = ''): void {
  process.stdout.write(`${line}\n`)
}

async function main(): Promise<void> {
  const demo = loadDemoConfig(process.env)
  const dataDir = resolve(demo.dataDir)
  startAfresh(dataDir)

  const eventsFile = join(dataDir, 'events.ndjson')
  say(
    `1/3 generating ${demo.organizations} organizations x ${demo.providersPerOrganization} providers as Debezium events...`,
  )
  let t0 = Date.now()
  const dataset = await writeDataset(eventsFile, {
    organizations: demo.organizations,
    providersPerOrganization: demo.providersPerOrganization,
    seed: demo.seed,
    now: new Date(),
  })
  say(
    `    ${dataset.events.toLocaleString('en-US')} events in ${((Date.now() - t0) / 1000).toFixed(1)} s -> ${eventsFile}`,
  )

  say('2/3 projecting them into the replica (npm run projector -- --from-file ...)')
  t0 = Date.now()
  const logger = createLogger('demo', 'warn')
  const projector = createProjector({ config: loadProjectorConfig({ DATA_DIR: dataDir }), logger })
  const summary = await projector.runFile(eventsFile)
  await projector.stop()
  const seconds = (Date.now() - t0) / 1000
  say(
    `    ${summary.applied.toLocaleString('en-US')} changes applied in ${seconds.toFixed(1)} s ` +
      `(${Math.round(summary.records / seconds).toLocaleString('en-US')} events/s), ${summary.deadLettered} dead-lettered`,
  )

  say('3/3 starting the api (npm run api)')
  const apiConfig = loadApiConfig({
    DATA_DIR: dataDir,
    HOST: demo.host,
    PORT: String(demo.port),
    ADMIN_PORT: '0',
  })
  const api = await buildApi({ config: apiConfig, logger: createLogger('api', 'warn') })
  closeWithGrace({ delay: 5_000 }, async () => {
    await api.close()
  })
  const { url } = await api.listen()
  const base = `${url}/api/v1`

  say()
  say(`The replica's api is serving ${base} (Ctrl-C to stop). Data: ${dataDir}`)
  for (const org of dataset.organizations) {
    const key = org.keys.find((k) => k.scopes.includes('providers:read:sensitive')) ?? org.keys[0]
    if (key === undefined) continue
    say()
    say(`${org.name} (${org.id})`)
    say(`  API key (all scopes): ${key.rawKey}`)
    const auth = `-H "Authorization: Bearer ${key.rawKey}"`
    say(`  curl ${auth} "${base}/providers?limit=5"`)
    say(`  curl ${auth} "${base}/expirables?within_days=30&limit=5"`)
    say(`  curl ${auth} "${base}/enrollments?status=approved&limit=5"`)
  }
  say()
  say(`OpenAPI document: curl ${base}/openapi.json`)
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error)
  process.stderr.write(`demo: ${message}\n`)
  process.exitCode = 1
})
