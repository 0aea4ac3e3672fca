// The pi0.5 form: camera pictures, a task prompt, an optional state and a
// noise seed go to POST /v1/actions/generations (SGLang's action API, JSON);
// the answer's action chunk is plotted, one line per action dimension over
// the horizon, the first 7 in colour.
import {
  $, postJSON, showError, clearError, readPicture, sampleBlob, enableDrop,
  showCurl, base64Arg, shellQuote, fillFacts, ms, svgEl,
} from './console.js';

const form = $('pi05-form');
const inputs = [...form.querySelectorAll('input[type=file][data-camera]')];
const pictures = new Array(inputs.length).fill(null);
const HIGHLIGHTED = 7;
let sent = 0;

async function setCamera(i, file, name) {
  clearError();
  if (pictures[i]) URL.revokeObjectURL(pictures[i].url);
  pictures[i] = null;
  try {
    pictures[i] = await readPicture(file, name);
  } catch (e) {
    showError(0, `cannot read ${name}: ${e.message}`);
    return;
  }
  const label = inputs[i].closest('label');
  let img = label.querySelector('img');
  if (!img) {
    img = document.createElement('img');
    img.className = 'thumb';
    label.append(img);
  }
  img.src = pictures[i].url;
  img.alt = `${inputs[i].dataset.camera}: ${name}`;
}

inputs.forEach((input, i) => {
  input.addEventListener('change', () => {
    const f = input.files[0];
    if (f) setCamera(i, f, f.name);
  });
  enableDrop(input.closest('label'), (f) => setCamera(i, f, f.name));
});

$('use-sample').addEventListener('click', async () => {
  try {
    const blob = await sampleBlob();
    await Promise.all(inputs.map((_, i) => setCamera(i, blob, 'sample.png')));
  } catch (e) {
    showError(0, e.message);
  }
});

// state parses the optional state: numbers separated by commas or blanks.
function state() {
  const text = $('robot-state').value.trim();
  if (!text) return null;
  return text.split(/[\s,]+/).map((s) => {
    const v = Number(s);
    if (s === '' || !Number.isFinite(v)) throw new Error(`state: ${JSON.stringify(s)} is not a number`);
    return v;
  });
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearError();
  // Frames go as a list in camera order, so a gap would shift the cameras.
  const last = pictures.findLastIndex((p) => p);
  const gap = pictures.slice(0, last + 1).findIndex((p) => !p);
  if (last < 0) {
    showError(0, 'give at least one camera picture (or use the sample)');
    return;
  }
  if (gap >= 0) {
    showError(0, `fill the cameras in order: ${inputs[gap].dataset.camera} is empty but ${inputs[last].dataset.camera} is not`);
    return;
  }
  let st;
  try {
    st = state();
  } catch (err) {
    showError(0, err.message);
    return;
  }
  const frames = pictures.slice(0, last + 1);
  const prompt = $('prompt').value;
  const seed = Number($('seed').value) || 0;
  const observation = { images: frames.map((p) => p.base64) };
  if (st) observation.state = st;
  const body = JSON.stringify({ input: { task: prompt, observation }, parameters: { seed } });
  const format = `{"input":{"task":%s,"observation":{"images":[${frames.map(() => '"%s"').join(',')}]${st ? `,"state":${JSON.stringify(st)}` : ''}}},"parameters":{"seed":${seed}}}`;
  const args = [shellQuote(JSON.stringify(prompt)), ...frames.map(base64Arg)];

  const mine = ++sent;
  $('generate').disabled = true;
  form.dataset.busy = 'true';
  const res = await postJSON('v1/actions/generations', body);
  if (mine !== sent) return;
  $('generate').disabled = false;
  delete form.dataset.busy;
  showCurl('v1/actions/generations', format, args, frames, body);
  if (!res.ok) {
    showError(res.status, res.detail);
    fillFacts($('timings'), [['round trip', ms(res.ms)]]);
    $('result').dataset.drawn = String(mine);
    return;
  }
  const action = res.json.data[0].action;
  plot(action.values);
  table(action.values);
  const t = res.json.timings || {};
  const rows = [['preprocess', t.preprocess_ms], ['vision', t.vision_ms], ['prefix', t.prefix_ms], ['denoise', t.denoise_ms],
    ['inference', t.inference_ms], ['server total', t.total_ms]].filter(([, v]) => v !== undefined).map(([k, v]) => [k, ms(v)]);
  rows.push(['round trip', ms(res.ms)]);
  fillFacts($('timings'), rows);
  const [h, d] = action.shape;
  $('caption').textContent = `The chunk: ${h} steps × ${d} action dimensions (${action.normalized ? 'normalized' : 'in robot units'}), ` +
    `${res.json.data[0].num_inference_steps} denoising steps, seed ${res.json.data[0].seed}. One line per dimension; dims 0–${Math.min(HIGHLIGHTED, d) - 1} in colour.`;
  $('result').dataset.drawn = String(mine);
});

