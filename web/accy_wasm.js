// Accy's WebAssembly runtime: runs a wasm artifact (`accy compile
// --target=wasm --emit=artifact`, format accy-wasm-1, docs/WASM.md) on typed
// arrays, in a browser or in node. A plain ES module; no build step.
// web/accy.js's loadProgram hands wasm artifacts here, so one API serves
// both web targets.
//
//   import {loadWasmProgram} from './accy_wasm.js';
//   const program = await loadWasmProgram(artifact);
//   const [mismatch] = await program.run([guesses, time, sample]);
//
// The module imports its memory. Every buffer of the program (inputs,
// outputs and temps) has a fixed place in it, so a caller can fill
// program.inputView(i) in place and read program.outputView(i) after
// program.runInPlace() without any copy; run() copies the arrays it is given
// in and fresh copies of the outputs out.
//
// A program compiled with threads (--threads=N; artifact "threads": N) gets
// a shared memory and N - 1 workers (./accy_wasm_worker.js: Web Workers, or
// node's worker threads) that instantiate the same module over it; each
// kernel with a parallel loop is split into N parts, one run here and the
// others on the workers, and the launch waits for all. Such programs run
// with run() or runInPlace() (both async); destroy() ends the workers.

export class AccyError extends Error {
  constructor(message) {
    super(message);
    this.name = 'AccyError';
  }
}

const ARRAYS = {f32: Float32Array, f64: Float64Array, i32: Int32Array, i64: BigInt64Array, bool: Uint8Array, u32: Uint32Array};
const SIZES = {f32: 4, f64: 8, i32: 4, i64: 8, bool: 1, u32: 4};
const PAGE = 65536;

export function describe(spec) {
  return `${spec.dtype}[${spec.axes.map((a) => `${a.name}=${a.extent}`).join(', ')}]`;
}

export function elementsOf(spec) {
  return spec.axes.reduce((n, a) => n * a.extent, 1);
}

// Checks run()'s inputs against the artifact: their count, each one's
// typed-array type (from `arrays`, by dtype) and element count, naming the
// input and its spec.
export function checkInputs(artifact, inputs, arrays) {
  if (!Array.isArray(inputs) || inputs.length !== artifact.inputs.length) {
    throw new AccyError(`the program takes ${artifact.inputs.length} inputs, not ${Array.isArray(inputs) ? inputs.length : typeof inputs}`);
  }
  artifact.inputs.forEach((spec, i) => {
    const want = arrays[spec.dtype];
    const got = inputs[i];
    if (!(got instanceof want)) {
      throw new AccyError(`input ${i} (${describe(spec)}) must be a ${want.name}, not ${got?.constructor?.name ?? typeof got}`);
    }
    if (got.length !== elementsOf(spec)) {
      throw new AccyError(`input ${i} (${describe(spec)}) has ${got.length} elements, not ${elementsOf(spec)}`);
    }
  });
}

function decodeBase64(text) {
  if (typeof Buffer !== 'undefined') return new Uint8Array(Buffer.from(text, 'base64'));
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; ++i) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

// Where each buffer lives: the table of addresses first, then each buffer
// 64-byte aligned.
function layout(buffers) {
  let at = Math.ceil((buffers.length * 4) / 64) * 64;
  const places = buffers.map((b) => {
    const bytes = b.elements * SIZES[b.dtype];
    const place = {offset: at, bytes};
    at += Math.ceil(Math.max(bytes, 1) / 64) * 64;
    return place;
  });
  return {places, bytes: at};
}

export class WasmProgram {
  constructor(artifact, instance, memory, places, workers) {
    this.artifact = artifact;
    this.instance = instance;
    this.memory = memory;
    this.places = places;
    this.workers = workers;
    this.kernels = artifact.kernels.map((k) => instance.exports[k.export]);
    // Parts of kernels run on workers so far.
    this.partsOnWorkers = 0;
  }

