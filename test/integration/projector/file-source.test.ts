// The projector as users run it on a file: `npm run projector -- --from-file FILE`.
import Database from 'better-sqlite3'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { currentGeneration } from '../../../src/layout.ts'
import {
  ORG_A,
  identifierRow,
  organizationRow,
  providerRow,
  record,
  uuid,
} from '../../support/debezium.ts'
import { runEntry } from '../../support/processes.ts'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'replica-file-'))
  dirs.push(dir)
  return dir
}

function ndjson(records: unknown[]): string {
  return records.map((r) => JSON.stringify(r)).join('\n') + '\n'
}

function allBytes(dir: string): Buffer {
  const parts: Buffer[] = []
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) parts.push(readFileSync(join(entry.parentPath, entry.name)))
  }
  return Buffer.concat(parts)
}

describe('projector --from-file', () => {
  it('applies a file, dead-letters bad events with their origin, and stores nothing never-exposed', async () => {
    const dir = tempDir()
    const file = join(dir, 'events.ndjson')
    const noKey = { ...providerRow(uuid(2), ORG_A) } as Record<string, unknown>
    delete noKey.npi
    writeFileSync(
      file,
      ndjson([
        record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A) }),
        record({ table: 'providers', op: 'r', after: providerRow(uuid(1), ORG_A), offset: 10 }),
        record({
          table: 'provider_identifiers',
          op: 'c',
          after: identifierRow(uuid(3), uuid(1), ORG_A),
          offset: 11,
        }),
        record({ table: 'providers', op: 'c', after: noKey, offset: 12 }),
        {
          topic: 'product.public.providers',
          partition: 0,
          offset: '13',
          key: null,
          value: 'not json at all',
        },
        record({ table: 'mystery', op: 'c', after: { id: uuid(9) }, offset: 14 }),
        record({
          table: 'payer_portal_logins',
          op: 'c',
          after: {
            id: uuid(8),
            organization_id: ORG_A,
            username: 'u',
            password_cipher: 'PORTAL-SECRET',
          },
          offset: 15,
        }),
      ]),
    )
    const dataDir = join(dir, 'data')
    const run = await runEntry('projector/main.ts', ['--from-file', file], {
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
    })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const logLines = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(logLines.filter((l) => l.msg === 'dead-lettered a change event')).toHaveLength(3)
    expect(logLines.at(-1)).toMatchObject({ msg: 'file applied', records: 7, deadLettered: 3 })

    const letters = readFileSync(join(dataDir, 'dead-letters.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { offset: string; headers: Record<string, string> })
    expect(letters.map((l) => [l.offset, l.headers['dlq.reason']])).toEqual([
      ['12', 'schema_mismatch'],
      ['13', 'unparseable'],
      ['14', 'unknown_table'],
    ])
    expect(letters[0]!.headers).toMatchObject({
      'dlq.origin.topic': 'product.public.providers',
      'dlq.origin.partition': '0',
      'dlq.origin.offset': '12',
    })

    const generation = currentGeneration(dataDir)!
    const db = new Database(generation.organizationPath(ORG_A), { readonly: true })
    const body = db
      .prepare('SELECT body FROM doc_providers WHERE id = ?')
      .pluck()
      .get(uuid(1)) as string
    db.close()
    expect(JSON.parse(body)).toMatchObject({
      id: uuid(1),
      name: 'Ada Lovelace',
      providerIds: [{ id: uuid(3), value: 'CA-123' }],
    })

    const bytes = allBytes(dataDir)
    for (const secret of ['123-45-6789', 'do not show', 'PORTAL-SECRET'])
      expect(bytes.includes(secret)).toBe(false)
  })

  it('replays its dead-letter file after a fix without reading its own new letters', async () => {
    const dir = tempDir()
    const file = join(dir, 'events.ndjson')
    const bad = (n: number) => {
      const row = { ...providerRow(uuid(n), ORG_A) } as Record<string, unknown>
      delete row.npi
      return record({ table: 'providers', op: 'c', after: row, offset: n })
    }
    writeFileSync(file, ndjson([bad(1), bad(2), bad(3)]))
    const dataDir = join(dir, 'data')
    const env = { DATA_DIR: dataDir, LOG_LEVEL: 'warn' }
    expect((await runEntry('projector/main.ts', ['--from-file', file], env)).code).toBe(0)
    const deadLetters = join(dataDir, 'dead-letters.ndjson')
    const first = readFileSync(deadLetters, 'utf8')
    expect(first.trim().split('\n')).toHaveLength(3)

    // Still bad (nothing was fixed): each comes back once, into a new file; the replayed one is
    // kept aside as it was.
    const replay = await runEntry('projector/main.ts', ['--from-file', deadLetters], env)
    expect(replay.stderr).toBe('')
    expect(replay.code).toBe(0)
    expect(readFileSync(deadLetters, 'utf8').trim().split('\n')).toHaveLength(3)
    const aside = readdirSync(dataDir).filter((f) => f.startsWith('dead-letters.replayed-'))
    expect(aside).toHaveLength(1)
    expect(readFileSync(join(dataDir, aside[0]!), 'utf8')).toBe(first)
  })

  it('logs its progress through the file in bytes when stderr is not a terminal', async () => {
    const dir = tempDir()
    const file = join(dir, 'events.ndjson')
    const providers = Array.from({ length: 5_000 }, (_, i) =>
      record({ table: 'providers', op: 'r', after: providerRow(uuid(100 + i), ORG_A) }),
    )
    writeFileSync(
      file,
      ndjson([
        record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A) }),
        ...providers,
      ]),
    )
    const size = statSync(file).size
    // More than one of the reader's 4 MB chunks: a line is due between them.
    expect(size).toBeGreaterThan(4 << 20)
    const run = await runEntry('projector/main.ts', ['--from-file', file], {
      DATA_DIR: join(dir, 'data'),
      LOG_LEVEL: 'info',
      PROGRESS_INTERVAL_MS: '1',
    })
    // No bar: stderr is a pipe here.
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    const during = lines.filter((l) => l.msg === 'progress')
    expect(during.length).toBeGreaterThanOrEqual(1)
    for (const line of during) {
      expect(line).toMatchObject({ task: 'from-file', unit: 'bytes', total: size })
      expect(line.done).toBeGreaterThan(0)
      expect(line.done).toBeLessThanOrEqual(size)
      expect(line.ratePerSecond).toBeGreaterThan(0)
    }
    // Part way: the first chunk read, time left to go.
    expect(during[0]!.done).toBeLessThan(size)
    expect(during[0]!.etaSeconds).toBeGreaterThan(0)
    const finished = lines.filter((l) => l.msg === 'progress finished')
    expect(finished).toEqual([
      expect.objectContaining({ task: 'from-file', done: size, total: size, etaSeconds: 0 }),
    ])
    expect(lines.at(-1)).toMatchObject({ msg: 'file applied', records: 5_001 })
  })

  it('stops with a message naming the line when a line is not a record', async () => {
    const dir = tempDir()
    const file = join(dir, 'broken.ndjson')
    writeFileSync(
      file,
      ndjson([record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A) })]) +
        '{"topic": \n',
    )
    const run = await runEntry('projector/main.ts', ['--from-file', file], {
      DATA_DIR: join(dir, 'data'),
      LOG_LEVEL: 'silent',
    })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('line 2')
    expect(run.stderr).not.toMatch(/\n\s+at /)
  })

  it('refuses to start on a bad configuration value, naming the variable', async () => {
    const dir = tempDir()
    const run = await runEntry('projector/main.ts', ['--from-file', join(dir, 'x')], {
      DATA_DIR: dir,
      LOG_LEVEL: 'loud',
      KAFKA_BROKERS: 'nohostport',
    })
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('LOG_LEVEL')
    expect(run.stderr).toContain('KAFKA_BROKERS')
  })
})
