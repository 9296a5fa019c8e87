#!/usr/bin/env node
// ort_run.js: run an ONNX model on ONNX Runtime (CPU, onnxruntime-node) with
// .npy inputs and write every output as a .npy file. kiln's golden reference
// for whole models: no C headers ship for ONNX Runtime here, so kiln talks to
// it through this script (see README.md next to it).
//
//   node ort_run.js MODEL.onnx --input NAME=FILE.npy ... --output-dir DIR
//                   [--threads N] [--no-optimize] [--repeat N] [--profile PREFIX]
//   node ort_run.js MODEL.onnx --list-io
//
// Output file names: see sanitizeName() / outputFileNames() below; kiln's
// `kiln run --output-dir` applies the same rule.
//
// Exit status: 0 on success, 1 on a run-time error (bad model, bad input,
// ORT failure), 2 on a usage error. Every error is one clear line on stderr.

'use strict';

const fs = require('fs');
const path = require('path');

const USAGE = `usage: ort_run.js MODEL.onnx [--input NAME=FILE.npy]... --output-dir DIR
                  [--threads N] [--no-optimize] [--repeat N] [--quiet]
                  [--profile PREFIX]
       ort_run.js MODEL.onnx --list-io

  --input NAME=FILE.npy  feed model input NAME from FILE.npy (repeat per input);
                         NAME is split off at the first '='. A bare FILE.npy
                         feeds the model inputs in declaration order.
  --output-dir DIR       write every model output to DIR/<sanitized name>.npy
                         (created if missing), and DIR/manifest.json mapping
                         the original output names to their files
  --threads N            intra-op threads (default: ORT's default, all cores);
                         inter-op threads are always 1 (sequential execution)
  --no-optimize          graphOptimizationLevel 'disabled' (default 'all')
  --repeat N             after the first run, time N more runs; prints
                         'time_ms min=.. median=.. mean=..' on stderr
  --quiet                do not print the per-output lines on stdout
  --profile PREFIX       ORT's profiler on: per-node times of every run as a
                         Chrome trace, PREFIX_<date>.json (bench/layer_compare.py)
  --list-io              print the model's inputs and outputs and exit

Prints one line per output on stdout: '<name> <dtype> [d0,d1,...]'.
dtypes: f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool str`;

class UsageError extends Error {}
class RunError extends Error {}

// ---------------------------------------------------------------------------
// dtypes: ORT tensor type <-> short name <-> numpy descr <-> typed array
// ---------------------------------------------------------------------------

// kind/size describe the numpy descr ('<' + kind + size, '|' for 1 byte).
const DTYPES = [
  { short: 'f16', ort: 'float16', kind: 'f', size: 2, Array: Uint16Array },
  { short: 'f32', ort: 'float32', kind: 'f', size: 4, Array: Float32Array },
  { short: 'f64', ort: 'float64', kind: 'f', size: 8, Array: Float64Array },
  { short: 'i8', ort: 'int8', kind: 'i', size: 1, Array: Int8Array },
  { short: 'i16', ort: 'int16', kind: 'i', size: 2, Array: Int16Array },
  { short: 'i32', ort: 'int32', kind: 'i', size: 4, Array: Int32Array },
  { short: 'i64', ort: 'int64', kind: 'i', size: 8, Array: BigInt64Array },
  { short: 'u8', ort: 'uint8', kind: 'u', size: 1, Array: Uint8Array },
  { short: 'u16', ort: 'uint16', kind: 'u', size: 2, Array: Uint16Array },
  { short: 'u32', ort: 'uint32', kind: 'u', size: 4, Array: Uint32Array },
  { short: 'u64', ort: 'uint64', kind: 'u', size: 8, Array: BigUint64Array },
  { short: 'bool', ort: 'bool', kind: 'b', size: 1, Array: Uint8Array },
];
const BY_ORT = new Map(DTYPES.map((d) => [d.ort, d]));
const BY_DESCR = new Map(DTYPES.map((d) => [d.kind + d.size, d]));

function shortType(ortType) {
  if (ortType === 'string') return 'str';
  const d = BY_ORT.get(ortType);
  return d ? d.short : ortType;
}

