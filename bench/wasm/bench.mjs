// The wasm side of bench/wasm/wasm_bench.cc, in node: each artifact given
// (sin_affine.json: y = sin(a*x + b) * c; sum.json: the sum of x) run through
// web/accy_wasm.js with its inputs filled in place, against a plain
// JavaScript loop over typed arrays doing the same; the median of the runs.
// Then sin_affine_threads.json, compiled with threads, on node's worker
// threads. Prints one JSON line per benchmark.
import {readFileSync} from 'node:fs';
import {performance} from 'node:perf_hooks';
import {loadWasmProgram} from './accy_wasm.js';

const [dir, repsArg] = process.argv.slice(2);
const reps = Number(repsArg ?? 21);

async function median(f) {
  for (let i = 0; i < 3; ++i) await f();  // warm-up: the engine's optimizing tier
  const t = [];
  for (let i = 0; i < reps; ++i) {
    const start = performance.now();
    await f();
    t.push(performance.now() - start);
  }
  t.sort((a, b) => a - b);
  return t[t.length >> 1];
}

function fill(x) {
  // The same inputs as the native side: x[i] = ((i * 7919) % 20011) / 1000 - 10.
  for (let i = 0; i < x.length; ++i) x[i] = ((i * 7919) % 20011) / 1000 - 10;
}

const [a, b, c] = [2, 1, 3];
{
  const program = await loadWasmProgram(JSON.parse(readFileSync(`${dir}/sin_affine.json`, 'utf8')));
  const x = program.inputView(0);
  fill(x);
  program.inputView(1)[0] = a;
  program.inputView(2)[0] = b;
  program.inputView(3)[0] = c;
  const wasm = await median(() => program.runInPlace());
  const y = program.outputView(0);
  const xs = new Float32Array(x.length);
  fill(xs);
  const ys = new Float32Array(x.length);
  const js = await median(() => {
    for (let i = 0; i < xs.length; ++i) ys[i] = Math.sin(a * xs[i] + b) * c;
  });
  let worst = 0;
  for (let i = 0; i < y.length; ++i) worst = Math.max(worst, Math.abs(y[i] - ys[i]));
  console.log(JSON.stringify({name: 'sin_affine', elements: x.length, wasm_ms: wasm, js_ms: js, max_difference: worst}));
}
{
  const program = await loadWasmProgram(JSON.parse(readFileSync(`${dir}/sum.json`, 'utf8')));
  const x = program.inputView(0);
  fill(x);
  const wasm = await median(() => program.runInPlace());
  const got = program.outputView(0)[0];
  const xs = new Float32Array(x.length);
  fill(xs);
  let s = 0;
  const js = await median(() => {
    let t = 0;
    for (let i = 0; i < xs.length; ++i) t += xs[i];
    s = t;
  });
  console.log(JSON.stringify({name: 'sum', elements: x.length, wasm_ms: wasm, js_ms: js, max_difference: Math.abs(got - s)}));
}
{
  const program = await loadWasmProgram(JSON.parse(readFileSync(`${dir}/sin_affine_threads.json`, 'utf8')));
  fill(program.inputView(0));
  program.inputView(1)[0] = a;
  program.inputView(2)[0] = b;
  program.inputView(3)[0] = c;
  const wasm = await median(() => program.runInPlace());
  console.log(JSON.stringify({name: 'sin_affine_threads', threads: program.workers.length + 1, wasm_ms: wasm}));
  program.destroy();
}
