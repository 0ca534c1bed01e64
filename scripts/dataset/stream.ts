// Streamed changes after the snapshot: what credentialing teams do in a working day. Each round
// visits every provider and group of an organization and rolls the dice for each kind of change;
// each change is one transaction. Rows are rebuilt from their plans when a change needs them and
// only what changed is kept, one organization at a time.
import { type Row, type TableName, type Value, jsonbText } from './debezium.ts'
import type { Emitter, RecordParts } from './emitter.ts'
import * as M from './model.ts'
import { type Rng, rngFor } from './prng.ts'
import { npiIndex } from './snapshot.ts'
import * as V from './vocabulary.ts'

const ROUND = { provider: 30, group: 31, organization: 32 }
/** uuid sub-indices of rows created while streaming start here, clear of snapshot rows. */
const FIRST_NEW = 100
/** Records handed out per batch. */
const BATCH = 64

interface Extras {
  identifiers: { j: number; type: string; state: string }[]
  memberships: { m: number; g: number }[]
  enrollments: { e: number; createdUs: number }[]
  documents: number
}

interface OrgState {
  readonly org: M.OrgPlan
  readonly groups: readonly M.GroupPlan[]
  /** Creation time of each provider onboarded while streaming (index providers + n). */
  readonly onboardedAt: number[]
  readonly extras: Map<number, Extras>
}

export interface StreamOptions {
  readonly rounds: number
  /** New providers per organization per round. */
  readonly onboardPerRound: number
}

/**
 * The streamed changes, in batches of records. Organizations take their turn one after the
 * other (all rounds of one, then the next), so only one organization's changed rows are ever
 * held: memory stays bounded by the largest organization, not by the dataset.
 */
export function* stream(
  ctx: M.Ctx,
  emitter: Emitter,
  options: StreamOptions,
): Generator<RecordParts[]> {
  emitter.startStreaming()
  for (let o = 0; o < ctx.organizations; o++) {
    const org = M.orgPlan(ctx, o)
    const state: OrgState = {
      org,
      groups: Array.from({ length: ctx.groups }, (_, g) => M.groupPlan(ctx, org, g)),
      onboardedAt: [],
      extras: new Map(),
    }
    const world = new World(ctx, emitter)
    for (let round = 0; round < options.rounds; round++) {
      for (let i = 0; i < ctx.providers + state.onboardedAt.length; i++) {
        world.visitProvider(state, i, round)
        if (emitter.buffered >= BATCH) yield emitter.drain()
      }
      for (const group of state.groups) {
        world.visitGroup(state, group, round)
        if (emitter.buffered >= BATCH) yield emitter.drain()
      }
      world.visitOrganization(state, round, options.onboardPerRound)
    }
  }
  yield emitter.drain()
}

/** Tables whose streamed rows are never read back (deletes need only the id). */
const WRITE_ONLY = new Set<TableName>(['documents', 'group_memberships'])

function sameValue(a: Value | undefined, b: Value): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.join('\u0000') === b.join('\u0000')
  return a === b
}

function diff(base: Row, row: Row): Row {
  const out: Row = {}
  for (const key of Object.keys(row)) {
    if (!sameValue(base[key], row[key]!)) out[key] = row[key]!
  }
  return out
}

const today = (us: number) => Math.floor(us / M.DAY_US)

class World {
  /**
   * Rows changed while streaming, by id: only the columns that differ from the row's rebuild
   * (whole rows for inserts). This organization's only, so it stays small.
   */
  private readonly changed = new Map<string, Row>()
  private readonly deleted = new Set<string>()
  /** Rebuilds made while visiting the current entity: what `put` diffs against. */
  private readonly bases = new Map<string, Row>()

  constructor(
    private readonly ctx: M.Ctx,
    private readonly emitter: Emitter,
  ) {}

  // ---- row state ------------------------------------------------------------------------------

  /** The row as it stands now: its rebuild with the streamed changes applied. */
  private current(id: string, base: Row): Row {
    this.bases.set(id, base)
    const changes = this.changed.get(id)
    return changes === undefined ? base : { ...base, ...changes }
  }

  /** One column of a row changed while streaming; undefined when no change touched it. */
  private changedValue(id: string, column: string): Value | undefined {
    return this.changed.get(id)?.[column]
  }

  private latest(row: Row): Row {
    return this.current(row.id as string, row)
  }

