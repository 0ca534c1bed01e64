// The organization of bench:api's live run: written by the projector itself, not by the api tests'
// fixture, so that a steady change stream can be applied to it by the same path
// (bench/live-writer.ts). The generated dataset (scripts/dataset, cached in .cache/bench) of one
// organization is cut in two: its snapshot (Debezium's `r` events), loaded by
// `projector --from-file` as an initial load, and its streamed changes, left in a file for the
// writer to apply during the run.
import Database from 'better-sqlite3'
import { closeSync, createReadStream, mkdtempSync, openSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { Position } from '../api/cursor.ts'
import { currentGeneration } from '../src/layout.ts'
import { type BenchEncoding, generatedDataset } from './dataset.ts'
import { projectFile } from './projector-run.ts'

export interface LiveOrganization {
  dataDir: string
  organizationId: string
  /** A raw key with providers:read and without providers:read:sensitive. */
  key: string
  /** The streamed changes, for bench/live-writer.ts. */
  streamFile: string
  events: { snapshot: number; stream: number }
}

/** Whether a dataset line is a snapshot read: its payload's op, a key no stored text spells so. */
export function isSnapshotLine(line: string): boolean {
  return line.includes('"op":"r"')
}

/** Loads the snapshot of one generated organization into a new data directory. */
export async function liveOrganization(
  providers: number,
  updateRounds: number,
  log: (line: string) => void,
  encoding: BenchEncoding = 'schemas',
): Promise<LiveOrganization> {
  const dataset = await generatedDataset(
    { organizations: 1, providersPerOrganization: providers, updateRounds },
    log,
    encoding,
  )
  const organization = dataset.organizations[0]
  const key = organization?.keys.find(
    (k) => k.scopes.includes('providers:read') && !k.scopes.includes('providers:read:sensitive'),
  )
  if (organization === undefined || key === undefined) {
    throw new Error('the generated organization has no key that reads /providers')
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-api-live-'))
  const loadFile = join(dir, 'snapshot.ndjson')
  const streamFile = join(dir, 'stream.ndjson')
  // Lines are written as they are read: the snapshot alone is some 700 MB of text.
  const snapshot = new LineFile(loadFile)
  const stream = new LineFile(streamFile)
  try {
    for await (const line of createInterface({ input: createReadStream(dataset.path) })) {
      if (line !== '') (isSnapshotLine(line) ? snapshot : stream).add(line)
    }
  } finally {
    snapshot.close()
    stream.close()
  }
  const dataDir = join(dir, 'data')
  log(`loading ${snapshot.lines} snapshot events of ${providers} providers for the live run...`)
  await projectFile(loadFile, dataDir)
  return {
    dataDir,
    organizationId: organization.id,
    key: key.rawKey,
    streamFile,
    events: { snapshot: snapshot.lines, stream: stream.lines },
  }
}

/** The `[stamp, id]` of every row of a list table, in list order, read from the file. */
export function listPositions(path: string, table: string): Position[] {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    return db
      .prepare(`SELECT updated_at, id FROM ${table} ORDER BY updated_at, id`)
      .raw(true)
      .all() as Position[]
  } finally {
    db.close()
  }
}

/** The file of an organization in the data directory's current generation. */
export function organizationFile(dataDir: string, organizationId: string): string {
  const generation = currentGeneration(dataDir)
  if (generation === undefined) throw new Error(`${dataDir} has no current generation`)
  return generation.organizationPath(organizationId, null)
}

/** A file written a line at a time, in writes of about a megabyte. */
class LineFile {
  lines = 0
  readonly #fd: number
  #pending: string[] = []
  #pendingChars = 0

  constructor(path: string) {
    this.#fd = openSync(path, 'w')
  }

  add(line: string): void {
    this.#pending.push(line)
    this.#pendingChars += line.length + 1
    this.lines++
    if (this.#pendingChars > 1 << 20) this.#flush()
  }

  close(): void {
    this.#flush()
    closeSync(this.#fd)
  }

  #flush(): void {
    if (this.#pending.length > 0) writeSync(this.#fd, `${this.#pending.join('\n')}\n`)
    this.#pending = []
    this.#pendingChars = 0
  }
}
