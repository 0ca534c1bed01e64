// `npm run verify` against the real pipeline: PostgreSQL -> Debezium -> Kafka -> the projector
// process -> SQLite files, checked by the command users run, as a role with exactly the grants
// docs/operations.md lists. Drift is made two ways: an organization file changed behind the
// projector's back, and a source change the connector never saw (stopped, its slot dropped).
// Tests run in order on one pipeline.
import Database from 'better-sqlite3'
import { spawn } from 'node:child_process'
import { createHash, randomUUID } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  watch,
  writeFileSync,
} from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readOrganizationFiles } from '../../../projector/storage/control-file.ts'
import type { VerifyReport } from '../../../projector/verify/report.ts'
import { currentGeneration, organizationsWithFiles } from '../../../src/layout.ts'
import { consumerLag, Pipeline, TOPIC_PREFIX, topicEnd } from '../../support/e2e.ts'
import {
  ALL_SCOPES,
  deleteRow,
  insertApiKey,
  insertDocument,
  insertEnrollment,
  insertEnrollmentLineOfBusiness,
  insertEnrollmentRequirement,
  insertGroupEnrollment,
  insertGroupEnrollmentLineOfBusiness,
  insertGroupIdentifier,
  insertGroupMembership,
  insertLocationParticipation,
  insertOrganization,
  insertProvider,
  insertProviderGroup,
  insertProviderIdentifier,
  insertRow,
  insertServiceLocation,
  updateRow,
  type Sql,
} from '../../support/e2e-sql.ts'
import { repoRoot, runEntry } from '../../support/processes.ts'

/** The product tables verify reads: docs/operations.md's grant, word for word. */
const PRODUCT_TABLES =
  'organizations, api_keys, providers, provider_identifiers, provider_groups, group_memberships, service_locations, group_identifiers, enrollments, enrollment_requirements, enrollment_lines_of_business, enrollment_location_participations, group_enrollments, group_enrollment_lines_of_business, documents'

interface Seeded {
  organizationId: string
  providers: string[]
  documents: string[]
}

/** One organization with a row in every table, in the encodings that differ most. */
async function seedOrganization(sql: Sql, name: string, providers: number): Promise<Seeded> {
  const org = await insertOrganization(sql, { name })
  const ids: string[] = []
  for (let i = 0; i < providers; i++) {
    const provider = await insertProvider(sql, org.id, {
      first_name: `Ada${i}`,
      last_name: 'Lovelace',
      languages: ['en', 'fr'],
      other_emails: i % 2 === 0 ? [] : ['a@example.org'],
      date_of_birth: '1815-12-10',
      start_date: '2020-02-29',
      updated_at: '2025-06-07T08:09:10.123456Z',
      ssn: '123-45-6789',
    })
    ids.push(provider.id)
    await insertProviderIdentifier(sql, org.id, provider.id, {
      metadata: '{"state": "CA", "nested": {"b": [1, 2.5, null]}, "name": "Zoë"}',
      issued_on: '1999-12-31',
    })
  }
  const group = await insertProviderGroup(sql, org.id, { name: `${name} Group`, tin: '12-3456789' })
  await insertGroupMembership(sql, org.id, ids[0]!, group.id)
  const location = await insertServiceLocation(sql, org.id, group.id, { city: 'Oakland' })
  await insertGroupIdentifier(sql, org.id, group.id)
  const enrollment = await insertEnrollment(sql, org.id, ids[0]!, {
    provider_group_id: group.id,
    submitted_on: '2024-01-02',
  })
  await insertEnrollmentRequirement(sql, org.id, enrollment.id)
  await insertEnrollmentLineOfBusiness(sql, org.id, enrollment.id)
  await insertLocationParticipation(sql, org.id, enrollment.id, location.id)
  const groupEnrollment = await insertGroupEnrollment(sql, org.id, group.id)
  await insertGroupEnrollmentLineOfBusiness(sql, org.id, groupEnrollment.id)
  const documents = [
    (await insertDocument(sql, org.id, { provider_id: ids[1]!, size_bytes: 5_000_000_000 })).id,
    (await insertDocument(sql, org.id, { provider_group_id: group.id, expires_on: '2031-01-01' }))
      .id,
  ]
  return { organizationId: org.id, providers: ids, documents }
}

