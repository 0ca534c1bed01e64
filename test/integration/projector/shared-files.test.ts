// Organizations in shared files (ORGANIZATION_FILES), as a user runs them: the projector applies a
// file of events into a generation of shared files, and the api serves each key its
// organization's documents from them over HTTP, and nothing of the organizations beside it; a
// live projector on a real Kafka broker keeps them, a rebuild's dry run compares each
// organization of a shared file alone, and `--rebuild --org` rebuilds an organization's whole
// shared file and hands it over while the api serves it.
import Database from 'better-sqlite3'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createProjector, type Projector } from '../../../projector/projector.ts'
import type { RebuildReport } from '../../../projector/rebuild/report.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { readOrganizationFiles } from '../../../projector/storage/control-file.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { sharedFileOf } from '../../../src/organization-files.ts'
import { kafkaClient, startKafka, type StartedKafka } from '../../harness/kafka.ts'
import { startApi, type RunningApi } from '../api/server.ts'
import {
  groupRow,
  membershipRow,
  ORG_A,
  ORG_B,
  organizationRow,
  providerRow,
  record,
  uuid,
} from '../../support/debezium.ts'
import { runEntry } from '../../support/processes.ts'

const dirs: string[] = []
let api: RunningApi | undefined
afterAll(async () => {
  await api?.close()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

const ORGANIZATIONS = 6
const SHARED_FILES = 2
const organization = (n: number) => uuid(0x7000 + n)
const provider = (n: number) => uuid(0x7100 + n)
const group = (n: number) => uuid(0x7200 + n)
const key = (n: number) => `shared-files-key-${n}`

/** The api key `raw` of the organization `org`, as its change event. */
function apiKeyEvent(id: string, org: string, raw: string): ReturnType<typeof record> {
  return record({
    table: 'api_keys',
    op: 'r',
    after: {
      id,
      organization_id: org,
      name: 'test key',
      key_hash: createHash('sha256').update(raw).digest('hex'),
      scopes: ['providers:read', 'groups:read'],
      created_at: organizationRow(org).created_at,
      expires_at: null,
      revoked_at: null,
    },
  })
}

/** Each organization: its key, a provider, a group, and its provider's membership in the next
 * organization's group (PostgreSQL's foreign keys allow it; the replica shows none of it). */
function eventsOf(n: number): unknown[] {
  const org = organization(n)
  const next = (n + 1) % ORGANIZATIONS
  return [
    record({ table: 'organizations', op: 'r', after: organizationRow(org) }),
    apiKeyEvent(uuid(0x7300 + n), org, key(n)),
    record({ table: 'providers', op: 'r', after: providerRow(provider(n), org) }),
    record({ table: 'provider_groups', op: 'r', after: groupRow(group(n), org) }),
    record({
      table: 'group_memberships',
      op: 'r',
      after: membershipRow(uuid(0x7400 + n), provider(n), group(next), org),
    }),
  ]
}

describe('organizations in shared files', () => {
  it('are loaded into ORGANIZATION_FILES files, and each key is served its own organization only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'replica-shared-files-'))
    dirs.push(dir)
    const file = join(dir, 'events.ndjson')
    // Interleaved, as a snapshot of several tables arrives.
    const events = Array.from({ length: ORGANIZATIONS }, (_, n) => eventsOf(n))
    const interleaved = events[0]!.flatMap((_, i) => events.map((e) => e[i]))
    writeFileSync(file, interleaved.map((e) => JSON.stringify(e)).join('\n') + '\n')
    const dataDir = join(dir, 'data')
    const run = await runEntry('projector/main.ts', ['--from-file', file], {
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      ORGANIZATION_FILES: String(SHARED_FILES),
    })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)

    const generation = currentGeneration(dataDir)!
    const files = readdirSync(generation.organizationsDir).filter((f) => f.endsWith('.db'))
    const expected = new Set(
      Array.from({ length: ORGANIZATIONS }, (_, n) => sharedFileOf(organization(n), SHARED_FILES)),
    )
    expect(files.sort()).toEqual([...expected].sort())
    // The hash spreads six organizations over both files, each holding several.
    expect(expected.size).toBe(SHARED_FILES)

    api = await startApi(dataDir)
    for (let n = 0; n < ORGANIZATIONS; n++) {
      const providers = (await (await api.get('/providers', key(n))).json()) as {
        data: { id: string; groupMemberships: unknown[] }[]
      }
      expect(providers.data.map((p) => p.id)).toEqual([provider(n)])
      expect(providers.data[0]!.groupMemberships).toEqual([])
      const groups = (await (await api.get('/provider-groups', key(n))).json()) as {
        data: { id: string }[]
      }
      expect(groups.data.map((g) => g.id)).toEqual([group(n)])
      // Another organization's provider, in the same file or not: not found.
      const other = (n + 1) % ORGANIZATIONS
      expect((await api.get(`/providers/${provider(other)}`, key(n))).status).toBe(404)
      expect((await api.get(`/providers/${provider(n)}`, key(n))).status).toBe(200)
    }
  }, 120_000)
})

