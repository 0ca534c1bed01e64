// Organizations in shared files (ORGANIZATION_FILES), as a user runs them: the projector applies a
// file of events into a generation of shared files, and the api serves each key its
// organization's documents from them over HTTP, and nothing of the organizations beside it.
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { currentGeneration } from '../../../src/layout.ts'
import { sharedFileOf } from '../../../src/organization-files.ts'
import { startApi, type RunningApi } from '../api/server.ts'
import {
  groupRow,
  membershipRow,
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

/** Each organization: its key, a provider, a group, and its provider's membership in the next
 * organization's group (PostgreSQL's foreign keys allow it; the replica shows none of it). */
function eventsOf(n: number): unknown[] {
  const org = organization(n)
  const next = (n + 1) % ORGANIZATIONS
  return [
    record({ table: 'organizations', op: 'r', after: organizationRow(org) }),
    record({
      table: 'api_keys',
      op: 'r',
      after: {
        id: uuid(0x7300 + n),
        organization_id: org,
        name: 'test key',
        key_hash: createHash('sha256').update(key(n)).digest('hex'),
        scopes: ['providers:read', 'groups:read'],
        created_at: organizationRow(org).created_at,
        expires_at: null,
        revoked_at: null,
      },
    }),
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
