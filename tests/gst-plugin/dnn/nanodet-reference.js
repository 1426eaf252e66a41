// The reference the NanoDet tests compare with: NanoDet-g's TF.js graph run by TensorFlow.js in
// pure JavaScript (the runtime it was published for), and NanoDet's own rules applied to its
// outputs, written here from RangiLyu/nanodet (gfl_head.py get_bboxes_single, nms.py
// multiclass_nms, warp.py warp_boxes), independently of the element's C++.
//
//   node nanodet-reference.js TFJS_DIR MODEL_DIR OUT_DIR THRESHOLDS NAME:WIDTH:HEIGHT:RGB_FILE...
//
// For each photo (raw RGB bytes, row by row): OUT_DIR/NAME.input (the input tensor, float32
// [1, 3, 416, 416]), NAME.outputs (the six outputs as float32, scores of strides 8, 16, 32,
// then box distributions of strides 8, 16, 32) and, for each of the score thresholds (',' between
// them, e.g. 0.05,0.35), NAME.THRESHOLD.json: the boxes NanoDet keeps,
// [[x1, y1, x2, y2, score, class], ...] in photo pixels, best first.
//
// Letterbox: the photo scaled by r = min(416 / w, 416 / h) to round(w r) x round(h r) (ties to
// even) with bilinear interpolation at pixel centres (tf.image.resizeBilinear, half-pixel
// centres), placed at ((416 - that) / 2 rounded down), black around: the element's rule, which
// is NanoDet's warp (centre on centre, black around) up to where a pixel's edge falls.
'use strict';
const fs = require('fs');
const path = require('path');

const [tfjsDir, modelDir, outDir, thresholdsText, ...photos] = process.argv.slice(2);
const modules = path.join(tfjsDir, 'node_modules', '@tensorflow');
const tf = require(path.join(modules, 'tfjs-core'));
require(path.join(modules, 'tfjs-backend-cpu'));
const tfc = require(path.join(modules, 'tfjs-converter'));

const INPUT = 416;
const STRIDES = [8, 16, 32];
const CLASSES = 80;
const BINS = 11;
const MEAN_BGR = [103.53, 116.28, 123.675];
const STD_BGR = [57.375, 57.12, 58.395];

function roundHalfEven(v) {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

function letterbox(w, h) {
  const r = Math.min(INPUT / w, INPUT / h);
  const sw = Math.min(INPUT, Math.max(1, roundHalfEven(w * r)));
  const sh = Math.min(INPUT, Math.max(1, roundHalfEven(h * r)));
  return { sw, sh, padX: Math.floor((INPUT - sw) / 2), padY: Math.floor((INPUT - sh) / 2) };
}

// The photo as NanoDet's input: letterboxed, BGR, (x - mean) / std, NCHW.
function inputOf(rgb, w, h, box) {
  return tf.tidy(() => {
    const image = tf.tensor4d(Float32Array.from(rgb), [1, h, w, 3]);
    const scaled = tf.image.resizeBilinear(image, [box.sh, box.sw], false, true);
    const placed = tf.pad(scaled, [[0, 0], [box.padY, INPUT - box.sh - box.padY],
      [box.padX, INPUT - box.sw - box.padX], [0, 0]]);
    const bgr = tf.reverse(placed, 3);
    const normal = tf.div(tf.sub(bgr, tf.tensor1d(MEAN_BGR)), tf.tensor1d(STD_BGR));
    return tf.transpose(normal, [0, 3, 1, 2]);
  });
}

// The integral of one side's distribution: softmax, then the expected bin.
function distance(logits, at) {
  let top = -Infinity;
  for (let k = 0; k < BINS; k++) top = Math.max(top, logits[at + k]);
  let sum = 0;
  let weighted = 0;
  for (let k = 0; k < BINS; k++) {
    const e = Math.exp(logits[at + k] - top);
    sum += e;
    weighted += e * k;
  }
  return weighted / sum;
}

function iou(a, b) {
  const w = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]));
  const h = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
  const inter = w * h;
  const union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return union > 0 ? inter / union : 0;
}

