// ONNX Runtime (onnxruntime-node) as one benchmark runner, in its own Node
// process. Same protocol as bench/worker.py:
//   node bench/ort_runner.js WORKDIR MODULE_DIR [MODEL [TAG]]
// reads WORKDIR/spec.json and WORKDIR/MODEL (model.onnx; model-int8.onnx for
// the QDQ export of PyTorch's int8 model, TAG ort-int8), runs once (writing its
// outputs as raw little-endian files), then answers JSON lines on stdin:
// {"cmd":"run","n":k} -> per-call seconds, {"cmd":"quit"} -> peak RSS.
// With spec.ort_profile (a path prefix), the session records ONNX Runtime's
// per-node profile and {"cmd":"quit"} also answers its file (profile_file):
// bench/op_compare.py reads it.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

const [workdir, moduleDir, modelFile = 'model.onnx', tag = 'ort'] = process.argv.slice(2);
const ort = require(path.join(moduleDir, 'onnxruntime-node'));
const spec = JSON.parse(fs.readFileSync(path.join(workdir, 'spec.json'), 'utf8'));

function reply(obj) { process.stdout.write('@@ ' + JSON.stringify(obj) + '\n'); }

function loadInput(inp) {
  const buf = fs.readFileSync(path.join(workdir, inp.raw));
  const bytes = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
  const data = inp.dtype === 'float32' ? new Float32Array(bytes) : new BigInt64Array(bytes);
  return new ort.Tensor(inp.dtype === 'float32' ? 'float32' : 'int64', data, inp.shape);
}

async function main() {
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(path.join(workdir, modelFile), {
    intraOpNumThreads: spec.threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    ...(spec.ort_profile ? { enableProfiling: true, profileFilePrefix: spec.ort_profile } : {}),
  });
  const compile_s = Number(process.hrtime.bigint() - t0) / 1e9;
  const feeds = {};
  spec.inputs.forEach((inp, i) => { feeds[session.inputNames[i]] = loadInput(inp); });
  const t1 = process.hrtime.bigint();
  const out = await session.run(feeds);
  const first_s = Number(process.hrtime.bigint() - t1) / 1e9;
  const files = [];
  session.outputNames.forEach((name, i) => {
    const d = out[name].data;
    const file = `out-${tag}-${i}.raw`;
    fs.writeFileSync(path.join(workdir, file), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    files.push({ file, dtype: out[name].type, shape: out[name].dims });
  });
  reply({ ready: true, compile_s, first_call_s: first_s, outputs: files });
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const cmd = JSON.parse(line);
    if (cmd.cmd === 'run') {
      const times = [];
      for (let i = 0; i < cmd.n; ++i) {
        const s = process.hrtime.bigint();
        await session.run(feeds);
        times.push(Number(process.hrtime.bigint() - s) / 1e9);
      }
      reply({ times });
    } else if (cmd.cmd === 'quit') {
      // VmHWM, not resourceUsage().maxRSS: Linux carries the parent's peak across fork and exec.
      const hwm = /VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
      const rss = hwm ? Number(hwm[1]) : process.resourceUsage().maxRSS;
      if (spec.ort_profile) {
        // endProfiling writes the file; the name has a time stamp, so take the newest with the prefix
        session.endProfiling();
        const dir = path.dirname(spec.ort_profile);
        const base = path.basename(spec.ort_profile);
        const files = fs.readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json'))
          .map((f) => path.join(dir, f)).sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
        reply({ maxrss_kib: rss, profile_file: files.length ? files[0] : null });
      } else {
        reply({ maxrss_kib: rss });
      }
      process.exit(0);
    }
  }
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
