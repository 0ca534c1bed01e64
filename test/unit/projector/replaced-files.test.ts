import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { replacedFiles, requestHandover } from '../../../projector/storage/handover.ts'
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
      organizationId: B,
      file: `${B}.r2.db`,
      position: [],
      requestedAt: new Date(0).toISOString(),
      requestedBy: 'test',
    })
    expect(replacedFiles(generation, new Map())).toEqual([])
  })
})
