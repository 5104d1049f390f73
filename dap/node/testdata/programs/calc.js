// calc.js: line 6 is `return r;` in mul, which reads the closure variable k.
const k = 10;
function mul(p, q) {
  const r = p * q + k;
  const parts = [p, q];
  return r;
}
function add(a, b) {
  return a + b;
}
let total = 0;
for (let i = 0; i < 4; i++) {
  total = add(total, mul(i, 2));
  console.log("step", i, total);
}
console.log("total", total);
