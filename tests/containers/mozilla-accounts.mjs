// Mozilla accounts' stand-in on the compose network (tests/containers-firefox-sync.test.ts): the
// two documents login fetches from it, over HTTPS, as https://accounts.firefox.com serves them:
// OpenID Connect discovery and the JWKS it names. The test writes them, the certificate and its
// key into the folder mounted at /fxa; each request reads the file again.
//   node /fxa/mozilla-accounts.mjs   (port 8443)
import { readFileSync } from 'node:fs';
import https from 'node:https';

const FILES = { '/.well-known/openid-configuration': '/fxa/openid-configuration.json', '/v1/jwks': '/fxa/jwks.json' };

https
  .createServer({ cert: readFileSync('/fxa/cert.pem'), key: readFileSync('/fxa/key.pem') }, (req, res) => {
    const file = req.method === 'GET' ? FILES[new URL(req.url, 'https://x').pathname] : undefined;
    console.log(JSON.stringify({ method: req.method, url: req.url, served: Boolean(file) }));
    if (!file) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":404,"errno":999,"error":"Not Found"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=3600' }).end(readFileSync(file));
  })
  .listen(8443, '0.0.0.0', () => console.log('mozilla-accounts stand-in: https on 8443'));
