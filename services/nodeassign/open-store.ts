// Opens the nodeassign store STORE_URL names. Apart from the interface (store.ts),
// so the implementations import the interface and nothing imports back in a
// cycle. Imported on demand: a SQLite setup never loads the MongoDB driver.
import type { NodeStore } from './store.js';

/** `sqlite:<path>` or `mongodb://…`. */
export async function openNodeStore(storeUrl: string): Promise<NodeStore> {
  if (storeUrl.startsWith('sqlite:')) {
    const { SqliteNodeStore } = await import('./store-sqlite.js');
    return SqliteNodeStore.open(storeUrl.slice('sqlite:'.length));
  }
  const { MongoNodeStore } = await import('./store-mongo.js');
  return MongoNodeStore.open(storeUrl);
}
