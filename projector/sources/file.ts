// The NDJSON file source: one Kafka record per line (the format: ../decode/file-line.ts). The
// embedded default for a first run without Kafka, and how dead letters are replayed. It reads the
// file as bytes, in chunks, into batches: of records (readRecordBatches), or of lines left
// unparsed for the lanes to read (readLineBatches).
import { closeSync, openSync, readSync, statSync } from 'node:fs'
import { open } from 'node:fs/promises'
import type { SourceRecord } from '../decode/decode.ts'
import { LineReader, type LineBatch } from '../decode/file-line.ts'
import { isWhitespace } from '../decode/wrapped-json.ts'

const CHUNK_BYTES = 4 << 20
const LF = 0x0a
const CR = 0x0d

/**
 * Reads the file in batches of records; a bad line stops the run with its line number.
 * `onBytesRead` hears of each chunk's bytes once its lines are in batches (progress).
 */
export async function* readRecordBatches(
  path: string,
  batchSize: number,
  onBytesRead?: (bytes: number) => void,
): AsyncGenerator<SourceRecord[]> {
  const reader = new LineReader()
  let batch: SourceRecord[] = []
  const collector: LineCollector<SourceRecord[]> = {
    add(buf, start, end, lineNumber) {
      const record = reader.record(buf, start, end, lineNumber)
      if (record !== undefined) batch.push(record)
    },
    size: () => batch.length,
    // Batches of exactly batchSize records, as if each line were checked on its own.
    *full() {
      while (batch.length >= batchSize) {
        const full = batch.length === batchSize ? batch : batch.slice(0, batchSize)
        batch = full === batch ? [] : batch.slice(batchSize)
        yield full
      }
    },
    *rest() {
      if (batch.length > 0) yield batch
    },
  }
  yield* readLines(path, statSync(path).size, batchSize, collector, onBytesRead)
}

/**
 * Reads the file in batches of `batchSize` lines, or fewer when they pass `maxBatchBytes`, copied
 * out of the read buffers. The bytes bound what batches in flight hold: the lanes' copies of a
 * batch, and the next one read meanwhile (5,000 schema-wrapped events are 29 MB).
 */
export async function* readLineBatches(
  path: string,
  batchSize: number,
  onBytesRead?: (bytes: number) => void,
  maxBatchBytes = 4 << 20,
): AsyncGenerator<LineBatch> {
  // Sized for a full batch at once: one allocation per batch, where growing from 1 MB took four
  // and copied 7 MB (a line that crosses the bound past the slack still grows it). A smaller file
  // needs no more than itself (`sizedToFile`).
  const fileBytes = statSync(path).size
  const bufferBytes = sizedToFile(fileBytes, maxBatchBytes + (64 << 10))
  /** Buffers released by the consumer: two cover a batch in the lanes and the one read next. */
  const spare: Buffer[] = []
  let buf: Buffer = Buffer.allocUnsafe(bufferBytes)
  let used = 0
  let lines: number[] = []
  const take = (): LineBatch => {
    const whole = buf
    let released = false
    const batch = {
      buf: buf.subarray(0, used),
      lines,
      release: () => {
        if (released || whole.length !== bufferBytes || spare.length >= 2) return
        released = true
        spare.push(whole)
      },
    }
    buf = spare.pop() ?? Buffer.allocUnsafe(bufferBytes)
    used = 0
    lines = []
    return batch
  }
  const collector: LineCollector<LineBatch> = {
    add(from, start, end, lineNumber) {
      // A blank line is no record (LineReader skips it too).
      let first = start
      while (first < end && isWhitespace(from[first]!)) first++
      if (first === end) return
      const length = end - start
      if (used + length > buf.length) {
        const grown = Buffer.allocUnsafe(Math.max(buf.length * 2, used + length))
        buf.copy(grown, 0, 0, used)
        buf = grown
      }
      from.copy(buf, used, start, end)
      lines.push(used, used + length, lineNumber)
      used += length
    },
    // A batch over its bytes counts as full.
    size: () => (used >= maxBatchBytes ? batchSize : lines.length / 3),
    *full() {
      if (lines.length / 3 >= batchSize || used >= maxBatchBytes) yield take()
    },
    *rest() {
      if (lines.length > 0) yield take()
    },
  }
  yield* readLines(path, fileBytes, batchSize, collector, onBytesRead)
}

/**
 * A read buffer's size for a file of `fileBytes`: `bound`, or the file's own size (at least a
 * byte) when it is smaller. A file source run on a small file (bench:api's live writer applies
 * ten a second) allocated 12 MB for each, and the main thread spent 29% of its time collecting
 * them.
 */
function sizedToFile(fileBytes: number, bound: number): number {
  return Math.max(1, Math.min(bound, fileBytes))
}

/** What becomes of each line: records, or bytes for the lanes. */
interface LineCollector<B> {
  add(buf: Buffer, start: number, end: number, lineNumber: number): void
  size(): number
  full(): Generator<B>
  rest(): Generator<B>
}

