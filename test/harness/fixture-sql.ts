// The SQL behind test/fixtures/debezium/: fixed ids and timestamps, so a regeneration changes
// only what Debezium itself stamps (ts_ms, lsn, txId).

/** Readable fixed uuids: the first group names the table, the last the row. */
function id(table: string, n: number): string {
  return `${table.padStart(8, '0')}-0000-4000-8000-${String(n).padStart(12, '0')}`
}

export const ids = {
  orgA: id('a0', 1),
  orgB: id('a0', 2),
  keyA: id('a1', 1),
  keyB: id('a1', 2),
  keyA2: id('a1', 3),
  keyA3: id('a1', 4),
  providerA: id('b0', 1),
  providerB: id('b0', 2),
  identifierA: id('b1', 1),
  identifierB: id('b1', 2),
  groupA: id('c0', 1),
  groupB: id('c0', 2),
  membershipA: id('c1', 1),
  membershipB: id('c1', 2),
  locationA: id('c2', 1),
  locationB: id('c2', 2),
  groupIdentifierA: id('c3', 1),
  groupIdentifierB: id('c3', 2),
  enrollmentA: id('d0', 1),
  enrollmentB: id('d0', 2),
  requirementA: id('d1', 1),
  requirementB: id('d1', 2),
  requirementC: id('d1', 3),
  lineA: id('d2', 1),
  lineB: id('d2', 2),
  participationA: id('d3', 1),
  participationB: id('d3', 2),
  groupEnrollmentA: id('e0', 1),
  groupEnrollmentB: id('e0', 2),
  groupLineA: id('e1', 1),
  groupLineB: id('e1', 2),
  documentA: id('f0', 1),
  documentB: id('f0', 2),
  loginA: id('f9', 1),
}

/** Written last; the capture waits for its event to know the stream has caught up. */
export const FINAL_MARKER = 'Bayside Medical Group (renamed)'

/**
 * Deterministic text that does not compress: PostgreSQL compresses before it moves a value out
 * of line, so only incompressible values larger than ~2 KB are really TOASTed.
 */
function noise(seed: number, length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  let state = seed >>> 0
  let out = ''
  for (let i = 0; i < length; i++) {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    out += alphabet[((t ^ (t >>> 14)) >>> 0) % 64]
  }
  return out
}

const q = (s: string): string => `'${s.replace(/'/g, "''")}'`
const bigNotes = noise(1, 8000)
const bigLanguages = `array[${Array.from({ length: 40 }, (_, i) => q(noise(100 + i, 100))).join(',')}]`
const bigMetadata = JSON.stringify({
  state: 'TX',
  status: 'active',
  history: Array.from({ length: 30 }, (_, i) => ({
    at: `2024-01-${String(i + 1).padStart(2, '0')}`,
    note: noise(200 + i, 200),
  })),
})

