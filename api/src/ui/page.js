// The device page's script: reads the admin API's /v1 routes and draws them; changes nothing.
//
// Every few seconds one refresh asks for the devices of the nodes on the current page
// (GET /v1/devices?nodes=..., at most 100 nodes) and the utilisation summary; the node list
// (GET /v1/nodes) comes every sixth refresh and usage and idle allocations every twelfth, so
// the requests per refresh do not grow with the cluster. A refresh never starts while the
// previous one is running (a change of page asked for meanwhile runs once after it), and none
// runs while the tab is hidden.
'use strict';

(() => {
  const TOKEN_KEY = 'dra-ledger-token';
  const REFRESH_MS = 5000;
  const NODES_EVERY = 6;
  const HISTORY_EVERY = 12;

  // Each cell state: its name (data-state), its letter, what it means. The first that applies
  // wins, in this order: missing, unhealthy, cordoned, shared, allocated, admin-access, free.
  const STATES = [
    ['free', 'F', 'free'],
    ['allocated', 'A', 'allocated'],
    ['shared', 'S', 'shared'],
    ['admin-access', 'V', 'admin access (viewed, held by nobody)'],
    ['cordoned', 'C', 'cordoned or tainted'],
    ['unhealthy', 'U', 'unhealthy'],
    ['missing', 'X', 'missing'],
  ];
  const LETTER = Object.fromEntries(STATES.map(([s, l]) => [s, l]));
  const MEANING = Object.fromEntries(STATES.map(([s, , m]) => [s, m]));

  const view = {
    nodes: [],
    filter: '',
    page: 0,
    pageSize: 50,
    tick: 0,
    busy: false,
    again: false,
    windowSeconds: 86400,
    focused: null,
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) node.setAttribute(k, String(v));
    }
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function showReplica(response) {
    const replica = response.headers.get('Dra-Ledger-Replica');
    if (!replica) return;
    const via = response.headers.get('Dra-Ledger-Forwarded-By');
    $('replica').textContent = via
      ? `answered by replica ${replica} (forwarded by ${via})`
      : `answered by replica ${replica}`;
  }

  function askToken() {
    const form = $('token-form');
    if (form.hidden) {
      form.hidden = false;
      $('token-input').focus();
    }
  }

  // GET `path` of the admin API, with the token of this tab when there is one.
  async function api(path) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path, { headers, cache: 'no-store' });
    showReplica(response);
    if (response.status === 401) {
      askToken();
      throw new ApiError(401, 'the admin API asks for its token');
    }
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        message = (await response.json()).error.message;
      } catch (_) { /* not the API's JSON error */ }
      throw new ApiError(response.status, message);
    }
    return response.json();
  }

  function cellState(device) {
    const consumers = device.consumers || [];
    if (device.missing || device.state === 'missing') return 'missing';
    if (device.health && device.health.state === 'unhealthy') return 'unhealthy';
    const tainted = Array.isArray(device.taints) && device.taints.length > 0;
    if (device.cordoned || device.state === 'cordoned' || tainted) return 'cordoned';
    if (consumers.some((c) => c.sharing && c.sharing.mode === 'shared') || consumers.length > 1) {
      return 'shared';
    }
    if (consumers.length > 0) return 'allocated';
    if ((device.adminAccess || []).length > 0) return 'admin-access';
    return 'free';
  }

  function when(ms) {
    return typeof ms === 'number' ? new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z') : '?';
  }

  // A model's partitions and shares: whole-GPU equivalents and each capacity, allocated of total.
  function sharedCapacity(c) {
    const parts = [`GPU-EQ ${Number(c.equivalentsAllocated).toFixed(1)}/${c.units}`];
    for (const [name, use] of Object.entries(c.capacity || {})) {
      parts.push(`${name} ${use.allocated}/${use.total}`);
    }
    return parts.join(' ');
  }

  // `value` as short text: objects as `key=value` pairs (capacities, shares).
  function brief(value) {
    if (value === null || value === undefined) return '';
    if (typeof value !== 'object') return String(value);
    return Object.entries(value).map(([k, v]) => `${k}=${brief(v)}`).join(' ');
  }

  function describe(node, device, state, holders) {
    const lines = [`${node}/${device.name}: ${MEANING[state]}`];
    const model = device.attributes && device.attributes.model;
    if (model) lines.push(`model ${model}`);
    if (device.capacity) lines.push(`capacity ${brief(device.capacity)}`);
    if (device.parent) lines.push(`partition of ${device.parent}`);
    for (const share of device.shares || []) {
      const id = share.shareId ? ` share ${share.shareId}` : '';
      lines.push(`share of claim ${share.namespace}/${share.name}${id}: ${brief(share.consumed)}`);
    }
    for (const consumer of device.consumers || []) {
      const h = holders[consumer.claimUid];
      const who = h ? `${h.namespace}/${h.name} since ${when(h.sinceMs)}` : consumer.claimUid;
      const mode = consumer.sharing ? consumer.sharing.mode : '';
      const extra = ['consumedCapacity', 'capacity', 'share', 'shareId']
        .filter((k) => consumer[k] !== undefined)
        .map((k) => `${k} ${brief(consumer[k])}`);
      lines.push(`held by claim ${who} (${[mode, ...extra].filter(Boolean).join(', ')})`);
    }
    for (const uid of device.adminAccess || []) {
      const h = holders[uid];
      const who = h ? `${h.namespace}/${h.name} since ${when(h.sinceMs)}` : uid;
      lines.push(`admin access by claim ${who}`);
    }
    if (device.health && device.health.state === 'unhealthy') {
      lines.push(`unhealthy: ${device.health.reason || '?'} since ${when(device.health.sinceMs)}`);
    }
    return lines.join('\n');
  }

  function drawLegend() {
    const legend = $('legend');
    for (const [state, letter, meaning] of STATES) {
      legend.append(el('li', {},
        el('span', { class: `cell s-${state}`, 'aria-hidden': 'true' }, letter), meaning));
    }
  }

  function visibleNodes() {
    const filter = view.filter.toLowerCase();
    const names = view.nodes.map((n) => n.name).filter((n) => n.toLowerCase().includes(filter));
    const pages = Math.max(1, Math.ceil(names.length / view.pageSize));
    view.page = Math.min(view.page, pages - 1);
    const start = view.page * view.pageSize;
    const shown = names.slice(start, start + view.pageSize);
    $('page-info').textContent = names.length
      ? `nodes ${start + 1}–${start + shown.length} of ${names.length}`
      : 'no nodes';
    $('page-prev').disabled = view.page === 0;
    $('page-next').disabled = view.page >= pages - 1;
    return shown;
  }

  function drawGrid(grid) {
    const holders = grid.holders || {};
    const rows = [];
    for (const list of grid.items || []) {
      const cells = el('div', { class: 'cells' });
      let held = 0;
      for (const device of list.items || []) {
        const state = cellState(device);
        if ((device.consumers || []).length) held += 1;
        const id = `${list.node}/${device.name}`;
        const title = describe(list.node, device, state, holders);
        cells.append(el('div', {
          class: `cell s-${state}`,
          role: 'gridcell',
          tabindex: '-1',
          'data-device': id,
          'data-state': state,
          title,
          'aria-label': title,
        }, LETTER[state]));
      }
      const total = (list.items || []).length;
      rows.push(el('div', { class: 'node', role: 'row', 'data-node': list.node },
        el('div', { class: 'node-name', role: 'rowheader', title: list.node },
          `${list.node} `, el('small', {}, `${held}/${total}`)),
        cells));
    }
    const gridEl = $('grid');
    const hadFocus = gridEl.contains(document.activeElement);
    gridEl.replaceChildren(...rows);
    const cells = gridEl.querySelectorAll('[data-device]');
    let current = view.focused && gridEl.querySelector(`[data-device="${CSS.escape(view.focused)}"]`);
    if (!current) current = cells[0];
    if (current) {
      current.tabIndex = 0;
      if (hadFocus) current.focus();
    }
    gridEl.setAttribute('aria-busy', 'false');
    if (!gridEl.dataset.loaded) performance.mark('grid-drawn');
    gridEl.dataset.loaded = 'true';
  }

  // Arrow keys, Home and End move the focus between cells; one cell at a time is in the tab
  // order, so Tab leaves the grid.
  function onGridKey(event) {
    const cell = event.target.closest('[data-device]');
    if (!cell) return;
    const row = cell.closest('.node');
    const inRow = [...row.querySelectorAll('[data-device]')];
    const index = inRow.indexOf(cell);
    let next = null;
    if (event.key === 'ArrowRight') next = inRow[index + 1];
    else if (event.key === 'ArrowLeft') next = inRow[index - 1];
    else if (event.key === 'Home') next = inRow[0];
    else if (event.key === 'End') next = inRow[inRow.length - 1];
    else if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      let other = event.key === 'ArrowDown' ? row.nextElementSibling : row.previousElementSibling;
      if (other) {
        const cells = other.querySelectorAll('[data-device]');
        next = cells[Math.min(index, cells.length - 1)];
      }
    } else {
      return;
    }
    event.preventDefault();
    if (next) {
      cell.tabIndex = -1;
      next.tabIndex = 0;
      next.focus();
    }
  }

  function onGridFocus(event) {
    const cell = event.target.closest('[data-device]');
    if (!cell) return;
    view.focused = cell.dataset.device;
    $('focused').textContent = cell.title.replace(/\n/g, '; ');
  }

  function bar(parts, total, width) {
    const picture = svg('svg', { class: 'bar', width, height: 14, role: 'img' });
    let x = 0;
    for (const [cls, value] of parts) {
      const w = total > 0 ? (value / total) * width : 0;
      if (w > 0) picture.append(svg('rect', { class: cls, x, y: 1, width: w, height: 12 }));
      x += w;
    }
    return picture;
  }

  function drawUtilisation(utilisation) {
    const models = (utilisation.byAttribute || {}).model || {};
    const rows = Object.entries(models);
    if (rows.length === 0 && utilisation.totals) rows.push(['all devices', utilisation.totals]);
    const byModel = utilisation.capacityByModel || {};
    const capacityOf = (c, model) => Object.entries(c)
      .filter(([k]) => k.toLowerCase().includes('capacity'))
      .map(([k, v]) => `${k} ${brief(v)}`)
      .concat(byModel[model] ? [sharedCapacity(byModel[model])] : []).join('; ');
    const withCapacity = rows.some(([model, c]) => capacityOf(c, model) !== '');
    const table = el('table', {},
      el('tr', {}, el('th', {}, 'model'), el('th', {}, 'devices'), el('th', {}, 'allocated'),
        el('th', {}, 'shared'), el('th', {}, 'free'), el('th', {}, 'cordoned'),
        el('th', {}, 'missing'), ...(withCapacity ? [el('th', {}, 'capacity')] : []),
        el('th', {}, '')));
    for (const [model, c] of rows) {
      const whole = c.allocated - (c.shared || 0);
      const picture = bar([['bar-allocated', whole], ['bar-shared', c.shared || 0],
        ['bar-cordoned', c.cordoned || 0], ['bar-free', c.free]], c.total, 200);
      picture.setAttribute('aria-label', `${model}: ${c.allocated} of ${c.total} allocated`);
      const pct = c.total ? Math.round((100 * c.allocated) / c.total) : 0;
      table.append(el('tr', { 'data-model': model },
        el('td', {}, model), el('td', { class: 'num' }, c.total),
        el('td', { class: 'num' }, `${c.allocated} (${pct}%)`), el('td', { class: 'num' }, c.shared || 0),
        el('td', { class: 'num' }, c.free), el('td', { class: 'num' }, c.cordoned || 0),
        el('td', { class: 'num' }, c.missing || 0),
        ...(withCapacity ? [el('td', {}, capacityOf(c, model))] : []),
        el('td', {}, picture)));
    }
    const claims = el('p', {}, `claims allocated: ${utilisation.claimsAllocated ?? 0}, `
      + `pending: ${utilisation.intentsPending ?? 0}`);
    $('utilisation').replaceChildren(table, claims);
  }

  function hours(seconds) {
    const h = seconds / 3600;
    return h.toFixed(h < 10 ? 2 : 1);
  }

  function drawUsage(usage) {
    const rows = usage.rows || [];
    const most = Math.max(1, ...rows.map((r) => r.deviceSeconds || 0));
    const table = el('table', {},
      el('tr', {}, el('th', {}, 'namespace'), el('th', {}, 'device-hours'), el('th', {}, 'claims'),
        el('th', {}, 'peak devices'), el('th', {}, '')));
    for (const row of rows) {
      const picture = bar([['bar-usage', row.deviceSeconds || 0]], most, 200);
      picture.setAttribute('aria-label', `${row.key}: ${hours(row.deviceSeconds || 0)} device-hours`);
      table.append(el('tr', {}, el('td', {}, row.key),
        el('td', { class: 'num' }, hours(row.deviceSeconds || 0)),
        el('td', { class: 'num' }, row.claims ?? ''), el('td', { class: 'num' }, row.peakDevices ?? ''),
        el('td', {}, picture)));
    }
    const caption = el('p', {}, `${usage.from} to ${usage.to}${rows.length ? '' : ': no usage'}`);
    $('usage').replaceChildren(caption, ...(rows.length ? [table] : []));
    $('usage-section').hidden = false;
  }

  // The idle list as a table of whatever plain fields its items have (lists, such as the
  // devices, joined by commas).
  function drawIdle(idle) {
    const items = Array.isArray(idle) ? idle : (idle.items || []);
    const plain = (v) => typeof v !== 'object' || Array.isArray(v);
    const columns = [];
    for (const item of items) {
      for (const [k, v] of Object.entries(item)) {
        if (plain(v) && !columns.includes(k)) columns.push(k);
      }
    }
    const cell = (v) => (Array.isArray(v) ? v.join(', ') : v ?? '');
    const table = el('table', {}, el('tr', {}, ...columns.map((c) => el('th', {}, c))));
    for (const item of items) {
      table.append(el('tr', {}, ...columns.map((c) => el('td', {}, cell(item[c])))));
    }
    $('idle').replaceChildren(items.length ? table : el('p', {}, 'no idle allocations'));
    $('idle-section').hidden = false;
  }

  async function refreshHistory() {
    const to = new Date();
    const from = new Date(to.getTime() - view.windowSeconds * 1000);
    const query = `from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}`;
    const [usage, idle] = await Promise.allSettled([
      api(`/v1/usage?${query}&by=namespace`), api('/v1/idle'),
    ]);
    if (usage.status === 'fulfilled') drawUsage(usage.value);
    else if (usage.reason.status === 404) $('usage-section').hidden = true;
    if (idle.status === 'fulfilled') drawIdle(idle.value);
    else if (idle.reason.status === 404) $('idle-section').hidden = true;
  }

  // One refresh; `asked` for a change of page or filter, which runs once after a refresh that
  // is running, where a timer tick is skipped.
  async function refresh(asked) {
    if (view.busy) {
      view.again = view.again || Boolean(asked);
      return;
    }
    view.busy = true;
    view.again = false;
    try {
      if (view.tick % NODES_EVERY === 0 || view.nodes.length === 0) {
        view.nodes = (await api('/v1/nodes')).items || [];
      }
      const shown = visibleNodes();
      const [grid, utilisation] = await Promise.all([
        shown.length ? api(`/v1/devices?nodes=${shown.map(encodeURIComponent).join(',')}`)
          : Promise.resolve({ items: [], holders: {} }),
        api('/v1/utilisation'),
      ]);
      drawGrid(grid);
      drawUtilisation(utilisation);
      if (view.tick % HISTORY_EVERY === 0) await refreshHistory();
      $('status').textContent = `updated ${new Date().toLocaleTimeString()}, every ${REFRESH_MS / 1000} s`;
      $('status').classList.remove('error');
      view.tick += 1;
    } catch (error) {
      $('status').textContent = `not updated: ${error.message}`;
      $('status').classList.add('error');
    } finally {
      view.busy = false;
    }
    // A change of page or filter while this refresh ran: draw it now, once.
    if (view.again) refresh(false);
  }

  function start() {
    drawLegend();
    const grid = $('grid');
    grid.addEventListener('keydown', onGridKey);
    grid.addEventListener('focusin', onGridFocus);
    $('node-filter').addEventListener('input', (e) => {
      view.filter = e.target.value;
      view.page = 0;
      refresh(true);
    });
    $('page-size').addEventListener('change', (e) => {
      view.pageSize = Number(e.target.value);
      view.page = 0;
      refresh(true);
    });
    $('page-prev').addEventListener('click', () => { view.page -= 1; refresh(true); });
    $('page-next').addEventListener('click', () => { view.page += 1; refresh(true); });
    $('usage-window').addEventListener('change', (e) => {
      view.windowSeconds = Number(e.target.value);
      refreshHistory().catch(() => {});
    });
    $('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $('token-input').value.trim());
      $('token-form').hidden = true;
      refresh(true);
    });
    refresh(false);
    setInterval(() => {
      if (!document.hidden) refresh(false);
    }, REFRESH_MS);
  }

  start();
})();
