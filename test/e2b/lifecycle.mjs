// A sandbox's life through the control plane: create with metadata, list
// by it, getInfo, setTimeout, kill (twice: the second finds nothing).
import { Sandbox } from 'e2b'
import { print } from './facts.mjs'

const run = `run-${process.pid}-${Date.now()}`
const sbx = await Sandbox.create({ metadata: { run, role: 'main' }, timeoutMs: 120_000 })
const other = await Sandbox.create({ metadata: { run, role: 'other' } })
print('create', { sandboxId: sbx.sandboxId, run })
print('createOther', { sandboxId: other.sandboxId })

const listed = await Sandbox.list({ query: { metadata: { run, role: 'main' } } }).nextItems()
print('list', { ids: listed.map((s) => s.sandboxId), want: sbx.sandboxId })

const secondsLeft = (info) => Math.round((info.endAt.getTime() - Date.now()) / 1000)
const info = await sbx.getInfo()
print('getInfo', {
  sandboxId: info.sandboxId,
  metadata: info.metadata,
  state: info.state,
  secondsLeft: secondsLeft(info),
})

await sbx.setTimeout(600_000)
print('setTimeout', { secondsLeft: secondsLeft(await sbx.getInfo()) })

const killed = await sbx.kill()
const again = await sbx.kill()
const listedAfter = await Sandbox.list({ query: { metadata: { run } } }).nextItems()
print('kill', { killed, again, left: listedAfter.map((s) => s.sandboxId) })
await other.kill()
