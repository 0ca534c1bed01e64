// The dataset's entities as pure functions of (seed, organization, indices). A "plan" holds what
// other rows need to know about an entity (ids, names, counts); a row builder turns a plan into
// the source row. Nothing is cached across calls: the generator rebuilds rows when it needs them,
// which keeps memory flat whatever the dataset size.
import { createHash } from 'node:crypto'
import { deaNumber, npiFor } from './check-digits.ts'
import { type Row, type TableName, TABLE_NAMES, jsonbText, zonedTimestamp } from './debezium.ts'
import { Rng, hashInts, rngFor, uuidFor } from './prng.ts'
import * as V from './vocabulary.ts'

export const DAY_US = 86_400_000_000

/** Stream and uuid namespace per table; plans draw from their own namespaces. */
export const T = Object.fromEntries(TABLE_NAMES.map((t, i) => [t, i])) as Record<TableName, number>
const PLAN = {
  organization: 20,
  group: 21,
  provider: 22,
  enrollment: 23,
  groupEnrollment: 24,
  expiry: 25,
}

export const SCOPES_ALL = [
  'providers:read',
  'providers:read:sensitive',
  'groups:read',
  'enrollments:read',
  'documents:read',
] as const

export interface Ctx {
  readonly seed: number
  readonly organizations: number
  /** Providers of each organization in the snapshot. */
  readonly providers: number
  /** Provider index space of each organization (snapshot plus onboarded while streaming). */
  readonly providerSlots: number
  readonly groups: number
  readonly nowDay: number
  readonly snapshotUs: number
}

// ---- shared helpers -----------------------------------------------------------------------------

function ascii(s: string): string {
  return s
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z0-9]/g, '')
}

function slug(s: string): string {
  return s
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
}

function phone(rng: Rng, place: V.Place): string {
  return `${place.area}-${rng.range(201, 989)}-${rng.digits(4)}`
}

function street(rng: Rng): string {
  return `${rng.range(100, 9899)} ${rng.pick(V.STREET_NAMES)} ${rng.pick(V.STREET_TYPES)}`
}

function zip(rng: Rng, place: V.Place): string {
  return place.zip3 + rng.digits(2)
}

function placesIn(state: string): V.Place[] {
  return V.PLACES.filter((p) => p.state === state)
}

const PLACES_BY_STATE = new Map<string, V.Place[]>(
  V.PLACES.map((p) => [p.state, placesIn(p.state)] as const),
)

function nearbyPlace(rng: Rng, place: V.Place): V.Place {
  return rng.pick(PLACES_BY_STATE.get(place.state) ?? [place])
}

export function ts(us: number): string {
  return zonedTimestamp(us)
}

/** A time between two instants, in microseconds. */
function between(rng: Rng, fromUs: number, toUs: number): number {
  return fromUs + Math.floor(rng.float() * Math.max(1, toUs - fromUs))
}

function dayOf(us: number): number {
  return Math.floor(us / DAY_US)
}

// ---- organizations and keys ---------------------------------------------------------------------

export interface KeyPlan {
  readonly id: string
  readonly name: string
  readonly rawKey: string
  readonly keyHash: string
  readonly scopes: readonly string[]
  readonly createdUs: number
  readonly expiresUs: number | null
  readonly revokedUs: number | null
}

export interface OrgPlan {
  readonly o: number
  readonly id: string
  readonly name: string
  readonly domain: string
  readonly createdUs: number
  readonly updatedUs: number
  readonly keys: readonly KeyPlan[]
  readonly portalLogins: readonly string[]
}

export function orgPlan(ctx: Ctx, o: number): OrgPlan {
  const rng = rngFor(ctx.seed, PLAN.organization, o)
  const base = V.ORGANIZATION_NAMES[o % V.ORGANIZATION_NAMES.length]!
  const round = Math.floor(o / V.ORGANIZATION_NAMES.length)
  const name = round === 0 ? base : `${base} ${round + 1}`
  const createdUs = ctx.snapshotUs - rng.range(400, 1400) * DAY_US - rng.int(DAY_US)
  const updatedUs = between(rng, createdUs, ctx.snapshotUs - DAY_US)
  const keyCount = rng.chance(0.5) ? 3 : 2
  const keys: KeyPlan[] = []
  for (let k = 0; k < keyCount; k++) {
    const krng = rngFor(ctx.seed, T.api_keys, o, k)
    const rawKey = 'crk_live_' + krng.hex(32)
    const createdKeyUs = between(krng, createdUs, ctx.snapshotUs - 2 * DAY_US)
    const legacy = k === 2
    const revoked = legacy && krng.chance(0.5)
    keys.push({
      id: uuidFor(ctx.seed, T.api_keys, o, k),
      name:
        k === 0
          ? 'Production sync'
          : k === 1
            ? 'Reporting (no sensitive data)'
            : 'Legacy integration',
      rawKey,
      keyHash: createHash('sha256').update(rawKey).digest('hex'),
      scopes:
        k === 0
          ? SCOPES_ALL
          : k === 1
            ? SCOPES_ALL.filter((s) => s !== 'providers:read:sensitive')
            : ['providers:read', 'groups:read'],
      createdUs: createdKeyUs,
      expiresUs: legacy && !revoked ? ctx.snapshotUs + krng.range(30, 120) * DAY_US : null,
      revokedUs: revoked ? between(krng, createdKeyUs, ctx.snapshotUs - DAY_US) : null,
    })
  }
  const portalPayers = rng.sample(
    V.PAYERS.filter((p) => p.states === null).map((p) => p.name),
    rng.range(1, 3),
  )
  return {
    o,
    id: uuidFor(ctx.seed, T.organizations, o, 0),
    name,
    domain: slug(name).slice(0, 24) + '.example.org',
    createdUs,
    updatedUs,
    keys,
    portalLogins: portalPayers,
  }
}

