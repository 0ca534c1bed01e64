// Seeded randomness with random access: every row draws from its own stream, keyed by
// (seed, table, organization, indices), so any row can be rebuilt on demand instead of being
// kept in memory, and the output never depends on Date.now() or Math.random().

/** murmur3's 32-bit finalizer: a fast bijective avalanche. */
export function mix32(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** Hash of up to five small integers (each taken as uint32). */
export function hashInts(a: number, b = 0, c = 0, d = 0, e = 0): number {
  let h = mix32(a ^ 0x9e3779b9)
  h = mix32((h + Math.imul(b ^ 0x7f4a7c15, 0xcc9e2d51)) >>> 0)
  h = mix32((h + Math.imul(c ^ 0x2545f491, 0x1b873593)) >>> 0)
  h = mix32((h + Math.imul(d ^ 0x6c8e9cf5, 0xcc9e2d51)) >>> 0)
  h = mix32((h + Math.imul(e ^ 0x94d049bb, 0x1b873593)) >>> 0)
  return h
}

/** sfc32: small, fast, and good enough for synthetic data. */
export class Rng {
  private a: number
  private b: number
  private c: number
  private d: number

  constructor(seed: number, salt = 0) {
    this.a = mix32(seed ^ 0xa341316c)
    this.b = mix32((seed + 0xc8013ea4) ^ salt)
    this.c = mix32(salt ^ 0xad90777d)
    this.d = 1
    for (let i = 0; i < 8; i++) this.u32()
  }

  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0
    this.d = (this.d + 1) | 0
    this.a = this.b ^ (this.b >>> 9)
    this.b = (this.c + (this.c << 3)) | 0
    this.c = (this.c << 21) | (this.c >>> 11)
    this.c = (this.c + t) | 0
    return t >>> 0
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.u32() / 4294967296
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n)
  }

  /** Uniform integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1)
  }

  chance(p: number): boolean {
    return this.float() < p
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T
  }

  /** Picks by weight; weights need not sum to 1. */
  weighted<T>(items: readonly (readonly [T, number])[]): T {
    // Index loops: destructuring iteration was a visible cost in profiles.
    let total = 0
    for (let i = 0; i < items.length; i++) total += items[i]![1]
    let r = this.float() * total
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!
      r -= item[1]
      if (r < 0) return item[0]
    }
    return items[items.length - 1]![0]
  }

  /** k distinct picks, in pool order. */
  sample<T>(items: readonly T[], k: number): T[] {
    const chosen: T[] = []
    let need = Math.min(k, items.length)
    for (let i = 0; i < items.length && need > 0; i++) {
      if (this.int(items.length - i) < need) {
        chosen.push(items[i] as T)
        need--
      }
    }
    return chosen
  }

  digits(n: number): string {
    let s = ''
    for (; n > 6; n -= 6) s += String(1_000_000 + this.int(1_000_000)).slice(1)
    if (n > 0) s += String(10 ** n + this.int(10 ** n)).slice(1)
    return s
  }

  hex(n: number): string {
    let s = ''
    while (s.length < n) s += this.u32().toString(16).padStart(8, '0')
    return s.slice(0, n)
  }
}

/** The stream of one entity: same key, same draws. */
export function rngFor(seed: number, table: number, org: number, a = 0, b = 0): Rng {
  const h = hashInts(seed, table, org, a, b)
  return new Rng(h, mix32(h ^ 0x68e31da4))
}

const HEX_CODES = Array.from('0123456789abcdef', (ch) => ch.charCodeAt(0))
const DASH = 45
/** Scratch for uuidFor: decoding bytes gives a flat string, not a rope of pieces. */
const uuidCodes = Buffer.alloc(36, DASH)

function putHex(pos: number, value: number, nibbles: number): void {
  for (let k = nibbles - 1; k >= 0; k--) {
    uuidCodes[pos + k] = HEX_CODES[value & 15]!
    value >>>= 4
  }
}

let keyCache: { seed: number; keys: number[] } = { seed: NaN, keys: [] }

function feistelKeys(seed: number): number[] {
  if (keyCache.seed !== seed) {
    keyCache = { seed, keys: [0, 1, 2, 3].map((round) => hashInts(seed, round)) }
  }
  return keyCache.keys
}

/**
 * A version-4-shaped UUID that is unique by construction: (table, org, a, b) is packed into 64
 * bits and passed through a keyed Feistel permutation (a bijection), whose output is written
 * whole into the UUID; the remaining bits are hash filler. Limits: table < 32, org < 2^19,
 * a < 2^24, b < 2^16.
 */
export function uuidFor(seed: number, table: number, org: number, a: number, b = 0): string {
  let left = ((table << 27) | (org << 8) | (a >>> 16)) >>> 0
  let right = (((a & 0xffff) << 16) | b) >>> 0
  const keys = feistelKeys(seed)
  for (let round = 0; round < 4; round++) {
    const next = (left ^ mix32((right ^ keys[round]!) >>> 0)) >>> 0
    left = right
    right = next
  }
  const c = hashInts(left, right, seed)
  const d = mix32(c ^ 0x5bd1e995)
  putHex(0, left, 8)
  putHex(9, c >>> 16, 4)
  uuidCodes[14] = 52 // version 4
  putHex(15, c & 0xfff, 3)
  putHex(19, 8 | ((d >>> 30) & 3), 1) // RFC 4122 variant
  putHex(20, (d >>> 8) & 0xfff, 3)
  putHex(24, d & 0xffff, 4)
  putHex(28, right, 8)
  return uuidCodes.toString('latin1')
}

export const UUID_LIMITS = { table: 32, org: 1 << 19, a: 1 << 24, b: 1 << 16 } as const
