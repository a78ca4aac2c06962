// Accy's runtime for programs with loops (scan, whileLoop) on the web: a
// plan artifact (format accy-plan-1, docs/WEB.md "Programs with loops") is a
// list of stages, each a loop-free program (an accy-wgsl-1 or accy-wasm-1
// artifact) or a loop whose body is a plan of the same form. The plan is
// written once, whatever the trip counts; this module runs it.
//
//   import {loadWasmPlan} from './accy_plan.js';
//   const epoch = await loadWasmPlan(artifact);           // target "wasm"
//   const outputs = await epoch.run(inputs, {signal});     // like Program.run
//
// web/accy.js's loadProgram hands plans here: target "wasm" runs on
// WebAssembly (buffers in this thread's memory, each stage's program in its
// own module instance), target "wgsl" on WebGPU through an engine of
// accy.js that keeps every slot in a GPU buffer and records a whole scan,
// every step, into one command buffer. Both run the one interpreter below,
// which does what backends/staged_program.cc does in C++: a scan's carries
// are double-buffered and swapped by reference (the last step always writes
// the result), its xs are copied one slice a step into a step buffer and its
// ys copied out of one; a whileLoop reads its condition's bool every trip
// (on WebGPU that is one submit and one read back a trip).
//
// An engine is {alloc(bytes), bytesOf(dtype), copy(from, fromOffset, to,
// toOffset, bytes), runStage(program, ins, outs) (may be async),
// readBool(buffer) (async), loadStage(artifact) (async)}.

import {AccyError, checkInputs, describe, elementsOf, loadWasmProgram} from './accy_wasm.js';

const WASM_SIZES = {f32: 4, f64: 8, i32: 4, i64: 8, bool: 1, u32: 4};
const MAX_DEPTH = 32;

// Checks a plan (and every body in it) for what the interpreter relies on,
// naming the stage: slot indices in range, a known stage kind, counts that
// agree between a loop and its body, the right format for every stage's
// artifact. `where` names the plan ("the plan", "stage 2 (scan) body").
function checkPlan(plan, format, sizes, where, depth) {
  if (depth > MAX_DEPTH) throw new AccyError(`${where}: loops nested more than ${MAX_DEPTH} deep`);
  for (const field of ['slots', 'inputs', 'outputs', 'stages']) {
    if (!Array.isArray(plan?.[field])) throw new AccyError(`${where} has no ${field} list`);
  }
  plan.slots.forEach((s, i) => {
    if (!(s?.dtype in sizes)) throw new AccyError(`${where}: slot ${i} has dtype ${s?.dtype}, which this target does not hold`);
    if (!Array.isArray(s.axes) || s.axes.some((a) => !Number.isInteger(a.extent) || a.extent < 0)) {
      throw new AccyError(`${where}: slot ${i} has no valid axes`);
    }
  });
  const slot = (s, what) => {
    if (!Number.isInteger(s) || s < 0 || s >= plan.slots.length) {
      throw new AccyError(`${what} names slot ${s}, but the plan has ${plan.slots.length}`);
    }
    return plan.slots[s];
  };
  plan.inputs.forEach((s) => slot(s, `${where}'s inputs`));
  plan.outputs.forEach((s) => slot(s, `${where}'s outputs`));
  plan.stages.forEach((st, i) => {
    const name = `${where}, stage ${i} (${st?.kind})`;
    if (!Array.isArray(st?.inputs) || !Array.isArray(st?.outputs)) throw new AccyError(`${name} has no inputs or outputs`);
    st.inputs.forEach((s) => slot(s, `${name}'s inputs`));
    st.outputs.forEach((s) => slot(s, `${name}'s outputs`));
    if (st.kind === 'program') {
      if (st.artifact?.format !== format) {
        throw new AccyError(`${name}: its artifact is ${st.artifact?.format ?? 'missing'}, not ${format}`);
      }
      if (st.artifact.inputs?.length !== st.inputs.length || st.artifact.outputs?.length !== st.outputs.length) {
        throw new AccyError(`${name}: its program takes ${st.artifact.inputs?.length} inputs and ${st.artifact.outputs?.length} outputs, ` +
                            `the stage gives ${st.inputs.length} and ${st.outputs.length}`);
      }
      return;
    }
    if (st.kind !== 'scan' && st.kind !== 'while') throw new AccyError(`${name}: no such stage kind`);
    const nc = st.carries, nx = st.kind === 'scan' ? st.xs : 0;
    if (!Number.isInteger(nc) || nc < 0 || !Number.isInteger(nx) || nx < 0 || nc + nx > st.inputs.length || nc > st.outputs.length) {
      throw new AccyError(`${name}: ${nc} carries and ${nx} xs do not fit its ${st.inputs.length} inputs and ${st.outputs.length} outputs`);
    }
    if (st.kind === 'scan') {
      if (!Number.isInteger(st.length) || st.length < 0) throw new AccyError(`${name}: length ${st.length}`);
      if (!Array.isArray(st.xs_axis) || st.xs_axis.length !== nx) throw new AccyError(`${name}: xs_axis does not name one axis per xs`);
      st.xs_axis.forEach((a, j) => {
        const spec = plan.slots[st.inputs[nc + j]];
        if (!Number.isInteger(a) || a < 0 || a >= spec.axes.length || spec.axes[a].extent !== st.length) {
          throw new AccyError(`${name}: xs ${j} (${describe(spec)}) has no axis ${a} of the loop's length ${st.length}`);
        }
      });
    } else {
      checkPlan(st.condition, format, sizes, `${name} condition`, depth + 1);
      if (st.condition.inputs.length !== st.inputs.length || st.condition.outputs.length !== 1 ||
          st.condition.slots[st.condition.outputs[0]].dtype !== 'bool') {
        throw new AccyError(`${name}: its condition must take the loop's ${st.inputs.length} inputs and give one bool`);
      }
      if (st.outputs.length !== nc) throw new AccyError(`${name}: a while loop gives its ${nc} carries, not ${st.outputs.length} values`);
    }
    checkPlan(st.body, format, sizes, `${name} body`, depth + 1);
    if (st.body.inputs.length !== st.inputs.length || st.body.outputs.length !== st.outputs.length) {
      throw new AccyError(`${name}: its body takes ${st.body.inputs.length} inputs and gives ${st.body.outputs.length}, ` +
                          `the loop ${st.inputs.length} and ${st.outputs.length}`);
    }
  });
}

