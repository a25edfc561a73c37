// What helpers.js and replset.js share: named checks that count, and the closing line.
let passed = 0;
let failed = 0;

function check(name, fn) {
  try {
    fn();
    passed++;
    print('ok   ' + name);
  } catch (e) {
    failed++;
    print('FAIL ' + name + ': ' + (e && e.stack ? e.stack : e));
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg || 'assertion failed');
}

// Print "N passed, N failed" and exit non-zero on a failure.
function finish() {
  print(passed + ' passed, ' + failed + ' failed');
  if (failed) quit(1);
}
