// The projector's document layer: from the mirror changes of a batch to the served documents
// (`doc_*` tables) of one organization's file. See DESIGN.md ("Mirror, then documents") and
// spec/resources.md for the rules the builders implement.
export {
  createDocumentRefresher,
  type DetailedRefreshStats,
  type DocumentKind,
  type DocumentRefresher,
  type PriorStamp,
  type RefreshStats,
  type ResourceKind,
} from './refresher.ts'
export {
  embeddedGroupChanged,
  embeddedLocationChanged,
  embeddedProviderChanged,
  touchedDocuments,
  type MirrorChange,
  type MirrorRowOf,
  type MirrorRows,
  type MirrorTable,
  type RelatedDocuments,
  type TouchedDocuments,
} from './changes.ts'
export {
  documentExpirable,
  documentMetadataContent,
  documentMetadataJson,
  enrollmentContent,
  expirableBody,
  expirableId,
  groupEnrollmentContent,
  groupIdentifierExpirable,
  identifierEntry,
  parseExpirableId,
  providerGroupContent,
  providerIdentifierExpirable,
  providerJson,
  providerName,
  type Content,
  type ExpirableContent,
} from './builders.ts'
export { contentHash, joinJsonObjects, parseStringArray, withUpdatedAt } from './json.ts'
export { priorStampsFrom, priorStampsScanned } from './prior-stamps.ts'
export {
  compareDocumentFiles,
  comparedResources,
  documentDifferences,
  hasDifferences,
  IDS_PER_LIST,
  type ComparedResource,
  type IdSample,
  type ResourceDiff,
  type ResourceDifferences,
} from './compare.ts'
