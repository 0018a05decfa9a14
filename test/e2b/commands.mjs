// Commands: output to callbacks, a failing command, a background command
// listed, connected to and killed, and a command's stdin.
import { Sandbox, CommandExitError } from 'e2b'
import { print, until } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

let onStdout = ''
let onStderr = ''
const res = await sbx.commands.run('echo out; echo err >&2; echo $GREETING', {
  envs: { GREETING: 'hello' },
  onStdout: (data) => (onStdout += data),
  onStderr: (data) => (onStderr += data),
})
print('run', { exitCode: res.exitCode, stdout: res.stdout, stderr: res.stderr, onStdout, onStderr })

try {
  await sbx.commands.run('echo failing >&2; exit 3')
  print('exit', { thrown: 'none' })
} catch (err) {
  print('exit', {
    thrown: err.name,
    isCommandExitError: err instanceof CommandExitError,
    exitCode: err.exitCode,
    stderr: err.stderr,
  })
}

const ticker = await sbx.commands.run('for i in $(seq 600); do echo tick $i; sleep 0.2; done', {
  background: true,
})
const listed = (await sbx.commands.list()).map((p) => p.pid)
let heard = ''
const connected = await sbx.commands.connect(ticker.pid, { onStdout: (data) => (heard += data) })
const ticked = Boolean(await until(() => heard.includes('tick')))
const killed = await connected.kill()
const exited = await ticker.wait().then(
  () => 'exit 0',
  (err) => err.name,
)
const listedAfter = (await sbx.commands.list()).map((p) => p.pid)
print('background', {
  listed: listed.includes(ticker.pid),
  ticked,
  killed,
  exited,
  listedAfter: listedAfter.includes(ticker.pid),
  killedAgain: await sbx.commands.kill(ticker.pid),
})

const cat = await sbx.commands.run('cat; echo " (stdin closed)"', { background: true, stdin: true })
await sbx.commands.sendStdin(cat.pid, 'hello ')
await sbx.commands.sendStdin(cat.pid, 'stdin')
await sbx.commands.closeStdin(cat.pid)
const catRes = await cat.wait()
print('stdin', { exitCode: catRes.exitCode, stdout: catRes.stdout })

await sbx.kill()
