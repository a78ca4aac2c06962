// Accy's runtime for web pages: runs a WGSL artifact (`accy compile
// --target=wgsl --emit=artifact`, format in docs/WEB.md) on WebGPU, or a
// wasm artifact (--target=wasm, docs/WASM.md) through ./accy_wasm.js, or a
// program with loops (a plan, accy-plan-1, of either) through
// ./accy_plan.js, on typed arrays, with one API. A plain ES module; no
// build step.
//
//   import {loadProgram} from './accy.js';
//   const program = await loadProgram(device, await (await fetch('tone.json')).json());
//   const [mismatch] = await program.run([guesses, time, sample]);
//
// Inputs and outputs are Float32Array (f32), Int32Array (i32), Uint32Array (u32) or Uint8Array
// (bool, 0 or 1), with exactly the element count of their descriptor.
// Pipelines and buffers are made once, at load; every run reuses them.

import {AccyError, checkInputs, elementsOf, loadWasmProgram, WasmProgram} from './accy_wasm.js';
import {checkPlanArtifact, loadWasmPlan, PlanProgram, prepare} from './accy_plan.js';

export {AccyError, loadWasmPlan, loadWasmProgram, PlanProgram, WasmProgram};

const ARRAYS = {f32: Float32Array, i32: Int32Array, bool: Uint8Array, u32: Uint32Array};

// The device of the page's first adapter (WebGPU), with the `subgroups`
// feature where the adapter has it, or an AccyError saying what is missing.
export async function requestDevice(options = {}) {
  if (!globalThis.navigator || !navigator.gpu) throw new AccyError('this browser has no WebGPU (navigator.gpu)');
  const adapter = await navigator.gpu.requestAdapter(options);
  if (!adapter) throw new AccyError('WebGPU offers no adapter here');
  const requiredFeatures = adapter.features.has('subgroups') ? ['subgroups'] : [];
  return adapter.requestDevice({requiredFeatures});
}

// What a page runs on: `asked` ('wasm', or WebGPU otherwise) and, for
// WebGPU, its device; without WebGPU, wasm, saying why. Resolves to
// {target: 'wgsl' | 'wasm', device (null for wasm), note}.
export async function chooseTarget(asked = 'wgsl') {
  if (asked === 'wasm') return {target: 'wasm', device: null, note: 'WebAssembly, as asked'};
  try {
    return {target: 'wgsl', device: await requestDevice(), note: 'WebGPU'};
  } catch (e) {
    return {target: 'wasm', device: null, note: `WebAssembly: no WebGPU here (${e.message})`};
  }
}

export class Program {
  constructor(device, artifact, pipelines, buffers) {
    this.device = device;
    this.artifact = artifact;
    this.pipelines = pipelines;
    this.buffers = buffers;
    this.lost = null;
    device.lost.then((info) => {
      this.lost = info;
    });
  }

  get inputs() {
    return this.artifact.inputs;
  }
  get outputs() {
    return this.artifact.outputs;
  }

