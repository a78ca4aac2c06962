// A worker of web/accy_wasm.js for wasm programs compiled with threads: it
// instantiates the program's module over the shared memory it is sent, then
// runs the parts [begin, end) of kernels' outermost parallel loops it is
// handed. A Web Worker in browsers, a worker thread in node. Messages in:
// {module, memory} once, then {kernel, begin, end}; out: {ready: true},
// then {done: true} or {error: message} per part.
let exports = null;

function handle(message, reply) {
  try {
    if (message.module) {
      exports = new WebAssembly.Instance(message.module, {env: {memory: message.memory}}).exports;
      reply({ready: true});
      return;
    }
    exports[message.kernel](0, message.begin, message.end);
    reply({done: true});
  } catch (e) {
    reply({error: String(e && e.message ? e.message : e)});
  }
}

if (typeof process !== 'undefined' && process.versions?.node) {
  import('node:worker_threads').then(({parentPort}) => {
    parentPort.on('message', (m) => handle(m, (r) => parentPort.postMessage(r)));
  });
} else {
  globalThis.onmessage = (e) => handle(e.data, (r) => globalThis.postMessage(r));
}
