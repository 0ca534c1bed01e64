// The NDJSON file's lines: one Kafka record per line,
//   {"topic": "...", "partition": 0, "offset": "12", "key": <json or null>, "value": <json or null>}
// where `value` is exactly what Debezium wrote (partition and offset are optional: 0 and the line
// number). The file source (../sources/file.ts) reads them in batches; each line becomes a record
// here, in a lane (../lanes/lane-core.ts) or, for readRecordBatches, in the file source itself.
//
// Lines are read as bytes. A line in the usual shape (the keys above, `value` last, keys and
// values wrapped by the JsonConverter with schemas) is parsed without parsing its schema blocks:
// see wrapped-json.ts. Any other line, schemaless ones included, is parsed whole by
// `parseRecordLine` (one JSON.parse: for a line without schema blocks, faster than the scan; also
// what words every error); both give the same record for the same line.
import { keepLongIntegers } from '../../schema/events.ts'
import type { SourceRecord } from './decode.ts'
import { isWhitespace, WrapperPrefixes } from './wrapped-json.ts'

export class FileSourceError extends Error {
  override name = 'FileSourceError'
}

/** Parses one line; throws a FileSourceError naming the line when it is not a record. */
export function parseRecordLine(line: string, lineNumber: number): SourceRecord {
  let parsed: unknown
  try {
    // Long bigints as text before parsing, as for a Kafka value (decode.ts): a file's line is
    // parsed whole, so a size_bytes past 2^53 would be rounded here.
    parsed = JSON.parse(keepLongIntegers(line))
  } catch {
    throw new FileSourceError(`line ${lineNumber}: not valid JSON`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new FileSourceError(`line ${lineNumber}: expected a JSON object`)
  }
  const r = parsed as Record<string, unknown>
  if (typeof r.topic !== 'string' || r.topic === '') {
    throw new FileSourceError(`line ${lineNumber}: "topic" must be a non-empty string`)
  }
  const partition = r.partition ?? 0
  if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0) {
    throw new FileSourceError(`line ${lineNumber}: "partition" must be a non-negative integer`)
  }
  const offset = r.offset ?? String(lineNumber)
  if (
    !(typeof offset === 'string' && /^\d+$/.test(offset)) &&
    !(typeof offset === 'number' && Number.isSafeInteger(offset) && offset >= 0)
  ) {
    throw new FileSourceError(
      `line ${lineNumber}: "offset" must be a non-negative integer or a string of digits`,
    )
  }
  return {
    topic: r.topic,
    partition,
    offset: String(offset),
    key: r.key ?? null,
    value: r.value ?? null,
  }
}

/**
 * A batch of a file's lines, unparsed (the lanes parse them: lanes.ts): line `i` is
 * `buf[lines[3i], lines[3i+1])`, line number `lines[3i+2]`. Blank lines are left out.
 */
