// Starts an HTTP server listening, as a promise: resolves with the bound port
// (so port 0 works), rejects on EADDRINUSE and the like.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';

export function listen(server: NetServer, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** The URL to show for a server bound to `host`: a wildcard address is reached on loopback. */
export function localUrl(host: string, port: number): string {
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${port}`;
}

/**
 * Closes `server`: stops accepting at once; requests being answered get up to
 * `graceMs` to finish (their answers say `Connection: close`, so no client
 * sends another on that connection), then every connection left is cut.
 */
export type CloseServer = (graceMs?: number) => Promise<void>;

/**
 * How `server` is closed. Node's close() ends the idle connections, but one
 * busy at that moment stays open after its answer until its keep-alive
 * timeout, and closeAllConnections() cuts requests mid-answer: this counts the
 * requests being answered, to cut only once they are done.
 */
export function serverCloser(server: Server): CloseServer {
  const answering = new Set<ServerResponse>();
  let closing = false;
  let answered: (() => void) | undefined;
  server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    answering.add(res);
    if (closing) endAfter(res);
    res.once('close', () => {
      answering.delete(res);
      if (answering.size === 0) answered?.();
    });
  });
  return (graceMs = 0) =>
    new Promise<void>((resolve) => {
      closing = true;
      server.close(() => resolve());
      let timer: NodeJS.Timeout | undefined;
      const cut = (): void => {
        clearTimeout(timer);
        answered = undefined;
        server.closeAllConnections();
      };
      if (graceMs <= 0 || answering.size === 0) return cut();
      for (const res of answering) endAfter(res);
      answered = cut;
      timer = setTimeout(cut, graceMs);
    });
}

/** The connection ends with this answer (unless its head has gone out already). */
function endAfter(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('Connection', 'close');
}
