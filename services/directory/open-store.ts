// Opens the directory store STORE_URL names. Apart from the interface (store.ts),
// so the implementations import the interface and nothing imports back in a
// cycle. Imported on demand: a SQLite setup never loads the MongoDB driver.
import type { UserStore } from './store.js';

/** `sqlite:<path>` or `mongodb://…`. */
export async function openUserStore(storeUrl: string): Promise<UserStore> {
  if (storeUrl.startsWith('sqlite:')) {
    const { SqliteUserStore } = await import('./store-sqlite.js');
    return SqliteUserStore.open(storeUrl.slice('sqlite:'.length));
  }
  const { MongoUserStore } = await import('./store-mongo.js');
  return MongoUserStore.open(storeUrl);
}
