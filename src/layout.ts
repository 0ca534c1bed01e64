// Where the replica lives on disk.
//
//   <DATA_DIR>/CURRENT                         name of the generation the api serves
//   <DATA_DIR>/generations/<name>/control.db   organizations, api keys, routing, readiness
//   <DATA_DIR>/generations/<name>/orgs/<organizationId>.db
//   <DATA_DIR>/generations/<name>/orgs/<organizationId>.<version>.db  after a per-organization
//                                              rebuild (control.db's organization_files names it)
//   <DATA_DIR>/generations/<name>/orgs/shared-<k>.db  a file organizations share, in a generation
//                                              made with ORGANIZATION_FILES (organization-files.ts)
//   <DATA_DIR>/generations/<name>/orgs/shared-<k>.<version>.db  after a rebuild of its
//                                              organizations (organization_files names it)
//   <DATA_DIR>/generations/<name>/handovers/<fileKey>.json  a rebuilt file waiting for the live
//                                              projector to take it, by its key: the
//                                              organization's id, or `shared-<k>`
//                                              (projector/storage/handover.ts)
//   <DATA_DIR>/rebuilds/<run>/                 a per-organization rebuild or dry run at work
//   <DATA_DIR>/rebuild.lock                    who is rebuilding (one rebuild at a time)
//   <DATA_DIR>/verify/<run>-<pid>/             `npm run verify`'s documents built from PostgreSQL
//   <DATA_DIR>/dead-letters.ndjson             dead letters of file-source runs
//
// A rebuild replays the topics into a new generation and swaps CURRENT atomically (write a
// temporary file, rename it over), so the api moves to it between two requests.
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { isSharedFileName, parseSharedFileName } from './organization-files.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const GENERATION_NAME = /^[A-Za-z0-9_-]{1,64}$/
/** `<organizationId>.db` or `<organizationId>.<version>.db`. */
const ORGANIZATION_FILE =
  /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:\.([A-Za-z0-9_-]{1,64}))?\.db$/

export interface Generation {
  readonly name: string
  readonly dir: string
  readonly controlPath: string
  /** The routing index (projector/storage/route-file.ts), beside control.db. */
  readonly routesPath: string
  /**
   * The generation's own databases, beside its organizations' files: control.db and the routing
   * index. What a whole rebuild writes again, and what its publication syncs, with theirs.
   */
  readonly indexPaths: readonly string[]
  readonly organizationsDir: string
  /** Where rebuilt files wait for the live projector (projector/storage/handover.ts). */
  readonly handoversDir: string
  /**
   * The path of an organization's own file: `file` as control.db's organization_files names it,
   * or the default `<organizationId>.db` when it names none.
   */
  organizationPath(organizationId: string, file?: string | null): string
  /** The path of a file organizations share (`shared-<k>.db`, or a version of it). */
  sharedPath(name: string): string
  /**
   * The path of a file by its key (src/organization-files.ts `fileKeyOf`): `file` as control.db's
   * organization_files names it for that key, or the key's first file when it names none.
   */
  filePath(fileKey: string, file?: string | null): string
}

export function isOrganizationId(value: string): boolean {
  return UUID.test(value)
}

/**
 * The organizations a command's `--org` names (repeatable, or comma-separated), lower-cased: a
 * uuid's case means nothing, and events, files and control.db name them in lower case, so an id
 * pasted in upper case is the same organization. Or what is wrong with the option, for the
 * command to print after its name.
 */
export function organizationIdsOption(
  values: readonly string[],
): { organizations: string[] } | { error: string } {
  const organizations = values
    .flatMap((value) => value.split(','))
    .map((id) => id.trim().toLowerCase())
    .filter((id) => id !== '')
  const bad = organizations.find((id) => !isOrganizationId(id))
  if (bad !== undefined) return { error: `--org: not an organization id: ${JSON.stringify(bad)}` }
  if (organizations.length === 0) return { error: '--org: no organization id given' }
  return { organizations: [...new Set(organizations)] }
}

export function generation(dataDir: string, name: string): Generation {
  if (!GENERATION_NAME.test(name)) throw new Error(`invalid generation name: ${name}`)
  const dir = join(dataDir, 'generations', name)
  const organizationsDir = join(dir, 'orgs')
  const controlPath = join(dir, 'control.db')
  const routesPath = join(dir, 'routes.db')
  return {
    name,
    dir,
    controlPath,
    routesPath,
    indexPaths: [controlPath, routesPath],
    organizationsDir,
    handoversDir: join(dir, 'handovers'),
    organizationPath(organizationId, file) {
      // The id becomes a file name: only a canonical uuid may, so no path can escape the folder.
      if (!isOrganizationId(organizationId)) {
        throw new Error(`not an organization id: ${JSON.stringify(organizationId)}`)
      }
      if (file === undefined || file === null) return join(organizationsDir, `${organizationId}.db`)
      if (parseOrganizationFileName(file)?.organizationId !== organizationId) {
        throw new Error(`not a file of organization ${organizationId}: ${JSON.stringify(file)}`)
      }
      return join(organizationsDir, file)
    },
    sharedPath(name) {
      if (!isSharedFileName(name)) throw new Error(`not a shared file: ${JSON.stringify(name)}`)
      return join(organizationsDir, name)
    },
    filePath(fileKey, file) {
      const shared = parseSharedFileName(fileKey)
      if (shared === undefined) return this.organizationPath(fileKey, file)
      if (file === undefined || file === null) return this.sharedPath(fileKey)
      if (parseSharedFileName(file)?.fileKey !== fileKey) {
        throw new Error(`not a file of ${fileKey}: ${JSON.stringify(file)}`)
      }
      return this.sharedPath(file)
    },
  }
}