export function organizationRow(plan: OrgPlan): Row {
  return {
    id: plan.id,
    name: plan.name,
    api_enabled: true,
    billing_status: 'active',
    created_at: ts(plan.createdUs),
    updated_at: ts(plan.updatedUs),
  }
}

export function apiKeyRow(org: OrgPlan, key: KeyPlan): Row {
  return {
    id: key.id,
    organization_id: org.id,
    name: key.name,
    key_hash: key.keyHash,
    scopes: key.scopes,
    created_at: ts(key.createdUs),
    expires_at: key.expiresUs === null ? null : ts(key.expiresUs),
    revoked_at: key.revokedUs === null ? null : ts(key.revokedUs),
  }
}

export function portalLoginRow(ctx: Ctx, org: OrgPlan, n: number): Row {
  const rng = rngFor(ctx.seed, T.payer_portal_logins, org.o, n)
  const createdUs = between(rng, org.createdUs, ctx.snapshotUs - DAY_US)
  return {
    id: uuidFor(ctx.seed, T.payer_portal_logins, org.o, n),
    organization_id: org.id,
    payer: org.portalLogins[n]!,
    username: `portal_${rng.hex(10)}`,
    password_cipher: `v1:aes-256-gcm:${Buffer.from(rng.hex(48), 'hex').toString('base64')}`,
    created_at: ts(createdUs),
    updated_at: ts(between(rng, createdUs, ctx.snapshotUs)),
  }
}

// ---- groups -------------------------------------------------------------------------------------

export interface GroupPlan {
  readonly g: number
  readonly id: string
  readonly name: string
  readonly legalName: string
  readonly kind: V.GroupKind
  readonly place: V.Place
  readonly npi: string | null
  readonly tin: string
  readonly locations: number
  readonly identifierTypes: readonly string[]
  readonly enrollments: number
  readonly createdUs: number
}

export function groupPlan(ctx: Ctx, org: OrgPlan, g: number): GroupPlan {
  const rng = rngFor(ctx.seed, PLAN.group, org.o, g)
  const kind = rng.pick(V.GROUP_KINDS)
  const name = `${rng.pick(V.GROUP_PLACES)} ${kind.phrase}`
  const identifierTypes = ['group_medicare_ptan']
  if (rng.chance(0.6)) identifierTypes.push('group_medicaid_id')
  if (rng.chance(0.35)) identifierTypes.push('clia')
  if (rng.chance(0.8)) identifierTypes.push('liability_insurance')
  return {
    g,
    id: uuidFor(ctx.seed, T.provider_groups, org.o, g),
    name,
    legalName: name + rng.pick(V.LEGAL_SUFFIXES),
    kind,
    place: rng.pick(V.PLACES),
    npi: rng.chance(0.95) ? npiFor(2, org.o * ctx.groups + g, ctx.seed) : null,
    tin: `${rng.range(10, 99)}-${rng.digits(7)}`,
    locations: rng.weighted([
      [1, 40],
      [2, 30],
      [3, 20],
      [4, 10],
    ]),
    identifierTypes,
    enrollments: rng.range(1, 4),
    createdUs: between(rng, org.createdUs, ctx.snapshotUs - 30 * DAY_US),
  }
}

export function groupRow(ctx: Ctx, org: OrgPlan, plan: GroupPlan): Row {
  const rng = rngFor(ctx.seed, T.provider_groups, org.o, plan.g)
  return {
    id: plan.id,
    organization_id: org.id,
    name: plan.name,
    legal_name: rng.chance(0.9) ? plan.legalName : null,
    npi: plan.npi,
    tin: plan.tin,
    taxonomy_code: plan.kind.taxonomy,
    created_at: ts(plan.createdUs),
    updated_at: ts(between(rng, plan.createdUs, ctx.snapshotUs)),
  }
}

export function locationId(ctx: Ctx, org: OrgPlan, g: number, l: number): string {
  return uuidFor(ctx.seed, T.service_locations, org.o, g, l)
}

export function locationRow(ctx: Ctx, org: OrgPlan, plan: GroupPlan, l: number): Row {
  const rng = rngFor(ctx.seed, T.service_locations, org.o, plan.g, l)
  const place = l === 0 ? plan.place : nearbyPlace(rng, plan.place)
  const label =
    l === 0 ? rng.pick(V.LOCATION_LABELS) : V.LOCATION_LABELS[(l * 5) % V.LOCATION_LABELS.length]!
  const createdUs = between(rng, plan.createdUs, ctx.snapshotUs - DAY_US)
  return {
    id: locationId(ctx, org, plan.g, l),
    organization_id: org.id,
    provider_group_id: plan.id,
    name: `${plan.name} - ${place.city === plan.place.city ? label : place.city}`,
    address: street(rng),
    address_line_2: rng.chance(0.45) ? `${rng.pick(V.UNITS)} ${rng.range(100, 950)}` : null,
    city: place.city,
    state: place.state,
    zip: zip(rng, place),
    phone: phone(rng, place),
    is_primary: l === 0,
    created_at: ts(createdUs),
    updated_at: ts(between(rng, createdUs, ctx.snapshotUs)),
  }
}

