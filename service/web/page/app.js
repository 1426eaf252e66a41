'use strict';
// The operator's page: the cameras as the service's /api/stream says them each second
// (Server-Sent Events; the browser reconnects by itself; a fleet host's has the whole site's),
// a picture a camera from /snapshot/NAME each second, lines and zones drawn on the pictures.

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
  const frame = element('div', 'frame');
  const picture = element('img', 'snapshot');
  picture.alt = 'the latest picture of ' + name;
  // What is being drawn, over the picture: the SVG's box and viewBox fit it as the picture is.
  const sketch = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  sketch.classList.add('sketch');
  sketch.setAttribute('preserveAspectRatio', 'xMidYMid meet');
  frame.append(picture, sketch);
  const facts = element('div', 'facts');
  const error = element('div', 'error');
  const counts = element('table', 'counts');
  const tools = element('div', 'tools');
  const drawLine = element('button', 'draw', 'draw a line');
  const drawZone = element('button', 'draw-zone', 'draw a zone');
  const answer = element('span', 'answer');
  tools.append(drawLine, drawZone, answer);
  root.append(title, frame, facts, error, counts, tools);
  document.getElementById('cameras').append(root);
  const parts = {root, state, picture, sketch, facts, error, counts, answer, loading: false,
                 camera: null, drawing: null};
  drawLine.addEventListener('click', () => startDrawing(parts, 'line',
      'click the line\'s first end on the picture'));
  drawZone.addEventListener('click', () => startDrawing(parts, 'zone',
      'click the zone\'s corners on the picture; click the first again to close it'));
  picture.addEventListener('click', (event) => clicked(name, parts, event));
  sketch.addEventListener('click', (event) => clicked(name, parts, event));
  picture.addEventListener('load', () => {
    picture.classList.add('loaded');
    root.classList.add('pictured');  // something to draw on
  });
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

function startDrawing(parts, kind, hint) {
  parts.drawing = {kind, points: []};
  parts.root.classList.add('drawing');
  sketch(parts);
  say(parts, '', hint);
}

function stopDrawing(parts) {
  parts.drawing = null;
  parts.root.classList.remove('drawing');
  sketch(parts);
}

// The points clicked so far, over the picture.
function sketch(parts) {
  const svg = parts.sketch, picture = parts.picture;
  svg.replaceChildren();
  if (!parts.drawing || !picture.naturalWidth) return;
  const w = picture.naturalWidth, h = picture.naturalHeight;
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  const points = parts.drawing.points.map(([x, y]) => `${x * w},${y * h}`).join(' ');
  const shape = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
  shape.setAttribute('points', points);
  svg.append(shape);
  for (const [x, y] of parts.drawing.points) {
    const dot = document.createElementNS('http://www.w3.org/2000/svg', 'circle');
    dot.setAttribute('cx', x * w);
    dot.setAttribute('cy', y * h);
    dot.setAttribute('r', Math.max(w, h) / 120);
    svg.append(dot);
  }
}

// A click on the picture while drawing: a line is done at its second end, a zone when its first
// corner is clicked again (within 3 % of the picture) after at least three.
function clicked(name, parts, event) {
  const drawing = parts.drawing;
  if (!drawing || !parts.picture.naturalWidth) return;
  const point = pointOn(parts.picture, event);
  const points = drawing.points;
  const closes = drawing.kind === 'zone' && points.length >= 3 &&
      Math.hypot(point[0] - points[0][0], point[1] - points[0][1]) < 0.03;
  if (!closes) points.push(point);
  sketch(parts);
  if (drawing.kind === 'line' && points.length < 2) return say(parts, '', 'click its other end');
  if (drawing.kind === 'zone' && !closes) {
    return say(parts, '', points.length < 3 ? 'click its next corner'
                                            : 'click its next corner, or the first to close it');
  }
  stopDrawing(parts);
  const shapeName = window.prompt(`The new ${drawing.kind}'s name (letters, digits, - and _):`);
  if (!shapeName) return say(parts, '', '');
  const shapes = (parts.camera && parts.camera.shapes) || {};
  const change = drawing.kind === 'line'
      ? {lines: (shapes.lines ? shapes.lines + ';' : '') +
                `${shapeName}:${points[0][0]},${points[0][1]},${points[1][0]},${points[1][1]}`}
      : {zones: (shapes.zones ? shapes.zones + ';' : '') +
                `${shapeName}:` + points.map(([x, y]) => `${x},${y}`).join(' ')};
  save(name, parts, change);
}

// The camera's lines or zones with the new one go to the service, which saves them where the
// camera is configured (its file, or etcd) and applies them, or says why not.
async function save(name, parts, change) {
  try {
    const reply = await fetch('api/cameras/' + encodeURIComponent(name) + '/shapes', {
      method: 'POST',
      headers: {'Content-Type': 'application/json',
                'Authorization': 'Bearer ' + document.getElementById('key').value},
      body: JSON.stringify(change),
    });
    const said = await reply.json();
    if (reply.ok) say(parts, 'saved', 'saved: ' + said.saved);
    else say(parts, 'refused', 'refused: ' + said.error);
  } catch (failure) {
    say(parts, 'refused', 'not sent: ' + failure);
  }
}

