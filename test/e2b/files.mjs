// Files: write one and several (in directories), read, list, exists,
// makeDir, rename, remove, watchDir, and the upload and download URLs
// used with plain fetch.
import { Sandbox } from 'e2b'
import { print, until } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })
const files = sbx.files

const one = await files.write('/home/user/one.txt', 'one\n')
print('write', { path: one.path, read: await files.read('/home/user/one.txt') })

const several = await files.write([
  { path: '/home/user/dir/a.txt', data: 'a' },
  { path: '/home/user/dir/sub/b.txt', data: 'b' },
])
print('writeSeveral', {
  paths: several.map((w) => w.path).sort(),
  a: await files.read('/home/user/dir/a.txt'),
  b: await files.read('/home/user/dir/sub/b.txt'),
})

const entries = await files.list('/home/user/dir')
print('list', { entries: entries.map((e) => `${e.name} ${e.type}`).sort() })

print('exists', {
  file: await files.exists('/home/user/dir/a.txt'),
  dir: await files.exists('/home/user/dir/sub'),
  missing: await files.exists('/home/user/missing'),
})

print('makeDir', {
  made: await files.makeDir('/home/user/made/deep'),
  again: await files.makeDir('/home/user/made/deep'),
  isDir: (await files.getInfo('/home/user/made/deep')).type,
})

const renamed = await files.rename('/home/user/dir/a.txt', '/home/user/made/a2.txt')
print('rename', {
  path: renamed.path,
  oldExists: await files.exists('/home/user/dir/a.txt'),
  read: await files.read('/home/user/made/a2.txt'),
})

await files.remove('/home/user/made/a2.txt')
await files.remove('/home/user/dir')
print('remove', {
  file: await files.exists('/home/user/made/a2.txt'),
  dir: await files.exists('/home/user/dir'),
})

await files.makeDir('/home/user/watched')
const events = []
const watcher = await files.watchDir('/home/user/watched', (e) => events.push(e))
await files.write('/home/user/watched/new.txt', 'new')
const seen = await until(() => events.find((e) => e.name === 'new.txt'))
await watcher.stop()
print('watchDir', { name: seen?.name, type: seen?.type })

const form = new FormData()
form.append('file', new Blob(['uploaded by fetch\n']), 'up.txt')
const up = await fetch(await sbx.uploadUrl('/home/user/up.txt'), { method: 'POST', body: form })
const down = await fetch(await sbx.downloadUrl('/home/user/up.txt'))
print('urls', {
  uploadStatus: up.status,
  read: await files.read('/home/user/up.txt'),
  downloadStatus: down.status,
  downloaded: await down.text(),
})

await sbx.kill()