export function groupIdentifierRow(ctx: Ctx, org: OrgPlan, plan: GroupPlan, j: number): Row {
  const rng = rngFor(ctx.seed, T.group_identifiers, org.o, plan.g, j)
  const type = plan.identifierTypes[j]!
  const createdUs = between(rng, plan.createdUs, ctx.snapshotUs - DAY_US)
  const state = plan.place.state
  let value: string
  let issued: number | null = dayOf(createdUs) - rng.range(0, 900)
  let expires: number | null = null
  let metadata: Record<string, string> = { state, status: 'active' }
  switch (type) {
    case 'group_medicare_ptan':
      value = `${state}${rng.digits(6)}`
      break
    case 'group_medicaid_id':
      value = rng.digits(9)
      expires = rng.chance(0.5) ? ctx.nowDay + rng.range(-60, 1000) : null
      break
    case 'clia':
      value = `${rng.range(10, 99)}D${rng.digits(7)}`
      expires = ctx.nowDay + rng.range(-45, 730)
      metadata = { state, status: 'active', certificate: 'waiver' }
      break
    default:
      value = `GL-${rng.digits(8)}`
      issued = ctx.nowDay - rng.range(1, 360)
      expires = issued + 365
      metadata = { status: 'active', carrier: rng.pick(V.CARRIERS), coverage: '1M/3M' }
  }
  if (expires !== null && expires < ctx.nowDay) metadata = { ...metadata, status: 'expired' }
  return {
    id: uuidFor(ctx.seed, T.group_identifiers, org.o, plan.g, j),
    organization_id: org.id,
    provider_group_id: plan.id,
    type,
    value,
    issued_on: issued,
    expires_on: expires,
    metadata: jsonbText(metadata),
    created_at: ts(createdUs),
    updated_at: ts(between(rng, createdUs, ctx.snapshotUs)),
  }
}

// ---- providers ----------------------------------------------------------------------------------

export interface ProviderPlan {
  readonly i: number
  readonly id: string
  readonly type: V.ProviderType
  readonly firstName: string
  readonly lastName: string
  readonly place: V.Place
  readonly specialties: readonly V.Specialty[]
  /** Group indices, primary first. */
  readonly groups: readonly number[]
  readonly identifierTypes: readonly string[]
  readonly licenseStates: readonly string[]
  readonly enrollments: number
  readonly documents: readonly DocumentPlan[]
  readonly createdUs: number
}

export interface DocumentPlan {
  readonly type: string
  /** Index of the identifier whose expiry the document carries, if any. */
  readonly identifier: number | null
}

export function providerId(ctx: Ctx, org: OrgPlan, i: number): string {
  return uuidFor(ctx.seed, T.providers, org.o, i)
}

/** Provider plans; `createdUs` overrides the creation time (providers onboarded while streaming). */
export function providerPlan(ctx: Ctx, org: OrgPlan, i: number, createdUs?: number): ProviderPlan {
  const rng = rngFor(ctx.seed, PLAN.provider, org.o, i)
  const type = rng.weighted(V.PROVIDER_TYPES)
  const place = rng.pick(V.PLACES)
  const pool = V.SPECIALTIES_BY_TYPE[type]
  const extra = rng.weighted([
    [0, 60],
    [1, 25],
    [2, 10],
    [4, 4],
    [6, 1],
  ])
  const specialties = rng.sample(pool, 1 + extra)
  // keep the primary specialty first but random
  const primary = rng.int(specialties.length)
  ;[specialties[0], specialties[primary]] = [specialties[primary]!, specialties[0]!]

  const groups: number[] = []
  if (ctx.groups > 0 && rng.chance(0.92)) {
    groups.push(rng.int(ctx.groups))
    if (ctx.groups > 1 && rng.chance(0.3)) {
      const second = (groups[0]! + 1 + rng.int(ctx.groups - 1)) % ctx.groups
      groups.push(second)
    }
  }

  const licenseStates = [place.state]
  if (rng.chance(type === 'LCSW' ? 0.1 : 0.25)) {
    const other = rng.pick(V.PLACES).state
    if (other !== place.state) licenseStates.push(other)
  }
  const identifierTypes: string[] = licenseStates.map(() => 'state_license')
  const prescriber = type !== 'LCSW'
  if (prescriber && rng.chance(type === 'MD' || type === 'DO' ? 0.88 : 0.6))
    identifierTypes.push('dea')
  if (type !== 'LCSW' && rng.chance(0.75)) identifierTypes.push('board_certification')
  if (rng.chance(0.55)) identifierTypes.push('medicare_ptan')
  if (rng.chance(0.4)) identifierTypes.push('medicaid_id')
  if (rng.chance(type === 'LCSW' ? 0.7 : 0.95)) identifierTypes.push('malpractice_insurance')

  const documents: DocumentPlan[] = []
  identifierTypes.forEach((t, j) => {
    const docType =
      t === 'state_license'
        ? 'license'
        : t === 'dea'
          ? 'dea_certificate'
          : t === 'malpractice_insurance'
            ? 'malpractice_coi'
            : t === 'board_certification'
              ? 'board_certificate'
              : null
    if (docType !== null && rng.chance(docType === 'license' ? 0.85 : 0.6)) {
      documents.push({ type: docType, identifier: j })
    }
  })
  if (rng.chance(0.8)) documents.push({ type: 'cv', identifier: null })

  const first = rng.pick(V.FIRST_NAMES)
  const last = rng.pick(V.LAST_NAMES)
  return {
    i,
    id: providerId(ctx, org, i),
    type,
    firstName: first,
    lastName: last,
    place,
    specialties,
    groups,
    identifierTypes,
    licenseStates,
    enrollments: rng.weighted([
      [0, 12],
      [1, 30],
      [2, 30],
      [3, 18],
      [4, 10],
    ]),
    documents,
    createdUs: createdUs ?? between(rng, org.createdUs + 20 * DAY_US, ctx.snapshotUs - 2 * DAY_US),
  }
}

