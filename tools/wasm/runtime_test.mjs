// web/accy_wasm.js in node, given the tone program's wasm artifacts (one
// compiled without threads, one with): a run that matches the mismatch
// computed here in double precision, and every bad input refused with an
// AccyError that names what was wrong, the program still usable after.
// Then web/accy_plan.js on the plan of tools/fuzz/corpus/loops.wire (a scan
// over xs whose body runs a while loop): its outputs against the loops
// computed here, a run stopped by its signal, damaged plans refused by name.
import {readFileSync} from 'node:fs';
import {loadWasmPlan} from './accy_plan.js';
import {AccyError, loadWasmProgram} from './accy_wasm.js';

const [plainPath, threadsPath, planPath] = process.argv.slice(2);
const artifact = JSON.parse(readFileSync(plainPath, 'utf8'));
let checks = 0;
let failures = 0;

function check(ok, what) {
  ++checks;
  if (!ok) {
    ++failures;
    console.log(`FAIL: ${what}`);
  }
}

async function refused(what, f, message) {
  try {
    await f();
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof AccyError && e.message.includes(message), `${what}: ${e.name}: ${e.message} (wanted "${message}")`);
  }
}

const guesses = Float32Array.from([0.5, 1.5, 2.5, 3, 3.5, 4.5, 5.5, 6.5]);
const time = Float32Array.from({length: 16}, (_, i) => 0.25 * i);
const sample = Float32Array.from(time, (t) => Math.sin(3 * t));
const expected = Array.from(guesses, (f) => time.reduce((s, t, i) => s + (Math.sin(Math.fround(f * t)) - sample[i]) ** 2, 0));

function matches(got) {
  return got instanceof Float32Array && got.length === 8 &&
         got.every((v, g) => Math.abs(v - expected[g]) <= 1e-5 * (1 + Math.abs(expected[g])));
}

const program = await loadWasmProgram(artifact);
check(matches(program.runSync([guesses, time, sample])[0]), 'runSync matches the mismatch');
check(matches((await program.run([guesses, time, sample]))[0]), 'run matches the mismatch');
// In place: fill the views, run, read the view; no copies.
program.inputView(0).set(guesses);
program.inputView(1).set(time);
program.inputView(2).set(sample);
await program.runInPlace();
check(matches(program.outputView(0)), 'runInPlace on the views matches');

await refused('two inputs', () => program.run([guesses, time]), 'the program takes 3 inputs, not 2');
await refused('an Int32Array', () => program.run([Int32Array.from(guesses), time, sample]),
              'input 0 (f32[guess=8]) must be a Float32Array, not Int32Array');
await refused('a short input', () => program.run([guesses.subarray(0, 7), time, sample]),
              'input 0 (f32[guess=8]) has 7 elements, not 8');
await refused('no array', () => program.run(undefined), 'the program takes 3 inputs, not undefined');
check(matches(program.runSync([guesses, time, sample])[0]), 'the program still runs after the refusals');

const clone = () => JSON.parse(JSON.stringify(artifact));
await refused('another format', () => loadWasmProgram({...clone(), format: 'accy-wgsl-1'}),
              'not an Accy wasm artifact (format accy-wgsl-1; expected accy-wasm-1)');
await refused('no kernels', () => loadWasmProgram({...clone(), kernels: undefined}), 'the artifact has no kernels list');
await refused('no module', () => loadWasmProgram({...clone(), module: undefined}), 'the artifact has no module');
await refused('a damaged module', () => loadWasmProgram({...clone(), module: Buffer.from('not a module').toString('base64')}),
              'the engine refused the module');
const a1 = clone();
a1.kernels[0].export = 'k99';
await refused('a kernel the module lacks', () => loadWasmProgram(a1), `kernel ${a1.kernels[0].name}: the module exports no function k99`);
const a2 = clone();
a2.buffers[0].dtype = 'f16';
await refused('an unknown dtype', () => loadWasmProgram(a2), 'buffer 0 has dtype f16');
const a3 = clone();
a3.buffers.find((b) => b.role === 'output').elements = 9;
await refused('an output of the wrong size', () => loadWasmProgram(a3), 'output 0 is f32[guess=8] but its buffer holds 9 f32');