describe('ORGANIZATION_FILES=auto, the default', () => {
  /** A file of `count` organizations, each with a provider, for `--from-file`. */
  function organizationsFile(dir: string, count: number): string {
    const file = join(dir, `events-${count}.ndjson`)
    const lines: string[] = []
    for (let n = 0; n < count; n++) {
      const org = uuid(0xa000 + n)
      lines.push(
        JSON.stringify(record({ table: 'organizations', op: 'r', after: organizationRow(org) })),
      )
      lines.push(
        JSON.stringify(
          record({ table: 'providers', op: 'r', after: providerRow(uuid(0xb000 + n), org) }),
        ),
      )
    }
    writeFileSync(file, `${lines.join('\n')}\n`)
    return file
  }

  it.each([
    [100, 100, 'a file each, up to 100 organizations'],
    [101, 4, 'shared files past 100, about 30 organizations to a file'],
  ])('%i organizations load into %i files: %s', async (count, files) => {
    const dir = mkdtempSync(join(tmpdir(), 'replica-auto-files-'))
    dirs.push(dir)
    const dataDir = join(dir, 'data')
    // No ORGANIZATION_FILES: the default.
    const run = await runEntry(
      'projector/main.ts',
      ['--from-file', organizationsFile(dir, count)],
      {
        DATA_DIR: dataDir,
        LOG_LEVEL: 'info',
      },
    )
    expect(run.code, run.stderr).toBe(0)
    const generation = currentGeneration(dataDir)!
    const names = readdirSync(generation.organizationsDir).filter((f) => f.endsWith('.db'))
    expect(names).toHaveLength(files)
    expect(names.every((name) => name.startsWith('shared-'))).toBe(count > 100)
    expect(run.stdout + run.stderr).toContain(`"organizationFiles":${count > 100 ? files : 0}`)
  })
})

