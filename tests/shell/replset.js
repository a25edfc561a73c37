// The `rs` helpers, run by a real mongosh against `siltd --replSet rs0` (tests/shell/run.sh).
load(__dirname + '/lib.js');

check('rs.status()', () => {
  const st = rs.status();
  assert(st.ok === 1 && st.set === 'rs0', JSON.stringify(st));
  assert(st.members.length === 1 && st.members[0].stateStr === 'PRIMARY', JSON.stringify(st.members));
});

check('rs.conf()', () => {
  const c = rs.conf();
  assert(c._id === 'rs0' && c.members.length === 1, JSON.stringify(c));
});

check('rs.hello() and db.hello()', () => {
  assert(rs.hello().setName === 'rs0');
  assert(db.hello().isWritablePrimary === true);
});

check('default read and write concerns', () => {
  const r = db.adminCommand({ getDefaultRWConcern: 1 });
  assert(r.ok === 1 && r.defaultWriteConcernSource === 'implicit', JSON.stringify(r));
});

check('a transaction through the shell', () => {
  const s = db.getMongo().startSession();
  const c = s.getDatabase('shellrs').t;
  s.startTransaction();
  c.insertOne({ _id: 1 });
  s.commitTransaction();
  assert(db.getSiblingDB('shellrs').t.countDocuments({}) === 1);
  db.getSiblingDB('shellrs').dropDatabase();
});

finish();
