// What every console page shares: the status section's refresh, requests to
// this server and their errors, pictures read as base64, and the request
// shown as a curl command. Hand-written, no library; every request goes to
// the page's own origin.

export const $ = (id) => document.getElementById(id);

// Reload the status section every few seconds (the page works without it:
// the section is rendered by the server). A page loaded while the model was
// starting reloads itself once it is ready, to get the form.
const REFRESH_MS = 5000;
const startedAs = $('status')?.dataset.state;

// refreshStatus fetches the status section again and puts it in place;
// postJSON calls it after each request, so the numbers include it at once.
export async function refreshStatus() {
  const current = $('status');
  if (!current) return;
  try {
    const r = await fetch('console/status', { cache: 'no-store' });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    const t = document.createElement('template');
    t.innerHTML = (await r.text()).trim();
    const fresh = t.content.firstElementChild;
    if (!fresh || fresh.id !== 'status') return;
    // Keep what the reader opened.
    const open = current.querySelector('details')?.open;
    if (open) fresh.querySelector('details').open = true;
    current.replaceWith(fresh);
    if (startedAs === 'starting' && fresh.dataset.state !== 'starting' && !$('try')) location.reload();
  } catch (e) {
    const state = $('state');
    if (state) {
      state.textContent = 'not answering';
      state.className = 'state state-hung';
    }
  }
}
setInterval(refreshStatus, REFRESH_MS);

// postJSON sends body (a JSON string) to path and returns {ok, status,
// json, detail, ms}: detail is the server's error message when !ok.
export async function postJSON(path, body) {
  const t0 = performance.now();
  let r;
  try {
    r = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  } catch (e) {
    return { ok: false, status: 0, detail: `the request did not reach the server: ${e.message}`, ms: performance.now() - t0 };
  }
  const text = await r.text();
  const ms = performance.now() - t0;
  refreshStatus();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: the detail is the text itself
  }
  if (r.ok) return { ok: true, status: r.status, json, ms };
  return { ok: false, status: r.status, detail: errorDetail(json, text), ms };
}

// errorDetail is the server's message: FastAPI's {"detail": "…"} or its
// list of field errors {"detail": [{loc, msg}, …]}.
function errorDetail(json, text) {
  const d = json && json.detail;
  if (typeof d === 'string') return d;
  if (Array.isArray(d)) return d.map((e) => `${(e.loc || []).join('.')}: ${e.msg}`).join('\n');
  return text.trim() || '(empty answer)';
}

export function showError(status, detail) {
  const el = $('error');
  el.replaceChildren();
  const head = document.createElement('strong');
  head.textContent = status ? `The server answered ${status}:` : 'No answer:';
  el.append(head, document.createTextNode(detail));
  el.hidden = false;
}

export function clearError() {
  const el = $('error');
  el.hidden = true;
  el.replaceChildren();
}

// readPicture reads a File or Blob as {name, base64, url, bytes}; url
// shows it. Uint8Array.toBase64 where the browser has it (a 50 MB file in
// a blink), a data: URL otherwise.
export async function readPicture(file, name) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const base64 = bytes.toBase64 ? bytes.toBase64() : await dataURLBase64(file);
  return { name, base64, url: URL.createObjectURL(file), bytes: file.size };
}

function dataURLBase64(file) {
  return new Promise((resolve, reject) => {
    const fr = new FileReader();
    fr.onerror = () => reject(fr.error);
    fr.onload = () => {
      const s = String(fr.result);
      resolve(s.slice(s.indexOf(',') + 1));
    };
    fr.readAsDataURL(file);
  });
}

// sampleBlob is the server's sample picture.
export async function sampleBlob() {
  const r = await fetch('console/sample.png');
  if (!r.ok) throw new Error(`the sample picture: HTTP ${r.status}`);
  return r.blob();
}

// enableDrop makes a label accept a dropped file, as its input would.
export function enableDrop(label, onFile) {
  label.addEventListener('dragover', (e) => {
    e.preventDefault();
    label.classList.add('over');
  });
  label.addEventListener('dragleave', () => label.classList.remove('over'));
  label.addEventListener('drop', (e) => {
    e.preventDefault();
    label.classList.remove('over');
    const f = e.dataTransfer.files[0];
    if (f) onFile(f);
  });
}

// shellQuote quotes s for a POSIX shell.
export function shellQuote(s) {
  return `'${String(s).replace(/'/g, `'\\''`)}'`;
}

// showCurl shows a runnable command: printf builds the JSON body around the
// pictures' base64 (format holds the JSON with %s where each arg goes),
// curl sends it to path (relative to the page, which may sit behind a
// proxy's prefix). The sample picture is downloaded first; files the reader
// chose are named as they were.
export function showCurl(path, format, args, pictures, body) {
  const at = (p) => new URL(p, location.href).href;
  const lines = [];
  if (pictures.some((p) => p.name === 'sample.png')) lines.push(`curl -s -o sample.png ${at('console/sample.png')}`);
  lines.push(`printf ${shellQuote(format)} \\\n    ${args.join(' \\\n    ')} |`);
  lines.push(`  curl -s ${at(path)} -H 'Content-Type: application/json' --data-binary @-`);
  $('curl').textContent = lines.join('\n');
  const link = $('body-link');
  const old = link.querySelector('a');
  if (old) URL.revokeObjectURL(old.href);
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([body], { type: 'application/json' }));
  a.download = 'request.json';
  a.textContent = 'the exact body sent (request.json)';
  link.replaceChildren('Or download ', a, `, ${body.length.toLocaleString()} bytes, and send it with --data-binary @request.json.`);
}

// base64Arg is the shell argument that prints a picture's base64.
export function base64Arg(p) {
  return `"$(base64 -w0 ${shellQuote(p.name)})"`;
}

// fill replaces a <dl>'s rows with [label, value] pairs.
export function fillFacts(dl, rows) {
  dl.replaceChildren();
  for (const [k, v] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = v;
    dl.append(dt, dd);
  }
}

// ms formats milliseconds like the server's pages do.
export function ms(v) {
  const a = Math.abs(v);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  return `${v.toFixed(digits)} ms`;
}

export const SVG = 'http://www.w3.org/2000/svg';

export function svgEl(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}
