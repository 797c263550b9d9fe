// The alignment view: target tokens down, source tokens across; the value
// of a cell on hover.
class AlignmentView {
  constructor(container, payload, matrices) {
    this.payload = payload;
    this.matrices = matrices;
    const controls = KA.element("div", { class: "ka-controls" });
    if (payload.matrices.length > 1) {
      this.select = KA.element("select", { id: "ka-matrix" });
      payload.matrices.forEach((m, i) =>
        this.select.appendChild(KA.element("option", { value: String(i) }, m.name)));
      this.select.addEventListener("change", () => this.show(Number(this.select.value)));
      controls.appendChild(this.select);
    }
    const rule = KA.element("p", { class: "ka-rule" },
      `Rows: target tokens; columns: source tokens; bright = a large weight. ` +
      `${payload.rule}. Hover a cell for its value.`);
    this.canvas = KA.element("canvas", { id: "ka-alignment-canvas" });
    const scroll = KA.element("div", { class: "ka-scroll" });
    scroll.appendChild(this.canvas);
    this.tip = KA.element("div", { class: "ka-tip", id: "ka-tip" });
    container.append(controls, rule, scroll, this.tip);
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", () => this.setHover(null));
    this.show(0);
  }

  show(index) {
    this.index = index;
    const meta = this.payload.matrices[index];
    const source = this.payload.sourceTokens, target = meta.targetTokens;
    const ctx = this.canvas.getContext("2d");
    ctx.font = "12px sans-serif";
    const width = (tokens) => Math.min(140, Math.max(...tokens.map((t) => ctx.measureText(t).width)));
    this.cell = Math.max(8, Math.min(28, Math.floor(640 / source.length)));
    this.left = width(target) + 12;
    this.top = width(source) + 12;
    this.canvas.width = this.left + this.cell * source.length + 4;
    this.canvas.height = this.top + this.cell * target.length + 4;
    // value lookup: row -> Map(col -> value)
    const data = this.matrices[index];
    this.values = [];
    for (let t = 0; t < data.t; t++) {
      const row = new Map();
      for (let e = data.starts[t]; e < data.starts[t + 1]; e++) row.set(data.keys[e], data.values[e] / 1000);
      this.values.push(row);
    }
    this.hover = null;
    this.draw();
  }

  // The canvas point of cell (row, col) (tests move the mouse there).
  cellPoint(row, col) {
    return { x: this.left + (col + 0.5) * this.cell, y: this.top + (row + 0.5) * this.cell };
  }

  draw() {
    const meta = this.payload.matrices[this.index], source = this.payload.sourceTokens;
    const ctx = this.canvas.getContext("2d"), c = this.cell;
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.fillStyle = "#000";
    ctx.fillRect(this.left, this.top, c * source.length, c * meta.targetTokens.length);
    let drawn = 0;
    this.values.forEach((row, t) => row.forEach((v, s) => {
      const level = Math.round(255 * Math.min(1, v));
      ctx.fillStyle = `rgb(${level},${level},${level})`;
      ctx.fillRect(this.left + s * c, this.top + t * c, c, c);
      drawn++;
    }));
    ctx.fillStyle = "#222";
    ctx.font = "12px sans-serif";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    meta.targetTokens.forEach((token, t) => ctx.fillText(token, this.left - 6, this.top + (t + 0.5) * c));
    ctx.save();
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left";
    source.forEach((token, s) => ctx.fillText(token, -this.top + 6, this.left + (s + 0.5) * c));
    ctx.restore();
    if (this.hover) {
      ctx.strokeStyle = "#e33";
      ctx.lineWidth = 2;
      ctx.strokeRect(this.left + this.hover.col * c, this.top + this.hover.row * c, c, c);
    }
    KA.count("cellsDrawn", drawn);
    KA.state.matrix = this.index;
  }

  onMove(event) {
    const box = this.canvas.getBoundingClientRect();
    const col = Math.floor((event.clientX - box.left - this.left) / this.cell);
    const row = Math.floor((event.clientY - box.top - this.top) / this.cell);
    const inside = row >= 0 && col >= 0 && row < this.values.length &&
      col < this.payload.sourceTokens.length;
    this.setHover(inside ? { row, col } : null, event);
  }

  setHover(hover, event) {
    this.hover = hover;
    if (!hover) {
      this.tip.style.display = "none";
      KA.state.hover = null;
      this.draw();
      return;
    }
    const meta = this.payload.matrices[this.index];
    const value = this.values[hover.row].get(hover.col);
    const shown = value === undefined ? `< ${this.payload.threshold}` : value.toFixed(3);
    const text = `${meta.targetTokens[hover.row]} \u2192 ${this.payload.sourceTokens[hover.col]}: ${shown}`;
    this.tip.textContent = text;
    this.tip.style.display = "block";
    this.tip.style.left = `${event.clientX + 12}px`;
    this.tip.style.top = `${event.clientY + 12}px`;
    KA.state.hover = { ...hover, text };
    this.draw();
  }
}

if (KA.payload.kind === "alignment") {
  KA.start(async () => {
    KA.header();
    const matrices = await Promise.all(KA.payload.matrices.map((m) =>
      KA.decode(m.data, [1, m.targetTokens.length, KA.payload.sourceTokens.length])));
    window.kaView.alignmentView = new AlignmentView(KA.root, KA.payload, matrices);
  });
}