// A picture a tick: asking for it is what keeps the camera making them (none while nobody
// looks); one load at a time, so a slow link shows fewer, never a queue of them. Loaded aside
// and shown once whole: a fetch that fails or is slow leaves the last picture up, to look at and
// to draw on.
function showPicture(name, parts) {
  if (parts.loading) return;
  parts.loading = true;
  const next = new Image();
  next.addEventListener('load', () => {
    parts.loading = false;
    parts.picture.src = next.src;  // from the cache, whole
  });
  next.addEventListener('error', () => { parts.loading = false; });
  next.src = 'snapshot/' + encodeURIComponent(name) + '?t=' + Date.now();
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
  for (const [zone, n] of Object.entries(camera.loitering || {})) {
    if (!n) continue;
    const row = body.insertRow();
    row.dataset.loitering = zone;
    row.append(element('td', '', zone), element('td', 'number', n),
               element('td', '', 'loitering'));
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
    // An event with a host is one of a host that answers no more, kept from its last answer.
    const what = eventText(e, e.camera) +
                 (e.host !== undefined ? ` (on ${e.host || 'a host'}, not answering)` : '');
    item.append(when, document.createTextNode(what));
    return item;
  }));
}

// An event's words, as the lists say it.
function eventText(e, camera) {
  return `${camera}: ${e.label || 'object'} #${e.track} ` +
         (e.kind === 'line-crossed' ? `crossed ${e.name} ${e.direction}`
          : e.kind === 'zone-loitering' ? `loitered in ${e.name}`
          : `${e.kind === 'zone-entered' ? 'entered' : 'left'} ${e.name}`);
}

// The history (/api/events, the [service] history key): a search, a page at a time, newest
// first; "older" asks for the page after the last one shown.
const search = {before: null, query: ''};  // the last search's query and its next page

function historyQuery() {
  const params = new URLSearchParams();
  const pick = (key, id) => {
    const value = document.getElementById(id).value.trim();
    if (value) params.set(key, value);
  };
  pick('camera', 'history-camera');
  pick('kind', 'history-kind');
  pick('label', 'history-label');
  const since = document.getElementById('history-since').value;  // local time, no zone
  if (since) params.set('since', String(new Date(since).getTime() / 1000));
  params.set('limit', '50');
  return params;
}

async function showHistory(more) {
  const answer = document.getElementById('history-answer');
  const list = document.getElementById('history');
  const older = document.getElementById('history-older');
  if (!more) search.query = historyQuery().toString();
  const params = new URLSearchParams(search.query);
  if (more && search.before !== null) params.set('before', String(search.before));
  let page;
  try {
    const response = await fetch('api/events?' + params);
    page = await response.json();
    if (!response.ok) throw new Error(page.error || response.statusText);
  } catch (error) {
    answer.textContent = String(error.message || error);
    older.hidden = true;
    return;
  }
  const items = page.events.map((e) => {
    const item = element('li');
    item.append(element('time', '', new Date(e.time * 1000).toLocaleString()),
                document.createTextNode(eventText(e, e.camera) +
                    (e.dwell ? ` after ${e.dwell.toFixed(1)} s` : '') +
                    (e.host ? ` (counted on ${e.host})` : '')));  // a fleet's shared history
    if (e.snapshot) {  // the [service] snapshots key: the event's frame
      const show = element('button', 'picture', 'picture');
      show.addEventListener('click', () => showEventPicture(e));
      item.append(' ', show);
    }
    if (e.clip) {  // the camera's clips key: the moments around it, cut from its own stream
      const play = element('button', 'clip', 'clip');
      play.addEventListener('click', () => playEventClip(e));
      item.append(' ', play);
    }
    return item;
  });
  if (more) list.append(...items); else list.replaceChildren(...items);
  if (!more) showChart(params);
  search.before = page.next_before;
  older.hidden = page.next_before === null;
  answer.textContent = list.children.length ? '' : 'no event kept matches';
}

