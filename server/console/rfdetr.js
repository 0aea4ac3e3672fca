// The RF-DETR form: a picture (chosen, dropped or the sample) and a
// threshold go to POST /predict; the answer's boxes are drawn over the
// picture, listed in the table, and the request is shown as curl.
import {
  $, postJSON, showError, clearError, readPicture, sampleBlob, enableDrop,
  showCurl, base64Arg, fillFacts, ms, svgEl,
} from './console.js';

const form = $('rfdetr-form');
const slider = $('threshold');
let picture = null; // {name, base64, url, bytes}
let sent = 0; // requests sent; only the latest one's answer is drawn
let timer = 0;

async function use(file, name) {
  clearError();
  if (picture) URL.revokeObjectURL(picture.url);
  picture = null;
  try {
    picture = await readPicture(file, name);
  } catch (e) {
    showError(0, `cannot read ${name}: ${e.message}`);
    return;
  }
  const img = $('shown');
  img.src = picture.url;
  img.alt = `The picture ${name}`;
  img.hidden = false;
  predict();
}

async function predict() {
  if (!picture) return;
  const threshold = Number(slider.value);
  const body = JSON.stringify({ image: picture.base64, threshold });
  const mine = ++sent;
  form.dataset.busy = 'true';
  const res = await postJSON('predict', body);
  if (mine !== sent) return; // a newer request is on its way
  delete form.dataset.busy;
  showCurl('predict', `{"image":"%s","threshold":${threshold}}`, [base64Arg(picture)], [picture], body);
  const result = $('result');
  if (!res.ok) {
    showError(res.status, res.detail);
    draw(null, threshold);
    $('caption').textContent = `${picture.name}: no detections (the request failed).`;
    fillFacts($('timings'), [['round trip', ms(res.ms)]]);
    result.dataset.drawn = String(mine);
    return;
  }
  clearError();
  draw(res.json, threshold);
  const t = res.json.timing_ms;
  fillFacts($('timings'), [
    ['decode', ms(t.decode)], ['preprocess', ms(t.preprocess)], ['inference', ms(t.inference)],
    ['postprocess', ms(t.postprocess)], ['server total', ms(t.total)], ['round trip', ms(res.ms)],
  ]);
  result.dataset.drawn = String(mine);
}

// draw puts one box per detection over the picture and a row in the table.
function draw(answer, threshold) {
  const svg = $('boxes');
  const rows = $('detections').tBodies[0];
  svg.replaceChildren();
  rows.replaceChildren();
  const result = $('result');
  result.dataset.threshold = String(threshold);
  if (!answer) {
    svg.toggleAttribute('hidden', true); // an SVG element has no .hidden property
    $('shown').hidden = true;
    return;
  }
  const { width, height } = answer.image_size;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.toggleAttribute('hidden', false);
  // Labels stay readable whatever the picture's size on screen.
  const shown = $('shown').getBoundingClientRect().width || width;
  const font = Math.max(10, 15 * (width / shown));
  answer.detections.forEach((d, i) => {
    const [x1, y1, x2, y2] = d.box;
    const g = svgEl('g', { class: `c${d.label_id % 8}` });
    const rect = svgEl('rect', {
      x: x1, y: y1, width: Math.max(0, x2 - x1), height: Math.max(0, y2 - y1),
      'data-label': d.label, 'data-score': d.score,
    });
    const title = svgEl('title');
    title.textContent = `${d.label} ${d.score.toFixed(2)}`;
    rect.append(title);
    const text = svgEl('text', { x: x1 + 4, y: Math.max(font, y1 + font + 2), 'font-size': font });
    text.textContent = `${d.label} ${d.score.toFixed(2)}`;
    g.append(rect, text);
    svg.append(g);

    const tr = rows.insertRow();
    const cells = [String(i + 1), d.label, d.score.toFixed(3), d.box.map((v) => v.toFixed(1)).join(', ')];
    cells.forEach((c, k) => {
      const td = tr.insertCell();
      td.textContent = c;
      if (k === 2) td.className = 'num';
    });
    const sw = document.createElement('span');
    sw.className = `swatch c${d.label_id % 8}`;
    tr.cells[1].prepend(sw);
  });
  const n = answer.num_detections;
  $('caption').textContent = `${picture.name}, ${width} × ${height} px: ${n} detection${n === 1 ? '' : 's'} at threshold ${threshold.toFixed(2)}.`;
}

$('picture').addEventListener('change', (e) => {
  const f = e.target.files[0];
  if (f) use(f, f.name);
});
enableDrop($('drop'), (f) => use(f, f.name));
$('use-sample').addEventListener('click', async () => {
  try {
    await use(await sampleBlob(), 'sample.png');
  } catch (e) {
    showError(0, e.message);
  }
});

// The slider shows its value at once and asks the server again once it
// rests (arrow keys fire a change per press).
slider.addEventListener('input', () => {
  $('threshold-value').value = Number(slider.value).toFixed(2);
});
slider.addEventListener('change', () => {
  clearTimeout(timer);
  timer = setTimeout(predict, 150);
});
