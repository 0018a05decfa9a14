// What the scripts share. Each check prints its facts as one JSON line,
// {"check": NAME, ...}, which test/e2e/e2b_test.go reads and asserts; a
// script that cannot go on throws, and node exits non-zero with the error.

// print writes one check's facts.
export function print(check, facts) {
  console.log(JSON.stringify({ check, ...facts }))
}

// errorOf runs fn and returns the name of the error it throws
// (FileNotFoundError, AuthenticationError, …), or "none".
export async function errorOf(fn) {
  try {
    await fn()
    return 'none'
  } catch (err) {
    return err.name
  }
}

// until calls fn every 100 ms until it returns something truthy, and
// returns that, or undefined after ms.
export async function until(fn, ms = 10_000) {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    const got = await fn()
    if (got) return got
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