// An event's picture under the history, its words as the caption.
function showEventPicture(e) {
  const figure = document.getElementById('history-picture');
  const picture = figure.querySelector('img');
  picture.src = e.snapshot.replace(/^\//, '');  // relative, as the page's other requests
  picture.alt = eventText(e, e.camera);
  figure.querySelector('figcaption').textContent =
      `${new Date(e.time * 1000).toLocaleString()} ${eventText(e, e.camera)}`;
  figure.hidden = false;
}

// An event's clip under the history, played; where it cannot be (still being recorded, gone),
// the endpoint's reason as the caption.
function playEventClip(e) {
  const figure = document.getElementById('history-clip');
  const video = figure.querySelector('video');
  const caption = figure.querySelector('figcaption');
  const url = e.clip.replace(/^\//, '');
  caption.textContent = `${new Date(e.time * 1000).toLocaleString()} ${eventText(e, e.camera)}`;
  video.onerror = async () => {
    try {
      const response = await fetch(url);
      const answer = await response.json();
      caption.textContent = answer.error || response.statusText;
    } catch (error) {
      caption.textContent = String(error.message || error);
    }
  };
  video.src = url;
  figure.hidden = false;
  video.play().catch(() => {});  // a browser that will not autoplay still shows its controls
}

// Each line's crossings per hour (api/events/hourly) of the search's camera and times: a row of
// bars a line, in (below) and out (above) stacked, an hour a bar, the hour in its tooltip.
async function showChart(params) {
  const chart = document.getElementById('history-chart');
  const hourly = new URLSearchParams();
  for (const key of ['camera', 'since']) if (params.has(key)) hourly.set(key, params.get(key));
  let hours;
  try {
    const response = await fetch('api/events/hourly?' + hourly);
    if (!response.ok) throw new Error(response.statusText);
    hours = (await response.json()).hours;
  } catch (error) {
    chart.replaceChildren();
    return;
  }
  const lines = new Map();  // "camera: line" -> its hours
  for (const h of hours) {
    const key = `${h.camera}: ${h.line}`;
    if (!lines.has(key)) lines.set(key, []);
    lines.get(key).push(h);
  }
  // A day at least, ending with the newest hour: a bar's width says an hour at a glance.
  const last = hours.length ? hours[hours.length - 1].hour : 0;
  const first = hours.length ? Math.min(hours[0].hour, last - 23 * 3600) : 0;
  const slots = (last - first) / 3600 + 1;
  const most = Math.max(1, ...hours.map((h) => h.in + h.out));
  const svg = 'http://www.w3.org/2000/svg';
  const rows = [];
  for (const [key, series] of lines) {
    const row = element('figure', 'hourly');
    row.append(element('figcaption', '', key));
    const plot = document.createElementNS(svg, 'svg');
    plot.setAttribute('viewBox', `0 0 ${slots * 10} 40`);
    plot.setAttribute('preserveAspectRatio', 'none');
    for (const h of series) {
      const x = (h.hour - first) / 3600 * 10;
      const when = new Date(h.hour * 1000).toLocaleString();
      let y = 40;
      for (const [part, n] of [['in', h.in], ['out', h.out]]) {
        if (!n) continue;
        const height = n / most * 38;
        y -= height;
        const bar = document.createElementNS(svg, 'rect');
        bar.setAttribute('class', part);
        bar.setAttribute('x', x + 1);
        bar.setAttribute('width', 8);
        bar.setAttribute('y', y);
        bar.setAttribute('height', height);
        bar.dataset.hour = h.hour;
        bar.dataset.line = h.line;
        bar.dataset.count = n;
        const title = document.createElementNS(svg, 'title');
        title.textContent = `${when}: ${n} ${part}`;
        bar.append(title);
        plot.append(bar);
      }
    }
    row.append(plot);
    rows.push(row);
  }
  chart.replaceChildren(...rows);
}

// The cameras a search may name: those listed.
function historyCameras(names) {
  const select = document.getElementById('history-camera');
  const have = new Set([...select.options].map((o) => o.value));
  for (const name of names) {
    if (have.has(name)) continue;
    const option = element('option', '', name);
    option.value = name;
    select.append(option);
  }
}

document.getElementById('history-search').addEventListener('submit', (event) => {
  event.preventDefault();
  showHistory(false);
});
document.getElementById('history-older').addEventListener('click', () => showHistory(true));

// Where the camera runs (a fleet's other host: a link to its own page), on what, how fast.
function showFacts(facts, camera) {
  const where = camera.page ? element('a', 'host', camera.host) : element('span', 'host',
                                                                          camera.host || 'no host');
  if (camera.page) where.href = camera.page;
  const on = camera.gpu === '' ? '' : camera.gpu === 'cpu' ? ' · CPU' : ' · GPU ' + camera.gpu;
  facts.replaceChildren(where, document.createTextNode(
      `${on} · ${camera.frames_per_second.toFixed(1)} frames/s · ${camera.reconnects} reconnects`));
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
    showFacts(parts.facts, camera);
    parts.error.textContent = camera.state !== 'streaming' ? camera.last_error
        : camera.pictures_failing ? `no event pictures: ${camera.pictures_failing}`
        : camera.clips_failing ? `no event clips: ${camera.clips_failing}` : '';
    // A fleet's camera that no host runs, or whose host did not answer, has no picture.
    if (camera.state !== 'unplaced' && camera.state !== 'unanswered') showPicture(name, parts);
    showCounts(parts.counts, camera);
  }
  document.getElementById('summary').textContent =
      `${names.length} cameras, ${streaming} streaming`;
  showEvents(cameras);
  historyCameras(names);
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