async function* readLines<B>(
  path: string,
  /** The file's size when its reader was made: the read buffers are no larger. */
  fileBytes: number,
  batchSize: number,
  collector: LineCollector<B>,
  onBytesRead?: (bytes: number) => void,
): AsyncGenerator<B> {
  let lineNumber = 0
  // The next \r in `crIn` at or after the last position asked for (carriage returns are rare:
  // one search per buffer, not one per line).
  let crIn: Buffer | undefined
  let crAt = -1
  const nextCr = (buf: Buffer, from: number): number => {
    if (buf !== crIn || (crAt !== -1 && crAt < from)) {
      crIn = buf
      crAt = buf.indexOf(CR, from)
    }
    return crAt
  }
  // Line breaks as node's readline sees them: \n, \r\n, and a lone \r. A segment is what a \n
  // (or the end of the file: `last`) ends.
  const onSegment = (buf: Buffer, start: number, end: number, last: boolean) => {
    for (let cr = nextCr(buf, start); cr !== -1 && cr < end; cr = nextCr(buf, start)) {
      lineNumber++
      collector.add(buf, start, cr, lineNumber)
      start = cr + 1
      if (start === end) return // \r\n, or a \r that ends the file: one break
    }
    if (start === end && last) return
    lineNumber++
    collector.add(buf, start, end, lineNumber)
  }

  const file = await open(path, 'r')
  // Two buffers: the next chunk is read into one while the lines of the other are parsed. Records
  // keep nothing of them (a line that spans two chunks is copied out).
  const chunkBytes = sizedToFile(fileBytes, CHUNK_BYTES)
  const buffers = [Buffer.allocUnsafe(chunkBytes), Buffer.allocUnsafe(chunkBytes)] as const
  let turn = 0
  let position = 0
  const read = async (buffer: Buffer, at: number) => {
    const { bytesRead } = await file.read(buffer, 0, buffer.length, at)
    return buffer.subarray(0, bytesRead)
  }
  let next = read(buffers[0], 0)
  try {
    let carry: Buffer | undefined
    for (;;) {
      const chunk = await next
      if (chunk.length === 0) break
      position += chunk.length
      turn ^= 1
      next = read(turn === 0 ? buffers[0] : buffers[1], position)
      let start = 0
      if (carry !== undefined) {
        const lf = chunk.indexOf(LF)
        if (lf === -1) {
          carry = Buffer.concat([carry, chunk])
          onBytesRead?.(chunk.length)
          continue
        }
        const line = Buffer.concat([carry, chunk.subarray(0, lf)])
        carry = undefined
        onSegment(line, 0, line.length, false)
        if (collector.size() >= batchSize) yield* collector.full()
        start = lf + 1
      }
      for (let lf = chunk.indexOf(LF, start); lf !== -1; lf = chunk.indexOf(LF, start)) {
        onSegment(chunk, start, lf, false)
        start = lf + 1
        if (collector.size() >= batchSize) yield* collector.full()
      }
      if (start < chunk.length) carry = Buffer.from(chunk.subarray(start))
      onBytesRead?.(chunk.length)
    }
    if (carry !== undefined) onSegment(carry, 0, carry.length, true)
    yield* collector.full()
    yield* collector.rest()
  } finally {
    await next.catch(() => undefined)
    await file.close()
  }
}

/**
 * The reads of `recordsOfTopicInFile`: under glibc's 128 KB threshold, so the buffer comes from the
 * heap. A 4 MB one, mapped and then freed, raised the threshold for every allocation after it
 * (glibc adjusts it to the largest mapping freed), and the load that followed peaked 20-30 MB
 * higher (bench:tenants' file load over 3,000 organizations: 484 and 496 MB against 471 and 463).
 */
const SCAN_CHUNK_BYTES = 64 << 10

/**
 * The lines of the file whose record is of `topic` (`"topic":"<topic>"`, as a file of events
 * names it; inside a JSON string its quotes would be escaped), read in one pass. What
 * `ORGANIZATION_FILES=auto` counts a file's organizations by (projector.ts): an estimate that
 * only chooses the files' layout, never what they hold. Synchronous: it runs before the load.
 */
export function recordsOfTopicInFile(path: string, topic: string): number {
  const needle = Buffer.from(`"topic":${JSON.stringify(topic)}`)
  const fd = openSync(path, 'r')
  try {
    const chunk = Buffer.allocUnsafe(SCAN_CHUNK_BYTES + needle.length)
    let carried = 0
    let count = 0
    for (;;) {
      const bytesRead = readSync(fd, chunk, carried, SCAN_CHUNK_BYTES, null)
      const end = carried + bytesRead
      for (let at = chunk.indexOf(needle, 0); at >= 0 && at + needle.length <= end;) {
        count++
        at = chunk.indexOf(needle, at + needle.length)
      }
      if (bytesRead === 0) return count
      // The chunk's last bytes begin the next: a needle cut in two is found there whole.
      carried = Math.min(needle.length - 1, end)
      chunk.copy(chunk, 0, end - carried, end)
    }
  } finally {
    closeSync(fd)
  }
}
