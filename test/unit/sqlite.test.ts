// src/sqlite.ts: how the projector's writer connections journal and sync, on real files.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { inOpenTransaction, openForWriting, useJournal } from '../../src/sqlite.ts'

const dir = mkdtempSync(join(tmpdir(), 'replica-sqlite-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** SQLite's `PRAGMA synchronous` as a number: 0 OFF, 1 NORMAL, 2 FULL. */
const OFF = 0
const NORMAL = 1
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

  // A rebuild's generation is synced whole before it is published (projector/storage/durable.ts):
  // a cut before that abandons it, so its rollback-journal commits need no sync of their own, and
  // its journal only undoes what fails in the process: in memory, no file.
  it('leaves a rebuild’s rollback-journal commits to the sync at publish, and WAL to its writer', () => {
    const path = join(dir, 'rebuild.db')
    const db = openForWriting(path, 'organization', 'rollback', 'atPublish')
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('memory')
      expect(db.pragma('synchronous', { simple: true })).toBe(OFF)
      db.exec('BEGIN')
      db.prepare("INSERT INTO replica_meta (key, value) VALUES ('k', 'v')").run()
      expect(existsSync(`${path}-journal`)).toBe(false)
      db.exec('ROLLBACK')
      expect(db.prepare("SELECT count(*) FROM replica_meta WHERE key = 'k'").pluck().get()).toBe(0)
      // Its documents built, the file is served once published: its log is synced by the lanes.
      useJournal(db, 'wal', 'atPublish')
      expect(db.pragma('synchronous', { simple: true })).toBe(NORMAL)
      // A published generation's rollback journal is never left unsynced: a cut could tear it.
      useJournal(db, 'rollback', 'byWriter')
      expect(db.pragma('synchronous', { simple: true })).toBe(FULL)
    } finally {
      db.close()
    }
  })
})

describe('a body run in the open transaction', () => {
  // A live batch's document refresh joins the batch's transaction: a savepoint would copy every
  // page it first touches to a sub-journal, and the batch rolls back whole on any failure anyway.
  it('joins the transaction open on the connection, and is a transaction of its own otherwise', () => {
    const db = openForWriting(join(dir, 'joined.db'), 'organization')
    const insert = db.prepare('INSERT INTO replica_meta (key, value) VALUES (?, ?)')
    const keys = () => db.prepare('SELECT key FROM replica_meta ORDER BY key').pluck().all()
    const failing = inOpenTransaction(db, (key: string) => {
      insert.run(key, 'v')
      throw new Error('fails after its write')
    })
    try {
      // Alone, its write goes with its failure.
      expect(() => failing('alone')).toThrow('fails after its write')
      expect(db.inTransaction).toBe(false)
      expect(keys()).not.toContain('alone')
      // Joined, no savepoint takes its write back: the transaction's owner decides.
      db.exec('BEGIN')
      expect(() => failing('joined')).toThrow('fails after its write')
      expect(db.inTransaction).toBe(true)
      db.exec('COMMIT')
      expect(keys()).toContain('joined')
    } finally {
      db.close()
    }
  })
})