/** Every table, one row each, for organization A: captured as snapshot reads (op r). */
export const beforeConnectorStarts = `
insert into organizations (id, name, api_enabled, billing_status, created_at, updated_at)
values (${q(ids.orgA)}, 'Acme Health', true, 'active', '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into api_keys (id, organization_id, name, key_hash, scopes, created_at, expires_at, revoked_at)
values (${q(ids.keyA)}, ${q(ids.orgA)}, 'Reporting', '${'a'.repeat(64)}',
        '{providers:read,providers:read:sensitive,groups:read}', '2024-01-15 10:00:00+00', '2027-01-01 00:00:00+00', null);

-- Three keys: a table's snapshot rows are marked first_in_data_collection, true, last_in_data_collection.
insert into api_keys (id, organization_id, name, key_hash, scopes, created_at, expires_at, revoked_at)
values (${q(ids.keyA2)}, ${q(ids.orgA)}, 'Expired', '${'c'.repeat(64)}', '{documents:read}', '2023-01-01 00:00:00+00', '2023-12-31 23:59:59+00', null),
       (${q(ids.keyA3)}, ${q(ids.orgA)}, 'Empty scopes', '${'d'.repeat(64)}', '{}', '2024-01-15 10:00:00+00', null, null);

insert into providers (id, organization_id, first_name, middle_name, last_name, suffix, npi, is_active,
  telehealth_services, type, caqh_id, start_date, termed_date, taxonomy_code, specialty,
  billing_city, billing_state, other_emails, languages, medicaid_states, medicare_states,
  birth_city, date_of_birth, gender, ssn, internal_notes, created_at, updated_at)
values (${q(ids.providerA)}, ${q(ids.orgA)}, 'Ada', null, 'Lovelace', 'Jr.', '1234567893', true,
  false, 'MD', '12345678', '2020-02-29', null, '207Q00000X', 'Family Medicine',
  'Los Angeles', 'CA', '{}', '{English,Spanish,"Quoted \\"one\\", with comma"}', '{CA,NV}', '{}',
  'London', '1815-12-10', 'female', '123-45-6789', 'short internal note', '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into provider_identifiers (id, organization_id, provider_id, type, value, issued_on, expires_on, metadata, created_at, updated_at)
values (${q(ids.identifierA)}, ${q(ids.orgA)}, ${q(ids.providerA)}, 'state_license', 'A123456', '2022-07-01', '2026-06-30',
  '{"state": "CA", "status": "active", "nested": {"n": 1.50, "big": 12345678901234567890, "list": [1, "two", null, true]}}',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into provider_groups (id, organization_id, name, legal_name, npi, tin, taxonomy_code, created_at, updated_at)
values (${q(ids.groupA)}, ${q(ids.orgA)}, 'Acme Primary Care', 'Acme Primary Care LLC', '1992999999', '123456789', '261QP2300X',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into group_memberships (id, organization_id, provider_id, provider_group_id, created_at, updated_at)
values (${q(ids.membershipA)}, ${q(ids.orgA)}, ${q(ids.providerA)}, ${q(ids.groupA)}, '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into service_locations (id, organization_id, provider_group_id, name, address, city, state, zip, phone, is_primary, created_at, updated_at)
values (${q(ids.locationA)}, ${q(ids.orgA)}, ${q(ids.groupA)}, 'Main Street Clinic', '1 Main St', 'Los Angeles', 'CA', '90001', '555-0100', true,
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into group_identifiers (id, organization_id, provider_group_id, type, value, issued_on, expires_on, created_at, updated_at)
values (${q(ids.groupIdentifierA)}, ${q(ids.orgA)}, ${q(ids.groupA)}, 'clia', '05D1234567', '2023-01-01', '2025-12-31',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into enrollments (id, organization_id, provider_id, provider_group_id, payer, state, status, submitted_on, created_at, updated_at)
values (${q(ids.enrollmentA)}, ${q(ids.orgA)}, ${q(ids.providerA)}, ${q(ids.groupA)}, 'Aetna', 'CA', 'submitted', '2024-02-01',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into enrollment_requirements (id, organization_id, enrollment_id, position, name, is_complete, completed_at, created_at, updated_at)
values (${q(ids.requirementA)}, ${q(ids.orgA)}, ${q(ids.enrollmentA)}, 1, 'Signed W-9', true, '2024-03-01 12:34:56.789123+02:00',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into enrollment_lines_of_business (id, organization_id, enrollment_id, line_of_business, status, effective_date, created_at, updated_at)
values (${q(ids.lineA)}, ${q(ids.orgA)}, ${q(ids.enrollmentA)}, 'commercial', 'pending', null, '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into enrollment_location_participations (id, organization_id, enrollment_id, service_location_id, is_active, activated_on, created_at, updated_at)
values (${q(ids.participationA)}, ${q(ids.orgA)}, ${q(ids.enrollmentA)}, ${q(ids.locationA)}, true, '2024-04-01',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into group_enrollments (id, organization_id, provider_group_id, payer, state, status, payer_group_id, submitted_on, approved_on, effective_date, created_at, updated_at)
values (${q(ids.groupEnrollmentA)}, ${q(ids.orgA)}, ${q(ids.groupA)}, 'Blue Shield of California', 'CA', 'approved', 'BSC-998', '2023-10-01', '2023-12-15', '2024-01-01',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into group_enrollment_lines_of_business (id, organization_id, group_enrollment_id, line_of_business, status, effective_date, created_at, updated_at)
values (${q(ids.groupLineA)}, ${q(ids.orgA)}, ${q(ids.groupEnrollmentA)}, 'medicare_advantage', 'active', '2024-01-01',
  '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

-- size_bytes beyond 2^53: JSON.parse loses precision on it (Debezium writes int64 as a JSON number).
insert into documents (id, organization_id, provider_id, provider_group_id, type, file_name, content_type, size_bytes, expires_on, uploaded_at, storage_key, created_at, updated_at)
values (${q(ids.documentA)}, ${q(ids.orgA)}, ${q(ids.providerA)}, null, 'license', 'ca-license.pdf', 'application/pdf', 9007199254740993, '2026-06-30',
  '2024-01-20 08:30:00+00', 's3://bucket/a/ca-license.pdf', '2024-01-15 10:00:00+00', '2024-01-15 10:00:00+00');

insert into payer_portal_logins (id, organization_id, payer, username, password_cipher)
values (${q(ids.loginA)}, ${q(ids.orgA)}, 'Aetna', 'acme', 'cipher-text');
`

