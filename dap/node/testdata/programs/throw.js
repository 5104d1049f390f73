function check(n) {
  if (n > 2) {
    const err = new RangeError("n too large: " + n);
    throw err;
  }
  return n;
}
for (let i = 0; i < 5; i++) check(i);
