// keras_attention views: what every page shares (payload, decoding, state).
"use strict";
const KA = (() => {
  const root = document.getElementById("ka-root");
  const payload = JSON.parse(document.getElementById("ka-data").textContent);
  const colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  const state = { ready: false, readyMs: null };

  function colour(head) { return colours[head % colours.length]; }

  // Set a count both in the state and as a data- attribute of the root.
  function count(name, value) {
    state[name] = value;
    root.dataset[name] = String(value);
  }

  // One layer's kept weights (see sparse_weights.py): counts per row,
  // then key indices, then round(1000 w), uint16, deflated, base64.
  async function decode(b64, shape) {
    const text = atob(b64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const stream = new Blob([bytes]).stream()
      .pipeThrough(new DecompressionStream("deflate"));
    const words = new Uint16Array(await new Response(stream).arrayBuffer());
    const [n, t, s] = shape;
    const rows = n * t;
    const total = (words.length - rows) / 2;
    const starts = new Uint32Array(rows + 1);
    for (let r = 0; r < rows; r++) starts[r + 1] = starts[r] + words[r];
    return {
      n, t, s, starts,
      keys: words.subarray(rows, rows + total),
      values: words.subarray(rows + total),
    };
  }

  function element(tag, attributes, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (key === "style") node.style.cssText = value;
      else node.setAttribute(key, value);
    }
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function header() {
    root.appendChild(element("h1", {}, payload.title));
  }

  function ready() {
    state.ready = true;
    state.readyMs = performance.now();
    root.dataset.readyMs = state.readyMs.toFixed(1);
    root.dataset.ready = "true";
  }

  // Run the page's main; an error is shown and logged (tests read the log).
  // Ready once the first frame is painted (canvas drawing is rasterised
  // then, so "ready" includes it).
  function painted() {
    return new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  }

  function start(main) {
    main().then(painted).then(ready).catch((error) => {
      root.appendChild(element("pre", { class: "ka-error" }, String(error)));
      console.error(error);
    });
  }

  window.kaView = { state: () => ({ ...state }), payload };
  return { root, payload, state, colour, count, decode, element, header, start };
})();
