// Accy's runtime for web pages: runs a WGSL artifact (`accy compile
// --target=wgsl --emit=artifact`, format in docs/WEB.md) on WebGPU, or a
// wasm artifact (--target=wasm, docs/WASM.md) through ./accy_wasm.js, on
// typed arrays, with one API. A plain ES module; no build step.
//
//   import {loadProgram} from './accy.js';
//   const program = await loadProgram(device, await (await fetch('tone.json')).json());
//   const [mismatch] = await program.run([guesses, time, sample]);
//
// Inputs and outputs are Float32Array (f32), Int32Array (i32), Uint32Array (u32) or Uint8Array
// (bool, 0 or 1), with exactly the element count of their descriptor.
// Pipelines and buffers are made once, at load; every run reuses them.

import {AccyError, checkInputs, loadWasmProgram, WasmProgram} from './accy_wasm.js';

export {AccyError, loadWasmProgram, WasmProgram};

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

// Checks an artifact, compiles its modules (WGSL errors become an
// AccyError naming the kernel and the line) and makes its pipelines and
// buffers. A wasm artifact (format accy-wasm-1) loads through
// loadWasmProgram instead and needs no device (pass null). A kernel with a subgroups variant (`wgsl_subgroups`) runs it
// where the device has the `subgroups` feature, unless options.subgroups is
// false; the plain module otherwise.
export async function loadProgram(device, artifact, options = {}) {
  if (artifact?.format === 'accy-wasm-1') return loadWasmProgram(artifact);
  if (!artifact || artifact.format !== 'accy-wgsl-1') {
    throw new AccyError(`not an Accy WGSL artifact (format ${artifact?.format ?? 'missing'}; expected accy-wgsl-1)`);
  }
  for (const field of ['buffers', 'kernels', 'inputs', 'outputs']) {
    if (!Array.isArray(artifact[field])) throw new AccyError(`the artifact has no ${field} list`);
  }
  for (const [i, b] of artifact.buffers.entries()) {
    if (!(b.dtype in ARRAYS)) throw new AccyError(`buffer ${i} has dtype ${b.dtype}, which WebGPU programs do not use`);
  }
  const buffers = artifact.buffers.map((b) =>
    device.createBuffer({size: Math.max(4, b.elements * 4), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST}));
  const pipelines = [];
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
    const bindGroup = device.createBindGroup({
      layout,
      entries: k.bindings.map((b) => ({binding: b, resource: {buffer: buffers[b]}})),
    });
    const error = await device.popErrorScope();
    if (error) throw new AccyError(`kernel ${k.name}: ${error.message}`);
    pipelines.push({pipeline, bindGroup});
  }
  const program = new Program(device, artifact, pipelines, buffers);
  program.kernelsWithSubgroups = withSubgroups;
  return program;
}
