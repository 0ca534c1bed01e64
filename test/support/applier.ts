// An applier over a fresh generation in a temp directory, as unit tests of the write path use it.
import { mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { createApplier, type Applier, type ApplierOptions } from '../../projector/lanes/apply.ts'
import { currentGeneration, prepareGeneration, type Generation } from '../../src/layout.ts'

export interface TestApplier {
  applier: Applier
  generation: Generation
  dataDir: string
}

/**
 * Generation 'g1' of `dataDir` (a new temp directory when none is given; `made` hears of it, to
 * remove it), a silent logger, WAL checkpoints out of the way; the rest as given.
 */
export function testApplier(
  options: Pick<
    ApplierOptions,
    | 'offsetGuard'
    | 'clock'
    | 'deferDocumentsUntilCaughtUp'
    | 'documentBuildWorkers'
    | 'loadCommitEvents'
    | 'loadEventsPerHeldFile'
    | 'maxOpenFiles'
    | 'organizationFiles'
    | 'priorStamp'
  > & { logger?: ApplierOptions['logger'] },
  dataDir?: string,
  made?: (dir: string) => void,
): TestApplier {
  let dir = dataDir
  if (dir === undefined) {
    dir = mkdtempSync(join(tmpdir(), 'replica-applier-'))
    made?.(dir)
  }
  const generation = prepareGeneration(dir, 'g1')
  const applier = createApplier({
    generation,
    topicPrefix: 'product',
    logger: pino({ level: 'silent' }),
    walCheckpointBytes: 1 << 30,
    ...options,
  })
  return { applier, generation, dataDir: dir }
}

/** Every table of served documents in an organization file. */
export const DOCUMENT_TABLES = [
  'doc_providers',
  'doc_provider_groups',
  'doc_enrollments',
  'doc_group_enrollments',
  'doc_documents',
  'doc_expirables',
] as const

/** Organization id -> file path, in the data directory's current generation. */
export function organizationFiles(dataDir: string): Map<string, string> {
  const generation = currentGeneration(dataDir)
  if (generation === undefined) throw new Error(`${dataDir} has no generation`)
  const files = new Map<string, string>()
  for (const name of readdirSync(generation.organizationsDir)) {
    if (name.endsWith('.db'))
      files.set(name.split('.')[0]!, join(generation.organizationsDir, name))
  }
  return files
}
