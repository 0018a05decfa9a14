// A PTY: a command typed into an interactive shell runs, and a resize
// reaches the terminal (stty reads its size).
import { Sandbox } from 'e2b'
import { print, until } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

let screen = ''
const decoder = new TextDecoder()
const terminal = await sbx.pty.create({
  cols: 80,
  rows: 24,
  onData: (data) => (screen += decoder.decode(data, { stream: true })),
})
const type = (line) => sbx.pty.sendInput(terminal.pid, new TextEncoder().encode(line + '\n'))

// The shell echoes what is typed; only the commands' output has "= 42" and
// the size's "rows x cols".
await type('echo "= $((6 * 7))"; stty size | sed "s/ / x /"')
const ran = Boolean(await until(() => screen.includes('= 42')))
const before = Boolean(await until(() => screen.includes('24 x 80')))
await sbx.pty.resize(terminal.pid, { cols: 100, rows: 30 })
await type('stty size | sed "s/ / x /"')
const after = Boolean(await until(() => screen.includes('30 x 100')))
await type('exit 0')
const exited = await terminal.wait().then((r) => r.exitCode, (err) => err.name)
print('pty', { ran, before, after, exited, ...(ran && after ? {} : { screen }) })

await sbx.kill()