/** Streamed after the snapshot, one statement (or explicit transaction) per entry. */
export const afterConnectorStarts: string[] = [
  // Inserts (op c): organization B with a row in every table, one transaction. Provider B and
  // its identifier carry values large enough to be TOASTed.
  `begin;
insert into organizations (id, name, created_at, updated_at)
values (${q(ids.orgB)}, 'Bayside Medical Group', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into api_keys (id, organization_id, name, key_hash, scopes, created_at)
values (${q(ids.keyB)}, ${q(ids.orgB)}, 'Integration', '${'b'.repeat(64)}', '{providers:read,enrollments:read,documents:read}', '2024-05-01 09:00:00+00');
insert into providers (id, organization_id, first_name, last_name, npi, type, start_date, languages, internal_notes, created_at, updated_at)
values (${q(ids.providerB)}, ${q(ids.orgB)}, 'Grace', 'Hopper', '1987654321', 'NP', '2024-05-01',
  ${bigLanguages}, ${q(bigNotes)}, '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into provider_identifiers (id, organization_id, provider_id, type, value, expires_on, metadata, created_at, updated_at)
values (${q(ids.identifierB)}, ${q(ids.orgB)}, ${q(ids.providerB)}, 'dea', 'FH1234563', '2027-03-31', ${q(bigMetadata)},
  '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into provider_groups (id, organization_id, name, created_at, updated_at)
values (${q(ids.groupB)}, ${q(ids.orgB)}, 'Bayside Pediatrics', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into group_memberships (id, organization_id, provider_id, provider_group_id, created_at, updated_at)
values (${q(ids.membershipB)}, ${q(ids.orgB)}, ${q(ids.providerB)}, ${q(ids.groupB)}, '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into service_locations (id, organization_id, provider_group_id, name, city, state, created_at, updated_at)
values (${q(ids.locationB)}, ${q(ids.orgB)}, ${q(ids.groupB)}, 'Harbor Office', 'San Diego', 'CA', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into group_identifiers (id, organization_id, provider_group_id, type, value, metadata, created_at, updated_at)
values (${q(ids.groupIdentifierB)}, ${q(ids.orgB)}, ${q(ids.groupB)}, 'group_medicare_ptan', 'PTAN77', '{"jurisdiction": "JE"}',
  '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into enrollments (id, organization_id, provider_id, payer, status, created_at, updated_at)
values (${q(ids.enrollmentB)}, ${q(ids.orgB)}, ${q(ids.providerB)}, 'Cigna', 'not_started', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into enrollment_requirements (id, organization_id, enrollment_id, position, name, created_at, updated_at)
values (${q(ids.requirementB)}, ${q(ids.orgB)}, ${q(ids.enrollmentB)}, 1, 'CAQH attestation', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into enrollment_lines_of_business (id, organization_id, enrollment_id, line_of_business, status, created_at, updated_at)
values (${q(ids.lineB)}, ${q(ids.orgB)}, ${q(ids.enrollmentB)}, 'exchange', 'pending', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into enrollment_location_participations (id, organization_id, enrollment_id, service_location_id, created_at, updated_at)
values (${q(ids.participationB)}, ${q(ids.orgB)}, ${q(ids.enrollmentB)}, ${q(ids.locationB)}, '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into group_enrollments (id, organization_id, provider_group_id, payer, status, created_at, updated_at)
values (${q(ids.groupEnrollmentB)}, ${q(ids.orgB)}, ${q(ids.groupB)}, 'Cigna', 'in_progress', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into group_enrollment_lines_of_business (id, organization_id, group_enrollment_id, line_of_business, status, created_at, updated_at)
values (${q(ids.groupLineB)}, ${q(ids.orgB)}, ${q(ids.groupEnrollmentB)}, 'commercial', 'pending', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
insert into documents (id, organization_id, provider_group_id, type, file_name, content_type, size_bytes, uploaded_at, storage_key, created_at, updated_at)
values (${q(ids.documentB)}, ${q(ids.orgB)}, ${q(ids.groupB)}, 'w9', 'w9.pdf', 'application/pdf', 48213, '2024-05-02 10:00:00+00',
  's3://bucket/b/w9.pdf', '2024-05-01 09:00:00+00', '2024-05-01 09:00:00+00');
commit;`,

  // Updates (op u): REPLICA IDENTITY DEFAULT, so no before-image.
  `update providers set last_name = 'King', updated_at = '2024-06-01 12:00:00+00' where id = ${q(ids.providerA)}`,
  `update organizations set billing_status = 'past_due', updated_at = '2024-06-01 12:00:00+00' where id = ${q(ids.orgA)}`,
  `update api_keys set revoked_at = '2024-06-01 12:00:00.123456+00' where id = ${q(ids.keyA)}`,
  `update enrollment_requirements set is_complete = true, completed_at = '2024-06-02 08:00:00-07:00', updated_at = '2024-06-02 15:00:00+00' where id = ${q(ids.requirementB)}`,
  `update provider_groups set name = 'Acme Primary & Urgent Care', updated_at = '2024-06-03 12:00:00+00' where id = ${q(ids.groupA)}`,

  // Unchanged TOAST: the large internal_notes and languages of provider B stay as they are,
  // and so does the large metadata of its identifier.
  `update providers set is_active = false, termed_date = '2024-12-31', updated_at = '2024-06-04 12:00:00+00' where id = ${q(ids.providerB)}`,
  `update provider_identifiers set expires_on = '2028-03-31', updated_at = '2024-06-04 12:00:00+00' where id = ${q(ids.identifierB)}`,

  // Deletes (op d, then a tombstone with the same key).
  `delete from group_identifiers where id = ${q(ids.groupIdentifierA)}`,
  `delete from documents where id = ${q(ids.documentB)}`,

  // TRUNCATE (op t, no key): every requirement goes, then one comes back.
  `truncate enrollment_requirements`,
  `insert into enrollment_requirements (id, organization_id, enrollment_id, position, name, created_at, updated_at)
   values (${q(ids.requirementC)}, ${q(ids.orgA)}, ${q(ids.enrollmentA)}, 2, 'Board certificate', '2024-06-05 09:00:00+00', '2024-06-05 09:00:00+00')`,

  // Never subscribed: these must leave no trace in Kafka.
  `update payer_portal_logins set password_cipher = 'rotated' where id = ${q(ids.loginA)}`,

  `update organizations set name = ${q(FINAL_MARKER)}, updated_at = '2024-06-30 00:00:00+00' where id = ${q(ids.orgB)}`,
]
