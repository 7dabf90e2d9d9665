// dom.js - building elements without HTML strings: every server string
// goes in as text (textContent), never as markup.

// h('a', {href: '#/x', class: 'c'}, 'text', child, ...) -> element.
// Attributes: class, and names set with setAttribute (no event handler
// attributes, no style: the CSP forbids inline style); on* keys given as
// functions become listeners. Children: strings (text), nodes, arrays,
// null/false (skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.className = v;
    } else if (k === 'value') {
      el.value = v;
    } else if (k === 'checked' || k === 'disabled' || k === 'hidden') {
      el[k] = Boolean(v);
    } else if (k === 'style') {
      throw new Error('no inline style (CSP)');
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// Replaces el's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Sets el's text only when it changed (keeps selection and focus calm).
export function setText(el, text) {
  const s = String(text);
  if (el.textContent !== s) el.textContent = s;
}

// "3d 4h", "5m 2s", "12s": a duration in seconds for people.
export function dur(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return '–';
  s = Math.max(0, Math.round(s));
  const d = Math.floor(s / 86400), hr = Math.floor(s / 3600) % 24;
  const m = Math.floor(s / 60) % 60, sec = s % 60;
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${sec}s`;
  return `${sec}s`;
}

// 1234567 -> "1,234,567"; decimals kept for rates.
export function num(n) {
  if (n === null || n === undefined) return '–';
  if (typeof n !== 'number') return String(n);
  return n.toLocaleString('en-US', {maximumFractionDigits: 2});
}

// A labelled input: [label, input], the label naming the input by id.
let ids = 0;
export function field(labelText, attrs) {
  const id = attrs.id || `f${++ids}`;
  const input = h('input', {...attrs, id});
  return [h('label', {for: id}, labelText), input];
}
