// `npm run verify -- --repair` over a replica whose organizations share a file
// (ORGANIZATION_FILES=1), against the real pipeline: PostgreSQL -> Debezium -> Kafka -> the
// projector process -> one shared SQLite file, and the api process serving it. A document of A is
// changed behind the projector's back; the repair rebuilds the shared file whole from the topics
// and hands it over, while pollers of A and B run: none of their requests fails, A's poller is
// sent its mended document and nothing else again, B's is sent nothing, and every other
// document of both keeps its stamp.
import Database from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readOrganizationFiles } from '../../../projector/storage/control-file.ts'
import type { VerifyReport } from '../../../projector/verify/report.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { Pipeline, TOPIC_PREFIX } from '../../support/e2e.ts'
import {
  insertApiKey,
  insertOrganization,
  insertProvider,
  type Sql,
} from '../../support/e2e-sql.ts'
import { pollProviders } from '../../support/poller.ts'
import { runEntry } from '../../support/processes.ts'

interface Seeded {
  id: string
  key: string
  providers: string[]
}

const SHARED = 'shared-0000.db'

async function seed(sql: Sql, name: string): Promise<Seeded> {
  const organization = await insertOrganization(sql, { name })
  const key = await insertApiKey(sql, organization.id)
  const providers: string[] = []
  for (let i = 0; i < 6; i++) {
    providers.push((await insertProvider(sql, organization.id, { first_name: `Ada${i}` })).id)
  }
  return { id: organization.id, key: key.raw, providers }
}

describe('verify --repair over shared files', { timeout: 300_000 }, () => {
  let pipeline: Pipeline
  let a: Seeded
  let b: Seeded

  beforeAll(async () => {
    pipeline = await Pipeline.start({
      beforeConnector: async (sql) => {
        a = await seed(sql, 'Shared A')
        b = await seed(sql, 'Shared B')
        await sql.query(`
          CREATE ROLE replica_verify LOGIN PASSWORD 'verify-secret';
          GRANT CONNECT ON DATABASE product TO replica_verify;
          GRANT USAGE ON SCHEMA public TO replica_verify;
          GRANT SELECT ON ALL TABLES IN SCHEMA public TO replica_verify;
        `)
      },
      projectorEnv: { ORGANIZATION_FILES: '1' },
    })
    await pipeline.caughtUp(pipeline.projector!)
  }, 600_000)

  afterAll(async () => {
    await pipeline?.stop()
  })

  function servedPath(): string {
    const g = currentGeneration(pipeline.dataDir)!
    return g.filePath(SHARED, readOrganizationFiles(g.controlPath).get(SHARED))
  }

  /** id -> updatedAt of every provider document in the shared file, both organizations'. */
  function stamps(): Map<string, string> {
    const db = new Database(servedPath(), { readonly: true, fileMustExist: true })
    try {
      const rows = db.prepare('SELECT id, updated_at FROM doc_providers').all() as Array<{
        id: string
        updated_at: string
      }>
      return new Map(rows.map((r) => [r.id, r.updated_at]))
    } finally {
      db.close()
    }
  }

  async function verify(args: string[]): Promise<{ code: number | null; report: VerifyReport }> {
    const run = await runEntry(
      'projector/verify/main.ts',
      ['--json', ...args],
      {
        DATA_DIR: pipeline.dataDir,
        KAFKA_BROKERS: pipeline.kafka.brokers.join(','),
        KAFKA_GROUP_ID: 'e2e-replica',
        TOPIC_PREFIX,
        DATABASE_URL: `postgres://replica_verify:verify-secret@127.0.0.1:${pipeline.postgres.port}/${pipeline.postgres.database}`,
        LOG_LEVEL: 'warn',
        VERIFY_CATCH_UP_TIMEOUT_MS: '60000',
      },
      240_000,
    )
    if (run.code === 2) throw new Error(run.stderr)
    return { code: run.code, report: JSON.parse(run.stdout) as VerifyReport }
  }

  it("mends A's document by rebuilding the shared file whole, while both are polled: nothing failed, B sent nothing, every other stamp kept", async () => {
    const { providers } = a
    expect(readOrganizationFiles(currentGeneration(pipeline.dataDir)!.controlPath).size).toBe(0)
    const db = new Database(servedPath())
    try {
      // The served bodies change (both variants: the pollers' keys have every scope), their
      // stored hashes do not: what the api serves is what counts.
      db.prepare(
        `UPDATE doc_providers SET body = replace(body, 'Ada0', 'Eve0'),
                sensitive_body = replace(sensitive_body, 'Ada0', 'Eve0') WHERE id = ?`,
      ).run(providers[0])
    } finally {
      db.close()
    }
    const before = stamps()

    const pollers = [a, b].map((organization) =>
      pollProviders((path) => pipeline.client(organization.key).get(path), {
        limit: 5,
        pauseMs: 100,
      }),
    )
    await Promise.all(pollers.map((poller) => poller.settled()))
    for (const poller of pollers) poller.take()

    const found = await verify([])
    expect(found.code).toBe(1)
    expect(found.report.organizations.map((o) => [o.organizationId, o.status]).sort()).toEqual(
      [
        [a.id, 'drifted'],
        [b.id, 'equal'],
      ].sort(),
    )

    const { code, report } = await verify(['--repair'])
    expect(code).toBe(0)
    expect(report.repair?.rebuilt).toEqual([a.id])
    expect(report.repair?.after.drift).toBe(false)
    // The shared file's key now names the rebuilt file.
    expect(
      readOrganizationFiles(currentGeneration(pipeline.dataDir)!.controlPath).get(SHARED),
    ).toMatch(/^shared-0000\.r\d+\.db$/)

    await Promise.all(pollers.map((poller) => poller.settled()))
    const [sentA, sentB] = pollers.map((poller) => poller.take())
    for (const poller of pollers) {
      expect(poller.state.failures).toEqual([])
      await poller.stop()
    }
    expect(sentA).toEqual([providers[0]])
    expect(sentB).toEqual([])
    const after = stamps()
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort())
    for (const [id, stamp] of before) {
      if (id === providers[0]) expect(after.get(id)! > stamp).toBe(true)
      else expect(after.get(id), id).toBe(stamp)
    }
    const mended = await pipeline.client(a.key).get(`/providers/${providers[0]}`)
    expect(mended.status).toBe(200)
    expect(mended.text).toContain('Ada0')

    expect((await verify([])).report.drift).toBe(false)
  })
})
