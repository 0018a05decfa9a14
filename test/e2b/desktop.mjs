// E2B's Desktop SDK (@e2b/desktop) on template desktop: the desktop shows,
// screenshots are PNGs of the screen's size, the mouse moves, clicks,
// scrolls and drags, a terminal launched takes typed text and Enter (the
// command it ran wrote a file, and the screen changed), and the live
// view's stream starts. The sandbox is
// left running for the test to open the stream's URL; it deletes it.
import { Sandbox } from '@e2b/desktop'
import { print, until } from './facts.mjs'

// pngSize reads a PNG's width and height from its IHDR chunk.
function pngSize(png) {
  const b = Buffer.from(png)
  return { signature: b.subarray(0, 8).toString('hex'), width: b.readUInt32BE(16), height: b.readUInt32BE(20) }
}

const desktop = await Sandbox.create({ resolution: [1024, 768], timeoutMs: 600_000 })
print('create', { sandboxId: desktop.sandboxId })
try {
  const first = await desktop.screenshot()
  print('screenshot', pngSize(first))
  print('getScreenSize', await desktop.getScreenSize())

  await desktop.moveMouse(100, 150)
  print('moveMouse', await desktop.getCursorPosition())
  // On the desktop's background: a click, the wheel, a rubber band.
  await desktop.leftClick(500, 400)
  await desktop.scroll('down', 2)
  await desktop.drag([400, 300], [600, 500])
  print('drag', await desktop.getCursorPosition())

  await desktop.launch('xfce4-terminal')
  const windows = await until(async () => {
    const ids = await desktop.getApplicationWindows('xfce4-terminal').catch(() => [])
    return ids.filter(Boolean).length > 0 && ids
  }, 60_000)
  print('launch', { windows: (windows || []).length })
  // The terminal has the focus once it shows.
  await until(async () => (await desktop.getWindowTitle(await desktop.getCurrentWindowId()).catch(() => '')).includes('Terminal'), 30_000)
  const before = Buffer.from(await desktop.screenshot())
  await desktop.write('echo hello from the desktop > /tmp/typed')
  await desktop.press('enter')
  const typed = await until(async () => {
    const r = await desktop.commands.run('cat /tmp/typed 2>/dev/null || true')
    return r.stdout.trim()
  }, 30_000)
  const after = Buffer.from(await desktop.screenshot())
  print('write', {
    typed: typed || '',
    title: await desktop.getWindowTitle(await desktop.getCurrentWindowId()),
    screenChanged: !before.equals(after),
  })

  await desktop.stream.start()
  print('stream', { url: desktop.stream.getUrl(), viewOnly: desktop.stream.getUrl({ viewOnly: true }) })
} catch (err) {
  await desktop.kill()
  throw err
}
// The stream's background command keeps a connection open: node would not
// end by itself.
process.exit(0)
