// Sixteen samples of sin(3 t); eight guesses of the frequency descend on
// the mismatch sum((sin(f t) - sample)^2) with its slope, both from one
// launch per step (vmap(valueAndGrad(mismatch)) compiled to WGSL for
// WebGPU, or to WebAssembly), drawn as dots on the mismatch curve (256
// frequencies in one launch). ?target=wasm (the page's switch) picks
// WebAssembly; without WebGPU the page falls back to it by itself.
import {chooseTarget, loadProgram} from './accy.js';

const POINTS = 16, STEPS = 100, RATE = 0.005;
const LO = 0, HI = 9;
const time = new Float32Array(POINTS), sample = new Float32Array(POINTS);
for (let i = 0; i < POINTS; ++i) {
  time[i] = 0.25 * i;
  sample[i] = Math.fround(Math.sin(Math.fround(3 * time[i])));
}

const canvas = document.getElementById('plot');
const ctx = canvas.getContext('2d');
const status = document.getElementById('status');
const M = {left: 50, right: 20, top: 20, bottom: 40};
const x = (f) => M.left + (f - LO) / (HI - LO) * (canvas.width - M.left - M.right);
const y = (m, top) => canvas.height - M.bottom - m / top * (canvas.height - M.top - M.bottom);

function draw(freqs, curve, guesses, step) {
  const top = Math.max(...curve) * 1.05;
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.strokeStyle = '#888';
  ctx.beginPath();
  ctx.moveTo(M.left, M.top);
  ctx.lineTo(M.left, canvas.height - M.bottom);
  ctx.lineTo(canvas.width - M.right, canvas.height - M.bottom);
  ctx.stroke();
  ctx.fillStyle = '#444';
  for (let f = LO; f <= HI; ++f) ctx.fillText(String(f), x(f) - 3, canvas.height - M.bottom + 16);
  ctx.fillText('frequency', canvas.width / 2 - 20, canvas.height - 6);
  ctx.fillText('mismatch', 4, M.top - 6);
  ctx.strokeStyle = '#1f6fb4';
  ctx.lineWidth = 2;
  ctx.beginPath();
  freqs.forEach((f, i) => (i ? ctx.lineTo(x(f), y(curve[i], top)) : ctx.moveTo(x(f), y(curve[i], top))));
  ctx.stroke();
  const colors = ['#d62728', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22'];
  guesses.f.forEach((f, g) => {
    ctx.fillStyle = colors[g];
    ctx.beginPath();
    ctx.arc(x(f), y(guesses.m[g], top), 6, 0, 2 * Math.PI);
    ctx.fill();
  });
  ctx.fillStyle = '#222';
  ctx.fillText(`step ${step} of ${STEPS}`, canvas.width - 120, M.top + 4);
}

async function main() {
  // ?target=wgsl|wasm, WebGPU unless asked.
  const {target, device, note} = await chooseTarget(new URLSearchParams(location.search).get('target') ?? 'wgsl');
  for (const link of document.querySelectorAll('#switch a')) {
    link.style.fontWeight = link.dataset.target === target ? 'bold' : 'normal';
  }
  const artifacts = globalThis.TONE_ARTIFACTS[target];
  const refine = await loadProgram(device, artifacts.refine);
  const curveProgram = await loadProgram(device, artifacts.curve);
  const n = curveProgram.inputs[0].axes[0].extent;
  const freqs = Float32Array.from({length: n}, (_, i) => LO + (HI - LO) * i / (n - 1));
  const [curve] = await curveProgram.run([freqs, time, sample]);
  const guesses = Float32Array.from([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5]);
  let value = null;
  for (let step = 0; step < STEPS; ++step) {
    const [v, slope] = await refine.run([guesses, time, sample]);
    value = v;
    draw(freqs, curve, {f: guesses, m: value}, step);
    for (let g = 0; g < 8; ++g) guesses[g] = Math.fround(guesses[g] - Math.fround(RATE * slope[g]));
    await new Promise((r) => requestAnimationFrame(r));
  }
  const [last] = await refine.run([guesses, time, sample]);
  draw(freqs, curve, {f: guesses, m: last}, STEPS);
  status.textContent = 'on ' + note + '\nstarted at 0.5 1.5 2.5 3.5 4.5 5.5 6.5 7.5\nafter ' + STEPS + ' steps:  ' +
                       Array.from(guesses, (g) => g.toFixed(4)).join(' ');
  return {target, note, guesses: Array.from(guesses), mismatch: Array.from(last)};
}

window.toneDone = main().catch((e) => {
  status.textContent = 'error: ' + e.message;
  throw e;
});
