// Name and version of this build (package.json), for every /__version__.
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { name: string; version: string };

export const VERSION_INFO: Readonly<{ name: string; version: string }> = Object.freeze({ name: pkg.name, version: pkg.version });
