// getMetrics of a sandbox running a CPU loop: the samples the daemon took
// (every second here: --sample-interval), their CPU near the sandbox's
// limit.
import { Sandbox } from 'e2b'
import { print } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })
const loop = await sbx.commands.run('while :; do :; done', { background: true, timeoutMs: 0 })
await new Promise((resolve) => setTimeout(resolve, 5000))
const metrics = await sbx.getMetrics()
const last = metrics.at(-1) ?? {}
print('getMetrics', {
  samples: metrics.length,
  maxCpu: Math.max(0, ...metrics.map((m) => m.cpuUsedPct)),
  cpuCount: last.cpuCount,
  memUsed: last.memUsed > 0,
  memTotal: last.memTotal,
  diskTotal: last.diskTotal,
  dates: metrics.every((m) => m.timestamp instanceof Date),
})
await loop.kill()
await sbx.kill()
