// The errors the SDK branches on: a killed sandbox's kill is false, a
// missing file is FileNotFoundError, a wrong key is AuthenticationError.
import { Sandbox } from 'e2b'
import { errorOf, print } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

print('missingFile', { error: await errorOf(() => sbx.files.read('/home/user/missing.txt')) })

const wrongKey = { apiKey: 'e2b_' + '0'.repeat(40) }
print('wrongKey', {
  list: await errorOf(() => Sandbox.list(wrongKey).nextItems()),
  create: await errorOf(() => Sandbox.create(wrongKey)),
  getInfo: await errorOf(() => Sandbox.getInfo(sbx.sandboxId, wrongKey)),
})

print('killedSandbox', {
  killed: await sbx.kill(),
  killAgain: await Sandbox.kill(sbx.sandboxId),
  getInfo: await errorOf(() => sbx.getInfo()),
  connect: await errorOf(() => Sandbox.connect(sbx.sandboxId)),
})
