#!/usr/bin/env node
/**
 * A round-robin HTTP load balancer for trying several `ditto-server` replicas behind one
 * address (the scale-out e2e spec and `npm run bench:scale`). Each request, not each
 * connection, goes to the next upstream, so one browser's keep-alive connection spreads its
 * uploads over every replica. Bodies stream both ways. A request whose upstream refuses
 * the connection goes to the next upstream (as does a failed GET or HEAD, safe to repeat);
 * when none is left, or an upstream fails mid-request, the answer is a 502 `{"error"}`.
 *
 *   node scripts/lb.mjs --port 0 --to http://127.0.0.1:A,http://127.0.0.1:B
 *
 * prints `listening on http://127.0.0.1:PORT` once it accepts connections.
 */
import http from 'node:http';
import { fileURLToPath } from 'node:url';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
]);

function forwardHeaders(headers) {
  const out = {};
  for (const [k, v] of Object.entries(headers)) if (!HOP_BY_HOP.has(k)) out[k] = v;
  return out;
}

/**
 * Starts the balancer on 127.0.0.1:`port` (0 = any free port) in front of `upstreams`
 * (base URLs). Resolves to `{ url, server, close() }` once it listens.
 */
export function startBalancer(upstreams, port = 0) {
  if (upstreams.length === 0) throw new Error('no upstreams');
  const targets = upstreams.map((u) => new URL(u));
  // One keep-alive pool per balancer, so requests do not pay a TCP handshake each.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  let next = 0;

  const server = http.createServer((req, res) => {
    const retryable = req.method === 'GET' || req.method === 'HEAD';
    const first = next;
    next = (next + 1) % targets.length;
    let tries = 0;

    const fail = (status, message) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const body = JSON.stringify({ error: message });
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };

    const attempt = () => {
      const target = targets[(first + tries) % targets.length];
      tries++;
      const up = http.request(
        {
          protocol: target.protocol,
          hostname: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...forwardHeaders(req.headers), host: target.host },
          agent,
        },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardHeaders(upRes.headers));
          upRes.pipe(res);
          upRes.on('error', () => res.destroy());
        },
      );
      // The request body flows only once the upstream has accepted the connection, so a
      // request to a dead upstream has consumed nothing and can go to the next one whole.
      let connected = false;
      const send = () => {
        connected = true;
        if (!retryable) req.pipe(up);
      };
      up.on('socket', (s) => {
        if (s.connecting) s.once('connect', send);
        else send();
      });
      up.on('error', (err) => {
        // GET and HEAD change nothing, so a failed one may be repeated as long as nothing of
        // its answer has gone out yet; any other only if it never reached the upstream.
        if ((retryable || !connected) && !res.headersSent && tries < targets.length) {
          attempt();
          return;
        }
        fail(502, `upstream ${target.origin}: ${err.message}`);
      });
      res.on('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      if (retryable) up.end();
    };
    attempt();
  });
  // Large uploads and slow restores may take long; the servers enforce their own limits.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  server.keepAliveTimeout = 30_000;

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: p } = server.address();
      resolve({
        url: `http://127.0.0.1:${p}`,
        server,
        close: () =>
          new Promise((r) => {
            server.close(() => r());
            server.closeAllConnections();
            agent.destroy();
          }),
      });
    });
  });
}

function parseArgs(argv) {
  let port = 0;
  let to = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--port') port = Number(argv[++i]);
    else if (argv[i] === '--to') to = argv[++i].split(',').filter(Boolean);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!Number.isInteger(port) || to.length === 0) {
    throw new Error('usage: node scripts/lb.mjs --port PORT --to URL[,URL...]');
  }
  return { port, to };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    const { port, to } = parseArgs(process.argv.slice(2));
    const lb = await startBalancer(to, port);
    console.log(`listening on ${lb.url}`);
    for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => lb.close().then(() => process.exit(0)));
  } catch (e) {
    console.error(`lb.mjs: ${e.message}`);
    process.exit(2);
  }
}