  // Runs the program: one typed array per input; resolves to one typed
  // array per output.
  async run(inputs) {
    const a = this.artifact;
    if (this.lost) throw new AccyError(`the WebGPU device was lost (${this.lost.reason}): ${this.lost.message}`);
    checkInputs(a, inputs, ARRAYS);
    const device = this.device;
    a.buffers.forEach((b, index) => {
      if (b.role !== 'input') return;
      const data = inputs[b.io];
      // Bools are one u32 per element in the kernels.
      const words = b.dtype === 'bool' ? Uint32Array.from(data) : data;
      device.queue.writeBuffer(this.buffers[index], 0, words.buffer, words.byteOffset, words.byteLength);
    });
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    a.kernels.forEach((k, i) => {
      pass.setPipeline(this.pipelines[i].pipeline);
      pass.setBindGroup(0, this.pipelines[i].bindGroup);
      pass.dispatchWorkgroups(k.workgroups);
    });
    pass.end();
    const reads = [];
    a.buffers.forEach((b, index) => {
      if (b.role !== 'output') return;
      const bytes = Math.max(4, b.elements * 4);
      const staging = device.createBuffer({size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
      encoder.copyBufferToBuffer(this.buffers[index], 0, staging, 0, bytes);
      reads.push({b, staging});
    });
    device.pushErrorScope('validation');
    device.queue.submit([encoder.finish()]);
    const error = await device.popErrorScope();
    if (error) throw new AccyError(`WebGPU refused the launch: ${error.message}`);
    const outputs = new Array(a.outputs.length);
    for (const {b, staging} of reads) {
      try {
        await staging.mapAsync(GPUMapMode.READ);
      } catch (e) {
        if (this.lost) throw new AccyError(`the WebGPU device was lost (${this.lost.reason}): ${this.lost.message}`);
        throw new AccyError(`reading output ${b.io} back failed: ${e.message}`);
      }
      const mapped = staging.getMappedRange();
      const words = b.dtype === 'bool' ? new Uint32Array(mapped) : new ARRAYS[b.dtype](mapped);
      outputs[b.io] = b.dtype === 'bool' ? Uint8Array.from(words.subarray(0, b.elements), (w) => (w ? 1 : 0))
                                         : words.slice(0, b.elements);
      staging.unmap();
      staging.destroy();
    }
    return outputs;
  }

  destroy() {
    for (const b of this.buffers) b.destroy();
  }
}

// Checks a WGSL artifact's fields (an AccyError naming what is wrong).
function checkWgslArtifact(artifact) {
  if (!artifact || artifact.format !== 'accy-wgsl-1') {
    throw new AccyError(`not an Accy WGSL artifact (format ${artifact?.format ?? 'missing'}; expected accy-wgsl-1)`);
  }
  for (const field of ['buffers', 'kernels', 'inputs', 'outputs']) {
    if (!Array.isArray(artifact[field])) throw new AccyError(`the artifact has no ${field} list`);
  }
  for (const [i, b] of artifact.buffers.entries()) {
    if (!(b.dtype in ARRAYS)) throw new AccyError(`buffer ${i} has dtype ${b.dtype}, which WebGPU programs do not use`);
  }
}

// Compiles an artifact's modules (WGSL errors become an AccyError naming
// the kernel and the line) into pipelines, each with its bind group layout
// and its bindings.
async function compileKernels(device, artifact, options) {
  const kernels = [];
  const subgroups = options.subgroups !== false && device.features.has('subgroups');
  let withSubgroups = 0;
  for (const k of artifact.kernels) {
    const code = subgroups && k.wgsl_subgroups ? k.wgsl_subgroups : k.wgsl;
    withSubgroups += code !== k.wgsl;
    const module = device.createShaderModule({code, label: k.name});
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length) {
      throw new AccyError(`kernel ${k.name}: WGSL errors: ` + errors.map((m) => `line ${m.lineNum}: ${m.message}`).join('; '));
    }
    const allowed = device.limits.maxStorageBuffersPerShaderStage;
    if (k.bindings.length > allowed) {
      throw new AccyError(`kernel ${k.name} binds ${k.bindings.length} storage buffers; this device allows ${allowed} a stage`);
    }
    device.pushErrorScope('validation');
    // The layout from the artifact (a module may declare a buffer it ends
    // up not reading, which an 'auto' layout would leave out).
    const layout = device.createBindGroupLayout({
      entries: k.bindings.map((b) => ({
        binding: b,
        visibility: GPUShaderStage.COMPUTE,
        buffer: {type: artifact.buffers[b].role === 'input' ? 'read-only-storage' : 'storage'},
      })),
    });
    const pipeline = await device.createComputePipelineAsync({
      layout: device.createPipelineLayout({bindGroupLayouts: [layout]}),
      compute: {module, entryPoint: 'main'},
    }).catch((e) => {
      throw new AccyError(`kernel ${k.name}: no pipeline: ${e.message}`);
    });
    const error = await device.popErrorScope();
    if (error) throw new AccyError(`kernel ${k.name}: ${error.message}`);
    kernels.push({kernel: k, pipeline, layout});
  }
  return {kernels, withSubgroups};
}

function storageBuffer(device, bytes) {
  return device.createBuffer({size: Math.max(4, Math.ceil(bytes / 4) * 4),
                              usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST});
}

// Checks an artifact, compiles its modules and makes its pipelines and
// buffers. A wasm artifact (format accy-wasm-1) loads through
// loadWasmProgram instead and needs no device (pass null); so does a plan
// (a program with loops, format accy-plan-1) for wasm, through
// accy_plan.js; a plan for wgsl runs on `device` (loadGpuPlan). A kernel
// with a subgroups variant (`wgsl_subgroups`) runs it where the device has
// the `subgroups` feature, unless options.subgroups is false; the plain
// module otherwise.
export async function loadProgram(device, artifact, options = {}) {
  if (artifact?.format === 'accy-wasm-1') return loadWasmProgram(artifact);
  if (artifact?.format === 'accy-plan-1') {
    return artifact.target === 'wasm' ? loadWasmPlan(artifact) : loadGpuPlan(device, artifact, options);
  }
  checkWgslArtifact(artifact);
  const buffers = artifact.buffers.map((b) => storageBuffer(device, b.elements * 4));
  const {kernels, withSubgroups} = await compileKernels(device, artifact, options);
  const pipelines = kernels.map(({kernel, pipeline, layout}) => ({
    pipeline,
    bindGroup: device.createBindGroup({layout, entries: kernel.bindings.map((b) => ({binding: b, resource: {buffer: buffers[b]}}))}),
  }));
  const program = new Program(device, artifact, pipelines, buffers);
  program.kernelsWithSubgroups = withSubgroups;
  return program;
}

// A plan on WebGPU: every buffer a GPU buffer (4 bytes an element, bools
// one u32); stages, copies and whole scans recorded into one command
// encoder, submitted at the end of the run or where a whileLoop's
// condition must be read.
class GpuEngine {
  constructor(device, options) {
    this.device = device;
    this.options = options;
    this.buffers = [];
    this.ids = new WeakMap();
    this.encoder = null;
    this.pass = null;
    this.kernelsWithSubgroups = 0;
  }
  bytesOf() {
    return 4;
  }
  alloc(bytes) {
    const buffer = storageBuffer(this.device, bytes);
    this.ids.set(buffer, this.buffers.length);
    this.buffers.push(buffer);
    return buffer;
  }
  async loadStage(artifact) {
    checkWgslArtifact(artifact);
    const {kernels, withSubgroups} = await compileKernels(this.device, artifact, this.options);
    this.kernelsWithSubgroups += withSubgroups;
    const temps = artifact.buffers.map((b) => (b.role === 'temp' ? this.alloc(b.elements * 4) : null));
    // Bind groups by the buffers bound: a scan's body sees its carries in
    // two buffers by turns, so two groups a kernel.
    return {artifact, kernels, temps, groups: new Map()};
  }
  begin() {
    this.encoder = this.device.createCommandEncoder();
  }
  #endPass() {
    if (this.pass) this.pass.end();
    this.pass = null;
  }
  copy(from, fromOffset, to, toOffset, bytes) {
    if (bytes <= 0) return;
    this.#endPass();
    this.encoder.copyBufferToBuffer(from, fromOffset, to, toOffset, bytes);
  }
  runStage(stage, ins, outs) {
    const bound = stage.artifact.buffers.map((b, i) => (b.role === 'input' ? ins[b.io] : b.role === 'output' ? outs[b.io] : stage.temps[i]));
    const key = bound.map((b) => this.ids.get(b)).join(',');
    let groups = stage.groups.get(key);
    if (!groups) {
      groups = stage.kernels.map(({kernel, layout}) => this.device.createBindGroup({
        layout, entries: kernel.bindings.map((b) => ({binding: b, resource: {buffer: bound[b]}})),
      }));
      stage.groups.set(key, groups);
    }
    if (!this.pass) this.pass = this.encoder.beginComputePass();
    stage.kernels.forEach(({kernel, pipeline}, i) => {
      this.pass.setPipeline(pipeline);
      this.pass.setBindGroup(0, groups[i]);
      this.pass.dispatchWorkgroups(kernel.workgroups);
    });
  }
  // Submits what is recorded and starts a new encoder.
  async submit() {
    this.#endPass();
    this.device.pushErrorScope('validation');
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = this.device.createCommandEncoder();
    const error = await this.device.popErrorScope();
    if (error) throw new AccyError(`WebGPU refused the launch: ${error.message}`);
  }
  async read(buffer, bytes) {
    const staging = this.device.createBuffer({size: Math.max(4, bytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    this.copy(buffer, 0, staging, 0, Math.max(4, bytes));
    await this.submit();
    try {
      await staging.mapAsync(GPUMapMode.READ);
      return staging.getMappedRange().slice(0);
    } finally {
      staging.destroy();
    }
  }
  async readBool(buffer) {
    return new Uint32Array(await this.read(buffer, 4))[0] !== 0;
  }
  end() {
    this.#endPass();
    this.encoder = null;
  }
  destroy() {
    for (const b of this.buffers) b.destroy();
    this.buffers = [];
  }
}

// Loads a plan artifact of target "wgsl" on `device`.
export async function loadGpuPlan(device, artifact, options = {}) {
  checkPlanArtifact(artifact, 'wgsl', ARRAYS);
  const engine = new GpuEngine(device, options);
  const root = await prepare(engine, artifact.plan);
  const inputs = artifact.inputs.map((s) => engine.alloc(elementsOf(s) * 4));
  const outputs = artifact.outputs.map((s) => engine.alloc(elementsOf(s) * 4));
  let lost = null;
  device.lost.then((info) => {
    lost = info;
  });
  const io = {
    arrays: ARRAYS,
    place: (data) => {
      if (lost) throw new AccyError(`the WebGPU device was lost (${lost.reason}): ${lost.message}`);
      data.forEach((a, i) => {
        const words = artifact.inputs[i].dtype === 'bool' ? Uint32Array.from(a) : a;
        device.queue.writeBuffer(inputs[i], 0, words.buffer, words.byteOffset, words.byteLength);
      });
      return inputs;
    },
    outputBuffers: () => outputs,
    read: async () => {
      const result = [];
      for (const [k, s] of artifact.outputs.entries()) {
        const n = elementsOf(s);
        const bytes = await engine.read(outputs[k], n * 4);
        result.push(s.dtype === 'bool' ? Uint8Array.from(new Uint32Array(bytes, 0, n), (w) => (w ? 1 : 0))
                                        : new ARRAYS[s.dtype](bytes, 0, n));
      }
      return result;
    },
  };
  const program = new PlanProgram(artifact, engine, root, io);
  program.kernelsWithSubgroups = engine.kernelsWithSubgroups;
  return program;
}