  private stamp(row: Row, created = false): Row {
    const at = M.ts(this.emitter.clockUs)
    return created ? { ...row, created_at: at, updated_at: at } : { ...row, updated_at: at }
  }

  private put(table: TableName, op: 'c' | 'u', row: Row): void {
    if (op === 'c') this.emitter.insert(table, row)
    else this.emitter.update(table, row)
    if (WRITE_ONLY.has(table)) return
    const id = row.id as string
    const base = this.bases.get(id)
    this.changed.set(id, base === undefined ? row : diff(base, row))
  }

  private remove(table: TableName, id: string): void {
    this.changed.delete(id)
    this.deleted.add(id)
    this.emitter.delete(table, id)
  }

  private tx(body: () => void, childrenFirst = false): void {
    this.emitter.begin()
    body()
    this.emitter.commit(childrenFirst)
  }

  private extras(state: OrgState, i: number): Extras {
    let extras = state.extras.get(i)
    if (extras === undefined) {
      extras = { identifiers: [], memberships: [], enrollments: [], documents: FIRST_NEW }
      state.extras.set(i, extras)
    }
    return extras
  }

  private plan(state: OrgState, i: number): M.ProviderPlan {
    const n = i - this.ctx.providers
    return M.providerPlan(this.ctx, state.org, i, n >= 0 ? state.onboardedAt[n] : undefined)
  }

  // ---- visits ---------------------------------------------------------------------------------

  visitProvider(state: OrgState, i: number, round: number): void {
    const rng = rngFor(this.ctx.seed, ROUND.provider, state.org.o, i, round)
    const plan = this.plan(state, i)
    this.bases.clear()
    if (rng.chance(0.04)) this.tx(() => this.moveProvider(state, plan, rng))
    if (rng.chance(0.02)) this.tx(() => this.editProvider(state, plan, rng))
    this.identifierChanges(state, plan, rng)
    this.membershipChanges(state, plan, rng)
    this.enrollmentChanges(state, plan, rng)
    if (rng.chance(0.005)) this.tx(() => this.insertDocument(state, plan, 'cv', null, 'cv'))
  }

  visitGroup(state: OrgState, group: M.GroupPlan, round: number): void {
    const rng = rngFor(this.ctx.seed, ROUND.group, state.org.o, group.g, round)
    this.bases.clear()
    if (rng.chance(0.03)) this.tx(() => this.renameGroup(state, group, rng))
    if (rng.chance(0.03)) this.tx(() => this.editLocation(state, group, rng))
    for (let n = 0; n < group.enrollments; n++) {
      const gp = M.groupEnrollmentPlan(this.ctx, state.org, group, n)
      const status = (this.changedValue(gp.id, 'status') ?? gp.status) as V.EnrollmentStatus
      const next = nextStatus(status, rng)
      if (next !== null) this.tx(() => this.groupTransition(state, group, gp, next, rng))
    }
  }

  visitOrganization(state: OrgState, round: number, onboard: number): void {
    const rng = rngFor(this.ctx.seed, ROUND.organization, state.org.o, round)
    this.bases.clear()
    for (let n = 0; n < state.org.portalLogins.length; n++) {
      if (rng.chance(0.25)) this.tx(() => this.rotatePortalPassword(state, n, rng))
    }
    for (let k = 0; k < onboard; k++) {
      if (this.ctx.providers + state.onboardedAt.length >= this.ctx.providerSlots) break
      this.tx(() => this.onboard(state), rng.chance(0.25))
    }
  }

  // ---- providers --------------------------------------------------------------------------------

  private providerRowOf(state: OrgState, plan: M.ProviderPlan): Row {
    return this.current(plan.id, this.freshProviderRow(state, plan))
  }

  private freshProviderRow(state: OrgState, plan: M.ProviderPlan): Row {
    const row = M.providerRow(this.ctx, state.org, plan, npiIndex(this.ctx, state.org.o, plan.i))
    // Providers onboarded while streaming start active.
    return plan.i >= this.ctx.providers ? { ...row, is_active: true, termed_date: null } : row
  }

