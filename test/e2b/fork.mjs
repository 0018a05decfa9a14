// Fork: the fork starts from the sandbox's files, and the two go their
// own ways after it. Snapshots: made, listed, used and deleted.
import { Sandbox } from 'e2b'
import { print } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

await sbx.files.write('/home/user/state.txt', 'before the fork')
const [fork] = await sbx.fork({ count: 1 })
if (fork instanceof Error) throw fork
print('forked', { sandboxId: fork.sandboxId })
const forkSaw = await fork.files.read('/home/user/state.txt')
await fork.files.write('/home/user/state.txt', 'in the fork')
print('fork', {
  distinct: fork.sandboxId !== sbx.sandboxId,
  forkSaw,
  origin: await sbx.files.read('/home/user/state.txt'),
  fork: await fork.files.read('/home/user/state.txt'),
  originRuns: (await sbx.commands.run('echo still here')).stdout,
})

await fork.kill()

// A snapshot: listed with its sandbox's, a sandbox made from it sees the
// files, and it is deleted once (then not found).
const snap = await sbx.createSnapshot()
const listed = (await sbx.listSnapshots().nextItems()).map(s => s.snapshotId)
const fromSnap = await Sandbox.create(snap.snapshotId)
const snapSaw = await fromSnap.files.read('/home/user/state.txt')
await fromSnap.kill()
print('snapshot', {
  listed: listed.includes(snap.snapshotId),
  snapSaw,
  deleted: await Sandbox.deleteSnapshot(snap.snapshotId),
  again: await Sandbox.deleteSnapshot(snap.snapshotId),
})
await sbx.kill()