// How deep loops nest in `plan` (bodies and conditions), counting no
// further than MAX_DEPTH + 1: a damaged plan cannot make the checks recurse
// without end.
function nestingDepth(plan, depth = 0) {
  if (depth > MAX_DEPTH || !Array.isArray(plan?.stages)) return depth;
  let deepest = depth;
  for (const st of plan.stages) {
    for (const inner of [st?.body, st?.condition]) {
      if (inner) deepest = Math.max(deepest, nestingDepth(inner, depth + 1));
    }
  }
  return deepest;
}

// Checks a plan artifact of `target` ('wgsl' or 'wasm').
export function checkPlanArtifact(artifact, target, sizes) {
  if (!artifact || artifact.format !== 'accy-plan-1') {
    throw new AccyError(`not an Accy plan artifact (format ${artifact?.format ?? 'missing'}; expected accy-plan-1)`);
  }
  if (artifact.target !== target) throw new AccyError(`a plan for ${artifact.target} does not run on ${target}`);
  for (const field of ['inputs', 'outputs']) {
    if (!Array.isArray(artifact[field])) throw new AccyError(`the artifact has no ${field} list`);
  }
  if (nestingDepth(artifact.plan) > MAX_DEPTH) throw new AccyError(`the plan: loops nested more than ${MAX_DEPTH} deep`);
  checkPlan(artifact.plan, target === 'wasm' ? 'accy-wasm-1' : 'accy-wgsl-1', sizes, 'the plan', 0);
  if (artifact.plan.inputs.length !== artifact.inputs.length || artifact.plan.outputs.length !== artifact.outputs.length) {
    throw new AccyError('the plan\'s inputs and outputs do not match the artifact\'s');
  }
}

// Loads every stage's program once (bodies' included): a tree of the plan
// with each program stage's handle from engine.loadStage. On a failure the
// engine's buffers and programs are freed before the error is rethrown.
export async function prepare(engine, plan) {
  try {
    return await prepareNode(engine, plan);
  } catch (e) {
    engine.destroy();
    throw e;
  }
}

async function prepareNode(engine, plan) {
  const stages = [];
  for (const st of plan.stages) {
    const node = {...st};
    if (st.kind === 'program') node.program = await engine.loadStage(st.artifact);
    if (st.body) node.body = await prepareNode(engine, st.body);
    if (st.condition) node.condition = await prepareNode(engine, st.condition);
    stages.push(node);
  }
  return {plan, stages};
}

function slotBytes(engine, spec) {
  return elementsOf(spec) * engine.bytesOf(spec.dtype);
}

