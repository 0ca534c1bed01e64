// An initial load's events regrouped by file before they touch it (lane-core.ts).
//
// The topics interleave organizations: with thousands of them, a batch of 5,000 events touches
// most of a lane's files, so a load that applied each batch as it came held every file open
// through the whole load, each with its connection, parsed schema, prepared statements and page
// cache (about 500 KB a file: 1.5 GB at 3,000 organizations), and spilled their caches every few
// touches. A lane that holds more files than it keeps open appends the others' decoded events
// here instead, and at the round's commit applies them file by file (a file of its own, or one
// organizations share: its key, src/organization-files.ts): each opened once a round, written in
// one pass, committed and closed.
//
// The spool is scratch: an unlinked file (nothing is left on disk, even after a crash), never
// synced. Losing it loses nothing: its events' offsets are committed only after the round that
// drains it (the commit barrier), so a restart replays them.
import { closeSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs'
import { deserialize, serialize } from 'node:v8'
import type { OrganizationEvent } from '../storage/organization-file.ts'

/** Bytes buffered before a write: sequential appends, one system call per MB. */
const WRITE_BYTES = 1 << 20

export class LoadSpool {
  readonly #fd: number
  #buffer = Buffer.allocUnsafe(WRITE_BYTES)
  #buffered = 0
  /** Bytes in the file (the buffered ones follow them). */
  #flushed = 0
  /**
   * Each spooled file's runs, in order: a run is the bytes of one `append` (its events in
   * their order), kept as [offset, length] pairs. Insertion order is the order of first sight.
   */
  readonly #runs = new Map<string, number[]>()
  #events = 0

  /** `path` names the scratch file only until it is opened: it is unlinked at once. */
  constructor(path: string) {
    this.#fd = openSync(path, 'w+')
    unlinkSync(path)
  }

  /** Files spooled since the last drain. */
  get files(): number {
    return this.#runs.size
  }

  /** Events spooled since the last drain. */
  get events(): number {
    return this.#events
  }

  has(fileKey: string): boolean {
    return this.#runs.has(fileKey)
  }

  /** The file takes part in the round even with no events (it is created). */
  touch(fileKey: string): void {
    if (!this.#runs.has(fileKey)) this.#runs.set(fileKey, [])
  }

  /** Appends a file's events, in their order, after those it spooled before. */
  append(fileKey: string, events: readonly OrganizationEvent[]): void {
    if (events.length === 0) return this.touch(fileKey)
    const bytes = serialize(events)
    let runs = this.#runs.get(fileKey)
    if (runs === undefined) this.#runs.set(fileKey, (runs = []))
    runs.push(this.#flushed + this.#buffered, bytes.length)
    this.#events += events.length
    this.#write(bytes)
  }

  #write(bytes: Buffer): void {
    if (this.#buffered + bytes.length > this.#buffer.length) this.#flush()
    if (bytes.length > this.#buffer.length) {
      this.#flushed += writeAll(this.#fd, bytes, this.#flushed)
      return
    }
    bytes.copy(this.#buffer, this.#buffered)
    this.#buffered += bytes.length
  }

  #flush(): void {
    if (this.#buffered === 0) return
    this.#flushed += writeAll(this.#fd, this.#buffer.subarray(0, this.#buffered), this.#flushed)
    this.#buffered = 0
  }

  /**
   * Hands each spooled file, in the order first seen, its events in their order, in
   * parts of about `partEvents` (a part is whole runs: at least one), then empties the spool.
   * A throw from `apply` leaves the spool as it was; the caller rolls back and `clear`s it.
   */
  drain(
    partEvents: number,
    apply: (fileKey: string, parts: Iterable<OrganizationEvent[]>) => void,
  ): void {
    this.#flush()
    for (const [fileKey, runs] of this.#runs) {
      apply(fileKey, this.#parts(runs, partEvents))
    }
    this.clear()
  }

  *#parts(runs: number[], partEvents: number): Generator<OrganizationEvent[]> {
    let part: OrganizationEvent[] = []
    let scratch = this.#buffer
    for (let i = 0; i < runs.length; i += 2) {
      const length = runs[i + 1]!
      if (length > scratch.length) scratch = Buffer.allocUnsafe(length)
      readAll(this.#fd, scratch.subarray(0, length), runs[i]!)
      const events = deserialize(scratch.subarray(0, length)) as OrganizationEvent[]
      if (part.length === 0) part = events
      else for (const event of events) part.push(event)
      if (part.length >= partEvents) {
        yield part
        part = []
      }
    }
    if (part.length > 0 || runs.length === 0) yield part
  }

  /** Forgets every spooled event (drained, or rolled back) and gives the disk space back. */
  clear(): void {
    this.#runs.clear()
    this.#events = 0
    this.#buffered = 0
    this.#flushed = 0
    ftruncateSync(this.#fd)
  }

  close(): void {
    closeSync(this.#fd)
  }
}

function writeAll(fd: number, bytes: Buffer, position: number): number {
  for (let done = 0; done < bytes.length;) {
    done += writeSync(fd, bytes, done, bytes.length - done, position + done)
  }
  return bytes.length
}

function readAll(fd: number, into: Buffer, position: number): void {
  for (let done = 0; done < into.length;) {
    const read = readSync(fd, into, done, into.length - done, position + done)
    if (read === 0) throw new Error('the load spool ended early: it was truncated under its lane')
    done += read
  }
}
