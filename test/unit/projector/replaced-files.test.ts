import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import pino from 'pino'
import {
  claimHandovers,
  replacedFiles,
  requestHandover,
} from '../../../projector/storage/handover.ts'
import { prepareGeneration } from '../../../src/layout.ts'

const A = '0a000000-0000-4000-8000-00000000000a'
const B = '0b000000-0000-4000-8000-00000000000b'
const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function generationWith(names: string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'replaced-files-'))
  dirs.push(dir)
  const generation = prepareGeneration(dir, 'g1')
  for (const name of names) writeFileSync(join(generation.organizationsDir, name), '')
  return generation
}

describe('the files a swap replaced', () => {
  it('are those of an organization other than its served file, side files included', () => {
    const generation = generationWith([
      `${A}.db`,
      `${A}.db-wal`,
      `${A}.db-shm`,
      `${A}.r1.db`,
      `${A}.r1.db-wal`,
      `${B}.db`,
      `${B}.r2.db`,
    ])
    // A is served from its rebuilt file; B from its default one (no entry in control.db).
    const served = new Map([[A, `${A}.r1.db`]])
    expect(
      replacedFiles(generation, served)
        .map((p) => basename(p))
        .sort(),
    ).toEqual([`${A}.db`, `${A}.db-shm`, `${A}.db-wal`, `${B}.r2.db`])
  })

  it('leave alone an organization whose hand-over is pending: its new file is not served yet', () => {
    const generation = generationWith([`${B}.db`, `${B}.r2.db`])
    requestHandover(generation, {
      fileKey: B,
      file: `${B}.r2.db`,
      organizations: [B],
      position: [],
      requestedAt: new Date(0).toISOString(),
      requestedBy: 'test',
    })
    expect(replacedFiles(generation, new Map())).toEqual([])
  })

  it('are, for a shared file, its versions other than the one its key is served from', () => {
    const generation = generationWith([
      'shared-0000.db',
      'shared-0000.db-wal',
      'shared-0000.r1.db',
      'shared-0001.db',
      'shared-0001.r2.db',
    ])
    // shared-0000 is served from its rebuilt version, shared-0001 from its first file.
    const served = new Map([['shared-0000.db', 'shared-0000.r1.db']])
    expect(
      replacedFiles(generation, served)
        .map((p) => basename(p))
        .sort(),
    ).toEqual(['shared-0000.db', 'shared-0000.db-wal', 'shared-0001.r2.db'])
    requestHandover(generation, {
      fileKey: 'shared-0001.db',
      file: 'shared-0001.r2.db',
      organizations: [A, B],
      position: [],
      requestedAt: new Date(0).toISOString(),
      requestedBy: 'test',
    })
    expect(replacedFiles(generation, served).map((p) => basename(p))).not.toContain(
      'shared-0001.r2.db',
    )
  })
})

describe('claimHandovers', () => {
  const request = (fileKey: string, file: string) => ({
    fileKey,
    file,
    organizations: [A],
    position: [],
    requestedAt: new Date(0).toISOString(),
    requestedBy: 'test',
  })

  it("takes a request for a version of its key's file, and sets aside one naming another's", () => {
    const generation = generationWith([])
    requestHandover(generation, request('shared-0003.db', 'shared-0003.r1.db'))
    requestHandover(generation, request(A, `${A}.r1.db`))
    // A shared key naming another shared file, its first file, or an organization's file.
    requestHandover(generation, request('shared-0004.db', 'shared-0005.r1.db'))
    requestHandover(generation, request('shared-0006.db', 'shared-0006.db'))
    requestHandover(generation, request(B, 'shared-0007.r1.db'))
    const taken = claimHandovers(generation, pino({ level: 'silent' }))
    expect(taken.map((r) => r.fileKey).sort()).toEqual([A, 'shared-0003.db'].sort())
  })
})