const INTERNAL_NOTES = [
  'Reference check with prior employer pending; do not share.',
  'Malpractice claim (2019) reviewed by committee, cleared.',
  'Prefers contact by text. Spouse also credentialed with us.',
  'Gap in work history 2017-2018 explained: parental leave.',
  'Flagged for re-verification of board status before recredentialing.',
  'Salary negotiation notes kept in HR system, not here.',
] as const

/** The address part of a provider row; a move draws a new one from `rng`. */
export function providerAddress(rng: Rng, place: V.Place): Row {
  const home = rng.chance(0.8) ? nearbyPlace(rng, place) : rng.pick(V.PLACES)
  return {
    billing_address: street(rng),
    billing_address_line_2: rng.chance(0.4) ? `${rng.pick(V.UNITS)} ${rng.range(100, 950)}` : null,
    billing_city: place.city,
    billing_state: place.state,
    billing_zip: zip(rng, place),
    personal_address: street(rng),
    personal_address_line_2: rng.chance(0.2)
      ? `Apt ${rng.range(1, 40)}${rng.pick(['A', 'B', 'C', ''])}`
      : null,
    personal_city: home.city,
    personal_county: home.county,
    personal_state: home.state,
    personal_zip: zip(rng, home),
  }
}

export function providerRow(ctx: Ctx, org: OrgPlan, plan: ProviderPlan, npiIndex: number): Row {
  const rng = rngFor(ctx.seed, T.providers, org.o, plan.i)
  const [primary, secondary, ...additional] = plan.specialties
  const spec = (n: number) => additional[n] ?? null
  const termed = rng.chance(0.03)
  const startDay = dayOf(plan.createdUs) + rng.range(-30, 60)
  const medicaid = rng.pick(V.PARTICIPATION)
  const medicare = rng.pick(V.PARTICIPATION)
  const languages = [
    'English',
    ...rng.sample(
      V.LANGUAGES,
      rng.weighted([
        [0, 55],
        [1, 35],
        [2, 10],
      ]),
    ),
  ]
  const [country, cities] = rng.weighted(
    V.BIRTH_COUNTRIES.map(([c, cs, w]) => [[c, cs] as const, w]),
  )
  const [ethnicity, details] = rng.pick(V.ETHNICITIES)
  const mail = `${ascii(plan.firstName).toLowerCase()}.${ascii(plan.lastName).toLowerCase()}`
  const ssnArea = rng.chance(0.5) ? rng.range(1, 665) : rng.range(667, 899)
  return {
    id: plan.id,
    organization_id: org.id,
    first_name: plan.firstName,
    middle_name: rng.chance(0.55) ? rng.pick(V.MIDDLE_NAMES) : null,
    last_name: plan.lastName,
    suffix: rng.chance(0.04) ? rng.pick(V.SUFFIXES) : null,
    npi: npiFor(1, npiIndex, ctx.seed),
    is_active: !termed,
    telehealth_services: rng.chance(plan.type === 'LCSW' ? 0.7 : 0.3),
    type: plan.type,
    caqh_id: rng.chance(0.88) ? String(rng.range(10_000_000, 19_999_999)) : null,
    start_date: startDay,
    termed_date: termed ? Math.min(ctx.nowDay - 1, startDay + rng.range(90, 900)) : null,
    taxonomy_code: primary!.code,
    specialty: primary!.name,
    specialty_taxonomy_code: primary!.code,
    secondary_specialty: secondary?.name ?? null,
    secondary_specialty_taxonomy_code: secondary?.code ?? null,
    additional_specialty_1: spec(0)?.name ?? null,
    additional_specialty_1_taxonomy_code: spec(0)?.code ?? null,
    additional_specialty_2: spec(1)?.name ?? null,
    additional_specialty_2_taxonomy_code: spec(1)?.code ?? null,
    additional_specialty_3: spec(2)?.name ?? null,
    additional_specialty_3_taxonomy_code: spec(2)?.code ?? null,
    additional_specialty_4: spec(3)?.name ?? null,
    additional_specialty_4_taxonomy_code: spec(3)?.code ?? null,
    additional_specialty_5: spec(4)?.name ?? null,
    additional_specialty_5_taxonomy_code: spec(4)?.code ?? null,
    ...providerAddress(rng, plan.place),
    personal_email: `${mail}${rng.range(1, 99)}@${rng.pick(V.EMAIL_DOMAINS)}`,
    personal_fax: rng.chance(0.15) ? phone(rng, plan.place) : null,
    personal_phone: phone(rng, plan.place),
    other_emails: rng.chance(0.35) ? [`${mail}@${org.domain}`] : [],
    languages,
    medicaid_participation: medicaid,
    medicare_participation: medicare,
    medicaid_states: medicaid === 'participating' ? plan.licenseStates : [],
    medicare_states: medicare === 'participating' ? plan.licenseStates : [],
    birth_city: rng.chance(0.9) ? rng.pick(cities) : null,
    birth_country: country,
    date_of_birth: dayOf(plan.createdUs) - rng.range(28 * 365, 68 * 365),
    ethnicity,
    ethnicity_detail: rng.pick(details),
    gender: rng.weighted(V.GENDERS),
    ssn: `${String(ssnArea).padStart(3, '0')}-${String(rng.range(1, 99)).padStart(2, '0')}-${String(rng.range(1, 9999)).padStart(4, '0')}`,
    internal_notes: rng.chance(0.6) ? rng.pick(INTERNAL_NOTES) : null,
    created_at: ts(plan.createdUs),
    updated_at: ts(between(rng, plan.createdUs, ctx.snapshotUs)),
  }
}

