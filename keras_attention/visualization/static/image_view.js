// The image view: click a pixel of the image and see where it attends.
class ImageView {
  constructor(container, payload, layers) {
    this.payload = payload;
    this.layers = layers;
    const { height, width } = payload.image;
    this.scale = Math.max(1, Math.floor(320 / Math.max(height, width)));
    this.picture = this.pictureCanvas();
    const controls = KA.element("div", { class: "ka-controls" });
    this.layerSelect = KA.element("select", { id: "ka-layer" });
    payload.layers.forEach((l, i) =>
      this.layerSelect.appendChild(KA.element("option", { value: String(i) }, l.name)));
    this.layerSelect.addEventListener("change", () => this.show(Number(this.layerSelect.value)));
    this.headSelect = KA.element("select", { id: "ka-head" });
    this.headSelect.addEventListener("change", () => this.draw());
    controls.append(this.layerSelect, this.headSelect);
    const rule = KA.element("p", { class: "ka-rule" },
      "Click a pixel (left): the right image tints the pixels it attends to, " +
      `by weight relative to the row's largest. ${payload.rule}.`);
    const images = KA.element("div", { class: "ka-images" });
    this.query = KA.element("canvas", { id: "ka-query-canvas" });
    this.keys = KA.element("canvas", { id: "ka-key-canvas" });
    for (const canvas of [this.query, this.keys]) {
      canvas.width = width * this.scale;
      canvas.height = height * this.scale;
      canvas.addEventListener("click", (e) => this.onClick(e, canvas));
    }
    images.append(this.query, this.keys);
    container.append(controls, rule, images);
    this.show(payload.layer || 0);
  }

  pictureCanvas() {
    const { height, width, rgba } = this.payload.image;
    const canvas = document.createElement("canvas");
    canvas.width = width;
    canvas.height = height;
    const bytes = Uint8ClampedArray.from(atob(rgba), (c) => c.charCodeAt(0));
    canvas.getContext("2d").putImageData(new ImageData(bytes, width, height), 0, 0);
    return canvas;
  }

  show(index) {
    this.layer = index;
    this.layerSelect.value = String(index);
    const [n] = this.payload.layers[index].shape;
    this.headSelect.textContent = "";
    this.headSelect.appendChild(KA.element("option", { value: "mean" }, "mean of heads"));
    for (let h = 0; h < n; h++) this.headSelect.appendChild(KA.element("option", { value: String(h) }, `head ${h}`));
    const [qh, qw] = this.payload.layers[index].queryGrid;
    this.selected = { row: Math.floor(qh / 2), col: Math.floor(qw / 2) };
    this.draw();
  }

  // The canvas point of query cell (row, col) (tests click there).
  queryPoint(row, col) {
    const [qh, qw] = this.payload.layers[this.layer].queryGrid;
    return { x: (col + 0.5) * this.query.width / qw, y: (row + 0.5) * this.query.height / qh };
  }

  onClick(event, canvas) {
    const box = canvas.getBoundingClientRect();
    const [qh, qw] = this.payload.layers[this.layer].queryGrid;
    const col = Math.floor((event.clientX - box.left) * qw / box.width);
    const row = Math.floor((event.clientY - box.top) * qh / box.height);
    if (row < 0 || col < 0 || row >= qh || col >= qw) return;
    this.selected = { row, col };
    this.draw();
  }

  // key index -> weight for the selected query (one head, or their mean).
  weights() {
    const data = this.layers[this.layer], meta = this.payload.layers[this.layer];
    const query = this.selected.row * meta.queryGrid[1] + this.selected.col;
    const choice = this.headSelect.value;
    const heads = choice === "mean" ? [...Array(data.n).keys()] : [Number(choice)];
    const found = new Map();
    for (const h of heads) {
      const r = h * data.t + query;
      for (let e = data.starts[r]; e < data.starts[r + 1]; e++) {
        const k = data.keys[e];
        found.set(k, (found.get(k) || 0) + data.values[e] / 1000 / heads.length);
      }
    }
    return found;
  }

  draw() {
    const meta = this.payload.layers[this.layer];
    const [qh, qw] = meta.queryGrid, [kh, kw] = meta.keyGrid;
    const W = this.query.width, H = this.query.height;
    for (const canvas of [this.query, this.keys]) {
      const ctx = canvas.getContext("2d");
      ctx.imageSmoothingEnabled = false;
      ctx.clearRect(0, 0, W, H);
      ctx.globalAlpha = canvas === this.keys ? 0.45 : 1;
      ctx.drawImage(this.picture, 0, 0, W, H);
      ctx.globalAlpha = 1;
    }
    const found = this.weights(), ctx = this.keys.getContext("2d");
    const top = Math.max(...found.values(), 1e-9);
    const cw = W / kw, ch = H / kh;
    found.forEach((w, k) => {
      ctx.fillStyle = `rgba(255, 40, 0, ${(0.1 + 0.85 * w / top).toFixed(3)})`;
      ctx.fillRect((k % kw) * cw, Math.floor(k / kw) * ch, cw, ch);
    });
    for (const canvas of [this.query, this.keys]) {
      const p = this.queryPoint(this.selected.row, this.selected.col);
      const c = canvas.getContext("2d");
      c.strokeStyle = "#00e5ff";
      c.lineWidth = 2;
      c.beginPath();
      c.arc(p.x, p.y, Math.max(4, W / qw / 2), 0, 2 * Math.PI);
      c.stroke();
    }
    KA.count("cellsDrawn", found.size);
    KA.state.query = { ...this.selected };
    KA.state.layer = this.layer;
    KA.state.head = this.headSelect.value;
  }
}

if (KA.payload.kind === "image") {
  KA.start(async () => {
    KA.header();
    const layers = await Promise.all(KA.payload.layers.map((l) => KA.decode(l.data, l.shape)));
    window.kaView.imageView = new ImageView(KA.root, KA.payload, layers);
  });
}
