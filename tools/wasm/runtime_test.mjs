// web/accy_wasm.js in node, given the tone program's wasm artifacts (one
// compiled without threads, one with): a run that matches the mismatch
// computed here in double precision, and every bad input refused with an
// AccyError that names what was wrong, the program still usable after.
import {readFileSync} from 'node:fs';
import {AccyError, loadWasmProgram} from './accy_wasm.js';

const [plainPath, threadsPath] = process.argv.slice(2);
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
console.log(`${checks} checks, ${failures} failures`);
process.exit(failures === 0 ? 0 : 1);
