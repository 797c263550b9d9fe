// The head view: queries left, keys right, one line per kept weight.
// The canvas is the size of the visible window (at most 80% of the
// browser's height) and stays in place while a spacer scrolls: each draw
// strokes only the lines that cross the window, so 512 tokens draw as fast
// as 50.
const LEVELS = 10;  // lines are batched by weight into this many strokes

class HeadView {
  constructor(container, payload, layers) {
    this.payload = payload;
    this.layers = layers;  // decoded, one per payload.layers entry
    this.layer = payload.layer || 0;
    this.heads = new Set();
    this.hover = null;  // {side: "query" | "key", index}
    this.controls = KA.element("div", { class: "ka-controls" });
    this.select = KA.element("select", { class: "ka-layer", id: "ka-layer" });
    payload.layers.forEach((layer, i) =>
      this.select.appendChild(KA.element("option", { value: String(i) }, layer.name)));
    this.select.value = String(this.layer);
    this.select.addEventListener("change", () => this.show(Number(this.select.value)));
    const label = KA.element("label", {}, "Layer ");
    label.appendChild(this.select);
    this.headBox = KA.element("span", { class: "ka-heads" });
    this.controls.append(label, this.headBox);
    this.rule = KA.element("p", { class: "ka-rule" });
    this.scroll = KA.element("div", { class: "ka-scroll ka-window" });
    this.canvas = KA.element("canvas", { id: "ka-head-canvas" });
    this.spacer = KA.element("div");
    this.scroll.append(this.canvas, this.spacer);
    container.append(this.controls, this.rule, this.scroll);
    this.scroll.addEventListener("scroll", () => {  // one draw per frame
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    });
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", () => this.setHover(null));
    this.show(this.layer);
  }

  // Show layer `index`, with the heads `heads` (default: all).
  show(index, heads) {
    this.layer = index;
    this.select.value = String(index);
    const [n] = this.payload.layers[index].shape;
    this.heads = new Set(heads || [...Array(n).keys()]);
    this.hover = null;
    this.headBox.textContent = "";
    for (let h = 0; h < n; h++) {
      const box = KA.element("input", { type: "checkbox", "data-head": String(h),
        id: `ka-head-${h}` });
      box.checked = this.heads.has(h);
      box.addEventListener("change", () => {
        if (box.checked) this.heads.add(h); else this.heads.delete(h);
        this.draw();
      });
      const label = KA.element("label", { class: "ka-head", for: `ka-head-${h}` });
      const swatch = KA.element("span", { class: "ka-swatch",
        style: `background:${KA.colour(h)}` });
      label.append(box, swatch, document.createTextNode(`head ${h}`));
      this.headBox.appendChild(label);
    }
    this.layout();
    this.draw();
  }

  layout() {
    const meta = this.payload.layers[this.layer];
    this.queries = this.payload.tokens[meta.queryTokens];
    this.keys = this.payload.tokens[meta.keyTokens];
    const rows = Math.max(this.queries.length, this.keys.length);
    this.rowH = rows > 64 ? 14 : 20;
    const ctx = this.canvas.getContext("2d");
    ctx.font = "12px sans-serif";
    const width = (tokens) => Math.min(160,
      Math.max(30, ...tokens.map((t) => ctx.measureText(t).width)));
    this.left = width(this.queries) + 12;
    this.gap = 220;
    this.right = this.left + this.gap;
    this.top = 6;
    this.canvas.width = Math.ceil(this.right + width(this.keys) + 12);
    const full = Math.ceil(this.top * 2 + rows * this.rowH);
    this.canvas.height = Math.min(full, Math.max(240, Math.floor(0.8 * window.innerHeight)));
    this.scroll.style.height = `${this.canvas.height + 2}px`;
    this.spacer.style.height = `${full - this.canvas.height}px`;
    this.scroll.scrollTop = 0;
    const [, t, s] = meta.shape;
    this.rule.textContent = `${meta.name}: ${t} queries x ${s} keys; ` +
      `${this.payload.rule}. Hover a token to show only its lines.`;
  }

  // A token's y on the canvas, the window scrolled by `scrollTop`.
  y(index) { return this.top + (index + 0.5) * this.rowH - this.scroll.scrollTop; }

