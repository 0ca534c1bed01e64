// Operators' rebuilds that build aside, against a real Kafka broker, a live projector and the api
// over HTTP: `--rebuild --dry-run` and `--rebuild --org`, run as the command users run.
import Database from 'better-sqlite3'
import type { Producer } from 'kafkajs'
import { createHash } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs'
import { spawn } from 'node:child_process'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createProjector, type Projector } from '../../../projector/projector.ts'
import { readOrganizationFiles } from '../../../projector/storage/control-file.ts'
import { acquireRebuildLock } from '../../../projector/rebuild/lock.ts'
import type { RebuildReport } from '../../../projector/rebuild/report.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import {
  currentGeneration,
  prepareGeneration,
  publishGeneration,
  type Generation,
} from '../../../src/layout.ts'
import { kafkaClient, startKafka, type StartedKafka } from '../../harness/kafka.ts'
import { ORG_A, ORG_B, organizationRow, providerRow, record, uuid } from '../../support/debezium.ts'
import { pollProviders, type Poller } from '../../support/poller.ts'
import { repoRoot, runEntry } from '../../support/processes.ts'
import { startApi, type RunningApi } from '../api/server.ts'

const PROVIDERS = 40
const KEYS: Record<string, string> = {
  [ORG_A]: 'rk_org_a_key_for_rebuild_tests',
  [ORG_B]: 'rk_org_b_key_for_rebuild_tests',
}

let kafka: StartedKafka
let producer: Producer
let dataDir: string
let live: Projector
let api: RunningApi
let lsn = 1_000

beforeAll(async () => {
  kafka = await startKafka()
  producer = kafkaClient(kafka.brokers).producer()
  await producer.connect()
  dataDir = mkdtempSync(join(tmpdir(), 'replica-rebuild-org-'))
  const records = []
  for (const [n, organizationId] of [ORG_A, ORG_B].entries()) {
    records.push(
      record({ table: 'organizations', op: 'r', after: organizationRow(organizationId) }),
    )
    records.push(
      record({
        table: 'api_keys',
        op: 'r',
        after: {
          id: uuid(900 + n),
          organization_id: organizationId,
          name: 'test key',
          key_hash: createHash('sha256').update(KEYS[organizationId]!).digest('hex'),
          scopes: ['providers:read'],
          created_at: organizationRow(organizationId).created_at,
          expires_at: null,
          revoked_at: null,
        },
      }),
    )
    for (let i = 0; i < PROVIDERS; i++) {
      const id = uuid(n * 100 + i + 1)
      records.push(
        record({ table: 'providers', op: 'r', after: providerRow(id, organizationId), lsn: lsn++ }),
      )
    }
  }
  await produce(records)
  live = createProjector({ config: projectorConfig(), logger: pino({ level: 'silent' }) })
  await live.startKafka()
  await eventually(async () =>
    (await fetch(`${live.adminAddress()!}/readyz`)).status === 200 ? true : undefined,
  )
  // Pollers here ask far more often than real clients: no rate limit in the way.
  api = await startApi(dataDir, {
    env: { RATE_LIMIT_PER_KEY: '1000000', RATE_LIMIT_PER_ORGANIZATION: '1000000' },
  })
})

afterAll(async () => {
  await api?.close()
  await live?.stop()
  await producer?.disconnect()
  await kafka?.stop()
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
})

function projectorEnv(): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    KAFKA_BROKERS: kafka.brokers.join(','),
    KAFKA_GROUP_ID: 'it-rebuild-org',
    ADMIN_PORT: '0',
    LOG_LEVEL: 'warn',
  }
}

function projectorConfig() {
  return loadProjectorConfig(projectorEnv())
}

async function produce(records: ReturnType<typeof record>[]): Promise<void> {
  for (const r of records) {
    await producer.send({
      topic: r.topic,
      messages: [{ key: JSON.stringify(r.key), value: JSON.stringify(r.value) }],
    })
  }
}

async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await sleep(intervalMs)
  }
}

function generation(): Generation {
  return currentGeneration(dataDir)!
}

function livePath(organizationId: string): string {
  const g = generation()
  return g.organizationPath(
    organizationId,
    readOrganizationFiles(g.controlPath).get(organizationId),
  )
}