  private moveProvider(state: OrgState, plan: M.ProviderPlan, rng: Rng): void {
    const row = this.providerRowOf(state, plan)
    const place = rng.chance(0.3) ? rng.pick(V.PLACES) : plan.place
    const phone = `${place.area}-${rng.range(201, 989)}-${rng.digits(4)}`
    const moved = {
      ...row,
      ...M.providerAddress(rng, place),
      personal_phone: rng.chance(0.3) ? (row.personal_phone ?? null) : phone,
    }
    this.put('providers', 'u', this.stamp(moved))
  }

  private editProvider(state: OrgState, plan: M.ProviderPlan, rng: Rng): void {
    const row = this.providerRowOf(state, plan)
    let edited: Row
    switch (rng.int(5)) {
      case 0:
        edited = { ...row, telehealth_services: !row.telehealth_services }
        break
      case 1: {
        const languages = row.languages as readonly string[]
        const extra = rng.pick(V.LANGUAGES)
        edited = {
          ...row,
          languages: languages.includes(extra) ? languages : [...languages, extra],
        }
        break
      }
      case 2:
        edited = { ...row, caqh_id: row.caqh_id ?? String(rng.range(10_000_000, 19_999_999)) }
        break
      case 3:
        // Termination: the provider leaves the organization.
        edited = { ...row, is_active: false, termed_date: this.ctx.nowDay + rng.range(0, 30) }
        break
      default:
        // Only a column the API never shows: the replica must not move updatedAt for it.
        edited = { ...row, internal_notes: `Recredentialing file reviewed (${rng.hex(6)}).` }
    }
    this.put('providers', 'u', this.stamp(edited))
  }

  private identifiersOf(state: OrgState, plan: M.ProviderPlan) {
    const list: { j: number; type: string; state: string | undefined; id: string }[] = []
    const add = (j: number, type: string, licenseState: string | undefined) => {
      const id = M.identifierId(this.ctx, state.org, plan.i, j)
      if (!this.deleted.has(id)) list.push({ j, type, state: licenseState, id })
    }
    plan.identifierTypes.forEach((type, j) => add(j, type, undefined))
    for (const x of state.extras.get(plan.i)?.identifiers ?? []) add(x.j, x.type, x.state)
    return list
  }

  private identifierChanges(state: OrgState, plan: M.ProviderPlan, rng: Rng): void {
    const { ctx } = this
    const identifiers = this.identifiersOf(state, plan)
    for (const x of identifiers) {
      const changed = this.changedValue(x.id, 'expires_on')
      const expires =
        changed !== undefined ? changed : M.identifierExpiry(ctx, state.org, plan.i, x.j, x.type)
      if (typeof expires !== 'number' || expires > ctx.nowDay + 60 || expires < ctx.nowDay - 90) {
        continue
      }
      if (!rng.chance(0.35)) continue
      this.tx(() => {
        const base = M.providerIdentifierRow(ctx, state.org, plan, x.j, x.type, x.state)
        this.renewIdentifier(state, plan, this.current(x.id, base), rng)
      })
    }
    if (identifiers.length > 1 && rng.chance(0.008)) {
      const { id } = rng.pick(identifiers.slice(1)) // never the primary license
      this.tx(() => this.remove('provider_identifiers', id))
    }
    if (rng.chance(0.01)) this.tx(() => this.addLicense(state, plan, rng))
  }

  private renewIdentifier(state: OrgState, plan: M.ProviderPlan, row: Row, rng: Rng): void {
    const at = this.emitter.clockUs
    const cycle = row.type === 'malpractice_insurance' ? 365 : 730
    const metadata = JSON.parse(row.metadata as string) as Record<string, string>
    const status = metadata.status === 'expired' ? 'active' : (metadata.status ?? 'active')
    const renewed = this.stamp({
      ...row,
      issued_on: today(at) - rng.range(0, 14),
      expires_on: (row.expires_on as number) + cycle,
      metadata: jsonbText({ ...metadata, status }),
    })
    this.put('provider_identifiers', 'u', renewed)
    const docType = RENEWAL_DOCUMENTS[row.type as string]
    if (docType !== undefined && rng.chance(0.6)) {
      this.insertDocument(state, plan, docType, renewed.expires_on as number, String(row.value))
    }
  }