export function identifierId(ctx: Ctx, org: OrgPlan, i: number, j: number): string {
  return uuidFor(ctx.seed, T.provider_identifiers, org.o, i, j)
}

const EXPIRY_SPREAD: readonly (readonly [readonly [number, number], number])[] = [
  [[-120, -1], 8],
  [[0, 90], 14],
  [[91, 365], 38],
  [[366, 730], 40],
]

/**
 * A provider identifier's expiry: a few already expired, the rest spread over the coming two
 * years, none for Medicare PTANs and some lifetime board certificates. A stream of its own, so
 * the streamed changes can find what is about to expire without building rows.
 */
export function identifierExpiry(
  ctx: Ctx,
  org: OrgPlan,
  i: number,
  j: number,
  type: string,
): number | null {
  const rng = rngFor(ctx.seed, PLAN.expiry, org.o, i, j)
  const [lo, hi] = rng.weighted(EXPIRY_SPREAD)
  const day = ctx.nowDay + rng.range(lo, hi)
  switch (type) {
    case 'medicare_ptan':
      return null
    case 'board_certification':
      return rng.chance(0.3) ? null : day
    case 'medicaid_id':
      return rng.chance(0.6) ? null : day
    default:
      return day
  }
}

const LICENSE_PREFIXES: Record<V.ProviderType, string> = {
  MD: 'MD',
  DO: 'DO',
  NP: 'NP',
  PA: 'PA',
  LCSW: 'LCS',
}

/** ABMS, AOA, ...: the initials of each board's name. */
const BOARD_ACRONYMS = Object.fromEntries(
  Object.entries(V.BOARDS).map(([type, board]) => [
    type,
    board
      .split(' ')
      .filter((w) => /^[A-Z]/.test(w))
      .map((w) => w[0])
      .join(''),
  ]),
) as Record<V.ProviderType, string>

export function providerIdentifierRow(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  j: number,
  type = plan.identifierTypes[j]!,
  state = plan.licenseStates[j] ?? plan.place.state,
): Row {
  const rng = rngFor(ctx.seed, T.provider_identifiers, org.o, plan.i, j)
  const createdUs = between(
    rng,
    plan.createdUs,
    Math.max(plan.createdUs + 1, ctx.snapshotUs - DAY_US),
  )
  let value: string
  let issued: number | null = dayOf(plan.createdUs) - rng.range(30, 2500)
  const expires = identifierExpiry(ctx, org, plan.i, j, type)
  let metadata: Record<string, string | number> = { state, status: 'active' }
  switch (type) {
    case 'state_license': {
      // California physician licenses read A123456; elsewhere a type prefix and digits.
      const physicianInCa = state === 'CA' && (plan.type === 'MD' || plan.type === 'DO')
      value = (physicianInCa ? 'A' : LICENSE_PREFIXES[plan.type]) + rng.digits(6)
      metadata = { state, status: 'active', license_type: plan.type }
      break
    }
    case 'dea':
      value = deaNumber(
        plan.type === 'MD' || plan.type === 'DO' ? rng.pick(['A', 'B', 'F']) : 'M',
        plan.lastName,
        rng.digits(6),
      )
      metadata = { state, status: 'active', schedules: '2,2N,3,3N,4,5' }
      break
    case 'board_certification': {
      const specialty = plan.specialties[0]!.name
      value = `${BOARD_ACRONYMS[plan.type]}-${rng.digits(6)}`
      metadata = { board: V.BOARDS[plan.type], status: 'certified', specialty }
      break
    }
    case 'medicare_ptan':
      value = `${state}${rng.digits(6)}`
      break
    case 'medicaid_id':
      value = rng.digits(10)
      break
    default: // malpractice_insurance
      value = `MPL-${rng.range(2019, 2026)}-${rng.digits(8)}`
      issued = expires === null ? null : expires - 365
      metadata = {
        status: 'active',
        carrier: rng.pick(V.CARRIERS),
        coverage: rng.pick(['1M/3M', '2M/4M', '1M/1M']),
      }
  }
  if (rng.chance(0.04)) issued = null
  if (expires !== null && expires < ctx.nowDay) metadata = { ...metadata, status: 'expired' }
  return {
    id: identifierId(ctx, org, plan.i, j),
    organization_id: org.id,
    provider_id: plan.id,
    type,
    value,
    issued_on: issued,
    expires_on: expires,
    metadata: jsonbText(metadata),
    created_at: ts(createdUs),
    updated_at: ts(between(rng, createdUs, ctx.snapshotUs)),
  }
}