export interface LineBatch {
  buf: Buffer
  lines: number[]
  /**
   * Hands `buf` back to the reader for a later batch: call it once nothing refers to the bytes any
   * more (the lanes copy what they take while packing). Otherwise the buffer is left to the
   * garbage collector, which lets tens of MB of them pile up before it runs for them.
   */
  release(): void
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a
const COMMA = 0x2c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const NULL_BYTES = Buffer.from('null')

type Field = 'topic' | 'partition' | 'offset' | 'key' | 'value'

/** The record field named by `buf[start, end)` (a name without escapes), if any. */
function fieldNamed(buf: Buffer, start: number, end: number): Field | undefined {
  // Compared byte by byte: no string for each name of each line.
  switch (end - start) {
    case 3:
      return isAscii(buf, start, 'key') ? 'key' : undefined
    case 5:
      return isAscii(buf, start, 'value')
        ? 'value'
        : isAscii(buf, start, 'topic')
          ? 'topic'
          : undefined
    case 6:
      return isAscii(buf, start, 'offset') ? 'offset' : undefined
    case 9:
      return isAscii(buf, start, 'partition') ? 'partition' : undefined
    default:
      return undefined
  }
}

/** Whether `buf` holds the ASCII `text` at `start`. */
function isAscii(buf: Buffer, start: number, text: string): boolean {
  for (let i = 0; i < text.length; i++) if (buf[start + i] !== text.charCodeAt(i)) return false
  return true
}

const SCHEMA_OPEN = '{"schema":'

/** Whether the value at `i` begins as the JsonConverter's `{"schema":` wrapper. */
function isWrapped(buf: Buffer, i: number, end: number): boolean {
  // A loop, not Buffer#compare: a native call costs more than ten bytes compared (profiled).
  return end - i > SCHEMA_OPEN.length && isAscii(buf, i, SCHEMA_OPEN)
}

/** Turns lines into records, remembering the topics' schema prefixes across lines. */
export class LineReader {
  readonly #keys = new WrapperPrefixes()
  readonly #values = new WrapperPrefixes()
  /** The last topic read, as bytes and text: consecutive lines mostly share it. */
  #topicBytes = Buffer.alloc(0)
  #topic = ''

  /** The record of `buf[start, end)`, undefined for a blank line; throws for a bad one. */
  record(buf: Buffer, start: number, end: number, lineNumber: number): SourceRecord | undefined {
    const fast = this.#fast(buf, start, end, lineNumber)
    if (fast !== undefined) return fast
    const line = buf.toString('utf8', start, end)
    if (line.trim() === '') return undefined
    return parseRecordLine(line, lineNumber)
  }

  /**
   * The record of a line in the usual shape, reading only the top level and the payloads;
   * undefined for any line it is not sure of (parseRecordLine then decides).
   */
  #fast(buf: Buffer, start: number, end: number, lineNumber: number): SourceRecord | undefined {
    let i = skipWhitespace(buf, start, end)
    if (buf[i] !== OPEN_BRACE) return undefined
    let topic: string | undefined
    let partition: number | undefined
    let offset: string | undefined
    let key: unknown
    let value: unknown
    let seen = 0
    for (;;) {
      i = skipWhitespace(buf, i + 1, end)
      if (buf[i] !== QUOTE) return undefined
      const nameEnd = plainStringEnd(buf, i + 1, end)
      if (nameEnd < 0) return undefined
      const field = fieldNamed(buf, i + 1, nameEnd)
      if (field === undefined) return undefined
      const bit = 1 << fieldBit(field)
      if ((seen & bit) !== 0) return undefined // a repeated key: JSON.parse keeps the last one
      seen |= bit
      i = skipWhitespace(buf, nameEnd + 1, end)
      if (buf[i] !== COLON) return undefined
      i = skipWhitespace(buf, i + 1, end)
      // Each field's reader leaves where its value ends in #valueEnd; undefined: not sure.
      switch (field) {
        case 'topic':
          topic = this.#topicField(buf, i, end)
          if (topic === undefined) return undefined
          break
        case 'partition': {
          const valueEnd = digitsEnd(buf, i, end)
          if (valueEnd < 0) return undefined
          partition = Number(buf.toString('latin1', i, valueEnd))
          this.#valueEnd = valueEnd
          break
        }
        case 'offset':
          offset = this.#offsetField(buf, i, end)
          if (offset === undefined) return undefined
          break
        case 'key':
          key = this.#keyField(buf, i, end, topic)
          if (key === undefined) return undefined
          break
        case 'value':
          if (isNull(buf, i, end)) {
            value = null
            this.#valueEnd = i + 4
            break
          }
          // The usual last key: the value runs to the record's closing brace.
          if (topic === undefined) return undefined
          value = this.#lastValueField(buf, i, end, topic)
          if (value === undefined) return undefined
          return {
            topic,
            partition: partition ?? 0,
            offset: offset ?? String(lineNumber),
            key: key ?? null,
            value,
          }
      }
      i = skipWhitespace(buf, this.#valueEnd, end)
      if (buf[i] === COMMA) continue
      if (buf[i] !== CLOSE_BRACE || skipWhitespace(buf, i + 1, end) !== end) return undefined
      if (topic === undefined) return undefined
      return {
        topic,
        partition: partition ?? 0,
        offset: offset ?? String(lineNumber),
        key: key ?? null,
        value: value ?? null,
      }
    }
  }

