// useOrganizationFile (projector/organization-file.ts): the open files a writer keeps, on real
// organization files in a temp directory.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  openOrganizationFile,
  useOrganizationFile,
  type OrganizationFile,
} from '../../../projector/organization-file.ts'
import { uuid } from '../../support/debezium.ts'

const dir = mkdtempSync(join(tmpdir(), 'replica-open-files-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('useOrganizationFile', () => {
  it('opens a file once, keeps the most recently used, and closes the least recently used past the limit', () => {
    const files = new Map<string, OrganizationFile>()
    const [a, b, c] = [uuid(1), uuid(2), uuid(3)]
    const openedIds: string[] = []
    const use = (id: string) =>
      useOrganizationFile(
        files,
        id,
        2,
        () => openOrganizationFile(id, join(dir, `${id}.db`), { offsetGuard: false }),
        (file) => openedIds.push(file.organizationId),
      )

    const fileA = use(a)
    expect(use(a)).toBe(fileA)
    use(b)
    use(a) // a is now the most recently used: b goes first
    use(c)
    expect([...files.keys()]).toEqual([a, c])
    expect(openedIds).toEqual([a, b, c])
    expect(() => fileA.setCacheKiB(2000)).not.toThrow() // still open

    use(b) // reopened: a, the least recently used now, is closed
    expect([...files.keys()]).toEqual([c, b])
    expect(openedIds).toEqual([a, b, c, b])
    expect(() => fileA.setCacheKiB(2000)).toThrow(/not open/)
    for (const file of files.values()) file.close()
  })
})