export function membershipId(ctx: Ctx, org: OrgPlan, i: number, m: number): string {
  return uuidFor(ctx.seed, T.group_memberships, org.o, i, m)
}

export function membershipRow(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  m: number,
  g = plan.groups[m]!,
  atUs?: number,
): Row {
  const rng = rngFor(ctx.seed, T.group_memberships, org.o, plan.i, m)
  const createdUs =
    atUs ?? between(rng, plan.createdUs, Math.max(plan.createdUs + 1, ctx.snapshotUs - DAY_US))
  const createdAt = ts(createdUs)
  return {
    id: membershipId(ctx, org, plan.i, m),
    organization_id: org.id,
    provider_id: plan.id,
    provider_group_id: uuidFor(ctx.seed, T.provider_groups, org.o, g),
    created_at: createdAt,
    updated_at: createdAt,
  }
}

// ---- enrollments --------------------------------------------------------------------------------

export interface EnrollmentPlan {
  readonly e: number
  readonly id: string
  readonly payer: string
  readonly state: string
  readonly status: V.EnrollmentStatus
  /** Group index the provider enrolls under, if any. */
  readonly group: number | null
  readonly requirements: number
  readonly linesOfBusiness: readonly string[]
  readonly createdUs: number
}

function payersFor(state: string): (readonly [string, number])[] {
  return V.PAYERS.filter((p) => p.states === null || p.states.includes(state)).map(
    (p) => [p.name, p.weight] as const,
  )
}

const PAYERS_BY_STATE = new Map<string, (readonly [string, number])[]>()
function payerPool(state: string): (readonly [string, number])[] {
  let pool = PAYERS_BY_STATE.get(state)
  if (pool === undefined) {
    pool = payersFor(state)
    PAYERS_BY_STATE.set(state, pool)
  }
  return pool
}

export function enrollmentPlan(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  e: number,
  createdUs?: number,
): EnrollmentPlan {
  const rng = rngFor(ctx.seed, PLAN.enrollment, org.o, plan.i, e)
  const state = rng.chance(0.85) ? plan.place.state : rng.pick(plan.licenseStates)
  const lobs = rng.sample(
    V.LINES_OF_BUSINESS,
    rng.weighted([
      [1, 45],
      [2, 35],
      [3, 15],
      [4, 5],
    ]),
  )
  return {
    e,
    id: uuidFor(ctx.seed, T.enrollments, org.o, plan.i, e),
    payer: rng.weighted(payerPool(state)),
    state,
    status: createdUs === undefined ? rng.weighted(V.ENROLLMENT_STATUS_WEIGHTS) : 'not_started',
    group: plan.groups.length > 0 && rng.chance(0.8) ? plan.groups[0]! : null,
    requirements: rng.range(3, 8),
    linesOfBusiness: lobs,
    createdUs: createdUs ?? between(rng, plan.createdUs, ctx.snapshotUs - 3 * DAY_US),
  }
}

/** Dates an enrollment carries in a status, drawn from its own stream so they are stable. */
export function enrollmentRow(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  ep: EnrollmentPlan,
  status = ep.status,
  atUs?: number,
): Row {
  const rng = rngFor(ctx.seed, T.enrollments, org.o, plan.i, ep.e)
  const createdDay = dayOf(ep.createdUs)
  const submitted = ['submitted', 'approved', 'denied'].includes(status)
  const approved = status === 'approved'
  const submittedOn = submitted ? Math.min(ctx.nowDay, createdDay + rng.range(5, 45)) : null
  const approvedOn = approved
    ? Math.min(ctx.nowDay, (submittedOn ?? createdDay) + rng.range(20, 120))
    : null
  return {
    id: ep.id,
    organization_id: org.id,
    provider_id: plan.id,
    provider_group_id:
      ep.group === null ? null : uuidFor(ctx.seed, T.provider_groups, org.o, ep.group),
    payer: ep.payer,
    state: ep.state,
    status,
    payer_provider_id: approved
      ? `${ep.payer.replace(/[^A-Z]/g, '').slice(0, 3) || 'PRV'}${rng.digits(8)}`
      : null,
    submitted_on: submittedOn,
    approved_on: approvedOn,
    effective_date: approvedOn === null ? null : approvedOn + rng.range(0, 30),
    created_at: ts(ep.createdUs),
    updated_at: ts(atUs ?? between(rng, ep.createdUs, ctx.snapshotUs)),
  }
}

/** How far along the checklist an enrollment in a status is. */
function completedCount(status: V.EnrollmentStatus, total: number, rng: Rng): number {
  switch (status) {
    case 'not_started':
      return 0
    case 'in_progress':
      return rng.range(1, Math.max(1, total - 2))
    case 'submitted':
      return total - 1
    case 'approved':
      return total
    case 'denied':
      return total - 1
    case 'withdrawn':
      return rng.range(0, total - 1)
  }
}

function requirementId(ctx: Ctx, org: OrgPlan, i: number, e: number, k: number): string {
  return uuidFor(ctx.seed, T.enrollment_requirements, org.o, i, e * 64 + k)
}