if (threadsPath) {
  const threaded = await loadWasmProgram(JSON.parse(readFileSync(threadsPath, 'utf8')));
  check(threaded.workers.length >= 1, `a program compiled with threads has workers (${threaded.workers.length})`);
  check(matches((await threaded.run([guesses, time, sample]))[0]), 'the threaded program matches');
  await refused('runSync on workers', () => threaded.runSync([guesses, time, sample]), 'this program runs on workers');
  threaded.destroy();
}
if (planPath) {
  const plan = JSON.parse(readFileSync(planPath, 'utf8'));
  const program = await loadWasmPlan(plan);
  const x0 = Float32Array.from([0.5, -1, 2]);
  const xs = Float32Array.from({length: 12}, (_, i) => Math.fround(Math.sin(0.7 * i)));
  // loops.wire: c = x0; each step t: while sum(c) < 50: c = 2c + |x0|;
  // ys[t] = sum(c); c += xs[t].
  const want = () => {
    let c = Array.from(x0);
    const ys = [];
    for (let t = 0; t < 4; ++t) {
      while (c.reduce((a, b) => Math.fround(a + b), 0) < 50) c = c.map((v, i) => Math.fround(Math.fround(2 * v) + Math.abs(x0[i])));
      ys.push(c.reduce((a, b) => Math.fround(a + b), 0));
      c = c.map((v, i) => Math.fround(v + xs[t * 3 + i]));
    }
    return {c, ys};
  };
  const close = (got, expected) => got.length === expected.length &&
      Array.from(got).every((v, i) => Math.abs(v - expected[i]) <= 1e-5 * Math.max(1, Math.abs(expected[i])));
  const expected = want();
  const [c, ys] = await program.run([x0, xs]);
  check(close(c, expected.c) && close(ys, expected.ys), `the plan's loops: carry ${Array.from(c)} ys ${Array.from(ys)}, ` +
        `wanted ${expected.c} and ${expected.ys}`);
  check(program.loadedStages >= 3, `the plan loads each stage once (${program.loadedStages})`);
  const stop = new AbortController();
  stop.abort(new Error('the caller gave up'));
  await refused('a stopped run', () => program.run([x0, xs], {signal: stop.signal}), 'the run was stopped: the caller gave up');
  await refused('a plan run with a short input', () => program.run([x0, xs.subarray(1)]), 'input 1 (f32[step=4, n=3]) has 11 elements');
  const [c2, ys2] = await program.run([x0, xs]);
  check(close(c2, expected.c) && close(ys2, expected.ys), 'the plan still runs, the same, after the refusals');
  program.destroy();
  const damaged = (f) => {
    const p = JSON.parse(JSON.stringify(plan));
    f(p);
    return () => loadWasmPlan(p);
  };
  await refused('a plan for another target', damaged((p) => { p.target = 'wgsl'; }), 'a plan for wgsl does not run on wasm');
  await refused('a slot out of range', damaged((p) => { p.plan.stages[0].inputs[0] = 99; }), 'the plan, stage 0 (program)\'s inputs names slot 99');
  const scan = plan.plan.stages.findIndex((st) => st.kind === 'scan');
  await refused('a body that does not fit its loop', damaged((p) => { p.plan.stages[scan].body.inputs.pop(); }),
                `the plan, stage ${scan} (scan): its body takes`);
  await refused('an unknown stage kind', damaged((p) => { p.plan.stages[scan].body.stages[0].kind = 'goto'; }),
                `the plan, stage ${scan} (scan) body, stage 0 (goto): no such stage kind`);
  await refused('a stage artifact of another format', damaged((p) => { p.plan.stages[0].artifact.format = 'accy-wgsl-1'; }),
                'its artifact is accy-wgsl-1, not accy-wasm-1');
  await refused('loops nested too deep', damaged((p) => {
    let inner = p.plan.stages[scan];
    for (let d = 0; d < 40; ++d) inner.body = {...inner.body, stages: [{...inner}]};
  }), 'loops nested more than 32 deep');
}
console.log(`${checks} checks, ${failures} failures`);
process.exit(failures === 0 ? 0 : 1);
