// Run with another workspace's key: a sandbox of the first workspace
// (its id the argument) is not found, not listed and not killed.
import { Sandbox } from 'e2b'
import { errorOf, print } from './facts.mjs'

const id = process.argv[2]
if (!id) throw new Error('usage: node other-workspace.mjs SANDBOX_ID')

const listed = await Sandbox.list().nextItems()
print('otherWorkspace', {
  getInfo: await errorOf(() => Sandbox.getInfo(id)),
  connect: await errorOf(() => Sandbox.connect(id)),
  listed: listed.some((s) => s.sandboxId === id),
  kill: await Sandbox.kill(id),
})