export function requirementRows(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  ep: EnrollmentPlan,
): Row[] {
  const rng = rngFor(ctx.seed, T.enrollment_requirements, org.o, plan.i, ep.e)
  const steps = rng
    .sample(V.CHECKLIST.slice(0, -2), ep.requirements - 2)
    .concat(V.CHECKLIST.slice(-2))
  const done = completedCount(ep.status, ep.requirements, rng)
  let completedUs = ep.createdUs
  return steps.map((name, k) => {
    const complete = k < done
    if (complete)
      completedUs = between(rng, completedUs, Math.max(completedUs + 1, ctx.snapshotUs - DAY_US))
    return {
      id: requirementId(ctx, org, plan.i, ep.e, k),
      organization_id: org.id,
      enrollment_id: ep.id,
      position: k + 1,
      name,
      is_complete: complete,
      completed_at: complete ? ts(completedUs) : null,
      created_at: ts(ep.createdUs),
      updated_at: ts(complete ? completedUs : ep.createdUs),
    }
  })
}

export function lobStatusFor(status: V.EnrollmentStatus, rng: Rng): string {
  switch (status) {
    case 'approved':
      return rng.chance(0.92) ? 'active' : 'terminated'
    case 'denied':
      return 'denied'
    case 'withdrawn':
      return 'terminated'
    default:
      return 'pending'
  }
}

export function enrollmentLobRows(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  ep: EnrollmentPlan,
  status = ep.status,
  atUs?: number,
): Row[] {
  return ep.linesOfBusiness.map((lob, n) => {
    const rng = rngFor(ctx.seed, T.enrollment_lines_of_business, org.o, plan.i, ep.e * 64 + n)
    const lobStatus = lobStatusFor(status, rng)
    const createdUs = ep.createdUs + rng.int(60_000_000)
    return {
      id: uuidFor(ctx.seed, T.enrollment_lines_of_business, org.o, plan.i, ep.e * 64 + n),
      organization_id: org.id,
      enrollment_id: ep.id,
      line_of_business: lob,
      status: lobStatus,
      effective_date: lobStatus === 'active' ? ctx.nowDay - rng.range(0, 700) : null,
      created_at: ts(createdUs),
      updated_at: ts(atUs ?? between(rng, createdUs, ctx.snapshotUs)),
    }
  })
}

export function participationRows(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  ep: EnrollmentPlan,
  group: GroupPlan | null,
  status = ep.status,
  atUs?: number,
): Row[] {
  if (group === null) return []
  const rng = rngFor(ctx.seed, T.enrollment_location_participations, org.o, plan.i, ep.e)
  const count = Math.min(group.locations, rng.chance(0.7) ? 1 : 2)
  const rows: Row[] = []
  for (let n = 0; n < count; n++) {
    const active = status === 'approved' && rng.chance(0.9)
    rows.push({
      id: uuidFor(ctx.seed, T.enrollment_location_participations, org.o, plan.i, ep.e * 64 + n),
      organization_id: org.id,
      enrollment_id: ep.id,
      service_location_id: locationId(ctx, org, group.g, n),
      is_active: active,
      activated_on: active ? ctx.nowDay - rng.range(0, 600) : null,
      created_at: ts(ep.createdUs),
      updated_at: ts(atUs ?? between(rng, ep.createdUs, ctx.snapshotUs)),
    })
  }
  return rows
}

// ---- group enrollments --------------------------------------------------------------------------

export interface GroupEnrollmentPlan {
  readonly n: number
  readonly id: string
  readonly payer: string
  readonly status: V.EnrollmentStatus
  readonly linesOfBusiness: readonly string[]
  readonly createdUs: number
}

export function groupEnrollmentPlan(
  ctx: Ctx,
  org: OrgPlan,
  group: GroupPlan,
  n: number,
): GroupEnrollmentPlan {
  const rng = rngFor(ctx.seed, PLAN.groupEnrollment, org.o, group.g, n)
  return {
    n,
    id: uuidFor(ctx.seed, T.group_enrollments, org.o, group.g, n),
    payer: rng.weighted(payerPool(group.place.state)),
    status: rng.weighted(V.ENROLLMENT_STATUS_WEIGHTS),
    linesOfBusiness: rng.sample(V.LINES_OF_BUSINESS, rng.range(1, 3)),
    createdUs: between(rng, group.createdUs, ctx.snapshotUs - 3 * DAY_US),
  }
}

export function groupEnrollmentRow(
  ctx: Ctx,
  org: OrgPlan,
  group: GroupPlan,
  gp: GroupEnrollmentPlan,
  status = gp.status,
  atUs?: number,
): Row {
  const rng = rngFor(ctx.seed, T.group_enrollments, org.o, group.g, gp.n)
  const createdDay = dayOf(gp.createdUs)
  const submitted = ['submitted', 'approved', 'denied'].includes(status)
  const submittedOn = submitted ? Math.min(ctx.nowDay, createdDay + rng.range(5, 40)) : null
  const approvedOn =
    status === 'approved'
      ? Math.min(ctx.nowDay, (submittedOn ?? createdDay) + rng.range(20, 150))
      : null
  return {
    id: gp.id,
    organization_id: org.id,
    provider_group_id: group.id,
    payer: gp.payer,
    state: group.place.state,
    status,
    payer_group_id: approvedOn === null ? null : `G${rng.digits(9)}`,
    submitted_on: submittedOn,
    approved_on: approvedOn,
    effective_date: approvedOn === null ? null : approvedOn + rng.range(0, 45),
    created_at: ts(gp.createdUs),
    updated_at: ts(atUs ?? between(rng, gp.createdUs, ctx.snapshotUs)),
  }
}

