// charts.js - uPlot (embedded in the server with its licence:
// /console/uPlot.LICENSE.txt) for the rate charts and sparklines.

const COLORS = {puts: '#2563eb', reserves: '#16a34a', deletes: '#9333ea',
                timeouts: '#dc2626'};

export const color = (key) => COLORS[key] || '#475569';

function uplot() {
  if (!window.uPlot) throw new Error('uPlot did not load');
  return window.uPlot;
}

// Follows the width of el's box (phones turn, windows resize).
function fitWidth(plot, el, height) {
  const ro = new ResizeObserver(() => {
    const w = Math.max(120, Math.floor(el.clientWidth));
    if (w !== plot.width) plot.setSize({width: w, height});
  });
  ro.observe(el);
  return () => ro.disconnect();
}

// A line chart of one series over time in el: returns {set(t, ys),
// destroy()}; t in Unix seconds, ys per second.
export function rateChart(el, label, key) {
  const U = uplot();
  const height = 160;
  const opts = {
    width: Math.max(120, el.clientWidth || 300),
    height,
    series: [
      {},
      {label, stroke: color(key), fill: color(key) + '22', width: 1.5,
       value: (u, v) => (v === null || v === undefined ? '–' : v.toFixed(2))},
    ],
    axes: [{}, {size: 44}],
    scales: {y: {range: (u, min, max) => [0, Math.max(1, max * 1.1)]}},
    legend: {show: true},
  };
  const plot = new U(opts, [[], []], el);
  const stop = fitWidth(plot, el, height);
  return {
    set(t, ys) { plot.setData([t, ys]); },
    destroy() { stop(); plot.destroy(); },
  };
}

// A small chart without axes or legend (a tube's rate over the samples
// this page has taken): returns {set(ys), destroy()}.
export function sparkline(el, key) {
  const U = uplot();
  const opts = {
    width: 100, height: 24,
    cursor: {show: false}, legend: {show: false}, select: {show: false},
    axes: [{show: false}, {show: false}],
    scales: {x: {time: false},
             y: {range: (u, min, max) => [0, Math.max(1, max * 1.25)]}},
    series: [{}, {stroke: color(key), fill: color(key) + '33', width: 1,
                  points: {show: false}}],
  };
  const plot = new U(opts, [[0], [0]], el);
  return {
    set(ys) { plot.setData([ys.map((_, i) => i), ys]); },
    destroy() { plot.destroy(); },
  };
}
