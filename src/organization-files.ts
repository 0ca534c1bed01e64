// Which file of a generation holds an organization's rows.
//
// By default each organization has a file of its own: `<id>.db`, or the version control.db's
// organization_files names after a per-organization rebuild. A generation made with
// ORGANIZATION_FILES = N > 0 places every organization in one of N files shared by organizations
// (`shared-<k>.db`, k a hash of its id; docs/many-organizations.md): what each file costs (its
// open, its statements, its pages read cold, one transaction and one synced log per batch) is
// then paid N times, not once per organization. N is recorded in the generation's control.db when
// the generation is made, so every process resolves an organization to the same file, and
// changing it takes a `--rebuild`.

/** The most shared files a generation may have: their names have four digits. */
export const MAX_SHARED_FILES = 10_000

/**
 * With `ORGANIZATION_FILES=auto`, up to this many organizations each keep a file of its own: the
 * strongest isolation, and offboarding or exporting one is a file operation. What a file costs
 * (docs/many-organizations.md: its open, its statements, its first write of a burst, a synced
 * log per batch) is paid once per organization then, which seven organizations did not show and
 * 3,000 did (a first live burst 0.27x as fast).
 */
export const OWN_FILES_UP_TO = 100

/** With `auto`, about this many organizations to a shared file: the best measured at 3,000. */
export const ORGANIZATIONS_PER_SHARED_FILE = 30

/**
 * The files `ORGANIZATION_FILES=auto` gives a generation made for `organizations` organizations
 * (as many as the source holds when it is made): 0, a file each, up to OWN_FILES_UP_TO; beyond,
 * one shared file for about every ORGANIZATIONS_PER_SHARED_FILE of them.
 */
export function autoOrganizationFiles(organizations: number): number {
  if (organizations <= OWN_FILES_UP_TO) return 0
  return Math.min(MAX_SHARED_FILES, Math.ceil(organizations / ORGANIZATIONS_PER_SHARED_FILE))
}

/**
 * `shared-<k>.db`, or `shared-<k>.<version>.db` once a per-organization rebuild has rebuilt the
 * file whole and swapped it in (control.db's organization_files names it, by the file's key).
 */
const SHARED_FILE_NAME = /^(shared-\d{4})(?:\.([A-Za-z0-9_-]{1,64}))?\.db$/

export function isSharedFileName(name: string): boolean {
  return SHARED_FILE_NAME.test(name)
}

/**
 * The key (`shared-<k>.db`, its first name) and version of a shared file's name; undefined for any
 * other name.
 */
export function parseSharedFileName(
  name: string,
): { fileKey: string; version: string | undefined } | undefined {
  const match = SHARED_FILE_NAME.exec(name)
  return match === null ? undefined : { fileKey: `${match[1]!}.db`, version: match[2] }
}

/** The name of the shared file of `fileKey` at `version` (a rebuild's). */
export function sharedFileVersionName(fileKey: string, version: string): string {
  const parsed = parseSharedFileName(fileKey)
  const name = `${fileKey.slice(0, -'.db'.length)}.${version}.db`
  if (parsed?.version !== undefined || parseSharedFileName(name)?.version !== version) {
    throw new Error(`invalid shared file version: ${JSON.stringify(fileKey)} ${version}`)
  }
  return name
}

export function sharedFileName(index: number): string {
  return `shared-${String(index).padStart(4, '0')}.db`
}

/**
 * The shared file of an organization among `files`: FNV-1a of its id, which is random (a uuid v4)
 * and lower-case wherever the replica names it, so the hash spreads organizations evenly and
 * never changes for one.
 */
export function sharedFileOf(organizationId: string, files: number): string {
  let hash = 0x811c9dc5
  for (let i = 0; i < organizationId.length; i++) {
    hash = Math.imul(hash ^ organizationId.charCodeAt(i), 0x01000193)
  }
  return sharedFileName((hash >>> 0) % files)
}

/**
 * The key a writer knows an organization's file by, the same across a per-organization rebuild's
 * swap of the file: the organization's id for a file of its own, the shared file's first name
 * (`shared-<k>.db`) in a generation of shared files.
 */
export function fileKeyOf(organizationId: string, sharedFiles: number): string {
  return sharedFiles > 0 ? sharedFileOf(organizationId, sharedFiles) : organizationId
}