describe('npm run verify', { timeout: 300_000 }, () => {
  let pipeline: Pipeline
  let a: Seeded
  let b: Seeded

  beforeAll(async () => {
    pipeline = await Pipeline.start({
      beforeConnector: async (sql) => {
        a = await seedOrganization(sql, 'Verify A', 6)
        b = await seedOrganization(sql, 'Verify B', 6)
        await sql.query(`
          CREATE ROLE replica_verify LOGIN PASSWORD 'verify-secret';
          GRANT CONNECT ON DATABASE product TO replica_verify;
          GRANT USAGE ON SCHEMA public TO replica_verify;
          GRANT SELECT ON ${PRODUCT_TABLES} TO replica_verify;
          CREATE ROLE replica_verify_partial LOGIN PASSWORD 'verify-secret';
          GRANT CONNECT ON DATABASE product TO replica_verify_partial;
          GRANT USAGE ON SCHEMA public TO replica_verify_partial;
          GRANT SELECT ON ${PRODUCT_TABLES.replace(', documents', '')} TO replica_verify_partial;
        `)
      },
    })
    // Streamed changes as well as snapshot reads: a delete, an update, an insert.
    const sql = pipeline.sql
    await updateRow(sql, 'providers', a.providers[2]!, { last_name: 'Byron', specialty: 'Logic' })
    await deleteRow(sql, 'provider_identifiers', await identifierOf(a.providers[3]!))
    a.providers.push((await insertProvider(sql, a.organizationId, { first_name: 'Late' })).id)
    await pipeline.caughtUp(pipeline.projector!)
  }, 600_000)

  afterAll(async () => {
    await pipeline?.stop()
  })

  async function identifierOf(providerId: string): Promise<string> {
    const result = await pipeline.postgres.query<{ id: string }>(
      'select id from provider_identifiers where provider_id = $1',
      [providerId],
    )
    return result.rows[0]!.id
  }

  function databaseUrl(role = 'replica_verify', port = pipeline.postgres.port): string {
    return `postgres://${role}:verify-secret@127.0.0.1:${port}/${pipeline.postgres.database}`
  }

  function env(overrides: Record<string, string> = {}): Record<string, string> {
    return {
      DATA_DIR: pipeline.dataDir,
      KAFKA_BROKERS: pipeline.kafka.brokers.join(','),
      KAFKA_GROUP_ID: 'e2e-replica',
      TOPIC_PREFIX,
      DATABASE_URL: databaseUrl(),
      LOG_LEVEL: 'warn',
      VERIFY_CATCH_UP_TIMEOUT_MS: '60000',
      ...overrides,
    }
  }

  function verify(args: string[], overrides: Record<string, string> = {}) {
    return runEntry('projector/verify/main.ts', args, env(overrides), 240_000)
  }

  async function verifyJson(
    args: string[] = [],
  ): Promise<{ code: number | null; report: VerifyReport }> {
    const run = await verify(['--json', ...args])
    expect(run.stderr).not.toMatch(/"level":(50|60)/)
    if (run.code === 2) throw new Error(run.stderr)
    return { code: run.code, report: JSON.parse(run.stdout) as VerifyReport }
  }

  function livePath(organizationId: string): string {
    const g = currentGeneration(pipeline.dataDir)!
    return g.organizationPath(
      organizationId,
      readOrganizationFiles(g.controlPath).get(organizationId),
    )
  }

  function digest(path: string): string {
    return createHash('sha256').update(readFileSync(path)).digest('hex')
  }

  /** id -> updatedAt of every document of a resource table in an organization's live file. */
  function stamps(organizationId: string, table: string): Map<string, string> {
    const db = new Database(livePath(organizationId), { readonly: true, fileMustExist: true })
    try {
      const rows = db.prepare(`SELECT id, updated_at FROM ${table}`).all() as Array<{
        id: string
        updated_at: string
      }>
      return new Map(rows.map((r) => [r.id, r.updated_at]))
    } finally {
      db.close()
    }
  }

  /** The served body of a provider in an organization's live file. */
  function servedBody(organizationId: string, providerId: string): string {
    const db = new Database(livePath(organizationId), { readonly: true, fileMustExist: true })
    try {
      const body = db.prepare('SELECT body FROM doc_providers WHERE id = ?').pluck().get(providerId)
      return typeof body === 'string' ? body : ''
    } finally {
      db.close()
    }
  }

  const resource = (report: VerifyReport, organizationId: string, name: string) =>
    report.organizations
      .find((o) => o.organizationId === organizationId)!
      .resources.find((r) => r.resource === name)!

  it('a faithful replica: every document equal, exit 0', async () => {
    const { code, report } = await verifyJson()
    expect(report.organizations.filter((o) => o.status !== 'equal')).toEqual([])
    expect(code).toBe(0)
    expect(report.drift).toBe(false)
    expect(report.organizations.map((o) => o.organizationId).sort()).toEqual(
      [a.organizationId, b.organizationId].sort(),
    )
    expect(resource(report, a.organizationId, 'providers').equal).toBe(7)
    expect(resource(report, a.organizationId, 'documents').equal).toBe(2)
    for (const name of ['provider-groups', 'enrollments', 'group-enrollments', 'expirables']) {
      expect(resource(report, b.organizationId, name).equal, name).toBeGreaterThan(0)
    }
    expect(report.lag.debezium).not.toBe('no-slot')
    expect(report.control.status).toBe('equal')
    expect(report.control.tables.find((t) => t.table === 'organizations')?.equal).toBe(2)

    // stderr is not a terminal here: progress is a log line, in rows.
    const table = await verify([], { LOG_LEVEL: 'info', PROGRESS_INTERVAL_MS: '50' })
    expect(table.code).toBe(0)
    expect(table.stderr).toMatch(
      /"task":"verify","unit":"rows","done":\d+.*"msg":"progress finished"/,
    )
    expect(table.stdout).toContain(`Checked 2 organizations: no drift`)
    expect(table.stdout).toMatch(
      /PostgreSQL snapshot at .* The replica was \d+ change events? behind; it had applied everything before the snapshot/,
    )
  })

  it('a replica behind PostgreSQL at the snapshot is waited for, not reported as drift', async () => {
    await pipeline.projector!.stop()
    await updateRow(pipeline.sql, 'providers', a.providers[4]!, { last_name: 'Behind' })
    // Debezium runs: the change reaches Kafka, with no projector to apply it.
    await pipeline.eventually('the change to wait in Kafka', async () =>
      (await consumerLag(pipeline.kafka.brokers, 'e2e-replica')) > 0 ? true : undefined,
    )
    // With no projector to apply it, the wait ends at VERIFY_CATCH_UP_TIMEOUT_MS: refused, not
    // reported as drift (30 s: time for Debezium's evidence, a heartbeat every 10 s, first).
    const timedOut = await verify([], { VERIFY_CATCH_UP_TIMEOUT_MS: '30000' })
    expect(timedOut.code, timedOut.stderr).toBe(2)
    expect(timedOut.stdout).toBe('')
    expect(timedOut.stderr.trim()).toMatch(
      /^verify: the replica is still [1-9]\d* change events? behind the snapshot after 30 s: is the projector running\? \(VERIFY_CATCH_UP_TIMEOUT_MS\)$/,
    )
    const running = verifyJson()
    // Its scratch folder is made once the snapshot is taken: the projector is still stopped then.
    const verifyDir = join(pipeline.dataDir, 'verify')
    await pipeline.eventually('verify to take its snapshot', () =>
      Promise.resolve(
        existsSync(verifyDir) && readdirSync(verifyDir).length > 0 ? true : undefined,
      ),
    )
    await pipeline.startMainProjector()
    const { code, report } = await running
    expect(report.lag.eventsBehind).toBeGreaterThan(0)
    expect(report.lag.waitedSeconds).toBeGreaterThan(0)
    expect(report.organizations.filter((o) => o.status !== 'equal')).toEqual([])
    expect(code).toBe(0)
  })

  it('refuses what it cannot do, in one line and exit 2, touching nothing', async () => {
    const before = digest(livePath(a.organizationId))
    const unreachable = await verify([], { DATABASE_URL: databaseUrl('replica_verify', 1) })
    expect(unreachable.code).toBe(2)
    expect(unreachable.stderr.trim().split('\n')).toHaveLength(1)
    expect(unreachable.stderr).toMatch(
      /^verify: cannot connect to 127\.0\.0\.1:1\/product as replica_verify: /,
    )
    expect(unreachable.stderr).not.toContain('verify-secret')

    const partial = await verify([], { DATABASE_URL: databaseUrl('replica_verify_partial') })
    expect(partial.code).toBe(2)
    expect(partial.stderr.trim()).toMatch(
      /^verify: role replica_verify_partial lacks SELECT on public\.documents \(column \w+\) of .* \(GRANT SELECT ON public\.documents TO replica_verify_partial\)$/,
    )

    const empty = join(pipeline.workDir, 'no-replica')
    mkdirSync(empty)
    const noReplica = await verify([], { DATA_DIR: empty })
    expect(noReplica.code).toBe(2)
    expect(noReplica.stderr.trim()).toBe(
      `verify: ${empty} holds no replica to verify (no CURRENT generation)`,
    )
    expect(readdirSync(empty)).toEqual([])

    const noKafka = await verify(['--repair'], { KAFKA_BROKERS: '127.0.0.1:1' })
    expect(noKafka.code).toBe(2)
    expect(noKafka.stderr.trim()).toMatch(
      /^verify: cannot reach Kafka at 127\.0\.0\.1:1 \(KAFKA_BROKERS\), needed to tell lag from drift: [^\n]+$/,
    )
    expect(existsSync(join(pipeline.dataDir, 'rebuild.lock'))).toBe(false)

    const noUrl = await verify([], { DATABASE_URL: '' })
    expect(noUrl.code).toBe(2)
    expect(noUrl.stderr).toContain('DATABASE_URL: is required')

    const badOrg = await verify(['--org', 'acme'])
    expect(badOrg.code).toBe(2)
    expect(badOrg.stderr.trim()).toBe('verify: --org: not an organization id: "acme"')

    // Well formed, known to neither side: a typo must not pass a deploy gate.
    for (const args of [[], ['--repair']]) {
      const unknown = await verify([
        '--org',
        `${b.organizationId},${UNKNOWN_ORGANIZATION}`,
        ...args,
      ])
      expect(unknown.code, unknown.stdout).toBe(2)
      expect(unknown.stdout).toBe('')
      expect(unknown.stderr.trim()).toBe(
        `verify: unknown organization ${UNKNOWN_ORGANIZATION}: neither in PostgreSQL nor in the replica`,
      )
    }

    // A wrong password fails as PostgreSQL says, and --repair takes no lock before that.
    const lockEvents: string[] = []
    const watcher = watch(pipeline.dataDir, (_, name) => {
      if (name === 'rebuild.lock') lockEvents.push(name)
    })
    try {
      const wrongPassword = await verify(['--repair'], {
        DATABASE_URL: databaseUrl().replace(':verify-secret@', ':not-the-secret@'),
      })
      expect(wrongPassword.code).toBe(2)
      expect(wrongPassword.stderr.trim()).toMatch(
        /^verify: cannot connect to 127\.0\.0\.1:\d+\/product as replica_verify: password authentication failed for user "replica_verify"/,
      )
      expect(wrongPassword.stderr).not.toContain('not-the-secret')
    } finally {
      watcher.close()
    }
    expect(lockEvents).toEqual([])
    expect(digest(livePath(a.organizationId))).toBe(before)
  })

  it('names exactly the documents changed behind the projector, exit 1; --org narrows', async () => {
    const db = new Database(livePath(a.organizationId))
    try {
      // The served bodies change, their stored hashes do not: what the api serves is what counts.
      db.prepare(`UPDATE doc_providers SET body = replace(body, 'Ada', 'Eve') WHERE id = ?`).run(
        a.providers[0],
      )
      db.prepare(
        `UPDATE doc_documents SET body = replace(body, '"fileName":"', '"fileName":"tampered-') WHERE id = ?`,
      ).run(a.documents[1])
      db.prepare('DELETE FROM doc_providers WHERE id = ?').run(a.providers[1])
      copyDocument(db, a.documents[0]!, EXTRA_DOCUMENT)
    } finally {
      db.close()
    }

    const { code, report } = await verifyJson()
    expect(code).toBe(1)
    expect(report.drift).toBe(true)
    expect(report.organizations.map((o) => [o.organizationId, o.status])).toEqual(
      [
        [a.organizationId, 'drifted'],
        [b.organizationId, 'equal'],
      ].sort(),
    )
    expect(resource(report, a.organizationId, 'providers')).toEqual({
      resource: 'providers',
      equal: 5,
      differing: { count: 1, ids: [a.providers[0]] },
      missing: { count: 1, ids: [a.providers[1]] },
      extra: { count: 0, ids: [] },
      changing: { count: 0, ids: [] },
    })
    expect(resource(report, a.organizationId, 'documents')).toMatchObject({
      differing: { count: 1, ids: [a.documents[1]] },
      missing: { count: 0 },
      extra: { count: 1, ids: [EXTRA_DOCUMENT] },
    })

    const table = await verify([])
    expect(table.code).toBe(1)
    expect(table.stdout).toContain(`${a.organizationId} providers differing: ${a.providers[0]}`)
    expect(table.stdout).toContain(
      `${a.organizationId} providers missing in replica: ${a.providers[1]}`,
    )
    expect(table.stdout).toContain(
      `${a.organizationId} documents extra in replica: ${EXTRA_DOCUMENT}`,
    )
    expect(table.stdout).toContain('Drift: 1 of 2 organizations differs from PostgreSQL')
    console.log(`verify report (drift behind the projector's back):\n${table.stdout}`)

    const onlyB = await verifyJson(['--org', b.organizationId])
    expect(onlyB.code).toBe(0)
    expect(onlyB.report.organizations.map((o) => o.organizationId)).toEqual([b.organizationId])
  })

  it('--repair rebuilds the drifted organization; verify then finds no drift, and undrifted documents keep updatedAt', async () => {
    const before = stamps(a.organizationId, 'doc_providers')
    const otherBefore = digest(livePath(b.organizationId))
    const driftedBefore = digest(livePath(a.organizationId))

    // While another rebuild holds the lock (a live process on this host: this one), --repair
    // finds the drift and refuses to rebuild, touching nothing.
    const lock = join(pipeline.dataDir, 'rebuild.lock')
    const holder = {
      pid: process.pid,
      host: hostname(),
      command: 'rebuild --org (the test)',
      since: new Date().toISOString(),
    }
    writeFileSync(lock, `${JSON.stringify(holder)}\n`, { flag: 'wx' })
    try {
      const locked = await verify(['--repair'])
      expect(locked.code, locked.stdout).toBe(2)
      expect(locked.stdout).toBe('')
      expect(locked.stderr.trim()).toBe(
        `verify: another rebuild is running: pid ${process.pid} on ${holder.host}, running '${holder.command}' since ${holder.since}`,
      )
      expect(digest(livePath(a.organizationId))).toBe(driftedBefore)
      expect(readFileSync(lock, 'utf8')).toBe(`${JSON.stringify(holder)}\n`)
    } finally {
      rmSync(lock, { force: true })
    }

    const { code, report } = await verifyJson(['--repair'])
    expect(code).toBe(0)
    expect(report.drift).toBe(true)
    expect(report.repair?.rebuilt).toEqual([a.organizationId])
    expect(report.repair?.after.drift).toBe(false)
    expect(report.repair?.after.organizations.map((o) => o.organizationId)).toEqual([
      a.organizationId,
    ])

    const again = await verifyJson()
    expect(again.code).toBe(0)
    expect(again.report.drift).toBe(false)
    const after = stamps(a.organizationId, 'doc_providers')
    for (const [id, stamp] of before) {
      if (id === a.providers[0]) continue
      expect(after.get(id), id).toBe(stamp)
    }
    expect(after.get(a.providers[0]!)! > before.get(a.providers[0]!)!).toBe(true)
    expect(after.has(a.providers[1]!)).toBe(true)
    expect(stamps(a.organizationId, 'doc_documents').has(EXTRA_DOCUMENT)).toBe(false)
    expect(digest(livePath(b.organizationId))).toBe(otherBefore)
  })

  it('a repair killed with SIGKILL leaves the live file serving: unchanged before its hand-over request, swapped whole after it; the next run starts clean', async () => {
    const tamper = () => {
      const db = new Database(livePath(b.organizationId))
      db.prepare(`UPDATE doc_providers SET body = replace(body, 'Ada', 'Eve') WHERE id = ?`).run(
        b.providers[0],
      )
      db.close()
    }
    tamper()
    const live = currentGeneration(pipeline.dataDir)!
    const rebuilds = join(pipeline.dataDir, 'rebuilds')
    const requested = () =>
      ['json', 'taking'].some((state) =>
        existsSync(join(live.handoversDir, `${b.organizationId}.${state}`)),
      )
    const repair = () =>
      spawn(process.execPath, ['--import', 'tsx', 'projector/verify/main.ts', '--repair'], {
        cwd: repoRoot,
        env: { PATH: process.env.PATH ?? '', ...env() },
        stdio: 'ignore',
      })
    const kill = async (child: ReturnType<typeof spawn>) => {
      child.kill('SIGKILL')
      await new Promise((resolve) => child.once('close', resolve))
    }

    // 1. While its replay runs (its scratch folder exists), before any request: nothing live
    // was touched.
    const path = livePath(b.organizationId)
    const before = digest(path)
    const replaying = repair()
    await pipeline.eventually(
      'the repair to be replaying the topics',
      () =>
        Promise.resolve(
          existsSync(rebuilds) && readdirSync(rebuilds).length > 0 && !requested()
            ? true
            : undefined,
        ),
      { intervalMs: 10, timeoutMs: 120_000 },
    )
    await kill(replaying)
    expect(requested()).toBe(false)
    expect(livePath(b.organizationId)).toBe(path)
    expect(digest(path)).toBe(before)

    // 2. Once it has asked the live projector to take the rebuilt file: the projector takes it
    // whole, killed or not, and serves it.
    const handing = repair()
    await pipeline.eventually(
      'the hand-over request',
      () => Promise.resolve(requested() || livePath(b.organizationId) !== path ? true : undefined),
      { intervalMs: 5, timeoutMs: 180_000 },
    )
    await kill(handing)
    await pipeline.eventually('the rebuilt file served', () =>
      Promise.resolve(livePath(b.organizationId) !== path && !requested() ? true : undefined),
    )
    const swapped = await verifyJson(['--org', b.organizationId])
    expect(swapped.code).toBe(0)

    // The next run clears what the killed ones left, and repairs what drifted since.
    tamper()
    const next = await verifyJson(['--repair'])
    expect(next.code).toBe(0)
    const verifyDir = join(pipeline.dataDir, 'verify')
    expect(existsSync(verifyDir) ? readdirSync(verifyDir) : []).toEqual([])
    expect(readdirSync(join(pipeline.dataDir, 'rebuilds'))).toEqual([])
    expect((await verifyJson()).code).toBe(0)

    // A killed run's rebuild may have been handed over: the next --repair finds no drift and
    // rebuilds nothing, and still clears the scratch folder that run left.
    const left = join(pipeline.dataDir, 'rebuilds', '20260101000000000-0a0b0c')
    mkdirSync(join(left, 'data'), { recursive: true })
    const clean = await verifyJson(['--repair'])
    expect(clean.code).toBe(0)
    expect(clean.report.repair).toBeUndefined()
    expect(readdirSync(join(pipeline.dataDir, 'rebuilds'))).toEqual([])
  })

  // Three verify runs and a projector restart: on a loaded machine, more than the others' 5 min.
  it(
    'names API keys the replica holds otherwise than PostgreSQL, and --repair mends them from their topics: a revoked key is refused from its commit on; withdrawn when the live projector does not take it',
    { timeout: 600_000 },
    async () => {
      const revoked = await insertApiKey(pipeline.sql, a.organizationId, {
        revoked_at: '2026-01-02T03:04:05.000000Z',
      })
      await pipeline.caughtUp(pipeline.projector!)
      const control = new Database(currentGeneration(pipeline.dataDir)!.controlPath)
      const revokedAt = () =>
        control.prepare('SELECT revoked_at FROM api_keys WHERE id = ?').pluck().get(revoked.id) as
          string | null | undefined
      const madeUp = () =>
        control.prepare('SELECT count(*) FROM api_keys WHERE id = ?').pluck().get(MADE_UP_KEY)
      await pipeline.eventually('the revoked key in control.db', () =>
        Promise.resolve(typeof revokedAt() === 'string' ? true : undefined),
      )
      const stored = revokedAt()
      const api = pipeline.client(revoked.raw)
      expect((await api.get('/providers?limit=1')).status).toBe(401)
      try {
        // Behind the projector's back: the revocation undone, and a key PostgreSQL never had.
        control.prepare('UPDATE api_keys SET revoked_at = NULL WHERE id = ?').run(revoked.id)
        control
          .prepare(
            `INSERT INTO api_keys SELECT ?, organization_id, name, 'made-up-hash', scopes, created_at,
             expires_at, NULL, source_lsn, from_snapshot FROM api_keys WHERE id = ?`,
          )
          .run(MADE_UP_KEY, revoked.id)
        expect((await api.get('/providers?limit=1')).status).toBe(200)

        const { code, report } = await verifyJson()
        expect(code).toBe(1)
        expect(report.drift).toBe(true)
        expect(report.organizations.filter((o) => o.status !== 'equal')).toEqual([])
        expect(report.control.status).toBe('drifted')
        expect(report.control.tables.find((t) => t.table === 'api_keys')).toEqual({
          table: 'api_keys',
          equal: 0,
          differing: { count: 1, ids: [revoked.id] },
          missing: { count: 0, ids: [] },
          extra: { count: 1, ids: [MADE_UP_KEY] },
        })

        // With the live projector down, nothing takes the repair: withdrawn after
        // HANDOVER_TIMEOUT_MS, exit 2, nothing changed; a projector started later does not apply it.
        await pipeline.projector!.stop()
        const withdrawn = await verify(['--repair'], { HANDOVER_TIMEOUT_MS: '3000' })
        expect(withdrawn.code, withdrawn.stderr).toBe(2)
        expect(withdrawn.stdout).toBe('')
        // Its last line (kafkajs warns at LOG_LEVEL=warn while the replay runs, before it).
        expect(withdrawn.stderr.trim().split('\n').at(-1)).toBe(
          'verify: the live projector did not take the control.db repair in time: is it running? (nothing was changed)',
        )
        const generationDir = currentGeneration(pipeline.dataDir)!.dir
        expect(
          readdirSync(generationDir).filter((name) => name.startsWith('control-repair')),
        ).toEqual([])
        await pipeline.startMainProjector()
        await pipeline.caughtUp(pipeline.projector!)
        // A change applied after the restart: it has run a batch, taking requests before it.
        await updateRow(pipeline.sql, 'providers', b.providers[0]!, { specialty: 'Restarted' })
        await pipeline.eventually('the change after the restart applied', () =>
          Promise.resolve(
            servedBody(b.organizationId, b.providers[0]!).includes('Restarted') ? true : undefined,
          ),
        )
        expect(revokedAt()).toBeNull()
        expect(madeUp()).toBe(1)
        expect((await api.get('/providers?limit=1')).status).toBe(200)

        const table = await verify(['--repair'])
        // verify returns once the live projector has committed the repair: the key is refused now.
        expect((await api.get('/providers?limit=1')).status).toBe(401)
        expect(table.code, table.stderr).toBe(0)
        expect(table.stdout).toContain(`control.db api_keys differing: ${revoked.id}`)
        expect(table.stdout).toContain(`control.db api_keys extra in replica: ${MADE_UP_KEY}`)
        expect(table.stdout).toContain(
          "Repair: replaced control.db's organizations and API keys with their topics' rows; checked again:",
        )
        expect(table.stdout).not.toContain('Repair: rebuilt')
        expect(table.stdout.split('Repair:')[1]).toMatch(/^control\.db +\(all\) +\d+ +0 +0 +0$/m)
        console.log(`verify report (control.db drift, repaired):\n${table.stdout}`)
        expect(revokedAt()).toBe(stored)
        expect(madeUp()).toBe(0)
      } finally {
        control.prepare('DELETE FROM api_keys WHERE id = ?').run(MADE_UP_KEY)
        control.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(stored, revoked.id)
        control.close()
      }
      const mended = await verifyJson()
      expect(mended.code).toBe(0)
      expect(mended.report.control.status).toBe('equal')
    },
  )

  it('one --repair: a body changed under its hash and a revocation undone, found and repaired; a row the replica refuses listed once; a size past 2^53 served with every digit', async () => {
    const sql = pipeline.sql
    const big = await insertDocument(sql, a.organizationId, {
      provider_id: a.providers[2]!,
      // 2^53 + 1: a double would make it ...992.
      size_bytes: BIG_SIZE as unknown as number,
    })
    const refused = await insertRow(sql, 'api_keys', {
      id: randomUUID(),
      organization_id: a.organizationId,
      name: 'not a hash',
      key_hash: 'not-a-sha256',
      scopes: ALL_SCOPES,
    })
    const reader = await insertApiKey(sql, a.organizationId)
    const revoked = await insertApiKey(sql, a.organizationId, {
      revoked_at: '2026-02-03T04:05:06.000000Z',
    })
    await pipeline.caughtUp(pipeline.projector!)
    const control = new Database(currentGeneration(pipeline.dataDir)!.controlPath)
    try {
      const served = await pipeline.eventually('the large document served', async () => {
        const page = await pipeline
          .client(reader.raw)
          .get(`/documents?provider_id=${a.providers[2]}`)
        return page.status === 200 && page.text.includes(big.id) ? page.text : undefined
      })
      expect(served).toContain(`"sizeBytes":${BIG_SIZE},`)
      const noDrift = await verifyJson()
      expect(noDrift.report.drift).toBe(false)
      expect(resource(noDrift.report, a.organizationId, 'documents').equal).toBe(3)
      expect(
        noDrift.report.refused.map(({ organizationId, table, id }) => ({
          organizationId,
          table,
          id,
        })),
      ).toEqual([{ organizationId: a.organizationId, table: 'api_keys', id: refused.id }])
      expect(noDrift.report.refused[0]!.reason).toContain('SHA-256')
      expect(noDrift.code).toBe(1)

      // Behind the projector's back: a served body (its hash kept), and the revocation undone.
      const db = new Database(livePath(a.organizationId))
      db.prepare(
        `UPDATE doc_documents SET body = replace(body, '"fileName":"', '"fileName":"tampered-') WHERE id = ?`,
      ).run(a.documents[0])
      // And the large document gone, as a replica from before values past 2^53 were read holds
      // it: that one dead-lettered its event and never served it.
      expect(db.prepare('DELETE FROM doc_documents WHERE id = ?').run(big.id).changes).toBe(1)
      db.close()
      await pipeline.eventually('the revoked key in control.db', () =>
        Promise.resolve(
          typeof control
            .prepare('SELECT revoked_at FROM api_keys WHERE id = ?')
            .pluck()
            .get(revoked.id) === 'string'
            ? true
            : undefined,
        ),
      )
      control.prepare('UPDATE api_keys SET revoked_at = NULL WHERE id = ?').run(revoked.id)
      expect((await pipeline.client(revoked.raw).get('/providers?limit=1')).status).toBe(200)

      const table = await verify(['--repair'])
      expect((await pipeline.client(revoked.raw).get('/providers?limit=1')).status).toBe(401)
      // Exit 1: the refused row is still refused; everything else was repaired.
      expect(table.code, table.stderr).toBe(1)
      const [found, after] = table.stdout.split('\nRepair: ')
      expect(found).toContain(`${a.organizationId} documents differing: ${a.documents[0]}`)
      expect(found).toContain(`${a.organizationId} documents missing in replica: ${big.id}`)
      expect(found).toContain(`control.db api_keys differing: ${revoked.id}`)
      expect(found).toContain(`${a.organizationId} api_keys refused by the replica: ${refused.id}`)
      expect(after).toMatch(
        new RegExp(`^rebuilt ${a.organizationId} from the topics; replaced control.db's`),
      )
      expect(after).toMatch(new RegExp(`^${a.organizationId} +\\(all\\)`, 'm'))
      expect(after).toMatch(/^control\.db +\(all\)/m)
      expect(after).toContain('no drift')
      expect(
        table.stdout.match(new RegExp(`refused by the replica: ${refused.id}`, 'g')),
      ).toHaveLength(1)
      // Rebuilt from the topics, where its event is: served again, every digit kept.
      const again = await pipeline
        .client(reader.raw)
        .get(`/documents?provider_id=${a.providers[2]}`)
      expect(again.status).toBe(200)
      expect(again.text).toContain(`"sizeBytes":${BIG_SIZE},`)
      console.log(
        `verify --repair report (defects 1, 4 and 5):\n${table.stdout}\nGET /documents?provider_id=${a.providers[2]} after the repair:\n${again.text}\n`,
      )
    } finally {
      control.close()
      await deleteRow(sql, 'api_keys', refused.id)
      await deleteRow(sql, 'api_keys', reader.id)
      await deleteRow(sql, 'api_keys', revoked.id)
      await deleteRow(sql, 'documents', big.id)
      await pipeline.caughtUp(pipeline.projector!)
    }
    expect((await verifyJson()).code).toBe(0)
  })

  it('steady writes are not drift: runs in a row exit 0, and name exactly the ids tampered with', async () => {
    const sql = pipeline.sql
    // Three organizations a writer changes about 6 times a second in all, while verify runs.
    const busy: Array<{ organizationId: string; providers: string[] }> = []
    for (const name of ['Steady C', 'Steady D', 'Steady E']) {
      const org = await insertOrganization(sql, { name })
      const providers: string[] = []
      for (let i = 0; i < 60; i++) {
        providers.push((await insertProvider(sql, org.id, { first_name: `P${i}` })).id)
      }
      busy.push({ organizationId: org.id, providers })
    }
    await pipeline.caughtUp(pipeline.projector!)
    const only = ['--org', busy.map((o) => o.organizationId).join(',')]
    let writes = 0
    let writing = true
    const writer = (async () => {
      for (let n = 0; writing; n++) {
        const org = busy[n % busy.length]!
        // Never providers[0]: those are tampered with below.
        const id = org.providers[1 + Math.floor(Math.random() * (org.providers.length - 1))]!
        await updateRow(sql, 'providers', id, { last_name: `Written ${n}` })
        writes++
        await sleep(150)
      }
    })()
    /** A verify run the writer wrote through. */
    const runWhileWriting = async () => {
      const from = writes
      const run = await verifyJson(only)
      expect(writes - from, 'writes during the run').toBeGreaterThan(5)
      return run
    }
    try {
      for (let run = 1; run <= 3; run++) {
        const { code, report } = await runWhileWriting()
        expect(
          report.organizations.filter((o) => o.status !== 'equal'),
          `untampered run ${run}`,
        ).toEqual([])
        expect(report.refused).toEqual([])
        expect(code).toBe(0)
      }
      const tampered = [busy[0]!, busy[2]!]
      for (const org of tampered) {
        const db = new Database(livePath(org.organizationId))
        db.prepare(
          `UPDATE doc_providers SET body = replace(body, '"P0', '"Tampered') WHERE id = ?`,
        ).run(org.providers[0])
        db.close()
      }
      for (let run = 1; run <= 2; run++) {
        const { code, report } = await runWhileWriting()
        expect(code).toBe(1)
        expect(report.unsettled, `tampered run ${run}`).toEqual([])
        const found = report.organizations.flatMap((o) =>
          o.resources.flatMap((r) =>
            [...r.differing.ids, ...r.missing.ids, ...r.extra.ids].map((id) => [
              o.organizationId,
              r.resource,
              id,
            ]),
          ),
        )
        expect(found, `tampered run ${run}`).toEqual(
          tampered
            .map((o) => [o.organizationId, 'providers', o.providers[0]])
            .sort((x, y) => (x[0]! < y[0]! ? -1 : 1)),
        )
      }
    } finally {
      writing = false
      await writer
      await pipeline.caughtUp(pipeline.projector!)
    }
    const repaired = await verifyJson([...only, '--repair'])
    expect(repaired.code).toBe(0)
    expect(repaired.report.repair?.rebuilt).toEqual(
      [busy[0]!.organizationId, busy[2]!.organizationId].sort(),
    )
  })

  it('names a source change the connector never saw (stopped, its slot dropped)', async () => {
    const sql = pipeline.sql
    await pipeline.connect.stop()
    await sql.query(`select pg_drop_replication_slot('credentialing_replica')`)
    await updateRow(sql, 'providers', b.providers[2]!, { last_name: 'Unseen' })
    const added = await insertProvider(sql, b.organizationId, { first_name: 'Unseen' })
    await deleteRow(sql, 'provider_identifiers', await identifierOf(b.providers[5]!))
    await deleteRow(sql, 'providers', b.providers[5]!)

    const { code, report } = await verifyJson()
    expect(code).toBe(1)
    expect(report.lag.debezium).toBe('no-slot')
    const ab = [a.organizationId, b.organizationId]
    expect(
      report.organizations.filter((o) => o.status !== 'equal' && !ab.includes(o.organizationId)),
    ).toEqual([])
    expect(
      report.organizations
        .filter((o) => ab.includes(o.organizationId))
        .map((o) => [o.organizationId, o.status]),
    ).toEqual(
      [
        [a.organizationId, 'equal'],
        [b.organizationId, 'drifted'],
      ].sort(),
    )
    expect(resource(report, b.organizationId, 'providers')).toEqual({
      resource: 'providers',
      equal: 4,
      differing: { count: 1, ids: [b.providers[2]] },
      missing: { count: 1, ids: [added.id] },
      extra: { count: 1, ids: [b.providers[5]] },
      changing: { count: 0, ids: [] },
    })
    const table = await verify(['--org', b.organizationId])
    expect(table.code).toBe(1)
    expect(table.stdout).toContain("Debezium's replication slot was not found")
    console.log(`verify report (a change the connector never saw):\n${table.stdout}`)

    // The topics never had the change: a rebuild from them cannot repair it, and the fallback,
    // Debezium's incremental snapshot, needs a streaming connector. Refused before anything is
    // written to the topics or PostgreSQL.
    const signals = async () =>
      Number(
        (await pipeline.postgres.query<{ n: string }>('select count(*) as n from debezium_signal'))
          .rows[0]!.n,
      )
    const repair = await verify(['--org', b.organizationId, '--repair'])
    expect(repair.code, repair.stderr).toBe(2)
    expect(repair.stderr.trim().split('\n').at(-1)).toBe(
      "verify: cannot repair from the source: Debezium's replication slot credentialing_replica is missing, so no connector is streaming to read the snapshot signal (VERIFY_SLOT_NAME). Start the connector, then run verify --repair again",
    )
    expect(await signals()).toBe(0)
    const still = await verifyJson(['--org', b.organizationId])
    expect(resource(still.report, b.organizationId, 'providers')).toMatchObject({
      differing: { count: 1 },
      missing: { count: 1 },
      extra: { count: 1 },
    })
  })

  it('--repair falls back to an incremental snapshot of the drifted organization alone; verify is then clean, and no other file was written', async () => {
    // The connector back, streaming from a new slot (its offsets went with the old worker, and
    // no snapshot): the changes made while it was away stay missed.
    await pipeline.restartConnect({ 'snapshot.mode': 'no_data' })
    const missed = await verifyJson()
    expect(missed.code).toBe(1)
    expect(missed.report.lag.debezium).not.toBe('no-slot')
    expect(
      missed.report.organizations.filter((o) => o.status !== 'equal').map((o) => o.organizationId),
    ).toEqual([b.organizationId])

    // Every other organization's file, byte for byte (and its WAL, where the writes go first).
    const g = currentGeneration(pipeline.dataDir)!
    const others = organizationsWithFiles(g).filter((id) => id !== b.organizationId)
    expect(others).toContain(a.organizationId)
    const fileState = (id: string) => {
      const path = livePath(id)
      const wal = `${path}-wal`
      return `${digest(path)} ${existsSync(wal) ? digest(wal) : '-'}`
    }
    const before = new Map(others.map((id) => [id, fileState(id)]))

    // Without INSERT on the signalling table: refused before any tombstone or signal is written.
    const providersTopic = `${TOPIC_PREFIX}.public.providers`
    const endBefore = await topicEnd(pipeline.kafka.brokers, providersTopic)
    const noGrant = await verify(['--repair'])
    expect(noGrant.code, noGrant.stderr).toBe(2)
    expect(noGrant.stderr.trim().split('\n').at(-1)).toBe(
      'verify: role replica_verify may not signal Debezium: GRANT INSERT ON public.debezium_signal TO replica_verify (VERIFY_SIGNAL_TABLE)',
    )
    expect(await topicEnd(pipeline.kafka.brokers, providersTopic)).toBe(endBefore)
    // docs/operations.md's grant for --repair.
    await pipeline.postgres.query('GRANT INSERT ON debezium_signal TO replica_verify')

    const run = await verify(['--repair'], { LOG_LEVEL: 'info' })
    expect(run.code, `${run.stdout}\n${run.stderr.slice(-2_000)}`).toBe(0)
    console.log(`verify --repair that needed the source:\n${run.stdout}`)
    const [found, replayed, fromSource] = run.stdout.split(/\nRepair(?: from the source)?: /)
    expect(found).toContain(`${b.organizationId} providers differing: ${b.providers[2]}`)
    expect(replayed).toMatch(new RegExp(`^rebuilt ${b.organizationId} from the topics`))
    expect(replayed).toMatch(/Drift: 1 of 1 organization differs from PostgreSQL/)
    expect(fromSource).toMatch(
      new RegExp(
        `^Debezium re-read ${b.organizationId} \\(incremental snapshot [0-9a-f-]{36}, completed in [\\d.]+ s\\); 2 rows PostgreSQL lacks deleted by tombstones \\(providers ${b.providers[5]}, provider_identifiers [0-9a-f-]{36}\\); checked again:`,
      ),
    )
    expect(fromSource).toMatch(new RegExp(`^${b.organizationId} +\\(all\\) +\\d+ +0 +0 +0$`, 'm'))
    expect(fromSource).toMatch(/Re-checked 1 organization: no drift/)
    // The signal named that organization alone, table by table.
    const signal = (
      await pipeline.postgres.query<{ data: string }>(
        `select data from debezium_signal where type = 'execute-snapshot'`,
      )
    ).rows.map((r) => JSON.parse(r.data) as { 'additional-conditions': { filter: string }[] })
    expect(signal).toHaveLength(1)
    for (const c of signal[0]!['additional-conditions']) {
      expect(c.filter).toMatch(new RegExp(`^(organization_id|id) IN \\('${b.organizationId}'\\)$`))
    }
    // And nothing else stays in the table: each chunk's watermark went as the chunk closed
    // (insert_delete), where the default kept two rows a chunk for good.
    const rows = await pipeline.postgres.query<{ type: string }>('select type from debezium_signal')
    expect(rows.rows.map((r) => r.type)).toEqual(['execute-snapshot'])

    for (const id of others) expect(fileState(id), `the file of ${id}`).toBe(before.get(id))
    const clean = await verifyJson()
    expect(clean.code).toBe(0)
    expect(clean.report.drift).toBe(false)
    expect(resource(clean.report, b.organizationId, 'providers').equal).toBe(6)
    expect(servedBody(b.organizationId, b.providers[2]!)).toContain('Unseen')
  })
})

const EXTRA_DOCUMENT = '00000000-0000-4000-8000-0000000000ee'
const BIG_SIZE = '9007199254740993'
const UNKNOWN_ORGANIZATION = '00000000-0000-4000-8000-00000000abcd'
const MADE_UP_KEY = '00000000-0000-4000-8000-0000000000fe'

/** Copies a document of a live file under another id: a document the source does not have. */
function copyDocument(db: Database.Database, fromId: string, id: string): void {
  const columns = (db.prepare(`PRAGMA table_info(doc_documents)`).all() as Array<{ name: string }>)
    .map((c) => c.name)
    .filter((name) => name !== 'id')
  const list = columns.map((c) => `"${c}"`).join(', ')
  db.prepare(
    `INSERT INTO doc_documents (id, ${list}) SELECT ?, ${list} FROM doc_documents WHERE id = ?`,
  ).run(id, fromId)
}
