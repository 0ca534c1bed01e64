// The hand-over of a rebuilt file from the rebuilding process to the live projector: an
// organization's own file, or in a generation of shared files the whole shared file that holds the
// organizations asked for (its applied offsets are the file's, so only the whole file can be
// replayed from P while every other file skips; docs/many-organizations.md).
//
// The live projector is the only writer of a generation, so it makes the swap itself, between two
// batches. The rebuild builds the file aside up to a Kafka position P (the next offset per
// partition), moves it into the generation's folder under a new name and leaves a request here;
// the live projector, at its next batch:
//   1. for every partition where it has already read past P, commits P as its Kafka position
//      (a crash from here on replays from P: every file skips what it already applied);
//   2. points the file's key at the new file (control.db), its unchanged documents keeping
//      their stamps (apply.ts `replaceFile`);
//   3. seeks those partitions back to P, so the changes the file had after P reach the new file
//      too; every other file skips them (each file records the offsets it applied);
//   4. removes the request.
// So no change that arrived during the rebuild is lost, and a kill at any point leaves either the
// old file served with the request still pending, or the new one.
//
// A request is `<fileKey>.json` (`<organizationId>.json`, or `shared-<k>.json`). The live
// projector claims it before anything else by renaming it `.taking` (kept until done, so a
// projector killed mid-way takes it again at its next start); a rebuild that gives up withdraws it
// by renaming it `.withdrawn`. A rename succeeds once, so exactly one of the two happens.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { z } from 'zod'
import {
  databaseFileOf,
  firstFileName,
  isOrganizationId,
  parseFileName,
  type Generation,
} from '../../src/layout.ts'
import { parseSharedFileName } from '../../src/organization-files.ts'

/** A Kafka position: the next offset to read of one partition. */
export interface PartitionPosition {
  topic: string
  partition: number
  /** The next offset to read, as Kafka writes offsets (an int64 in decimal). */
  offset: string
}

/** A file's key, as a request names it: an organization's id, or a shared file's key. */
const fileKey = z
  .string()
  .refine(
    (key) => isOrganizationId(key) || parseSharedFileName(key)?.fileKey === key,
    'not a file key',
  )

const handoverRequest = z.object({
  fileKey,
  /** The rebuilt file: a version of the key's file (`<organizationId>.<v>.db`, `shared-<k>.<v>.db`). */
  file: z.string(),
  /** The organizations whose rows the file holds (one for a file of its own), for the logs. */
  organizations: z.array(z.string()),
  position: z.array(
    z.object({
      topic: z.string(),
      partition: z.number().int().nonnegative(),
      offset: z.string().regex(/^\d+$/),
    }),
  ),
  requestedAt: z.string(),
  requestedBy: z.string(),
})
export type HandoverRequest = z.infer<typeof handoverRequest>

type RequestState = 'json' | 'taking' | 'withdrawn'

/** A request's name without its state: the key, a shared one without its `.db`. */
function requestName(key: string): string {
  return parseSharedFileName(key) === undefined ? key : key.slice(0, -'.db'.length)
}

function requestPath(generation: Generation, key: string, state: RequestState = 'json') {
  return join(generation.handoversDir, `${requestName(key)}.${state}`)
}

/** Leaves a request for the live projector, atomically (a reader never sees half of one). */
export function requestHandover(generation: Generation, request: HandoverRequest): void {
  mkdirSync(generation.handoversDir, { recursive: true })
  const path = requestPath(generation, request.fileKey)
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, `${JSON.stringify(request)}\n`)
  renameSync(tmp, path)
}

/** Whether the request for the file key is waiting, or being taken. */
export function handoverPending(generation: Generation, fileKey: string): boolean {
  return (['json', 'taking'] as const).some((state) =>
    existsSync(requestPath(generation, fileKey, state)),
  )
}

/**
 * Takes back a request the live projector has not claimed (a rebuild that gives up): true if it
 * was withdrawn, false if the projector has it already.
 */