// A plan's own buffers (every slot but its inputs), and those of the loops
// in it, made on their first run and kept.
function makeFrame(engine, node) {
  const inputs = new Set(node.plan.inputs);
  return {
    bufs: node.plan.slots.map((s, i) => (inputs.has(i) ? null : engine.alloc(slotBytes(engine, s)))),
    loops: new Map(),
  };
}

function stopCheck(signal) {
  if (signal?.aborted) throw new AccyError(`the run was stopped: ${signal.reason?.message ?? signal.reason ?? 'aborted'}`);
}

// Runs `node` on frame `frame`: `ins` and `outs` are the engine's buffers
// of its inputs and outputs. An output a stage writes is written in place
// where it is the first output naming its slot; the others are copied.
async function runFrame(engine, node, frame, ins, outs, signal) {
  const p = node.plan;
  const v = frame.bufs.slice();
  p.inputs.forEach((s, i) => {
    v[s] = ins[i];
  });
  const seen = new Set(p.inputs);
  const direct = p.outputs.map((s, k) => {
    const first = !seen.has(s);
    seen.add(s);
    if (first) v[s] = outs[k];
    return first;
  });
  for (const [index, st] of node.stages.entries()) {
    if (st.kind === 'program') {
      await engine.runStage(st.program, st.inputs.map((s) => v[s]), st.outputs.map((s) => v[s]));
    } else {
      await runLoop(engine, node, frame, index, st, v, signal);
    }
  }
  p.outputs.forEach((s, k) => {
    if (!direct[k]) engine.copy(v[s], 0, outs[k], 0, slotBytes(engine, p.slots[s]));
  });
}

async function runLoop(engine, node, frame, index, st, v, signal) {
  const slots = node.plan.slots;
  const nc = st.carries, nx = st.kind === 'scan' ? st.xs : 0;
  const carryBytes = st.outputs.slice(0, nc).map((s) => slotBytes(engine, slots[s]));
  let loop = frame.loops.get(index);
  if (!loop) {
    loop = {body: makeFrame(engine, st.body), spare: carryBytes.map((b) => engine.alloc(b)), xs: [], ys: []};
    if (st.kind === 'scan') {
      // One slice of each xs and ys: where a step reads and writes them.
      for (let j = 0; j < nx; ++j) {
        loop.xs.push(engine.alloc(st.length ? slotBytes(engine, slots[st.inputs[nc + j]]) / st.length : 0));
      }
      for (const s of st.outputs.slice(nc)) loop.ys.push(engine.alloc(st.length ? slotBytes(engine, slots[s]) / st.length : 0));
    } else {
      loop.condition = makeFrame(engine, st.condition);
      loop.go = engine.alloc(engine.bytesOf('bool'));
    }
    frame.loops.set(index, loop);
  }
  const init = st.inputs.slice(0, nc).map((s) => v[s]);
  const captures = st.inputs.slice(nc + nx).map((s) => v[s]);
  const result = st.outputs.slice(0, nc).map((s) => v[s]);
  if (st.kind === 'scan') {
    const length = st.length;
    if (length === 0) {
      init.forEach((b, i) => engine.copy(b, 0, result[i], 0, carryBytes[i]));
      return;
    }
    const xs = st.inputs.slice(nc, nc + nx).map((s) => v[s]);
    const ys = st.outputs.slice(nc).map((s) => v[s]);
    const cut = st.xs_axis.map((axis, j) => {
      const spec = slots[st.inputs[nc + j]];
      let outer = 1, inner = engine.bytesOf(spec.dtype);
      spec.axes.forEach((a, d) => {
        if (d < axis) outer *= a.extent;
        if (d > axis) inner *= a.extent;
      });
      return {outer, inner};
    });
    const ySlices = st.outputs.slice(nc).map((s) => slotBytes(engine, slots[s]) / length);
    for (let t = 0; t < length; ++t) {
      stopCheck(signal);
      // Step t writes the result when length-1-t is even: the last does.
      const toResult = (length - 1 - t) % 2 === 0;
      const from = t === 0 ? init : toResult ? loop.spare : result;
      const to = toResult ? result : loop.spare;
      cut.forEach(({outer, inner}, j) => {
        for (let o = 0; o < outer; ++o) engine.copy(xs[j], (o * length + t) * inner, loop.xs[j], o * inner, inner);
      });
      await runFrame(engine, st.body, loop.body, [...from, ...loop.xs, ...captures], [...to, ...loop.ys], signal);
      ys.forEach((y, k) => engine.copy(loop.ys[k], 0, y, t * ySlices[k], ySlices[k]));
    }
    return;
  }
  let current = init, inResult = false, trips = 0;
  while (true) {
    stopCheck(signal);
    await runFrame(engine, st.condition, loop.condition, [...current, ...captures], [loop.go], signal);
    if (!(await engine.readBool(loop.go))) break;
    const toResult = trips === 0 ? true : !inResult;
    const to = toResult ? result : loop.spare;
    await runFrame(engine, st.body, loop.body, [...current, ...captures], to, signal);
    current = to;
    inResult = toResult;
    ++trips;
  }
  if (!inResult) current.forEach((b, i) => engine.copy(b, 0, result[i], 0, carryBytes[i]));
}