  private addLicense(state: OrgState, plan: M.ProviderPlan, rng: Rng): void {
    const extras = this.extras(state, plan.i)
    const j = FIRST_NEW + extras.identifiers.length
    const licenseState = rng.pick(V.PLACES).state
    extras.identifiers.push({ j, type: 'state_license', state: licenseState })
    const row = M.providerIdentifierRow(this.ctx, state.org, plan, j, 'state_license', licenseState)
    const day = today(this.emitter.clockUs)
    const metadata = { state: licenseState, status: 'active', license_type: plan.type }
    const fresh = { ...row, issued_on: day, expires_on: day + 730, metadata: jsonbText(metadata) }
    this.put('provider_identifiers', 'c', this.stamp(fresh, true))
  }

  private insertDocument(
    state: OrgState,
    plan: M.ProviderPlan,
    type: string,
    expires: number | null,
    reference: string,
  ): void {
    const extras = this.extras(state, plan.i)
    const d = extras.documents++
    const owner = {
      providerId: plan.id,
      groupId: null,
      label: M.providerLabel(plan),
      createdUs: plan.createdUs,
    }
    const row = M.documentRow(
      this.ctx,
      state.org,
      owner,
      plan.i,
      d,
      type,
      expires,
      reference,
      this.emitter.clockUs,
    )
    this.put('documents', 'c', row)
  }

  private membershipsOf(state: OrgState, plan: M.ProviderPlan): { m: number; g: number }[] {
    const all = plan.groups.map((g, m) => ({ m, g }))
    all.push(...(state.extras.get(plan.i)?.memberships ?? []))
    return all.filter(({ m }) => !this.deleted.has(M.membershipId(this.ctx, state.org, plan.i, m)))
  }

  private membershipChanges(state: OrgState, plan: M.ProviderPlan, rng: Rng): void {
    const { ctx } = this
    const joins = rng.chance(0.015)
    const leaves = !joins && rng.chance(0.01)
    if (!joins && !leaves) return
    const memberships = this.membershipsOf(state, plan)
    if (joins && memberships.length < 3 && state.groups.length > memberships.length) {
      const taken = new Set(memberships.map((x) => x.g))
      const g = rng.pick(state.groups.filter((group) => !taken.has(group.g))).g
      this.tx(() => {
        const extras = this.extras(state, plan.i)
        const m = FIRST_NEW + extras.memberships.length
        extras.memberships.push({ m, g })
        const row = M.membershipRow(ctx, state.org, plan, m, g, this.emitter.clockUs)
        this.put('group_memberships', 'c', row)
      })
    } else if (leaves && memberships.length > 0) {
      const { m } = rng.pick(memberships)
      this.tx(() => this.remove('group_memberships', M.membershipId(ctx, state.org, plan.i, m)))
    }
  }

  // ---- enrollments ------------------------------------------------------------------------------

  private enrollmentsOf(state: OrgState, plan: M.ProviderPlan): M.EnrollmentPlan[] {
    const { ctx } = this
    const plans: M.EnrollmentPlan[] = []
    if (plan.i < ctx.providers) {
      for (let e = 0; e < plan.enrollments; e++)
        plans.push(M.enrollmentPlan(ctx, state.org, plan, e))
    }
    for (const extra of state.extras.get(plan.i)?.enrollments ?? []) {
      plans.push(M.enrollmentPlan(ctx, state.org, plan, extra.e, extra.createdUs))
    }
    return plans
  }

  private enrollmentChanges(state: OrgState, plan: M.ProviderPlan, rng: Rng): void {
    for (const ep of this.enrollmentsOf(state, plan)) {
      const status = (this.changedValue(ep.id, 'status') ?? ep.status) as V.EnrollmentStatus
      const next = nextStatus(status, rng)
      if (next !== null) {
        this.tx(() => this.transition(state, plan, ep, next, rng))
      } else if (status === 'in_progress' && rng.chance(0.2)) {
        this.tx(() => this.completeRequirements(state, plan, ep, 1))
      }
    }
    if (rng.chance(0.01)) this.tx(() => this.openEnrollment(state, plan), rng.chance(0.15))
  }

  private requirementsOf(state: OrgState, plan: M.ProviderPlan, ep: M.EnrollmentPlan): Row[] {
    return M.requirementRows(this.ctx, state.org, plan, ep).map((r) => this.latest(r))
  }

  /** Completes the first `count` open checklist items, in order. */
  private completeRequirements(
    state: OrgState,
    plan: M.ProviderPlan,
    ep: M.EnrollmentPlan,
    count: number,
  ): void {
    const completedAt = M.ts(this.emitter.clockUs)
    let left = count
    for (const req of this.requirementsOf(state, plan, ep)) {
      if (left <= 0) break
      if (req.is_complete) continue
      this.put(
        'enrollment_requirements',
        'u',
        this.stamp({ ...req, is_complete: true, completed_at: completedAt }),
      )
      left--
    }
  }