export function withdrawHandover(generation: Generation, fileKey: string): boolean {
  try {
    renameSync(requestPath(generation, fileKey), requestPath(generation, fileKey, 'withdrawn'))
    rmSync(requestPath(generation, fileKey, 'withdrawn'), { force: true })
    return true
  } catch {
    return false
  }
}

/**
 * Claims the requests waiting, and returns them with those claimed before and not completed
 * (a projector stopped mid-way). Valid ones only: one that does not parse, or names a file that
 * is not a version of its key's, is logged and set aside (renamed `.rejected`), never taken.
 */
export function claimHandovers(generation: Generation, logger: Logger): HandoverRequest[] {
  let names: string[]
  try {
    names = readdirSync(generation.handoversDir)
  } catch {
    return []
  }
  const requests: HandoverRequest[] = []
  for (const name of names) {
    const state = name.endsWith('.json') ? 'json' : name.endsWith('.taking') ? 'taking' : undefined
    if (state === undefined) continue
    let path = join(generation.handoversDir, name)
    const base = name.slice(0, name.lastIndexOf('.'))
    if (state === 'json') {
      const claimed = join(generation.handoversDir, `${base}.taking`)
      try {
        renameSync(path, claimed)
      } catch {
        continue // withdrawn meanwhile
      }
      path = claimed
    }
    const parsed = parseRequest(path)
    if (parsed.success && requestName(parsed.data.fileKey) === base) {
      const file = parseFileName(parsed.data.file)
      if (file?.fileKey === parsed.data.fileKey && file.version !== undefined) {
        requests.push(parsed.data)
        continue
      }
    }
    logger.error({ request: name }, 'set aside an invalid hand-over request')
    renameSync(path, `${path}.rejected`)
  }
  return requests
}

function parseRequest(path: string) {
  try {
    return handoverRequest.safeParse(JSON.parse(readFileSync(path, 'utf8')))
  } catch {
    return handoverRequest.safeParse(undefined)
  }
}

/** Removes a taken request. */
export function completeHandover(generation: Generation, fileKey: string): void {
  rmSync(requestPath(generation, fileKey, 'taking'), { force: true })
}

/**
 * Where the live projector must go back to before taking `requests`: for each partition it has
 * read past a request's position (`next`: its own next offset per `topic\0partition`, read or
 * committed; a partition with none has not been read at all), the lowest such position.
 */
export function handoverSeeks(
  requests: readonly HandoverRequest[],
  next: ReadonlyMap<string, bigint>,
): PartitionPosition[] {
  const seeks = new Map<string, PartitionPosition>()
  for (const request of requests) {
    for (const position of request.position) {
      const key = `${position.topic}\u0000${position.partition}`
      const at = next.get(key)
      if (at === undefined || BigInt(position.offset) >= at) continue
      const earlier = seeks.get(key)
      if (earlier === undefined || BigInt(position.offset) < BigInt(earlier.offset)) {
        seeks.set(key, position)
      }
    }
  }
  return [...seeks.values()]
}

/**
 * The files (with their SQLite side files) in the generation's folder that a swap replaced: not
 * the file control.db serves their key from (`served`, by file key), and named by no pending
 * request. The projector removes each a grace period after its swap; one a stop cut short (a
 * restart within the grace) would otherwise stay on disk for good.
 */
export function replacedFiles(
  generation: Generation,
  served: ReadonlyMap<string, string>,
): string[] {
  const replaced: string[] = []
  for (const name of readdirSync(generation.organizationsDir)) {
    const file = databaseFileOf(name)
    const parsed = parseFileName(file)
    if (parsed === undefined) continue
    const current = served.get(parsed.fileKey) ?? firstFileName(parsed.fileKey)
    if (file === current || handoverPending(generation, parsed.fileKey)) continue
    replaced.push(join(generation.organizationsDir, name))
  }
  return replaced
}
