// The login suite with directory and nodeassign on MongoDB: at MONGODB_URL
// (the compatible server npm test starts) and on a real mongo:7 through
// testcontainers; a fresh database for each system the suite starts.
import { after } from 'node:test';
import { loginSuite } from './login.suite.js';
import { containerMongo, envMongo, freshDatabase } from './support/mongo.js';

const targets = [envMongo(), await containerMongo()];
after(() => Promise.all(targets.map((t) => t.stop())));

for (const target of targets) {
  loginSuite(target.name, async () => (target.url ? freshDatabase(target, 'login') : null), () => target.skipReason);
}