  private transition(
    state: OrgState,
    plan: M.ProviderPlan,
    ep: M.EnrollmentPlan,
    next: V.EnrollmentStatus,
    rng: Rng,
  ): void {
    const { ctx } = this
    const day = today(this.emitter.clockUs)
    const row = this.current(ep.id, M.enrollmentRow(ctx, state.org, plan, ep))
    const updated: Row = { ...row, status: next }
    if (next === 'in_progress' || next === 'not_started') {
      Object.assign(updated, {
        submitted_on: null,
        approved_on: null,
        effective_date: null,
        payer_provider_id: null,
      })
    }
    if (
      next === 'submitted' ||
      ((next === 'approved' || next === 'denied') && row.submitted_on === null)
    ) {
      updated.submitted_on = day
    }
    if (next === 'approved') {
      const approved = M.enrollmentRow(ctx, state.org, plan, ep, 'approved')
      Object.assign(updated, {
        approved_on: day,
        effective_date: day + rng.range(0, 30),
        payer_provider_id: approved.payer_provider_id,
      })
    }
    this.put('enrollments', 'u', this.stamp(updated))

    const target =
      { in_progress: 1, submitted: ep.requirements - 1, approved: ep.requirements }[
        next as string
      ] ?? 0
    const done = this.requirementsOf(state, plan, ep).filter((r) => r.is_complete).length
    if (target > done) this.completeRequirements(state, plan, ep, target - done)

    for (const lob of M.enrollmentLobRows(ctx, state.org, plan, ep)) {
      const current = this.latest(lob)
      const status = M.lobStatusFor(next, rng)
      if (status === current.status) continue
      const effective = status === 'active' ? day : (current.effective_date ?? null)
      this.put(
        'enrollment_lines_of_business',
        'u',
        this.stamp({ ...current, status, effective_date: effective }),
      )
    }
    const group = ep.group === null ? null : state.groups[ep.group]!
    for (const part of M.participationRows(ctx, state.org, plan, ep, group)) {
      const current = this.latest(part)
      const active = next === 'approved'
      if (current.is_active === active) continue
      const activated = active ? day : (current.activated_on ?? null)
      this.put(
        'enrollment_location_participations',
        'u',
        this.stamp({ ...current, is_active: active, activated_on: activated }),
      )
    }
  }

  /** A new payer enrollment with its checklist, lines of business and locations. */
  private openEnrollment(state: OrgState, plan: M.ProviderPlan): void {
    const { ctx } = this
    const at = this.emitter.clockUs
    const extras = this.extras(state, plan.i)
    const e = FIRST_NEW + extras.enrollments.length
    extras.enrollments.push({ e, createdUs: at })
    const ep = M.enrollmentPlan(ctx, state.org, plan, e, at)
    const group = ep.group === null ? null : state.groups[ep.group]!
    this.put('enrollments', 'c', this.stamp(M.enrollmentRow(ctx, state.org, plan, ep), true))
    for (const r of M.requirementRows(ctx, state.org, plan, ep)) {
      this.put('enrollment_requirements', 'c', this.stamp(r, true))
    }
    for (const r of M.enrollmentLobRows(ctx, state.org, plan, ep)) {
      this.put('enrollment_lines_of_business', 'c', this.stamp(r, true))
    }
    for (const r of M.participationRows(ctx, state.org, plan, ep, group)) {
      this.put('enrollment_location_participations', 'c', this.stamp(r, true))
    }
  }

  // ---- groups -----------------------------------------------------------------------------------

  private renameGroup(state: OrgState, group: M.GroupPlan, rng: Rng): void {
    const row = this.current(group.id, M.groupRow(this.ctx, state.org, group))
    const name = `${rng.pick(V.GROUP_PLACES)} ${group.kind.phrase}`
    const legal = row.legal_name === null ? null : name + rng.pick(V.LEGAL_SUFFIXES)
    this.put('provider_groups', 'u', this.stamp({ ...row, name, legal_name: legal }))
  }

