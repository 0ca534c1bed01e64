// Writing one document from its rows: serialized once without `updatedAt`, hashed, and written
// only when the hash differs from the stored one (queries.ts), with the batch's stamp, or with the
// previous generation's when a rebuild finds the same content there. A batch's refresh and the
// whole-file build both end here, so a document is byte-identical whichever built it.
import {
  documentMetadataJson,
  enrollmentContent,
  expirableBody,
  groupEnrollmentContent,
  providerGroupContent,
  providerJson,
  type EmbeddedGroup,
  type EmbeddedProviderRow,
  type EnrollmentLocation,
  type ExpirableContent,
  type IdentifierRow,
  type LineOfBusiness,
  type Membership,
  type Requirement,
  type ServiceLocation,
} from './builders.ts'
import type { MirrorRowOf } from './changes.ts'
import { contentHash, withUpdatedAt } from './json.ts'
import type { DocumentStore } from './queries.ts'
import type { DocumentKind, Outcome } from './stats.ts'

/** The previous generation's stamp of a document variant, if it has this exact content. */
export type PriorStamp = (kind: DocumentKind, id: string, hash: string) => string | undefined

/** Where documents are written, and the stamps a rebuild carries over. */
export interface DocumentTarget {
  store: DocumentStore
  priorStamp: PriorStamp | undefined
}

/** The stamp of a new version: the prior generation's for the same content, else the batch's. */
function stampOf(
  target: DocumentTarget,
  kind: DocumentKind,
  id: string,
  hash: string,
  stamp: string,
): string {
  return target.priorStamp?.(kind, id, hash) ?? stamp
}

function outcome(written: boolean): Outcome {
  return written ? 'rewritten' : 'unchanged'
}

export function writeProvider(
  target: DocumentTarget,
  row: MirrorRowOf<'providers'>,
  memberships: Membership[],
  identifiers: IdentifierRow[],
  stamp: string,
): Outcome {
  const id = row.id
  const json = providerJson(row, memberships, identifiers)
  const hash = contentHash(json.base)
  const sensitiveHash = contentHash(json.sensitive)
  // Nothing is written when both hashes are the stored ones; otherwise each variant keeps its
  // stored stamp and body unless its own content changed (queries.ts).
  const updatedAt = stampOf(target, 'provider', id, hash, stamp)
  const sensitiveUpdatedAt = stampOf(target, 'sensitiveProvider', id, sensitiveHash, stamp)
  return outcome(
    target.store.provider.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json.base, updatedAt),
      sensitiveUpdatedAt,
      sensitiveHash,
      sensitiveBody: withUpdatedAt(json.sensitive, sensitiveUpdatedAt),
      isActive: row.isActive,
    }),
  )
}

export function writeProviderGroup(
  target: DocumentTarget,
  row: MirrorRowOf<'provider_groups'>,
  serviceLocations: ServiceLocation[],
  identifiers: IdentifierRow[],
  stamp: string,
): Outcome {
  const id = row.id
  const json = JSON.stringify(providerGroupContent(row, serviceLocations, identifiers))
  const hash = contentHash(json)
  const updatedAt = stampOf(target, 'providerGroup', id, hash, stamp)
  return outcome(
    target.store.providerGroup.write({ id, updatedAt, hash, body: withUpdatedAt(json, updatedAt) }),
  )
}

export function writeEnrollment(
  target: DocumentTarget,
  row: MirrorRowOf<'enrollments'>,
  children: {
    provider: EmbeddedProviderRow | undefined
    requirements: Requirement[]
    linesOfBusiness: LineOfBusiness[]
    locations: EnrollmentLocation[]
  },
  stamp: string,
): Outcome {
  const id = row.id
  const json = JSON.stringify(
    enrollmentContent(
      row,
      children.provider,
      children.requirements,
      children.linesOfBusiness,
      children.locations,
    ),
  )
  const hash = contentHash(json)
  const updatedAt = stampOf(target, 'enrollment', id, hash, stamp)
  return outcome(
    target.store.enrollment.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json, updatedAt),
      providerId: row.providerId,
      status: row.status,
      payerKey: row.payer.toLowerCase(),
    }),
  )
}

export function writeGroupEnrollment(
  target: DocumentTarget,
  row: MirrorRowOf<'group_enrollments'>,
  group: EmbeddedGroup | undefined,
  linesOfBusiness: LineOfBusiness[],
  stamp: string,
): Outcome {
  const id = row.id
  const json = JSON.stringify(groupEnrollmentContent(row, group, linesOfBusiness))
  const hash = contentHash(json)
  const updatedAt = stampOf(target, 'groupEnrollment', id, hash, stamp)
  return outcome(
    target.store.groupEnrollment.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json, updatedAt),
      providerGroupId: row.providerGroupId,
      status: row.status,
      payerKey: row.payer.toLowerCase(),
    }),
  )
}

export function writeDocument(
  target: DocumentTarget,
  row: MirrorRowOf<'documents'>,
  stamp: string,
): Outcome {
  const id = row.id
  const json = documentMetadataJson(row)
  const hash = contentHash(json)
  const updatedAt = stampOf(target, 'document', id, hash, stamp)
  return outcome(
    target.store.document.write({
      id,
      updatedAt,
      hash,
      body: withUpdatedAt(json, updatedAt),
      providerId: row.providerId,
      providerGroupId: row.providerGroupId,
    }),
  )
}

export function writeExpirable(
  target: DocumentTarget,
  id: string,
  content: ExpirableContent,
  stamp: string,
): Outcome {
  const body = expirableBody(content)
  const hash = contentHash(body)
  return outcome(
    target.store.expirable.write({
      id,
      sourceType: content.sourceType,
      sourceId: content.sourceId,
      expiresOn: content.expiresOn,
      updatedAt: stampOf(target, 'expirable', id, hash, stamp),
      hash,
      body,
    }),
  )
}