  /** Where the field #fast read last ends (a cursor: its readers return their values). */
  #valueEnd = 0

  /** The `"topic"` string at `i`. */
  #topicField(buf: Buffer, i: number, end: number): string | undefined {
    if (buf[i] !== QUOTE) return undefined
    const valueEnd = plainStringEnd(buf, i + 1, end)
    if (valueEnd < 0 || valueEnd === i + 1) return undefined
    this.#valueEnd = valueEnd + 1
    return this.#topicAt(buf, i + 1, valueEnd)
  }

  /** The `"offset"` at `i`, as digits or a string of digits. */
  #offsetField(buf: Buffer, i: number, end: number): string | undefined {
    if (buf[i] === QUOTE) {
      const valueEnd = digitsEnd(buf, i + 1, end, true)
      if (valueEnd < 0 || buf[valueEnd] !== QUOTE) return undefined
      this.#valueEnd = valueEnd + 1
      return buf.toString('latin1', i + 1, valueEnd)
    }
    const valueEnd = digitsEnd(buf, i, end)
    if (valueEnd < 0) return undefined
    this.#valueEnd = valueEnd
    return buf.toString('latin1', i, valueEnd)
  }

  /** The `"key"` at `i`: null, or a wrapped key (its schema learned once per topic). */
  #keyField(buf: Buffer, i: number, end: number, topic: string | undefined): unknown {
    if (isNull(buf, i, end)) {
      this.#valueEnd = i + 4
      return null
    }
    if (!isWrapped(buf, i, end)) return undefined // schemaless: one JSON.parse is faster
    const prefix = topic === undefined ? undefined : this.#keys.match(topic, buf, i, end)
    if (prefix === undefined) {
      const valueEnd = jsonValueEnd(buf, i, end)
      if (valueEnd < 0) return undefined
      const parsed = parseOrUndefined(buf, i, valueEnd)
      if (parsed === undefined) return undefined
      if (topic !== undefined) this.#keys.learn(topic, buf, i, parsed.value)
      this.#valueEnd = valueEnd
      return parsed.value
    }
    const payloadStart = i + prefix.bytes.length
    const payloadEnd = jsonValueEnd(buf, payloadStart, end)
    if (payloadEnd < 0) return undefined
    const valueEnd = skipWhitespace(buf, payloadEnd, end)
    if (buf[valueEnd] !== CLOSE_BRACE) return undefined
    const payload = parseOrUndefined(buf, payloadStart, payloadEnd)
    if (payload === undefined) return undefined
    this.#valueEnd = valueEnd + 1
    return { schema: prefix.schema, payload: payload.value }
  }

  /** The wrapped `"value"` at `i`, the record's last field: it runs to the record's brace. */
  #lastValueField(buf: Buffer, i: number, end: number, topic: string): unknown {
    if (!isWrapped(buf, i, end)) return undefined
    let close = end
    while (close > i && isWhitespace(buf[close - 1]!)) close--
    if (buf[close - 1] !== CLOSE_BRACE) return undefined
    close--
    const prefix = this.#values.match(topic, buf, i, close)
    if (prefix === undefined) {
      const parsed = parseOrUndefined(buf, i, close)
      if (parsed === undefined) return undefined
      this.#values.learn(topic, buf, i, parsed.value)
      return parsed.value
    }
    // `{"schema":<learned>,"payload":` <payload> `}`
    let wrapperClose = close
    while (wrapperClose > i && isWhitespace(buf[wrapperClose - 1]!)) wrapperClose--
    if (buf[wrapperClose - 1] !== CLOSE_BRACE) return undefined
    const payload = parseOrUndefined(buf, i + prefix.bytes.length, wrapperClose - 1)
    if (payload === undefined) return undefined
    return { schema: prefix.schema, payload: payload.value }
  }

  /** The topic name at `buf[start, end)`, the last one's string when the bytes are the same. */
  #topicAt(buf: Buffer, start: number, end: number): string {
    const last = this.#topicBytes
    if (last.length === end - start) {
      let i = 0
      while (i < last.length && last[i] === buf[start + i]) i++
      if (i === last.length) return this.#topic
    }
    this.#topicBytes = Buffer.from(buf.subarray(start, end))
    this.#topic = buf.toString('utf8', start, end)
    return this.#topic
  }
}

