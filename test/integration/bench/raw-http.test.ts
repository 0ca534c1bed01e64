// bench:api's lean connection (bench/raw-http.ts) against a real TCP server that splits its
// responses as a network may: a head across two reads, a body across many, and the end of one
// response in the same read as the whole of the next. The connection reads into one buffer it
// reuses, so anything it keeps past a read must be a copy: a body kept by reference would be
// overwritten by the next read and come back wrong here.
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RawConnection, type RawResponse, requestBytes } from '../../../bench/raw-http.ts'

const FIRST = 'a'.repeat(150_000)
const SECOND = 'b'.repeat(70_000)

function response(body: string): string {
  return `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\nX-Body: ${body[0]}\r\n\r\n${body}`
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 5))

/** Writes both responses in awkward pieces, each after a pause so that it is a read of its own. */
async function answer(socket: Socket): Promise<void> {
  const wire = response(FIRST) + response(SECOND)
  const firstEnd = response(FIRST).length
  const cuts = [20, 40, 70_000, firstEnd - 10, wire.length]
  let from = 0
  for (const to of cuts) {
    socket.write(wire.slice(from, to))
    from = to
    await pause()
  }
}

describe('bench/raw-http.ts', () => {
  let server: Server
  let origin: URL

  beforeAll(async () => {
    server = createServer((socket) => {
      // Both answers once the first request's head is in (the second is sent once it is read).
      socket.once('data', () => void answer(socket))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    origin = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  it('reads heads and bodies split across reads, and two responses in one read, intact', async () => {
    const responses: Array<{ response: RawResponse; bytes: number }> = []
    let readies = 0
    const connection = await new Promise<RawConnection>((resolve, reject) => {
      const made: RawConnection = new RawConnection(
        origin,
        {
          ready: () => {
            readies++
            if (readies === 1) resolve(made)
          },
          response: (_connection, r, bytes) => responses.push({ response: r, bytes }),
          error: () => reject(new Error('connection error')),
        },
        { keepBodies: true },
      )
    })
    connection.send(requestBytes(origin, '/first', {}))
    for (let i = 0; i < 200 && responses.length < 2; i++) await pause()
    connection.close()

    expect(
      responses.map(({ response: r }) => [r.status, /x-body: (\w)/.exec(r.head)?.[1]]),
    ).toEqual([
      [200, 'a'],
      [200, 'b'],
    ])
    expect(responses[0]?.response.body?.toString()).toBe(FIRST)
    expect(responses[1]?.response.body?.toString()).toBe(SECOND)
    expect(responses.map(({ bytes }) => bytes)).toEqual([
      response(FIRST).length,
      response(SECOND).length,
    ])
  })
})