describe(
  'a live generation of shared files, and the rebuilds built aside',
  { timeout: 300_000 },
  () => {
    let kafka: StartedKafka | undefined
    let live: Projector | undefined
    let liveDir: string
    const LIVE_ORGS = [ORG_A, ORG_B]
    const PROVIDERS = 5
    const liveProvider = (o: number, i: number) => uuid(0x9000 + o * 100 + i)
    const liveKey = (o: number) => `shared-files-live-key-${o}`
    let liveApi: RunningApi | undefined

    const env = (): Record<string, string> => ({
      DATA_DIR: liveDir,
      KAFKA_BROKERS: kafka!.brokers.join(','),
      KAFKA_GROUP_ID: 'it-shared-files',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'warn',
      ORGANIZATION_FILES: '1',
    })

    beforeAll(async () => {
      kafka = await startKafka()
      liveDir = mkdtempSync(join(tmpdir(), 'replica-shared-live-'))
      dirs.push(liveDir)
      const producer = kafkaClient(kafka.brokers).producer()
      await producer.connect()
      let lsn = 100
      for (const [o, org] of LIVE_ORGS.entries()) {
        const records = [
          record({ table: 'organizations', op: 'r', after: organizationRow(org) }),
          apiKeyEvent(uuid(0x9800 + o), org, liveKey(o)),
        ]
        for (let i = 0; i < PROVIDERS; i++) {
          records.push(
            record({
              table: 'providers',
              op: 'r',
              after: providerRow(liveProvider(o, i), org),
              lsn: lsn++,
            }),
          )
        }
        for (const r of records) {
          await producer.send({
            topic: r.topic,
            messages: [{ key: JSON.stringify(r.key), value: JSON.stringify(r.value) }],
          })
        }
      }
      await producer.disconnect()
      live = createProjector({
        config: loadProjectorConfig(env()),
        logger: pino({ level: 'silent' }),
      })
      await live.startKafka()
      const deadline = Date.now() + 60_000
      while ((await fetch(`${live.adminAddress()!}/readyz`)).status !== 200) {
        if (Date.now() > deadline) throw new Error('the live projector did not catch up')
        await sleep(200)
      }
    })

    afterAll(async () => {
      await liveApi?.close()
      await live?.stop()
      await kafka?.stop()
    })

    const rebuild = (args: string[]) =>
      runEntry('projector/main.ts', ['--rebuild', ...args], env(), 180_000)

    it('keeps both organizations in the one shared file', () => {
      const generation = currentGeneration(liveDir)!
      expect(readdirSync(generation.organizationsDir).filter((f) => f.endsWith('.db'))).toEqual([
        'shared-0000.db',
      ])
    })

    it('a dry run compares each organization alone, and finds a document changed behind its back', async () => {
      const faithful = await rebuild(['--dry-run', '--json'])
      expect(faithful.code).toBe(0)
      const report = JSON.parse(faithful.stdout) as RebuildReport
      expect(report).toMatchObject({ dryRun: true, changed: false })
      expect(report.organizations.map((o) => o.organizationId).sort()).toEqual([ORG_A, ORG_B])
      for (const organization of report.organizations) {
        const providers = organization.resources.find((r) => r.resource === 'providers')!
        expect(providers.equal).toBe(PROVIDERS)
      }

      // One of A's documents altered in the shared file: A's report says so, B's does not.
      const generation = currentGeneration(liveDir)!
      const db = new Database(generation.sharedPath('shared-0000.db'))
      db.prepare(
        `UPDATE doc_providers SET body = replace(body, 'Lovelace', 'Byron') WHERE id = ?`,
      ).run(liveProvider(0, 0))
      db.close()
      const drifted = await rebuild(['--dry-run', '--json'])
      expect(drifted.code).toBe(1)
      const changed = (JSON.parse(drifted.stdout) as RebuildReport).organizations.map((o) => [
        o.organizationId,
        o.resources.find((r) => r.resource === 'providers')!.changed.ids,
      ])
      expect(changed.sort()).toEqual([
        [ORG_A, [liveProvider(0, 0)]],
        [ORG_B, []],
      ])
    })

    it("--org rebuilds the organization's whole shared file: its altered document mended, every other document's stamp kept, served throughout, and the next change applied to the new file", async () => {
      const generation = currentGeneration(liveDir)!
      // Polled every 50 ms: the default 120 requests a minute per key would answer 429.
      liveApi = await startApi(liveDir, {
        env: { RATE_LIMIT_PER_KEY: '1000000', RATE_LIMIT_PER_ORGANIZATION: '1000000' },
      })
      const served = async (o: number) => {
        const response = await liveApi!.get('/providers?limit=100', liveKey(o))
        expect(response.status).toBe(200)
        const body = (await response.json()) as { data: { id: string; updatedAt: string }[] }
        return new Map(body.data.map((p) => [p.id, p]))
      }
      const before = [await served(0), await served(1)]
      expect(JSON.stringify(before[0]!.get(liveProvider(0, 0)))).toContain('Byron')

      // Pollers of both organizations throughout the rebuild and its swap: none may fail.
      let polling = true
      const failures: string[] = []
      const pollers = [0, 1].map(async (o) => {
        while (polling) {
          const response = await liveApi!.get('/providers?limit=100', liveKey(o))
          if (response.status !== 200) failures.push(`${o}: ${response.status}`)
          await response.arrayBuffer()
          await sleep(50)
        }
      })
      const run = await rebuild(['--org', ORG_A, '--json'])
      polling = false
      await Promise.all(pollers)
      expect(run.code, run.stderr).toBe(0)
      expect(failures).toEqual([])

      // Both organizations of the file rebuilt, and reported; the file's key names the new file.
      const report = JSON.parse(run.stdout) as RebuildReport
      expect(report.organizations.map((o) => o.organizationId).sort()).toEqual([ORG_A, ORG_B])
      const file = report.organizations[0]!.swapped?.file
      expect(file).toMatch(/^shared-0000\.r\d+\.db$/)
      for (const o of report.organizations) expect(o.swapped?.file).toBe(file)
      expect(readOrganizationFiles(generation.controlPath).get('shared-0000.db')).toBe(file)

      // A's altered provider is served as the topics have it, with a stamp after every one a
      // poller holds; every other document of A and B keeps its stamp (pollers are not sent it).
      const after = [await served(0), await served(1)]
      const mended = after[0]!.get(liveProvider(0, 0))!
      expect(JSON.stringify(mended)).toContain('Lovelace')
      for (const [o, providers] of before.entries()) {
        expect([...after[o]!.keys()].sort()).toEqual([...providers.keys()].sort())
        for (const [id, provider] of providers) {
          if (id === liveProvider(0, 0)) {
            expect(after[o]!.get(id)!.updatedAt > provider.updatedAt).toBe(true)
          } else {
            expect(after[o]!.get(id)).toEqual(provider)
          }
        }
      }

      // The live projector goes on in the new file: B's next provider is served from it.
      const producer = kafkaClient(kafka!.brokers).producer()
      await producer.connect()
      const next = record({
        table: 'providers',
        op: 'c',
        after: providerRow(liveProvider(1, PROVIDERS), ORG_B),
        lsn: 10_000,
      })
      await producer.send({
        topic: next.topic,
        messages: [{ key: JSON.stringify(next.key), value: JSON.stringify(next.value) }],
      })
      await producer.disconnect()
      const deadline = Date.now() + 30_000
      while (!(await served(1)).has(liveProvider(1, PROVIDERS))) {
        if (Date.now() > deadline) throw new Error("B's next provider was not served")
        await sleep(100)
      }
      const inNewFile = new Database(generation.sharedPath(file!), { readonly: true })
      expect(
        inNewFile
          .prepare('SELECT count(*) FROM doc_providers WHERE id = ?')
          .pluck()
          .get(liveProvider(1, PROVIDERS)),
      ).toBe(1)
      inNewFile.close()

      // And nothing is left to mend.
      const check = await rebuild(['--dry-run', '--org', ORG_B, '--json'])
      expect(check.code, check.stderr).toBe(0)
      expect((JSON.parse(check.stdout) as RebuildReport).changed).toBe(false)
    })
  },
)