  // The canvas point of a token (tests move the mouse there).
  tokenPoint(side, index) {
    return { x: side === "query" ? this.left - 20 : this.right + 12, y: this.y(index) };
  }

  onMove(event) {
    const box = this.canvas.getBoundingClientRect();
    const x = event.clientX - box.left, y = event.clientY - box.top;
    const index = Math.floor((y + this.scroll.scrollTop - this.top) / this.rowH);
    let hover = null;
    if (x < this.left + 4 && index >= 0 && index < this.queries.length) {
      hover = { side: "query", index };
    } else if (x > this.right - 4 && index >= 0 && index < this.keys.length) {
      hover = { side: "key", index };
    }
    this.setHover(hover);
  }

  setHover(hover) {
    const same = (a, b) => (a === b) || (a && b && a.side === b.side && a.index === b.index);
    if (same(hover, this.hover)) return;
    this.hover = hover;
    this.draw();
  }

  drawTokens(ctx, tokens, mask, side) {
    ctx.textAlign = side === "query" ? "right" : "left";
    const x = side === "query" ? this.left - 6 : this.right + 6;
    tokens.forEach((token, i) => {
      if (this.y(i) < -this.rowH || this.y(i) > this.canvas.height + this.rowH) return;
      const hovered = this.hover && this.hover.side === side && this.hover.index === i;
      if (hovered) {
        ctx.fillStyle = "#ffe9a8";
        const from = side === "query" ? 0 : this.right;
        ctx.fillRect(from, this.y(i) - this.rowH / 2, this.left, this.rowH);
      }
      ctx.fillStyle = mask[i] ? "#222" : "#bbb";
      ctx.font = hovered ? "bold 12px sans-serif" : "12px sans-serif";
      ctx.fillText(token.length > 24 ? token.slice(0, 23) + "\u2026" : token, x, this.y(i));
    });
  }

  draw() {
    const meta = this.payload.layers[this.layer], data = this.layers[this.layer];
    const ctx = this.canvas.getContext("2d");
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.textBaseline = "middle";
    this.drawTokens(ctx, this.queries, meta.queryMask, "query");
    this.drawTokens(ctx, this.keys, meta.keyMask, "key");
    const hover = this.hover, x0 = this.left, x1 = this.right;
    const low = -this.rowH, high = this.canvas.height + this.rowH;
    let drawn = 0, shown = 0;
    for (const h of [...this.heads].sort()) {
      const paths = Array.from({ length: LEVELS }, () => new Path2D());
      for (let t = 0; t < data.t; t++) {
        if (hover && hover.side === "query" && hover.index !== t) continue;
        const r = h * data.t + t;
        for (let e = data.starts[r]; e < data.starts[r + 1]; e++) {
          const k = data.keys[e];
          if (hover && hover.side === "key" && hover.index !== k) continue;
          drawn++;
          const y0 = this.y(t), y1 = this.y(k);
          if ((y0 < low && y1 < low) || (y0 > high && y1 > high)) continue;  // off the window
          const level = Math.min(LEVELS - 1, Math.floor(data.values[e] * LEVELS / 1000));
          paths[level].moveTo(x0, y0);
          paths[level].lineTo(x1, y1);
          shown++;
        }
      }
      ctx.strokeStyle = KA.colour(h);
      paths.forEach((path, level) => {
        const w = (level + 0.5) / LEVELS;
        ctx.globalAlpha = 0.15 + 0.85 * w;
        ctx.lineWidth = 0.5 + 2.5 * w;
        ctx.stroke(path);
      });
      ctx.globalAlpha = 1;
    }
    KA.count("linesDrawn", drawn);  // the lines of the selection, all rows
    KA.count("linesInWindow", shown);  // those crossing the visible window
    KA.state.layer = this.layer;
    KA.state.heads = [...this.heads].sort();
    KA.state.hover = hover;
  }
}

async function decodeLayers(payload) {
  return Promise.all(payload.layers.map((layer) => KA.decode(layer.data, layer.shape)));
}

if (KA.payload.kind === "head") {
  KA.start(async () => {
    KA.header();
    const view = new HeadView(KA.root, KA.payload, await decodeLayers(KA.payload));
    window.kaView.headView = view;
  });
}
