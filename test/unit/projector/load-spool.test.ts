// An initial load's spool: events regrouped by organization, each organization's in their order.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { LoadSpool } from '../../../projector/lanes/load-spool.ts'
import type { OrganizationEvent } from '../../../projector/storage/organization-file.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function spoolIn(): { spool: LoadSpool; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'replica-spool-'))
  dirs.push(dir)
  return { spool: new LoadSpool(join(dir, 'spool')), dir }
}

/** An event whose id and offset say where it came from; `padding` makes it large. */
function event(id: string, offset: number, padding = ''): OrganizationEvent {
  return {
    change: {
      kind: 'upsert',
      table: 'providers',
      id,
      row: { id, note: padding } as never,
      position: { lsn: offset, snapshot: false, committedAtMs: undefined },
    },
    origin: { topic: 't', partition: 0, offset },
  }
}

function drained(spool: LoadSpool, partEvents: number): Array<[string, number[][]]> {
  const seen: Array<[string, number[][]]> = []
  spool.drain(partEvents, (organizationId, parts) => {
    seen.push([organizationId, [...parts].map((part) => part.map((e) => e.origin.offset))])
  })
  return seen
}

describe('LoadSpool', () => {
  it('hands back each organization in the order first seen, its events in their order, in parts', () => {
    const { spool } = spoolIn()
    spool.append('b', [event('1', 1), event('2', 2)])
    spool.append('a', [event('3', 3)])
    spool.append('b', [event('4', 4)])
    spool.touch('c')
    spool.append('a', [event('5', 5), event('6', 6)])
    expect(spool.files).toBe(3)
    expect(spool.events).toBe(6)

    // Parts are whole appends, closed once they reach 2 events; an organization touched only
    // gets one empty part, so that its file is made.
    expect(drained(spool, 2)).toEqual([
      ['b', [[1, 2], [4]]],
      ['a', [[3, 5, 6]]],
      ['c', [[]]],
    ])
    expect(spool.files).toBe(0)
    expect(drained(spool, 2)).toEqual([])
  })

  it('keeps what it spooled whole across appends larger than its write buffer, and after a clear', () => {
    const { spool } = spoolIn()
    const big = 'x'.repeat(3 << 20)
    spool.append('a', [event('1', 1)])
    spool.append('b', [event('2', 2, big)])
    spool.append('a', [event('3', 3, big), event('4', 4)])
    const rows: Array<[string, string[]]> = []
    spool.drain(100, (organizationId, parts) => {
      for (const part of parts) {
        rows.push([
          organizationId,
          part.map(
            (e) =>
              `${e.change.kind === 'upsert' ? e.change.id : ''}:${(e.change as unknown as { row: { note: string } }).row.note.length}`,
          ),
        ])
      }
    })
    expect(rows).toEqual([
      ['a', ['1:0', '3:3145728', '4:0']],
      ['b', ['2:3145728']],
    ])

    spool.append('c', [event('5', 5)])
    spool.clear()
    spool.append('d', [event('6', 6)])
    expect(drained(spool, 10)).toEqual([['d', [[6]]]])
    spool.close()
  })

  it('leaves no file behind: it is unlinked as soon as it is opened', () => {
    const { spool, dir } = spoolIn()
    spool.append('a', [event('1', 1)])
    expect(readdirSync(dir)).toEqual([])
    spool.close()
  })
})
