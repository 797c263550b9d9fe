// The model view: every layer x head as a small map; click one to open it
// in the head view below.
const THUMB = 96;  // the most pixels a map holds per side

function drawThumb(canvas, data, head, colour) {
  const width = Math.min(data.s, THUMB), height = Math.min(data.t, THUMB);
  canvas.width = width;
  canvas.height = height;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(width, height);
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
  let drawn = 0;
  for (let t = 0; t < data.t; t++) {
    const row = head * data.t + t, y = Math.floor(t * height / data.t);
    for (let e = data.starts[row]; e < data.starts[row + 1]; e++) {
      const x = Math.floor(data.keys[e] * width / data.s);
      const p = 4 * (y * width + x);
      const alpha = Math.round(55 + 200 * data.values[e] / 1000);
      image.data[p] = r; image.data[p + 1] = g; image.data[p + 2] = b;
      image.data[p + 3] = Math.max(image.data[p + 3], alpha);
      drawn++;
    }
  }
  ctx.putImageData(image, 0, 0);
  return drawn;
}

function summaryText(meta, head) {
  const d = meta.distance[head];
  return `H ${meta.entropy[head].toFixed(2)}` + (d === null ? "" : ` \u00b7 d ${d.toFixed(1)}`);
}

function buildGrid(payload, layers, onPick) {
  const table = KA.element("table", { class: "ka-grid", id: "ka-grid" });
  const heads = Math.max(...payload.layers.map((l) => l.shape[0]));
  const head = KA.element("tr");
  head.appendChild(KA.element("th"));
  for (let h = 0; h < heads; h++) head.appendChild(KA.element("th", {}, `head ${h}`));
  table.appendChild(head);
  let cells = 0;
  payload.layers.forEach((meta, i) => {
    const row = KA.element("tr");
    row.appendChild(KA.element("th", { title: meta.name }, meta.name));
    for (let h = 0; h < meta.shape[0]; h++) {
      const cell = KA.element("td");
      const canvas = KA.element("canvas", { class: "ka-thumb", "data-layer": String(i),
        "data-head": String(h), title: `${meta.name}, head ${h}: click to open` });
      cells += drawThumb(canvas, layers[i], h, KA.colour(h));
      canvas.addEventListener("click", () => onPick(i, h, canvas));
      cell.append(canvas, KA.element("div", { class: "ka-summary" }, summaryText(meta, h)));
      row.appendChild(cell);
    }
    table.appendChild(row);
  });
  KA.count("cellsDrawn", cells);
  return table;
}

if (KA.payload.kind === "model") {
  KA.start(async () => {
    KA.header();
    const layers = await decodeLayers(KA.payload);
    KA.root.appendChild(KA.element("p", { class: "ka-rule" },
      "Each map: queries down, keys across. H: the head's mean entropy (nats); " +
      "d: its mean attended distance (positions). " + KA.payload.rule +
      ". Click a map to open it in the head view below."));
    const below = KA.element("div", { id: "ka-head-panel" });
    let view = null, picked = null;
    const grid = buildGrid(KA.payload, layers, (layer, head, canvas) => {
      if (picked) picked.classList.remove("ka-selected");
      canvas.classList.add("ka-selected");
      picked = canvas;
      view.show(layer, [head]);
      KA.state.selected = { layer, head };
      below.scrollIntoView({ block: "nearest" });
    });
    KA.root.append(grid, below);
    view = new HeadView(below, KA.payload, layers);
    window.kaView.headView = view;
  });
}
