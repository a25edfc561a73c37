// The shell helpers users type, run by a real mongosh against siltd (tests/shell/run.sh).
// Connected to a standalone siltd's `shelltest` database (replset.js covers the `rs`
// helpers). Prints one line per check and "N passed, N failed".

load(__dirname + '/lib.js');

function names(list, key) {
  return list.map((x) => x[key]);
}

db.dropDatabase();
db.orders.insertMany([{ _id: 1, sku: 'a' }, { _id: 2, sku: 'b' }]);
db.orders.createIndex({ sku: 1 }, { unique: true });
db.createCollection('cap', { capped: true, size: 8192, max: 5 });

check('show dbs', () => {
  const r = show('dbs').value;
  const n = names(r, 'name');
  assert(n.includes('shelltest') && n.includes('admin'), JSON.stringify(n));
});

check('show collections', () => {
  const n = names(show('collections').value, 'name');
  assert(n.includes('orders') && n.includes('cap'), JSON.stringify(n));
});

check('db.createUser and show users', () => {
  db.createUser({ user: 'shelluser', pwd: 'pw', roles: ['read'] });
  const u = show('users').value;
  assert(names(u, 'user').includes('shelluser'), JSON.stringify(u));
  assert(db.getUsers().users.length === 1);
  const one = db.getUser('shelluser', { showPrivileges: true });
  assert(one.inheritedPrivileges[0].actions.includes('find'), JSON.stringify(one));
});

check("db.createUser with passwordDigestor: 'client', then db.auth", () => {
  db.createUser({
    user: 'digested',
    pwd: 'pw2',
    roles: ['read'],
    mechanisms: ['SCRAM-SHA-1'],
    passwordDigestor: 'client',
  });
  assert(JSON.stringify(db.getUser('digested').mechanisms) === '["SCRAM-SHA-1"]');
  // This server runs without --auth: logging in proves the stored keys, and changes nothing else.
  const r = db.auth({ user: 'digested', pwd: 'pw2', mechanism: 'SCRAM-SHA-1' });
  assert(r.ok === 1, JSON.stringify(r));
  db.logout();
  db.dropUser('digested');
});

check('show roles', () => {
  const r = show('roles').value;
  const n = names(r, 'role');
  assert(n.includes('read') && n.includes('dbOwner'), JSON.stringify(n));
});

check('db.createRole, db.getRoles, db.getRole, grants, db.dropRole', () => {
  db.createRole({
    role: 'skuReader',
    privileges: [{ resource: { db: 'shelltest', collection: 'orders' }, actions: ['find'] }],
    roles: [],
  });
  const all = db.getRoles({ showPrivileges: true }).roles;
  assert(all.length === 1 && all[0].role === 'skuReader', JSON.stringify(all));
  assert(all[0].privileges[0].resource.collection === 'orders');
  const withBuiltin = db.getRoles({ showBuiltinRoles: true }).roles;
  assert(names(withBuiltin, 'role').includes('readWrite'));
  db.grantRolesToRole('skuReader', ['read']);
  assert(db.getRole('skuReader').inheritedRoles.length === 1);
  db.grantPrivilegesToRole('skuReader', [
    { resource: { db: 'shelltest', collection: 'cap' }, actions: ['find'] },
  ]);
  db.grantRolesToUser('shelluser', ['skuReader']);
  assert(db.getUser('shelluser').roles.length === 2);
  db.revokeRolesFromUser('shelluser', ['skuReader']);
  db.dropRole('skuReader');
  assert(db.getRoles().roles.length === 0);
});

check('db.stats()', () => {
  const s = db.stats();
  assert(s.ok === 1 && Number(s.collections) >= 2 && Number(s.objects) >= 2, JSON.stringify(s));
});

check('db.coll.stats()', () => {
  const s = db.orders.stats();
  assert(s.ok === 1 && Number(s.count) === 2 && s.ns === 'shelltest.orders', JSON.stringify(s));
  assert(Number(s.nindexes) === 2, JSON.stringify(s));
  const c = db.cap.stats();
  assert(c.capped === true && Number(c.max) === 5 && Number(c.maxSize) === 8192, JSON.stringify(c));
});

check('db.serverStatus()', () => {
  const s = db.serverStatus();
  assert(Number(s.network.bytesIn) > 0 && Number(s.network.numRequests) > 0, JSON.stringify(s.network));
  assert(s.connections.current >= 1 && s.opcounters && s.mem.resident > 0);
  assert(s.globalLock.activeClients.total >= 1);
});

check('db.setLogLevel and db.getLogComponents', () => {
  db.setLogLevel(1);
  assert(db.getLogComponents().verbosity === 1);
  db.setLogLevel(0);
  assert(db.getLogComponents().verbosity === 0);
});

check('connectionStatus with showPrivileges (Compass)', () => {
  const r = db.runCommand({ connectionStatus: 1, showPrivileges: true });
  assert(r.ok === 1 && Array.isArray(r.authInfo.authenticatedUserPrivileges), JSON.stringify(r));
});

check('db.currentOp(), db.hostInfo(), db.version(), db.getCollectionInfos()', () => {
  assert(db.currentOp().inprog.length >= 1);
  assert(db.hostInfo().system);
  assert(db.version().startsWith('7.'));
  const info = db.getCollectionInfos({ name: 'orders' });
  assert(info.length === 1 && info[0].idIndex.name === '_id_');
});

check('db.orders.getIndexes()', () => {
  const ix = db.orders.getIndexes();
  assert(JSON.stringify(names(ix, 'name')) === JSON.stringify(['_id_', 'sku_1']));
});

db.dropUser('shelluser');
db.dropDatabase();
finish();
