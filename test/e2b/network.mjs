// updateNetwork: a sandbox that reached a host is refused it once the
// update allows only another one. The hosts are the test internet's.
import { Sandbox, ALL_TRAFFIC } from 'e2b'
import { print } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

// curl prints the page, or why it got none; it never fails the command.
const curl = async (host) =>
  (await sbx.commands.run(`curl -sS --max-time 10 http://${host}/ 2>&1 || true`)).stdout.trim()
const before = await curl('other.test')
await sbx.updateNetwork({ allowOut: ['allowed.test'], denyOut: [ALL_TRAFFIC] })
print('updateNetwork', {
  before,
  allowed: await curl('allowed.test'),
  refused: await curl('other.test'),
})

await sbx.kill()