// ---------------------------------------------------------------------------
// .npy reader / writer (format versions 1.0, 2.0 and 3.0; little-endian out)
// ---------------------------------------------------------------------------

const NPY_MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

function product(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

// Parses the header dict numpy writes, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }
function parseNpyHeader(text, file) {
  const bad = (what) => new RunError(`${file}: bad .npy header (${what}): ${text.trim()}`);
  const descr = /['"]descr['"]\s*:\s*['"]([^'"]+)['"]/.exec(text);
  const fortran = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(text);
  const shape = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(text);
  if (!descr) throw bad("no 'descr'");
  if (!fortran) throw bad("no 'fortran_order'");
  if (!shape) throw bad("no 'shape'");
  const dims = shape[1]
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      if (!/^\d+L?$/.test(s)) throw bad(`dimension '${s}'`);
      return Number.parseInt(s, 10);
    });
  return { descr: descr[1], fortranOrder: fortran[1] === 'True', shape: dims };
}

// Reorders Fortran-order (column-major) elements into C order.
function fortranToC(src, shape) {
  const n = product(shape);
  const dst = new src.constructor(n);
  const nd = shape.length;
  const fstride = new Array(nd);
  let s = 1;
  for (let i = 0; i < nd; i++) {
    fstride[i] = s;
    s *= shape[i];
  }
  const idx = new Array(nd).fill(0);
  for (let c = 0; c < n; c++) {
    let f = 0;
    for (let i = 0; i < nd; i++) f += idx[i] * fstride[i];
    dst[c] = src[f];
    for (let i = nd - 1; i >= 0; i--) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  return dst;
}

// Returns { type (ORT type), dims, data (typed array or string[]) }.
function readNpy(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    throw new RunError(`cannot read input file ${file}: ${e.message}`);
  }
  if (buf.length < 10 || !buf.subarray(0, 6).equals(NPY_MAGIC)) {
    throw new RunError(`${file}: not a .npy file (bad magic)`);
  }
  const major = buf[6];
  let headerLen, headerStart;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) throw new RunError(`${file}: truncated .npy header`);
    headerLen = buf.readUInt32LE(8);
    headerStart = 12;
  } else {
    throw new RunError(`${file}: unsupported .npy format version ${major}.${buf[7]}`);
  }
  const dataStart = headerStart + headerLen;
  if (dataStart > buf.length) throw new RunError(`${file}: truncated .npy header`);
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', headerStart, dataStart);
  const { descr, fortranOrder, shape } = parseNpyHeader(header, file);

  const m = /^([<>|=])([a-zA-Z])(\d+)$/.exec(descr);
  if (!m) throw new RunError(`${file}: unsupported dtype '${descr}'`);
  const [, order, kind, sizeStr] = m;
  const size = Number.parseInt(sizeStr, 10);
  const bigEndian = order === '>';
  const n = product(shape);

  if (kind === 'U') {
    // numpy unicode: `size` UTF-32 code units per element, NUL padded.
    const need = n * size * 4;
    if (buf.length - dataStart < need) {
      throw new RunError(`${file}: truncated data: ${buf.length - dataStart} bytes, need ${need}`);
    }
    let strs = new Array(n);
    for (let i = 0; i < n; i++) {
      let s = '';
      for (let j = 0; j < size; j++) {
        const off = dataStart + (i * size + j) * 4;
        const cp = bigEndian ? buf.readUInt32BE(off) : buf.readUInt32LE(off);
        if (cp === 0) break;
        s += String.fromCodePoint(cp);
      }
      strs[i] = s;
    }
    if (fortranOrder && shape.length > 1) strs = fortranToC(strs, shape);
    return { type: 'string', dims: shape, data: strs };
  }

  const dt = BY_DESCR.get(kind + size);
  if (!dt) throw new RunError(`${file}: unsupported dtype '${descr}'`);
  const need = n * size;
  if (buf.length - dataStart < need) {
    throw new RunError(`${file}: truncated data: ${buf.length - dataStart} bytes, need ${need} for shape (${shape.join(', ')}) ${descr}`);
  }
  // Copy into a fresh, aligned buffer; swap bytes when big-endian.
  const bytes = Buffer.from(buf.subarray(dataStart, dataStart + need));
  if (bigEndian && size > 1) {
    if (size === 2) bytes.swap16();
    else if (size === 4) bytes.swap32();
    else bytes.swap64();
  }
  let data = new dt.Array(bytes.buffer, bytes.byteOffset, n);
  if (data.byteOffset % size !== 0) data = new dt.Array(data); // realign
  if (fortranOrder && shape.length > 1) data = fortranToC(data, shape);
  if (dt.ort === 'bool') data = Uint8Array.from(data, (v) => (v ? 1 : 0));
  return { type: dt.ort, dims: shape, data };
}

