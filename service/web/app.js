'use strict';
// The operator's page: the cameras as the service's /api/stream says them each second
// (Server-Sent Events; the browser reconnects by itself), a picture a camera from
// /snapshot/NAME each second.

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
  const tools = element('div', 'tools');
  const draw = element('button', 'draw', 'draw a line');
  const answer = element('span', 'answer');
  tools.append(draw, answer);
  root.append(title, picture, facts, error, counts, tools);
  document.getElementById('cameras').append(root);
  const parts = {root, state, picture, facts, error, counts, answer, loading: false,
                 camera: null, ends: null};
  draw.addEventListener('click', () => {
    parts.ends = [];
    root.classList.add('drawing');
    say(parts, '', 'click the line\'s first end on the picture');
  });
  picture.addEventListener('click', (event) => drawn(name, parts, event));
  picture.addEventListener('load', () => {
    parts.loading = false;
    picture.classList.add('loaded');
  });
  picture.addEventListener('error', () => { parts.loading = false; });
  cards.set(name, parts);
  return parts;
}

function say(parts, kind, text) {
  parts.answer.className = 'answer ' + kind;
  parts.answer.textContent = text;
}

// Where a click fell on the picture, in [0, 1] of its width and height (the picture is fitted
// into its box, bars around it); outside it, beyond that range: the service says why not.
function pointOn(picture, event) {
  const box = picture.getBoundingClientRect();
  const scale = Math.min(box.width / picture.naturalWidth, box.height / picture.naturalHeight);
  const width = picture.naturalWidth * scale, height = picture.naturalHeight * scale;
  const round = (v) => Math.round(v * 1000) / 1000;
  return [round((event.clientX - box.left - (box.width - width) / 2) / width),
          round((event.clientY - box.top - (box.height - height) / 2) / height)];
}

// A line's two ends clicked, then its name: the camera's lines with it go to the service,
// which saves them in its config and applies them (or says why not).
async function drawn(name, parts, event) {
  if (!parts.ends || !parts.picture.naturalWidth) return;
  parts.ends.push(pointOn(parts.picture, event));
  if (parts.ends.length < 2) {
    say(parts, '', 'click its other end');
    return;
  }
  const [[x1, y1], [x2, y2]] = parts.ends;
  parts.ends = null;
  parts.root.classList.remove('drawing');
  const line = window.prompt('The new line\'s name (letters, digits, - and _):');
  if (!line) {
    say(parts, '', '');
    return;
  }
  const shapes = (parts.camera && parts.camera.shapes) || {};
  const lines = (shapes.lines ? shapes.lines + ';' : '') + `${line}:${x1},${y1},${x2},${y2}`;
  try {
    const reply = await fetch('api/cameras/' + encodeURIComponent(name) + '/lines', {
      method: 'POST',
      headers: {'Content-Type': 'application/json',
                'Authorization': 'Bearer ' + document.getElementById('key').value},
      body: JSON.stringify({lines}),
    });
    const said = await reply.json();
    if (reply.ok) say(parts, 'saved', 'saved: ' + said.saved);
    else say(parts, 'refused', 'refused: ' + said.error);
  } catch (failure) {
    say(parts, 'refused', 'not sent: ' + failure);
  }
}

// A picture a tick: asking for it is what keeps the camera making them (none while nobody
// looks); one load at a time, so a slow link shows fewer, never a queue of them.
function showPicture(name, parts) {
  if (parts.loading) return;
  parts.loading = true;
  parts.picture.src = 'snapshot/' + encodeURIComponent(name) + '?t=' + Date.now();
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
    parts.camera = camera;
    document.getElementById('cameras').append(parts.root);  // in name order
    parts.state.textContent = camera.state;
    parts.state.className = 'state ' + camera.state;
    if (camera.state === 'streaming') streaming++;
    parts.facts.textContent =
        `${camera.host} · ${camera.gpu === 'cpu' ? 'CPU' : 'GPU ' + camera.gpu} · ` +
        `${camera.frames_per_second.toFixed(1)} frames/s · ${camera.reconnects} reconnects`;
    parts.error.textContent = camera.state === 'streaming' ? '' : camera.last_error;
    showPicture(name, parts);
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

// The key stays with this browser tab only.
const key = document.getElementById('key');
key.value = sessionStorage.getItem('cudanms-key') || '';
key.addEventListener('change', () => sessionStorage.setItem('cudanms-key', key.value));
