// Operators' rebuilds end to end, from SQL through Debezium and Kafka: a per-organization rebuild
// while clients poll and rows keep changing, and a dry run after a document builder changed (new
// code deployed against an old replica). The commands run as operators run them.
import { createHash } from 'node:crypto'
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readOrganizationFiles } from '../../../projector/storage/control-file.ts'
import type { RebuildReport } from '../../../projector/rebuild/report.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { Pipeline, startProjector, TOPIC_PREFIX } from '../../support/e2e.ts'
import {
  insertApiKey,
  insertEnrollment,
  insertGroupMembership,
  insertOrganization,
  insertProvider,
  insertProviderGroup,
  insertProviderIdentifier,
  updateRow,
} from '../../support/e2e-sql.ts'
import { pollProviders } from '../../support/poller.ts'
import { repoRoot, runEntry } from '../../support/processes.ts'

interface Organization {
  id: string
  key: string
  providers: string[]
  /** Providers whose name has a suffix ("Ada Lovelace, Jr"). */
  suffixed: string[]
  /** Enrollment id -> its provider. */
  enrollments: Map<string, string>
}

let pipeline: Pipeline
const organizations: Organization[] = []

beforeAll(async () => {
  pipeline = await Pipeline.start({
    beforeConnector: async (sql) => {
      for (let n = 0; n < 2; n++) {
        const organization = await insertOrganization(sql, { name: `Operations ${n}` })
        const key = await insertApiKey(sql, organization.id)
        const group = await insertProviderGroup(sql, organization.id)
        const entry: Organization = {
          id: organization.id,
          key: key.raw,
          providers: [],
          suffixed: [],
          enrollments: new Map(),
        }
        for (let i = 0; i < 12; i++) {
          const suffix = i % 5 === 0 ? 'Jr' : null
          const provider = await insertProvider(sql, organization.id, {
            first_name: 'Ada',
            last_name: `Lovelace ${i}`,
            suffix,
          })
          entry.providers.push(provider.id)
          if (suffix !== null) entry.suffixed.push(provider.id)
          await insertProviderIdentifier(sql, organization.id, provider.id)
          if (i % 2 === 0) await insertGroupMembership(sql, organization.id, provider.id, group.id)
          if (i % 3 === 0) {
            const enrollment = await insertEnrollment(sql, organization.id, provider.id)
            entry.enrollments.set(enrollment.id, provider.id)
          }
        }
        organizations.push(entry)
      }
    },
  })
  await pipeline.caughtUp(pipeline.projector!)
}, 300_000)

afterAll(async () => {
  await pipeline?.stop()
})

function operatorEnv(): Record<string, string> {
  return {
    DATA_DIR: pipeline.dataDir,
    KAFKA_BROKERS: pipeline.kafka.brokers.join(','),
    KAFKA_GROUP_ID: 'e2e-replica',
    TOPIC_PREFIX,
    LOG_LEVEL: 'warn',
  }
}

function livePath(organizationId: string): string {
  const generation = currentGeneration(pipeline.dataDir)!
  return generation.organizationPath(
    organizationId,
    readOrganizationFiles(generation.controlPath).get(organizationId),
  )
}

function digest(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex')
}

