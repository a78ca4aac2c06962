// Times Accy's WGSL artifacts against hand-written WGSL kernels of the same
// computation, both run through web/accy.js (the same buffers, writes and
// read-backs), so the ratio is the kernels'. window.benchDone resolves to
// {adapter, rows: [{name, accy_ms, reference_ms}]}: medians of 15 runs each,
// interleaved, after 3 warm-up runs.
import {requestDevice, loadProgram} from './accy.js';

const N = 1 << 22;
const spec = {dtype: 'f32', axes: [{name: 'i', extent: N}]};

// y = ((x * 2 + 1) * x - 3) * 0.5 + x, grid-stride, 256 per workgroup.
const CHAIN = {
  format: 'accy-wgsl-1', isa: 'webgpu',
  buffers: [{role: 'input', io: 0, dtype: 'f32', elements: N}, {role: 'output', io: 0, dtype: 'f32', elements: N}],
  kernels: [{name: 'chain', workgroups: 16384, workgroup_size: 256, bindings: [0, 1], wgsl: `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x;
  if (i < ${N}u) {
    let v = x[i];
    y[i] = ((v * 2.0 + 1.0) * v - 3.0) * 0.5 + v;
  }
}`}],
  inputs: [spec], outputs: [spec],
};

// Two passes: 1024 workgroups stride over the input and reduce in
// workgroup memory, one workgroup reduces the 1024 partial sums.
const TREE = (load) => `
var<workgroup> s: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) w: vec3<u32>) {
  var acc = 0.0;
  ${load}
  s[l.x] = acc;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h = h / 2u) {
    if (l.x < h) { s[l.x] = s[l.x] + s[l.x + h]; }
    workgroupBarrier();
  }
  if (l.x == 0u) { out[w.x] = s[0]; }
}`;
const SUM = {
  format: 'accy-wgsl-1', isa: 'webgpu',
  buffers: [{role: 'input', io: 0, dtype: 'f32', elements: N}, {role: 'temp', io: -1, dtype: 'f32', elements: 1024},
            {role: 'output', io: 0, dtype: 'f32', elements: 1}],
  kernels: [
    {name: 'parts', workgroups: 1024, workgroup_size: 256, bindings: [0, 1], wgsl: `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;` + TREE(`
  for (var i = w.x * 256u + l.x; i < ${N}u; i = i + 1024u * 256u) { acc = acc + x[i]; }`)},
    {name: 'total', workgroups: 1, workgroup_size: 256, bindings: [1, 2], wgsl: `
@group(0) @binding(1) var<storage, read_write> parts: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;` + TREE(`
  for (var i = l.x; i < 1024u; i = i + 256u) { acc = acc + parts[i]; }`)},
  ],
  inputs: [spec], outputs: [{dtype: 'f32', axes: []}],
};

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function time(program, inputs) {
  const t0 = performance.now();
  const out = await program.run(inputs);
  return {ms: performance.now() - t0, out};
}

async function main() {
  const adapter = await navigator.gpu.requestAdapter();
  const info = adapter.info ?? {};
  const device = await requestDevice();
  const x = Float32Array.from({length: N}, (_, i) => ((i * 7919) % 1000) / 1000 - 0.5);
  const rows = [];
  for (const [name, mine, theirs] of [['chain', BENCH_ARTIFACTS.chain, CHAIN], ['sum', BENCH_ARTIFACTS.sum, SUM]]) {
    const a = await loadProgram(device, mine), b = await loadProgram(device, theirs);
    for (let i = 0; i < 3; ++i) {
      await time(a, [x]);
      await time(b, [x]);
    }
    const ta = [], tb = [];
    let outA = null, outB = null;
    for (let i = 0; i < 15; ++i) {
      const ra = await time(a, [x]), rb = await time(b, [x]);
      ta.push(ra.ms);
      tb.push(rb.ms);
      outA = ra.out[0];
      outB = rb.out[0];
    }
    // Both computed the same thing.
    let worst = 0;
    for (let i = 0; i < outA.length; ++i) worst = Math.max(worst, Math.abs(outA[i] - outB[i]) / Math.max(1, Math.abs(outB[i])));
    rows.push({name, accy_ms: median(ta), reference_ms: median(tb), largest_relative_difference: worst});
  }
  return {adapter: `${info.vendor ?? '?'} ${info.architecture ?? '?'} ${info.description ?? ''}`.trim(), rows};
}

window.benchDone = main();