function fileDigest(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex')
}

/** Every provider document of an organization's live file: id -> [updatedAt, hash]. */
function providerDocs(organizationId: string): Record<string, [string, string]> {
  const db = new Database(livePath(organizationId), { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare('SELECT id, updated_at, hash FROM doc_providers').all() as Array<{
      id: string
      updated_at: string
      hash: string
    }>
    return Object.fromEntries(rows.map((r) => [r.id, [r.updated_at, r.hash]]))
  } finally {
    db.close()
  }
}

function rebuild(args: string[]) {
  return runEntry('projector/main.ts', ['--rebuild', ...args], projectorEnv(), 180_000)
}

/** The recommended client loop on one organization's providers (test/support/poller.ts). */
function pollOrganization(organizationId: string): Poller {
  return pollProviders(
    async (path) => {
      const response = await api.get(path, KEYS[organizationId])
      return { status: response.status, text: await response.text() }
    },
    { limit: 25, pauseMs: 50 },
  )
}

describe('rebuilds built aside', { timeout: 300_000 }, () => {
  it('a dry run reports nothing on a faithful replica, exit 0, and swaps nothing', async () => {
    const before = fileDigest(livePath(ORG_A))
    const run = await rebuild(['--dry-run', '--json'])
    expect(run.stderr).not.toMatch(/"level":(50|60)/)
    expect(run.code).toBe(0)
    const report = JSON.parse(run.stdout) as RebuildReport
    expect(report).toMatchObject({ dryRun: true, changed: false })
    expect(report.organizations.map((o) => o.organizationId).sort()).toEqual([ORG_A, ORG_B])
    const providers = report.organizations[0]!.resources.find((r) => r.resource === 'providers')!
    expect(providers.equal).toBe(PROVIDERS)
    expect(fileDigest(livePath(ORG_A))).toBe(before)
    expect(readdirSync(join(dataDir, 'rebuilds'))).toEqual([])
  })

  it('a dry run names exactly the documents changed behind the projector, exit 1', async () => {
    // Drift: one document's content, and another document gone, in the live file.
    const db = new Database(livePath(ORG_A))
    db.prepare(
      `UPDATE doc_providers SET hash = 'drift', body = replace(body, 'Ada', 'Eve') WHERE id = ?`,
    ).run(uuid(3))
    db.prepare('DELETE FROM doc_providers WHERE id = ?').run(uuid(4))
    db.close()
    const run = await rebuild(['--org', ORG_A, '--dry-run', '--json'])
    expect(run.code).toBe(1)
    const report = JSON.parse(run.stdout) as RebuildReport
    expect(report.organizations).toHaveLength(1)
    const providers = report.organizations[0]!.resources.find((r) => r.resource === 'providers')!
    expect(providers).toMatchObject({
      changed: { count: 1, ids: [uuid(3)] },
      appeared: { count: 1, ids: [uuid(4)] },
      disappeared: { count: 0, ids: [] },
      equal: PROVIDERS - 2,
    })
    // The table a person reads names them too.
    const table = await rebuild(['--org', ORG_A, '--dry-run'])
    expect(table.code).toBe(1)
    expect(table.stdout).toContain(`${ORG_A} providers changed: ${uuid(3)}`)
    expect(table.stdout).toContain(`${ORG_A} providers new: ${uuid(4)}`)
  })

  it('rebuilds one organization under polling clients: repaired, nothing lost, nothing else re-sent or written', async () => {
    const pollers = { a: pollOrganization(ORG_A), b: pollOrganization(ORG_B) }
    const synced = (poller: typeof pollers.a, documents: number) => () => {
      if (poller.state.failures.length > 0) throw new Error(poller.state.failures.join('\n'))
      return poller.state.sent.length >= documents ? true : undefined
    }
    await eventually(synced(pollers.a, PROVIDERS - 1))
    await eventually(synced(pollers.b, PROVIDERS))
    // A whole pass after that: every poller is at the end of its list, nothing left to send.
    await Promise.all([pollers.a.settled(), pollers.b.settled()])
    pollers.a.take()
    pollers.b.take()
    const stampsBefore = providerDocs(ORG_A)
    const orgB = livePath(ORG_B)
    const orgBBefore = { digest: fileDigest(orgB), mtimeMs: statSync(orgB).mtimeMs }

    // A change arrives for the organization while it is being rebuilt: it must not be lost.
    const running = rebuild(['--org', ORG_A, '--json'])
    // While its replay runs (its scratch folder exists), before it hands the file over.
    const before = livePath(ORG_A)
    const rebuilds = join(dataDir, 'rebuilds')
    await eventually(() =>
      existsSync(rebuilds) && readdirSync(rebuilds).length > 0 ? true : undefined,
    )
    await produce([
      record({
        table: 'providers',
        op: 'u',
        after: providerRow(uuid(5), ORG_A, { last_name: 'Lovelace-Changed' }),
        lsn: lsn++,
      }),
    ])
    // Produced before the swap: the live file was still the one being replaced.
    expect(livePath(ORG_A)).toBe(before)
    const run = await running
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout) as RebuildReport
    expect(report.organizations[0]!.swapped?.file).toMatch(/\.r\d+\.db$/)

    // Served from the new file: the drift is repaired, the change made meanwhile is there.
    const served = async (id: string) =>
      (await (await api.get(`/providers/${id}`, KEYS[ORG_A])).json()) as {
        data: { id: string; updatedAt: string; lastName?: string }
      }
    await eventually(async () =>
      JSON.stringify(await served(uuid(5))).includes('Lovelace-Changed') ? true : undefined,
    )
    expect(JSON.stringify(await served(uuid(3)))).not.toContain('Eve')
    expect((await api.get(`/providers/${uuid(4)}`, KEYS[ORG_A])).status).toBe(200)
    // Each poller has seen what is served now (a whole pass after it), so anything re-sent is in.
    await Promise.all([pollers.a.settled(), pollers.b.settled()])
    await pollers.a.stop()
    await pollers.b.stop()

    expect(pollers.a.state.failures).toEqual([])
    expect(pollers.b.state.failures).toEqual([])
    // Only what changed is sent again: the repaired documents and the one changed meanwhile.
    expect([...new Set(pollers.a.take())].sort()).toEqual([uuid(3), uuid(4), uuid(5)].sort())
    expect(pollers.b.take()).toEqual([])
    const stampsAfter = providerDocs(ORG_A)
    for (const [id, [stamp]] of Object.entries(stampsBefore)) {
      if (id !== uuid(3) && id !== uuid(5)) expect(stampsAfter[id]![0], id).toBe(stamp)
    }
    // The other organization's file was not written.
    expect({ digest: fileDigest(orgB), mtimeMs: statSync(orgB).mtimeMs }).toEqual(orgBBefore)
    expect(readdirSync(generation().handoversDir)).toEqual([])

    // And the live projector goes on applying changes to the new file.
    await produce([
      record({
        table: 'providers',
        op: 'u',
        after: providerRow(uuid(6), ORG_A, { last_name: 'After' }),
        lsn: lsn++,
      }),
    ])
    await eventually(async () =>
      JSON.stringify(await served(uuid(6))).includes('After') ? true : undefined,
    )
  })

  it('refuses, in one line and exit 2, what it cannot do, touching nothing', async () => {
    const before = fileDigest(livePath(ORG_A))
    const scratch = mkdtempSync(join(tmpdir(), 'replica-rebuild-refusals-'))
    try {
      const empty = join(scratch, 'empty')
      mkdirSync(empty)
      const noReplica = await runEntry('projector/main.ts', ['--rebuild', '--org', ORG_A], {
        ...projectorEnv(),
        DATA_DIR: empty,
      })
      expect(noReplica.code, noReplica.stderr).toBe(2)
      expect(noReplica.stderr.trim()).toBe(
        `projector: ${empty} holds no replica to rebuild (no CURRENT generation)`,
      )
      expect(readdirSync(empty)).toEqual([])

      // A replica still on its initial load: this one's control.db before its catch-up was
      // recorded (a copy, its caught_up_at removed).
      const loading = join(scratch, 'loading')
      const copy = prepareGeneration(loading, generation().name)
      const control = new Database(generation().controlPath, { readonly: true })
      control.exec(`VACUUM INTO '${copy.controlPath}'`)
      control.close()
      const copied = new Database(copy.controlPath)
      expect(
        copied.prepare(`DELETE FROM replica_state WHERE key = 'caught_up_at'`).run().changes,
      ).toBe(1)
      copied.close()
      publishGeneration(loading, copy.name)
      const notCaughtUp = await runEntry('projector/main.ts', ['--rebuild', '--org', ORG_A], {
        ...projectorEnv(),
        DATA_DIR: loading,
      })
      expect(notCaughtUp.code, notCaughtUp.stderr).toBe(2)
      expect(notCaughtUp.stderr.trim()).toBe(
        'projector: the replica has not caught up yet: rebuild it whole, or wait',
      )
      expect(readdirSync(loading).sort()).toEqual(['CURRENT', 'generations'])
    } finally {
      rmSync(scratch, { recursive: true, force: true })
    }

    // Kafka unreachable: refused before the lock and the scratch folder, not after a replay.
    const unreachable = await runEntry('projector/main.ts', ['--rebuild', '--org', ORG_A], {
      ...projectorEnv(),
      KAFKA_BROKERS: '127.0.0.1:1',
    })
    expect(unreachable.code, unreachable.stderr).toBe(2)
    expect(unreachable.stderr.trim()).toMatch(
      /^projector: cannot reach Kafka at 127\.0\.0\.1:1 \(KAFKA_BROKERS\): [^\n]+$/,
    )
    expect(existsSync(join(dataDir, 'rebuild.lock'))).toBe(false)
    const rebuilds = join(dataDir, 'rebuilds')
    expect(existsSync(rebuilds) ? readdirSync(rebuilds) : []).toEqual([])
    expect(fileDigest(livePath(ORG_A))).toBe(before)

    const unknown = await rebuild(['--org', uuid(777)])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr.trim()).toBe(
      `projector: unknown organization ${uuid(777)}: not in the replica`,
    )

    const notAnId = await rebuild(['--org', 'acme'])
    expect(notAnId.code).toBe(2)
    expect(notAnId.stderr.trim()).toBe('projector: --org: not an organization id: "acme"')

    const withoutRebuild = await runEntry('projector/main.ts', ['--org', ORG_A], projectorEnv())
    expect(withoutRebuild.code).toBe(2)
    expect(withoutRebuild.stderr).toMatch(/^projector: --org and --dry-run go with --rebuild/)

    // A second rebuild while one runs: the lock names its holder. The holder is this process,
    // as a running rebuild holds it: a real one over a topic this small ended (and let go of the
    // lock) before the second had reached Kafka, which it checks first.
    const held = acquireRebuildLock(
      dataDir,
      `rebuild --dry-run --org ${ORG_A}`,
      new Date('2026-11-25T10:00:00Z'),
    )
    expect(held.held).toBe(true)
    try {
      const second = await rebuild(['--org', ORG_B, '--dry-run'])
      expect(second.code, second.stderr).toBe(2)
      expect(second.stderr.trim()).toMatch(
        new RegExp(
          `^projector: another rebuild is running: pid ${process.pid} on .+, running 'rebuild --dry-run --org ${ORG_A}' since `,
        ),
      )
    } finally {
      if (held.held) held.release()
    }
  })

  it('a hand-over the live projector does not take in time is withdrawn: exit 2, nothing swapped, and a projector started later does not take it', async () => {
    // The live projector is down: nothing takes the request.
    await live.stop()
    const path = livePath(ORG_A)
    const before = fileDigest(path)
    const organizationFiles = () =>
      readdirSync(generation().organizationsDir)
        .filter((name) => name.startsWith(ORG_A))
        .sort()
    const filesBefore = organizationFiles()
    const run = await runEntry(
      'projector/main.ts',
      ['--rebuild', '--org', ORG_A],
      { ...projectorEnv(), HANDOVER_TIMEOUT_MS: '3000' },
      180_000,
    )
    expect(run.code, run.stderr).toBe(2)
    expect(run.stderr.trim().split('\n').at(-1)).toBe(
      `projector: the live projector did not take the rebuilt files of ${ORG_A} in time: is it running? (nothing was swapped for them)`,
    )
    // Withdrawn: no request left, the rebuilt file removed, the live file as it was. (No file
    // added: the file an earlier test's swap replaced may meanwhile reach the end of its grace
    // period and go, as it should.)
    expect(readdirSync(generation().handoversDir)).toEqual([])
    expect(organizationFiles().filter((name) => !filesBefore.includes(name))).toEqual([])
    expect(organizationFiles()).toContain(basename(path))
    expect(livePath(ORG_A)).toBe(path)
    expect(fileDigest(path)).toBe(before)
    expect(existsSync(join(dataDir, 'rebuild.lock'))).toBe(false)
    expect(readdirSync(join(dataDir, 'rebuilds'))).toEqual([])

    // The live projector comes back: a change applied after its restart shows it has run its
    // batches (it takes hand-overs before each), and it took nothing.
    live = createProjector({ config: projectorConfig(), logger: pino({ level: 'silent' }) })
    await live.startKafka()
    await produce([
      record({
        table: 'providers',
        op: 'u',
        after: providerRow(uuid(7), ORG_A, { last_name: 'After-Withdrawal' }),
        lsn: lsn++,
      }),
    ])
    await eventually(async () =>
      (await (await api.get(`/providers/${uuid(7)}`, KEYS[ORG_A])).text()).includes(
        'After-Withdrawal',
      )
        ? true
        : undefined,
    )
    expect(livePath(ORG_A)).toBe(path)
    expect(organizationFiles().filter((name) => !filesBefore.includes(name))).toEqual([])
  })

  it('a rebuild killed with SIGKILL leaves the live file serving: unchanged before its hand-over request, swapped whole after it; the next run starts clean', async () => {
    const rebuilds = join(dataDir, 'rebuilds')
    const requested = () =>
      ['json', 'taking'].some((state) =>
        existsSync(join(generation().handoversDir, `${ORG_A}.${state}`)),
      )
    const start = () =>
      spawn(
        process.execPath,
        ['--import', 'tsx', 'projector/main.ts', '--rebuild', '--org', ORG_A],
        {
          cwd: repoRoot,
          env: { PATH: process.env.PATH ?? '', ...projectorEnv() },
          stdio: 'ignore',
        },
      )
    const kill = async (child: ReturnType<typeof spawn>) => {
      const closed = new Promise((resolve) => child.once('close', resolve))
      child.kill('SIGKILL')
      await closed
    }

    // 1. While its replay runs (its scratch folder exists), before any request: nothing live
    // was touched.
    const path = livePath(ORG_A)
    const before = fileDigest(path)
    const replaying = start()
    await eventually(
      () =>
        existsSync(rebuilds) && readdirSync(rebuilds).length > 0 && !requested() ? true : undefined,
      120_000,
      10,
    )
    await kill(replaying)
    expect(requested()).toBe(false)
    expect(readdirSync(rebuilds)).not.toEqual([])
    expect(livePath(ORG_A)).toBe(path)
    expect(fileDigest(path)).toBe(before)
    expect((await api.get('/providers?limit=1', KEYS[ORG_A])).status).toBe(200)

    // 2. Once it has asked the live projector to take the rebuilt file: the projector takes it
    // whole, killed or not, and serves it.
    const handing = start()
    await eventually(() => (requested() || livePath(ORG_A) !== path ? true : undefined), 120_000, 5)
    await kill(handing)
    await eventually(() => (livePath(ORG_A) !== path && !requested() ? true : undefined))
    expect(livePath(ORG_A)).toMatch(/\.r\d+\.db$/)
    expect((await api.get('/providers?limit=1', KEYS[ORG_A])).status).toBe(200)
    // What it took is what a rebuild makes: a dry run finds nothing to change.
    const swapped = await rebuild(['--org', ORG_A, '--dry-run', '--json'])
    expect(swapped.code, swapped.stderr).toBe(0)

    // The next run clears what the killed ones left (a scratch folder, a dead holder's lock).
    const next = await rebuild(['--org', ORG_A, '--json'])
    expect(next.code, next.stderr).toBe(0)
    expect(readdirSync(rebuilds)).toEqual([])
    expect(existsSync(join(dataDir, 'rebuild.lock'))).toBe(false)
    const check = await rebuild(['--org', ORG_A, '--dry-run', '--json'])
    expect(check.code, check.stderr).toBe(0)
  })
})