// A loaded plan: its inputs' and outputs' specs, and run(). `engine` holds
// the buffers; `io` moves the caller's arrays in and out of them.
export class PlanProgram {
  constructor(artifact, engine, root, io) {
    this.artifact = artifact;
    this.engine = engine;
    this.root = root;
    this.io = io;
    this.frame = makeFrame(engine, root);
    this.busy = false;
  }

  get inputs() {
    return this.artifact.inputs;
  }
  get outputs() {
    return this.artifact.outputs;
  }
  // Loop-free programs loaded, bodies' included (it does not depend on any
  // loop's length).
  get loadedStages() {
    const count = (node) => node.stages.reduce((n, st) => n + (st.program ? 1 : 0) +
                                                 (st.body ? count(st.body) : 0) + (st.condition ? count(st.condition) : 0), 0);
    return count(this.root);
  }

  // Runs the program: one typed array per input (as Program.run takes
  // them); resolves to one typed array per output. options.signal (an
  // AbortSignal) stops a run between steps and trips with an AccyError.
  async run(inputs, options = {}) {
    checkInputs(this.artifact, inputs, this.io.arrays);
    if (this.busy) throw new AccyError('this program is running already: wait for its run to end');
    this.busy = true;
    try {
      const ins = this.io.place(inputs);
      const outs = this.io.outputBuffers();
      this.engine.begin?.();
      await runFrame(this.engine, this.root, this.frame, ins, outs, options.signal);
      return await this.io.read(outs);
    } finally {
      this.busy = false;
      this.engine.end?.();
    }
  }

  destroy() {
    this.engine.destroy?.();
  }
}

// The plan on WebAssembly: buffers are byte arrays of this thread; each
// stage's program is a WasmProgram of its own, its inputs copied into its
// memory and its outputs out.
class WasmEngine {
  constructor() {
    this.programs = [];
  }
  bytesOf(dtype) {
    return WASM_SIZES[dtype];
  }
  alloc(bytes) {
    return new Uint8Array(bytes);
  }
  copy(from, fromOffset, to, toOffset, bytes) {
    if (bytes > 0) to.set(from.subarray(fromOffset, fromOffset + bytes), toOffset);
  }
  async loadStage(artifact) {
    const program = await loadWasmProgram(artifact);
    this.programs.push(program);
    const bytesOf = (view) => new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    return {
      program,
      ins: artifact.inputs.map((_, i) => bytesOf(program.inputView(i))),
      outs: artifact.outputs.map((_, k) => bytesOf(program.outputView(k))),
    };
  }
  async runStage(stage, ins, outs) {
    stage.ins.forEach((view, i) => view.set(ins[i]));
    if (stage.program.workers.length > 0) {
      await stage.program.runInPlace();
    } else {
      stage.program.runInPlaceSync();
    }
    stage.outs.forEach((view, k) => outs[k].set(view));
  }
  async readBool(buffer) {
    return buffer[0] !== 0;
  }
  destroy() {
    for (const p of this.programs) p.destroy();
  }
}

const WASM_ARRAYS = {f32: Float32Array, f64: Float64Array, i32: Int32Array, i64: BigInt64Array, bool: Uint8Array, u32: Uint32Array};

// Loads a plan artifact of target "wasm".
export async function loadWasmPlan(artifact) {
  checkPlanArtifact(artifact, 'wasm', WASM_SIZES);
  const engine = new WasmEngine();
  const root = await prepare(engine, artifact.plan);
  const io = {
    arrays: WASM_ARRAYS,
    place: (inputs) => inputs.map((a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)),
    outputBuffers: () => artifact.outputs.map((s) => new Uint8Array(elementsOf(s) * WASM_SIZES[s.dtype])),
    read: async (outs) => outs.map((bytes, k) => new WASM_ARRAYS[artifact.outputs[k].dtype](bytes.buffer)),
  };
  return new PlanProgram(artifact, engine, root, io);
}
