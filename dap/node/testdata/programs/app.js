function describe(p, scale) {
    const scaled = { x: p.x * scale, y: p.y * scale };
    const label = "(" + scaled.x + ", " + scaled.y + ")";
    return label;
}
const points = [{ x: 1, y: 2 }, { x: 3, y: 4 }];
for (const pt of points) {
    console.log(describe(pt, 10));
}
//# sourceMappingURL=app.js.map