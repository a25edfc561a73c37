// mongosh's `rs` helpers against three `siltd --replSet rs0` made one set (tests/shell/run.sh
// passes their ports as MEMBER_PORTS; the shell is connected to the first, directly).
load(__dirname + '/lib.js');

const ports = MEMBER_PORTS;
const hosts = ports.map((p) => '127.0.0.1:' + p);

function waitFor(what, pred, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      const v = pred();
      if (v) return v;
    } catch (e) { /* a member not answering yet */ }
    sleep(100);
  }
  throw new Error(what + ' within ' + ms + ' ms');
}

function primaryOf(conn) {
  return waitFor('a primary', () => conn.getDB('admin').hello().primary, 15000);
}

check('rs.initiate() with three members', () => {
  const r = rs.initiate({ _id: 'rs0', members: hosts.slice(0, 3).map((h, i) => ({ _id: i, host: h })) });
  assert(r.ok === 1, JSON.stringify(r));
});

// Connected once every member reports the same primary (until a member hears from the
// group it still answers as a one-member set of its own).
waitFor('one primary seen by all three members', () => {
  const seen = hosts.slice(0, 3).map((h) =>
    new Mongo('mongodb://' + h + '/?directConnection=true').getDB('admin').hello().primary);
  return seen[0] && seen.every((p) => p === seen[0]);
}, 20000);
const set = new Mongo('mongodb://' + hosts.slice(0, 3).join(',') + '/?replicaSet=rs0');

check('rs.status() and rs.conf() through a replicaSet connection', () => {
  primaryOf(db.getMongo());
  const st = set.getDB('admin').runCommand({ replSetGetStatus: 1 });
  const states = st.members.map((m) => m.stateStr).sort();
  assert(JSON.stringify(states) === JSON.stringify(['PRIMARY', 'SECONDARY', 'SECONDARY']), JSON.stringify(st.members));
  const conf = set.getDB('admin').runCommand({ replSetGetConfig: 1 }).config;
  assert(conf.members.length === 3, JSON.stringify(conf));
});

check('rs.status() gives every member an optime; rs.printSecondaryReplicationInfo() reads them', () => {
  set.getDB('app').optimes.insertOne({ _id: 1 }, { writeConcern: { w: 3, wtimeout: 10000 } });
  const st = waitFor('every member with an optime', () => {
    const s = set.getDB('admin').runCommand({ replSetGetStatus: 1 });
    return s.members.every((m) => m.optime && m.optime.ts.t > 0 && m.optimeDate) ? s : null;
  }, 10000);
  assert(st.optimes.lastCommittedOpTime.ts.t > 0, JSON.stringify(st.optimes));
  const primary = st.members.find((m) => m.stateStr === 'PRIMARY');
  st.members.filter((m) => m.stateStr === 'SECONDARY').forEach((m) =>
    assert(m.syncSourceHost === primary.name, JSON.stringify(m)));
  const r = rs.printSecondaryReplicationInfo();
  const text = JSON.stringify(r.value === undefined ? r : r.value);
  assert(text.includes('behind the primary'), text);
});

check('writes through the set reach every member; a secondary serves reads', () => {
  const app = set.getDB('app');
  app.c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
  app.c.updateOne({ _id: 1 }, { $inc: { a: 10 } }, { writeConcern: { w: 3, wtimeout: 10000 } });
  hosts.slice(0, 3).forEach((h) => {
    const m = new Mongo('mongodb://' + h + '/?directConnection=true');
    m.setReadPref('secondaryPreferred');
    const d = waitFor('both documents on ' + h, () => {
      const x = m.getDB('app').c.findOne({ _id: 1 });
      return x && x.a === 11 ? x : null;
    }, 10000);
    assert(m.getDB('app').c.countDocuments({}) === 2, h);
  });
});

check('rs.stepDown() moves the primary', () => {
  const before = primaryOf(set);
  const direct = new Mongo('mongodb://' + before + '/?directConnection=true');
  const r = direct.getDB('admin').runCommand({ replSetStepDown: 30, secondaryCatchUpPeriodSecs: 5 });
  assert(r.ok === 1, JSON.stringify(r));
  waitFor('another primary', () => {
    const p = set.getDB('admin').hello().primary;
    return p && p !== before;
  }, 15000);
});

check('rs.add() of a fourth member, on the primary', () => {
  // The set connection may still take the old primary for the primary until its next
  // check; the helper runs where the user's shell is, on the primary.
  const primary = waitFor('a writable primary', () => {
    const h = new Mongo('mongodb://' + primaryOf(set) + '/?directConnection=true');
    return h.getDB('admin').hello().isWritablePrimary ? h : null;
  }, 15000);
  const conf = primary.getDB('admin').runCommand({ replSetGetConfig: 1 }).config;
  conf.version += 1;
  conf.members.push({ _id: 3, host: hosts[3] });
  const r = primary.getDB('admin').runCommand({ replSetReconfig: conf });
  assert(r.ok === 1, JSON.stringify(r));
  waitFor('four members', () => set.getDB('admin').runCommand({ replSetGetStatus: 1 }).members.length === 4, 15000);
});

finish();
