// The code interpreter (@e2b/code-interpreter): state kept between
// cells, a matplotlib chart, an error with its traceback, contexts
// created, listed, restarted and removed, and JavaScript.
import { Sandbox } from '@e2b/code-interpreter'
import { print } from './facts.mjs'

const sbx = await Sandbox.create()
print('create', { sandboxId: sbx.sandboxId })

await sbx.runCode('x = 1')
const sum = await sbx.runCode('x + 1')
print('state', { text: sum.text, error: sum.error?.name })

const plot = await sbx.runCode(`
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9], label="squares")
plt.title("Squares")
plt.xlabel("n")
plt.show()`)
const [figure] = plot.results
print('chart', {
  results: plot.results.length,
  png: figure?.png?.startsWith('iVBORw0KGgo') ?? false, // base64 of the PNG signature
  type: figure?.chart?.type,
  title: figure?.chart?.title,
  error: plot.error?.name,
})

const failed = await sbx.runCode('def f():\n    raise ValueError("boom")\nf()')
print('error', {
  name: failed.error?.name,
  value: failed.error?.value,
  tracebackNamesF: failed.error?.traceback.includes('f()') ?? false,
})

const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' })
await sbx.runCode('y = 5', { context: ctx })
const inContext = await sbx.runCode('import os; (y, os.getcwd())', { context: ctx })
const yInDefault = await sbx.runCode('y')
const listed = (await sbx.listCodeContexts()).some((c) => c.id === ctx.id)
await sbx.restartCodeContext(ctx)
const afterRestart = await sbx.runCode('y', { context: ctx })
await sbx.removeCodeContext(ctx)
print('contexts', {
  language: ctx.language,
  cwd: ctx.cwd,
  inContext: inContext.text,
  yInDefault: yInDefault.error?.name,
  listed,
  afterRestart: afterRestart.error?.name,
  listedAfterRemove: (await sbx.listCodeContexts()).some((c) => c.id === ctx.id),
})

const js = await sbx.createCodeContext({ language: 'javascript' })
await sbx.runCode('const a = 20', { context: js })
const jsSum = await sbx.runCode('a + 22', { context: js })
const jsDefault = await sbx.runCode('console.log("from js")', { language: 'javascript' })
print('javascript', {
  language: js.language,
  text: jsSum.text,
  error: jsSum.error?.name,
  stdout: jsDefault.logs.stdout.join(''),
})

await sbx.kill()