/**
 * The key and version of any file of a generation's organizations folder, its own or shared;
 * undefined for any other name.
 */
export function parseFileName(
  name: string,
): { fileKey: string; version: string | undefined } | undefined {
  const own = parseOrganizationFileName(name)
  if (own !== undefined) return { fileKey: own.organizationId, version: own.version }
  return parseSharedFileName(name)
}

/** The first name of the file of `fileKey`, what it is called until a rebuild replaces it. */
export function firstFileName(fileKey: string): string {
  return parseSharedFileName(fileKey) === undefined ? organizationFileName(fileKey) : fileKey
}

/** The file name of an organization's file of `version` (none: the default name). */
export function organizationFileName(organizationId: string, version?: string): string {
  const name = version === undefined ? `${organizationId}.db` : `${organizationId}.${version}.db`
  if (parseOrganizationFileName(name) === undefined) {
    throw new Error(`invalid organization file name: ${JSON.stringify(name)}`)
  }
  return name
}

/** What SQLite keeps beside a database file while it is written: the WAL, its index, a journal. */
export const SQLITE_SIDE_SUFFIXES = ['-wal', '-shm', '-journal'] as const

/** The database file a name in a files directory belongs to: itself, or the one it sits beside. */
export function databaseFileOf(name: string): string {
  const suffix = SQLITE_SIDE_SUFFIXES.find((s) => name.endsWith(s))
  return suffix === undefined ? name : name.slice(0, -suffix.length)
}

/** The organization (and version) of an organization file's name; undefined for any other name. */
export function parseOrganizationFileName(
  name: string,
): { organizationId: string; version: string | undefined } | undefined {
  const match = ORGANIZATION_FILE.exec(name)
  return match === null ? undefined : { organizationId: match[1]!, version: match[2] }
}

/**
 * The files organizations share in the generation's directory, by key (a rebuilt one may lie
 * beside the one it replaced until that is removed).
 */
export function sharedFilesIn(generation: Generation): string[] {
  const keys = new Set<string>()
  for (const name of readdirSync(generation.organizationsDir)) {
    const parsed = parseSharedFileName(name)
    if (parsed !== undefined) keys.add(parsed.fileKey)
  }
  return [...keys].sort()
}

/** The organizations that have a file (any version) in the generation's directory. */
export function organizationsWithFiles(generation: Generation): string[] {
  const ids = new Set<string>()
  for (const name of readdirSync(generation.organizationsDir)) {
    const parsed = parseOrganizationFileName(name)
    if (parsed !== undefined) ids.add(parsed.organizationId)
  }
  return [...ids]
}

export function currentGenerationName(dataDir: string): string | undefined {
  try {
    const name = readFileSync(join(dataDir, 'CURRENT'), 'utf8').trim()
    return name === '' ? undefined : name
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

export function currentGeneration(dataDir: string): Generation | undefined {
  const name = currentGenerationName(dataDir)
  return name === undefined ? undefined : generation(dataDir, name)
}

/** Creates the folders of a generation (idempotent). */
export function prepareGeneration(dataDir: string, name: string): Generation {
  const gen = generation(dataDir, name)
  mkdirSync(gen.organizationsDir, { recursive: true })
  return gen
}

/**
 * Makes `name` the generation the api serves, atomically and durably: the new name is synced
 * before it replaces the old, and the folder after, so a power cut leaves one name or the other,
 * never an empty file.
 */
export function publishGeneration(dataDir: string, name: string): void {
  generation(dataDir, name)
  const tmp = join(dataDir, `CURRENT.${process.pid}.tmp`)
  writeFileSync(tmp, `${name}\n`)
  fsyncPath(tmp)
  renameSync(tmp, join(dataDir, 'CURRENT'))
  fsyncPath(dataDir)
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** The generation to project into: the current one, or a first one created and published. */
export function ensureCurrentGeneration(dataDir: string, now: Date = new Date()): Generation {
  mkdirSync(dataDir, { recursive: true })
  const existing = currentGenerationName(dataDir)
  if (existing !== undefined) return prepareGeneration(dataDir, existing)
  const name = newGenerationName(now)
  const gen = prepareGeneration(dataDir, name)
  publishGeneration(dataDir, name)
  return gen
}

export function newGenerationName(now: Date): string {
  return `g${now.toISOString().replace(/[-:.TZ]/g, '')}`
}

export function deadLetterFilePath(dataDir: string): string {
  return join(dataDir, 'dead-letters.ndjson')
}
