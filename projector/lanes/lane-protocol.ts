// What the main thread and the lanes (lane-core.ts, on a worker: lane.ts) say to each other. A batch travels as one buffer of
// bytes (the events' values, or the file's lines) and one array of numbers, ITEM_FIELDS per item,
// in the order the events came: structured clone copies a few large arrays far faster than
// thousands of small objects. The rare events the main thread decoded itself travel as objects.
import type { BadEventReason, SourceRecord } from '../decode/decode.ts'
import type { RefreshStats } from '../documents/index.ts'
import type { OrganizationEvent } from '../storage/organization-file.ts'
import type { EventTally } from './outcome.ts'
import type { FailedAnswer } from './lane-failure.ts'

export type { EventTally } from './outcome.ts'

export const ItemKind = {
  /** Bytes to decode: an upsert of the organization its bytes named (lane-hint.ts). */
  Hinted: 0,
  /** Bytes of an upsert that moved a row out of this lane's organization: a delete there. */
  MoveOut: 1,
  /** An event the main thread decoded (a delete routed by the routing index, a truncate). */
  Decoded: 2,
  /** Creates the organization's file (an organization row came). */
  Ensure: 3,
} as const
export type ItemKind = (typeof ItemKind)[keyof typeof ItemKind]

/**
 * Per item: kind, topic (index in `strings`), partition, offset, start and end in `buf`, line
 * number (file lines), organization (index in `strings`), whether the bytes are a file line (1)
 * or a Kafka value (0), the record's index in the main thread's batch, and where the row's id
 * starts in `buf` (checked against the decoded event).
 */
export const ITEM_FIELDS = 11

export interface LaneOptions {
  lane: number
  lanes: number
  dataDir: string
  generationName: string
  previousGenerationName: string | undefined
  topicPrefix: string
  offsetGuard: boolean
  walCheckpointBytes: number
  deferDocumentsUntilCaughtUp: boolean
  caughtUp: boolean
  unpublished: boolean
  maxOpenFiles: number
  cacheBudgetBytes: number | undefined
  /** The files the generation's organizations share; 0: each has its own (control-file.ts). */
  sharedFiles: number
}

/** One lane's share of a batch, packed by the main thread (pack.ts), applied by lane-core.ts. */
export interface BatchRequest {
  type: 'batch'
  seq: number
  buf: Uint8Array
  meta: Float64Array
  strings: string[]
  events: Array<{ organizationId: string; event: OrganizationEvent }>
  /** The batch's time (ms), so every lane stamps alike. */
  now: number
  /** Join the held transactions of an initial load (apply.ts, `loadCommitEvents`). */
  hold: boolean
}

export type LaneRequest =
  | BatchRequest
  /** `buildAt`: the catch-up's time; the lane also builds the files it commits (lane-core.ts). */
  | { type: 'commit'; seq: number; buildAt?: number }
  | { type: 'rollback'; seq: number }
  | { type: 'close-files'; seq: number; fileKeys?: string[] }
  | { type: 'retire-prior'; seq: number }
  | { type: 'close'; seq: number }

export interface LaneDeadLetter {
  /** The record's index in the main thread's batch (a file's: its line number). */
  index: number
  /** The record as read from a file line (the main thread never parsed it). */
  record?: SourceRecord
  reason: BadEventReason
  message: string
}

export interface LaneOutcome {
  deadLetters: LaneDeadLetter[]
  events: EventTally
  documents: RefreshStats
  latestCommittedAtMs: number | undefined
  skipped: number
  /** Files in a held transaction after the batch (an initial load's `loadCommitEvents`). */
  heldFiles: number
  /**
   * The write-ahead logs the batch's commits left unsynced (OrganizationFile `takeUnsyncedWal`):
   * the batch is durable, and its offsets may be committed, once they are synced.
   */
  unsyncedWals: string[]
  /** A commit at catch-up: the organizations whose documents it built. */
  built?: string[]
}

export type LaneAnswer =
  | {
      seq: number
      ok: true
      outcome?: LaneOutcome
      /** A batch's buffer, handed back once applied for the next batches (lanes.ts BufferPool). */
      buffer?: ArrayBuffer
    }
  /** `fileSource`: a file line that is not a record, which fails its batch, not the lane. */
  | (FailedAnswer & { fileSource: boolean })