// plot draws the chunk: x is the step of the horizon, y the value.
function plot(values) {
  const H = values.length;
  const D = values[0].length;
  const W = 1000, HT = 320, L = 52, R = 12, T = 12, B = 28;
  // y spans the values, rounded out to a tick step of 1, 2 or 5 × 10^k.
  let lo = Math.min(...values.flat());
  let hi = Math.max(...values.flat());
  const step = niceStep((hi - lo) / 4 || 1);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  if (hi === lo) hi = lo + step;
  const x = (t) => L + (H === 1 ? (W - L - R) / 2 : (t * (W - L - R)) / (H - 1));
  const y = (v) => T + ((hi - v) * (HT - T - B)) / (hi - lo);
  const svg = svgEl('svg', {
    class: 'chart', id: 'chunk', viewBox: `0 0 ${W} ${HT}`, role: 'img', 'aria-labelledby': 'chunk-t',
    'data-vmin': lo, 'data-vmax': hi, 'data-ytop': T, 'data-ybottom': HT - B,
  });
  const title = svgEl('title', { id: 'chunk-t' });
  title.textContent = `Action chunk: ${D} dimensions over ${H} steps, values from ${lo.toFixed(3)} to ${hi.toFixed(3)}`;
  svg.append(title);
  const decimals = Math.max(0, -Math.floor(Math.log10(step)));
  for (let v = lo; v <= hi + step / 2; v += step) {
    svg.append(svgEl('line', { class: v === lo ? 'axis' : 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    const label = svgEl('text', { x: L - 6, y: y(v), 'text-anchor': 'end', 'dominant-baseline': 'middle' });
    label.textContent = v.toFixed(decimals);
    svg.append(label);
  }
  const every = Math.max(1, Math.ceil(H / 10));
  for (let t = 0; t < H; t += every) {
    const label = svgEl('text', { x: x(t), y: HT - 8, 'text-anchor': 'middle' });
    label.textContent = `t${t}`;
    svg.append(label);
  }
  // The grey dimensions first, so the coloured ones stay on top.
  const order = [...Array(D).keys()].sort((a, b) => (a < HIGHLIGHTED) - (b < HIGHLIGHTED) || a - b);
  for (const d of order) {
    const points = values.map((row, t) => `${x(t).toFixed(2)},${y(row[d]).toFixed(2)}`).join(' ');
    const line = svgEl('polyline', { class: d < HIGHLIGHTED ? `line c${d}` : 'line faint', points, 'data-dim': d });
    const tt = svgEl('title');
    tt.textContent = `dim ${d}`;
    line.append(tt);
    svg.append(line);
  }
  const legend = document.createElement('ul');
  legend.className = 'legend';
  for (let d = 0; d < Math.min(HIGHLIGHTED, D); d++) {
    const li = document.createElement('li');
    li.className = `c${d}`;
    li.innerHTML = '<span class="swatch"></span>';
    li.append(`dim ${d}`);
    legend.append(li);
  }
  if (D > HIGHLIGHTED) {
    const li = document.createElement('li');
    li.textContent = `dims ${HIGHLIGHTED}–${D - 1} in grey`;
    legend.append(li);
  }
  $('plot').replaceChildren(svg, legend);
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
function niceStep(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= v);
}

// table lists the values, 4 decimals.
function table(values) {
  const t = document.createElement('table');
  t.id = 'chunk-values';
  const head = t.createTHead().insertRow();
  head.append(Object.assign(document.createElement('th'), { textContent: 'step', scope: 'col' }));
  values[0].forEach((_, d) => head.append(Object.assign(document.createElement('th'), { textContent: `dim ${d}`, scope: 'col', className: 'num' })));
  const body = t.createTBody();
  values.forEach((row, i) => {
    const tr = body.insertRow();
    tr.append(Object.assign(document.createElement('th'), { textContent: `t${i}`, scope: 'row' }));
    row.forEach((v) => Object.assign(tr.insertCell(), { textContent: v.toFixed(4), className: 'num' }));
  });
  $('values-table').replaceChildren(t);
}
