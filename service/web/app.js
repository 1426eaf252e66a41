'use strict';
// The operator's page: the cameras as the service's /api/stream says them each second
// (Server-Sent Events; the browser reconnects by itself), a picture a camera from
// /snapshot/NAME, loaded again when the camera has a newer one.

const cards = new Map();  // camera name -> its card's elements

function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function card(name) {
  if (cards.has(name)) return cards.get(name);
  const root = element('article', 'camera');
  root.dataset.camera = name;
  const title = element('h2');
  title.append(element('span', 'name', name));
  const state = element('span', 'state');
  title.append(state);
  const picture = element('img', 'snapshot');
  picture.alt = 'the latest picture of ' + name;
  const facts = element('div', 'facts');
  const error = element('div', 'error');
  const counts = element('table', 'counts');
  root.append(title, picture, facts, error, counts);
  document.getElementById('cameras').append(root);
  const parts = {root, state, picture, facts, error, counts, shown: 0, loading: false};
  picture.addEventListener('load', () => { parts.loading = false; });
  picture.addEventListener('error', () => { parts.loading = false; });
  cards.set(name, parts);
  return parts;
}

function showPicture(name, parts, number) {
  // One load at a time: a slow link shows fewer pictures, never a queue of them.
  if (!number || number === parts.shown || parts.loading) return;
  parts.loading = true;
  parts.shown = number;
  parts.picture.src = 'snapshot/' + encodeURIComponent(name) + '?n=' + number;
}

function showCounts(table, camera) {
  table.replaceChildren();
  const lines = Object.entries(camera.lines || {});
  if (lines.length === 0 && (camera.occupancy || []).length === 0) return;
  const head = table.createTHead().insertRow();
  head.append(element('th', '', 'line'), element('th', 'number', 'in'),
              element('th', 'number', 'out'));
  const body = table.createTBody();
  for (const [line, counts] of lines) {
    const row = body.insertRow();
    row.dataset.line = line;
    row.append(element('td', '', line), element('td', 'number in', counts.in),
               element('td', 'number out', counts.out));
    // The line's counts by class: a row a label, in and out.
    const byLabel = new Map();
    for (const c of (camera.crossings || []).filter((c) => c.line === line && c.label)) {
      if (!byLabel.has(c.label)) byLabel.set(c.label, {in: 0, out: 0});
      byLabel.get(c.label)[c.direction] = c.count;
    }
    for (const [label, n] of byLabel) {
      const byClass = body.insertRow();
      byClass.className = 'by-class';
      byClass.dataset.label = label;
      byClass.append(element('td', '', label), element('td', 'number', n.in),
                     element('td', 'number', n.out));
    }
  }
  for (const z of camera.occupancy || []) {
    const row = body.insertRow();
    row.dataset.zone = z.zone;
    row.append(element('td', '', z.zone + (z.label ? ' ' + z.label : '')),
               element('td', 'number', z.objects), element('td', '', 'inside'));
  }
}

function showEvents(cameras) {
  const all = [];
  for (const [name, camera] of Object.entries(cameras))
    for (const e of camera.events || []) all.push({camera: name, ...e});
  all.sort((a, b) => b.time - a.time || b.id - a.id);
  const list = document.getElementById('events');
  list.replaceChildren(...all.slice(0, 50).map((e) => {
    const item = element('li');
    const when = element('time', '', new Date(e.time * 1000).toLocaleTimeString());
    const what = `${e.camera}: ${e.label || 'object'} #${e.track} ` +
                 (e.kind === 'line-crossed' ? `crossed ${e.name} ${e.direction}`
                                            : `${e.kind === 'zone-entered' ? 'entered' : 'left'} ${e.name}`);
    item.append(when, document.createTextNode(what));
    return item;
  }));
}

function show(doc) {
  const cameras = doc.cameras || {};
  const names = Object.keys(cameras).sort();
  for (const [name, parts] of cards)
    if (!(name in cameras)) { parts.root.remove(); cards.delete(name); }
  let streaming = 0;
  for (const name of names) {
    const camera = cameras[name];
    const parts = card(name);
    document.getElementById('cameras').append(parts.root);  // in name order
    parts.state.textContent = camera.state;
    parts.state.className = 'state ' + camera.state;
    if (camera.state === 'streaming') streaming++;
    parts.facts.textContent =
        `${camera.host} · ${camera.gpu === 'cpu' ? 'CPU' : 'GPU ' + camera.gpu} · ` +
        `${camera.frames_per_second.toFixed(1)} frames/s · ${camera.reconnects} reconnects`;
    parts.error.textContent = camera.state === 'streaming' ? '' : camera.last_error;
    showPicture(name, parts, camera.snapshot);
    showCounts(parts.counts, camera);
  }
  document.getElementById('summary').textContent =
      `${names.length} cameras, ${streaming} streaming`;
  showEvents(cameras);
}

function connected(up) {
  const c = document.getElementById('connection');
  c.textContent = up ? 'live' : 'not connected';
  c.className = 'connection ' + (up ? 'up' : 'down');
}

const stream = new EventSource('api/stream');
stream.addEventListener('cameras', (e) => { connected(true); show(JSON.parse(e.data)); });
stream.addEventListener('error', () => connected(false));
