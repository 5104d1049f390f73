interface Point {
  x: number;
  y: number;
}

function describe(p: Point, scale: number): string {
  const scaled: Point = { x: p.x * scale, y: p.y * scale };
  const label = "(" + scaled.x + ", " + scaled.y + ")";
  return label;
}

const points: Point[] = [{ x: 1, y: 2 }, { x: 3, y: 4 }];
for (const pt of points) {
  console.log(describe(pt, 10));
}
