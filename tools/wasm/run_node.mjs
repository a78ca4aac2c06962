// Runs wasm artifacts in node for tools/webgpu/page_runner.h's node mode
// (`accy run --target=wasm`, tests/wasm_conformance_test.cc): one case per
// line of JSON on stdin, {"artifact": {...}, "inputs": [base64, ...]} (a
// wasm artifact, or a plan of them for a program with loops; an
// input of a megabyte or more as {"file": PATH}, its bytes in that file); one
// answer per line on stdout: "ok OUT,OUT,... 0" (the outputs in base64) or
// "error MESSAGE". The same protocol as web/runner.html's page; the last
// field counts the parts of kernels that ran on worker threads (programs
// compiled with threads).
import {readFileSync} from 'node:fs';
import {createInterface} from 'node:readline';
import {loadWasmPlan} from './accy_plan.js';
import {loadWasmProgram} from './accy_wasm.js';

const ARRAYS = {f32: Float32Array, f64: Float64Array, i32: Int32Array, i64: BigInt64Array, bool: Uint8Array};

function decode(input, dtype) {
  const bytes = typeof input === 'string' ? Buffer.from(input, 'base64') : readFileSync(input.file);
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new ARRAYS[dtype](copy.buffer);
}

function encode(view) {
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength).toString('base64');
}

const lines = createInterface({input: process.stdin, crlfDelay: Infinity});
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    const c = JSON.parse(line);
    const program = c.artifact?.format === 'accy-plan-1' ? await loadWasmPlan(c.artifact) : await loadWasmProgram(c.artifact);
    const inputs = c.inputs.map((b64, i) => decode(b64, program.inputs[i].dtype));
    try {
      const outputs = await program.run(inputs);
      answer = 'ok ' + outputs.map(encode).join(',') + ' ' + (program.partsOnWorkers ?? 0);
    } finally {
      program.destroy();
    }
  } catch (e) {
    answer = 'error ' + String(e && e.message ? e.message : e).replace(/\n/g, ' ');
  }
  process.stdout.write(answer + '\n');
}