// get_bboxes_single: per level, the 1000 cells of highest best score (nms_pre), their boxes
// clipped to the input; multiclass_nms: every (cell, class) scoring above the threshold,
// torchvision's nms per class at IoU 0.6, the kept ones by score, at most 100.
function nanodetBoxes(scores, boxes, threshold) {
  const candidates = [];
  for (let level = 0; level < 3; level++) {
    const stride = STRIDES[level];
    const cells = Math.ceil(INPUT / stride);
    const s = scores[level];
    const d = boxes[level];
    let order = [...Array(cells * cells).keys()];
    const best = order.map((i) => Math.max(...s.subarray(i * CLASSES, (i + 1) * CLASSES)));
    if (order.length > 1000) order = order.sort((a, b) => best[b] - best[a] || a - b).slice(0, 1000);
    order.sort((a, b) => a - b);
    for (const i of order) {
      const cx = ((i % cells) + 0.5) * stride;
      const cy = (Math.floor(i / cells) + 0.5) * stride;
      const at = i * 4 * BINS;
      const clip = (v) => Math.min(Math.max(v, 0), INPUT);
      const box = [clip(cx - distance(d, at) * stride), clip(cy - distance(d, at + BINS) * stride),
        clip(cx + distance(d, at + 2 * BINS) * stride), clip(cy + distance(d, at + 3 * BINS) * stride)];
      for (let c = 0; c < CLASSES; c++) {
        if (s[i * CLASSES + c] > threshold) candidates.push({ box, score: s[i * CLASSES + c], c });
      }
    }
  }
  const kept = [];
  for (let c = 0; c < CLASSES; c++) {
    const mine = candidates.filter((k) => k.c === c).sort((a, b) => b.score - a.score);
    const alive = [];
    for (const k of mine) {
      if (alive.every((a) => iou(a.box, k.box) <= 0.6)) alive.push(k);
    }
    kept.push(...alive);
  }
  return kept.sort((a, b) => b.score - a.score).slice(0, 100);
}

async function main() {
  await tf.setBackend('cpu');
  const json = JSON.parse(fs.readFileSync(path.join(modelDir, 'nanodet.json')));
  const bin = fs.readFileSync(path.join(modelDir, 'nanodet.bin'));
  const model = await tfc.loadGraphModel({
    load: async () => ({
      modelTopology: json.modelTopology,
      weightSpecs: json.weightsManifest[0].weights,
      weightData: bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength),
      signature: json.signature,
    }),
  });
  // The outputs by shape: scores [1, N, 80] and distributions [1, N, 44], finest stride first.
  const names = Object.keys(json.signature.outputs).map((n) => n.split(':')[0]);
  for (const spec of photos) {
    const [name, wText, hText, file] = spec.split(':');
    const w = Number(wText);
    const h = Number(hText);
    const box = letterbox(w, h);
    const input = inputOf(fs.readFileSync(file), w, h, box);
    const outputs = model.execute(input, names);
    const byShape = (width) => outputs.filter((o) => o.shape[2] === width)
      .sort((a, b) => b.shape[1] - a.shape[1]).map((o) => o.dataSync());
    const scores = byShape(CLASSES);
    const boxes = byShape(4 * BINS);
    fs.writeFileSync(path.join(outDir, name + '.input'), Buffer.from(input.dataSync().buffer));
    fs.writeFileSync(path.join(outDir, name + '.outputs'),
      Buffer.concat([...scores, ...boxes].map((a) => Buffer.from(a.buffer))));
    for (const threshold of thresholdsText.split(',')) {
      const kept = nanodetBoxes(scores, boxes, Number(threshold)).map((k) => {
        // warp_boxes: the input box back through the letterbox, clipped to the photo.
        const x = (v) => Math.min(Math.max((v - box.padX) * w / box.sw, 0), w);
        const y = (v) => Math.min(Math.max((v - box.padY) * h / box.sh, 0), h);
        return [x(k.box[0]), y(k.box[1]), x(k.box[2]), y(k.box[3]), k.score, k.c];
      });
      fs.writeFileSync(path.join(outDir, name + '.' + threshold + '.json'), JSON.stringify(kept));
    }
    tf.dispose([input, ...outputs]);
  }
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
