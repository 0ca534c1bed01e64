// What bench:api's lean clients share (bench/overload-load.ts, bench/paced-load.ts): keep-alive
// HTTP/1.1 connections that write a request's bytes and read the response by its Content-Length,
// one request at a time, and a schedule that makes requests due evenly at a rate.
//
// Why not autocannon, Node's http client or undici: on two cores the load shares the machine
// with the server, and their own cost became what they measured. autocannon spent about 40 µs of
// CPU a response at 512 connections, its turns grew to tens of milliseconds and a response that
// had arrived waited for them (served p50 26 ms by its clock, 10.5 ms by the api's); Node's http
// client and undici cost 0.26 and 0.17-0.19 ms a 130 KB page and could not keep 5,000 requests/s.
// Here a 130 KB page costs 0.04-0.05 ms (autocannon's 0.06-0.07), read into one buffer per
// connection (below), and a response a few searches of its head. Its rate, too, is not a budget
// per connection per second spent in a burst at the start of each second (autocannon's -R), but
// requests due evenly, every millisecond.
// A response must carry Content-Length, as the api's all do; one without stops the run, saying so.
import { connect, type Socket } from 'node:net'

const HEAD_END = Buffer.from('\r\n\r\n')
/** A connection's read buffer: what one read takes at most (Node's own reads take 64 KB). */
const READ_BUFFER_BYTES = 64 * 1024

/** One response: its status, its head (lower-cased), and its body if the connection keeps them. */
export interface RawResponse {
  status: number
  head: string
  body: Buffer | undefined
}

/** A response whose head has been read: the bytes of its head, and its body's still to come. */
interface ResponseHead {
  status: number
  head: string
  headBytes: number
  /** The body's length (Content-Length), and what of it is still to come. */
  length: number
  remaining: number
  /** The body, filled as it comes, when the connection keeps bodies. */
  body: Buffer | undefined
}

/** A GET request's bytes. */
export function requestBytes(
  origin: URL,
  path: string,
  headers: Readonly<Record<string, string>>,
): Buffer {
  const lines = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')
  return Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${origin.host}\r\n${lines}\r\n`, 'latin1')
}

export interface RawConnectionEvents {
  /** Connected, or done with a response: ready for the next request. */
  ready(connection: RawConnection): void
  /** A whole response, `bytes` long on the wire. */
  response(connection: RawConnection, response: RawResponse, bytes: number): void
  /** A connection error: the connection is done. */
  error(): void
}

/** One keep-alive connection, one request at a time. */
export class RawConnection {
  /** When the request in flight was sent (or found due: the caller's to set). */
  startedAt = 0
  readonly #socket: Socket
  readonly #events: RawConnectionEvents
  readonly #keepBodies: boolean
  /** The response's bytes so far while its head is incomplete. */
  #pending: Buffer[] = []
  /** The response being read once its head is complete. */
  #head: ResponseHead | undefined

  constructor(origin: URL, events: RawConnectionEvents, options: { keepBodies: boolean }) {
    this.#events = events
    this.#keepBodies = options.keepBodies
    // Read into one buffer of the connection's own, reused for every read: with a buffer made
    // per read (the 'data' event's), a load of 7,000 pages of 130 KB a second allocated 900 MB a
    // second, its collector took half of the client's CPU, and the client fell behind: the p99 it
    // measured for a cached page at half saturation (12-45 ms) was its own.
    this.#socket = connect(
      {
        port: Number(origin.port),
        host: origin.hostname,
        onread: { buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES), callback: this.#onRead },
      },
      () => events.ready(this),
    )
    this.#socket.setNoDelay(true)
    this.#socket.on('error', () => events.error())
  }

  send(request: Buffer): void {
    this.#socket.write(request)
  }

  close(): void {
    this.#socket.destroy()
  }

  /** `chunk`: the first `bytes` of the connection's read buffer, overwritten by the next read. */
  readonly #onRead = (bytes: number, buffer: Uint8Array): boolean => {
    const chunk = Buffer.from(buffer.buffer, buffer.byteOffset, bytes)
    let rest: Buffer | undefined = chunk
    while (rest !== undefined && rest.length > 0) rest = this.#consume(rest)
    return true
  }

  /** Takes what `chunk` holds of the current response; returns what follows it, if anything. */
  #consume(chunk: Buffer): Buffer | undefined {
    if (this.#head === undefined) {
      const bytes = this.#pending.length === 0 ? chunk : Buffer.concat([...this.#pending, chunk])
      const end = bytes.indexOf(HEAD_END)
      if (end < 0) {
        // Kept past this read: a copy (the read buffer is reused).
        this.#pending = [Buffer.from(bytes)]
        return undefined
      }
      const head = bytes.subarray(0, end).toString('latin1').toLowerCase()
      const length = /\r\ncontent-length: *(\d+)/.exec(head)?.[1]
      if (length === undefined) {
        throw new Error(`a response without Content-Length: ${head.split('\r\n')[0] ?? ''}`)
      }
      const headBytes = end + HEAD_END.length
      const bodyBytes = Number(length)
      this.#head = {
        status: Number(head.slice(9, 12)),
        head,
        headBytes,
        length: bodyBytes,
        remaining: bodyBytes,
        // Copied into as it comes (the read buffer is reused).
        body: this.#keepBodies ? Buffer.allocUnsafe(bodyBytes) : undefined,
      }
      this.#pending = []
      return this.#body(bytes.subarray(headBytes))
    }
    return this.#body(chunk)
  }

  /** Body bytes of the current response; completes it when they are all in. */
  #body(chunk: Buffer): Buffer | undefined {
    const head = this.#head as ResponseHead
    const taken = Math.min(chunk.length, head.remaining)
    head.body?.set(chunk.subarray(0, taken), head.length - head.remaining)
    head.remaining -= taken
    if (head.remaining > 0) return undefined
    this.#head = undefined
    const response = { status: head.status, head: head.head, body: head.body }
    this.#events.response(this, response, head.headBytes + head.length)
    this.#events.ready(this)
    return chunk.length > taken ? chunk.subarray(taken) : undefined
  }
}

/**
 * Runs `seconds` of a schedule at `rate` requests a second: every millisecond, `due` is told how
 * many requests have come due since its last call (those of a late timer all at once) and when.
 * Resolves with the seconds it ran.
 */
export function schedule(
  rate: number,
  seconds: number,
  due: (count: number, now: number) => void,
): Promise<number> {
  const started = performance.now()
  const until = started + seconds * 1000
  let issued = 0
  return new Promise((resolve) => {
    const tick = setInterval(() => {
      const now = performance.now()
      if (now >= until) {
        clearInterval(tick)
        resolve((now - started) / 1000)
        return
      }
      const dueNow = Math.floor(((now - started) * rate) / 1000)
      if (dueNow > issued) due(dueNow - issued, now)
      issued = dueNow
    }, 1)
  })
}
