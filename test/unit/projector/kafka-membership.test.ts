import {
  KafkaJSGroupCoordinatorNotFound,
  KafkaJSNonRetriableError,
  KafkaJSProtocolError,
} from 'kafkajs'
import { describe, expect, it } from 'vitest'
import { errorForKafkajs, passingForKafkajs } from '../../../projector/sources/kafka-client.ts'

// kafkajs's typings give these constructors one argument; at run time they take what its
// protocol decoder and its retrier pass (src/protocol/error.js, src/retry/index.js).
const ProtocolError = KafkaJSProtocolError as unknown as new (entry: {
  type: string
  code: number
  retriable: boolean
  message: string
}) => KafkaJSProtocolError
const CoordinatorNotFound = KafkaJSGroupCoordinatorNotFound as unknown as new (
  message: string,
) => KafkaJSGroupCoordinatorNotFound
const NonRetriableError = KafkaJSNonRetriableError as unknown as new (
  error: Error,
  options: { cause: Error },
) => KafkaJSNonRetriableError

/** A protocol error as kafkajs decodes it from a broker's answer (its error code's entry). */
function protocolError(type: string, code: number): KafkaJSProtocolError {
  return new ProtocolError({ type, code, retriable: false, message: `broker said ${type}` })
}

/** What kafkajs's retrier hands over when a request fails with an error it does not retry. */
function refusedByRetrier(cause: Error): KafkaJSNonRetriableError {
  return new NonRetriableError(cause, { cause })
}

describe('a batch handler failure as kafkajs is handed it', () => {
  it('unwraps a commit refused because this member is no longer in the group', () => {
    const unknownMember = protocolError('UNKNOWN_MEMBER_ID', 25)
    const thrown = errorForKafkajs(refusedByRetrier(unknownMember))
    // kafkajs's runner rejoins the group on exactly this: an error whose type it reads.
    expect(thrown).toBe(unknownMember)
    expect((thrown as KafkaJSProtocolError).type).toBe('UNKNOWN_MEMBER_ID')
  })

  it('unwraps the rebalance errors too', () => {
    for (const [type, code] of [
      ['ILLEGAL_GENERATION', 22],
      ['REBALANCE_IN_PROGRESS', 27],
      ['NOT_COORDINATOR_FOR_GROUP', 16],
    ] as const) {
      const cause = protocolError(type, code)
      expect(errorForKafkajs(refusedByRetrier(cause))).toBe(cause)
    }
  })

  it('leaves every other failure as it is: the consumer stops, and so does the projector', () => {
    const authorization = refusedByRetrier(protocolError('GROUP_AUTHORIZATION_FAILED', 30))
    expect(errorForKafkajs(authorization)).toBe(authorization)
    const plain = new Error('a lane failed')
    expect(errorForKafkajs(plain)).toBe(plain)
    const unknownMember = protocolError('UNKNOWN_MEMBER_ID', 25)
    expect(errorForKafkajs(unknownMember)).toBe(unknownMember)
  })
})

describe('a consumer kafkajs gave up on an error it calls non-retriable', () => {
  it('is followed by a new one when the group coordinator was not found (kafkajs#1630)', () => {
    // As the consumer's retrier hands it over once the cluster found no coordinator.
    const notFound = new CoordinatorNotFound('Failed to find group coordinator')
    expect(passingForKafkajs(refusedByRetrier(notFound))).toBe(true)
    expect(passingForKafkajs(notFound)).toBe(true)
  })

  it('stops the projector on anything else', () => {
    const authorization = refusedByRetrier(protocolError('GROUP_AUTHORIZATION_FAILED', 30))
    expect(passingForKafkajs(authorization)).toBe(false)
    expect(passingForKafkajs(new Error('Failed to find group coordinator'))).toBe(false)
  })
})