  get inputs() {
    return this.artifact.inputs;
  }
  get outputs() {
    return this.artifact.outputs;
  }

  #view(role, io) {
    const index = this.artifact.buffers.findIndex((b) => b.role === role && b.io === io);
    const b = this.artifact.buffers[index];
    return new ARRAYS[b.dtype](this.memory.buffer, this.places[index].offset, b.elements);
  }

  // Typed arrays over the program's memory: fill the inputs' in place, read
  // the outputs' after runInPlace().
  inputView(i) {
    return this.#view('input', i);
  }
  outputView(i) {
    return this.#view('output', i);
  }

  // Runs the kernels on what the input views hold (resolves when done).
  async runInPlace() {
    if (this.workers.length === 0) {
      this.runInPlaceSync();
      return;
    }
    for (const [i, k] of this.artifact.kernels.entries()) {
      const extent = k.parallel_extent > 0 ? k.parallel_extent : 1;
      const parts = Math.min(this.workers.length + 1, k.parallel_extent > 1 ? k.parallel_extent : 1);
      if (parts <= 1) {
        this.kernels[i](0, 0, extent);
        continue;
      }
      const step = Math.ceil(extent / parts);
      const waits = [];
      for (let p = 1; p < parts; ++p) {
        const begin = p * step, end = Math.min(extent, begin + step);
        if (begin < end) waits.push(this.workers[p - 1].call({kernel: k.export, begin, end}));
      }
      this.kernels[i](0, 0, Math.min(step, extent));
      await Promise.all(waits);
      this.partsOnWorkers += waits.length;
    }
  }

  // The same on this thread alone (programs compiled without threads).
  runInPlaceSync() {
    if (this.workers.length > 0) throw new AccyError('this program runs on workers: use runInPlace() or run()');
    this.artifact.kernels.forEach((k, i) => {
      const extent = k.parallel_extent > 0 ? k.parallel_extent : 1;
      this.kernels[i](0, 0, extent);
    });
  }

  // Runs the program: one typed array per input (Float32Array for f32,
  // Float64Array, Int32Array, BigInt64Array for i64, Uint32Array for u32,
  // Uint8Array for bool);
  // resolves to one typed array per output.
  async run(inputs) {
    this.#place(inputs);
    await this.runInPlace();
    return this.artifact.outputs.map((_, i) => this.outputView(i).slice());
  }

  // run() for programs compiled without threads, returning the outputs.
  runSync(inputs) {
    this.#place(inputs);
    this.runInPlaceSync();
    return this.artifact.outputs.map((_, i) => this.outputView(i).slice());
  }

  #place(inputs) {
    checkInputs(this.artifact, inputs, ARRAYS);
    inputs.forEach((data, i) => {
      const view = this.inputView(i);
      if (data.buffer !== view.buffer || data.byteOffset !== view.byteOffset) view.set(data);
    });
  }

  destroy() {
    for (const w of this.workers) w.terminate();
    this.workers = [];
  }
}

// One worker and its pending calls (answered in order).
class Worker {
  constructor(handle, onMessage) {
    this.handle = handle;
    this.pending = [];
    onMessage((m) => {
      const p = this.pending.shift();
      if (!p) return;
      if (m.error) p.reject(new AccyError(`a worker failed: ${m.error}`));
      else p.resolve(m);
    });
  }
  call(message) {
    return new Promise((resolve, reject) => {
      this.pending.push({resolve, reject});
      this.handle.postMessage(message);
    });
  }
  terminate() {
    this.handle.terminate();
  }
}

async function startWorker(module, memory) {
  const url = new URL('./accy_wasm_worker.js', import.meta.url);
  let worker;
  if (typeof process !== 'undefined' && process.versions?.node) {
    const threads = await import('node:worker_threads');
    const handle = new threads.Worker(url);
    handle.unref();  // a program left undestroyed does not keep node alive
    worker = new Worker(handle, (f) => handle.on('message', f));
  } else {
    const handle = new globalThis.Worker(url);
    worker = new Worker(handle, (f) => {
      handle.onmessage = (e) => f(e.data);
    });
  }
  await worker.call({module, memory});
  return worker;
}

