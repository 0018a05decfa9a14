// Pause, then connect: the files are kept, and whether a process's memory
// survived is printed (it does under gVisor, whose pause checkpoints it).
import { Sandbox } from 'e2b'
import { print } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

await sbx.files.write('/home/user/kept.txt', 'kept')
// The shell's variable lives only in its memory; the process never ends
// by itself (timeoutMs 0: no deadline).
const sleeper = await sbx.commands.run('secret=$RANDOM; while sleep 1; do :; done', {
  background: true,
  timeoutMs: 0,
})
await sleeper.disconnect()

const paused = await sbx.pause()
const info = await Sandbox.getInfo(sbx.sandboxId)
const pausedList = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
print('pause', {
  paused,
  state: info.state,
  listedPaused: pausedList.some((s) => s.sandboxId === sbx.sandboxId),
})

await sbx.connect()
const processes = await sbx.commands.list()
print('connect', {
  state: (await sbx.getInfo()).state,
  file: await sbx.files.read('/home/user/kept.txt'),
  echo: (await sbx.commands.run('echo back')).stdout,
  processSurvived: processes.some((p) => p.pid === sleeper.pid),
})

await sbx.kill()
