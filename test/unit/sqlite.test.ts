// src/sqlite.ts: how the projector's writer connections journal and sync, on real files.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { openForWriting, useJournal } from '../../src/sqlite.ts'

const dir = mkdtempSync(join(tmpdir(), 'replica-sqlite-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** SQLite's `PRAGMA synchronous` as a number: 1 NORMAL, 2 FULL. */
const FULL = 2

describe('a writer connection', () => {
  // Kafka offsets are committed after the files: a commit a power cut could take back (WAL with
  // synchronous=NORMAL) would be an applied change the projector never reads again.
  it('syncs every commit to disk, with a write-ahead log and with a rollback journal', () => {
    const db = openForWriting(join(dir, 'control.db'), 'control')
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal')
      expect(db.pragma('synchronous', { simple: true })).toBe(FULL)
      useJournal(db, 'rollback')
      expect(db.pragma('journal_mode', { simple: true })).toBe('truncate')
      expect(db.pragma('synchronous', { simple: true })).toBe(FULL)
      useJournal(db, 'wal')
      expect(db.pragma('synchronous', { simple: true })).toBe(FULL)
    } finally {
      db.close()
    }
  })
})