function npyHeaderBytes(descr, shape) {
  const shapeStr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  // magic(6) + version(2) + length(2 or 4) + dict + padding + '\n', total % 64 == 0
  let version = 1;
  let prefix = 10;
  let total = Math.ceil((prefix + dict.length + 1) / 64) * 64;
  if (total - prefix > 0xffff) {
    version = 2;
    prefix = 12;
    total = Math.ceil((prefix + dict.length + 1) / 64) * 64;
  }
  const hlen = total - prefix;
  dict = dict.padEnd(hlen - 1, ' ') + '\n';
  const out = Buffer.alloc(prefix);
  NPY_MAGIC.copy(out, 0);
  out[6] = version;
  out[7] = 0;
  if (version === 1) out.writeUInt16LE(hlen, 8);
  else out.writeUInt32LE(hlen, 8);
  return Buffer.concat([out, Buffer.from(dict, 'latin1')]);
}

function npyBytes(type, dims, data) {
  if (!Array.isArray(dims) || dims.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new RunError(`output has an invalid shape [${dims}]`);
  }
  if (type === 'string') {
    const cps = data.map((s) => Array.from(s, (c) => c.codePointAt(0)));
    const width = Math.max(1, ...cps.map((c) => c.length));
    const body = Buffer.alloc(cps.length * width * 4);
    cps.forEach((c, i) => c.forEach((cp, j) => body.writeUInt32LE(cp, (i * width + j) * 4)));
    return Buffer.concat([npyHeaderBytes(`<U${width}`, dims), body]);
  }
  const dt = BY_ORT.get(type);
  if (!dt) throw new RunError(`output dtype '${type}' cannot be written as .npy`);
  if (os_is_big_endian()) throw new RunError('big-endian hosts are not supported');
  const descr = (dt.size === 1 ? '|' : '<') + dt.kind + dt.size;
  const n = product(dims);
  if (data.length !== n) {
    throw new RunError(`output data has ${data.length} elements, shape [${dims}] needs ${n}`);
  }
  const body = Buffer.from(data.buffer, data.byteOffset, n * dt.size);
  return Buffer.concat([npyHeaderBytes(descr, dims), body]);
}

function os_is_big_endian() {
  return require('os').endianness() === 'BE';
}

// ---------------------------------------------------------------------------
// Output file names
// ---------------------------------------------------------------------------

