// Trains examples/digits' network in the page: each epoch is one run of one
// program (a scan over 45 minibatches drawn with the random-number API, the
// gradient inside the body, SGD as the carry), compiled to WGSL for WebGPU
// or to WebAssembly (make_artifacts.cc writes both as plans, accy-plan-1).
// After every epoch the held-out images are classified by the predict
// program; the page draws every step's loss and a grid of held-out digits
// with their predicted labels (green right, red wrong). ?target=wasm picks
// WebAssembly (without WebGPU the page falls back to it by itself);
// ?epochs=N sets the number of epochs (default 20).
import {chooseTarget, loadProgram} from './accy.js';

const D = globalThis.DIGITS;
const params = new URLSearchParams(location.search);
const EPOCHS = Math.max(1, Number(params.get('epochs') ?? 20));
const GRID = {columns: 6, rows: 5, cell: 44};

function pixels(b64) {
  const raw = atob(b64);
  return Float32Array.from({length: raw.length}, (_, i) => raw.charCodeAt(i) / 16);
}

const trainX = pixels(D.data.train_pixels), testX = pixels(D.data.test_pixels);
const trainY = Int32Array.from(D.data.train_labels), testY = Int32Array.from(D.data.test_labels);
const status = document.getElementById('status');

function drawLoss(losses, epochs) {
  const c = document.getElementById('loss'), ctx = c.getContext('2d');
  const M = {left: 44, right: 12, top: 20, bottom: 36};
  const steps = D.options.steps * epochs, top = Math.max(2.5, ...losses);
  const x = (i) => M.left + i / Math.max(1, steps - 1) * (c.width - M.left - M.right);
  const y = (v) => c.height - M.bottom - v / top * (c.height - M.top - M.bottom);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, c.width, c.height);
  ctx.strokeStyle = '#888';
  ctx.beginPath();
  ctx.moveTo(M.left, M.top);
  ctx.lineTo(M.left, c.height - M.bottom);
  ctx.lineTo(c.width - M.right, c.height - M.bottom);
  ctx.stroke();
  ctx.fillStyle = '#444';
  for (let v = 0; v <= top; v += 0.5) ctx.fillText(v.toFixed(1), 12, y(v) + 4);
  for (let e = 0; e <= epochs; e += Math.max(1, Math.round(epochs / 10))) {
    ctx.fillText(String(e), x(e * D.options.steps) - 3, c.height - M.bottom + 14);
  }
  ctx.fillText('epoch', c.width / 2 - 14, c.height - 6);
  ctx.fillText('minibatch loss (softmax cross-entropy)', M.left + 4, M.top - 6);
  ctx.strokeStyle = '#1f6fb4';
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  losses.forEach((v, i) => (i ? ctx.lineTo(x(i), y(v)) : ctx.moveTo(x(i), y(v))));
  ctx.stroke();
}

function drawGrid(predicted) {
  const c = document.getElementById('grid'), ctx = c.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, c.width, c.height);
  const scale = 4, image = ctx.createImageData(8 * scale, 8 * scale);
  for (let n = 0; n < GRID.columns * GRID.rows; ++n) {
    const left = (n % GRID.columns) * GRID.cell, top = Math.floor(n / GRID.columns) * (GRID.cell + 16);
    for (let p = 0; p < 64 * scale * scale; ++p) {
      const px = Math.floor((p % (8 * scale)) / scale), py = Math.floor(Math.floor(p / (8 * scale)) / scale);
      const v = 255 - Math.round(255 * testX[n * 64 + py * 8 + px]);
      image.data.set([v, v, v, 255], p * 4);
    }
    ctx.putImageData(image, left + 8, top + 4);
    if (predicted) {
      ctx.fillStyle = predicted[n] === testY[n] ? '#2ca02c' : '#d62728';
      ctx.font = 'bold 13px sans-serif';
      ctx.fillText(String(predicted[n]), left + 20, top + 8 * scale + 18);
    }
  }
}

async function main() {
  const {target, device, note} = await chooseTarget(params.get('target') ?? 'wgsl');
  for (const link of document.querySelectorAll('#switch a')) {
    link.style.fontWeight = link.dataset.target === target ? 'bold' : 'normal';
  }
  drawGrid(null);
  const epoch = await loadProgram(device, D[target].epoch);
  const predict = await loadProgram(device, D[target].predict);
  let weights = ['w1', 'b1', 'w2', 'b2'].map((k) => Float32Array.from(D.initial[k]));
  const losses = [], accuracies = [];
  let trainMs = 0, predicted = null;
  for (let e = 0; e < EPOCHS; ++e) {
    const start = performance.now();
    const out = await epoch.run([trainX, trainY, ...weights, Uint32Array.from([2026, e])]);
    trainMs += performance.now() - start;
    weights = out.slice(0, 4);
    losses.push(...out[4]);
    [predicted] = await predict.run([testX, ...weights]);
    const right = predicted.reduce((n, p, i) => n + (p === testY[i]), 0);
    accuracies.push(right / testY.length);
    drawLoss(losses, EPOCHS);
    drawGrid(predicted);
    status.textContent = `on ${note}\nepoch ${e + 1} of ${EPOCHS}: held-out accuracy ${(100 * accuracies[e]).toFixed(1)}% ` +
                         `(${right} of ${testY.length}); ${(trainMs / (e + 1)).toFixed(0)} ms an epoch`;
    await new Promise((r) => requestAnimationFrame(r));
  }
  return {target, note, epochs: EPOCHS, accuracies, losses: losses.filter((_, i) => i % D.options.steps === 0),
          lastLoss: losses[losses.length - 1], msPerEpoch: trainMs / EPOCHS};
}

window.digitsDone = main().catch((e) => {
  status.textContent = 'error: ' + e.message;
  throw e;
});