export function groupEnrollmentLobRows(
  ctx: Ctx,
  org: OrgPlan,
  group: GroupPlan,
  gp: GroupEnrollmentPlan,
  status = gp.status,
  atUs?: number,
): Row[] {
  return gp.linesOfBusiness.map((lob, k) => {
    const rng = rngFor(
      ctx.seed,
      T.group_enrollment_lines_of_business,
      org.o,
      group.g,
      gp.n * 64 + k,
    )
    const lobStatus = lobStatusFor(status, rng)
    return {
      id: uuidFor(ctx.seed, T.group_enrollment_lines_of_business, org.o, group.g, gp.n * 64 + k),
      organization_id: org.id,
      group_enrollment_id: gp.id,
      line_of_business: lob,
      status: lobStatus,
      effective_date: lobStatus === 'active' ? ctx.nowDay - rng.range(0, 900) : null,
      created_at: ts(gp.createdUs),
      updated_at: ts(atUs ?? between(rng, gp.createdUs, ctx.snapshotUs)),
    }
  })
}

// ---- documents ----------------------------------------------------------------------------------

/** Documents of groups live above the providers' index space. */
export const GROUP_DOCUMENT_BASE = 1 << 23

type Formats = readonly (readonly [keyof typeof V.CONTENT_TYPES, number])[]
const PDF_ONLY: Formats = [['pdf', 1]]
const DOC_FORMATS: Record<string, Formats> = {
  cv: [
    ['pdf', 70],
    ['docx', 30],
  ],
  license: [
    ['pdf', 80],
    ['jpg', 12],
    ['png', 8],
  ],
}

export function documentRow(
  ctx: Ctx,
  org: OrgPlan,
  owner: { providerId: string | null; groupId: string | null; label: string; createdUs: number },
  a: number,
  d: number,
  type: string,
  expiresOn: number | null,
  reference: string,
  atUs?: number,
): Row {
  const rng = rngFor(ctx.seed, T.documents, org.o, a, d)
  const id = uuidFor(ctx.seed, T.documents, org.o, a, d)
  const ext = rng.weighted(DOC_FORMATS[type] ?? PDF_ONLY)
  const uploadedUs =
    atUs ?? between(rng, owner.createdUs, Math.max(owner.createdUs + 1, ctx.snapshotUs - DAY_US))
  const uploadedAt = ts(uploadedUs)
  const year = Number(uploadedAt.slice(0, 4))
  const base =
    type === 'cv'
      ? `${owner.label}_CV_${year}`
      : type === 'w9'
        ? `W-9_${owner.label}_${year}`
        : `${owner.label}_${type}_${reference}`
  const fileName = base.replace(/[^A-Za-z0-9._-]+/g, '_') + '.' + ext
  return {
    id,
    organization_id: org.id,
    provider_id: owner.providerId,
    provider_group_id: owner.groupId,
    type,
    file_name: fileName,
    content_type: V.CONTENT_TYPES[ext],
    size_bytes: ext === 'pdf' ? rng.range(38_000, 4_800_000) : rng.range(120_000, 2_600_000),
    expires_on: expiresOn,
    uploaded_at: uploadedAt,
    storage_key: `s3://credentialing-documents-prod/${org.id}/${id}/${rng.hex(16)}.${ext}`,
    created_at: uploadedAt,
    updated_at: uploadedAt,
  }
}

export function providerLabel(plan: ProviderPlan): string {
  return `${ascii(plan.firstName)}_${ascii(plan.lastName)}`
}

export function providerDocumentRows(
  ctx: Ctx,
  org: OrgPlan,
  plan: ProviderPlan,
  identifiers: readonly Row[],
): Row[] {
  const owner = {
    providerId: plan.id,
    groupId: null,
    label: providerLabel(plan),
    createdUs: plan.createdUs,
  }
  return plan.documents.map((doc, d) => {
    const identifier = doc.identifier === null ? undefined : identifiers[doc.identifier]
    const expires = identifier === undefined ? null : (identifier.expires_on as number | null)
    const reference = identifier === undefined ? 'doc' : String(identifier.value)
    return documentRow(ctx, org, owner, plan.i, d, doc.type, expires, reference)
  })
}

export function groupDocumentRows(ctx: Ctx, org: OrgPlan, group: GroupPlan): Row[] {
  const owner = {
    providerId: null,
    groupId: group.id,
    label: group.name,
    createdUs: group.createdUs,
  }
  const rows = [documentRow(ctx, org, owner, GROUP_DOCUMENT_BASE + group.g, 0, 'w9', null, 'w9')]
  const rng = rngFor(ctx.seed, T.documents, org.o, GROUP_DOCUMENT_BASE + group.g, 999)
  if (rng.chance(0.6)) {
    const expires = ctx.nowDay + rng.range(-30, 365)
    rows.push(
      documentRow(
        ctx,
        org,
        owner,
        GROUP_DOCUMENT_BASE + group.g,
        1,
        'malpractice_coi',
        expires,
        'liability',
      ),
    )
  }
  return rows
}

/** A stable yes/no per entity and purpose, without a stream: cheap enough to ask often. */
export function coin(
  ctx: Ctx,
  purpose: number,
  org: number,
  a: number,
  b: number,
  p: number,
): boolean {
  return hashInts(ctx.seed ^ 0x51ed270b, purpose, org, a, b) / 4294967296 < p
}