function hardwareThreads() {
  if (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) return navigator.hardwareConcurrency;
  return 1;
}

// Checks an artifact, compiles its module (an engine's refusal becomes an
// AccyError naming it) and places its buffers in a fresh memory. A program
// compiled with threads starts its workers: options.threads of them in all
// (this thread included), else the artifact's count, at most the machine's.
export async function loadWasmProgram(artifact, options = {}) {
  if (!artifact || artifact.format !== 'accy-wasm-1') {
    throw new AccyError(`not an Accy wasm artifact (format ${artifact?.format ?? 'missing'}; expected accy-wasm-1)`);
  }
  for (const field of ['buffers', 'kernels', 'inputs', 'outputs']) {
    if (!Array.isArray(artifact[field])) throw new AccyError(`the artifact has no ${field} list`);
  }
  if (typeof artifact.module !== 'string') throw new AccyError('the artifact has no module');
  artifact.buffers.forEach((b, i) => {
    if (!(b.dtype in SIZES)) throw new AccyError(`buffer ${i} has dtype ${b.dtype}, which is not a wasm program's`);
    if (!Number.isInteger(b.elements) || b.elements < 0) throw new AccyError(`buffer ${i} has ${b.elements} elements`);
  });
  const check = (role, specs) => specs.forEach((s, io) => {
    const b = artifact.buffers.find((x) => x.role === role && x.io === io);
    if (!b) throw new AccyError(`${role} ${io} (${describe(s)}) has no buffer in the artifact`);
    if (b.dtype !== s.dtype || b.elements !== elementsOf(s)) {
      throw new AccyError(`${role} ${io} is ${describe(s)} but its buffer holds ${b.elements} ${b.dtype}`);
    }
  });
  check('input', artifact.inputs);
  check('output', artifact.outputs);
  let module;
  try {
    module = await WebAssembly.compile(decodeBase64(artifact.module));
  } catch (e) {
    throw new AccyError(`the engine refused the module: ${e.message}`);
  }
  for (const k of artifact.kernels) {
    if (!WebAssembly.Module.exports(module).some((x) => x.name === k.export && x.kind === 'function')) {
      throw new AccyError(`kernel ${k.name}: the module exports no function ${k.export}`);
    }
  }
  const {places, bytes} = layout(artifact.buffers);
  const pages = Math.ceil(bytes / PAGE) + 1;
  let memory;
  try {
    memory = new WebAssembly.Memory({initial: pages, maximum: 65536, shared: artifact.threads > 1});
  } catch (e) {
    throw new AccyError(`no memory of ${bytes} bytes for the program: ${e.message}`);
  }
  const table = new Int32Array(memory.buffer, 0, artifact.buffers.length);
  places.forEach((p, i) => {
    table[i] = p.offset;
  });
  const instance = await WebAssembly.instantiate(module, {env: {memory}});
  const workers = [];
  if (artifact.threads > 1) {
    if (typeof SharedArrayBuffer === 'undefined') {
      throw new AccyError('this program was compiled with threads, which need SharedArrayBuffer (a cross-origin isolated page)');
    }
    let machine = hardwareThreads();
    if (typeof process !== 'undefined' && process.versions?.node) machine = (await import('node:os')).availableParallelism();
    const n = Math.max(1, Math.min(options.threads ?? artifact.threads, artifact.threads, Math.max(machine, 2)));
    try {
      for (let i = 1; i < n; ++i) workers.push(await startWorker(module, memory));
    } catch (e) {
      for (const w of workers) w.terminate();
      throw new AccyError(`starting the program's workers failed: ${e.message}`);
    }
  }
  return new WasmProgram(artifact, instance, memory, places, workers);
}
