// The small pure helpers of the document layer.
import { describe, expect, it } from 'vitest'
import {
  contentHash,
  documentExpirable,
  expirableBody,
  expirableId,
  groupIdentifierExpirable,
  identifierEntry,
  joinJsonObjects,
  parseExpirableId,
  parseStringArray,
  providerIdentifierExpirable,
  providerJson,
  providerName,
  withUpdatedAt,
} from '../../../projector/documents/index.ts'
import { provider as providerSchema, sensitiveProvider } from '../../../schema/resources.ts'
import { document, groupIdentifier, provider, providerIdentifier } from './fixtures.ts'

const name = (
  firstName: string | null,
  middleName: string | null,
  lastName: string | null,
  suffix: string | null = null,
) => providerName({ firstName, middleName, lastName, suffix })

describe('providerName', () => {
  it('joins first, middle and last with single spaces, skipping nulls', () => {
    expect(name('Ada', 'King', 'Lovelace')).toBe('Ada King Lovelace')
    expect(name('Ada', null, 'Lovelace')).toBe('Ada Lovelace')
    expect(name(null, null, 'Lovelace')).toBe('Lovelace')
    expect(name('Ada', null, null)).toBe('Ada')
    expect(name(null, null, null)).toBe('')
  })

  it('skips empty parts rather than doubling spaces', () => {
    expect(name('Ada', '', 'Lovelace', '')).toBe('Ada Lovelace')
  })

  it('appends ", <suffix>" when a suffix is set', () => {
    expect(name('Martin', 'Luther', 'King', 'Jr.')).toBe('Martin Luther King, Jr.')
    expect(name(null, null, 'King', 'MD')).toBe('King, MD')
  })
})

describe('JSON helpers', () => {
  it('withUpdatedAt appends updatedAt as the last key', () => {
    expect(withUpdatedAt('{"id":"a"}', '2025-01-01T00:00:00.000Z')).toBe(
      '{"id":"a","updatedAt":"2025-01-01T00:00:00.000Z"}',
    )
  })

  it('joinJsonObjects concatenates members in order, skipping empty objects', () => {
    expect(joinJsonObjects('{"a":1}', '{}', '{"b":{"c":2}}')).toBe('{"a":1,"b":{"c":2}}')
    expect(JSON.parse(joinJsonObjects('{"a":"}"}', '{"b":[1]}'))).toEqual({ a: '}', b: [1] })
  })

  it('contentHash is a stable sha256 in base64', () => {
    expect(contentHash('{}')).toBe('RBNvo1WzZ4oRRq0W9+hknpT7T8If536DEMBg9hyq/4o=')
    expect(contentHash('{"a":1}')).not.toBe(contentHash('{"a":2}'))
  })
})

describe('identifierEntry', () => {
  it('keeps the six keys in order and parses metadata as JSON', () => {
    const entry = identifierEntry(
      providerIdentifier({ id: 'i1', providerId: 'p1', metadata: '{"b": 1, "a": [true, null]}' }),
    )
    expect(Object.keys(entry)).toEqual(['id', 'type', 'value', 'issuedOn', 'expiresOn', 'metadata'])
    expect(JSON.stringify(entry.metadata)).toBe('{"b":1,"a":[true,null]}')
    expect(
      identifierEntry(providerIdentifier({ id: 'i2', providerId: 'p1', metadata: '"x"' })),
    ).toMatchObject({ metadata: 'x' })
  })
})

describe('providerJson', () => {
  it('puts the sensitive fields between medicareStates and groupMemberships', () => {
    const { base, sensitive } = providerJson(provider({ id: 'p1' }), [], [])
    const stamp = '2025-01-01T00:00:00.000Z'
    const baseObject = JSON.parse(withUpdatedAt(base, stamp)) as object
    const sensitiveObject = JSON.parse(withUpdatedAt(sensitive, stamp)) as object
    expect(Object.keys(baseObject)).toEqual(Object.keys(providerSchema.shape))
    expect(Object.keys(sensitiveObject)).toEqual(Object.keys(sensitiveProvider.shape))
    expect(sensitiveProvider.parse(sensitiveObject)).toEqual(sensitiveObject)
    expect(sensitiveObject).toMatchObject(baseObject)
  })

  it('parses text[] columns into arrays', () => {
    const { base } = providerJson(
      provider({ id: 'p1', otherEmails: '["a@x.org","b@x.org"]', medicaidStates: '["CA"]' }),
      [],
      [],
    )
    expect(JSON.parse(base)).toMatchObject({
      otherEmails: ['a@x.org', 'b@x.org'],
      medicaidStates: ['CA'],
    })
  })
})

describe('expirables', () => {
  it('round-trips ids', () => {
    expect(expirableId('group_identifier', 'x:1')).toBe('group_identifier:x:1')
    expect(parseExpirableId('group_identifier:x:1')).toEqual({
      sourceType: 'group_identifier',
      sourceId: 'x:1',
    })
  })

  it('exists only with an expiration date', () => {
    expect(providerIdentifierExpirable(providerIdentifier({ id: 'i1', providerId: 'p1' }))).toBe(
      undefined,
    )
    expect(groupIdentifierExpirable(groupIdentifier({ id: 'x1', providerGroupId: 'g1' }))).toBe(
      undefined,
    )
    expect(documentExpirable(document({ id: 'd1' }))).toBe(undefined)
  })

  it('describes identifiers by value and documents by file name', () => {
    expect(
      providerIdentifierExpirable(
        providerIdentifier({ id: 'i1', providerId: 'p1', value: 'DEA-1', expiresOn: '2026-01-01' }),
      ),
    ).toEqual({
      id: 'provider_identifier:i1',
      sourceType: 'provider_identifier',
      sourceId: 'i1',
      providerId: 'p1',
      providerGroupId: null,
      type: 'state_license',
      description: 'DEA-1',
      expiresOn: '2026-01-01',
    })
    expect(
      documentExpirable(
        document({ id: 'd1', providerId: 'p1', fileName: 'coi.pdf', expiresOn: '2026-01-01' }),
      ),
    ).toMatchObject({ providerId: 'p1', providerGroupId: null, description: 'coi.pdf' })
  })

  it('stores the body without its closing brace', () => {
    const content = groupIdentifierExpirable(
      groupIdentifier({ id: 'x1', providerGroupId: 'g1', expiresOn: '2026-01-01' }),
    )!
    const body = expirableBody(content)
    expect(JSON.parse(`${body}}`)).toEqual(content)
    expect(body.endsWith('"expiresOn":"2026-01-01"')).toBe(true)
  })
})

describe('parseStringArray', () => {
  it('parses a text[] column and drops NULL elements', () => {
    expect(parseStringArray('["en","es"]')).toEqual(['en', 'es'])
    expect(parseStringArray('[null,"en",null]')).toEqual(['en'])
    expect(parseStringArray('[]')).toEqual([])
  })
})