function fieldBit(field: Field): number {
  switch (field) {
    case 'topic':
      return 0
    case 'partition':
      return 1
    case 'offset':
      return 2
    case 'key':
      return 3
    case 'value':
      return 4
  }
}

function parseOrUndefined(buf: Buffer, start: number, end: number): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(keepLongIntegers(buf.toString('utf8', start, end))) as unknown }
  } catch {
    return undefined
  }
}

function skipWhitespace(buf: Buffer, i: number, end: number): number {
  while (i < end && isWhitespace(buf[i]!)) i++
  return i
}

function isNull(buf: Buffer, i: number, end: number): boolean {
  return end - i >= 4 && NULL_BYTES.compare(buf, i, i + 4) === 0 && !isWordByte(buf[i + 4])
}

function isWordByte(byte: number | undefined): boolean {
  return byte !== undefined && !isWhitespace(byte) && byte !== COMMA && byte !== CLOSE_BRACE
}

/** The closing quote of a string without escapes or control characters; -1 otherwise. */
function plainStringEnd(buf: Buffer, i: number, end: number): number {
  for (; i < end; i++) {
    const byte = buf[i]!
    if (byte === QUOTE) return i
    if (byte === BACKSLASH || byte < 0x20) return -1
  }
  return -1
}

/**
 * The end of a non-negative integer: JSON's `0` or `[1-9][0-9]*`, at most 15 digits so that it
 * is exact as a number and as text. Inside a string (`quoted`), any digits. -1 otherwise.
 */
function digitsEnd(buf: Buffer, i: number, end: number, quoted = false): number {
  const start = i
  while (i < end && buf[i]! >= 0x30 && buf[i]! <= 0x39) i++
  if (i === start) return -1
  if (quoted) return i
  if (i - start > 15 || (buf[start] === 0x30 && i - start > 1)) return -1
  return isWordByte(buf[i]) ? -1 : i
}

/**
 * The end of the JSON value that starts at `i`, by a string-aware scan of brackets; -1 if it does
 * not end in the line. Not a validation: JSON.parse of the slice is.
 */
function jsonValueEnd(buf: Buffer, i: number, end: number): number {
  const first = buf[i]
  if (first === QUOTE) {
    for (let j = i + 1; j < end; j++) {
      const byte = buf[j]!
      if (byte === BACKSLASH) j++
      else if (byte === QUOTE) return j + 1
    }
    return -1
  }
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0
    for (let j = i; j < end; j++) {
      const byte = buf[j]!
      if (byte === QUOTE) {
        for (j++; j < end; j++) {
          const b = buf[j]!
          if (b === BACKSLASH) j++
          else if (b === QUOTE) break
        }
      } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++
      else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
        if (--depth === 0) return j + 1
      }
    }
    return -1
  }
  let j = i
  while (j < end && isWordByte(buf[j]) && buf[j] !== CLOSE_BRACKET) j++
  return j === i ? -1 : j
}
