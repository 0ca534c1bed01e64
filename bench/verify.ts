// `npm run bench:verify`: how fast `verify` reads PostgreSQL and builds the documents it implies,
// and whether its memory stays bounded as the database grows (keyset pages, one snapshot).
//
//   npm run bench:verify [-- --providers 50000] [--organizations 20]
//
// A real PostgreSQL and Kafka broker from the test harness; the product tables are filled by SQL
// (each provider with an identifier and a document), and `verify` runs as users run it against an
// empty replica (every document is then "missing in replica": the whole build and comparison
// happen, nothing is repaired). It runs twice: with half the providers, then all of them, so
// that the peak RSS of the two runs can be compared (bounded memory: about the same).
// Ends with one line of JSON.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pino from 'pino'
import { createApplier } from '../projector/lanes/apply.ts'
import { isolatedChildEnv } from '../src/config.ts'
import { ensureCurrentGeneration } from '../src/layout.ts'
import { startKafka } from '../test/harness/kafka.ts'
import { repoRoot } from '../test/harness/paths.ts'
import { startPostgres, type StartedPostgres } from '../test/harness/postgres.ts'

const { values } = parseArgs({
  options: {
    providers: { type: 'string', default: '50000' },
    organizations: { type: 'string', default: '20' },
  },
})
const providers = Number(values.providers)
const organizations = Number(values.organizations)

function log(line: string): void {
  process.stderr.write(`${line}\n`)
}

/** Adds `count` providers spread over the organizations, each with an identifier and a document. */
async function addProviders(pg: StartedPostgres, count: number, from: number): Promise<void> {
  await pg.query(
    `WITH orgs AS (SELECT array_agg(id ORDER BY id) AS ids FROM organizations),
     p AS (
       INSERT INTO providers (id, organization_id, first_name, last_name, npi, languages,
                              date_of_birth, start_date, created_at, updated_at)
       SELECT gen_random_uuid(), orgs.ids[1 + i % array_length(orgs.ids, 1)], 'First' || i,
              'Last' || i, '1234567893', ARRAY['en','es'], date '1980-01-01' + (i % 9000),
              date '2020-01-01' + (i % 1000), now(), now()
         FROM generate_series($1::int, $2::int) AS i, orgs
       RETURNING id, organization_id
     ),
     ident AS (
       INSERT INTO provider_identifiers (id, organization_id, provider_id, type, value, issued_on,
                                         expires_on, metadata)
       SELECT gen_random_uuid(), organization_id, id, 'state_license', 'LIC', date '2019-01-01',
              date '2030-01-01', '{"state": "CA", "status": "active"}'
         FROM p
     )
     INSERT INTO documents (id, organization_id, provider_id, type, file_name, content_type,
                            size_bytes, expires_on, uploaded_at, storage_key)
     SELECT gen_random_uuid(), organization_id, id, 'license', 'license.pdf', 'application/pdf',
            123456, date '2031-01-01', now(), 's3://bench/' || id
       FROM p`,
    [from, from + count - 1],
  )
  await pg.query('ANALYZE')
}

/** Runs verify as users run it, under /usr/bin/time for its peak RSS. */
function runVerify(
  env: Record<string, string>,
): Promise<{ seconds: number; peakRssMb: number; rows: number; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      '/usr/bin/time',
      ['-f', '%M', process.execPath, '--import', 'tsx', 'projector/verify/main.ts', '--json'],
      { cwd: repoRoot, env: isolatedChildEnv(process.env, env), stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('error', reject)
    child.on('close', (code) => {
      const lines = stderr.trim().split('\n')
      const peakKb = Number(lines.at(-1))
      try {
        const report = JSON.parse(stdout) as { rowsRead: number; seconds: number }
        resolve({
          seconds: report.seconds,
          peakRssMb: Math.round(peakKb / 1024),
          rows: report.rowsRead,
          code,
        })
      } catch {
        reject(new Error(`verify exited ${code}: ${stderr.slice(-2000)}`))
      }
    })
  })
}

const pg = await startPostgres()
const kafka = await startKafka()
const dataDir = mkdtempSync(join(tmpdir(), 'bench-verify-'))
try {
  await pg.query(
    `INSERT INTO organizations (id, name, api_enabled, billing_status)
     SELECT gen_random_uuid(), 'Org ' || i, true, 'active' FROM generate_series(1, $1::int) AS i`,
    [organizations],
  )
  // An empty replica: a generation with its control.db, and no organization yet.
  createApplier({
    generation: ensureCurrentGeneration(dataDir),
    topicPrefix: 'product',
    logger: pino({ level: 'silent' }),
    offsetGuard: true,
    walCheckpointBytes: 16 * 1024 * 1024,
  }).close()
  const env = {
    DATA_DIR: dataDir,
    DATABASE_URL: pg.url,
    KAFKA_BROKERS: kafka.brokers.join(','),
    LOG_LEVEL: 'warn',
  }
  const half = Math.floor(providers / 2)
  await addProviders(pg, half, 1)
  log(`verify over ${half} providers (x3 rows) in ${organizations} organizations...`)
  const small = await runVerify(env)
  log(`  ${small.rows} rows in ${small.seconds} s, peak RSS ${small.peakRssMb} MB`)
  await addProviders(pg, providers - half, half + 1)
  log(`verify over ${providers} providers (x3 rows)...`)
  const large = await runVerify(env)
  log(`  ${large.rows} rows in ${large.seconds} s, peak RSS ${large.peakRssMb} MB`)
  const rate = (r: typeof small) => Math.round(r.rows / r.seconds)
  process.stdout.write(
    `${JSON.stringify({
      rows: [small.rows, large.rows],
      rowsPerSecond: [rate(small), rate(large)],
      peakRssMb: [small.peakRssMb, large.peakRssMb],
    })}\n`,
  )
} finally {
  rmSync(dataDir, { recursive: true, force: true })
  await kafka.stop()
  await pg.stop()
}