// THE RULE (kiln's `kiln run --output-dir` implements the same one):
//  1. Every byte of the output name's UTF-8 encoding outside [A-Za-z0-9._-]
//     becomes '_' (so 'é', two bytes in UTF-8, becomes '__'). An empty name
//     becomes '_'.
//  2. Outputs are named in the model's output order; if the sanitized name is
//     already taken by an earlier output, append '__2', then '__3', ... (the
//     first suffix that is free; the check is case-sensitive).
//  3. The file is DIR/<name>.npy.
// Examples: 'logits' -> logits.npy; '/model/Conv_1/output_0' ->
// _model_Conv_1_output_0.npy; 'x:0' -> x_0.npy.
function sanitizeName(name) {
  let s = '';
  for (const b of Buffer.from(name, 'utf8')) {
    const ok =
      (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x2e || b === 0x5f || b === 0x2d;
    s += ok ? String.fromCharCode(b) : '_';
  }
  return s.length === 0 ? '_' : s;
}

function outputFileNames(names) {
  const used = new Set();
  return names.map((name) => {
    const base = sanitizeName(name);
    let s = base;
    for (let k = 2; used.has(s); k++) s = `${base}__${k}`;
    used.add(s);
    return `${s}.npy`;
  });
}

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

function parseArgs(argv) {
  const a = { model: null, inputs: [], outputDir: null, threads: null, optimize: true, repeat: 0, listIo: false, quiet: false, profile: null };
  const takeValue = (i, flag) => {
    if (i + 1 >= argv.length) throw new UsageError(`${flag} needs a value`);
    return argv[i + 1];
  };
  const posInt = (v, flag, min) => {
    if (!/^\d+$/.test(v) || Number(v) < min) throw new UsageError(`${flag} needs an integer >= ${min}, got '${v}'`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inlineValue = null;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      // --flag=value form
      inlineValue = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const value = () => {
      if (inlineValue !== null) return inlineValue;
      const v = takeValue(i, arg);
      i++;
      return v;
    };
    switch (arg) {
      case '-h':
      case '--help':
        process.stdout.write(USAGE + '\n');
        process.exit(0);
      case '--input':
      case '-i': {
        const v = value();
        const k = v.indexOf('=');
        if (k === 0) throw new UsageError(`--input '${v}': empty input name`);
        a.inputs.push(k > 0 ? { name: v.slice(0, k), file: v.slice(k + 1) } : { name: null, file: v });
        break;
      }
      case '--output-dir':
      case '-o':
        a.outputDir = value();
        break;
      case '--threads':
        a.threads = posInt(value(), '--threads', 1);
        break;
      case '--repeat':
        a.repeat = posInt(value(), '--repeat', 0);
        break;
      case '--no-optimize':
        a.optimize = false;
        break;
      case '--profile':
        a.profile = value();
        break;
      case '--list-io':
        a.listIo = true;
        break;
      case '--quiet':
      case '-q':
        a.quiet = true;
        break;
      default:
        if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unknown option '${argv[i]}'`);
        if (a.model !== null) throw new UsageError(`more than one model given: '${a.model}' and '${arg}'`);
        a.model = arg;
    }
  }
  if (a.model === null) throw new UsageError('no model given');
  if (!a.listIo && a.outputDir === null) throw new UsageError('--output-dir is required');
  return a;
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    throw new RunError(
      `cannot load onnxruntime-node (${e.message.split('\n')[0]}); install it with: ` +
        `cd ${__dirname} && ONNXRUNTIME_NODE_INSTALL=skip npm ci`,
    );
  }
}

function describeMeta(meta) {
  if (!meta) return '?';
  if (!meta.isTensor) return 'non-tensor';
  // Symbolic dims print by name, unnamed ones as '?'. ORT reports both a
  // scalar and an unknown rank as [], so '[]' means either.
  const dims = meta.shape.map((d) => (d === '' || d === null || d === undefined || (typeof d === 'number' && d < 0) ? '?' : String(d)));
  return `${shortType(meta.type)} [${dims.join(',')}]`;
}

function metaOf(list, name) {
  return (list || []).find((m) => m.name === name);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(args.model)) throw new RunError(`model file not found: ${args.model}`);
  const ort = loadOrt();

  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: args.optimize ? 'all' : 'disabled',
    executionMode: 'sequential',
    interOpNumThreads: 1,
    logSeverityLevel: 3, // errors only
  };
  if (args.threads !== null) options.intraOpNumThreads = args.threads;
  if (args.profile !== null) {
    options.enableProfiling = true;
    options.profileFilePrefix = args.profile;
  }

  let session;
  try {
    session = await ort.InferenceSession.create(args.model, options);
  } catch (e) {
    throw new RunError(`cannot load model ${args.model}: ${e.message}`);
  }

  if (args.listIo) {
    for (const name of session.inputNames) {
      process.stdout.write(`input ${name} ${describeMeta(metaOf(session.inputMetadata, name))}\n`);
    }
    for (const name of session.outputNames) {
      process.stdout.write(`output ${name} ${describeMeta(metaOf(session.outputMetadata, name))}\n`);
    }
    return;
  }

  // Bind inputs.
  const feeds = {};
  let positional = 0;
  for (const inp of args.inputs) {
    let name = inp.name;
    if (name === null) {
      if (positional >= session.inputNames.length) {
        throw new RunError(`too many inputs: the model has ${session.inputNames.length} (${session.inputNames.join(', ')})`);
      }
      name = session.inputNames[positional++];
    }
    if (!session.inputNames.includes(name)) {
      throw new RunError(`model has no input '${name}'; its inputs are: ${session.inputNames.join(', ')}`);
    }
    if (name in feeds) throw new RunError(`input '${name}' given twice`);
    const t = readNpy(inp.file);
    const meta = metaOf(session.inputMetadata, name);
    if (meta && meta.isTensor && meta.type !== t.type) {
      throw new RunError(`input '${name}': model wants ${shortType(meta.type)}, ${inp.file} holds ${shortType(t.type)}`);
    }
    if (meta && meta.isTensor && meta.shape.length > 0) {
      const ok =
        meta.shape.length === t.dims.length &&
        meta.shape.every((d, k) => typeof d !== 'number' || d < 0 || d === t.dims[k]);
      if (!ok) {
        throw new RunError(`input '${name}': model wants shape [${meta.shape.join(',')}], ${inp.file} has [${t.dims.join(',')}]`);
      }
    }
    feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length > 0) {
    throw new RunError(`missing input(s): ${missing.map((n) => `${n} (${describeMeta(metaOf(session.inputMetadata, n))})`).join(', ')}`);
  }
  for (const name of session.outputNames) {
    const meta = metaOf(session.outputMetadata, name);
    if (meta && meta.isTensor === false) throw new RunError(`output '${name}' is not a tensor (sequence/map outputs are not supported)`);
  }

  // Run.
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    throw new RunError(`onnxruntime failed to run ${args.model}: ${e.message}`);
  }
  if (args.repeat > 0) {
    const times = [];
    for (let r = 0; r < args.repeat; r++) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((x, y) => x - y);
    const mean = times.reduce((x, y) => x + y, 0) / times.length;
    const median = times.length % 2 ? times[(times.length - 1) / 2] : (times[times.length / 2 - 1] + times[times.length / 2]) / 2;
    process.stderr.write(`time_ms min=${times[0].toFixed(3)} median=${median.toFixed(3)} mean=${mean.toFixed(3)} runs=${times.length}\n`);
  }

  if (args.profile !== null) session.endProfiling(); // writes the trace

  // Write outputs.
  try {
    fs.mkdirSync(args.outputDir, { recursive: true });
  } catch (e) {
    throw new RunError(`cannot create output directory ${args.outputDir}: ${e.message}`);
  }
  const files = outputFileNames(session.outputNames);
  const manifest = [];
  session.outputNames.forEach((name, k) => {
    const t = results[name];
    if (!t) throw new RunError(`onnxruntime returned no value for output '${name}'`);
    const dims = Array.from(t.dims, Number);
    let bytes;
    try {
      bytes = npyBytes(t.type, dims, t.data);
    } catch (e) {
      throw new RunError(`output '${name}': ${e.message}`);
    }
    const file = path.join(args.outputDir, files[k]);
    try {
      fs.writeFileSync(file, bytes);
    } catch (e) {
      throw new RunError(`cannot write ${file}: ${e.message}`);
    }
    manifest.push({ name, file: files[k], dtype: shortType(t.type), shape: dims });
    if (!args.quiet) process.stdout.write(`${name} ${shortType(t.type)} [${dims.join(',')}]\n`);
  });
  // manifest.json cannot clash with an output file: those all end in .npy.
  const lines = manifest.map((m) => '  ' + JSON.stringify(m));
  fs.writeFileSync(
    path.join(args.outputDir, 'manifest.json'),
    `{"model": ${JSON.stringify(args.model)},\n "outputs": [\n${lines.join(',\n')}\n]}\n`,
  );
}

module.exports = { readNpy, npyBytes, sanitizeName, outputFileNames };

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (e) => {
      if (e instanceof UsageError) {
        process.stderr.write(`ort_run.js: error: ${e.message} (see --help)\n`);
        process.exit(2);
      }
      const msg = e instanceof RunError ? e.message : e && e.stack ? e.stack : String(e);
      process.stderr.write(`ort_run.js: error: ${msg}\n`);
      process.exit(1);
    },
  );
}