  private editLocation(state: OrgState, group: M.GroupPlan, rng: Rng): void {
    const l = rng.int(group.locations)
    const id = M.locationId(this.ctx, state.org, group.g, l)
    const row = this.current(id, M.locationRow(this.ctx, state.org, group, l))
    const edited = rng.chance(0.5)
      ? { ...row, phone: `${group.place.area}-${rng.range(201, 989)}-${rng.digits(4)}` }
      : { ...row, address_line_2: `${rng.pick(V.UNITS)} ${rng.range(100, 950)}` }
    this.put('service_locations', 'u', this.stamp(edited))
  }

  private groupTransition(
    state: OrgState,
    group: M.GroupPlan,
    gp: M.GroupEnrollmentPlan,
    next: V.EnrollmentStatus,
    rng: Rng,
  ): void {
    const { ctx } = this
    const day = today(this.emitter.clockUs)
    const row = this.current(gp.id, M.groupEnrollmentRow(ctx, state.org, group, gp))
    const updated: Row = { ...row, status: next }
    if (next === 'submitted') updated.submitted_on = day
    if (next === 'approved') {
      const approved = M.groupEnrollmentRow(ctx, state.org, group, gp, 'approved')
      Object.assign(updated, {
        approved_on: day,
        effective_date: day + rng.range(0, 45),
        payer_group_id: approved.payer_group_id,
      })
      if (updated.submitted_on === null) updated.submitted_on = day
    }
    this.put('group_enrollments', 'u', this.stamp(updated))
    for (const lob of M.groupEnrollmentLobRows(ctx, state.org, group, gp)) {
      const current = this.latest(lob)
      const status = M.lobStatusFor(next, rng)
      if (status === current.status) continue
      const effective = status === 'active' ? day : (current.effective_date ?? null)
      this.put(
        'group_enrollment_lines_of_business',
        'u',
        this.stamp({ ...current, status, effective_date: effective }),
      )
    }
  }

  // ---- organization-wide ------------------------------------------------------------------------

  private rotatePortalPassword(state: OrgState, n: number, rng: Rng): void {
    const base = M.portalLoginRow(this.ctx, state.org, n)
    const row = this.current(base.id as string, base)
    const cipher = `v1:aes-256-gcm:${Buffer.from(rng.hex(48), 'hex').toString('base64')}`
    this.put('payer_portal_logins', 'u', this.stamp({ ...row, password_cipher: cipher }))
  }

  /** A provider joins: provider, identifiers, memberships, documents and a first enrollment. */
  private onboard(state: OrgState): void {
    const { ctx } = this
    const at = this.emitter.clockUs
    const i = ctx.providers + state.onboardedAt.length
    state.onboardedAt.push(at)
    const plan = M.providerPlan(ctx, state.org, i, at)
    this.put('providers', 'c', this.stamp(this.freshProviderRow(state, plan), true))
    const identifiers = plan.identifierTypes.map((_, j) =>
      this.stamp(M.providerIdentifierRow(ctx, state.org, plan, j), true),
    )
    for (const row of identifiers) this.put('provider_identifiers', 'c', row)
    plan.groups.forEach((g, m) => {
      this.put('group_memberships', 'c', M.membershipRow(ctx, state.org, plan, m, g, at))
    })
    for (const doc of M.providerDocumentRows(ctx, state.org, plan, identifiers)) {
      this.put('documents', 'c', this.stamp(doc, true))
    }
    this.openEnrollment(state, plan)
  }
}

const RENEWAL_DOCUMENTS: Readonly<Record<string, string>> = {
  state_license: 'license',
  dea: 'dea_certificate',
  malpractice_insurance: 'malpractice_coi',
}

/** One step of a credentialing workflow, or null to leave the case alone this round. */
export function nextStatus(status: V.EnrollmentStatus, rng: Rng): V.EnrollmentStatus | null {
  const roll = rng.float()
  switch (status) {
    case 'not_started':
      return roll < 0.25 ? 'in_progress' : null
    case 'in_progress':
      return roll < 0.2 ? 'submitted' : roll < 0.21 ? 'withdrawn' : null
    case 'submitted':
      return roll < 0.21 ? 'approved' : roll < 0.25 ? 'denied' : null
    case 'approved':
      return roll < 0.005 ? 'withdrawn' : null
    case 'denied':
      return roll < 0.08 ? 'in_progress' : null
    case 'withdrawn':
      return roll < 0.02 ? 'not_started' : null
  }
}