describe('operators rebuild from the topics', { timeout: 300_000 }, () => {
  it('rebuilds one organization while clients poll and rows change: nothing lost, failed, re-sent or written elsewhere', async () => {
    const [a, b] = organizations as [Organization, Organization]
    const pollers = [a, b].map((organization) =>
      pollProviders((path) => pipeline.client(organization.key).get(path), {
        limit: 5,
        pauseMs: 100,
      }),
    )
    await pipeline.eventually('both pollers to have every provider', async () => {
      for (const poller of pollers)
        if (poller.state.failures.length > 0) throw new Error(poller.state.failures.join('\n'))
      return pollers.every((p) => p.state.sent.length >= 12) ? true : undefined
    })
    // A whole pass after that: every poller is at the end of its list, nothing left to send.
    await Promise.all(pollers.map((poller) => poller.settled()))
    for (const poller of pollers) poller.take()
    const other = livePath(b.id)
    const otherBefore = { digest: digest(other), mtimeMs: statSync(other).mtimeMs }
    const fileBefore = livePath(a.id)

    const running = runEntry(
      'projector/main.ts',
      ['--rebuild', '--org', a.id, '--json'],
      operatorEnv(),
      240_000,
    )
    // A row changes in PostgreSQL while the organization is being rebuilt: once its replay has
    // begun (its scratch folder), before it asks for the swap (no hand-over request yet).
    const rebuilds = join(pipeline.dataDir, 'rebuilds')
    const requested = () =>
      ['json', 'taking'].some((state) =>
        existsSync(join(currentGeneration(pipeline.dataDir)!.handoversDir, `${a.id}.${state}`)),
      )
    await pipeline.eventually(
      'the rebuild to be replaying the topics',
      () =>
        Promise.resolve(
          existsSync(rebuilds) && readdirSync(rebuilds).length > 0 && !requested()
            ? true
            : undefined,
        ),
      { timeoutMs: 120_000, intervalMs: 10 },
    )
    const changed = a.providers[1]!
    await updateRow(pipeline.sql, 'providers', changed, { last_name: 'Changed During Rebuild' })
    // Committed before the swap: the live file was still the one being replaced.
    expect(livePath(a.id)).toBe(fileBefore)
    const run = await running
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout) as RebuildReport
    expect(report.organizations.map((o) => o.organizationId)).toEqual([a.id])
    expect(livePath(a.id)).not.toBe(fileBefore)

    const client = pipeline.client(a.key)
    await pipeline.eventually('the change made during the rebuild to be served', async () => {
      const provider = await client.detail<{ lastName: string }>(`/providers/${changed}`)
      return provider?.lastName === 'Changed During Rebuild' ? true : undefined
    })
    // Each poller has seen what is served now (a whole pass after it), so anything re-sent is in.
    await Promise.all(pollers.map((poller) => poller.settled()))
    for (const poller of pollers) await poller.stop()

    expect(pollers[0]!.state.failures).toEqual([])
    expect(pollers[1]!.state.failures).toEqual([])
    // The rebuilt file keeps every unchanged document's updatedAt: only the change is re-sent.
    expect([...new Set(pollers[0]!.take())]).toEqual([changed])
    expect(pollers[1]!.take()).toEqual([])
    expect({ digest: digest(other), mtimeMs: statSync(other).mtimeMs }).toEqual(otherBefore)
    expect(await client.list<{ id: string }>('/providers')).toHaveLength(12)
  })

  it('a dry run with a changed document builder names exactly the documents whose response changed', async () => {
    // New code, old replica: a checkout whose provider name puts no comma before the suffix.
    const checkout = mkdtempSync(join(tmpdir(), 'replica-builder-change-'))
    try {
      for (const dir of ['projector', 'src', 'schema'])
        cpSync(join(repoRoot, dir), join(checkout, dir), { recursive: true })
      cpSync(join(repoRoot, 'package.json'), join(checkout, 'package.json'))
      symlinkSync(join(repoRoot, 'node_modules'), join(checkout, 'node_modules'))
      const builders = join(checkout, 'projector/documents/builders.ts')
      const source = readFileSync(builders, 'utf8')
      const patched = source.replace('`${name}, ${parts.suffix}`', '`${name} ${parts.suffix}`')
      expect(patched).not.toBe(source)
      writeFileSync(builders, patched)

      const run = await runEntry(
        join(checkout, 'projector/main.ts'),
        ['--rebuild', '--dry-run', '--json'],
        operatorEnv(),
        240_000,
      )
      expect(run.code, run.stderr).toBe(1)
      const report = JSON.parse(run.stdout) as RebuildReport
      expect(report.dryRun).toBe(true)
      for (const organization of organizations) {
        const resources = report.organizations.find((o) => o.organizationId === organization.id)
        expect(resources, organization.id).toBeDefined()
        const changed = Object.fromEntries(
          resources!.resources.map((r) => [r.resource, [...r.changed.ids].sort()]),
        )
        const enrollments = [...organization.enrollments]
          .filter(([, provider]) => organization.suffixed.includes(provider))
          .map(([id]) => id)
        expect(changed).toEqual({
          providers: [...organization.suffixed].sort(),
          'provider-groups': [],
          enrollments: enrollments.sort(),
          'group-enrollments': [],
          documents: [],
          expirables: [],
        })
        for (const resource of resources!.resources) {
          expect(resource.appeared.count, resource.resource).toBe(0)
          expect(resource.disappeared.count, resource.resource).toBe(0)
        }
      }
      // The human-readable table for the same run names them too, and the live files stay.
      const table = await runEntry(
        join(checkout, 'projector/main.ts'),
        ['--rebuild', '--dry-run', '--org', organizations[0]!.id],
        operatorEnv(),
        240_000,
      )
      expect(table.code).toBe(1)
      for (const id of organizations[0]!.suffixed) expect(table.stdout).toContain(id)
    } finally {
      rmSync(checkout, { recursive: true, force: true })
    }
    // The deployed code sees no difference: the dry run passes the deploy gate.
    const unchanged = await runEntry(
      'projector/main.ts',
      ['--rebuild', '--dry-run', '--json'],
      operatorEnv(),
      240_000,
    )
    expect(unchanged.code, unchanged.stdout).toBe(0)
  })

  it('a whole --rebuild beside the live projector, clients polling and rows changing: no change lost, none re-sent', async () => {
    const [a, b] = organizations as [Organization, Organization]
    const pollers = [a, b].map((organization) =>
      pollProviders((path) => pipeline.client(organization.key).get(path), {
        limit: 5,
        pauseMs: 100,
      }),
    )
    await pipeline.eventually('both pollers to have every provider', async () => {
      for (const poller of pollers)
        if (poller.state.failures.length > 0) throw new Error(poller.state.failures.join('\n'))
      return pollers.every((p) => p.state.sent.length >= a.providers.length) ? true : undefined
    })
    await Promise.all(pollers.map((poller) => poller.settled()))
    for (const poller of pollers) poller.take()
    const live = pipeline.projector!
    const before = currentGeneration(pipeline.dataDir)!.name
    const generations = join(pipeline.dataDir, 'generations')
    const existing = new Set(readdirSync(generations))

    const rebuilding = await startProjector({
      brokers: pipeline.kafka.brokers,
      dataDir: pipeline.dataDir,
      groupId: 'e2e-replica',
      logDir: pipeline.workDir,
      label: `rebuilding-projector-${Date.now()}`,
      args: ['--rebuild'],
    })
    try {
      // Its generation exists and the api still serves the old one: the rebuild has begun and
      // not swapped. Rows change in both organizations now, one of them new.
      await pipeline.eventually(
        'the rebuild to have begun its generation',
        () =>
          Promise.resolve(
            readdirSync(generations).some((name) => !existing.has(name)) ? true : undefined,
          ),
        { timeoutMs: 120_000, intervalMs: 10 },
      )
      const during = {
        a: [a.providers[2]!, a.providers[3]!],
        b: [b.providers[4]!],
      }
      for (const id of during.a) {
        await updateRow(pipeline.sql, 'providers', id, { last_name: 'During Whole Rebuild' })
      }
      await updateRow(pipeline.sql, 'providers', during.b[0]!, {
        last_name: 'During Whole Rebuild',
      })
      const added = await insertProvider(pipeline.sql, a.id, {
        first_name: 'Added',
        last_name: 'During Whole Rebuild',
      })
      during.a.push(added.id)
      expect(currentGeneration(pipeline.dataDir)!.name).toBe(before)

      // Caught up, it publishes its generation: the api moves to it. Then the old projector is
      // stopped, as README says, and the rebuilt one goes on alone.
      await pipeline.eventually(
        'the rebuilt generation to be served',
        () =>
          Promise.resolve(currentGeneration(pipeline.dataDir)!.name !== before ? true : undefined),
        { timeoutMs: 180_000, intervalMs: 100 },
      )
      await live.stop()
      pipeline.projector = rebuilding
      const after = b.providers[5]!
      await updateRow(pipeline.sql, 'providers', after, { last_name: 'After Whole Rebuild' })

      const served = async (organization: Organization, id: string) =>
        (await pipeline.client(organization.key).detail<{ lastName: string }>(`/providers/${id}`))
          ?.lastName
      await pipeline.eventually('every change to be served by the rebuilt generation', async () => {
        for (const id of during.a)
          if ((await served(a, id)) !== 'During Whole Rebuild') return undefined
        if ((await served(b, during.b[0]!)) !== 'During Whole Rebuild') return undefined
        return (await served(b, after)) === 'After Whole Rebuild' ? true : undefined
      })
      await Promise.all(pollers.map((poller) => poller.settled()))
      for (const poller of pollers) await poller.stop()

      expect(pollers[0]!.state.failures).toEqual([])
      expect(pollers[1]!.state.failures).toEqual([])
      // Each change sent once, and nothing else: the rebuilt generation kept every other stamp.
      expect(pollers[0]!.take().sort()).toEqual([...during.a].sort())
      expect(pollers[1]!.take().sort()).toEqual([during.b[0]!, after].sort())
      expect(await pipeline.client(a.key).list<{ id: string }>('/providers')).toHaveLength(
        a.providers.length + 1,
      )
    } finally {
      for (const poller of pollers) await poller.stop()
      if (pipeline.projector !== rebuilding) await rebuilding.stop()
    }
  })
})
