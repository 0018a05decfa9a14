// getHost: a web server started in the sandbox answers a plain fetch of
// http://<getHost(port)>/ from here.
import { Sandbox } from 'e2b'
import { print, until } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

await sbx.files.write('/home/user/www/hello.txt', 'hello from the sandbox\n')
const server = await sbx.commands.run('python3 -m http.server 3000', {
  cwd: '/home/user/www',
  background: true,
})
const host = sbx.getHost(3000)
const url = `http://${host}/hello.txt`
const res = await until(() => fetch(url).then((r) => r.ok && r, () => null), 30_000)
let error = ''
if (!res) error = await fetch(url).then((r) => `status ${r.status}`, (err) => String(err.cause ?? err))
print('getHost', { host, status: res?.status, body: await res?.text(), error })

await server.kill()
await sbx.kill()
