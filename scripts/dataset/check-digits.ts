// Check digits that make generated identifiers pass the validators real systems run on them.

/** Luhn check digit for a string of digits (the digit to append). */
export function luhnCheckDigit(digits: string): number {
  let sum = 0
  // Doubling starts with the rightmost digit of the payload, since the check digit goes after it.
  for (let i = digits.length - 1, double = true; i >= 0; i--, double = !double) {
    let d = digits.charCodeAt(i) - 48
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
  }
  return (10 - (sum % 10)) % 10
}

export function luhnValid(digits: string): boolean {
  return /^\d+$/.test(digits) && luhnCheckDigit(digits.slice(0, -1)) === Number(digits.slice(-1))
}

/** NPI rules (CMS): Luhn over the 80840 card-issuer prefix followed by the first nine digits. */
export function npiFromBase(base9: string): string {
  return base9 + String(luhnCheckDigit('80840' + base9))
}

export function isValidNpi(npi: string): boolean {
  return /^[12]\d{9}$/.test(npi) && luhnValid('80840' + npi)
}

/** 10^8 / gcd-free multiplier: index -> 8 digits is a bijection on [0, 10^8). */
const NPI_SPACE = 100_000_000
const NPI_MULTIPLIER = 48_271_237 // odd and not a multiple of 5: invertible mod 10^8

/**
 * The index-th NPI of a kind (1: individual, 2: organization): unique per (kind, index) for
 * index < 10^8, scattered so that neighbours do not look sequential.
 */
export function npiFor(kind: 1 | 2, index: number, seed: number): string {
  if (index < 0 || index >= NPI_SPACE) throw new RangeError('NPI index out of range')
  const offset = (seed >>> 0) % NPI_SPACE
  // (index * m + offset) mod 10^8, computed in two halves so it stays exact in a double.
  const hi = Math.floor(index / 10_000)
  const lo = index % 10_000
  const scrambled =
    (((hi * NPI_MULTIPLIER) % NPI_SPACE) * 10_000 + lo * NPI_MULTIPLIER + offset) % NPI_SPACE
  return npiFromBase(String(kind) + String(scrambled).padStart(8, '0'))
}

/**
 * DEA registration number: two letters (registrant type, then the initial of the last name),
 * six digits and a check digit = last digit of (d1 + d3 + d5) + 2 * (d2 + d4 + d6).
 */
export function deaNumber(registrant: string, lastName: string, six: string): string {
  const d = Array.from(six, (ch) => ch.charCodeAt(0) - 48)
  const sum = d[0]! + d[2]! + d[4]! + 2 * (d[1]! + d[3]! + d[5]!)
  const initial = /[A-Za-z]/.test(lastName.charAt(0)) ? lastName.charAt(0).toUpperCase() : '9'
  return registrant + initial + six + String(sum % 10)
}

export function isValidDea(dea: string): boolean {
  if (!/^[A-Z][A-Z9]\d{7}$/.test(dea)) return false
  const d = Array.from(dea.slice(2), (ch) => ch.charCodeAt(0) - 48)
  const sum = d[0]! + d[2]! + d[4]! + 2 * (d[1]! + d[3]! + d[5]!)
  return sum % 10 === d[6]
}
